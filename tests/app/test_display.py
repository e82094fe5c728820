"""What the screen must not get wrong at 80x24: an entry on one side only shown as compared, toasts
over the help, key hints cut off in the footer, the culprit's file:line lost to a long source line."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import shutil
from pathlib import Path

import pytest
from textual.binding import Binding
from textual.widgets._footer import FooterKey  # the footer's hints (not public)

from ptdbg_tui.app.overview import OverviewScreen
from ptdbg_tui.app.screens import HELP, HelpScreen
from ptdbg_tui.compare.model import Status
from ptdbg_tui.formats.synthetic import write_ranks_pair


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
        assert "Δ" not in ui.detail_text(app, width=160), "no column of differences from nothing"
        app.detail.show(alone[0].parent)  # the call: its entries' lines
        await pilot.pause()
        text = ui.detail_text(app)
        where = "no bench" if side == "NPU" else "bench only"
        assert f"∅ input.0  {where}" in text and f"∅ output.0  {where}" in text
        assert "nan" not in text
        assert "nan" not in ui.screen_text(app)


def _key(app, binding: Binding) -> str:
    """The key as the footer shows it (``?``, ``/``): the first of a binding's keys."""
    return app.get_key_display(dataclasses.replace(binding, key=binding.key.split(",")[0]))


@pytest.mark.parametrize("size", [(80, 24), (160, 45)])
async def test_every_key_hint_in_the_footer_is_whole_and_help_lists_every_key(small_dumps, ui, size):
    app = ui.app(*small_dumps)
    async with app.run_test(size=size) as pilot:
        await ui.settle(pilot)
        await pilot.pause()
        footer = ui.screen_text(app).splitlines()[-1]
        keys = [k for k in app.query(FooterKey) if k.display and "-command-palette" not in k.classes]
        assert keys[0].action == "help", "? first: it lists what the footer leaves out"
        for key in keys:
            hint = f"{key.key_display} {key.description}"
            assert re.search(rf"(^| ){re.escape(hint)} ", footer), f"{hint!r} whole in {footer!r}"
        wide = {"s View", "o Overview", "e Export", "t Narrow"}
        assert all((hint in footer) == (size[0] >= 120) for hint in wide), "more hints where they fit"
    for binding in app.BINDINGS:  # every key, the footer's or not, in the help
        key = _key(app, binding)
        assert re.search(rf"`{re.escape(key)}`", HELP), key


async def test_toasts_wait_behind_the_help_at_80x24(demo_dumps, ui, monkeypatch):
    """Replay off (no torch): its notice on r, then ? — the help is read whole, and the notice is
    back once the help closes."""
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "torch" else find_spec(name, *a)
    )
    app = ui.app(*demo_dumps)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await ui.settle(pilot)
        app.clear_notifications()
        await pilot.press("c", "r")
        await pilot.pause()
        notice = "No replay here"
        assert notice in ui.screen_text(app), "the toast is on the main screen"
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.pause()
        help_text = ui.screen_text(app)
        assert notice not in help_text and "torch" not in help_text
        assert "next / previous suspect: the culprit, then those of every" in help_text, "not covered"
        await pilot.press("escape")
        await pilot.pause()
        assert notice in ui.screen_text(app), "still current: shown again"


async def test_toasts_wait_behind_the_overview_at_80x24(ui, tmp_path):
    """Notices (the replay's verdicts, the first divergent rank) covered the overview's suspects at
    80x24; they wait beneath it now (outside its box only) and come back on top when it closes."""
    app = ui.app(*write_ranks_pair(tmp_path, ranks=4))
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await ui.settle(pilot)
        app.clear_notifications()
        notices = [
            "Replayed Functional_linear_1_forward",
            "Replayed Torch_tanh_1_forward",
            "First divergent rank",
        ]
        for notice in notices:
            app.notify(f"{notice}: rank3 (step0) …", timeout=60)
        await pilot.press("o")
        assert isinstance(app.screen, OverviewScreen)
        await pilot.pause()
        lines = ui.screen_text(app).splitlines()
        rows = [line for line in lines if re.search(r"step0/rank\d  ✔ pass", line)]
        assert len(rows) == 4 and re.search(r"#7 +Functional_linear_1_forward", rows[0]), "\n".join(lines)
        assert all(re.search(r"#10 +receives via Distributed_all_r", row) for row in rows[1:]), "\n".join(
            lines
        )
        await pilot.press("escape")
        await pilot.pause()
        assert "First divergent rank" in ui.screen_text(app), "still current: on top again"


