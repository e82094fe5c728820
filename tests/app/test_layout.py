"""The engineer's view at 80x24 and 160x45: what the header, the diagnosis bar and the footer keep,
walking every suspect of several steps, the overview, the matching switch and its hint, no false
all-clear, the help screen's scrolling."""

from __future__ import annotations

import dataclasses
import re
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from rich.text import Text

from ptdbg_tui.app.bars import fit, flow, seg
from ptdbg_tui.app.detail import short_dtype
from ptdbg_tui.app.overview import OverviewScreen, overview
from ptdbg_tui.app.screens import HelpScreen
from ptdbg_tui.cli import main as cli_main
from ptdbg_tui.compare.model import Status
from ptdbg_tui.formats.layout import rank_dir_path
from ptdbg_tui.formats.naming import entry_name
from ptdbg_tui.formats.synthetic import write_array, write_ranks_pair
from ptdbg_tui.formats.writer import RankWriter

SIZES = [(80, 24), (160, 45)]


def test_fit_drops_the_least_important_segments_then_cuts():
    line = [seg("✘ 3", 0), seg("compared 10/10", 0), seg("tree", 5), seg("npu ↔ cpu", 7)]
    assert fit(line, 80).plain == "✘ 3  │  compared 10/10  │  tree  │  npu ↔ cpu"
    assert fit(line, 38).plain == "✘ 3 │ compared 10/10 │ tree", "narrow separators first"
    assert fit(line, 27).plain == "✘ 3 │ compared 10/10 │ tree"
    assert fit(line, 20).plain == "✘ 3 │ compared 10/10"
    assert fit(line, 10).plain == "✘ 3"
    assert fit([seg("compared 10/10")], 8).plain == "compare…", "the last one left is cut"
    shrinking = [seg("a.py:3  y = f(x)", 0), seg("inputs 3e-06, outputs 0.21, allowed 2e-05", 1, shrink=12)]
    assert fit(shrinking, 40).plain == "a.py:3  y = f(x) │ inputs 3e-06, …", "after a whole word"
    assert fit(shrinking, 28).plain == "a.py:3  y = f(x)", "dropped when it would be cut too short"
    waiting = [seg("✘ 0", 0), seg("bench: waiting for /work/scratch/everyday/dumps/cpuu", 1, shrink=24)]
    assert fit(waiting, 40).plain == "✘ 0 │ bench: waiting for /work/scratch/…", "a long word cut within"
    missing = [seg("nothing compared", 0), seg("NPU step0/rank0: no bench dump for it", 2, shrink=5)]
    assert fit(missing, 24).plain == "nothing compared", "dropped, not cut to one word ('NPU …')"
    assert isinstance(fit([], 10), Text)


def test_flow_wraps_onto_two_lines_and_drops_the_least_important():
    bar = [
        seg("✘ Culprit Functional_layer_norm_3_backward", 0),
        seg("encoder.layers.1.norm1 · LayerNorm", 1),
        seg("step1/rank0", 1),
        seg("+4 more (c/C)", 0),
        seg("train.py:56  x = self.norm1(x)", 0),
        seg("inputs 3e-06, outputs 0.21, allowed 2e-05: ×10,000", 2, shrink=12),
    ]
    assert [t.plain for t in flow(bar, 250)] == ["  │  ".join(s.text.plain for s in bar)]
    assert [t.plain for t in flow(bar, 120)] == [
        "✘ Culprit Functional_layer_norm_3_backward │ encoder.layers.1.norm1 · LayerNorm │ step1/rank0 │ "
        "+4 more (c/C)",
        "  train.py:56  x = self.norm1(x) │ inputs 3e-06, outputs 0.21, allowed 2e-05: ×10,000",
    ]
    assert [t.plain for t in flow(bar, 78)] == [
        "✘ Culprit Functional_layer_norm_3_backward │ step1/rank0 │ +4 more (c/C)",
        "  encoder.layers.1.norm1 · LayerNorm │ train.py:56  x = self.norm1(x)",
    ], "the first line with room"
    assert [t.plain for t in flow(bar, 60)] == [
        "✘ Culprit Functional_layer_norm_3_backward │ +4 more (c/C)",
        "  train.py:56  x = self.norm1(x)",
    ], "the evidence, then the less important names go"
    assert [t.plain for t in flow(bar, 30)] == ["✘ Culprit Functional_layer_no…", "  +4 more (c/C)"], (
        "what must stay is cut, not dropped"
    )


