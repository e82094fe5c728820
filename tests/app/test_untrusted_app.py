"""The app under watch on a dump whose npy headers claim huge sizes: it stays up, names the file, and
its detail panel draws only once it is mounted (a query made before ended the app with ``NoMatches:
No nodes match '#detail-body' on DetailPanel(id='detail')``)."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from ptdbg_tui.app.detail import DetailPanel
from ptdbg_tui.app.tree_model import TreeModel
from ptdbg_tui.formats.layout import rank_dir_path
from ptdbg_tui.formats.naming import entry_name
from ptdbg_tui.formats.synthetic import write_array
from ptdbg_tui.formats.writer import RankWriter

NAMES = [entry_name("Torch_add", i, "forward", "output", (0,)) for i in range(3)]
HEADER = b"{'descr': '<f4', 'fortran_order': False, 'shape': (4, 6, 268435456), }"


def test_the_detail_panel_draws_nothing_before_it_is_mounted():
    panel = DetailPanel(TreeModel(), id="detail")
    panel.show(None)  # the engine's news may come first: no NoMatches
    assert panel.node is None


def _pair(root: Path) -> tuple[Path, Path]:
    for side in ("npu", "bench"):
        w = RankWriter(rank_dir_path(root / side, 0, 0))
        for name in NAMES:
            write_array(w, name, np.arange(24, dtype=np.float32).reshape(4, 6))
        w.close()
    data = rank_dir_path(root / "npu", 0, 0) / "api_stack_dump"
    with open(data / f"{NAMES[1]}.npy", "wb") as f:  # sparse: every byte its shape announces, 25 GB
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(HEADER)) + HEADER)
        f.truncate(10 + len(HEADER) + 4 * 6 * 268435456 * 4)
    with open(data / f"{NAMES[2]}.npy", "wb") as f:  # a header length of 4 GB, sparse too
        f.write(b"\x93NUMPY\x02\x00" + struct.pack("<I", 0xF0000000) + HEADER)
        f.truncate(0xF0000000 + 200)
    return root / "npu", root / "bench"


async def test_huge_npy_headers_under_watch_leave_the_app_up_and_are_named(tmp_path, ui):
    npu, bench = _pair(tmp_path)
    app = ui.app(npu, bench, watch=True, quiet_s=0.2, rescan_s=0.5)
    async with app.run_test(size=ui.size) as pilot:
        await ui.settle(pilot)
        await pilot.press("down", "down", "enter", "down", "down", "down", "up")
        await ui.settle(pilot)
        rows = {r.name: r for _, pair in app.engine.pairs() for r in pair}
        assert "holds shape [4, 6, 268435456] but the dump records [4, 6]" in rows[NAMES[1]].result.message
        assert "more than an npy header's 10000" in rows[NAMES[2]].result.message
        assert app.detail.is_mounted and app.is_running
    assert app.return_code in (None, 0)
