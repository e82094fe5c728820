"""Tensor metrics of the original compare (docs/compare.md#metrics), computed chunk by chunk in float64.

Differences from the original, on purpose (docs/compare.md): the relative error is computed in
float64 on copies after the shape and NaN/Inf checks (the original mutates its inputs, works in
the native dtype and crashes on shape mismatch); NaN/Inf at the same positions are set to 0
before *every* metric, and +Inf against -Inf counts as a mismatch; every message is kept.

Memory stays at a few chunk buffers whatever the tensor size: callers feed slices of memory
maps or of file reads (see :mod:`ptdbg_tui.engine.workers.tasks`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ptdbg_tui.compare.metrics.cells import (
    MSG_COS_BENCH_ZERO,
    MSG_COS_NAN,
    MSG_COS_NPU_ZERO,
    MSG_COS_ONE,
    MSG_DTYPE,
    MSG_EMPTY,
    MSG_INF_NAN,
    MSG_SCALAR,
    MSG_SHAPE,
    NA,
    NAN,
    SHAPE_UNMATCHED,
    UNSUPPORTED,
    cosine_cell,
    fmt12,
    join_messages,
    nonfinite_message,
    npy_dtype_message,
)
from ptdbg_tui.compare.metrics.errors import measures, scalar_measures, trim_count
from ptdbg_tui.compare.metrics.numpy_pass import BLOCK, numpy_pass
from ptdbg_tui.compare.metrics.scratch import borrow, give_back
from ptdbg_tui.compare.metrics.verdict import accuracy_rule, is_close, status_for
from ptdbg_tui.compare.model import Result, Status
from ptdbg_tui.compare.reasons import TensorShapes

#: Elements per chunk (four float64 buffers): small enough to stay in cache, large enough that
#: numpy's per-call overhead does not dominate (64K–256K measured best on a 2-core box).
CHUNK = 1 << 18
#: OpenBLAS runs a dot product of up to 10,000 elements on the calling thread, whatever its threads; a
#: longer one is split across them, which changes the order of the additions. Slices of this length
#: everywhere make the sums, and so the CSV cells, the same to the last bit in-process, in the pool and
#: on a cluster's workers however they were started (and keep BLAS threads off the workers' cores);
#: the slicing costs ~8% of the pass against whole-chunk dots.
DOT_SLICE = 8192
#: Norms at or below this count as zero for the cosine (the original's FLOAT_EPSILON).
FLOAT_EPS = float(np.finfo(np.float64).eps)
THOUSANDTH = 0.001
FIVE_THOUSANDTHS = 0.005
#: |npu - bench| histogram: bins [0, 2^-32), [2^-32, 2^-28), ..., [2^4, 2^8), [2^8, inf).
HISTOGRAM_EDGES: tuple[float, ...] = (0.0, *(2.0**e for e in range(-32, 9, 4)), math.inf)
#: numpy dtype kinds we can compare: bool, signed, unsigned, float.
COMPARABLE_KINDS = "biuf"

_N_BINS = len(HISTOGRAM_EDGES) - 1
# float64 biased exponent (0..2047) -> histogram bin.
_BIN_OF_EXPONENT = np.clip((np.arange(2048) - 1023 + 32) // 4 + 1, 0, _N_BINS - 1)


def rel_eps(bench_dtype: np.dtype) -> float:
    """What replaces a bench zero in the relative error: the bench array dtype's eps (as the original)."""
    return float(np.finfo(bench_dtype).eps) if bench_dtype.kind == "f" else FLOAT_EPS


def _result(
    cells: tuple[str, ...],
    messages: Sequence[str],
    caveats: Sequence[str] = (),
    *,
    close: bool = False,
    **fields: Any,
) -> Result:
    accuracy, why = accuracy_rule(cells[0], cells[1])
    status, reason = status_for(accuracy, why, close=close, caveats=caveats)
    return Result(cells, accuracy, join_messages(list(messages)), status, reason, **fields)


def dtype_caveats(npu_dtype: str, bench_dtype: str) -> list[str]:
    """The messages a comparable pair carries into its result (recorded dtypes that differ)."""
    return [MSG_DTYPE] if npu_dtype != bench_dtype else []


