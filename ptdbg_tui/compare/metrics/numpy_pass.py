"""The element-wise part of the metric pass in numpy's operations: the fused pass's values without numba.

numba's import and the load of the compiled pass cost ~0.5 s and ~90 MB a process, more than a small
job's whole metric pass; such jobs run this one. Each value is the very same as the fused pass's (the
same IEEE operations, maxima exact in any order): a CSV never depends on which pass ran. NaN/Inf inputs
show as a non-finite largest |x − y|; as after the fused pass, the caller then passes again over
cleaned copies.

The accumulator runs it a :data:`BLOCK` at a time, into the same block-sized scratch each time: a
block's copies, differences and ratios stay in the core's cache from one operation to the next, where
a whole chunk's (four 2 MiB arrays) went out to memory and back a dozen times (~40% of its CPU).
"""

from __future__ import annotations

import math

import numpy as np

#: Elements per block: a multiple of the sums' slices (DOT_SLICE), whose five arrays (~1.1 MiB) fit a
#: core's L2 cache; smaller blocks pay numpy's per-call overhead more often (32K measured best, against
#: 16K-256K, on a 2-core Xeon).
BLOCK = 1 << 15


def numpy_pass(
    npu: np.ndarray,
    bench: np.ndarray,
    x: np.ndarray,
    y: np.ndarray,
    d: np.ndarray,
    t: np.ndarray,
    mask: np.ndarray,
    eps: float,
    low: float,
    high: float,
) -> tuple[bool, float, float, int, int, int, float]:
    """:func:`~ptdbg_tui.compare.metrics.kernel.fused_pass` with scratch ``t`` (float64) and ``mask``
    (bool) of the same length; ``npu`` and ``bench`` are the data as stored (any dtype or layout)."""
    np.copyto(x, npu, casting="unsafe")
    np.copyto(y, bench, casting="unsafe")
    np.subtract(x, y, out=d)
    np.abs(d, out=d)
    top = float(d.max())
    if not math.isfinite(top) and not (np.isfinite(x).all() and np.isfinite(y).all()):
        return True, top, math.nan, 0, 0, 0, 0.0  # void, as the fused pass's
    np.abs(y, out=t)
    np.equal(t, 0.0, out=mask)
    zero_top = 0.0
    if mask.any():
        zero_top = float(np.max(d, where=mask, initial=0.0))
        np.copyto(t, eps, where=mask)
    np.divide(d, t, out=t)
    rel_top = max(float(t.max()), 0.0)
    below_low = below_high = t.size
    if rel_top >= high:  # matching data never gets here: both counts are whole
        below_high = int(np.count_nonzero(np.less(t, high, out=mask)))
    if rel_top >= low:
        below_low = int(np.count_nonzero(np.less(t, low, out=mask)))
    other = t.view(bool)[: t.size]  # the ratios are counted: their bytes hold the second mask
    np.greater(x, 0.0, out=mask)
    np.greater(y, 0.0, out=other)
    flips = int(np.count_nonzero(np.not_equal(mask, other, out=mask)))
    return False, top, rel_top, below_low, below_high, flips, zero_top
