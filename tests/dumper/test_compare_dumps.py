"""Dumps of the project's dumper go through the project's compare with no special case."""

from __future__ import annotations

from ptdbg_tui.cli import main
from ptdbg_tui.compare.model import Status
from ptdbg_tui.engine.batch import compare_dumps


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