@pytest.mark.parametrize("size", SIZES)
async def test_the_culprit_api_and_file_line_are_on_screen_without_a_key(
    demo_dumps, ui, size, demo_lstm_site
):
    app = ui.app(*demo_dumps)
    async with app.run_test(size=size) as pilot:
        await ui.settle(pilot)
        await pilot.pause()
        screen = ui.screen_text(app).splitlines()
        header, bar = screen[0], "\n".join(screen[1:3])
        assert "✘ 11" in header and "all 179 compared" in header
        assert "Culprit VF_lstm_0_backward" in bar and "track.lstm" in bar
        assert demo_lstm_site in bar and "out, _ = self.lstm(seq)" in bar
        assert "unconfirmed: --replay-budget 0" in bar, "no replay will confirm it: the bar says why"
        assert len(app.diagnosis_bar.lines) == 2
        footer = screen[-1]
        assert "? Help" in footer and "q Quit" in footer
        assert all(len(line) <= size[0] for line in screen)


def test_dtypes_are_abbreviated():
    dtypes = ("torch.float32", "torch.bfloat16", "torch.int64", "<class 'float'>", "torch.bool")
    assert [short_dtype(d) for d in dtypes] == ["f32", "bf16", "i64", "float", "bool"]


async def test_a_narrow_detail_panel_splits_its_tables_and_abbreviates(demo_dumps, ui):
    app = ui.app(*demo_dumps)
    async with app.run_test(size=(80, 24)) as pilot:
        await ui.settle(pilot)
        await pilot.press("c", "down", "down")
        await pilot.pause()
        screen = ui.screen_text(app)
        assert "f32" in screen and "torch.f" not in screen
        assert "rel Δ" in screen and "0.003376" in screen, "four digits, never cut"
        assert app.query_one("#detail").size.width >= 36, "below 120 columns the panel gets half"


async def test_c_walks_every_suspect_of_every_step_and_the_overview_opens_a_pair(steps_dumps, ui):
    app = ui.app(*steps_dumps)
    async with app.run_test(size=(80, 24)) as pilot:
        await ui.settle(pilot)
        suspects = app.model.suspects()
        assert [app.model.infos[n.pair].label for _, n in suspects] == ["step0/rank0", "step2/rank0"]
        await pilot.press("c")
        assert app.call_tree.cursor_model_node is suspects[0][1]
        await pilot.press("c")
        assert app.call_tree.cursor_model_node is suspects[1][1]
        bar = "\n".join(ui.screen_text(app).splitlines()[1:3])
        assert "Suspect 2/2 VF_lstm_0_backward" in bar and "step2/rank0" in bar
        await pilot.press("c")
        assert app.call_tree.cursor_model_node is suspects[0][1], "wraps around"
        await pilot.press("C")
        assert app.call_tree.cursor_model_node is suspects[1][1]

        await pilot.press("o")
        assert isinstance(app.screen, OverviewScreen)
        assert [line.label for line in app.screen.lines] == ["step0/rank0", "step2/rank0", "step1/rank0"]
        clean = app.screen.lines[-1]
        assert clean.worst is Status.PASS and clean.divergence is None and not clean.suspect
        assert app.screen.lines[0].suspect.startswith("VF_lstm_0_backward")
        await pilot.press("down", "down", "enter")
        assert not isinstance(app.screen, OverviewScreen)
        node = app.call_tree.cursor_model_node
        assert node.kind == "pair" and node.label == "step1/rank0" and app.call_tree.cursor_node.is_expanded


