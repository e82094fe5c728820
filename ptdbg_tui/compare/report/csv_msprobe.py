"""msprobe's compare CSV (``msprobe compare``, 26.x): its columns and cell formats in its three modes,
so that a user can diff ours against theirs (docs/compare.md#the-msprobe-csv).

- tensors: Cosine, EucDist, MaxAbsErr, MaxRelativeErr, the two thousandth ratios and Data_name;
- statistics: the four ``… diff`` and ``…RelativeErr`` (``"x%"``) columns;
- md5 (its md5 and xor modes): NPU MD5 and BENCH MD5.

Every mode has the name/dtype/shape/requires_grad head, the recorded statistics (except md5),
``Requires_grad Consistent``, ``Result``, ``Err_message`` and ``NPU_Stack_Info``. ``Result`` and
``Err_message`` are msprobe's own rule's (:mod:`.msprobe_result`), not our verdict. Bench-only
rows, which msprobe drops, are written with ``N/A`` NPU fields.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

from ptdbg_tui.compare.metrics.accumulator import FLOAT_EPS
from ptdbg_tui.compare.metrics.cells import (
    MSG_COS_BENCH_ZERO,
    MSG_COS_NAN,
    MSG_COS_NPU_ZERO,
    MSG_EMPTY,
    NAN,
    UNSUPPORTED,
    fmt12,
)
from ptdbg_tui.compare.model import Result, Row
from ptdbg_tui.compare.report.csv_ptdbg import STAT_COLUMNS, Column, write_table
from ptdbg_tui.compare.report.msprobe_result import MD5, STATISTICS, TENSOR, msprobe_verdicts
from ptdbg_tui.formats.records import Frame, TensorRecord
from ptdbg_tui.formats.stats import NAN_SENTINEL, checksum

#: The name of this CSV dialect (``--format``).
CSV_MSPROBE = "msprobe"
NA = "N/A"
NO_FILE = "-1"
_HEAD = [
    "NPU Name",
    "Bench Name",
    "NPU Dtype",
    "Bench Dtype",
    "NPU Tensor Shape",
    "Bench Tensor Shape",
    "NPU Requires_grad",
    "Bench Requires_grad",
]
_TAIL = ["Requires_grad Consistent", "Result", "Err_message", "NPU_Stack_Info"]
TENSOR_HEADER = [
    *_HEAD,
    "Cosine",
    "EucDist",
    "MaxAbsErr",
    "MaxRelativeErr",
    "One Thousandth Err Ratio",
    "Five Thousandths Err Ratio",
    *STAT_COLUMNS,
    *_TAIL,
    "Data_name",
]
STATISTICS_HEADER = [
    *_HEAD,
    "Max diff",
    "Min diff",
    "Mean diff",
    "L2norm diff",
    "MaxRelativeErr",
    "MinRelativeErr",
    "MeanRelativeErr",
    "NormRelativeErr",
    *STAT_COLUMNS,
    *_TAIL,
]
MD5_HEADER = [*_HEAD, "NPU MD5", "BENCH MD5", *_TAIL]


def mode_of(rows: Sequence[Row], summary: bool) -> str:
    """msprobe's mode: tensors unless statistics only; md5 when both sides recorded checksums."""
    if not summary:
        return TENSOR
    return MD5 if any(checksummed(r) for r in rows) else STATISTICS


def checksummed(row: Row) -> bool:
    """Whether both sides recorded a checksum of the row's tensor: a pair of statistics with one such
    row was compared from checksums (msprobe's md5 mode; the report's ``(checksums)``)."""
    npu, bench = row.npu, row.bench
    return bool(npu is not None and bench is not None and npu.md5 and bench.md5 and not npu.is_scalar)


def header(mode: str) -> list[str]:
    return {TENSOR: TENSOR_HEADER, STATISTICS: STATISTICS_HEADER, MD5: MD5_HEADER}[mode]


def _text(value: object) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def _float_cell(value: object) -> str:
    """A number msprobe keeps as a float: ``Nan`` for NaN, `` inf`` for ±inf (its CSV writer's
    spreadsheet-safe text), else as Python prints it."""
    if str(value).lower() == "nan":
        return NAN
    if isinstance(value, float) and math.isinf(value):
        return " inf" if value > 0 else " -inf"
    return _text(value)


def _shape(rec: TensorRecord) -> str:
    if rec.is_none:
        return NA
    return str(rec.shape_raw)


def _grad(rec: TensorRecord | None) -> str:
    return NA if rec is None or rec.requires_grad is None else str(rec.requires_grad)


def _head(row: Row) -> list[str]:
    n, b = row.npu, row.bench
    return [
        n.name if n else NA,
        b.name if b else NA,
        NA if n is None or n.is_none else n.dtype,
        NA if b is None or b.is_none else b.dtype,
        _shape(n) if n else NA,
        _shape(b) if b else NA,
        _grad(n),
        _grad(b),
    ]


