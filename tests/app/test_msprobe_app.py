"""The app on msprobe dumps and on a mixed pair: module tree from construct.json, the culprit, msprobe's
CSV on export, the original tool's detach calls in one collapsed group."""

from __future__ import annotations

import csv
from pathlib import Path

from ptdbg_tui.engine.callpath import NOISE_LABEL

FIXTURES = Path(__file__).parents[1] / "fixtures"
MIX = FIXTURES / "msprobe" / "mix"


async def test_mix_level_dump_shows_modules_and_the_culprit_then_exports_msprobes_csv(ui, tmp_path):
    app = ui.app(MIX / "npu", MIX / "bench")
    target = tmp_path / "mine.csv"
    async with app.run_test(size=ui.size) as pilot:
        await ui.settle(pilot)
        assert "Functional.silu.0.backward" in str(app.query_one("#diagnosis").render())
        await pilot.press("c")
        call = app.call_tree.cursor_model_node
        assert (call.kind, call.key) == ("call", "Functional.silu.0.backward")
        assert call.parent.label == "forward  make_fixtures.py:85", "a top-level call sits at its call site"
        conv = app.model.calls[(call.pair, "Functional.conv2d.0.forward")]
        assert conv.parent.label == "conv · Conv2d" and conv.label == "Functional.conv2d.0"
        grads = app.model.calls[(call.pair, "Module.conv.Conv2d.backward.0")]
        assert {leaf.label for leaf in grads.children} >= {"parameters_grad.weight", "input.0"}
        await pilot.press("e")
        app.screen.query_one("#export-path").value = str(target)
        await pilot.press("enter")
        await ui.wait_until(pilot, target.exists)
        await app.workers.wait_for_complete()
    with target.open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert "EucDist" in rows[0] and "Data_name" in rows[0], "an msprobe NPU dump exports msprobe's columns"
    theirs = {r["NPU Name"] for r in csv.DictReader((MIX / "msprobe_compare.csv").open(newline=""))}
    assert theirs <= {r["NPU Name"] for r in rows}


async def test_the_original_tools_own_calls_are_one_collapsed_group(ui):
    app = ui.app(FIXTURES / "mixed" / "npu", FIXTURES / "mixed" / "bench")
    async with app.run_test(size=ui.size) as pilot:
        await ui.settle(pilot)
        assert "Functional_silu_0_backward" in str(app.query_one("#diagnosis").render())
        header = app.header_bar.lines[0].plain
        assert "84 of 360 compared" in header and "all 360" not in header, "rows on one side are not compared"
        detach = [n for (_, key), n in app.model.calls.items() if key.startswith("Tensor_detach_")]
        assert len(detach) == 124 and {n.parent.key for n in detach} == {"noise"}
        noise = detach[0].parent
        # and the 14 rows of the calls the faulty silu backward makes (the original: forward calls)
        assert noise.label == NOISE_LABEL and noise.total == 248 + 14 and noise.parent.label == "Forward"
        inside = {key for (_, key), n in app.model.calls.items() if n.parent is noise}
        assert "Torch_sigmoid_0_forward" in inside
        forward = next(t for t in app.call_tree.root.children if t.data is noise.parent)
        forward.expand()
        await pilot.pause()
        shown = next(t for t in forward.children if t.data is noise)
        assert not shown.is_expanded and not shown.children, "collapsed: its calls are not even built"
