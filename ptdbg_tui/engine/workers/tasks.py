"""One row's tensor comparison as a picklable task, run by the worker processes.

:func:`run_task` reads both tensor files (``.npy`` or ``.pt``) chunk by chunk through
:mod:`ptdbg_tui.formats.tensorfile`, feeds the metric pass of :mod:`ptdbg_tui.compare.metrics` and
never raises: a missing, truncated or odd file becomes an ERROR result whose message lands in
Err_message. Rows without tensor files are settled by :mod:`ptdbg_tui.compare.metrics.settled`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ptdbg_tui.compare.metrics.accumulator import (
    MetricAccumulator,
    MetricState,
    compare_arrays,
    dtype_caveats,
    precheck,
)
from ptdbg_tui.compare.metrics.cells import MSG_TRANSPOSED, join_messages
from ptdbg_tui.compare.metrics.scratch import borrow, give_back
from ptdbg_tui.compare.metrics.settled import add_fuzzy, error_result
from ptdbg_tui.compare.metrics.verdict import with_caveat
from ptdbg_tui.compare.model import Result, Row
from ptdbg_tui.compare.notices import CompareFailed, DtypeHeld, Error, Uncompared
from ptdbg_tui.compare.reasons import Fixed
from ptdbg_tui.compare.report.notice_words import dtype_held_text, worker_fault_text
from ptdbg_tui.formats.tensorfile import (
    FILE_ERRORS,
    TensorHeader,
    data_path,
    iter_chunks,
    load_tensor,
    read_tensor,
    stored_dtypes,
)

#: Elements read per file access in a task (the metric pass splits them further).
READ_CHUNK = 1 << 18


#: Files up to this size are read whole, in one go; larger ones chunk by chunk into reused buffers.
WHOLE_BYTES = 64 << 10


@dataclass(frozen=True, slots=True)
class CompareTask:
    """Everything a worker needs to compare one matched row; cheap to pickle."""

    npu_path: str | None
    bench_path: str | None
    npu_dtype: str
    bench_dtype: str
    npu_shape: tuple[int, ...]
    bench_shape: tuple[int, ...]
    fuzzy: bool = False
    histogram: bool = True
    nbytes: int = 0  # estimated bytes of both files, for scheduling
    transposed: bool = False  # the NPU file holds the bench tensor transposed (Row.transposed)


def _itemsize(dtype: str) -> int:
    name = dtype.rsplit(".", 1)[-1]
    for prefix, size in (
        ("float16", 2),
        ("half", 2),
        ("bool", 1),
        ("int8", 1),
        ("uint8", 1),
        ("int16", 2),
        ("uint16", 2),
        ("int32", 4),
        ("float64", 8),
        ("double", 8),
        ("int64", 8),
        ("uint64", 8),
    ):
        if name.startswith(prefix):
            return size
    return 4  # float32, uint32, bfloat16 and float8 (stored as float32), scalars


def task_for(
    row: Row, npu_dir: Path | None, bench_dir: Path | None, *, histogram: bool = True
) -> CompareTask:
    """The task comparing a matched row's two tensor files (``None`` dirs: a summary-only dump)."""
    npu, bench = row.npu, row.bench
    if npu is None or bench is None:
        raise ValueError(f"row {row.name} is not matched; use unmatched_result()")
    return CompareTask(
        npu_path=None if npu_dir is None else data_path(npu_dir, npu),
        bench_path=None if bench_dir is None else data_path(bench_dir, bench),
        npu_dtype=npu.dtype,
        bench_dtype=bench.dtype,
        npu_shape=npu.shape,
        bench_shape=bench.shape,
        fuzzy=row.fuzzy,
        histogram=histogram,
        nbytes=npu.numel * _itemsize(npu.dtype) + bench.numel * _itemsize(bench.dtype),
        transposed=row.transposed,
    )


class ShapeMismatch(Exception):
    """A tensor file holds another shape than its record says."""


def _check_shape(path: str, header_shape: tuple[int, ...], recorded_shape: tuple[int, ...]) -> None:
    if header_shape != recorded_shape:
        raise ShapeMismatch(
            f"Dump file {Path(path).name} holds shape {list(header_shape)} but the dump "
            f"records {list(recorded_shape)}."
        )


