"""``replay_<ts>.csv``: one line per replayed call, both sides' verdicts in numbers and in words
(``ptdbg-tui replay``)."""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Iterable
from pathlib import Path

from ptdbg_tui.compare.diagnosis.replay_outcome import CallReplay, SideVerdict
from ptdbg_tui.compare.diagnosis.replay_reasons import WhyNot
from ptdbg_tui.compare.report.figures import figure
from ptdbg_tui.compare.report.words import replay_text
from ptdbg_tui.formats.file_writes import write_text
from ptdbg_tui.formats.untrusted import csv_cell

HEADER = [
    "Pair",
    "Call",
    "Outcome",
    "NPU Error",
    "NPU Allowed",
    "NPU Lean",
    "NPU Lean Allowed",
    "Bench Error",
    "Bench Allowed",
    "Bench Lean",
    "Bench Lean Allowed",
    "Complete",
    "Seconds",
    "Verdict",
]


def _side(v: SideVerdict | WhyNot) -> list[str]:
    if not isinstance(v, SideVerdict):
        return ["", "", "", ""]
    return [figure(v.error), figure(v.allowed), figure(v.bias), figure(v.bias_allowed)]


def replay_row(pair: str, r: CallReplay) -> list[str]:
    return [
        pair,
        r.call,
        r.outcome.value,
        *_side(r.npu),
        *_side(r.bench),
        "yes" if r.complete else "no",
        f"{r.seconds:.3f}",
        replay_text(r),
    ]


def write_replays(replays: Iterable[tuple[str, CallReplay]], out_dir: str | Path) -> Path:
    """``out_dir/replay_<YYYYmmddHHMMSS>.csv`` (a first free name when that one exists)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(HEADER)
    writer.writerows(list(map(csv_cell, replay_row(pair, r))) for pair, r in replays)
    stamp = time.strftime("%Y%m%d%H%M%S", time.localtime())
    path = out / f"replay_{stamp}.csv"
    k = 1
    while path.exists():
        path, k = out / f"replay_{stamp}_{k}.csv", k + 1
    return write_text(path, text.getvalue())
