"""Dumps of the project's dumper go through the project's compare with no special case."""

from __future__ import annotations

import contextlib
import csv
import math
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from dumper import PrecisionDebugger
from dumper.faults import replaced
from ptdbg_tui.cli import main
from ptdbg_tui.compare.diagnosis.findings import ARGUMENTS, NOT_A_KERNEL, Diagnosis
from ptdbg_tui.compare.diagnosis.propagation import BENCH_NAN
from ptdbg_tui.compare.model import Status
from ptdbg_tui.compare.report.words import call_evidence_text, note_texts, verdict_text
from ptdbg_tui.engine.batch import compare_dumps
from ptdbg_tui.engine.live.loop import LiveEngine
from ptdbg_tui.engine.live.options import LiveOptions
from ptdbg_tui.formats.layout import RankDump, discover


def test_the_same_model_twice_compares_all_pass(dump_model) -> None:
    a, b = dump_model("a"), dump_model("b")
    (outcome,) = compare_dumps(a.records, b.records, jobs=1)
    assert outcome.stack_mode and not outcome.summary
    statuses = outcome.counts()
    assert statuses[Status.FAIL] == statuses[Status.UNMATCHED] == statuses[Status.ERROR] == 0
    assert statuses[Status.PASS] > 60
    assert outcome.diagnosis.suspects == []


def test_a_wrong_lstm_backward_is_flagged_at_its_backward_output(dump_model) -> None:
    bench, npu = dump_model("bench"), dump_model("npu", fault=True)
    (outcome,) = compare_dumps(npu.records, bench.records, jobs=1)
    assert [s.call for s in outcome.diagnosis.suspects] == ["VF_lstm_0_backward"]
    (culprit,) = outcome.diagnosis.suspects
    by_name = {row.name: row.status for row in culprit.rows}
    assert by_name["VF_lstm_0_backward_input.0"] is Status.PASS
    assert by_name["VF_lstm_0_backward_output.0"] is Status.FAIL
    assert culprit.stack is not None and culprit.stack.frames[0][3] == "out, _ = self.lstm(seq)"
    forward = [row for row in outcome.rows if row.npu and row.npu.entry.direction == "forward"]
    assert all(row.status is Status.PASS for row in forward)  # the forward is exact


def test_summary_only_dumps_compare_on_statistics(dump_model) -> None:
    a, b = dump_model("a", summary_only=True), dump_model("b", summary_only=True)
    assert not a.has_tensors and not b.has_tensors
    (outcome,) = compare_dumps(a.records, b.records, jobs=1)
    assert outcome.summary and outcome.counts()[Status.FAIL] == 0


def test_the_report_names_the_culprit_s_module_and_source_line(dump_model, tmp_path, capsys) -> None:
    """What the app's bar shows: the module (``lstm · LSTM``) and the source line, after the Culprit line."""
    bench, npu = dump_model("bench"), dump_model("npu", fault=True)
    assert (
        main(
            [
                "compare",
                str(npu.records),
                str(bench.records),
                "-o",
                str(tmp_path / "out"),
                "--jobs",
                "1",
                "--no-progress",
            ]
        )
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    (at,) = [i for i, line in enumerate(lines) if line.startswith("  Culprit: VF_lstm_0_backward (backward)")]
    assert lines[at + 1] == "    module: lstm · LSTM"
    # the call site's source line (here pytest's: this folder's name is a dump tool's path mark)
    assert lines[at + 2].startswith("    source: ")


class GeluNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up, self.down = nn.Linear(8, 16), nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(x)))