async def test_the_hint_names_align_and_m_rematches_every_pair(shifted_dumps, ui):
    app = ui.app(*shifted_dumps, match="exact")
    async with app.run_test(size=(80, 24)) as pilot:
        await ui.settle(pilot)
        assert app.model.status_counts()[Status.FAIL] > 0
        header = ui.screen_text(app).splitlines()[0]
        assert "m → align" in header and "unpaired" in header
        assert any("m → align" in n.message for n in app._notifications), "said once as a toast"
        bar = "\n".join(ui.screen_text(app).splitlines()[1:3])
        assert "No operator" not in bar and "6 entries fail" in bar and "3 judged" in bar, "no all-clear"
        await pilot.press("m")  # exact → fuzzy: the same shifted pairing
        await ui.wait_until(pilot, lambda: app.model.match_modes() == "fuzzy" and ui.settled(app))
        await pilot.press("m")  # → align
        await ui.wait_until(pilot, lambda: app.model.match_modes() == "align" and ui.settled(app))
        counts = app.model.status_counts()
        assert counts[Status.FAIL] == 0 and counts[Status.UNMATCHED] == 2, "only the extra call is left"
        assert "m → align" not in ui.screen_text(app).splitlines()[0]
        assert not [n for n in app._notifications if "m → align" in n.message], "its toast went with it"
        commands = {c.title: c for c in app.get_system_commands(app.screen)}
        commands["Match: exact"].callback()
        await ui.wait_until(pilot, lambda: app.model.match_modes() == "exact" and ui.settled(app))
        assert app.model.status_counts()[Status.FAIL] > 0


@pytest.mark.parametrize("watch", [False, True])
async def test_no_all_clear_and_no_compared_count_when_the_bench_side_is_missing(
    demo_dumps, ui, tmp_path, watch
):
    app = ui.app(demo_dumps[0], tmp_path / "nothing", watch=watch)
    async with app.run_test(size=(80, 24)) as pilot:
        await ui.wait_until(pilot, lambda: ui.settled(app) and app.model.progress.npu_seen == 179)
        await pilot.pause()
        screen = ui.screen_text(app).splitlines()
        header, bar = screen[0], "\n".join(screen[1:3])
        assert "No operator" not in bar and "no verdict" in bar.lower()
        assert "nothing compared" in header
        assert ("bench: waiting for" if watch else "bench: no dump at") in header, "the missing side is said"
        assert "compared 179" not in header and "all 179" not in header and "✘" not in header, header
        assert "align" not in header, "no matching pairs what is not there"
        assert not [n for n in app._notifications if "align" in n.message]
        # while the NPU side writes its next step, the header said "compared 179/179" (a review)
        from dataclasses import replace

        app.model.progress = replace(app.model.progress, done=False)
        assert app._header_lines(80, {})[0].plain.lstrip().startswith("nothing compared")


async def test_help_scrolls_at_80x24(demo_dumps, ui):
    app = ui.app(*demo_dumps)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        scroll = app.screen.query_one("VerticalScroll")
        await pilot.pause()
        assert scroll.max_scroll_y > 0, "more than fits: it scrolls"
        await pilot.press("j", "j")
        await pilot.pause()
        assert scroll.scroll_y == 2, "j scrolls as in the tree"
        await pilot.press("k")
        await pilot.pause()
        assert scroll.scroll_y == 1
        await pilot.press("end")
        await pilot.pause()
        assert scroll.scroll_y == scroll.max_scroll_y
        assert "call shows its replay." in ui.screen_text(app), "the help's last line"


async def test_a_screenshot_goes_to_the_current_folder_without_downloads(
    demo_dumps, ui, tmp_path, monkeypatch
):
    from ptdbg_tui.app import app as app_module

    monkeypatch.setattr(app_module, "user_downloads_path", lambda: tmp_path / "no" / "Downloads")
    monkeypatch.chdir(tmp_path)
    app = ui.app(*demo_dumps)
    async with app.run_test(size=(80, 24)) as pilot:
        app.action_screenshot()
        # a thread writes the file, then the app says "Saved screenshot": only then is it whole
        await ui.wait_until(pilot, lambda: any(n.title == "Screenshot" for n in app._notifications))
    (shot,) = tmp_path.glob("*.svg")
    assert "<svg" in shot.read_text()


