"""``--format msprobe`` on dumps of the project's dumper: the metric cells of a Python value and of an
empty tensor are msprobe's (``unsupported``, as docs/compare.md says)."""

from __future__ import annotations

import csv
from pathlib import Path

import torch

from dumper import PrecisionDebugger
from ptdbg_tui.cli import main


def _dump(path: Path, scale: float) -> None:
    debugger = PrecisionDebugger(dump_path=str(path), hook_name="dump", step=[0])
    debugger.start()
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    torch.mul(x, scale)  # input.1: a Python float, saved by our dumper as a 0-d npy
    torch.tanh(torch.zeros(0, 3))  # an empty tensor
    debugger.stop()


def test_a_python_value_gets_unsupported_metrics_as_msprobe_writes_them(tmp_path: Path, capsys) -> None:
    _dump(tmp_path / "npu", 2.0)
    _dump(tmp_path / "bench", 3.0)
    argv = ["compare", str(tmp_path / "npu"), str(tmp_path / "bench"), "-o", str(tmp_path / "out")]
    assert main([*argv, "--format", "msprobe", "--jobs", "1", "--no-progress"]) == 0
    (path,) = (tmp_path / "out").glob("compare_result_*.csv")
    rows = {r["NPU Name"]: r for r in csv.DictReader(path.open())}
    value = rows["Torch_mul_0_forward_input.1"]
    assert value["NPU Dtype"] == "<class 'float'>"
    metrics = ["Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr"]
    metrics += ["One Thousandth Err Ratio", "Five Thousandths Err Ratio"]
    assert [value[m] for m in metrics] == ["unsupported"] * 6
    empty = rows["Torch_tanh_0_forward_output"]
    assert empty["NPU Tensor Shape"] == "[0, 3]"
    assert [empty[m] for m in metrics] == ["unsupported"] * 6
    # a tensor keeps its numbers
    assert rows["Torch_mul_0_forward_output"]["MaxAbsErr"] == "11.0"
