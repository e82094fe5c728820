"""Infinite values recorded as arguments: the same infinity on both sides is the same argument."""

from __future__ import annotations

from pathlib import Path

import torch

from dumper import PrecisionDebugger
from ptdbg_tui.cli import main


def _dump(path: Path, fill: float) -> None:
    debugger = PrecisionDebugger(dump_path=str(path), hook_name="dump", step=[0])
    debugger.start()
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4) / 7
    x[1, 1] = fill  # Tensor.__setitem__ with a Python float argument
    torch.add(x, fill)
    debugger.stop()


def _report(tmp_path: Path, capsys, npu_fill: float, bench_fill: float) -> str:
    _dump(tmp_path / "npu", npu_fill)
    _dump(tmp_path / "bench", bench_fill)
    argv = ["compare", str(tmp_path / "npu"), str(tmp_path / "bench"), "-o", str(tmp_path / "out")]
    assert main([*argv, "--jobs", "1", "--no-progress"]) == 0
    return capsys.readouterr().out


def test_the_same_infinity_on_both_sides_is_not_a_different_argument(tmp_path: Path, capsys) -> None:
    out = _report(tmp_path, capsys, float("inf"), float("inf"))
    assert "Culprit:" not in out and "inf against inf" not in out
    assert "No operator introduces an error beyond rounding" in out


def test_infinities_of_opposite_sign_are_different_arguments(tmp_path: Path, capsys) -> None:
    out = _report(tmp_path, capsys, float("inf"), float("-inf"))
    assert "the runs pass different arguments to it — input.2: inf against -inf" in out
