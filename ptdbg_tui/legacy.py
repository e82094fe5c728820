"""The original's ``compare()`` API, for scripts written against ptdbg_ascend::

from ptdbg_tui.legacy import compare
compare({"npu_pkl_path": ..., "bench_pkl_path": ...,
         "npu_dump_data_dir": ..., "bench_dump_data_dir": ...}, "./out")
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ptdbg_tui.compare.report.advisor import write_advisor
from ptdbg_tui.compare.report.csv_ptdbg import write_csv
from ptdbg_tui.compare.report.layout_words import layout_error_text
from ptdbg_tui.compare.report.suspects import write_suspects
from ptdbg_tui.engine.batch import CompareInputError, check_match, compare_pairs, judge
from ptdbg_tui.formats.layout import DumpLayoutError, RankDump, discover


def _rank_dump(records: Any, side: str) -> RankDump:
    if not records:
        raise CompareInputError(f"input_param needs '{side}_pkl_path'")
    path = Path(records)
    if not path.is_file():
        raise CompareInputError(f"{side} pkl {path} does not exist")
    try:
        return discover(path)[0]
    except DumpLayoutError as e:
        raise CompareInputError(layout_error_text(e)) from None


def _data_dir(value: Any, side: str) -> Path | None:
    if not value:
        return None
    path = Path(value)
    if not path.is_dir():
        raise CompareInputError(f"{side} dump data dir {path} is not a directory")
    return path


def compare(
    input_param: dict[str, Any],
    output_path: str | os.PathLike[str],
    stack_mode: bool = False,
    auto_analyze: bool = True,
    fuzzy_match: bool = False,
    **kw: Any,
) -> str:
    """``ptdbg_ascend.compare`` call shape; returns the CSV path.

    As the original, statistics-only mode is used unless both data dirs are given, and with
    ``auto_analyze`` an ``advisor_<ts>.txt`` names the suspect (here: the culprit call).
    Extra keywords: ``match`` ("auto"/"exact"/"fuzzy"/"align", overrides ``fuzzy_match``), ``jobs``,
    ``suffix`` (inserted into the file name).
    """
    npu = _rank_dump(input_param.get("npu_pkl_path"), "npu")
    bench = _rank_dump(input_param.get("bench_pkl_path"), "bench")
    npu_data = _data_dir(input_param.get("npu_dump_data_dir"), "npu")
    bench_data = _data_dir(input_param.get("bench_dump_data_dir"), "bench")
    match = kw.get("match") or ("fuzzy" if fuzzy_match else "auto")
    check_match(match)
    outcomes = compare_pairs([(npu, bench, npu_data, bench_data)], match, False, kw.get("jobs"), None)
    judge(outcomes)  # the culprit's module, as the command's report names it
    (outcome,) = outcomes
    outcome.csv = write_csv(
        outcome.rows, output_path, stack_mode=stack_mode, summary=outcome.summary, suffix=kw.get("suffix", "")
    )
    write_suspects(outcome.diagnosis, outcome.csv)
    if auto_analyze and not outcome.summary:
        outcome.advisor = write_advisor(outcome.rows, outcome.diagnosis, outcome.csv, outcome.no_verdict)
    if input_param.get("is_print_compare_log", True):
        from ptdbg_tui.compare.report.words import summary_text
        from ptdbg_tui.formats.untrusted import printable

        # dump text: control characters escaped, as the CLI prints it
        print(printable(summary_text(outcome)), flush=True)
    return str(outcome.csv)
