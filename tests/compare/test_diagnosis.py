"""Finding the call that introduces the error: the seed's LSTM backward, stack sites, advisor text."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptdbg_tui.compare.diagnosis import advisor_text, call_verdict, find_culprits, stack_site
from ptdbg_tui.compare.matching import attach_stacks, match_records
from ptdbg_tui.compare.model import Result, Row, Status
from ptdbg_tui.compare.tasks import run_task, task_for
from ptdbg_tui.formats.layout import discover
from ptdbg_tui.formats.pkl import read_pkl
from ptdbg_tui.formats.records import StackRecord
from ptdbg_tui.formats.synthetic import SEED_CULPRIT, write_seed_pair

LEGACY_ADVISOR = Path(__file__).resolve().parents[1] / "fixtures" / "ptdbg_legacy" / "advisor.txt"


def _compared_seed(tmp_path):
    npu_root, bench_root = write_seed_pair(tmp_path)
    npu, bench = discover(npu_root)[0], discover(bench_root)[0]
    n, b = read_pkl(npu.pkl), read_pkl(bench.pkl)
    rows = match_records(n.tensors, b.tensors)
    attach_stacks(rows, {s.call: s for s in n.stacks})
    for row in rows:
        row.result = run_task(task_for(row, npu.npy_dir, bench.npy_dir))
    return rows


def test_seed_scenario_blames_the_lstm_backward(tmp_path):
    rows = _compared_seed(tmp_path)
    lstm_in = [r for r in rows if r.name.startswith("VF_lstm_0_backward_input")]
    lstm_out = [r for r in rows if r.name.startswith("VF_lstm_0_backward_output")]
    assert {r.status for r in lstm_in} == {Status.PASS} and {r.status for r in lstm_out} == {Status.FAIL}
    later = [r for r in rows if r.name.startswith("Functional_conv2d_0_backward_output")]
    assert all(r.status is Status.FAIL for r in later)  # downstream noise the original would blame
    culprits = find_culprits(rows)
    assert [(c.direction, c.call, c.api) for c in culprits] == [("backward", SEED_CULPRIT, "VF_lstm")]
    text = culprits[0].text
    assert "VF_lstm_0_backward" in text and "lstm backward" in text
    assert "incoming gradient matches" in text and "gradient it produces does not" in text
    # the backward stack shows loss.backward(); the forward call's site is what the user needs
    assert culprits[0].site == ("/home/user/centernet/model.py", "43", "forward", "y = VF_lstm(x)")
    assert "model.py:43" in text


def test_advisor_names_the_culprit_with_its_csv_line(tmp_path):
    rows = _compared_seed(tmp_path)
    lines = advisor_text(rows, find_culprits(rows)).splitlines()
    line = next(i for i, r in enumerate(rows) if r.name == "VF_lstm_0_backward_output.0") + 2
    assert lines[:2] == [f"Line: {line}", "Suspect Nodes: VF_lstm_0_backward_output.0"]
    assert lines[2].startswith("Expert Advice: VF_lstm_0_backward: the backward incoming gradient matches")


def _rows(record, statuses: dict[str, Status]) -> list[Row]:
    rows = []
    for name, status in statuses.items():
        r = Row(record(name), record(name))
        r.result = Result(("1.0",) * 5, "Yes", "", status)
        rows.append(r)
    return rows


def test_call_verdict_texts(record):
    ok = call_verdict(_rows(record, {"A_x_0_forward_input.0": Status.PASS,
                                     "A_x_0_forward_output": Status.FAIL}))
    assert ok.introduces and ok.text == "inputs pass, outputs fail: this op's forward introduces the error"
    upstream = call_verdict(_rows(record, {"A_x_0_forward_input.0": Status.FAIL,
                                           "A_x_0_forward_output": Status.FAIL}))
    assert not upstream.introduces and "comes from its inputs" in upstream.text
    warn_in = call_verdict(_rows(record, {"A_x_0_forward_input.0": Status.WARN,
                                          "A_x_0_forward_output": Status.FAIL}))
    assert warn_in.introduces
    unknown = call_verdict(_rows(record, {"A_x_0_forward_input.0": Status.ERROR,
                                          "A_x_0_forward_output": Status.FAIL}))
    assert not unknown.introduces
    fine = call_verdict(_rows(record, {"A_x_0_forward_input.0": Status.PASS,
                                       "A_x_0_forward_output": Status.PASS}))
    assert fine.text == "inputs and outputs pass"
    pending = call_verdict([Row(record("A_x_0_forward_output"), record("A_x_0_forward_output"))])
    assert pending.text == "not compared yet"


def test_first_culprit_per_direction_forward_first(record):
    rows = _rows(record, {
        "B_b_0_backward_input.0": Status.PASS, "B_b_0_backward_output.0": Status.FAIL,
        "A_a_0_forward_input.0": Status.PASS, "A_a_0_forward_output": Status.PASS,
        "C_c_0_forward_input.0": Status.PASS, "C_c_0_forward_output": Status.FAIL,
        "D_d_0_forward_input.0": Status.PASS, "D_d_0_forward_output": Status.FAIL,
    })
    assert [c.call for c in find_culprits(rows)] == ["C_c_0_forward", "B_b_0_backward"]
    assert find_culprits([]) == []


@pytest.mark.parametrize(("frames", "site"), [
    ([("/x/site-packages/ptdbg_ascend/hook_module/hook_module.py", "58", "__call__", None),
      ("/x/site-packages/ptdbg_ascend/hook_module/wrap_torch.py", "71", "torch_op_template", None),
      ("/home/u/train.py", "42", "forward", "y = torch.add(x, 1)")], "/home/u/train.py"),
    ([("/repo/dumper/capture.py", "10", "hook", None), ("/home/u/m.py", "7", "f", None)], "/home/u/m.py"),
    ([("/x/site-packages/torch/nn/modules/rnn.py", "900", "forward", None),
      ("/home/u/model.py", "5", "forward", "self.lstm(x)")], "/home/u/model.py"),
    ([("/x/site-packages/torch/nn/modules/rnn.py", "900", "forward", None)],
     "/x/site-packages/torch/nn/modules/rnn.py"),
    ([("/x/site-packages/ptdbg_ascend/hook_module/hook_module.py", "58", "__call__", None)], None),
])
def test_stack_site_skips_tool_frames(frames, site):
    found = stack_site(StackRecord("A_x_0_forward_stack_info", frames))
    assert (found[0] if found else None) == site


def test_advisor_all_pass_matches_the_original_golden_file(record):
    rows = _rows(record, {"A_x_0_forward_input.0": Status.PASS, "A_x_0_forward_output": Status.PASS})
    assert advisor_text(rows, find_culprits(rows)) == LEGACY_ADVISOR.read_text()


def test_advisor_without_culprit_names_the_first_failure(record):
    rows = _rows(record, {"A_x_0_forward_input.0": Status.FAIL, "A_x_0_forward_output": Status.FAIL})
    text = advisor_text(rows, find_culprits(rows))
    assert text.startswith("Line: 2\nSuspect Nodes: A_x_0_forward_input.0\n") and "no call" in text
