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
import itertools
import math
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from ptdbg_tui.compare.metrics.cells import MSG_PENDING, NAN
from ptdbg_tui.compare.metrics.settled import FULL_CELLS, SUMMARY_CELLS, stats4
from ptdbg_tui.compare.model import Row
from ptdbg_tui.compare.report.files import FILE_MODE

_NAMES = [
    "NPU Name",
    "Bench Name",
    "NPU Tensor Dtype",
    "Bench Tensor Dtype",
    "NPU Tensor Shape",
    "Bench Tensor Shape",
]
_STATS = [
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
    *_STATS,
    "Accuracy Reached or Not",
    "Err_message",
]
SUMMARY_HEADER = [*_NAMES, "Max diff", "Min diff", "Mean diff", "L2norm diff", *_STATS]
STACK_COLUMN = "NPU_Stack_Info"
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


def _stack_cell(row: Row) -> object:
    if row.stack is None:
        return None
    return str([list(frame) for frame in row.stack.frames])


def csv_row(row: Row, stack_mode: bool = False, summary: bool = False) -> list[object]:
    """One CSV line as raw values, in :func:`header` order."""
    n, b = row.npu, row.bench
    cells: list[object] = [
        n.name if n else NAN,
        b.name if b else NAN,
        n.dtype if n else NAN,
        b.dtype if b else NAN,
        n.shape_raw if n else NAN,
        b.shape_raw if b else NAN,
    ]
    result = row.result
    if summary:
        cells += [_number(c) for c in result.cells] if result else [""] * SUMMARY_CELLS
    else:
        cells += list(result.cells) if result else [""] * FULL_CELLS
    cells += stats4(n) + stats4(b)
    if not summary:
        cells += [result.accuracy, result.message] if result else ["", MSG_PENDING]
    if stack_mode:
        cells.append(_stack_cell(row))
    return cells


def _claim(tmp: Path, names: Sequence[Path]) -> Path:
    """Give ``tmp`` the first free name, never replacing an existing file."""
    for name in names:
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
    raise FileExistsError(f"no free file name among {len(names)} candidates")


def write_csv(
    rows: Sequence[Row],
    out_dir: str | os.PathLike[str],
    *,
    stack_mode: bool = False,
    summary: bool = False,
    suffix: str = "",
) -> Path:
    """Write the CSV (all rows, unmatched ones included) and return its path.

    A file of the same second is never overwritten: ``_1``, ``_2`` … are appended instead.
    """
    return write_table(
        header(stack_mode, summary), [csv_row(r, stack_mode, summary) for r in rows], out_dir, suffix
    )


#: Integers a pandas column of numbers holds as such (int64, or uint64 where none is negative).
_INT_RANGE = (-(1 << 63), 1 << 64)


def printed_column(values: Sequence[object]) -> Sequence[object]:
    """One column's cells as pandas prints them (the csv module then writes ``str()`` of each, and
    ``None`` as an empty cell): a column of numbers that mixes integers with floats or missing
    values is a float column (``repr`` of each as a float); a missing value is an empty cell."""
    kinds = set(map(type, values))
    numbers = kinds <= {int, float, type(None)} and kinds & {int, float} and kinds != {int}
    if numbers and all(_INT_RANGE[0] <= v < _INT_RANGE[1] for v in values if type(v) is int):
        # a missing value: None or a float NaN (inline: a call per cell costs the CSV a tenth)
        return [None if v is None or v != v else repr(float(v)) for v in values]  # type: ignore[arg-type]
    if float in kinds:
        return [None if v is None or (type(v) is float and v != v) else v for v in values]
    return values


def write_table(
    columns: Sequence[str],
    cells: Sequence[Sequence[object]],
    out_dir: str | os.PathLike[str],
    suffix: str = "",
) -> Path:
    """``out_dir/compare_result<suffix>_<YYYYmmddHHMMSS>.csv`` of these cells, printed as pandas prints
    them, written under a temporary name and then given the first free name."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    printed = [printed_column(column) for column in zip(*cells, strict=True)]
    stamp = time.strftime("%Y%m%d%H%M%S", time.localtime())
    fd, tmp_name = tempfile.mkstemp(prefix=".compare_result", suffix=".csv.tmp", dir=out)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            writer = csv.writer(f, lineterminator=os.linesep)  # pandas' dialect: minimal quoting
            writer.writerow(columns)
            writer.writerows(zip(*printed, strict=True))
        os.chmod(tmp, FILE_MODE)
        base = f"compare_result{suffix}_{stamp}"
        names = (out / (base + (f"_{k}" if k else "") + ".csv") for k in itertools.count())
        return _claim(tmp, list(itertools.islice(names, 1000)))
    finally:
        tmp.unlink(missing_ok=True)
