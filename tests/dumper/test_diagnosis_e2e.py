"""End to end: dump three fault scenarios of ``bench/diagnosis.py`` and check the diagnosis names the
faulty call (a forward fault, a backward one, and an Inf that starts in a backward call of an fp16 run).

The scenarios are the benchmark's own (``bench/diagnosis_scenarios``); these three are fast (~0.2 s
a pair).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ptdbg_tui.engine.batch import compare_dumps

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from diagnosis_scenarios import SCENARIOS, dump_pair


@pytest.mark.parametrize(
    ("name", "direction"),
    [
        ("interpolate_zeros", "forward"),  # all-zero output: no cosine, the original thresholds see no "No"
        ("conv_weight_grad_only", "backward"),  # only the weight gradient of the 2nd conv is wrong
        ("fp16_log_backward_overflow", "backward"),  # log's backward overflows in fp16, its forward finite
    ],
)
def test_the_diagnosis_names_the_faulty_call(tmp_path: Path, name: str, direction: str) -> None:
    scenario = SCENARIOS[name]
    npu, bench = dump_pair(scenario, tmp_path, seed=0)
    (outcome,) = compare_dumps(npu, bench, jobs=1)
    culprit = outcome.diagnosis.culprit
    assert culprit is not None, "no suspect named"
    assert culprit.call in scenario.truth, [s.call for s in outcome.diagnosis.suspects[:3]]
    assert culprit.direction == direction