def _four(rec: TensorRecord) -> list[object]:
    """Max, Min, Mean, Norm as recorded, ``None`` where absent, msprobe's ``null``: a pkl's (the
    original's, ours: ``data_name`` None) ``"Nan"`` and ``[]`` say "not computed" (an int or 0-d
    tensor's norm, an empty or bool tensor's statistics), not a NaN value."""
    four = [*rec.stats[:4], *[None] * (4 - len(rec.stats[:4]))]
    if rec.data_name is None:
        four = [None if v == NAN_SENTINEL or v == [] else v for v in four]
    return four


def _stats(rec: TensorRecord | None) -> list[str]:
    return [NA] * 4 if rec is None else [_float_cell(v) for v in _four(rec)]


def _number(cell: str) -> str:
    """A metric cell as msprobe prints it: the float, not its 12 decimals; ``unsupported`` for none."""
    if cell in ("", NAN):
        return UNSUPPORTED
    try:
        return _float_cell(float(cell))
    except ValueError:
        return cell


#: msprobe rounds a Cosine above this to 6 decimals (``CompareConst.COSINE_THRESHOLD``); below it
#: keeps 12. ptdbg's rule, a Cosine above 0.99999 printed as 1.0, would hide a 0.999996.
MSPROBE_COS_ROUND_ABOVE = 0.9999


def _cosine(cell: str, cos: float | None) -> str:
    """msprobe's Cosine cell: 12 decimals, or 6 above 0.9999 (``alg_cosine_similarity``)."""
    if cos is None or cell in ("", NAN, UNSUPPORTED):
        return _number(cell)
    value = float(f"{cos:.12f}")
    if value > MSPROBE_COS_ROUND_ABOVE:
        value = round(value, 6)
    return repr(value)


#: Recorded dtypes msprobe's relative error divides in float32 (numpy's result type of the two arrays
#: and float32; bfloat16 is read as float32); any other (float64, int, bool) makes it float64.
_FLOAT32_WIDE = frozenset({"torch.float16", "torch.half", "torch.bfloat16", "torch.float32", "torch.float"})
_EPS32 = 2.0**-23


def _max_relative(r: Result, cell: str, npu_dtype: str, bench_dtype: str) -> str:
    """msprobe's MaxRelativeErr. Both replace a bench zero by an eps, ours by the bench dtype's (the
    original's rule: float16's 9.8e-4 for float16), msprobe by that of the type it divides in
    (``get_relative_err``: float32's 1.2e-7 for float16): where the largest ratio is at a bench zero,
    msprobe's is |npu| / its eps. Its eps is never above ours, so the largest of ours and that is its."""
    if not r.max_abs_bench_zero or r.max_rel is None or cell in (NAN, UNSUPPORTED, NA):
        return _number(cell)
    eps = _EPS32 if {npu_dtype, bench_dtype} <= _FLOAT32_WIDE else FLOAT_EPS
    return _number(fmt12(max(r.max_rel, r.max_abs_bench_zero / eps)))


def _nan_scalar(n: TensorRecord, b: TensorRecord) -> bool:
    """A 0-d tensor pair whose difference is NaN: msprobe computes no Cosine, ratios or EucDist of a
    0-d tensor, and its MaxAbsErr and MaxRelativeErr of NaN are ``Nan``."""
    if n.shape_raw != [] or n.is_scalar:
        return False
    x, y = n.stat(0), b.stat(0)
    return x is not None and y is not None and math.isnan(x - y)


def _tensor_cells(row: Row) -> list[str]:
    r = row.result
    n, b = row.npu, row.bench
    if r is None or n is None or b is None or n.data_file is None or b.data_file is None:
        return [UNSUPPORTED] * 6
    if n.is_scalar and b.is_scalar:  # a Python value: msprobe saves no tensor of it and compares none
        return [UNSUPPORTED] * 6
    if MSG_EMPTY in r.message:  # an empty tensor: msprobe's error flag, no metric at all
        return [UNSUPPORTED] * 6
    if _nan_scalar(n, b):
        return [UNSUPPORTED, UNSUPPORTED, NAN, NAN, UNSUPPORTED, UNSUPPORTED]
    cos, mae, _, r1, r5 = (_number(c) for c in r.cells)
    rel = _max_relative(r, r.cells[2], n.dtype, b.dtype)
    cos = _cosine(r.cells[0], r.cosine)
    if r.cells[0] == NAN and any(m in r.message for m in (MSG_COS_NPU_ZERO, MSG_COS_BENCH_ZERO, MSG_COS_NAN)):
        cos = NAN  # msprobe's too: no cosine of an all-zero or a NaN tensor
    euc = repr(r.euc_dist) if r.euc_dist is not None and cos != UNSUPPORTED else UNSUPPORTED
    if cos == NA:  # NaN/Inf at different positions: msprobe computes nothing
        euc = NA
    return [cos, euc, mae, rel, r1, r5]


