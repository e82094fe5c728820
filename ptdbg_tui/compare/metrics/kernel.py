"""The element-wise part of the metric pass, fused into one compiled loop (numba).

numpy needs a pass per operation (two casts, subtract, abs, argmax, abs, divide, max, two compares
and counts); this loop does them all in one pass over a chunk, with SIMD, reading float32, float64
or float16 (as its bits: numba has no float16) and writing the float64 copies that the sums of
squares need. Those sums stay with BLAS (:func:`ptdbg_tui.compare.metrics._sum_squares`): their
order of additions decides the cosine's last digits, and the CSV cells must not change.

No fast-math: every float operation is the IEEE one numpy does, so each value is the very same.
Only the running maxima are ``llvm.maxnum`` with no-NaN flags, which lets them vectorize (a maximum
is exact in any order); NaN/Inf inputs are found by ``v - v != 0`` (kept without fast-math) and the
caller passes again over cleaned copies.

Compiled once per machine and input dtypes, and cached (``cache=True``) in the user's cache folder,
``$XDG_CACHE_HOME/ptdbg-tui/numba`` (default ``~/.cache/ptdbg-tui/numba``), never inside a checkout
or site-packages; a user's own ``NUMBA_CACHE_DIR`` wins. numba reads it once, when it is first
imported: it is set just below, before numba's import.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
from llvmlite import ir


def _user_cache_dir() -> str:
    """numba's cache folder: the XDG cache folder's (an absolute ``XDG_CACHE_HOME``, else ~/.cache)."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    root = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"
    return str(root / "ptdbg-tui" / "numba")


os.environ.setdefault("NUMBA_CACHE_DIR", _user_cache_dir())

from numba import njit, types  # noqa: E402  # numba's folder is set first
from numba.extending import intrinsic, overload  # noqa: E402

#: float16 bits: sign, and exponent + mantissa; the smallest normal, Inf.
_H_SIGN = 0x8000
_H_MAGNITUDE = 0x7FFF
_H_NORMAL = 0x0400
_H_INF = 0x7C00
_H_MANTISSA = 0x03FF
#: float64 bits: the exponent of Inf/NaN; float16's bias moved to float64's (1023 - 15) << 52.
_D_INF = 0x7FF0000000000000
_REBIAS = 1008 << 52
_H_TINY = 2.0**-24  # a float16 subnormal is its mantissa times this


@intrinsic
def _maxnum(typingctx: Any, a: Any, b: Any) -> Any:
    """``llvm.maxnum`` with no-NaN flags: a maximum the loop vectorizer can reduce."""
    sig = types.float64(types.float64, types.float64)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        fnty = ir.FunctionType(ir.DoubleType(), [ir.DoubleType(), ir.DoubleType()])
        fn = builder.module.declare_intrinsic("llvm.maxnum", [ir.DoubleType()], fnty)
        return builder.call(fn, args, fastmath=("nnan", "nsz"))

    return sig, codegen


@intrinsic
def _double(typingctx: Any, bits: Any) -> Any:
    """The float64 whose bits are ``bits`` (int64)."""

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.bitcast(args[0], ir.DoubleType())

    return types.float64(types.int64), codegen


@intrinsic
def _bits(typingctx: Any, value: Any) -> Any:
    """The bits of a float64, as an int64."""

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.bitcast(args[0], ir.IntType(64))

    return types.int64(types.float64), codegen


def _widen(value: Any) -> float:
    """An element as float64 (compiled only, see the overload)."""
    raise NotImplementedError


@overload(_widen, inline="always")
def _widen_impl(value):  # numba: no annotations on an overload
    if isinstance(value, types.Float):
        return lambda value: np.float64(value)
    if value == types.uint16:  # float16 bits, converted exactly without branches (SIMD)

        def from_half(value):
            h = np.int64(value)
            m = h & _H_MAGNITUDE
            tiny = np.int64(m < _H_NORMAL)
            special = np.int64(m >= _H_INF)
            normal = 1 - tiny - special
            # numba's stub types an intrinsic's call with its typing function's parameters (typingctx too)
            bits = (
                (_bits(np.float64(m) * _H_TINY) * tiny)  # type: ignore[call-arg]
                | ((_D_INF | ((m & _H_MANTISSA) << 42)) * special)
                | (((m << 42) + _REBIAS) * normal)
            )
            return _double(bits | ((h & _H_SIGN) << 48))

        return from_half
    return None


def _jit(fn: Any) -> Any:
    """Compiled once per machine (cached); where no cache folder can be written (a read-only install
    and no writable home), once per process."""
    options: dict[str, Any] = {"nogil": True, "error_model": "numpy", "boundscheck": False}
    try:
        return njit(cache=True, **options)(fn)
    except RuntimeError:  # numba: "cannot cache function …: no locator available"
        return njit(**options)(fn)


@_jit
def fused_pass(
    npu: np.ndarray,
    bench: np.ndarray,
    x: np.ndarray,
    y: np.ndarray,
    d: np.ndarray,
    eps: float,
    low: float,
    high: float,
) -> tuple[bool, float, float, int, int, int, float]:
    """``x``, ``y`` ← the float64 values of ``npu`` and ``bench`` (float32, float64, or float16 viewed
    as uint16), ``d`` ← |x − y|. Returns whether any is NaN/Inf (then the rest is void), max |x − y|,
    max |x − y| / |y| (a zero |y| replaced by ``eps``), the counts of that ratio below ``low``
    and below ``high``, the count of elements positive on one side only (where a ReLU's mask
    differs), and max |x − y| where y is zero (so that a CSV whose tool replaces a zero by another
    eps can rescale that part: msprobe's)."""
    bad = False
    top = 0.0
    rel_top = 0.0
    below_low = 0
    below_high = 0
    sign_flips = 0
    zero_top = 0.0
    for i in range(npu.size):
        a = _widen(npu[i])
        b = _widen(bench[i])
        x[i] = a
        y[i] = b
        bad |= ((a - a) != 0.0) | ((b - b) != 0.0)
        v = abs(a - b)
        d[i] = v
        top = _maxnum(top, v)  # type: ignore[call-arg]  # numba's stub, as in _widen_impl
        magnitude = abs(b)
        zero = magnitude == 0.0
        r = v / (eps if zero else magnitude)
        zero_top = _maxnum(zero_top, v if zero else 0.0)
        rel_top = _maxnum(rel_top, r)
        below_low += r < low
        below_high += r < high
        sign_flips += (a > 0.0) != (b > 0.0)
    return bad, top, rel_top, below_low, below_high, sign_flips, zero_top
