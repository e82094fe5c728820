"""``suspects_<ts>.csv``: the ranked suspects of one pair with their scores and evidence, written beside
the compare CSV (whose columns stay the original's); the same verdict as one column of the rows, which
the app's export adds after the original's columns."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from ptdbg_tui.compare.diagnosis.findings import Diagnosis, Suspect
from ptdbg_tui.compare.report.figures import figure
from ptdbg_tui.compare.report.outputs import suspects_path
from ptdbg_tui.compare.report.words import evidence_text
from ptdbg_tui.formats.file_writes import write_text
from ptdbg_tui.formats.untrusted import csv_cell

HEADER = [
    "Rank",
    "NPU Call",
    "API",
    "Direction",
    "Kind",
    "Score",
    "Input Error",
    "Output Error",
    "Allowed Error",
    "Worst Output",
    "Evidence",
    "Call Site",
    "Source Line",
]


def suspect_row(rank: int, s: Suspect) -> list[object]:
    j = s.judgement
    site = s.site
    return [
        rank,
        s.call,
        s.api,
        s.direction,
        s.kind,
        figure(s.score),
        figure(j.input_error),
        figure(j.output_error),
        figure(j.allowed),
        j.output,
        evidence_text(s.evidence),
        f"{site.path}:{site.line}" if site else "",
        (site.source or "") if site else "",
    ]


def write_suspects(diagnosis: Diagnosis, compare_csv: Path) -> Path:
    """Write the suspects beside ``compare_csv`` (a header only when there are none)."""
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(HEADER)
    writer.writerows(
        list(map(csv_cell, suspect_row(k, s))) for k, s in enumerate(diagnosis.suspects, start=1)
    )
    return write_text(suspects_path(compare_csv), text.getvalue())