def precheck(
    npu_shape: tuple[int, ...],
    bench_shape: tuple[int, ...],
    npu_np: np.dtype,
    bench_np: np.dtype,
    npu_dtype: str,
    bench_dtype: str,
) -> Result | list[str]:
    """Decide what needs no data: a final Result (shape mismatch, empty, unusable dtype) or the
    messages to carry into the metric pass (dtype mismatch)."""
    for side, dt in (("NPU", npu_np), ("bench", bench_np)):
        if dt.kind not in COMPARABLE_KINDS:
            message = npy_dtype_message(side, dt)
            return Result((NAN,) * 5, NAN, message, Status.ERROR, message)
    if tuple(npu_shape) != tuple(bench_shape):
        return Result(
            (SHAPE_UNMATCHED,) * 5,
            accuracy_rule(SHAPE_UNMATCHED, SHAPE_UNMATCHED)[0],
            MSG_SHAPE,
            Status.FAIL,
            TensorShapes(npu=tuple(npu_shape), bench=tuple(bench_shape)),
        )
    caveats = dtype_caveats(npu_dtype, bench_dtype)
    if math.prod(npu_shape) == 0 and npu_shape:
        return _result((UNSUPPORTED, "0", "0", "0", "0"), [MSG_EMPTY, *caveats], caveats, close=True)
    return caveats


def _sum_squares(a: np.ndarray) -> float:
    """Σa² in float64: the BLAS dot products of DOT_SLICE-element slices, added in order."""
    return float(sum(_square_parts(a)))


def _square_parts(a: np.ndarray) -> list[float]:
    """The dot products of :func:`_sum_squares`: those of consecutive runs of whole slices, put one
    after the other, are the whole run's (the numpy pass sums a chunk block by block).

    The whole slices go through one stacked ``matmul`` of (1 × n) by (n × 1) rows, which numpy hands to
    the same BLAS dot product slice by slice (the very same floats, a third less time than a Python
    loop of ``np.dot`` calls)."""
    if a.size <= DOT_SLICE:  # one slice: the same single dot product, without the stacking
        return [float(np.dot(a, a))]
    whole = a.size - a.size % DOT_SLICE
    rows = a[:whole].reshape(-1, DOT_SLICE)
    parts: list[float] = np.matmul(rows[:, None, :], rows[:, :, None]).ravel().tolist()
    if whole < a.size:
        tail = a[whole:]
        parts.append(float(np.dot(tail, tail)))
    return parts


#: Element types :func:`~ptdbg_tui.compare.metrics.kernel.fused_pass` reads as they are (float16 as its bits).
_KERNEL_READS = {
    np.dtype(np.float32): np.float32,
    np.dtype(np.float64): np.float64,
    np.dtype(np.float16): np.uint16,
}


#: The compiled pass, once :func:`warm_up` loaded it in this process; until then the numpy pass runs.
_fused: Callable[..., tuple[bool, float, float, int, int, int, float]] | None = None


def _readable(a: np.ndarray, buffer: np.ndarray) -> np.ndarray:
    """``a`` as the fused pass reads it; any other dtype or layout (ints, bool, big-endian, strided)
    is cast into ``buffer`` first, which the pass then reads and rewrites in place."""
    kind = _KERNEL_READS.get(a.dtype)
    if kind is not None and a.flags.c_contiguous:
        return a.view(kind)
    np.copyto(buffer, a, casting="unsafe")
    return buffer


def _same_nonfinite(x: np.ndarray, y: np.ndarray) -> bool:
    """Equal where non-finite: both NaN or the same infinity."""
    return bool(np.all((x == y) | (np.isnan(x) & np.isnan(y))))


def _nonfinite_note(count: int) -> str:
    return nonfinite_message(count)


