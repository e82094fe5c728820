"""Verdicts: ``Accuracy Reached or Not`` (docs/compare.md#accuracy-reached-or-not) and the UI's row Status.

The CSV keeps the original's absolute rule and values so files stay comparable; the Status adds
what the original cannot say (a Nan verdict on identical values is a pass, a pass on data with
different dtypes or fuzzy-matched names deserves a warning) and a reason naming the threshold.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

from ptdbg_tui.compare.metrics.cells import NA, NAN, NO, SHAPE_UNMATCHED, UNMATCHED, YES
from ptdbg_tui.compare.model import Row, Status, same_shape
from ptdbg_tui.compare.reasons import (
    Agreed,
    Caveat,
    Caveated,
    Close,
    CosineUnreadable,
    DtypesDiffer,
    Fixed,
    NoVerdict,
    Reason,
    RecordedShapes,
    Rule,
    StatDiffers,
    StatUnequal,
    Thresholds,
)
from ptdbg_tui.formats.records import TensorRecord

#: The original's thresholds: fail when cos < 0.99 and MaxAbsErr > 0.001, or cos < 0.9, or
#: MaxAbsErr > 1.
COS_LOW = 0.99
MAE_LOW = 0.001
COS_FLOOR = 0.9
MAE_CEIL = 1.0
#: Where the original gives no verdict, values within this relative error count as a pass.
CLOSE_RTOL = 0.001

#: Summary mode: a statistic agrees when |npu - bench| <= STAT_ATOL + rtol * magnitude, with
#: rtol chosen by the less precise dtype of the pair (stats are computed in the tensor's dtype).
STAT_ATOL = 1e-6
STAT_RTOL = {
    "bfloat16": 2e-2,
    "float16": 5e-3,
    "half": 5e-3,
    # float8: one ulp at 1, what a value rounded once the other way moves by
    "float8_e4m3fn": 2.0**-3,
    "float8_e4m3fnuz": 2.0**-3,
    "float8_e5m2": 2.0**-2,
    "float8_e5m2fnuz": 2.0**-2,
    "float8_e8m0fnu": 1.0,
}
STAT_RTOL_DEFAULT = 1e-3
STAT_NAMES = ("max", "min", "mean", "l2norm")


def accuracy_rule(cos_cell: str, mae_cell: str) -> tuple[str, Reason]:
    """``(accuracy, why)``: the first rule of docs/compare.md#accuracy-reached-or-not that applies."""
    if cos_cell == SHAPE_UNMATCHED:
        return UNMATCHED, Fixed.SHAPES_DIFFER
    if NAN in (cos_cell, mae_cell):
        return NAN, Fixed.NO_VALUE
    if NA in (cos_cell, mae_cell):
        return NO, Fixed.NAN_POSITIONS
    try:
        cos, mae = float(cos_cell), float(mae_cell)
    except ValueError:
        return NAN, CosineUnreadable(cell=cos_cell)
    if cos < COS_LOW and mae > MAE_LOW:
        return NO, Thresholds(rule=Rule.BOTH, cosine=cos, mae=mae)
    if cos < COS_FLOOR:
        return NO, Thresholds(rule=Rule.COSINE, cosine=cos, mae=mae)
    if mae > MAE_CEIL:
        return NO, Thresholds(rule=Rule.MAE, cosine=cos, mae=mae)
    return YES, Thresholds(rule=Rule.MET, cosine=cos, mae=mae)


def check_accuracy(cos_cell: str, mae_cell: str) -> str:
    """The original's ``check_accuracy``: ``Yes``, ``No``, ``Nan`` or ``Unmatched``."""
    return accuracy_rule(cos_cell, mae_cell)[0]


def is_close(max_abs: float | None, max_rel: float | None) -> bool:
    """Values agree where the original has no verdict (scalars, 1-element and zero tensors):
    identical, or every element within the One Thousandth relative error."""
    return max_abs == 0 or (max_rel is not None and max_rel < CLOSE_RTOL)


