"""The element-wise part of the metric pass in numpy's operations: the fused pass's values without numba.

numba's import and the load of the compiled pass cost ~0.5 s and ~90 MB a process, more than a small
job's whole metric pass; such jobs run this one. Each value is the very same as the fused pass's (the
same IEEE operations, maxima exact in any order, counts added up): a CSV never depends on which pass
ran. NaN/Inf inputs show as a non-finite largest |x − y|; as after the fused pass, the caller then
passes again over cleaned copies.

The operations run block by block (:data:`BLOCK` elements): a block's float64 copies, differences and
ratios stay in the core's cache from one operation to the next, where a whole chunk's (four 2 MiB
arrays) went out to memory and back a dozen times; the ratios and masks, needed for a block only,
take the same first block of the scratch each time.
"""

from __future__ import annotations

import math

import numpy as np

#: Elements per block: its five arrays (~1.1 MiB) fit a core's L2 cache; fewer elements pay numpy's
#: per-call overhead more often (32K measured best, against 8K-128K, on a 2-core Xeon).
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
    top = rel_top = zero_top = 0.0
    below_low = below_high = flips = 0
    for start in range(0, npu.size, BLOCK):
        stop = start + BLOCK
        bx, by, bd = x[start:stop], y[start:stop], d[start:stop]
        bt, bm = t[: bx.size], mask[: bx.size]  # the same scratch each block: it stays in cache
        np.copyto(bx, npu[start:stop], casting="unsafe")
        np.copyto(by, bench[start:stop], casting="unsafe")
        np.subtract(bx, by, out=bd)
        np.abs(bd, out=bd)
        block_top = float(bd.max())
        if not math.isfinite(block_top) and not (np.isfinite(bx).all() and np.isfinite(by).all()):
            # void, as the fused pass's; the caller cleans the whole copies and passes again
            np.copyto(x[stop:], npu[stop:], casting="unsafe")
            np.copyto(y[stop:], bench[stop:], casting="unsafe")
            return True, block_top, math.nan, 0, 0, 0, 0.0
        top = max(top, block_top)
        np.abs(by, out=bt)
        np.equal(bt, 0.0, out=bm)
        if bm.any():
            zero_top = max(zero_top, float(np.max(bd, where=bm, initial=0.0)))
            np.copyto(bt, eps, where=bm)
        np.divide(bd, bt, out=bt)
        block_rel = float(bt.max())
        rel_top = max(rel_top, block_rel)
        n = bt.size
        # matching data never counts: a block whose largest ratio is below a bound is wholly below it
        below_high += int(np.count_nonzero(np.less(bt, high, out=bm))) if block_rel >= high else n
        below_low += int(np.count_nonzero(np.less(bt, low, out=bm))) if block_rel >= low else n
        other = bt.view(bool)[:n]  # the ratios are counted: their bytes hold the second mask
        np.greater(bx, 0.0, out=bm)
        np.greater(by, 0.0, out=other)
        flips += int(np.count_nonzero(np.not_equal(bm, other, out=bm)))
    return False, top, max(rel_top, 0.0), below_low, below_high, flips, zero_top
