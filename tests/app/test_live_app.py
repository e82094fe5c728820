"""The app opened on folders that do not exist yet; a child process dumps into them with the
project's dumper; the tree fills and the culprit appears without a restart."""

from __future__ import annotations

import subprocess
import sys

from ptdbg_tui.compare.model import Status


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
        culprit, call = app.model.first_culprit()
        assert culprit.call == "VF_lstm_0_backward" and call is not None
        counts = app.model.status_counts()
        assert counts[Status.FAIL] > 0 and counts[Status.PENDING] == 0 and counts[Status.UNMATCHED] == 0
        assert len(app.call_tree.root.children) == 2  # Forward and Backward, filled without a restart
        await pilot.press("c")
        assert app.call_tree.cursor_model_node is call
