"""The app opened on folders that do not exist yet; a child process dumps into them with the
project's dumper; the tree fills and the culprit appears without a restart."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from ptdbg_tui.compare.model import Status
from ptdbg_tui.engine.live.updates import Progress


async def test_tree_fills_and_culprit_appears_while_a_child_process_dumps(tmp_path, ui):
    root = tmp_path / "live"
    app = ui.app(root / "npu", root / "cpu", watch=True, quiet_s=1.0, rescan_s=1.0)
    async with app.run_test(size=ui.size) as pilot:
        await ui.wait_until(pilot, lambda: app.engine.watching in ("inotify", "polling"))
        assert app.model.root.total == 0
        child = subprocess.Popen(
            [sys.executable, "-m", "ptdbg_tui", "demo", str(root), "--no-app"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        try:
            await ui.wait_until(pilot, lambda: app.model.first_culprit() is not None)
            await ui.wait_until(pilot, lambda: child.poll() is not None)
            await ui.settle(pilot)
        finally:
            if child.poll() is None:
                child.kill()
            output = child.communicate()[0].decode()
        assert child.returncode == 0, output
        assert f"open them:  ptdbg-tui {root / 'npu'} {root / 'cpu'}\n" in output, "--no-app: what next"
        culprit, call = app.model.first_culprit()
        assert culprit.call == "VF_lstm_0_backward" and call is not None
        counts = app.model.status_counts()
        assert counts[Status.FAIL] > 0 and counts[Status.PENDING] == 0 and counts[Status.UNMATCHED] == 0
        assert len(app.call_tree.root.children) == 2  # Forward and Backward, filled without a restart
        await pilot.press("c")
        assert app.call_tree.cursor_model_node is call


def _half_written(source: Path, dest: Path, lines: int) -> Path:
    """A dump's rank folder copied with only the first ``lines`` lines of its pkl; the pkl."""
    (rank,) = source.rglob("rank0")
    out = dest / rank.relative_to(source)
    shutil.copytree(rank, out)
    (pkl,) = out.glob("*.pkl")
    pkl.write_text("".join((rank / pkl.name).read_text().splitlines(True)[:lines]))
    return pkl


def _all_compared(progress: Progress) -> bool:
    """Every row the NPU side has so far is compared (an NPU row never waits for the bench here)."""
    return 0 < progress.npu_seen == progress.compared


async def test_no_align_hint_for_a_npu_dump_that_ends_early(tmp_path, ui, demo_dumps):
    """The NPU run stopped halfway (its dump complete up to there, never to grow): the bench's later
    entries are unpaired, but no matching pairs what was never written, so the header read
    'm → align? (N unpaired)' for nothing."""
    npu_demo, cpu_demo = demo_dumps
    _half_written(
        npu_demo, tmp_path / "npu", len(next(npu_demo.rglob("*.pkl")).read_text().splitlines()) // 2
    )
    app = ui.app(tmp_path / "npu", cpu_demo)
    async with app.run_test(size=ui.size) as pilot:
        await ui.settle(pilot)
        await ui.wait_until(pilot, lambda: bool(app.model.matches))
        assert app.model.status_counts()[Status.UNMATCHED] > 0
        assert app.model.match_hint() == "" and "align?" not in ui.screen_text(app)


async def test_no_align_hint_for_the_tail_the_npu_side_has_not_written_yet(tmp_path, ui, demo_dumps):
    """The NPU dump half written, still being written (never quiet here): the bench's later entries
    are pending, not unpaired, and the header suggests no other matching; once the rest arrives
    every entry pairs by name and it still suggests none."""
    npu_demo, cpu_demo = demo_dumps
    full = next(npu_demo.rglob("*.pkl")).read_text().splitlines(True)
    half = len(full) // 2
    pkl = _half_written(npu_demo, tmp_path / "npu", half)
    app = ui.app(tmp_path / "npu", cpu_demo, watch=True, quiet_s=600.0)
    async with app.run_test(size=ui.size) as pilot:
        await ui.wait_until(pilot, lambda: bool(app.model.matches) and _all_compared(app.model.progress))
        counts = app.model.status_counts()
        assert counts[Status.UNMATCHED] == 0 and app.model.progress.pending > 0, "the bench's tail waits"
        assert app.model.match_hint() == ""
        assert "align?" not in ui.screen_text(app)
        with pkl.open("a") as f:
            f.writelines(full[half:])
        await ui.wait_until(
            pilot, lambda: _all_compared(app.model.progress) and app.model.progress.pending == 0
        )
        assert app.model.match_hint() == "" and "align?" not in ui.screen_text(app)
