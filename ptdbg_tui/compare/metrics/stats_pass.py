"""The settled results of many rows at once: in statistics mode, the rows a dump is mostly made of
(four finite float statistics a side, one dtype, one shape) are judged with numpy over the whole pair.

Only the rows whose statistics agree take this way; every other row, and every one that fails, gets
:func:`~ptdbg_tui.compare.metrics.settled.settled_result`, whose results these equal to the bit (the
same float operations in the same order; tests/compare/test_stats_pass.py checks it on real dumps).
An LLM's statistics dump holds ~150,000 rows, at 16 µs a row one by one.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from operator import sub

import numpy as np

from ptdbg_tui.compare.metrics.errors import exact_dtype, floor_of
from ptdbg_tui.compare.metrics.settled import overwritten_input, settled_result
from ptdbg_tui.compare.metrics.verdict import STAT_NAMES, agreed, stat_tolerance
from ptdbg_tui.compare.model import ErrorMeasures, FloatReprs, Result, Row, Status
from ptdbg_tui.compare.reasons import Agreed
from ptdbg_tui.formats.float_texts import float_reprs
from ptdbg_tui.formats.records import TensorRecord

#: Fewer rows than this go one by one (numpy's fixed cost).
MIN_ROWS = 64
#: The largest integer statistic taken here: every integer up to it is a float64 exactly.
_EXACT_INT = 1 << 53
#: A tensor's shape (a list) or a Python value's (``"[]"``).
_SHAPES = (list, str)


def settled_results(rows: Sequence[Row], summary: bool) -> list[Result | None]:
    """:func:`settled_result` of each row, the common statistics rows over the whole batch."""
    out: list[Result | None] = [None] * len(rows)
    fast = [i for i, row in enumerate(rows) if _plain_statistics(row)] if summary else []
    if len(fast) >= MIN_ROWS:
        for i, result in zip(fast, _agreeing([rows[i] for i in fast]), strict=True):
            out[i] = result
    for i, row in enumerate(rows):
        if out[i] is None:
            out[i] = settled_result(row, summary)
    return out


def _plain_statistics(row: Row) -> bool:
    """A matched row of two tensors (or two Python values) of one dtype and shape, each with four
    statistics that are floats or integers a float holds exactly, that no other rule settles (no
    checksums, no in-place overwrite, no fuzzy or transposed match)."""
    n, b = row.npu, row.bench
    if n is None or b is None or row.fuzzy or row.transposed or (n.md5 and b.md5):
        return False
    if n.dtype != b.dtype or type(n.shape_raw) not in _SHAPES or n.shape_raw != b.shape_raw:
        return False
    if n.dump_step > 100 or b.dump_step > 100:
        return False
    s, t = n.stats, b.stats
    if len(s) != 4 or len(t) != 4:
        return False
    s0, s1, s2, s3 = s
    t0, t1, t2, t3 = t
    if type(s0) is float is type(s1) is type(s2) is type(s3) is type(t0) is type(t1) is type(t2) is type(t3):
        return not overwritten_input(n.entry)  # nearly every row: judged without a set
    kinds = set(map(type, (*s, *t)))
    if not kinds <= {float, int} or any(type(v) is int and abs(v) > _EXACT_INT for v in (*s, *t)):
        return False
    return not overwritten_input(n.entry)


@np.errstate(invalid="ignore", over="ignore")  # a masked attention's -inf minimum: inf - inf is NaN
def _agreeing(rows: Sequence[Row]) -> list[Result | None]:
    """The results of the rows whose statistics are finite and agree; ``None`` for the others."""
    npu_records = [r.npu for r in rows]
    bench_records = [r.bench for r in rows]
    sides = (npu_records, bench_records)
    npu, bench = (_stats_array(records) for records in sides)
    dtypes = [r.dtype for r in npu_records]  # type: ignore[union-attr]
    tolerances = {d: stat_tolerance(d, d) for d in set(dtypes)}
    atol = np.array([tolerances[d][1] for d in dtypes])
    rtol = np.array([tolerances[d][2] for d in dtypes])
    diff = np.abs(npu - bench)
    absb = np.abs(bench)
    magnitude = np.maximum(absb[:, 0], absb[:, 1])  # the verdict's scale: bench max and min
    scale = np.column_stack([magnitude, magnitude, magnitude, absb[:, 3]])
    tol = atol[:, None] + rtol[:, None] * scale
    finite = np.isfinite(npu).all(axis=1) & np.isfinite(bench).all(axis=1)
    agree = finite & ~(diff > tol).any(axis=1)
    ratio = _ratios(diff, absb)
    rel, extremes = _largest(ratio).tolist(), _largest(ratio[:, :2]).tolist()
    npu_norm, bench_norm = np.abs(npu[:, 3]).tolist(), absb[:, 3].tolist()
    out: list[Result | None] = [None] * len(rows)
    kept = np.flatnonzero(agree).tolist()
    # each difference as Python prints it: float64 subtraction is Python's (an integer statistic's is
    # printed as integers subtract, below)
    texts = iter(float_reprs((npu[kept] - bench[kept]).ravel().tolist()))
    quads = list(map(FloatReprs, zip(texts, texts, texts, texts, strict=True)))  # a row's four cells
    constants = {d: _constants(d) for d in {dtypes[k] for k in kept}}
    numels: dict[object, int] = {}  # by shape: a pair repeats a few hundred
    shared: dict[int, int] = {}  # by the shape's list: most records share the one their reader made
    # two integers: no '.0' (looked for row by row only where each side holds one somewhere)
    integers = all(map(_holds_integer, sides))
    passed = Status.PASS
    for j, k in enumerate(kept):
        n, b = npu_records[k], bench_records[k]
        assert n is not None and b is not None
        shape = n.shape_raw
        numel = shared.get(id(shape))
        if numel is None:
            key = tuple(shape) if type(shape) is list else shape
            numel = numels.get(key)
            if numel is None:
                numel = numels[key] = max(1, n.numel)
            shared[id(shape)] = numel
        reason, floor, exact = constants[dtypes[k]]
        errors = ErrorMeasures(
            rel[k], extremes[k], npu_norm[k], bench_norm[k], numel, floor, 0, 0, exact, True
        )
        cells: tuple[str, ...] = quads[j]
        if integers and int in map(type, n.stats) and int in map(type, b.stats):
            cells = tuple(map(str, map(sub, n.stats, b.stats)))
        out[k] = Result(cells, "", "", passed, reason, errors=errors)
    return out


def _holds_integer(records: Sequence[TensorRecord | None]) -> bool:
    """Whether any statistic of the records is an integer (one look at them all, not one a row)."""
    return int in set(map(type, chain.from_iterable(r.stats for r in records if r is not None)))


def _stats_array(records: Sequence[TensorRecord | None]) -> np.ndarray:
    """The records' four statistics a row, as float64 (each integer one a float exactly)."""
    values = chain.from_iterable(r.stats for r in records)  # type: ignore[union-attr]
    return np.fromiter(values, dtype=np.float64, count=4 * len(records)).reshape(len(records), 4)


def _constants(dtype: str) -> tuple[Agreed, float, bool]:
    """What the rows of one dtype share: the reason they pass, the noise floor, whether exact."""
    exact, atol, rtol = stat_tolerance(dtype, dtype)
    return agreed(STAT_NAMES, exact, atol, rtol), floor_of(dtype, dtype), exact_dtype(dtype)


def _ratios(diff: np.ndarray, absb: np.ndarray) -> np.ndarray:
    """:func:`~ptdbg_tui.compare.metrics.errors.stats_errors`' estimates: each statistic's difference
    over its scale (the l2norm's own, else the bench's largest of max, min and mean)."""
    magnitude = absb[:, :3].max(axis=1)
    scale = np.column_stack([magnitude, magnitude, magnitude, absb[:, 3]])
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(scale > 0, diff / np.where(scale > 0, scale, 1.0), np.where(diff == 0, 0.0, np.inf))


def _largest(ratio: np.ndarray) -> np.ndarray:
    """The largest of each row's ratios (0 at least)."""
    largest: np.ndarray = np.maximum(ratio.max(axis=1), 0.0)
    return largest
