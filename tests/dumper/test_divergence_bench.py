"""The divergence benchmark (``bench/divergence.py``): its judge on report text of each kind of
ground truth, and one multi-step scenario run end to end (dumped at three steps, compared through
the CLI per step), whose premise must hold in its dumps."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import divergence
from diagnosis_scenarios.training import (
    NO_FAULT,
    RANK,
    RECEIVED,
    Truth,
    arguments,
    kernel,
    parameters,
    random_op,
    unpaired,
)

GELU = "Functional_gelu_1_forward"
REDUCE = "Distributed_all_reduce_0_forward"


def culprit(call: str, finding: str = "introduces error — inputs 1e-06, outputs 0.01") -> str:
    return (
        f"step2/rank0 vs step2/rank0 (tensors): 53 rows: 53 passed\n"
        f"  Culprit: {call} (forward): {finding}; called at m.py:1 in f\n  CSV: out.csv\n"
    )


ALL_CLEAR = "step1/rank0 vs step1/rank0: 9 rows\n  No operator introduces an error beyond rounding.\n"


def judge(truth: Truth, stdout: str) -> bool:
    return divergence.right(truth, divergence.Report(*divergence.parse_report(stdout)))


@pytest.mark.parametrize(
    ("truth", "stdout", "expected"),
    [
        (kernel(GELU), culprit(GELU), True),
        (kernel(GELU), culprit("Functional_linear_2_forward"), False),
        (kernel(GELU), culprit("Functional_linear_2_forward", f"error enters after {GELU}"), False),
        (kernel(GELU), ALL_CLEAR, False),
        (NO_FAULT, ALL_CLEAR, True),
        (NO_FAULT, culprit(GELU), False),
        (
            random_op("Functional_dropout_0_forward"),
            culprit("Functional_dropout_0_forward", "the two runs draw different random numbers"),
            True,
        ),
        (random_op("Functional_dropout_0_forward"), culprit("Functional_dropout_0_forward"), False),
        (
            arguments("Torch_mul_0_forward"),
            culprit("Torch_mul_0_forward", "the runs pass different arguments: 0.0458 against 0.044715"),
            True,
        ),
        (
            arguments("Torch_mul_0_forward"),
            culprit("Torch_mul_10_forward", "the runs pass different arguments"),
            False,
        ),
        (
            parameters("Functional_linear_0_forward", 1),
            culprit("Functional_linear_0_forward", "parameters differ on entry to step 1"),
            True,
        ),
        (
            parameters("Functional_linear_0_forward", 2),
            culprit("Functional_linear_0_forward", "parameters differ on entry to step 1"),
            False,
        ),
        (unpaired("Tensor___mul___0_forward"), culprit("Tensor___mul___0_forward", "an NPU-only call"), True),
        (
            unpaired("Tensor___mul___0_forward"),
            culprit("Functional_linear_0_forward", "it entered after Tensor___mul___0_forward"),
            False,
        ),
        (Truth(RECEIVED, frozenset({REDUCE}), rank=2), ALL_CLEAR, True),
        (Truth(RECEIVED, frozenset({REDUCE}), rank=2), culprit(REDUCE), True),
        (Truth(RECEIVED, frozenset({REDUCE}), rank=2), culprit(GELU), False),
    ],
)
def test_the_judge_reads_each_kind_of_truth(truth: Truth, stdout: str, expected: bool) -> None:
    assert judge(truth, stdout) is expected


def test_the_rank_line_names_the_rank_step_and_call() -> None:
    truth = Truth(RANK, frozenset({REDUCE}), rank=2, step=0)
    line = f"first divergent rank: rank2 (step0): {REDUCE} (forward): introduces error\n  rank0 (step0): -\n"
    assert judge(truth, line)
    assert not judge(truth, line.replace("rank2 (step0)", "rank1 (step0)"))
    assert not judge(
        truth,
        "first divergent rank: none of the dumped ranks makes an error of its own; "
        f"it first shows in {REDUCE} on rank2 (step0)\n",
    )
    assert judge(NO_FAULT, "first divergent rank: none (no rank has a suspect)\n")


def test_a_compare_that_fails_is_never_right() -> None:
    assert not divergence.right(NO_FAULT, divergence.Report(None, None, 0, error="unrecognized arguments"))


def test_nan_words_are_counted_per_line() -> None:
    stdout = culprit(GELU, "its inputs already carry NaN/Inf where the bench is finite") + "  Inf here too\n"
    assert divergence.parse_report(stdout)[2] == 2


def test_a_scenario_runs_end_to_end_and_its_premise_holds(tmp_path: Path) -> None:
    outcome = divergence.run_scenario("param_over_updated_between_steps", 0, tmp_path, (), check=True)
    assert not outcome.problem
    kinds = [(j.step, j.truth.kind) for j in outcome.judged]
    assert kinds == [(0, "none"), (1, "parameters"), (2, "parameters")]
    assert all(not j.report.error for j in outcome.judged), [j.report.error for j in outcome.judged]
    assert outcome.judged[0].right, outcome.judged[0].answer  # step 0: nothing differs yet
    assert outcome.facts and all(f.ok for f in outcome.facts), [str(f) for f in outcome.facts]
    steps = sorted(p.name for p in (tmp_path / "npu" / "ptdbg_dump_v4.0").iterdir())
    assert steps == ["step0", "step1", "step2"]
