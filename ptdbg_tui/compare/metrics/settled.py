"""The Results of rows that need no tensor data: unmatched rows, statistics, checksums (msprobe's
md5/xor modes) and Python values, settled in-process where the records are read.
"""

from __future__ import annotations

import math

import numpy as np

from ptdbg_tui.compare.metrics.accumulator import compare_scalar
from ptdbg_tui.compare.metrics.cells import (
    MSG_DTYPE,
    MSG_FUZZY,
    MSG_NO_BENCH,
    MSG_NO_NPU,
    MSG_SHAPE,
    MSG_TRANSPOSED,
    NAN,
    join_messages,
    no_data_file_message,
    no_value_message,
    overwritten_message,
    values_differ_message,
)
from ptdbg_tui.compare.metrics.errors import floor_of, stats_errors
from ptdbg_tui.compare.metrics.verdict import stats_verdict, with_caveat
from ptdbg_tui.compare.model import ErrorMeasures, Result, Row, Status
from ptdbg_tui.compare.ops import OVERWRITING_OPS
from ptdbg_tui.compare.reasons import ChecksumsDiffer, ChecksumsDifferBut, Fixed, Reason
from ptdbg_tui.formats.naming import FORWARD, INPUT, EntryName
from ptdbg_tui.formats.records import TensorRecord, stat_value

FULL_CELLS = 5


SUMMARY_CELLS = 4


def no_metrics(message: str, status: Status, reason: Reason, summary: bool) -> Result:
    """A row whose metrics are not computed: every cell (and the original's verdict) NaN, and why."""
    return Result(
        (NAN,) * (SUMMARY_CELLS if summary else FULL_CELLS), "" if summary else NAN, message, status, reason
    )


def error_result(message: str, summary: bool = False) -> Result:
    return no_metrics(message, Status.ERROR, message, summary)


def add_fuzzy(result: Result) -> Result:
    result.message = join_messages([result.message, MSG_FUZZY])
    result.status, result.reason = with_caveat(result.status, result.reason, Fixed.NAMES_DIFFER)
    return result


def stats4(record: TensorRecord | None) -> list[object]:
    """The four raw stats cells of a record: ``Nan`` where absent (legacy 3-stat, overflow dumps)."""
    if record is None or not record.has_stats:
        return [NAN] * 4
    return [*record.stats[:4], *[NAN] * (4 - len(record.stats[:4]))]


def _diff_cell(n: object, b: object) -> str:
    """The original's summary diff: ``npu - bench`` for numbers (bool too), else ``Nan``; printed
    as pandas prints it (a float NaN is an empty cell)."""
    if not (isinstance(n, (int, float)) and isinstance(b, (int, float))):
        return NAN
    value = n - b
    return "" if isinstance(value, float) and math.isnan(value) else str(value)


def summary_result(row: Row) -> Result:
    """Statistics mode: the four stat diffs and a tolerance verdict on the stats; no file access."""
    if row.npu is None or row.bench is None:
        return unmatched_result(row, summary=True)
    cells = tuple(_diff_cell(n, b) for n, b in zip(stats4(row.npu), stats4(row.bench), strict=True))
    status, reason = stats_verdict(row.npu, row.bench, row.transposed)
    messages = []
    if not row.shapes_agree:
        messages.append(MSG_SHAPE)
    if row.npu.dtype != row.bench.dtype:
        messages.append(MSG_DTYPE)
    if row.transposed:
        messages.append(MSG_TRANSPOSED)
    result = Result(
        cells,
        "",
        join_messages(messages),
        status,
        reason,
        errors=stats_errors(row.npu, row.bench, row.transposed),
    )
    return add_fuzzy(result) if row.fuzzy else result


def unmatched_result(row: Row, summary: bool = False) -> Result:
    """A row present on one side only."""
    npu_only = row.npu is not None
    message = MSG_NO_BENCH if npu_only else MSG_NO_NPU
    reason = Fixed.NPU_ONLY if npu_only else Fixed.BENCH_ONLY
    return no_metrics(message, Status.UNMATCHED, reason, summary)