@dataclass(slots=True)
class MetricState:
    """The running sums of one tensor pair, or of a run of its elements: what a worker sends back
    for a part of a big tensor (a few numbers per chunk, never data).

    Σnpu², Σbench², Σ(npu - bench)² and the trimmed share are kept per chunk and added up in order at
    the end, so that states of consecutive parts merged in order give the very same floats as one
    pass over the whole tensor (the CSV cells do not depend on how the work was split).
    """

    size: int
    eps: float
    sums: list[tuple[float, float, float, float]] = field(default_factory=list)  # xx, yy, dd, trimmed
    max_abs: float = -1.0
    max_rel: float = 0.0
    max_abs_bench_zero: float = 0.0  # max |npu - bench| where bench is 0 (msprobe's MaxRelativeErr)
    pass_1e3: int = 0
    pass_5e3: int = 0
    nonfinite: int = 0  # NaN/Inf at the same positions on both sides
    new_nonfinite: int = 0  # NaN/Inf on the NPU side only
    lost_nonfinite: int = 0  # NaN/Inf on the bench side only
    mismatch: bool = False  # NaN/Inf positions differ: the CSV metrics are N/A
    sign_flips: int = 0  # elements positive on one side only
    worst_flat: int | None = None
    worst_npu: float = 0.0
    worst_bench: float = 0.0
    histogram: np.ndarray | None = None
    notes: list[str] = field(default_factory=list)  # what the files themselves call for (first part's)

    def merge(self, later: MetricState) -> None:
        """Take in the state of the elements that follow this one's."""
        self.sums += later.sums
        if later.max_abs > self.max_abs:
            self.max_abs, self.worst_flat = later.max_abs, later.worst_flat
            self.worst_npu, self.worst_bench = later.worst_npu, later.worst_bench
        self.max_rel = max(self.max_rel, later.max_rel)
        self.max_abs_bench_zero = max(self.max_abs_bench_zero, later.max_abs_bench_zero)
        self.pass_1e3 += later.pass_1e3
        self.pass_5e3 += later.pass_5e3
        self.nonfinite += later.nonfinite
        self.new_nonfinite += later.new_nonfinite
        self.lost_nonfinite += later.lost_nonfinite
        self.sign_flips += later.sign_flips
        self.mismatch = self.mismatch or later.mismatch
        if self.histogram is not None and later.histogram is not None:
            self.histogram += later.histogram

    def _totals(self) -> tuple[float, float, float, float]:
        xx = yy = dd = trimmed = 0.0
        for a, b, c, t in self.sums:  # in order: the same floats as one running sum
            xx += a
            yy += b
            dd += c
            trimmed += t
        return xx, yy, dd, trimmed

    def _cosine(self, xx: float, yy: float, dd: float) -> tuple[str, str, float | None]:
        if self.size == 1:
            return UNSUPPORTED, MSG_COS_ONE, None
        na, nb = math.sqrt(xx), math.sqrt(yy)
        if na <= FLOAT_EPS and nb <= FLOAT_EPS:
            return "1.0", "", 1.0
        if na <= FLOAT_EPS:
            return NAN, MSG_COS_NPU_ZERO, None
        if nb <= FLOAT_EPS:
            return NAN, MSG_COS_BENCH_ZERO, None
        cos = (xx + yy - dd) / (2 * na * nb)  # npu·bench = (|n|² + |b|² - |n - b|²) / 2
        if math.isnan(cos):
            return NAN, MSG_COS_NAN, None
        return cosine_cell(cos), "", cos

    def result(
        self, shape: tuple[int, ...], npu_dtype: str, bench_dtype: str, caveats: Sequence[str] = ()
    ) -> Result:
        """The Result once every element was fed (``npu_dtype``/``bench_dtype``: the recorded dtypes)."""
        xx, yy, dd, trimmed = self._totals()
        errors = measures(
            xx,
            yy,
            dd,
            trimmed,
            self.size,
            npu_dtype,
            bench_dtype,
            self.new_nonfinite,
            self.lost_nonfinite,
            self.sign_flips,
        )
        if self.mismatch:
            return _result((NA,) * 5, [*caveats, MSG_INF_NAN], caveats, errors=errors)
        cos_cell, cos_msg, cos = self._cosine(xx, yy, dd)
        r1, r5 = self.pass_1e3 / self.size, self.pass_5e3 / self.size
        cells = (cos_cell, fmt12(self.max_abs), fmt12(self.max_rel), fmt12(r1), fmt12(r5))
        notes = list(caveats)
        if self.nonfinite:
            notes.append(_nonfinite_note(self.nonfinite))
        worst = None
        if self.max_abs > 0 and self.worst_flat is not None:
            worst = tuple(int(i) for i in np.unravel_index(self.worst_flat, shape))
        hist = tuple(int(c) for c in self.histogram) if self.histogram is not None else ()
        return _result(
            cells,
            [*notes, cos_msg],
            notes,
            close=is_close(self.max_abs, self.max_rel),
            cosine=cos,
            max_abs=self.max_abs,
            max_rel=self.max_rel,
            max_abs_bench_zero=self.max_abs_bench_zero,
            ratio_1e3=r1,
            ratio_5e3=r5,
            worst_index=worst,
            worst_npu=self.worst_npu if worst else None,
            worst_bench=self.worst_bench if worst else None,
            histogram=hist,
            histogram_edges=HISTOGRAM_EDGES if hist else (),
            errors=errors,
            euc_dist=math.sqrt(dd),
        )


