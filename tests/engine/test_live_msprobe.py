"""The live engine on an msprobe dump whose dump.json is rewritten whole at each flush, as msprobe does."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ptdbg_tui.compare.model import Status

MSPROBE = Path(__file__).parents[1] / "fixtures" / "msprobe"
FAST = {"quiet_s": 30.0, "rescan_s": 0.5}


def _flush(path: Path, full: dict, entries: int, text_limit: int | None = None) -> None:
    """What msprobe writes at a flush: the whole file, with the first ``entries`` entries."""
    text = json.dumps(dict(full, data=dict(list(full["data"].items())[:entries])), indent=1)
    path.write_text(text if text_limit is None else text[:text_limit])


def test_rewrites_add_rows_without_touching_the_ones_shown(tmp_path, follow):
    npu, bench = tmp_path / "npu", tmp_path / "bench"
    shutil.copytree(MSPROBE / "mix" / "npu", npu)
    shutil.copytree(MSPROBE / "mix" / "bench", bench)
    (dump_json,) = npu.glob("step0/*/dump.json")
    full = json.loads(dump_json.read_text())
    _flush(dump_json, full, 5)  # 31 rows: conv2d, the conv module, add_, batch_norm, the bn module
    f = follow(npu, bench, **FAST)
    first = f.wait(lambda s: len(s.statuses()) == 31 and Status.PENDING not in s.statuses().values())
    (pair,) = first.rows
    shown = dict(first.rows[pair])
    assert shown["Module.conv.Conv2d.forward.0.parameters.weight"].row.status is Status.PASS
    assert [seg.label for seg in shown["Functional.conv2d.0.forward.output.0"].path][:2] == [
        "Forward",
        "conv · Conv2d",
    ]
    _flush(dump_json, full, len(full["data"]), text_limit=5000)  # caught mid-write: retried, not reported
    _flush(dump_json, full, len(full["data"]))
    last = f.wait(
        lambda s: (
            s.diagnoses
            and s.diagnoses[pair].culprit is not None
            and s.diagnoses[pair].culprit.call == "Functional.silu.0.backward"
        )
    )
    rows = last.rows[pair]
    assert all(rows[k].row.npu is p.row.npu for k, p in shown.items()), "the rows shown were not re-read"
    assert not [n for n in last.notices if "malformed" in n or "cannot be read" in n or "complete" in n]
    assert sum(1 for p in rows.values() if p.row.npu is not None) == 114
