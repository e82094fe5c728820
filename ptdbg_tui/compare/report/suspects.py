"""``suspects_<ts>.csv``: the ranked suspects of one pair with their scores and evidence, written beside
the compare CSV (whose columns stay the original's); the same verdict as one column of the rows, which
the app's export adds after the original's columns."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path

from ptdbg_tui.compare.diagnosis.findings import Diagnosis, Suspect, times_text
from ptdbg_tui.compare.model import Row
from ptdbg_tui.compare.report.csv_ptdbg import Column
from ptdbg_tui.compare.report.figures import figure
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
        s.evidence,
        f"{site.path}:{site.line}" if site else "",
        (site.source or "") if site else "",
    ]


def suspects_path(compare_csv: Path) -> Path:
    """``suspects…`` named like its compare CSV (``compare_result…`` → ``suspects…``)."""
    return compare_csv.with_name("suspects" + compare_csv.name.removeprefix("compare_result"))


def write_suspects(diagnosis: Diagnosis, compare_csv: Path) -> Path:
    """Write the suspects beside ``compare_csv`` (a header only when there are none)."""
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(HEADER)
    writer.writerows(
        list(map(csv_cell, suspect_row(k, s))) for k, s in enumerate(diagnosis.suspects, start=1)
    )
    return write_text(suspects_path(compare_csv), text.getvalue())


#: The export's last column: each row's part in the diagnosis.
VERDICT_COLUMN = "Diagnosis"


def verdict_column(rows: Sequence[Row], diagnosis: Diagnosis | None) -> Column:
    """Our verdict on each row, as the suspects file ranks it: ``culprit: introduces error ×1,240`` on
    every row of the culprit's call, ``suspect 2: …`` on the next one's, empty elsewhere. Its
    ``Accuracy Reached or Not`` may be ``Yes``: the original's thresholds pass a 2% error."""
    said: dict[str, str] = {}
    for k, s in enumerate(diagnosis.suspects if diagnosis is not None else (), start=1):
        who = "culprit" if k == 1 else f"suspect {k}"
        said.setdefault(s.call, f"{who}: {s.words} {times_text(s.score)}")
    return VERDICT_COLUMN, [said.get(r.record.call, "") for r in rows]