def status_for(
    accuracy: str, why: Reason, *, close: bool = False, caveats: Sequence[Caveat] = ()
) -> tuple[Status, Reason]:
    """Row status and reason from the accuracy verdict.

    ``close``: the values agree (see :func:`is_close`), so a ``Nan`` verdict is still a pass;
    ``caveats``: facts that turn a pass into a warning (dtype mismatch, fuzzy match …).
    """
    if accuracy in (NO, UNMATCHED):
        return Status.FAIL, why
    if accuracy == NAN and not close:
        return Status.WARN, NoVerdict(why=why, caveats=tuple(caveats))
    if accuracy == NAN:
        why = Close(why=why)
    if caveats:
        return Status.WARN, Caveated(why=why, caveats=tuple(caveats), but=True)
    return Status.PASS, why


def with_caveat(status: Status, reason: Reason, caveat: Caveat) -> tuple[Status, Reason]:
    """Add a caveat to an existing verdict: a pass becomes a warning."""
    if status is Status.PASS:
        return Status.WARN, Caveated(why=reason, caveats=(caveat,), but=True)
    return status, Caveated(why=reason, caveats=(caveat,), but=False)


@lru_cache(256)  # a dump holds a handful of dtypes
def _rtol(*dtypes: str) -> float:
    return max(STAT_RTOL.get(d.rsplit(".", 1)[-1], STAT_RTOL_DEFAULT) for d in dtypes)


@lru_cache(256)
def _exact(dtype: str) -> bool:
    name = dtype.rsplit(".", 1)[-1].strip("<>' ")
    return name.startswith(("int", "uint", "bool", "class 'int", "class 'bool"))


@lru_cache(256)
def stat_tolerance(npu_dtype: str, bench_dtype: str) -> tuple[bool, float, float]:
    """``(exact, atol, rtol)`` of a pair's statistics: exact equality for integer and bool data."""
    if _exact(npu_dtype) and _exact(bench_dtype):
        return True, 0.0, 0.0
    return False, STAT_ATOL, _rtol(npu_dtype, bench_dtype)


def _same_nonfinite(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def stats_verdict(npu: TensorRecord, bench: TensorRecord, transposed: bool = False) -> tuple[Status, Reason]:
    """Summary mode's verdict: do the recorded statistics agree within a dtype-aware tolerance?
    (``transposed``: the NPU holds the bench tensor transposed; statistics do not change.)"""
    if not same_shape(npu, bench, transposed):
        return Status.FAIL, RecordedShapes(npu=npu.shape_raw, bench=bench.shape_raw)
    exact, atol, rtol = stat_tolerance(npu.dtype, bench.dtype)
    values = list(zip(npu.stat_values(), bench.stat_values(), strict=True))
    magnitude = max([abs(b) for _, b in values[:2] if b is not None and math.isfinite(b)], default=0.0)
    compared = []
    for name, (n, b) in zip(STAT_NAMES, values, strict=True):
        if n is None or b is None:
            continue
        compared.append(name)
        if not (math.isfinite(n) and math.isfinite(b)):
            if not _same_nonfinite(n, b):
                return Status.FAIL, StatUnequal(name=name, npu=n, bench=b, exact=False)
            continue
        scale = abs(b) if name == "l2norm" else magnitude
        tol = atol + rtol * scale
        if abs(n - b) > tol:
            return Status.FAIL, (
                StatDiffers(name=name, by=abs(n - b), atol=atol, rtol=rtol, scale=scale)
                if not exact
                else StatUnequal(name=name, npu=n, bench=b, exact=True)
            )
    status, reason = Status.PASS, agreed(tuple(compared), exact, atol, rtol)
    if npu.dtype != bench.dtype:
        return with_caveat(status, reason, DtypesDiffer(npu=npu.dtype, bench=bench.dtype))
    return status, reason


@lru_cache(256)  # a few combinations, one reason each
def agreed(compared: tuple[str, ...], exact: bool, atol: float, rtol: float) -> Agreed:
    """Why statistics that agree pass."""
    return Agreed(compared=compared, exact=exact, atol=atol, rtol=rtol)


def original_pick(rows: Sequence[Row]) -> Row | None:
    """What the original's advisor names: the first row whose verdict is No."""
    return next((r for r in rows if r.result is not None and r.result.accuracy == NO), None)
