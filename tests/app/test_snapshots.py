"""SVG snapshots of each view at 80x24 and 160x45 (static compare of fixed synthetic pairs)."""

from __future__ import annotations

import pytest

SIZES = [(80, 24), (160, 45)]
SHOTS = {
    "culprit": ("small", ["c", "down", "down"]),  # the bar, the failing gradient's detail and plots
    "failures": ("small", ["f", "n"]),
    "search": ("small", ["slash", *"lstm", "enter"]),  # k/N and highlighting
    "help": ("small", ["question_mark"]),
    "overview": ("steps", ["o"]),
}


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("shot", SHOTS)
def test_view(shot, size, small_dumps, steps_dumps, ui, snap_compare):
    dumps, keys = SHOTS[shot]

    async def run_before(pilot) -> None:
        await ui.settle(pilot)
        await pilot.press(*keys)
        await pilot.pause()

    app = ui.app(*(small_dumps if dumps == "small" else steps_dumps))
    assert snap_compare(app, terminal_size=size, run_before=run_before)