def _write_calls(side: Path, calls: Sequence[tuple[str, np.ndarray, np.ndarray]]) -> None:
    """A rank dump of one-input calls ``(api, input, output)``, numbered in order."""
    writer = RankWriter(rank_dir_path(side, 0, 0))
    for index, (api, inp, out) in enumerate(calls):
        write_array(writer, entry_name(api, index, "forward", "input", (0,)), inp)
        write_array(writer, entry_name(api, index, "forward", "output", (0,)), out)
    writer.close()


async def test_a_culprit_whose_entries_pass_is_tagged_in_the_tree(tmp_path, ui):
    """A 1% scale of a multiplication's output passes the original's thresholds (cosine 1, tiny
    MaxAbsErr) but is far beyond rounding: the tree says which call the diagnosis names."""
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((8, 16)) * 0.01).astype(np.float32)
    sides = tmp_path / "npu", tmp_path / "bench"
    for side in sides:
        y = x * 2 * (np.float32(1.01) if side.name == "npu" else np.float32(1))
        pairs = ((x, x + 1), (x + 1, x + 1), (x, y), (y, y + 1))
        _write_calls(side, [("Torch_mul" if i == 2 else "Torch_add", *io) for i, io in enumerate(pairs)])
    app = ui.app(*sides)
    async with app.run_test(size=(80, 24)) as pilot:
        await ui.settle(pilot)
        assert app.model.status_counts()[Status.FAIL] == 0, "every entry passes the thresholds"
        await pilot.press("c")
        screen = ui.screen_text(app)
        assert "Culprit Torch_mul_2_forward" in screen
        (line,) = [line for line in screen.splitlines() if "Torch_mul_2" in line and "◀" in line]
        assert "✔ ● Torch_mul_2" in line and "◀ culprit" in line
        (forward,) = [line for line in screen.splitlines() if "Forward" in line]
        assert "✔ ● Forward" in forward, "a branch holding a suspect is marked too"
        assert not [line for line in screen.splitlines() if "Torch_add_3" in line and "●" in line]


async def test_a_call_named_twice_is_tagged_by_its_best_rank(tmp_path, ui):
    """Error enters before a multiplication (changed outside the dumped calls) and the multiplication adds
    its own: two suspects at one call, the culprit and suspect 2. Its line says culprit, as the bar does
    (it said "suspect 2": the later rank overwrote the earlier)."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 16)).astype(np.float32)
    sides = tmp_path / "npu", tmp_path / "bench"
    for side in sides:
        npu = side.name == "npu"
        z = (x + 1) * np.float32(1.01 if npu else 1)  # changed outside the dumped calls on the NPU
        y = z * 2 * np.float32(1.05 if npu else 1)
        _write_calls(side, [("Torch_add", x, x + 1), ("Torch_mul", z, y)])
    app = ui.app(*sides)
    async with app.run_test(size=(80, 24)) as pilot:
        await ui.settle(pilot)
        assert [(s.call, s.kind) for s, _ in app.model.suspects()] == [
            ("Torch_mul_1_forward", "enters"),
            ("Torch_mul_1_forward", "growth"),
        ]
        await pilot.press("c")
        (line,) = [line for line in ui.screen_text(app).splitlines() if "Torch_mul_1" in line and "◀" in line]
        assert "◀ culprit" in line, line


@pytest.mark.parametrize("size", SIZES)
async def test_no_all_clear_when_both_sides_are_the_same_dump(demo_dumps, ui, size):
    app = ui.app(demo_dumps[0], demo_dumps[0])
    async with app.run_test(size=size) as pilot:
        await ui.settle(pilot)
        app.clear_notifications()  # the toast goes: the bar still says it
        await pilot.pause()
        screen = ui.screen_text(app).splitlines()
        bar = "\n".join(screen[1 : 1 + len(app.diagnosis_bar.lines)])
        assert "No operator" not in bar and Status.PASS.symbol not in bar
        assert "No verdict: the NPU and bench dumps are the same file" in bar
        assert "each row is compared with itself" in bar
        header = app.header_bar.lines[0]
        assert header.plain.lstrip().startswith("one dump twice: each row compared with itself"), (
            "not 'nothing compared', beside a tree of ✔ and the CLI's '179 passed'"
        )
        assert " all " not in header.plain and "✘" not in header.plain and "✔" not in header.plain, (
            "no counts"
        )
        fail = app.header_bar.styles_map()["fail"]
        assert not [s for s in header.spans if s.style == fail], "red means failures"


async def _overview(ui, app, pilot) -> list:
    """The overview's lines, once the comparison has settled and ``o`` opened it."""
    await ui.settle(pilot)
    await pilot.press("o")
    assert isinstance(app.screen, OverviewScreen)
    return app.screen.lines


