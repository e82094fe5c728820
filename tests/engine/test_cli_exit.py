"""The program (``python -m ptdbg_tui``) after a headless compare, or once the app has closed, leaves its
memory to the operating system (:func:`ptdbg_tui.cli.run`): what it printed and wrote is all there, with
its exit status."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ptdbg_tui import cli
from ptdbg_tui.app.app import PtdbgApp
from ptdbg_tui.engine.live.loop import LiveEngine

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _program(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ptdbg_tui", *args], capture_output=True, text=True, timeout=120
    )


def test_a_compare_prints_writes_and_exits_with_its_status(tmp_path: Path) -> None:
    done = _program(
        "compare",
        str(FIXTURES / "mixed/npu"),
        str(FIXTURES / "mixed/bench"),
        "-o",
        str(tmp_path),
        "--no-progress",
    )
    assert done.returncode == 0, done.stderr
    csvs = list(tmp_path.glob("compare_result_*.csv"))
    assert len(csvs) == 1 and f"CSV: {csvs[0]}" in done.stdout
    assert done.stdout.rstrip().splitlines()[-1].strip()  # the report's last line came through
    assert list(tmp_path.glob("advisor_*.txt")) and list(tmp_path.glob("suspects_*.csv"))


def test_a_compare_that_fails_says_why_with_its_status(tmp_path: Path) -> None:
    done = _program("compare", str(tmp_path / "none"), str(FIXTURES / "mixed/bench"), "--no-progress")
    assert done.returncode == 2 and "error" in done.stderr


class _Exited(Exception):
    def __init__(self, code: int) -> None:
        self.code = code


def _run_app(monkeypatch: pytest.MonkeyPatch, engine_ends: bool) -> tuple[list[object], int | None]:
    """``ptdbg-tui NPU BENCH`` through :func:`~ptdbg_tui.cli.run`, the app's run a no-op: what it left
    to the operating system, and the status it left with at once (``None``: the usual exit)."""
    shown: list[object] = []
    monkeypatch.setattr(PtdbgApp, "run", lambda self, *a, **kw: shown.append(self))
    monkeypatch.setattr(LiveEngine, "alive", property(lambda self: not engine_ends))
    monkeypatch.setattr(cli, "_LEFT", None)
    dumps = [str(FIXTURES / "mixed/npu"), str(FIXTURES / "mixed/bench")]
    monkeypatch.setattr(sys, "argv", ["ptdbg-tui", *dumps])

    def exited(code: int) -> None:
        raise _Exited(code)

    monkeypatch.setattr(os, "_exit", exited)
    try:
        cli.run()
    except _Exited as e:
        assert cli._LEFT is not None
        return [x for x in cli._LEFT if x in shown], e.code
    except SystemExit as e:
        assert e.code == 0
        return [], None
    raise AssertionError("run() returned")


def test_the_app_leaves_what_it_showed_to_the_operating_system(monkeypatch: pytest.MonkeyPatch) -> None:
    """Freeing an LLM pair's rows one by one kept the terminal 3 s after ``q``."""
    left, code = _run_app(monkeypatch, engine_ends=True)
    assert code == 0 and len(left) == 1


def test_an_app_whose_engine_still_runs_exits_the_usual_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its thread did not stop in time: the usual exit waits for it (it closes the worker processes)."""
    assert _run_app(monkeypatch, engine_ends=False) == ([], None)
