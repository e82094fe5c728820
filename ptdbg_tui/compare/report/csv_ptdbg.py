"""``compare_result_<YYYYmmddHHMMSS>.csv``: the original's columns and cells (docs/compare.md#the-ptdbg-csv).

Rows are built as the original builds its pandas DataFrame (raw stats values, the list shape, metric
strings) and printed as pandas' ``to_csv`` prints that frame: float repr, ``[]`` for empty stats, an
empty cell for a JSON NaN, ``inf``, and a column of numbers only becomes floats where it mixes
integers with floats or missing values (``1.0``). The csv module does the printing: pandas' import
alone cost a compare a third of a second. Bench-only rows, which the original drops, are written with
``Nan`` NPU fields.
"""

from __future__ import annotations

import csv
import io
import itertools
import math
import operator
import os
import re
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TextIO, TypeVar, cast

from ptdbg_tui.compare.metrics.cells import MSG_PENDING, NAN
from ptdbg_tui.compare.metrics.settled import FULL_CELLS, SUMMARY_CELLS, stats4
from ptdbg_tui.compare.model import FloatReprs, Row
from ptdbg_tui.formats.file_writes import FILE_MODE
from ptdbg_tui.formats.float_texts import float_reprs
from ptdbg_tui.formats.records import Frame, TensorRecord
from ptdbg_tui.formats.untrusted import csv_column

_NAMES = [
    "NPU Name",
    "Bench Name",
    "NPU Tensor Dtype",
    "Bench Tensor Dtype",
    "NPU Tensor Shape",
    "Bench Tensor Shape",
]
#: The two sides' statistics, as both tools' CSVs name them.
STAT_COLUMNS = [
    "NPU max",
    "NPU min",
    "NPU mean",
    "NPU l2norm",
    "Bench max",
    "Bench min",
    "Bench mean",
    "Bench l2norm",
]
FULL_HEADER = [
    *_NAMES,
    "Cosine",
    "MaxAbsErr",
    "MaxRelativeErr",
    "One Thousandth Err Ratio",
    "Five Thousandths Err Ratio",
    *STAT_COLUMNS,
    "Accuracy Reached or Not",
    "Err_message",
]
SUMMARY_HEADER = [*_NAMES, "Max diff", "Min diff", "Mean diff", "L2norm diff", *STAT_COLUMNS]
STACK_COLUMN = "NPU_Stack_Info"
#: Cells, a sequence per row or per column; a named column of cells, one per row; the folder a CSV goes to.
Cells = Sequence[Sequence[object]]
Column = tuple[str, Sequence[object]]
Folder = str | os.PathLike[str]
T = TypeVar("T")
#: The name of this CSV dialect (``--format``).
CSV_PTDBG = "ptdbg"


def header(stack_mode: bool, summary: bool) -> list[str]:
    return [*(SUMMARY_HEADER if summary else FULL_HEADER), *([STACK_COLUMN] if stack_mode else [])]


def _number(cell: str) -> object:
    """A summary diff cell back to the number the original put in its DataFrame."""
    if cell == "":
        return math.nan
    if cell == NAN:  # float() would take it for a NaN
        return cell
    if "." not in cell:  # int() takes no '.': most cells skip its exception
        try:
            return int(cell)
        except ValueError:
            pass
    try:
        return float(cell)
    except ValueError:
        return cell


def _numbers(cells: Sequence[str]) -> list[object]:
    """:func:`_number` of each cell (most are floats: read without a call each)."""
    try:
        return [float(c) if "." in c else _number(c) for c in cells]
    except ValueError:  # a cell with a '.' that is no number stays text
        return [_number(c) for c in cells]


class Printed(list[object]):
    """A column's cells as the CSV prints them already (:func:`printed_column` and :func:`csv_column`
    done)."""