async def test_the_overview_lists_the_earliest_step_first(tmp_path, ui):
    """Step 1 fails at its first call, step 0 only at its fifth: step 0 diverged first."""
    rng = np.random.default_rng(2)
    xs = [rng.standard_normal((4, 6)).astype(np.float32) for _ in range(6)]
    sides = tmp_path / "npu", tmp_path / "bench"
    for step, wrong in ((0, 4), (1, 0)):
        for side in sides:
            writer = RankWriter(rank_dir_path(side, 0, step))
            for index, x in enumerate(xs):
                y = x * 2 + (1 if side.name == "npu" and index == wrong else 0)
                write_array(writer, entry_name("Torch_mul", index, "forward", "input", (0,)), x)
                write_array(writer, entry_name("Torch_mul", index, "forward", "output", (0,)), y)
            writer.close()
    app = ui.app(*sides)
    async with app.run_test(size=(80, 24)) as pilot:
        lines = await _overview(ui, app, pilot)
        assert [line.label for line in lines] == ["step0/rank0", "step1/rank0"], "by step, then execution"
        assert [line.suspect.split()[0] for line in lines] == ["Torch_mul_4_forward", "Torch_mul_0_forward"]


async def test_a_step_on_one_side_only_is_said_though_there_is_a_culprit(steps_dumps, ui, tmp_path):
    """The NPU's step 2 is gone: the bench's step 2 is compared with nothing. The CLI said so in a
    note; the app said it only in an all-clear's 'Not covered' (a review)."""
    npu, bench = tmp_path / "npu", tmp_path / "bench"
    shutil.copytree(steps_dumps[0], npu)
    shutil.copytree(steps_dumps[1], bench)
    shutil.rmtree(next(npu.rglob("step2")))
    app = ui.app(npu, bench)
    async with app.run_test(size=(160, 45)) as pilot:
        await ui.settle(pilot)
        screen = ui.screen_text(app).splitlines()
        assert "Culprit" in screen[1], screen[1]
        assert "no NPU dump for it" in screen[0], screen[0]


async def test_at_80x24_c_shows_the_suspect_s_row_whole_and_the_bar_its_score(steps_dumps, ui):
    app = ui.app(*steps_dumps)
    async with app.run_test(size=(80, 24)) as pilot:
        await ui.settle(pilot)
        tree = app.call_tree
        for keys, tag in (
            (["c"], "◀ culprit"),
            (["c"], "◀ suspect 2"),
            (["s", "c"], "◀ culprit"),
            (["c"], "◀ suspect 2"),
        ):
            await pilot.press(*keys)
            await pilot.pause()
            top = int(tree.scroll_y)
            assert top <= tree.cursor_line < top + tree.scrollable_content_region.height, "in view"
            row = ui.screen_text(app).splitlines()[tree.region.y + tree.cursor_line - top][
                : tree.region.width
            ]
            assert "VF_lstm_0  " in row and row.rstrip().endswith(tag), row
            bar = "\n".join(line.plain for line in app.diagnosis_bar.lines)
            assert "VF_lstm_0_backward ×" in bar, "the score stays with the call"


