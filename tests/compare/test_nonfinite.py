"""The float64 replay's word on a non-finite output: beyond the dtype's range (as correctly rounded
results go), a kernel wrong on its inputs, or NaN in float64 too."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ptdbg_tui.compare.diagnosis.nonfinite import OriginReplay, Overflow
from ptdbg_tui.compare.diagnosis.replay_reasons import Fixed
from ptdbg_tui.compare.replay.nonfinite import dtype_max, judge_overflow, rounds_to_inf


def _judge(recorded: list[float], reference: list[float], dtype: str = "torch.float16"):
    results = {(0,): (np.array(recorded), np.array(reference), 0.0)}
    return judge_overflow(results, {(0,): dtype}, {(0,): "Torch_exp_0_forward_output"})


def test_the_largest_values_and_where_rounding_reaches_inf_are_the_dtypes_own():
    assert dtype_max("torch.float16") == 65504 and rounds_to_inf(65504) == 65520
    with np.errstate(over="ignore"):
        assert float(np.float16(65519)) == 65504 and math.isinf(float(np.float16(65520)))
    assert dtype_max("torch.bfloat16") == 3.3895313892515355e38
    assert dtype_max("torch.float32") == float(np.finfo(np.float32).max)
    assert dtype_max("torch.float8_e4m3fn") == 448
    assert dtype_max("torch.int64") is None


@pytest.mark.parametrize(
    ("recorded", "reference", "outcome"),
    [
        ([1.0, math.inf], [1.0, 1.2e5], Overflow.OVERFLOW),
        ([math.inf], [65520.0], Overflow.OVERFLOW),  # rounds to Inf in float16
        ([math.inf], [65519.0], Overflow.KERNEL_WRONG),  # rounds to 65504: Inf is the kernel's
        ([math.nan, 2.0], [3.1, 2.0], Overflow.KERNEL_WRONG),
        ([math.nan], [math.nan], Overflow.UNDEFINED),
        ([math.inf], [math.inf], Overflow.OVERFLOW),  # beyond float64 too
    ],
)
def test_the_replay_tells_overflow_from_a_wrong_kernel(recorded, reference, outcome):
    got = _judge(recorded, reference)
    assert isinstance(got, OriginReplay) and got.outcome is outcome, got
    assert got.limit == 65504 and got.dtype == "torch.float16"


def test_finite_recorded_results_have_no_word():
    assert _judge([1.0], [1.0]) is Fixed.ALL_FINITE