def _diff_columns(metrics: Sequence[tuple[str, ...]], width: int) -> list[Sequence[object]]:
    """The summary diff columns (no row pending), each as :func:`printed_column` prints the numbers its
    cells are (:func:`_numbers`). A row whose cells are floats' reprs (:class:`FloatReprs`: a pair's
    nearly every row) prints its cells as they are, not read back and printed again; the other rows'
    are printed among a float that stands for those (a column of floats and integers prints each
    integer as a float)."""
    columns = _transposed(metrics, width)
    plain = [i for i, cells in enumerate(metrics) if type(cells) is not FloatReprs]
    if len(plain) == len(metrics):
        return [_numbers(column) for column in columns]
    out: list[Sequence[object]] = []
    for column in columns:
        values: list[object] = [_number(column[i]) for i in plain]
        printed = printed_column(csv_column([*values, 0.0]))  # 0.0: the floats of the other rows
        cells = Printed(column)
        for i, text in zip(plain, printed, strict=False):
            cells[i] = text
        out.append(cells)
    return out


def _stats(record: TensorRecord | None) -> list[object]:
    """:func:`stats4` (most records: their four statistics as they are)."""
    if record is not None and len(record.stats) == 4 and record.dump_step <= 100:
        return record.stats
    return stats4(record)


def _stack_cells(rows: Sequence[Row]) -> list[object]:
    """The stack column: a call's frames as ``str()`` prints their lists, each stack printed once (an
    LLM's layers repeat theirs: printing each cost its CSV a tenth of its time)."""
    printed: dict[tuple[Frame, ...], str] = {}
    out: list[object] = []
    for row in rows:
        if row.stack is None:
            out.append(None)
            continue
        key = tuple(row.stack.frames)
        text = printed.get(key)
        if text is None:
            text = printed[key] = str(list(map(list, key)))
        out.append(text)
    return out


def csv_columns(
    rows: Sequence[Row], stack_mode: bool = False, summary: bool = False
) -> list[Sequence[object]]:
    """The CSV's cells as raw values, a list per column in :func:`header` order (built column by
    column: a pair holds ~10,000 rows)."""
    npu = [r.npu for r in rows]
    bench = [r.bench for r in rows]
    columns: list[Sequence[object]] = [
        [n.name if n else NAN for n in npu],
        [b.name if b else NAN for b in bench],
        [n.dtype if n else NAN for n in npu],
        [b.dtype if b else NAN for b in bench],
        _shapes(npu),
        _shapes(bench),
    ]
    results = [r.result for r in rows]
    width = SUMMARY_CELLS if summary else FULL_CELLS
    metrics = [result.cells if result else ("",) * width for result in results]
    if summary and any(map(operator.is_, results, itertools.repeat(None))):  # a pending row's cells stay text
        parsed = [
            [_number(c) for c in cells] if result else cells
            for result, cells in zip(results, metrics, strict=True)
        ]
        columns += _transposed(parsed, width)
    elif summary:
        columns += _diff_columns(metrics, width)
    else:
        columns += _transposed(metrics, width)
    columns += _transposed([_stats(n) for n in npu], 4) + _transposed([_stats(b) for b in bench], 4)
    if not summary:
        columns.append([result.accuracy if result else "" for result in results])
        columns.append([result.message if result else MSG_PENDING for result in results])
    if stack_mode:
        columns.append(_stack_cells(rows))
    return columns


def _shapes(records: Sequence[TensorRecord | None]) -> list[object]:
    """The shape cells: a tensor's list as ``str()`` prints it (a pair repeats a few hundred shapes,
    printed once each), a Python value's ``"[]"`` as it is."""
    printed: dict[tuple[object, ...], str] = {}
    out: list[object] = []
    for rec in records:
        shape = NAN if rec is None else rec.shape_raw
        if type(shape) is list:
            try:
                key = tuple(shape)
                text = printed.get(key)
            except TypeError:  # a list in the list: not a shape the tools write, printed as it is
                key, text = None, str(shape)
            if text is None:
                text = printed[key] = str(shape)  # type: ignore[index]
            shape = text
        out.append(shape)
    return out