async def test_at_80x24_flat_rows_keep_whole_names_and_the_export_dialog_fits(demo_dumps, ui):
    app = ui.app(*demo_dumps)
    async with app.run_test(size=(80, 24)) as pilot:
        await ui.settle(pilot)
        await pilot.press("s")
        await pilot.pause()
        tree = app.call_tree
        screen = ui.screen_text(app).splitlines()
        for line in range(tree.scrollable_content_region.height):
            node = tree.get_node_at_line(line).data
            row = screen[tree.region.y + line][: tree.region.width]
            direction = node.children[0].row.record.entry.direction
            assert f" {node.label}  {direction}" in row and "…" not in row, row
        assert tree.virtual_size.width <= tree.scrollable_content_region.width, "nothing to scroll sideways"
        await pilot.press("e")
        await pilot.pause()
        dialog = app.screen.query_one("Vertical")
        assert dialog.region.x >= 0 and dialog.region.right <= 80
        assert dialog.region.bottom <= 24


@pytest.mark.parametrize("size", SIZES)
async def test_the_error_chart_labels_its_whole_range_and_marks_the_selection_apart(demo_dumps, ui, size):
    app = ui.app(*demo_dumps)
    async with app.run_test(size=size) as pilot:
        await ui.settle(pilot)
        await pilot.press("c")  # the culprit's output error 0.3: the highest point
        await pilot.pause()
        chart = app.detail.query_one("#along")
        rows = Text.from_ansi(chart.plt.build()).plain.splitlines()
        labelled = [i for i, row in enumerate(rows) if re.match(r"\s*\S+┤", row)]
        drawn = [i for i, row in enumerate(rows) if "•" in row or "●" in row]
        assert labelled[0] <= drawn[0] and drawn[-1] <= labelled[-1], "every point between two labels"
        (selected,) = {row.index("┊") for row in rows if "┊" in row}  # the selected call: dotted
        assert not [row for row in rows if row[selected : selected + 1] == "│"], "unlike the fwd│bwd divider"
        assert any(row.count("│") > 2 for row in rows), "the divider is drawn"


async def test_the_culprit_is_the_first_divergent_rank_s_not_the_first_rank_folder_s(tmp_path, ui, capsys):
    """Rank 0 fails at its fifth call, rank 1 at its first: the bar names rank 1's call, as the
    overview and the CLI's first divergent rank do."""
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal((4, 6)).astype(np.float32) for _ in range(6)]
    sides = tmp_path / "npu", tmp_path / "bench"
    for rank, wrong in ((0, 4), (1, 0)):
        for side in sides:
            writer = RankWriter(rank_dir_path(side, rank, None))
            for index, x in enumerate(xs):
                y = x * 2 + (1 if side.name == "npu" and index == wrong else 0)
                write_array(writer, entry_name("Torch_mul", index, "forward", "input", (0,)), x)
                write_array(writer, entry_name("Torch_mul", index, "forward", "output", (0,)), y)
            writer.close()
    assert cli_main(["compare", *map(str, sides), "-o", str(tmp_path / "out"), "--no-progress"]) == 0
    assert "first divergent rank: rank1: Torch_mul_0_forward" in capsys.readouterr().out
    app = ui.app(*sides)
    async with app.run_test(size=(80, 24)) as pilot:
        await ui.settle(pilot)
        culprit, node = app.model.first_culprit()
        assert culprit.call == "Torch_mul_0_forward" and app.model.infos[node.pair].label == "rank1"
        bar = "\n".join(ui.screen_text(app).splitlines()[1:3])
        assert "Culprit Torch_mul_0_forward" in bar and "rank1" in bar


@pytest.mark.parametrize("size", [(80, 24), (160, 45)])
async def test_the_narrow_dialog_s_question_is_shown_whole(demo_dumps, ui, size):
    from ptdbg_tui.app.screens import NarrowScreen

    app = ui.app(*demo_dumps)
    async with app.run_test(size=size) as pilot:
        await ui.settle(pilot)
        await pilot.press("c", "t")
        await ui.wait_until(pilot, lambda: isinstance(app.screen, NarrowScreen))
        box = app.screen.query_one("Vertical").region
        lines = ui.screen_text(app).splitlines()[box.y : box.bottom]
        text = " ".join(line[box.x : box.right].strip(" █▀▄") for line in lines)
        assert "at this step and rank" in text and "Write its config (ptdbg-dump run --config) to:" in text


