"""The original's accuracy rule (docs/compare.md#accuracy-reached-or-not), our Status, the stats verdict."""

from __future__ import annotations

import pytest

from ptdbg_tui.compare.metrics.verdict import check_accuracy, is_close, stats_verdict, status_for, with_caveat
from ptdbg_tui.compare.model import Status
from ptdbg_tui.compare.reasons import Caveated, CosineUnreadable, Fixed, NoVerdict, Rule, Thresholds
from ptdbg_tui.compare.report.metric_words import reason_text


@pytest.mark.parametrize(
    ("cos", "mae", "expected"),
    [
        ("shape unmatched", "shape unmatched", "Unmatched"),
        ("Nan", "0.000000000000", "Nan"),
        ("1.0", "Nan", "Nan"),
        ("N/A", "N/A", "No"),
        ("unsupported", "0.000000000000", "Nan"),
        ("0.980000000000", "0.002000000000", "No"),  # cos < 0.99 and mae > 0.001
        ("0.980000000000", "0.001000000000", "Yes"),  # mae not > 0.001
        ("0.990000000000", "0.500000000000", "Yes"),  # cos not < 0.99
        ("0.899999999999", "0.000000000000", "No"),  # cos < 0.9
        ("1.0", "1.000000000001", "No"),  # mae > 1
        ("1.0", "1.000000000000", "Yes"),  # a constant tensor 2x too large passes, as in the original
        ("1.0", "0.000000000000", "Yes"),
    ],
)
def test_check_accuracy(cos, mae, expected):
    assert check_accuracy(cos, mae) == expected


def test_status_policy():
    met = Thresholds(rule=Rule.MET, cosine=1.0, mae=0.0)
    assert status_for("Yes", met) == (Status.PASS, met)
    status, why = status_for("Yes", met, caveats=[Fixed.NAMES_DIFFER])
    assert (status, why) == (Status.WARN, Caveated(why=met, caveats=(Fixed.NAMES_DIFFER,), but=True))
    assert reason_text(why) == f"{reason_text(met)}; but names differ (fuzzy or aligned match)"
    assert status_for("No", Thresholds(rule=Rule.COSINE, cosine=0.5, mae=0.0))[0] is Status.FAIL
    assert status_for("Unmatched", Fixed.SHAPES_DIFFER)[0] is Status.FAIL
    unsupported = CosineUnreadable(cell="unsupported")
    assert status_for("Nan", unsupported) == (Status.WARN, NoVerdict(why=unsupported, caveats=()))
    status, why = status_for("Nan", unsupported, close=True)
    assert status is Status.PASS and reason_text(why) == (
        "values agree (relative error < 0.001), although cosine is 'unsupported'"
    )
    assert is_close(0.0, None) and is_close(1e-7, 5e-4) and not is_close(1e-3, 2e-3)
    assert with_caveat(Status.PASS, met, Fixed.NAMES_DIFFER)[0] is Status.WARN
    status, why = with_caveat(Status.FAIL, Fixed.NAN_POSITIONS, "a message")
    assert (
        status is Status.FAIL
        and reason_text(why) == "NaN/Inf at different positions in NPU and bench; a message"
    )


def _stats_pair(record, n_stats, b_stats, dtype="torch.float32", b_dtype=None, shape=(4,), b_shape=None):
    n = record("Torch_x_0_forward_output", shape, dtype, n_stats)
    b = record("Torch_x_0_forward_output", b_shape or shape, b_dtype or dtype, b_stats)
    status, why = stats_verdict(n, b)
    return status, reason_text(why)


def test_stats_agree_within_tolerance(record):
    status, why = _stats_pair(record, [2.0, -1.0, 0.5, 3.0], [2.0005, -1.0, 0.5005, 3.001])
    assert status is Status.PASS and "agree" in why


def test_stats_beyond_tolerance_fail_naming_the_stat(record):
    status, why = _stats_pair(record, [2.0, -1.0, 0.5, 3.0], [2.0, -1.0, 0.7, 3.0])
    assert status is Status.FAIL and why.startswith("mean differs by 0.2")


def test_stats_tolerance_depends_on_dtype(record):
    n, b = [2.0, -1.0, 0.5, 3.0], [2.0, -1.0, 0.52, 3.0]
    assert _stats_pair(record, n, b)[0] is Status.FAIL  # 0.02 > 1e-3 * 2
    assert _stats_pair(record, n, b, dtype="torch.bfloat16")[0] is Status.PASS  # 0.02 <= 2e-2 * 2


def test_stats_of_int_tensors_are_exact(record):
    assert _stats_pair(record, [3, 0, 1.5, "Nan"], [3, 0, 1.5, "Nan"], "torch.int64")[0] is Status.PASS
    assert _stats_pair(record, [4, 0, 1.5, "Nan"], [3, 0, 1.5, "Nan"], "torch.int64")[0] is Status.FAIL


def test_stats_nan_and_inf(record):
    nan = float("nan")
    assert _stats_pair(record, [nan] * 4, [nan] * 4)[0] is Status.PASS
    assert _stats_pair(record, [nan, 0.0, 0.0, 1.0], [1.0, 0.0, 0.0, 1.0])[0] is Status.FAIL
    inf = float("inf")
    assert _stats_pair(record, [1.0, 0.0, 0.5, inf], [1.0, 0.0, 0.5, inf], "torch.float16")[0] is Status.PASS


def test_stats_without_numbers_and_shape_or_dtype_mismatch(record):
    empty = [[], [], [], "Nan"]
    status, why = _stats_pair(record, empty, empty, "torch.bool")
    assert status is Status.PASS and "no statistics" in why
    assert _stats_pair(record, empty, empty, shape=(2,), b_shape=(3,))[0] is Status.FAIL
    same = [1.0, 0.0, 0.5, 1.0]
    status, why = _stats_pair(record, same, same, "torch.float16", "torch.float32")
    assert status is Status.WARN and "dtypes differ" in why