def _headers(task: CompareTask) -> tuple[TensorHeader, np.ndarray | None, TensorHeader, np.ndarray | None]:
    assert task.npu_path is not None and task.bench_path is not None
    hn, n = read_tensor(task.npu_path, WHOLE_BYTES)
    hb, b = read_tensor(task.bench_path, WHOLE_BYTES)
    _check_shape(task.npu_path, hn.shape, task.npu_shape)
    _check_shape(task.bench_path, hb.shape, task.bench_shape)
    return hn, n, hb, b


def _no_dirs() -> Result:
    return error_result(worker_fault_text(Uncompared.NO_TENSOR_DIRS))


def _compare_files(task: CompareTask) -> Result:
    if task.npu_path is None or task.bench_path is None:
        return _no_dirs()
    hn, n, hb, b = _headers(task)
    return _with_notes(_compare_data(task, hn, n, hb, b), _dtype_notes(task, hn, hb))


def _dtype_notes(task: CompareTask, hn: TensorHeader, hb: TensorHeader) -> list[str]:
    assert task.npu_path is not None and task.bench_path is not None
    return [
        note
        for note in (
            _dtype_note(task.npu_path, hn.dtype, task.npu_dtype),
            _dtype_note(task.bench_path, hb.dtype, task.bench_dtype),
        )
        if note
    ]


def _with_notes(result: Result, notes: Sequence[str]) -> Result:
    if notes:  # the recorded dtype stays the authority (spec: FAQ 14), but the user learns of it
        result.message = join_messages([result.message, *notes])
        result.status, result.reason = with_caveat(result.status, result.reason, Fixed.FILE_DTYPE)
    return result


def _dtype_note(path: str, held: np.dtype, recorded: str) -> str:
    if _holds_recorded(held, recorded):
        return ""
    return dtype_held_text(DtypeHeld(file=Path(path).name, held=held.name, recorded=recorded))


@functools.lru_cache(maxsize=256)
def _holds_recorded(held: np.dtype, recorded: str) -> bool:
    """Whether a file of ``held`` data may stand for a tensor recorded as ``recorded`` (asked twice a
    tensor: a dtype's name alone costs microseconds)."""
    expected = stored_dtypes(recorded)
    return expected is None or held.name in expected


def _compare_transposed(task: CompareTask) -> Result:
    """The NPU tensor read whole and transposed (a 2-D weight's gradient: its rows are the bench's
    columns, so no chunk of one file lines up with a chunk of the other)."""
    assert task.npu_path is not None and task.bench_path is not None
    result = compare_arrays(
        np.transpose(load_tensor(task.npu_path)),
        load_tensor(task.bench_path),
        task.npu_dtype,
        task.bench_dtype,
        histogram=task.histogram,
    )
    result.message = join_messages([result.message, MSG_TRANSPOSED])
    return result


def _compare_data(
    task: CompareTask, hn: TensorHeader, n: np.ndarray | None, hb: TensorHeader, b: np.ndarray | None
) -> Result:
    if task.transposed:
        return _compare_transposed(task)
    if n is not None and b is not None:
        return compare_arrays(n, b, task.npu_dtype, task.bench_dtype, histogram=task.histogram)
    if hn.fortran or hb.fortran:  # rare: element order differs from the file order
        assert task.npu_path is not None and task.bench_path is not None
        return compare_arrays(
            load_tensor(task.npu_path),
            load_tensor(task.bench_path),
            task.npu_dtype,
            task.bench_dtype,
            histogram=task.histogram,
        )
    pre = precheck(hn.shape, hb.shape, hn.dtype, hb.dtype, task.npu_dtype, task.bench_dtype)
    if isinstance(pre, Result):
        return pre
    return _accumulate(task, hn, hb, 0, math.prod(hn.shape)).result(
        hn.shape, task.npu_dtype, task.bench_dtype, pre
    )


