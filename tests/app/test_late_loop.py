"""The app's view follows the engine to the end however late its event loop runs."""

from __future__ import annotations

import itertools
import time
from types import SimpleNamespace

import pytest
import textual.timer

from ptdbg_tui.compare.model import Status


async def test_the_view_is_completed_when_every_timer_starts_late(
    demo_dumps, ui, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine's thread holds the interpreter for milliseconds at a time (a chunk's decode, a GC
    pass), so the UI thread's next clock reading may come later than a short timer's delay. Textual
    then drops a one-shot timer's callback (its ``skip``): the slice of updates the app had scheduled
    never ran, and the view stayed half filled, 'comparing' for good (seen as a 240-s hang of
    test_live_app under the suite's load). Here every other clock reading of Textual's timers comes
    10 ms late: a timer reads the clock twice before it waits."""
    readings = itertools.count()

    def late() -> float:
        return time.monotonic() + 0.01 * ((next(readings) + 1) // 2)

    monkeypatch.setattr(textual.timer, "_time", SimpleNamespace(get_time=late))
    npu, cpu = demo_dumps
    app = ui.app(npu, cpu)
    async with app.run_test(size=ui.size) as pilot:
        await ui.wait_until(pilot, lambda: ui.settled(app), timeout=60)
        culprit, _ = app.model.first_culprit()
        assert culprit.call == "VF_lstm_0_backward"
        counts = app.model.status_counts()
        assert counts[Status.FAIL] > 0 and counts[Status.PENDING] == 0
        assert app.model.root.total == app.model.progress.rows > 0