async def test_the_overview_follows_the_comparison_while_open(tmp_path, ui):
    """Opened while a pair's bench dump is still missing, the overview lists that pair as comparing; when
    the dump arrives the open overview takes its verdict, with the cursor still on the pair it was on."""
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal((4, 6)).astype(np.float32) for _ in range(4)]
    sides = tmp_path / "npu", tmp_path / "bench"

    def write(side, rank):
        writer = RankWriter(rank_dir_path(side, rank, 0))
        for index, x in enumerate(xs):
            y = x * 2 + (1 if side.name == "npu" and rank == 1 and index == 2 else 0)
            write_array(writer, entry_name("Torch_mul", index, "forward", "input", (0,)), x)
            write_array(writer, entry_name("Torch_mul", index, "forward", "output", (0,)), y)
        writer.close()

    for side, rank in ((sides[0], 0), (sides[1], 0), (sides[0], 1)):
        write(side, rank)
    app = ui.app(*sides, watch=True, quiet_s=600.0, rescan_s=0.5)
    async with app.run_test(size=(80, 24)) as pilot:
        await ui.wait_until(pilot, lambda: [line.judged for line in overview(app.model)] == [True, False])
        await pilot.press("o")
        screen = app.screen
        assert isinstance(screen, OverviewScreen)
        assert [(line.label, line.judged) for line in screen.lines] == [
            ("step0/rank0", True),
            ("step0/rank1", False),
        ]
        text = ui.screen_text(app)
        assert "(1 still comparing)" in text and re.search(r"step0/rank1 +… pending", text), text
        write(sides[1], 1)
        await ui.wait_until(pilot, lambda: all(line.judged for line in screen.lines), timeout=20)
        await pilot.pause()  # its repaint
        assert app.screen is screen, "still open"
        assert [line.label for line in screen.lines] == ["step0/rank1", "step0/rank0"], "divergent first"
        assert screen.lines[0].suspect.startswith("Torch_mul_2_forward")
        text = ui.screen_text(app)
        assert "still comparing" not in text and "Torch_mul_2_forward" in text
        await pilot.press("enter")
        assert app.screen is not screen
        assert app.call_tree.cursor_model_node.pair == screen.lines[1].key, "the cursor stayed on its pair"
        # a pair found but not read yet, or one without rows, is no all-clear in the tree
        info = app.model.infos[screen.lines[1].key]
        found = app.model._pair(dataclasses.replace(info, key="later", label="step9/rank9"))
        assert app.call_tree._label(found).plain.startswith("… step9/rank9")
        app.model.diagnoses["later"] = app.model.diagnoses[info.key]
        assert app.call_tree._label(found).plain.startswith("· step9/rank9")
        assert app.call_tree._label(app.model.root.child(info.key)).plain.startswith("✔ step0/rank0")


async def test_news_between_the_overview_s_push_and_its_mount_waits_for_the_mount(tmp_path, ui):
    """The engine's news can come after ``o`` pushed the overview and before its table is mounted:
    following it then ended the app (``NoMatches``). The overview shows the lines of its mount."""
    npu, bench = write_ranks_pair(tmp_path, ranks=2, layers=1)
    app = ui.app(npu, bench)
    async with app.run_test(size=(80, 24)) as pilot:
        await ui.settle(pilot)
        screen = OverviewScreen(app.model, app.header_bar.styles_map())
        screen.follow()  # not mounted: nothing to follow yet
        screen.lines = []  # what it was made with is old by its mount
        await app.push_screen(screen)
        await pilot.pause()
        assert screen.lines == overview(app.model) and len(screen.lines) == 2
        assert "2 rank/step pairs" in ui.screen_text(app)