async def test_a_long_source_line_is_cut_and_the_culprit_s_file_line_stays(steps_dumps, ui, tmp_path):
    """Two steps at fault: the bar's first line holds the culprit and "+1 more", which must stay too."""
    source = "y = VF_lstm(self.embed(tokens) * mask + positions, hidden_state, dropout=drop).flatten(1)"
    sides = []
    for side in steps_dumps:
        copy = tmp_path / side.name
        shutil.copytree(side, copy)
        for pkl in copy.rglob("*.pkl"):
            pkl.write_text(pkl.read_text().replace('"y = VF_lstm(x)"', f'"{source}"'))
        sides.append(copy)
    app = ui.app(*sides)
    async with app.run_test(size=(80, 24)) as pilot:
        await ui.settle(pilot)
        await pilot.pause()
        bar = "\n".join(ui.screen_text(app).splitlines()[1:3])
        assert "Culprit VF_lstm_0_backward" in bar and "+1 more (c/C)" in bar
        assert re.search(r"model\.py:43  y = VF_lstm\(self\.embed.* …", bar), bar


async def test_the_bar_cuts_the_replay_s_verdict_after_a_whole_word_at_80x24(demo_dumps, ui):
    """It said "confirmed by replay — NPU kernel wron…"; a number cut short ("allowed 2.3e-0…") would
    read as another number."""
    app = ui.app(*demo_dumps, replay_budget_s=600)
    async with app.run_test(size=(80, 24)) as pilot:
        await ui.settle(pilot)
        await ui.wait_until(pilot, lambda: (c := app.model.first_culprit()) is not None and c[0].confirmed)
        await pilot.pause()
        bar = "\n".join(ui.screen_text(app).splitlines()[1:3])
        assert "confirmed by replay — NPU kernel …" in bar, bar
        assert not re.search(r"\w…", bar), bar


@pytest.fixture
def one_npy_gone(small_dumps, tmp_path: Path) -> list[Path]:
    """A copy of the small dumps whose NPU side lost one output's npy: that entry cannot be compared."""
    sides = [tmp_path / side.name for side in small_dumps]
    for side, copy in zip(small_dumps, sides, strict=True):
        shutil.copytree(side, copy)
    (gone,) = sides[0].rglob("Functional_relu_0_forward_output.npy")
    gone.unlink()
    return sides


async def test_n_goes_to_an_entry_that_could_not_be_compared(one_npy_gone, ui):
    """The bar says "1 entry could not be compared (n: next failure)": n must find it (it said "No
    failing entry"), before the failures that come after it in execution."""
    app = ui.app(*one_npy_gone)
    async with app.run_test(size=(80, 24)) as pilot:
        await ui.settle(pilot)
        await pilot.press("n")
        leaf = app.call_tree.cursor_model_node
        assert leaf is not None and leaf.key == "Functional_relu_0_forward_output"
        assert leaf.status is Status.ERROR
        await pilot.press("N")  # wraps around to the last failure, in the backward
        assert app.call_tree.cursor_model_node.status is Status.FAIL
        await pilot.press("n")
        assert app.call_tree.cursor_model_node is leaf


async def test_the_header_does_not_count_an_entry_that_could_not_be_compared(one_npy_gone, ui):
    """It said "✘ 9 ⚠ 1 │ all 30 compared": ⚠ is "could not compare" (the CLI: "1 errors")."""
    app = ui.app(*one_npy_gone)
    async with app.run_test(size=(80, 24)) as pilot:
        await ui.settle(pilot)
        rows = app.model.progress.rows
        assert app.model.status_counts()[Status.ERROR] == 1
        header = ui.screen_text(app).splitlines()[0]
        assert f"⚠ 1 · ● 1 named │ {rows - 1:,} of {rows:,} compared" in header, header


async def test_the_overview_says_why_a_failing_pair_has_no_suspect(small_dumps, shifted_dumps, ui, tmp_path):
    """Step 1 fails without a call at fault (one run's extra call shifts exact matching): its line
    said nothing where the first suspect goes; now what the CLI's report says of it."""
    sides = [tmp_path / side.name for side in small_dumps]
    for side, shifted, copy in zip(small_dumps, shifted_dumps, sides, strict=True):
        shutil.copytree(side, copy)
        (step0,) = shifted.rglob("step0")
        shutil.copytree(step0, next(copy.rglob("step0")).with_name("step1"))
    app = ui.app(*sides, match="exact")
    async with app.run_test(size=(160, 45)) as pilot:
        await ui.settle(pilot)
        await pilot.press("o")
        assert isinstance(app.screen, OverviewScreen)
        step1 = next(line for line in app.screen.lines if line.label == "step1/rank0")
        assert step1.worst is Status.FAIL and not step1.suspect
        screen = ui.screen_text(app)
        assert "step1/rank0  ✘ fail" in screen and "no call at fault: the first failing row is" in screen