class MetricAccumulator:
    """Running sums of one tensor pair, fed in order by :meth:`add` (any lengths, same on both sides).

    ``offset``: the flat index of the first element fed (a part of a tensor split into tasks; a part
    must start at a multiple of ``chunk`` for its sums to merge into those of one whole pass).
    """

    def __init__(
        self, size: int, bench_np: np.dtype, histogram: bool = True, chunk: int = CHUNK, offset: int = 0
    ) -> None:
        self.size = size
        self.state = MetricState(
            size, rel_eps(bench_np), histogram=np.zeros(_N_BINS, dtype=np.int64) if histogram else None
        )
        self.trim = trim_count(min(size, chunk))  # per chunk: the robust error's share of left-out elements
        n = max(1, min(chunk, size))
        self._raw = borrow(n * (8 * 4 + 1))
        self._x, self._y, self._d, self._t = (
            self._raw[k * n * 8 : (k + 1) * n * 8].view(np.float64) for k in range(4)
        )
        self._bits = self._t.view(np.uint64)  # the histogram's scratch, once a pass is done with it
        self._mask = self._raw[4 * n * 8 : 4 * n * 8 + n].view(bool)
        self.offset = offset

    def add(self, npu: np.ndarray, bench: np.ndarray) -> None:
        """Feed the next flat slices (any lengths, the same on both sides)."""
        step = self._x.size
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            for start in range(0, npu.size, step):
                self._add(npu[start : start + step], bench[start : start + step])

    def _add(self, npu: np.ndarray, bench: np.ndarray) -> None:
        if _fused is None and self._add_blocks(npu, bench):
            return
        k = npu.size
        st = self.state
        x, y, d = self._x[:k], self._y[:k], self._d[:k]
        bad, top, rel_top, below_1e3, below_5e3, flips, zero_top = self._pass(npu, bench, x, y, d)
        if bad:  # rare: zero the NaN/Inf (counting them) and pass again
            self._zero_nonfinite(x, y)
            _, top, rel_top, below_1e3, below_5e3, flips, zero_top = self._pass(x, y, x, y, d)
        xx, yy, dd = _sum_squares(x), _sum_squares(y), _sum_squares(d)  # d = |x - y|: the same squares
        if top > st.max_abs:
            i = int(d.argmax())
            st.max_abs = top
            st.worst_flat = self.offset + i
            st.worst_npu, st.worst_bench = float(x[i]), float(y[i])
        st.sums.append((xx, yy, dd, self._trim(d, top, dd, self._mask[:k])))
        st.max_rel = max(st.max_rel, rel_top)
        st.max_abs_bench_zero = max(st.max_abs_bench_zero, zero_top)
        st.pass_1e3 += below_1e3
        st.pass_5e3 += below_5e3
        st.sign_flips += flips
        if st.histogram is not None:
            st.histogram += self._bins(d)
        self.offset += k

    def _add_blocks(self, npu: np.ndarray, bench: np.ndarray) -> bool:
        """A chunk through the numpy pass block by block, into the same block-sized scratch (see
        :mod:`~ptdbg_tui.compare.metrics.numpy_pass`): the very same values as one pass over the chunk
        (maxima and counts over its blocks, its sums' slices in order, the first largest |x − y|).
        False, with nothing recorded, for a chunk holding NaN/Inf: the whole chunk is then passed over
        at once (its copies are cleaned whole)."""
        k, st = npu.size, self.state
        n = min(BLOCK, k)
        # x, y and d one after the other: a whole block's sums are one stacked product of its slices
        block = self._raw[: 3 * n * 8].view(np.float64).reshape(3, n)
        t, mask = self._t[:n], self._mask[:n]
        slices = n // DOT_SLICE if n % DOT_SLICE == 0 else 0  # per array, where the block stacks whole
        eps = st.eps
        top, rel_top, zero_top = -1.0, 0.0, 0.0
        below_1e3 = below_5e3 = flips = 0
        xx: list[float] = []
        yy: list[float] = []
        dd: list[float] = []
        worst: tuple[int, float, float] | None = None
        hist = None if st.histogram is None else np.zeros(_N_BINS, dtype=np.int64)
        for start in range(0, k, BLOCK):
            m = min(n, k - start)
            bx, by, bd = block[:, :m] if m < n else block
            bad, b_top, b_rel, b_low, b_high, b_flips, b_zero = numpy_pass(
                npu[start : start + m],
                bench[start : start + m],
                bx,
                by,
                bd,
                t[:m],
                mask[:m],
                eps,
                THOUSANDTH,
                FIVE_THOUSANDTHS,
            )
            if bad:
                return False
            if b_top > max(top, st.max_abs):  # the chunk's first largest, where it beats the tensor's
                i = int(bd.argmax())
                worst = (start + i, float(bx[i]), float(by[i]))
            top = max(top, b_top)
            rel_top = max(rel_top, b_rel)
            zero_top = max(zero_top, b_zero)
            below_1e3 += b_low
            below_5e3 += b_high
            flips += b_flips
            if m == n and slices:
                parts = _square_parts(block.reshape(-1))
                xx += parts[:slices]
                yy += parts[slices : 2 * slices]
                dd += parts[2 * slices :]
            else:
                xx += _square_parts(bx)
                yy += _square_parts(by)
                dd += _square_parts(bd)
            if hist is not None:
                hist += self._bins(bd)
        sums = (float(sum(xx)), float(sum(yy)), float(sum(dd)))
        trimmed = self._trim_whole(npu, bench, top, sums[2]) if self._trim_keep(k, top, sums[2]) else 0.0
        if worst is not None:
            st.max_abs = top
            st.worst_flat = self.offset + worst[0]
            st.worst_npu, st.worst_bench = worst[1], worst[2]
        st.sums.append((*sums, trimmed))
        st.max_rel = max(st.max_rel, rel_top)
        st.max_abs_bench_zero = max(st.max_abs_bench_zero, zero_top)
        st.pass_1e3 += below_1e3
        st.pass_5e3 += below_5e3
        st.sign_flips += flips
        if hist is not None and st.histogram is not None:
            st.histogram += hist
        self.offset += k
        return True

    def _pass(
        self, npu: np.ndarray, bench: np.ndarray, x: np.ndarray, y: np.ndarray, d: np.ndarray
    ) -> tuple[bool, float, float, int, int, int, float]:
        """The element-wise part: compiled where loaded, else in numpy (the very same values)."""
        eps = self.state.eps
        if _fused is not None:
            return _fused(_readable(npu, x), _readable(bench, y), x, y, d, eps, THOUSANDTH, FIVE_THOUSANDTHS)
        k = npu.size
        return numpy_pass(npu, bench, x, y, d, self._t[:k], self._mask[:k], eps, THOUSANDTH, FIVE_THOUSANDTHS)

    def _bins(self, d: np.ndarray) -> np.ndarray:
        """The histogram counts of ``d`` (by their float64 exponents, in the scratch's bits)."""
        bits = self._bits[: d.size]
        np.right_shift(d.view(np.uint64), 52, out=bits)
        per_exponent = np.bincount(bits.view(np.int64), minlength=2048)
        return np.bincount(_BIN_OF_EXPONENT, per_exponent, _N_BINS).astype(np.int64)

    def _trim_keep(self, k: int, top: float, dd: float) -> int:
        """How many of a chunk's ``k`` largest |npu - bench| the robust error sets aside: 0 where they
        cannot hold half its Σ(npu - bench)² (ordinary data never pays for the selection)."""
        keep = min(self.trim, k // 16) if k < self.size else self.trim
        return 0 if keep == 0 or keep * top * top < 0.5 * dd else keep

    def _trim_whole(self, npu: np.ndarray, bench: np.ndarray, top: float, dd: float) -> float:
        """:meth:`_trim` of a chunk passed block by block: its |x − y| made again whole (rare: outliers)."""
        k = npu.size
        x, y, d = self._x[:k], self._y[:k], self._d[:k]
        np.copyto(x, npu, casting="unsafe")
        np.copyto(y, bench, casting="unsafe")
        np.abs(np.subtract(x, y, out=d), out=d)
        return self._trim(d, top, dd, self._mask[:k])

    def _trim(self, d: np.ndarray, top: float, dd: float, mask: np.ndarray) -> float:
        """Σ(npu - bench)² of the chunk's few largest |npu - bench|, which the robust error sets aside,
        where they could matter: only when they may hold half the chunk's Σ(npu - bench)² (outliers), so
        ordinary data never pays for the selection and the robust error is then at most √2 times too
        large. Only elements within a factor 256 of the largest are candidates (the rest could change the
        sum by 1/65,536 of it)."""
        keep = self._trim_keep(d.size, top, dd)
        if keep == 0:
            return 0.0
        np.greater_equal(d, top / 256, out=mask)
        largest = d[mask]
        if largest.size > keep:
            largest.partition(largest.size - keep)
            largest = largest[largest.size - keep :]
        return float(np.dot(largest, largest))

    def _zero_nonfinite(self, x: np.ndarray, y: np.ndarray) -> None:
        """Zero every position non-finite on either side, counting where they agree and where not."""
        st = self.state
        bx, by = ~np.isfinite(x), ~np.isfinite(y)
        either = np.flatnonzero(bx | by)
        nx, ny = bx[either], by[either]
        both = nx & ny
        same = both & ((x[either] == y[either]) | (np.isnan(x[either]) & np.isnan(y[either])))
        n_same = int(np.count_nonzero(same))
        st.nonfinite += n_same
        st.new_nonfinite += int(np.count_nonzero(nx & ~ny))
        st.lost_nonfinite += int(np.count_nonzero(ny & ~nx))
        # anywhere else they differ: one side only, or +Inf against -Inf, NaN against Inf
        st.mismatch = st.mismatch or n_same < either.size
        x[either] = 0.0
        y[either] = 0.0

    def finish(self) -> MetricState:
        """The state once every element was fed; the accumulator cannot be fed after this."""
        give_back(self._raw)
        return self.state

    def result(
        self, shape: tuple[int, ...], npu_dtype: str, bench_dtype: str, caveats: Sequence[str] = ()
    ) -> Result:
        """The Result once every element was fed (see :meth:`MetricState.result`)."""
        return self.finish().result(shape, npu_dtype, bench_dtype, caveats)


def warm_up() -> None:
    """Load (on a machine's first run: compile) the fused pass for the common dtypes now, and use it in
    this process from now on: for big jobs (numba's import and the load cost ~0.5 s)."""
    global _fused
    if _fused is not None:
        return
    from ptdbg_tui.compare.metrics.kernel import fused_pass

    _fused = fused_pass
    for dtype in (np.float32, np.float16):
        ones = np.ones(2, dtype)
        compare_arrays(ones, ones, "torch.float32", "torch.float32", histogram=False)


def compare_scalar(
    npu: np.ndarray, bench: np.ndarray, npu_dtype: str, bench_dtype: str, caveats: Sequence[str] = ()
) -> Result:
    """0-d values (Python scalars, 0-d tensors): MaxAbsErr and MaxRelativeErr only, as the original."""
    x, y = float(npu.astype(np.float64)), float(bench.astype(np.float64))
    errors = scalar_measures(x, y, npu_dtype, bench_dtype)
    notes = list(caveats)
    if not (math.isfinite(x) and math.isfinite(y)):
        if not _same_nonfinite(np.array(x), np.array(y)):
            return _result((NA,) * 5, [MSG_SCALAR, *notes, MSG_INF_NAN], notes, errors=errors)
        notes.append(_nonfinite_note(1))
        x = y = 0.0
    mae = abs(x - y)
    rel = mae / (abs(y) if y != 0 else rel_eps(bench.dtype))
    return _result(
        (UNSUPPORTED, fmt12(mae), fmt12(rel), NAN, NAN),
        [MSG_SCALAR, *notes],
        notes,
        close=is_close(mae, rel),
        max_abs=mae,
        max_rel=rel,
        max_abs_bench_zero=mae if y == 0 else 0.0,
        errors=errors,
    )


def compare_arrays(
    npu: np.ndarray, bench: np.ndarray, npu_dtype: str, bench_dtype: str, *, histogram: bool = True
) -> Result:
    """Compare two whole arrays (or memory maps); never mutates them.

    ``npu_dtype``/``bench_dtype`` are the pkl dtype strings (authoritative: bf16 is stored as fp32).
    """
    npu, bench = np.asanyarray(npu), np.asanyarray(bench)
    pre = precheck(npu.shape, bench.shape, npu.dtype, bench.dtype, npu_dtype, bench_dtype)
    if isinstance(pre, Result):
        return pre
    if npu.ndim == 0:
        return compare_scalar(npu, bench, npu_dtype, bench_dtype, pre)
    acc = MetricAccumulator(npu.size, bench.dtype, histogram)
    acc.add(npu.reshape(-1), bench.reshape(-1))
    return acc.result(npu.shape, npu_dtype, bench_dtype, pre)