def _transposed(cells: Sequence[Sequence[T]], width: int) -> list[list[T]]:
    return [list(column) for column in zip(*cells, strict=True)] if cells else [[] for _ in range(width)]


def _claim(tmp: Path, names: Iterable[Path], tries: int) -> Path:
    """Give ``tmp`` the first free name of the first ``tries`` of ``names``, never replacing an existing
    file (the names are made as they are tried: the first is nearly always free)."""
    for name in itertools.islice(names, tries):
        try:
            os.link(tmp, name)
        except FileExistsError:
            continue
        except OSError:  # no hard links here: exclusive create, then replace the placeholder
            try:
                os.close(os.open(name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, FILE_MODE))
            except FileExistsError:
                continue
            os.replace(tmp, name)
            return name
        tmp.unlink()
        return name
    raise FileExistsError(f"no free file name among {tries} candidates")


def write_csv(
    rows: Sequence[Row],
    out_dir: str | os.PathLike[str],
    *,
    stack_mode: bool = False,
    summary: bool = False,
    suffix: str = "",
    extra: Sequence[Column] = (),
) -> Path:
    """Write the CSV (all rows, unmatched ones included) and return its path; ``extra`` columns go
    after the original's, which its tools then still read.

    A file of the same second is never overwritten: ``_1``, ``_2`` … are appended instead.
    """
    names = [*header(stack_mode, summary), *(name for name, _ in extra)]
    columns = [*csv_columns(rows, stack_mode, summary), *(list(cells) for _, cells in extra)]
    return write_columns(names, columns, out_dir, suffix)


#: Integers a pandas column of numbers holds as such (int64, or uint64 where none is negative).
_INT_RANGE = (-(1 << 63), 1 << 64)


def printed_column(values: Sequence[object]) -> Sequence[object]:
    """One column's cells as pandas prints them (the csv module then writes ``str()`` of each, and
    ``None`` as an empty cell): a column of numbers that mixes integers with floats or missing
    values is a float column (``repr`` of each as a float); a missing value is an empty cell."""
    kinds = set(map(type, values))
    numbers = kinds <= {int, float, type(None)} and kinds & {int, float} and kinds != {int}
    if numbers and (
        int not in kinds or all(_INT_RANGE[0] <= v < _INT_RANGE[1] for v in values if type(v) is int)
    ):
        total = sum(values) if type(None) not in kinds else math.nan  # type: ignore[arg-type]
        if total == total:  # no NaN (inf - inf, which looks like one, takes the way below)
            # a column of floats (nearly every one) as it is, not each float again
            return float_reprs(values if kinds == _FLOAT else list(map(float, values)))  # type: ignore[arg-type]
        # a missing value: None or a float NaN
        texts = float_reprs([math.nan if v is None else float(v) for v in values])  # type: ignore[arg-type]
        return [None if t == _NAN_REPR else t for t in texts]
    if float in kinds:  # floats among other cells: each float's repr (a NaN's an empty cell)
        at = [i for i, v in enumerate(values) if type(v) is float]
        printed: list[object] = list(values)
        for i, text in zip(at, float_reprs([values[i] for i in at]), strict=True):  # type: ignore[misc]
            printed[i] = None if text == _NAN_REPR else text
        return printed
    return values


_NAN_REPR = repr(math.nan)
_FLOAT = {float}


def write_table(columns: Sequence[str], cells: Cells, out_dir: Folder, suffix: str = "") -> Path:
    """:func:`write_columns` of cells given row by row."""
    return write_columns(columns, _transposed(cells, len(columns)), out_dir, suffix)


