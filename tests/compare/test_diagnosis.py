"""Finding the call that introduces the error: the seed's LSTM backward, stack sites, advisor text."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptdbg_tui.compare.diagnosis.diagnose import diagnose
from ptdbg_tui.compare.diagnosis.evidence import Unjudged
from ptdbg_tui.compare.diagnosis.findings import CallEvidence
from ptdbg_tui.compare.diagnosis.notes import Sidecar, Unread
from ptdbg_tui.compare.matching.pairing import attach_stacks, match_records, model_rows
from ptdbg_tui.compare.model import ErrorMeasures, Result, Row, Status
from ptdbg_tui.compare.report.advisor import advisor_text
from ptdbg_tui.compare.report.words import evidence_text, suspect_text, verdict_text
from ptdbg_tui.engine.workers.tasks import run_task, task_for
from ptdbg_tui.formats.layout import discover
from ptdbg_tui.formats.pkl import read_pkl
from ptdbg_tui.formats.records import StackRecord
from ptdbg_tui.formats.sites import stack_site
from ptdbg_tui.formats.synthetic import SEED_CULPRIT, write_seed_pair

LEGACY_ADVISOR = Path(__file__).resolve().parents[1] / "fixtures" / "ptdbg_legacy" / "advisor.txt"


def _compared_seed(tmp_path):
    npu_root, bench_root = write_seed_pair(tmp_path)
    npu, bench = discover(npu_root)[0], discover(bench_root)[0]
    n, b = read_pkl(npu.records), read_pkl(bench.records)
    rows = match_records(n.tensors, b.tensors)
    attach_stacks(rows, {s.call: s for s in n.stacks})
    for row in rows:
        row.result = run_task(task_for(row, npu.tensor_dir, bench.tensor_dir))
    return rows


def test_seed_scenario_blames_the_lstm_backward(tmp_path):
    rows = _compared_seed(tmp_path)
    later = [r for r in rows if r.name.startswith("Functional_conv2d_0_backward_output")]
    assert all(r.status is Status.FAIL for r in later)  # downstream noise the original would blame
    diagnosis = diagnose(rows)
    assert [(s.direction, s.call, s.api, s.kind) for s in diagnosis.suspects] == [
        ("backward", SEED_CULPRIT, "VF_lstm", "growth")
    ]
    culprit = diagnosis.culprit
    assert culprit is not None and culprit.score > 1000
    assert evidence_text(culprit.evidence).startswith("inputs 1.") and ", outputs 1." in evidence_text(
        culprit.evidence
    )
    # the backward stack shows loss.backward(); the forward call's site is what the user needs
    assert culprit.site == ("/home/user/centernet/model.py", "43", "forward", "y = VF_lstm(x)")
    assert "model.py:43" in suspect_text(culprit)
    assert verdict_text(diagnosis).startswith(f"Culprit: {SEED_CULPRIT} (backward):")


def test_advisor_names_the_culprit_with_its_csv_line(tmp_path):
    rows = _compared_seed(tmp_path)
    diagnosis = diagnose(rows)
    lines = advisor_text(rows, diagnosis).splitlines()
    worst = diagnosis.culprit.worst_row
    assert worst.name.startswith("VF_lstm_0_backward_output.")
    line = next(i for i, r in enumerate(rows) if r is worst) + 2
    assert lines[:2] == [f"Line: {line}", f"Suspect Nodes: {worst.name}"]
    assert lines[2].startswith("Expert Advice: VF_lstm_0_backward (backward): introduces error — inputs ")


def _rows(record, statuses: dict[str, Status]) -> list[Row]:
    rows = []
    for name, status in statuses.items():
        r = Row(record(name), record(name))
        r.result = Result(
            ("1.0",) * 5,
            "Yes" if status is Status.PASS else "No",
            "",
            status,
            errors=ErrorMeasures(0.0, 0.0, 1.0, 1.0, 3, 2.0**-24),
        )
        rows.append(r)
    return rows


@pytest.mark.parametrize(
    ("frames", "site"),
    [
        (
            [
                ("/x/site-packages/ptdbg_ascend/hook_module/hook_module.py", "58", "__call__", None),
                ("/x/site-packages/ptdbg_ascend/hook_module/wrap_torch.py", "71", "torch_op_template", None),
                ("/home/u/train.py", "42", "forward", "y = torch.add(x, 1)"),
            ],
            "/home/u/train.py",
        ),
        ([("/repo/dumper/capture.py", "10", "hook", None), ("/home/u/m.py", "7", "f", None)], "/home/u/m.py"),
        (
            [
                ("/x/site-packages/torch/nn/modules/rnn.py", "900", "forward", None),
                ("/home/u/model.py", "5", "forward", "self.lstm(x)"),
            ],
            "/home/u/model.py",
        ),
        (
            [("/x/site-packages/torch/nn/modules/rnn.py", "900", "forward", None)],
            "/x/site-packages/torch/nn/modules/rnn.py",
        ),
        ([("/x/site-packages/ptdbg_ascend/hook_module/hook_module.py", "58", "__call__", None)], None),
    ],
)
def test_stack_site_skips_tool_frames(frames, site):
    found = stack_site(StackRecord("A_x_0_forward_stack_info", frames))
    assert (found[0] if found else None) == site


def test_advisor_all_pass_matches_the_original_golden_file(record):
    rows = _rows(record, {"A_x_0_forward_input.0": Status.PASS, "A_x_0_forward_output": Status.PASS})
    assert advisor_text(rows, diagnose(rows)) == LEGACY_ADVISOR.read_text()


def test_advisor_never_claims_an_all_clear_without_a_comparison(record):
    rows = [Row(record("A_x_0_forward_input.0"), None), Row(None, record("A_x_0_forward_output"))]
    diagnosis = diagnose(rows)
    assert diagnosis.compared == 0 and verdict_text(diagnosis) == "Nothing was compared: no verdict."
    expected = "Line: NA\nSuspect Nodes: NA\nExpert Advice: Nothing was compared: no verdict.\n"
    assert advisor_text(rows, diagnosis) == expected


def test_a_diagnosis_pickles_whole_with_its_calls_evidence(tmp_path):
    """A forked child and a cluster worker send diagnoses pickled; their calls' evidence travels as plain
    tuples and comes back as the same evidence, judged or not, under the same keys."""
    import pickle

    d = diagnose(model_rows(_compared_seed(tmp_path)))
    d.notes.append(Unread(sidecar=Sidecar.CALLS, reason="a note"))
    d.calls["Torch_x_0_forward"] = CallEvidence(
        "Torch_x_0_forward", "forward", None, Unjudged.INPUTS_NOT_COMPARED
    )
    assert any(e.judgement for e in d.calls.values())
    back = pickle.loads(pickle.dumps(d, pickle.HIGHEST_PROTOCOL))
    assert back.calls == d.calls and list(back.calls) == list(d.calls)
    assert [suspect_text(s) for s in back.suspects] == [suspect_text(s) for s in d.suspects] and back.suspects
    assert [r.name for r in back.suspects[0].rows] == [r.name for r in d.suspects[0].rows]
    for name in d.__slots__:
        if name not in ("calls", "suspects"):
            assert getattr(back, name) == getattr(d, name), name
