"""md5 mode: a CRC-32 of each tensor's bytes in the element of its pkl line the original leaves empty,
so that two runs on the same device compare by equality."""

from __future__ import annotations

import contextlib
import zlib
from contextlib import AbstractContextManager
from pathlib import Path

import numpy as np
import torch

from dumper import PrecisionDebugger
from dumper.faults import replaced
from ptdbg_tui.compare.diagnosis.findings import NONDETERMINISTIC
from ptdbg_tui.compare.model import Status
from ptdbg_tui.compare.reasons import ChecksumsDifferBut, Fixed
from ptdbg_tui.compare.report.words import finding, summary_text
from ptdbg_tui.engine.batch import Outcomes, compare_dumps
from ptdbg_tui.engine.narrow import narrowing_of, write_narrowing
from ptdbg_tui.formats.layout import RankDump, discover
from ptdbg_tui.formats.pkl import read_pkl

from .conftest import make_inputs, train_step


def _dump(path: Path, nudge: bool = False, fault: AbstractContextManager[object] | None = None) -> RankDump:
    model, x, target = make_inputs()
    debugger = PrecisionDebugger(dump_path=str(path))
    debugger.configure_hook(summary_mode="md5")
    nudged = replaced(torch, "relu", lambda relu: lambda *a, **k: relu(*a, **k) * 1.001)
    with fault or (nudged if nudge else contextlib.nullcontext()):
        debugger.start()
        train_step(model, x, target)
        debugger.stop()
    (dump,) = discover(path)
    return dump


def test_each_tensor_line_carries_the_crc_of_its_bytes_and_no_npy_is_written(tmp_path: Path) -> None:
    dump = _dump(tmp_path)
    assert not dump.has_tensors
    lines = dump.records.read_text().splitlines()
    relu = next(ln for ln in lines if "Torch_relu_0_forward_output" in ln)
    assert relu.startswith('["Torch_relu_0_forward_output", 0, ["')
    tensors = {r.name: r for r in read_pkl(dump.records).tensors}
    _, x, _ = make_inputs()
    expected = f"{zlib.crc32(np.ascontiguousarray(x.numpy())):08x}"
    assert tensors["Functional_conv2d_0_forward_input.0"].md5 == expected
    assert all(r.md5 is not None for r in tensors.values() if not r.is_scalar)
    assert tensors["Functional_conv2d_0_forward_input.6"].md5 is None  # a Python value: groups=1


def test_bf16_is_checksummed_as_its_own_bytes(tmp_path: Path) -> None:
    t = torch.tensor([1.0, 2.5, -3.0], dtype=torch.bfloat16)
    debugger = PrecisionDebugger(dump_path=str(tmp_path))
    debugger.configure_hook(summary_mode="md5", mode="all")
    debugger.start()
    torch.neg(t)
    debugger.stop()
    (dump,) = discover(tmp_path)
    (rec,) = [r for r in read_pkl(dump.records).tensors if r.name == "Torch_neg_0_forward_input.0"]
    assert rec.md5 == f"{zlib.crc32(t.view(torch.int16).numpy()):08x}"


def test_two_identical_runs_compare_all_equal(tmp_path: Path) -> None:
    (outcome,) = compare_dumps(_dump(tmp_path / "a").records, _dump(tmp_path / "b").records, jobs=1)
    assert outcome.summary
    counts = outcome.counts()
    assert counts[Status.PASS] > 60 and counts[Status.PASS] == len(outcome.rows)
    assert all(r.result.reason is Fixed.CHECKSUMS_EQUAL for r in outcome.rows if not r.npu.is_scalar)


def test_a_nudged_op_differs_there_and_downstream(tmp_path: Path) -> None:
    npu, bench = _dump(tmp_path / "npu", nudge=True), _dump(tmp_path / "bench")
    (outcome,) = compare_dumps(npu.records, bench.records, jobs=1)
    rows = sorted((r for r in outcome.rows if not r.npu.is_scalar), key=lambda r: r.npu.order)
    first = next(i for i, r in enumerate(rows) if r.status is not Status.PASS)
    assert rows[first].name == "Torch_relu_0_forward_output"
    assert all(r.status is Status.PASS for r in rows[:first])  # conv, batch norm: untouched
    status = {r.name: r.status for r in rows}
    downstream = [
        "Tensor_mean_0",
        "Tensor_transpose_0",
        "VF_lstm_0",
        "Tensor___getitem___0",
        "Functional_linear_0",
        "Functional_softmax_0",
        "Torch_log_0",
        "Functional_nll_loss_0",
    ]
    assert all(
        status[n] is not Status.PASS
        for n in status
        if n.startswith(tuple(f"{c}_forward_output" for c in downstream))
    )
    assert status["Torch_zeros_0_forward_output"] is Status.PASS  # the LSTM's initial state: unaffected
    assert status["Functional_linear_0_backward_output.1"] is not Status.PASS


