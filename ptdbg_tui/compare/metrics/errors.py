"""The error of one tensor pair as the diagnosis sees it: dtype floors, trimming, and the estimate that
statistics alone allow.

The measures themselves are accumulated with the metrics, in the same pass over the data
(:class:`ptdbg_tui.compare.metrics.MetricAccumulator`); what is here needs no tensor data.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import TypeGuard

from ptdbg_tui.compare.model import ErrorMeasures
from ptdbg_tui.formats.records import TensorRecord

#: Unit roundoff (half an ulp at 1) by dtype name: the relative error one rounding may leave.
_ROUNDOFF = (
    (("bfloat16",), 2.0**-8),
    (("float8_e4m3",), 2.0**-4),  # e4m3fn, e4m3fnuz: 3 mantissa bits
    (("float8_e5m2",), 2.0**-3),
    (("float8_e8m0",), 2.0**-1),  # powers of two only
    (("float16", "half"), 2.0**-11),
    (("float64", "double", "<class 'float'>"), 2.0**-53),
    (("float32", "float"), 2.0**-24),
)
_EXACT = ("int", "uint", "bool", "long", "short", "<class 'int'>", "<class 'bool'>")
#: The largest |Δ| left out of the robust error: this many elements, plus one per 1,024 of the tensor.
TRIM_BASE = 8
TRIM_PER = 1024


def _dtype_name(dtype: str) -> str:
    return dtype.rsplit(".", 1)[-1].strip()


@lru_cache(256)  # a dump holds a handful of dtypes
def exact_dtype(dtype: str) -> bool:
    """Integer and bool data, whose values must agree exactly."""
    name = _dtype_name(dtype)
    return name.startswith(_EXACT) or dtype in _EXACT


@lru_cache(256)
def unit_roundoff(dtype: str) -> float:
    """Unit roundoff of a recorded dtype (``torch.float16`` …); 0 for exact dtypes, fp32's when unknown."""
    if exact_dtype(dtype):
        return 0.0
    name = _dtype_name(dtype)
    for names, u in _ROUNDOFF:
        if name.startswith(names) or dtype in names:
            return u
    return 2.0**-24


@lru_cache(256)
def floor_of(npu_dtype: str, bench_dtype: str) -> float:
    """The noise floor of a pair: the unit roundoff of the less precise dtype."""
    return max(unit_roundoff(npu_dtype), unit_roundoff(bench_dtype))


def trim_count(n: int) -> int:
    """How many of the largest |Δ| of ``n`` elements the robust error leaves out (a handful; none for
    tiny tensors, where every element counts)."""
    return max(0, min(TRIM_BASE + n // TRIM_PER, n // 16))


def measures(
    xx: float,
    yy: float,
    dd: float,
    trimmed: float,
    numel: int,
    npu_dtype: str,
    bench_dtype: str,
    new_nonfinite: int = 0,
    lost_nonfinite: int = 0,
    sign_flips: int = 0,
) -> ErrorMeasures:
    """Measures from accumulated sums: Σnpu², Σbench², Σ(npu − bench)² and the Σ(npu − bench)² of the
    elements the robust error leaves out."""
    npu_norm, bench_norm = math.sqrt(xx), math.sqrt(yy)
    rel = _ratio(math.sqrt(dd), bench_norm)
    robust = _ratio(math.sqrt(max(dd - trimmed, 0.0)), bench_norm)
    return ErrorMeasures(
        rel,
        min(robust, rel),
        npu_norm,
        bench_norm,
        numel,
        floor_of(npu_dtype, bench_dtype),
        new_nonfinite,
        lost_nonfinite,
        exact_dtype(npu_dtype) and exact_dtype(bench_dtype),
        sign_flips=sign_flips,
    )


def scalar_measures(x: float, y: float, npu_dtype: str, bench_dtype: str) -> ErrorMeasures:
    """Measures of two single values."""
    fx, fy = math.isfinite(x), math.isfinite(y)
    if not (fx and fy):
        x, y = (x if fx else 0.0), (y if fy else 0.0)
    d = (x - y) ** 2 if fx and fy else 0.0
    return measures(
        x * x if fx else 0.0,
        y * y if fy else 0.0,
        d,
        0.0,
        1,
        npu_dtype,
        bench_dtype,
        int(fy and not fx),
        int(fx and not fy),
        int((x > 0) != (y > 0)),
    )


def _ratio(num: float, den: float) -> float:
    if den > 0:
        return num / den
    return 0.0 if num == 0 else math.inf


def _finite(v: float | None) -> TypeGuard[float]:
    return v is not None and math.isfinite(v)


def _all_finite(stats: list[float | None]) -> bool:
    """No NaN/Inf among the elements, as far as the statistics tell: max and min are elements (a mean
    or a norm of finite values may overflow, e.g. over many ``finfo.min``); without them, all four."""
    extremes = [v for v in stats[:2] if v is not None]
    return all(_finite(v) for v in extremes or [v for v in stats if v is not None])


def stats_errors(npu: TensorRecord, bench: TensorRecord, transposed: bool = False) -> ErrorMeasures | None:
    """Statistics mode: the error estimated from max, min, mean and l2norm.

    Each statistic's difference is taken relative to its natural scale (the l2norm to itself, the others
    to the bench's largest magnitude); the largest is the estimate. It can only see errors that move
    a statistic, which is what the recorded statistics allow. The robust estimate is the max's and the
    min's alone: a mask that flips where values sit at its threshold (a ReLU's gradient) moves the mean
    and the norm, and the extremes only if an extreme flips.
    """
    shape = npu.shape
    if (shape[::-1] if transposed else shape) != bench.shape or npu.is_scalar != bench.is_scalar:
        return None
    n, b = npu.stat_values(), bench.stat_values()
    numel = max(1, math.prod(shape))
    n_ok, b_ok = _all_finite(n), _all_finite(b)
    magnitude = max([abs(v) for v in b[:3] if _finite(v)], default=0.0)
    rel = extremes = 0.0
    for i, (nv, bv) in enumerate(zip(n, b, strict=True)):
        if _finite(nv) and _finite(bv):
            rel = max(rel, _ratio(abs(nv - bv), abs(bv) if i == 3 else magnitude))
            if i < 2:
                extremes = rel
    n_mag = max([abs(v) for v in n[:3] if _finite(v)], default=0.0)
    npu_norm = abs(n[3]) if _finite(n[3]) else n_mag * math.sqrt(numel)
    bench_norm = abs(b[3]) if _finite(b[3]) else magnitude * math.sqrt(numel)
    return ErrorMeasures(
        rel,
        extremes,
        npu_norm,
        bench_norm,
        numel,
        floor_of(npu.dtype, bench.dtype),
        int(b_ok and not n_ok),
        int(n_ok and not b_ok),
        exact_dtype(npu.dtype) and exact_dtype(bench.dtype),
        from_stats=True,
    )