def _checksum_errors(npu: TensorRecord, bench: TensorRecord, same: bool) -> ErrorMeasures | None:
    """What checksums alone say: no error, or an error of unknown size in data that must agree."""
    if npu.is_scalar or bench.is_scalar or npu.shape != bench.shape:
        return None
    return ErrorMeasures(
        0.0 if same else 1.0,
        0.0 if same else 1.0,
        1.0,
        1.0,
        max(1, npu.numel),
        floor_of(npu.dtype, bench.dtype),
        exact=True,
        from_stats=True,
    )


def checksum_result(row: Row) -> Result:
    """msprobe's md5/xor modes: equal checksums pass. Different ones fail, unless statistics were
    recorded too and agree within tolerance: then the data differs by rounding only (a warning)."""
    npu, bench = row.npu, row.bench
    assert npu is not None and bench is not None
    result = summary_result(row)
    if npu.md5 == bench.md5:
        if result.status is not Status.FAIL:  # a shape or dtype caveat stays
            result.status, result.reason = Status.PASS, Fixed.CHECKSUMS_EQUAL
        return result
    has_stats = any(v is not None for v in npu.stats) and any(v is not None for v in bench.stats)
    if not has_stats:
        result.status, result.reason = Status.FAIL, ChecksumsDiffer(npu=npu.md5, bench=bench.md5)
        result.errors = _checksum_errors(npu, bench, same=False)
    elif result.status is Status.PASS:
        result.status, result.reason = Status.WARN, ChecksumsDifferBut(why=result.reason)
    return result


def _value(record: TensorRecord) -> object:
    return record.stats[0] if record.stats else None


def value_result(row: Row) -> Result:
    """A pair without tensor files on a side: Python values (msprobe records no file for them)
    compared by value, ``null`` against ``null``, or an error naming the missing file."""
    npu, bench = row.npu, row.bench
    assert npu is not None and bench is not None
    if npu.is_none or bench.is_none:
        if npu.is_none and bench.is_none:
            return Result((NAN,) * FULL_CELLS, NAN, "", Status.PASS, Fixed.NO_VALUE_EITHER)
        message = no_value_message("NPU" if npu.is_none else "bench")
        return Result((NAN,) * FULL_CELLS, NAN, message, Status.FAIL, message)
    if not (npu.is_scalar and bench.is_scalar):
        return error_result(no_data_file_message("NPU" if npu.data_file is None else "Bench"))
    x, y = stat_value(_value(npu)), stat_value(_value(bench))
    if x is not None and y is not None:
        result = compare_scalar(np.array(x), np.array(y), npu.dtype, bench.dtype)
    elif _value(npu) == _value(bench):
        result = Result((NAN,) * FULL_CELLS, NAN, "", Status.PASS, Fixed.VALUES_EQUAL)
    else:
        message = values_differ_message(_value(npu), _value(bench))
        result = Result((NAN,) * FULL_CELLS, NAN, message, Status.FAIL, message)
    return add_fuzzy(result) if row.fuzzy else result


def overwritten_input(entry: EntryName | None) -> bool:
    """The first input of an in-place op that overwrites it: not data, so never compared."""
    return (
        entry is not None
        and entry.direction == FORWARD
        and entry.kind == INPUT
        and entry.path[:1] == (0,)
        and entry.op in OVERWRITING_OPS
    )


def overwritten_result(row: Row, summary: bool) -> Result:
    """Such an input: left out of the comparison, with the reason."""
    message = overwritten_message(row.record.call)
    return no_metrics(message, Status.PASS, message, summary)


def settled_result(row: Row, summary: bool) -> Result | None:
    """The result of a row that needs no tensor file (``summary``: statistics only), or ``None``
    when its two tensor files must be compared (see :func:`task_for`)."""
    npu, bench = row.npu, row.bench
    if npu is None or bench is None:
        return unmatched_result(row, summary)
    if overwritten_input(row.record.entry):
        return overwritten_result(row, summary)
    if summary:
        # a transposed pair's checksums differ whatever the data: its statistics judge it
        checksums = npu.md5 and bench.md5 and not (npu.is_scalar or bench.is_scalar or row.transposed)
        return checksum_result(row) if checksums else summary_result(row)
    if npu.data_file is None or bench.data_file is None:
        return value_result(row)
    return None
