"""The program (``python -m ptdbg_tui``) after a headless compare leaves its memory to the operating
system (:func:`ptdbg_tui.cli.run`): what it printed and wrote is all there, with its exit status."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