def test_an_op_that_is_not_deterministic_is_named_by_its_checksums(tmp_path: Path) -> None:
    """One run's relu comes out one ulp off (as a kernel that sums in another order would): its
    statistics still agree, so its rows only warn; the checksums show its inputs bit-equal and its
    output not, and that call is the culprit."""
    ulp = replaced(torch, "relu", lambda relu: lambda *a, **k: relu(*a, **k) * (1 + 2.0**-23))
    npu = _dump(tmp_path / "npu", fault=ulp)
    (outcome,) = compare_dumps(npu.records, _dump(tmp_path / "bench").records, jobs=1)
    relu = next(r for r in outcome.rows if r.name == "Torch_relu_0_forward_output")
    assert relu.status is Status.WARN and isinstance(relu.result.reason, ChecksumsDifferBut)
    assert not [r for r in outcome.rows if r.status is Status.FAIL]  # statistics alone: nothing wrong
    culprit = outcome.diagnosis.culprit
    assert (culprit.call, culprit.kind) == ("Torch_relu_0_forward", NONDETERMINISTIC)
    assert finding(culprit).startswith(
        "its output differs from bit-equal inputs: the runs compute it "
        "differently (on one device: not deterministic) — "
        "Torch_relu_0_forward_output: checksum "
    )
    # downstream calls get different inputs: they are not suspects of their own
    assert [s.call for s in outcome.diagnosis.suspects] == ["Torch_relu_0_forward"]
    # the report says what the pair was compared by: checksums, not statistics alone
    assert summary_text(outcome).startswith(f"{outcome.label} (checksums): ")
    # narrowing to it says that a tensor dump may not show it again, and how to see it (a review: the
    # narrowed tensor dump of a one-ulp difference gave an all-clear)
    written = write_narrowing(narrowing_of(Outcomes([outcome])), tmp_path / "narrow.json")
    assert any("add --summary-mode md5 to both dump commands" in line for line in written.lines)


def test_identical_runs_have_no_suspect(tmp_path: Path) -> None:
    (outcome,) = compare_dumps(_dump(tmp_path / "a").records, _dump(tmp_path / "b").records, jobs=1)
    assert not outcome.diagnosis.suspects and outcome.diagnosis.all_clear


def test_an_overwritten_input_that_msprobe_flags_is_noted_in_the_msprobe_csv(tmp_path: Path) -> None:
    """An in-place initialiser's input (uninitialised memory, here zeros against ones) is no data: we
    pass it; msprobe's rule flags its differing checksum, and the row's Err_message says why we pass."""
    import csv

    from ptdbg_tui.cli import main as tui_main

    for side, fill in (("npu", 0.0), ("bench", 1.0)):
        t = torch.full((3,), fill)
        debugger = PrecisionDebugger(dump_path=str(tmp_path / side))
        debugger.configure_hook(summary_mode="md5", mode="all")
        torch.manual_seed(0)
        debugger.start()
        t.uniform_()
        debugger.stop()
    out = tmp_path / "out"
    args = ["compare", str(tmp_path / "npu"), str(tmp_path / "bench"), "-o", str(out), "--format", "msprobe"]
    assert tui_main([*args, "--jobs", "1", "--no-progress"]) == 0
    (path,) = out.glob("compare_result_*.csv")
    with path.open(newline="") as f:
        row = next(r for r in csv.DictReader(f) if r["NPU Name"] == "Tensor_uniform__0_forward_input.0")
    assert row["Result"] == "error"  # msprobe's own verdict stays
    assert (
        "ptdbg-tui: not compared: Tensor_uniform__0_forward overwrites this tensor in place"
        in row["Err_message"]
    )
