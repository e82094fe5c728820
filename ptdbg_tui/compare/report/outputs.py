"""The CSV a pair is written as: the original's columns or msprobe's, by default those of the tool
whose dump format the NPU side is in, and the suffix that tells several pairs' files apart.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ptdbg_tui.compare.model import Row
from ptdbg_tui.compare.report.csv_msprobe import CSV_MSPROBE, write_msprobe_csv
from ptdbg_tui.compare.report.csv_ptdbg import Column, write_csv
from ptdbg_tui.formats.layout import RankDump
from ptdbg_tui.formats.untrusted import file_component


def write_pair_csv(
    rows: Sequence[Row],
    out_dir: str | os.PathLike[str],
    npu: RankDump,
    fmt: str | None,
    *,
    stack_mode: bool = False,
    summary: bool = False,
    suffix: str = "",
    extra: Sequence[Column] = (),
) -> Path:
    """A pair's CSV in ``fmt`` (``ptdbg`` or ``msprobe``; by default the NPU dump's own format), and the
    ``extra`` columns after the tool's own."""
    if (fmt or npu.report) == CSV_MSPROBE:
        return write_msprobe_csv(rows, out_dir, summary=summary, suffix=suffix, extra=extra)
    return write_csv(rows, out_dir, stack_mode=stack_mode, summary=summary, suffix=suffix, extra=extra)


def pair_suffix(npu: RankDump, bench: RankDump | None) -> str:
    """What goes into a CSV's name when several pairs are written (the app's export uses it too)."""
    # a label without a rank holds the rank folder's name: dump text, made one bounded file name part
    return "_" + file_component(f"{npu.label}-{bench.label if bench else 'none'}", limit=120)


def repro_folder(call: str, pair: str | None = None) -> str:
    """The folder name a call's repro is proposed in: ``repro_<call>``, with its pair's label where one
    call name may be in several pairs (``repro_step2_rank0_<call>``)."""
    where = f"{pair}_" if pair else ""
    return file_component(f"repro_{where}{call}")  # the call's name is dump text


def suspects_path(compare_csv: Path) -> Path:
    """``suspects…`` named like its compare CSV (``compare_result…`` → ``suspects…``)."""
    return compare_csv.with_name("suspects" + compare_csv.name.removeprefix("compare_result"))
