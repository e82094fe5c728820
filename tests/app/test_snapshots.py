"""SVG snapshots of each view at 80x24 and 160x45 (static compare of fixed synthetic pairs).

Each shot waits on the app's own state, never on time: the comparison settled, the view its keys
open shown (``ready``), and no toast left on the screen. The search box's cursor does not blink (a
timer toggles it every 0.5 s: a loaded machine took the shot on either side of a toggle)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from textual.widgets import Markdown

from ptdbg_tui.app.app import PtdbgApp
from ptdbg_tui.app.overview import OverviewScreen
from ptdbg_tui.app.screens import HelpScreen

SIZES = [(80, 24), (160, 45)]


def _detail_shown(app: PtdbgApp) -> bool:
    return app.detail.node is not None


def _search_stepped(app: PtdbgApp) -> bool:
    return "/" in str(app.search_count.content)  # "k/N": Enter went to a match


def _help_shown(app: PtdbgApp) -> bool:
    return isinstance(app.screen, HelpScreen) and bool(app.screen.query_one(Markdown).children)


def _overview_shown(app: PtdbgApp) -> bool:
    return isinstance(app.screen, OverviewScreen) and all(line.judged for line in app.screen.lines)


#: shot -> the dumps, the keys pressed, and the state those keys reach.
SHOTS: dict[str, tuple[str, list[str], Callable[[PtdbgApp], bool]]] = {
    # the bar, the failing gradient's detail and plots
    "culprit": ("small", ["c", "down", "down"], _detail_shown),
    "failures": ("small", ["f", "n"], lambda app: app.filter_index == 1 and _detail_shown(app)),
    "search": ("small", ["slash", *"lstm", "enter"], _search_stepped),  # k/N and highlighting
    "help": ("small", ["question_mark"], _help_shown),
    "overview": ("steps", ["o"], _overview_shown),  # and the bar naming the step of the culprit
    # exact matching of a run with one extra call: the header says m → align
    "hint": ("shifted", ["n"], _detail_shown),
    # kernels 2% off, which the original's thresholds pass: '✘ 0 · ● 2 named', f and n reach them, ● rows
    "named": ("passing", ["f", "n", "n"], _detail_shown),
}


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("shot", SHOTS)
def test_view(shot, size, small_dumps, steps_dumps, shifted_dumps, passing_culprit_dumps, ui, snap_compare):
    dumps, keys, ready = SHOTS[shot]

    async def run_before(pilot) -> None:
        app = pilot.app
        app.search_box.cursor_blink = False
        await ui.settle(pilot)
        await pilot.press(*keys)
        await ui.wait_until(pilot, lambda: ui.settled(app) and ready(app))
        app.clear_notifications()  # toasts time out: not part of a snapshot
        await ui.wait_until(pilot, lambda: not app.screen.query("Toast"))

    paths = {
        "small": small_dumps,
        "steps": steps_dumps,
        "shifted": shifted_dumps,
        "passing": passing_culprit_dumps,
    }[dumps]
    app = ui.app(*paths, **({"match": "exact"} if dumps == "shifted" else {}))
    assert snap_compare(app, terminal_size=size, run_before=run_before)