def _accumulate(task: CompareTask, hn: TensorHeader, hb: TensorHeader, start: int, stop: int) -> MetricState:
    """The metric state of the elements ``[start, stop)`` (``start`` a multiple of READ_CHUNK)."""
    assert task.npu_path is not None and task.bench_path is not None
    acc = MetricAccumulator(math.prod(hn.shape), hb.dtype, task.histogram, offset=start)
    bn, bb = borrow(READ_CHUNK * hn.dtype.itemsize), borrow(READ_CHUNK * hb.dtype.itemsize)
    try:
        for n_chunk, b_chunk in zip(
            iter_chunks(task.npu_path, hn, READ_CHUNK, bn, start, stop),
            iter_chunks(task.bench_path, hb, READ_CHUNK, bb, start, stop),
            strict=True,
        ):
            acc.add(n_chunk, b_chunk)
    finally:
        give_back(bn, bb)
    return acc.finish()


def part_bounds(task: CompareTask, part_bytes: int) -> list[tuple[int, int]]:
    """Element ranges splitting a big task into parts of about ``part_bytes`` of both files (one
    range for a small one); each starts at a multiple of READ_CHUNK so that the parts' states merge
    into exactly one pass's (:meth:`~ptdbg_tui.compare.metrics.MetricState.merge`)."""
    size = math.prod(task.npu_shape)
    per = max(1, task.nbytes // max(1, size))
    step = max(READ_CHUNK, part_bytes // per // READ_CHUNK * READ_CHUNK)
    if size <= step or task.npu_shape != task.bench_shape or task.transposed:
        return [(0, size)]
    return [(a, min(a + step, size)) for a in range(0, size, step)]


#: What a part of a task gives: the final Result (an error, a small or odd file compared whole by the
#: first part), the part's metric state, or nothing (a later part of a task the first part settled).
PartOutcome = Result | MetricState | None


def run_part(task: CompareTask, start: int, stop: int) -> PartOutcome:
    """Compare the elements ``[start, stop)`` of a task split by :func:`part_bounds`; never raises."""
    try:
        if task.npu_path is None or task.bench_path is None:
            return _no_dirs() if start == 0 else None
        hn, n, hb, b = _headers(task)
        whole = (n is not None and b is not None) or hn.fortran or hb.fortran or task.transposed
        pre = precheck(hn.shape, hb.shape, hn.dtype, hb.dtype, task.npu_dtype, task.bench_dtype)
        if whole or isinstance(pre, Result):
            if start > 0:
                return None
            if whole or not isinstance(pre, Result):
                return run_task(task)
            return _settle(task, _with_notes(pre, _dtype_notes(task, hn, hb)))
        state = _accumulate(task, hn, hb, start, stop)
        if start == 0:
            state.notes = _dtype_notes(task, hn, hb)
        return state
    except Exception as e:
        return _settle(task, _failure(e))


def finish_parts(task: CompareTask, parts: Sequence[PartOutcome]) -> Result:
    """The task's Result from its parts' outcomes, in order (the first final Result wins)."""
    final = next((p for p in parts if isinstance(p, Result)), None)
    if final is not None:
        return final
    states = [p for p in parts if isinstance(p, MetricState)]
    if not states:
        return _settle(task, error_result(worker_fault_text(Uncompared.NO_PART)))
    merged = states[0]
    for later in states[1:]:
        merged.merge(later)
    caveats = dtype_caveats(task.npu_dtype, task.bench_dtype)
    result = merged.result(task.npu_shape, task.npu_dtype, task.bench_dtype, caveats)
    return _settle(task, _with_notes(result, merged.notes))


def _failure(e: Exception) -> Result:
    if isinstance(e, (*FILE_ERRORS, ShapeMismatch)):
        result = error_result(str(e))
        result.missing_data = getattr(e, "missing", False)
        return result
    if isinstance(e, MemoryError):
        return error_result(worker_fault_text(Uncompared.OUT_OF_MEMORY))
    return error_result(worker_fault_text(CompareFailed(error=Error.of(e))))


def _settle(task: CompareTask, result: Result) -> Result:
    return add_fuzzy(result) if task.fuzzy else result


def run_task(task: CompareTask) -> Result:
    """Compare one row's tensors; never raises (problems become an ERROR result)."""
    try:
        result = _compare_files(task)
    except Exception as e:  # a worker must report, not die: the run goes on with the other rows
        result = _failure(e)
    return _settle(task, result)