def _kind(v: object) -> str:
    """A statistic's class in msprobe's statistics diff: num, nan, inf (either sign), N/A or other."""
    if isinstance(v, bool) or v is None:
        return "other"
    if str(v) == NA:
        return NA
    try:
        x = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "other"
    return "nan" if math.isnan(x) else "num" if math.isfinite(x) else "inf"


def _diff(n: object, b: object) -> tuple[str, str]:
    """``npu - bench`` and ``|diff / bench| × 100 %`` as msprobe prints them: ``0`` for values
    written alike, ``inf`` for a bench of 0, the sign of an infinite difference, ``Nan``, and
    ``Diff`` for values that are no numbers (booleans, ``None``)."""
    if str(n) == str(b):
        return "0", "0"
    kinds = {_kind(n), _kind(b)}
    for word, kind in ((NA, NA), ("Diff", "other"), ("Nan", "nan")):
        if kind in kinds:
            return word, word
    diff = float(n) - float(b)  # type: ignore[arg-type]
    if kinds != {"num"}:
        return _text(diff), _text(diff)  # inf or -inf
    rel = "inf" if float(b) == 0 else f"{abs(diff / float(b)) * 100!r}%"  # type: ignore[arg-type]
    return _text(diff), rel


def _statistics_cells(row: Row) -> list[str]:
    n, b = row.npu, row.bench
    if n is None or b is None:
        return [NA] * 8
    pairs = [_diff(x, y) for x, y in zip(_four(n), _four(b), strict=True)]
    return [d for d, _ in pairs] + [r for _, r in pairs]


def _frame_text(frame: Frame) -> str:
    path, line, func, source = frame
    if not line:
        return path
    return f"File {path}, line {line}, in {func}, \n {source or ''}"


def _stack(row: Row) -> str:
    return str([_frame_text(f) for f in row.stack.frames]) if row.stack is not None else NA


def _consistent(row: Row) -> str:
    """Requires_grad Consistent: equal, or a side that does not say (a paired record of a tool that
    does not record it) agrees."""
    n, b = row.npu, row.bench
    grads = (n.requires_grad if n else None, b.requires_grad if b else None)
    return str(grads[0] == grads[1] or (row.matched and None in grads))


def _md5(rec: TensorRecord | None) -> str:
    """msprobe's MD5 cell: the recorded checksum. A pkl (the original's, ours) records none of a Python
    value; msprobe's compare computes its own values' at compare time (``CRC-32(str(value))``), and so
    does this for a pkl's, so that equal values pass in a mixed pair."""
    if rec is None:
        return NA
    if rec.md5:
        return rec.md5
    if rec.data_name is None and rec.is_scalar and rec.stats:
        return checksum(str(rec.stats[0]).encode())
    return NA


def _data_name(rec: TensorRecord | None) -> str:
    if rec is None:
        return NA
    return rec.data_file or NO_FILE


def csv_row(row: Row, mode: str) -> list[str]:
    """One line in :func:`header` order, Result and Err_message left empty (:func:`csv_rows` fills them)."""
    cells = _head(row)
    if mode == TENSOR:
        cells += _tensor_cells(row)
    elif mode == STATISTICS:
        cells += _statistics_cells(row)
    else:
        cells += [_md5(row.npu), _md5(row.bench)]
    if mode != MD5:
        cells += _stats(row.npu) + _stats(row.bench)
    cells += [_consistent(row), "", "", _stack(row)]
    if mode == TENSOR:
        cells.append(str([_data_name(row.npu), _data_name(row.bench)]))
    return cells


def csv_rows(rows: Sequence[Row], mode: str) -> list[list[str]]:
    """Every line, Result and Err_message by msprobe's rule, which judges a call's rows together."""
    columns = header(mode)
    lines = [csv_row(r, mode) for r in rows]
    verdicts = msprobe_verdicts(rows, [dict(zip(columns, line, strict=True)) for line in lines], mode)
    at = columns.index("Result")
    for line, verdict in zip(lines, verdicts, strict=True):
        line[at : at + 2] = verdict
    return lines


def write_msprobe_csv(
    rows: Sequence[Row],
    out_dir: str | os.PathLike[str],
    *,
    summary: bool = False,
    suffix: str = "",
    extra: Sequence[Column] = (),
) -> Path:
    """Write ``compare_result<suffix>_<ts>.csv`` in msprobe's columns, then the ``extra`` ones, and return
    its path."""
    mode = mode_of(rows, summary)
    cells = [[*row, *(column[i] for _, column in extra)] for i, row in enumerate(csv_rows(rows, mode))]
    return write_table([*header(mode), *(name for name, _ in extra)], cells, out_dir, suffix)
