"""SVG snapshots of the main screen (fixed size, static compare of a fixed synthetic pair)."""

from __future__ import annotations


def test_main_screen_with_the_culprit_revealed(small_dumps, ui, snap_compare):
    async def run_before(pilot) -> None:
        await ui.settle(pilot)
        await pilot.press("c", "down", "down")  # the culprit call, then its failing output

    assert snap_compare(ui.app(*small_dumps), terminal_size=ui.size, run_before=run_before)


def test_failures_only_filter(small_dumps, ui, snap_compare):
    async def run_before(pilot) -> None:
        await ui.settle(pilot)
        await pilot.press("f", "n")

    assert snap_compare(ui.app(*small_dumps), terminal_size=ui.size, run_before=run_before)