def write_columns(names: Sequence[str], columns: Cells, out_dir: Folder, suffix: str = "") -> Path:
    """``out_dir/compare_result<suffix>_<YYYYmmddHHMMSS>.csv`` of these columns, printed as pandas prints
    them, written under a temporary name and then given the first free name."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    printed = [  # no formula from a dump
        column if type(column) is Printed else printed_column(csv_column(column)) for column in columns
    ]
    stamp = time.strftime("%Y%m%d%H%M%S", time.localtime())
    fd, tmp_name = tempfile.mkstemp(prefix=".compare_result", suffix=".csv.tmp", dir=out)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            _write_cells(f, names, printed)
        os.chmod(tmp, FILE_MODE)
        base = f"compare_result{suffix}_{stamp}"
        candidates = (out / (base + (f"_{k}" if k else "") + ".csv") for k in itertools.count())
        return _claim(tmp, candidates, 1000)
    finally:
        tmp.unlink(missing_ok=True)


def _write_cells(f: TextIO, names: Sequence[str], printed: Sequence[Sequence[object]]) -> None:
    """The header and the columns' cells as the csv module writes them (pandas' dialect: minimal
    quoting), joined a column at a time (the csv module's own loop costs a CSV of statistics a fifth of
    its time); where a cell holds a character the csv module treats otherwise, by the csv module."""
    columns = [names, *printed] if len(names) > 1 else []
    texts = [t for t in map(_texts, columns) if t is not None]
    if not columns or len(texts) < len(columns):
        writer = csv.writer(f, lineterminator=os.linesep)
        writer.writerow(names)
        writer.writerows(zip(*printed, strict=True))
        return
    lines = [",".join(texts[0]), *map(",".join, zip(*texts[1:], strict=True))]
    f.write(os.linesep.join(lines) + os.linesep)


def _texts(column: Sequence[object]) -> list[str] | None:
    """Each cell's text as the csv module writes it (``str()``, ``None`` empty, quoted where it holds
    a delimiter, a quote or a line end); ``None`` where a cell holds a character it treats otherwise."""
    kinds = set(map(type, column))
    texts: list[str]
    if kinds <= _STR:  # the cells' types checked at once, not each cell's
        texts = cast("list[str]", list(column))
    elif kinds <= _STR_OR_NONE:
        texts = cast("list[str]", ["" if v is None else v for v in column])
    else:
        texts = [v if type(v) is str else "" if v is None else str(v) for v in column]
    joined = "".join(texts)
    found = {c for c in _SPECIALS if c in joined}
    if not found:  # nearly every column: a search over the whole of it
        return texts
    if not found <= _QUOTED:
        return None
    quoted: dict[str, str] = {}  # a column repeats its values (shapes): each quoted once
    for t in set(texts):
        quoted[t] = f'"{t.replace(_QUOTE, _QUOTE * 2)}"' if _SPECIAL.search(t) else t
    return [quoted[t] for t in texts]


_QUOTE = '"'
_STR = {str}
_STR_OR_NONE = {str, type(None)}


def _csv_quirks() -> tuple[frozenset[str], frozenset[str]]:
    """The ASCII characters the csv module (minimal quoting, this platform's line end) writes other
    than as themselves, and those of them it only quotes: the rules differ between Python versions."""
    special, quoted = set(), set()
    for c in map(chr, range(128)):
        cell = f"a{c}b"
        buf = io.StringIO(newline="")
        try:
            csv.writer(buf, lineterminator=os.linesep).writerow([cell, "x"])
        except csv.Error:
            special.add(c)
            continue
        if buf.getvalue() != f"{cell},x{os.linesep}":
            special.add(c)
            if buf.getvalue() == f'"{cell.replace(_QUOTE, _QUOTE * 2)}",x{os.linesep}':
                quoted.add(c)
    return frozenset(special), frozenset(quoted)


_SPECIALS, _QUOTED = _csv_quirks()
_SPECIAL = re.compile("[" + re.escape("".join(sorted(_SPECIALS))) + "]" if _SPECIALS else "(?!)")