async def test_news_while_the_overview_is_taken_down_is_left(tmp_path, ui):
    """The engine's news can come while the overview's widgets are being removed: following it then ended
    the app (``NoMatches`` on ``#ranks``)."""
    npu, bench = write_ranks_pair(tmp_path, ranks=2, layers=1)
    app = ui.app(npu, bench)
    async with app.run_test(size=(80, 24)) as pilot:
        await ui.settle(pilot)
        screen = OverviewScreen(app.model, app.header_bar.styles_map())
        await app.push_screen(screen)
        await pilot.pause()
        await screen.query_one("Vertical").remove()  # what the screen's removal does first
        screen.lines = []
        screen.follow()  # nothing to follow: no NoMatches
        assert screen.lines == []


@pytest.mark.parametrize(
    ("collectives", "shown", "walked"),
    [
        (
            True,
            "receives via Distributed_all_reduce_1_forward",
            "Suspect 2/3 receives the error through Distributed_all_reduce_1_forward",
        ),
        (False, "enters before Torch_tanh_1_forward", "Suspect 2/3 error enters before Torch_tanh_1_forward"),
    ],
)
async def test_a_rank_that_only_receives_the_error_says_how_in_the_overview_and_the_bar(
    tmp_path, ui, collectives, shown, walked
):
    """Rank 2's second linear is wrong. With the collectives dumped, ranks 0 and 1 see it first in the
    all_reduce after it; without, at a tanh's input: it came in outside the dumped calls, before that
    tanh. The overview lists rank 2 first and the others as receiving it, and the bar, walked to a
    receiving rank's suspect, says how, as the CLI's report does (before, they read as culprits; and
    without collectives, as if the tanh had carried the error in)."""
    npu, bench = write_ranks_pair(tmp_path, ranks=3, faulty_rank=2, faulty_layer=1, collectives=collectives)
    app = ui.app(npu, bench)
    async with app.run_test(size=(160, 45)) as pilot:
        await ui.settle(pilot)
        await pilot.press("o")
        lines = app.screen.lines
        assert [(line.label, line.received) for line in lines] == [
            ("step0/rank2", False),
            ("step0/rank0", True),
            ("step0/rank1", True),
        ]
        assert lines[0].suspect.startswith("Functional_linear_1_forward")
        assert {line.suspect for line in lines[1:]} == {shown}
        assert shown in ui.screen_text(app)
        await pilot.press("escape")
        bar = lambda: "\n".join(ui.screen_text(app).splitlines()[1:3])  # noqa: E731
        assert "Culprit Functional_linear_1_forward" in bar()
        await pilot.press("c", "c")  # the culprit, then the next rank's first suspect
        await pilot.pause()
        assert walked in bar(), bar()
        assert "receives the error through Torch_tanh" not in bar()


async def test_the_overview_counts_every_row_of_a_pair_its_warnings_too(tmp_path, ui):
    """Two steps of a real computation whose NPU loss is 1% off: the 0-d loss is a warning (the
    original's Nan verdict, beyond 0.001). The overview said '! warn' for each pair but had no column
    for warnings: its counts left that row out (✘ 0 ⚠ 0 ∅ 0 … 0 ✔ 5 of 6 rows)."""
    import torch

    from dumper import PrecisionDebugger
    from ptdbg_tui.app.overview import COUNTED

    sides = tmp_path / "npu", tmp_path / "bench"
    for side in sides:
        torch.manual_seed(0)
        x = torch.randn(4, 6)
        debugger = PrecisionDebugger(dump_path=str(side), hook_name="dump", step=[0, 1])
        for _ in range(2):
            debugger.start()
            torch.tanh(x).mean() * (1.01 if side.name == "npu" else 1.0)
            debugger.stop()
            debugger.step()
    app = ui.app(*sides)
    async with app.run_test(size=(80, 24)) as pilot:
        lines = await _overview(ui, app, pilot)
        assert len(lines) == 2
        for line, pair in zip(lines, app.model.root.children, strict=True):
            counts = {s: pair.count(s) for s in Status}
            assert counts[Status.WARN] >= 1, line.label
            assert sum(line.counts) == sum(counts.values()), "every row is in one column"
            assert line.counts[COUNTED.index(Status.WARN)] == counts[Status.WARN]
