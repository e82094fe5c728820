"""``advisor_<ts>.txt``: the original's advisor file (``Line``/``Suspect Nodes``/``Expert Advice``),
naming the culprit instead of the first failing row.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ptdbg_tui.compare.diagnosis.findings import Diagnosis
from ptdbg_tui.compare.diagnosis.notes import NoVerdict
from ptdbg_tui.compare.model import Row, Status
from ptdbg_tui.compare.report.words import no_verdict_text, suspect_text, verdict_text
from ptdbg_tui.formats.file_writes import write_text
from ptdbg_tui.formats.untrusted import one_line

_ALL_PASS = "All data in comparison result meets the accuracy requirements."


def advisor_text(rows: Sequence[Row], diagnosis: Diagnosis, no_verdict: NoVerdict | None = None) -> str:
    """The original's ``advisor_<ts>.txt`` (``Line``/``Suspect Nodes``/``Expert Advice``), with the
    culprit as the suspect instead of the first failing row. Lines are CSV line numbers.
    ``no_verdict``: why the rows say nothing about the NPU run (one dump on both sides …)."""
    line_of = {id(row): i + 2 for i, row in enumerate(rows)}
    culprit = diagnosis.culprit
    if no_verdict is not None:
        suspect, advice = None, f"No verdict: {no_verdict_text(no_verdict)}"
    elif culprit is not None:
        suspect = culprit.worst_row
        advice = suspect_text(culprit)
        if len(diagnosis.suspects) > 1:
            advice += f" ({len(diagnosis.suspects) - 1} further suspect(s) in suspects_*.csv)"
    elif diagnosis.compared:
        suspect = None
        advice = _ALL_PASS if not any(r.status is Status.FAIL for r in rows) else verdict_text(diagnosis)
    else:
        suspect, advice = None, verdict_text(diagnosis)
    advice = one_line(advice)  # dump text: one line each, no escapes (its readers parse the lines)
    if suspect is None:
        return f"Line: NA\nSuspect Nodes: NA\nExpert Advice: {advice}\n"
    return f"Line: {line_of[id(suspect)]}\nSuspect Nodes: {one_line(suspect.name)}\nExpert Advice: {advice}\n"


def advisor_path(compare_csv: Path) -> Path:
    """``advisor…`` named like its compare CSV (``compare_result…`` → ``advisor….txt``)."""
    return compare_csv.with_name("advisor" + compare_csv.stem.removeprefix("compare_result") + ".txt")


def write_advisor(
    rows: Sequence[Row], diagnosis: Diagnosis, compare_csv: Path, no_verdict: NoVerdict | None = None
) -> Path:
    """Write the advisor file beside ``compare_csv``."""
    return write_text(advisor_path(compare_csv), advisor_text(rows, diagnosis, no_verdict))