def _nan_first_row(gelu: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """GELU whose first row is NaN (added, so that its gradient is the true one)."""

    def bad(x: torch.Tensor, *args: object, **kwargs: object) -> torch.Tensor:
        out = gelu(x, *args, **kwargs)
        hole = torch.zeros_like(out)
        hole[0] = math.nan
        return out + hole

    return bad


def _dump(
    path: Path, net: type[nn.Module], x_shape: tuple[int, ...], fault: AbstractContextManager
) -> RankDump:
    """One training step of ``net`` on a random ``x``, with ``fault`` installed."""
    torch.manual_seed(0)
    model, x = net(), torch.randn(x_shape)
    debugger = PrecisionDebugger(dump_path=str(path), hook_name="dump", step=[0])
    with fault:
        debugger.start()
        model(x).sum().backward()
        debugger.stop()
    debugger.step()
    (dump,) = discover(path)
    return dump


def _dump_gelu_net(path: Path, nan_gelu: bool) -> RankDump:
    fault = replaced(F, "gelu", _nan_first_row) if nan_gelu else contextlib.nullcontext()
    return _dump(path, GeluNet, (4, 8), fault)


@pytest.mark.parametrize("summary", [True, False], ids=["statistics", "tensors"])
def test_a_bench_that_gains_nan_is_said_so_and_nothing_after_it_is_blamed(
    tmp_path: Path, summary: bool
) -> None:
    """The bench's GELU gains NaN from finite inputs, the NPU's is finite: the bench is no reference
    there. Before, statistics named the sum after it "all zeros on the bench and not on the NPU", and
    tensors said the GELU's "inputs already carry the error"."""
    npu, bench = _dump_gelu_net(tmp_path / "npu", False), _dump_gelu_net(tmp_path / "bench", True)
    (outcome,) = compare_dumps(npu.records, bench.records, summary=summary, jobs=1)
    d = outcome.diagnosis
    assert outcome.summary == summary
    assert [(s.call, s.kind) for s in d.suspects] == [("Functional_gelu_0_forward", BENCH_NAN)]
    assert verdict_text(d).startswith(
        "Culprit: Functional_gelu_0_forward (forward): the bench output holds NaN/Inf from finite inputs: "
        "the bench run is no reference here — Functional_gelu_0_forward_output holds NaN/Inf on the bench"
    )
    texts = [verdict_text(d), *(call_evidence_text(e) for e in d.calls.values())]
    assert not any("all zeros" in t for t in texts), texts
    # the calls after it that take the bench's NaN are not judged, and say why
    assert "the bench is no reference here" in call_evidence_text(d.calls["Functional_linear_1_forward"])


class TransposeNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.transpose(self.lin(x), 0, 1)


@pytest.mark.parametrize("summary", [True, False], ids=["statistics", "tensors"])
def test_an_output_whose_shape_differs_from_matching_inputs_is_said_so(
    tmp_path: Path, summary: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """The NPU's transpose returns its input unchanged: [2, 3] where the bench's is [3, 2], from the same
    inputs. Before, the report said the call was not judged ("outputs not compared"). The CSV row keeps
    the original's words."""
    keep = replaced(torch, "transpose", lambda _: lambda t, *args: t.clone())
    npu = _dump(tmp_path / "npu", TransposeNet, (2, 3), keep)
    bench = _dump(tmp_path / "bench", TransposeNet, (2, 3), contextlib.nullcontext())
    out = tmp_path / "out"
    argv = ["compare", str(npu.records), str(bench.records), "-o", str(out), "--jobs", "1", "--no-progress"]
    assert main(argv + (["--summary"] if summary else [])) == 0
    lines = capsys.readouterr().out.splitlines()
    assert (
        "  Culprit: Torch_transpose_0_forward (forward): output shape differs — "
        "Torch_transpose_0_forward_output: NPU [2, 3] vs bench [3, 2]; the inputs' shapes agree; called at "
        in "\n".join(lines)
    ), lines
    assert not any("suspect 2" in line for line in lines)  # what follows from it is inherited
    (found,) = out.glob("compare_result_*.csv")
    with open(found, newline="") as f:
        row = next(r for r in csv.DictReader(f) if r["NPU Name"] == "Torch_transpose_0_forward_output")
    assert (row["NPU Tensor Shape"], row["Bench Tensor Shape"]) == ("[2, 3]", "[3, 2]")
    if summary:  # the statistics' differences, as the original computes them whatever the shapes
        assert row["Max diff"] == "0.0"
    else:
        assert row["Cosine"] == row["MaxAbsErr"] == "shape unmatched"
        assert row["Accuracy Reached or Not"] == "Unmatched"
        assert row["Err_message"] == "Shape of NPU and bench Tensor do not match. Skipped."


def test_the_report_names_the_model_when_the_culprit_runs_in_its_own_forward(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """GeluNet calls F.gelu in its own forward, in no submodule: the module line names the model (before,
    the module sidecar recorded no chain for it and the report had no module line)."""
    off = replaced(F, "gelu", lambda gelu: lambda x, *args, **kwargs: gelu(x, *args, **kwargs) * 1.01)
    npu = _dump(tmp_path / "npu", GeluNet, (4, 8), off)
    bench = _dump(tmp_path / "bench", GeluNet, (4, 8), contextlib.nullcontext())
    out = str(tmp_path / "out")
    assert (
        main(["compare", str(npu.records), str(bench.records), "-o", out, "--jobs", "1", "--no-progress"])
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    (at,) = [
        i for i, line in enumerate(lines) if line.startswith("  Culprit: Functional_gelu_0_forward (forward)")
    ]
    assert lines[at + 1] == "    module: (model) · GeluNet"
    # narrowing the next dump to it: the call (its module is the whole model)
    assert main(["narrow", str(npu.records), str(bench.records), "-o", str(tmp_path / "narrow.json")]) == 0
    assert (
        "Narrowed to call Functional_gelu_0: the culprit Functional_gelu_0_forward, which ran in the model's "
        "own forward (GeluNet)." in capsys.readouterr().out
    )


class ApproximateGeluNet(GeluNet):
    approximate = "none"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(x), approximate=self.approximate))


class TanhGeluNet(ApproximateGeluNet):
    approximate = "tanh"


def _live_diagnosis(npu: RankDump, bench: RankDump, summary: bool) -> Diagnosis:
    """The last diagnosis the app's engine sends of a static pair."""
    judged: list[Diagnosis] = []
    done = threading.Event()

    def taken() -> None:  # each notification, as the app takes it
        update = engine.outbox.take()
        if update is None:
            return
        judged.extend(d.diagnosis for d in update.pairs.values() if d.diagnosis)
        if update.progress and update.progress.done:
            done.set()

    engine = LiveEngine(npu.records, bench.records, LiveOptions(watch=False, summary=summary), taken)
    engine.start()
    try:
        assert done.wait(30), "the engine did not finish"
    finally:
        engine.stop()
    return judged[-1]


@pytest.mark.parametrize("summary", [True, False], ids=["statistics", "tensors"])
def test_a_keyword_argument_that_differs_is_said_without_a_replay(
    tmp_path: Path, summary: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """The NPU run's script calls F.gelu(x, approximate="tanh"), the bench's approximate="none": the
    scripts differ, no kernel is wrong. The pkl records positional arguments only; the call sidecars
    hold the keyword. Before, the two dumps named the GELU a call that introduces error (only --replay
    said otherwise)."""
    nocontext = contextlib.nullcontext()
    npu = _dump(tmp_path / "npu", TanhGeluNet, (4, 8), nocontext)
    bench = _dump(tmp_path / "bench", ApproximateGeluNet, (4, 8), nocontext)
    (outcome,) = compare_dumps(npu.records, bench.records, summary=summary, jobs=1)
    d = outcome.diagnosis
    assert d.culprit is not None
    assert (d.culprit.call, d.culprit.kind) == ("Functional_gelu_0_forward", ARGUMENTS)
    assert verdict_text(d).startswith(
        "Culprit: Functional_gelu_0_forward (forward): the runs pass different arguments to it — "
        "approximate: 'tanh' against 'none'"
    )
    assert all(s.kind in NOT_A_KERNEL for s in d.suspects), [(s.call, s.kind) for s in d.suspects]
    # the app's engine says the same
    live = _live_diagnosis(npu, bench, summary)
    assert (live.culprit.call, live.culprit.kind) == ("Functional_gelu_0_forward", ARGUMENTS)
    # the same dumps without the bench's sidecar: the two dumps alone blame the GELU's kernel
    for sidecar in Path(bench.records).parent.glob("*.calls.jsonl"):
        sidecar.unlink()
    (alone,) = compare_dumps(npu.records, bench.records, summary=summary, jobs=1)
    assert alone.diagnosis.culprit.call == "Functional_gelu_0_forward"
    assert alone.diagnosis.culprit.kind not in NOT_A_KERNEL
    # a sidecar that cannot be read (here a folder in its place) leaves the two dumps' verdict, no fault,
    # and one note says the keyword arguments were not compared, and why: the CLI's report and the app's
    sidecar.mkdir()
    (unread,) = compare_dumps(npu.records, bench.records, summary=summary, jobs=1)
    assert [(s.call, s.kind) for s in unread.diagnosis.suspects] == [
        (s.call, s.kind) for s in alone.diagnosis.suspects
    ]
    assert unread.rows and len(unread.rows) == len(alone.rows)
    why = f"{sidecar}: is a directory, not a regular file"
    note = f"call sidecar not read ({why}): keyword arguments not compared"
    assert note_texts(unread.diagnosis) == [note]
    assert note_texts(_live_diagnosis(npu, bench, summary)) == [note]
    args = ["compare", str(npu.records), str(bench.records), "-o", str(tmp_path / "out"), "--jobs", "1"]
    assert main([*args, "--no-progress", *(["--summary"] if summary else [])]) == 0
    report = capsys.readouterr().out.splitlines()
    assert report[1].startswith("  Culprit: Functional_gelu_0_forward (forward): introduces error")
    assert report.count(f"  note: {note}") == 1, report
    if not summary:  # a replay cannot be built from it either: said, where it was a traceback
        assert main([*args, "--no-progress", "--replay"]) == 0
        report = capsys.readouterr().out.splitlines()
        assert f"  replay: not replayed: cannot read {why}" in report, report


def test_the_detail_panel_names_no_metric_it_has_no_value_for(tmp_path: Path) -> None:
    """Statistics that are NaN on the bench leave the CSV's diff cells empty: the app's call detail
    showed a bare 'Max diff' with nothing after it (found by a review)."""
    from ptdbg_tui.app.detail import _row_line

    npu, bench = _dump_gelu_net(tmp_path / "npu", False), _dump_gelu_net(tmp_path / "bench", True)
    (outcome,) = compare_dumps(npu.records, bench.records, summary=True, jobs=1)
    rows = {r.name: r for r in outcome.rows}
    empty, full = rows["Functional_gelu_0_forward_output"], rows["Functional_gelu_0_forward_input.0"]
    assert empty.result is not None and empty.result.cells[0] == ""
    assert _row_line(empty, "Max diff", {}).plain.rstrip() == "  ✘ output"
    assert "Max diff 0" in _row_line(full, "Max diff", {}).plain


def test_the_legacy_compare_api_prints_the_culprit_s_module_as_the_command_does(
    dump_model, tmp_path, capsys
) -> None:
    """``ptdbg_tui.legacy.compare`` prints the command's report: the module line included."""
    from ptdbg_tui.legacy import compare

    bench, npu = dump_model("bench"), dump_model("npu", fault=True)
    compare(
        {
            "npu_pkl_path": str(npu.records),
            "bench_pkl_path": str(bench.records),
            "npu_dump_data_dir": str(npu.records.with_suffix("")),
            "bench_dump_data_dir": str(bench.records.with_suffix("")),
        },
        str(tmp_path / "out"),
        jobs=1,
    )
    lines = capsys.readouterr().out.splitlines()
    (at,) = [i for i, line in enumerate(lines) if line.startswith("  Culprit: VF_lstm_0_backward (backward)")]
    assert lines[at + 1] == "    module: lstm · LSTM"


def test_float8_tensors_compare_on_their_values(tmp_path: Path) -> None:
    """A float8 pair, recorded as float32 npy under its float8 dtype, is read without a dtype note
    and compared on the values it holds: the metrics are those of the dequantised tensors."""
    torch.manual_seed(0)
    x = torch.randn(256)
    quantised = {}
    for side, scale in (("npu", 1.05), ("bench", 1.0)):
        debugger = PrecisionDebugger(dump_path=str(tmp_path / side), hook_name="dump", step=[0])
        debugger.start()
        quantised[side] = torch.clone((x * scale).to(torch.float8_e4m3fn)).double()
        debugger.stop()
        debugger.step()
    (outcome,) = compare_dumps(tmp_path / "npu", tmp_path / "bench", jobs=1)
    row = next(r for r in outcome.rows if r.name == "Torch_clone_0_forward_output")
    npu, bench = quantised["npu"], quantised["bench"]
    assert row.npu is not None and row.npu.dtype == "torch.float8_e4m3fn"
    assert row.result is not None and row.result.message == ""
    assert row.result.cosine == pytest.approx(float(F.cosine_similarity(npu, bench, dim=0)), rel=1e-9)
    assert row.result.max_abs == pytest.approx(float((npu - bench).abs().max()), rel=1e-9)
