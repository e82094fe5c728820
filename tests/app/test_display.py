"""What the screen must not get wrong at 80x24: an entry on one side only shown as compared."""

from __future__ import annotations

import pytest

from ptdbg_tui.compare.model import Status


@pytest.mark.parametrize(("swap", "side"), [(False, "NPU"), (True, "bench")])
async def test_an_entry_on_one_side_only_says_so_and_shows_no_metric(shifted_dumps, ui, swap, side):
    """One run's extra add (align leaves it alone) is compared with nothing: no "Cosine nan"."""
    npu, bench = shifted_dumps[::-1] if swap else shifted_dumps
    app = ui.app(npu, bench, match="align")
    async with app.run_test(size=(80, 24)) as pilot:
        await ui.settle(pilot)
        alone = [leaf for leaf in app.model.root.leaves() if leaf.status is Status.UNMATCHED]
        assert len(alone) == 2, "the extra call's input and output"
        assert app._go(alone[0])
        await pilot.pause()
        text = ui.detail_text(app)
        assert f"∅ unmatched — present in the {side} dump only" in text
        for compared in ("nan", "Nan", "Cosine", "MaxAbsErr", "Accuracy", "Err_message"):
            assert compared not in text, compared
        assert "l2norm" in text, "its own side's statistics stay"
        app.detail.show(alone[0].parent)  # the call: its entries' lines
        await pilot.pause()
        text = ui.detail_text(app)
        where = "no bench" if side == "NPU" else "bench only"
        assert f"∅ input.0  {where}" in text and f"∅ output.0  {where}" in text
        assert "nan" not in text
        assert "nan" not in ui.screen_text(app)
