"""Writing the app's current comparison as the CLI's CSV, to the path the user chose, with our verdict
in a last column."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from ptdbg_tui.compare.diagnosis.findings import Diagnosis
from ptdbg_tui.compare.model import Row
from ptdbg_tui.compare.report.outputs import pair_suffix, write_pair_csv
from ptdbg_tui.compare.report.words import verdict_column
from ptdbg_tui.engine.live.updates import PairInfo


def default_path(now: float | None = None) -> str:
    return f"./compare_result_{time.strftime('%Y%m%d%H%M%S', time.localtime(now))}.csv"


def export_pairs(
    pairs: Sequence[tuple[PairInfo, list[Row]]],
    path: str | Path,
    stack: bool,
    fmt: str | None = None,
    diagnoses: Mapping[str, Diagnosis] | None = None,
) -> list[Path]:
    """One CSV per pair, written by the compare engine's writer (in ``fmt``, by default the NPU
    dump's format, as ``ptdbg-tui compare``) and moved to ``path``. After the tool's columns, the
    ``Diagnosis`` column says which rows belong to the calls the pair's diagnosis (by pair key) names.

    A directory (or a path ending in ``/``) receives the writer's own ``compare_result_<ts>.csv``.
    """
    path = Path(path).expanduser()
    to_dir = path.is_dir() or str(path).endswith(("/", "\\"))
    out_dir = path if to_dir else path.parent
    out_dir.mkdir(parents=True, exist_ok=True)
    several = len(pairs) > 1
    written = []
    for info, rows in pairs:
        suffix = pair_suffix(info.npu, info.bench) if several else ""
        verdict = verdict_column(rows, (diagnoses or {}).get(info.key))
        csv = write_pair_csv(
            rows,
            out_dir,
            info.npu,
            fmt,
            stack_mode=stack,
            summary=info.summary,
            suffix=suffix,
            extra=[verdict],
        )
        if not to_dir:
            csv = csv.replace(path.with_name(f"{path.stem}{suffix}{path.suffix or '.csv'}"))
        written.append(csv)
    return written
