"""The words of why a row has its Status (:mod:`ptdbg_tui.compare.reasons`): the detail panel's
reason, naming the threshold or the statistic that decided."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ptdbg_tui.compare.metrics.verdict import CLOSE_RTOL, COS_FLOOR, COS_LOW, MAE_CEIL, MAE_LOW
from ptdbg_tui.compare.reasons import (
    Agreed,
    Caveat,
    Caveated,
    ChecksumsDiffer,
    ChecksumsDifferBut,
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
    TensorShapes,
    Thresholds,
)

_FIXED = {
    Fixed.SHAPES_DIFFER: "shapes of NPU and bench differ",
    Fixed.NO_VALUE: "Cosine or MaxAbsErr has no value",
    Fixed.NAN_POSITIONS: "NaN/Inf at different positions in NPU and bench",
    Fixed.CHECKSUMS_EQUAL: "checksums are equal",
    Fixed.NPU_ONLY: "present in the NPU dump only",
    Fixed.BENCH_ONLY: "present in the bench dump only",
    Fixed.NO_VALUE_EITHER: "no value on either side",
    Fixed.VALUES_EQUAL: "values are equal",
    Fixed.NAMES_DIFFER: "names differ (fuzzy or aligned match)",
    Fixed.FILE_DTYPE: "a tensor file's dtype differs from the recorded one",
}


def _thresholds(t: Thresholds) -> str:
    cos, mae = t.cosine, t.mae
    if t.rule is Rule.BOTH:
        return f"Cosine {cos:.6g} < {COS_LOW} and MaxAbsErr {mae:.6g} > {MAE_LOW}"
    if t.rule is Rule.COSINE:
        return f"Cosine {cos:.6g} < {COS_FLOOR}"
    if t.rule is Rule.MAE:
        return f"MaxAbsErr {mae:.6g} > {MAE_CEIL:g}"
    return (
        f"Cosine {cos:.6g}, MaxAbsErr {mae:.6g}: not (Cosine < {COS_LOW} and MaxAbsErr > "
        f"{MAE_LOW}), Cosine >= {COS_FLOOR}, MaxAbsErr <= {MAE_CEIL:g}"
    )


def _agreed(a: Agreed) -> str:
    if not a.compared:
        return "no statistics recorded (empty or bool tensor); shapes agree"
    return f"statistics ({', '.join(a.compared)}) agree within " + (
        "exact equality" if a.exact else f"{a.atol:g} + {a.rtol:g} × magnitude"
    )


def _caveat(c: Caveat) -> str:
    if isinstance(c, Fixed):
        return _FIXED[c]
    if isinstance(c, DtypesDiffer):
        return f"dtypes differ ({c.npu} vs {c.bench})"
    return c


def _stat_unequal(r: StatUnequal) -> str:
    if r.exact:
        return f"{r.name}: NPU {r.npu:g} vs bench {r.bench:g} (exact dtype)"
    return f"{r.name}: NPU {r.npu} vs bench {r.bench}"


def _close(r: Close) -> str:
    why = reason_text(r.why)
    return f"values agree (relative error < {CLOSE_RTOL:g}), although {why[0].lower()}{why[1:]}"


def _caveated(r: Caveated) -> str:
    caveats = "; ".join(_caveat(c) for c in r.caveats)
    return f"{reason_text(r.why)}; but {caveats}" if r.but else f"{reason_text(r.why)}; {caveats}"


#: The words of each kind of reason with figures.
_SAYS: dict[type, Callable[[Any], str]] = {
    Thresholds: _thresholds,
    CosineUnreadable: lambda r: f"Cosine is {r.cell!r}",
    RecordedShapes: lambda r: f"shapes differ: {r.npu} vs {r.bench}",
    TensorShapes: lambda r: f"shapes differ: NPU {list(r.npu)} vs bench {list(r.bench)}",
    StatDiffers: lambda r: f"{r.name} differs by {r.by:.6g} > {r.atol:g} + {r.rtol:g} × {r.scale:.6g}",
    StatUnequal: _stat_unequal,
    Agreed: _agreed,
    ChecksumsDiffer: lambda r: f"checksums differ ({r.npu} vs {r.bench})",
    ChecksumsDifferBut: lambda r: f"checksums differ, but {reason_text(r.why)}",
    NoVerdict: lambda r: f"no verdict ({reason_text(r.why)})" + "".join(f"; {_caveat(c)}" for c in r.caveats),
    Close: _close,
    Caveated: _caveated,
}


def reason_text(r: Reason) -> str:
    """Why a row has its Status, in words (``""``: no reason)."""
    if isinstance(r, str):
        return r
    if isinstance(r, Fixed):
        return _FIXED[r]
    return _SAYS[type(r)](r)
