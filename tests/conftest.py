"""What every test session shares."""

from __future__ import annotations

import compileall
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def pytest_configure(config: pytest.Config) -> None:
    """The project's bytecode, written once before the workers start. Where PYTHONDONTWRITEBYTECODE is
    set (CI images, this project's machines), none is ever written, and each of the suite's Python
    processes — xdist workers, CLI runs, replay and pool workers — compiled the whole package again
    (~0.6 s of CPU each). Python reads bytecode that exists whatever that variable says."""
    for package in ("ptdbg_tui", "dumper"):
        compileall.compile_dir(ROOT / package, quiet=2)
