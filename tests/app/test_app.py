"""Pilot tests on the demo dumps: culprit, detail panel, filter, search, failures, views, export."""

from __future__ import annotations

import csv
import re
import shutil

from textual.events import Key

from ptdbg_tui.app.call_tree import More
from ptdbg_tui.app.screens import HelpScreen
from ptdbg_tui.app.tree_model import Node
from ptdbg_tui.cli import main as cli_main
from ptdbg_tui.compare.model import Status


def _cursor(app) -> Node:
    node = app.call_tree.cursor_model_node
    assert node is not None
    return node


async def test_culprit_key_reveals_the_faulty_lstm_backward(demo_dumps, ui, demo_lstm_site):
    app = ui.app(*demo_dumps)
    async with app.run_test(size=ui.size) as pilot:
        await ui.settle(pilot)
        bar = str(app.query_one("#diagnosis").render())
        for expected in (
            "Culprit VF_lstm_0_backward",
            "track.lstm · LSTM",
            demo_lstm_site,
            "out, _ = self.lstm(seq)",
            "inputs 3e-06",
        ):
            assert expected in bar, expected
        await pilot.press("c")
        call = _cursor(app)
        assert (call.kind, call.key, call.parent.key) == ("call", "VF_lstm_0_backward", "track.lstm")
        assert app.call_tree.cursor_node.is_expanded
        text = ui.detail_text(app)
        assert "Culprit: introduces error — inputs " in text and ", allowed " in text
        assert text.count("allowed") == 1, "the verdict once"
        assert demo_lstm_site in text


async def test_detail_panel_of_a_failing_gradient(demo_dumps, ui):
    app = ui.app(*demo_dumps)
    async with app.run_test(size=ui.size) as pilot:
        await ui.settle(pilot)
        await pilot.press("c", "down", "down")  # the culprit call, its input.0, its output.0
        leaf = _cursor(app)
        assert leaf.key == "VF_lstm_0_backward_output.0" and leaf.status is Status.FAIL
        text = ui.detail_text(app)
        for expected in (
            "NPU",
            "Bench",
            "f32",
            "l2norm",
            "Δ",
            "rel Δ",
            "Cosine",
            "MaxAbsErr",
            "Accuracy Reached or Not",
            "Worst element",
            "Stack",
            "out, _ = self.lstm(seq)",
        ):
            assert expected in text, expected
        assert "✘ fail — Cosine" in text and "< 0.99" in text, "the reason names the threshold"
        histogram = app.detail.query_one("#histogram")
        assert histogram.display and histogram.plt is not None


async def test_filter_cycles_failures_unmatched_all(demo_dumps, ui):
    app = ui.app(*demo_dumps)
    async with app.run_test(size=ui.size) as pilot:
        await ui.settle(pilot)
        fails = app.model.status_counts()[Status.FAIL]
        assert fails > 0
        await pilot.press("f")
        assert "failures + named" in str(app.query_one("#progress").render())
        tops = [t.data for t in app.call_tree.root.children]
        assert tops and all(n.count(Status.FAIL) or n.count(Status.ERROR) for n in tops)
        await pilot.press("n")  # every shown leaf fails or is an entry of a call the diagnosis names
        shown = [t.data for t in app.call_tree.cursor_node.parent.children if isinstance(t.data, Node)]
        assert shown and all(n.status in (Status.FAIL, Status.ERROR) or app.model.named(n) for n in shown)
        assert not app._notifications, "the failures are shown"
        await pilot.press("f")
        assert not app.call_tree.root.children, "the demo has no unmatched entries"
        # an empty tree says why, rather than leaving a blank screen
        assert [n.message for n in app._notifications] == [
            "No entry to show with the filter unmatched only (yet); f cycles it."
        ]
        await pilot.press("f")
        assert len(app.call_tree.root.children) == 2  # Forward, Backward


async def test_search_by_name(demo_dumps, ui):
    app = ui.app(*demo_dumps)
    async with app.run_test(size=ui.size) as pilot:
        await ui.settle(pilot)
        await pilot.press("slash", "b", "a")
        box = app.query_one("#search")
        assert box.has_focus and box.value == "ba"
        box.value = "batch_norm_1_forward_output"
        await pilot.press("enter")
        assert _cursor(app).key.startswith("Functional_batch_norm_1_forward_output")
        assert app.call_tree.has_focus is False  # the search box keeps focus: Enter again = next match
        await pilot.press("escape")
        assert app.call_tree.has_focus


async def test_search_finds_modules_and_calls_and_counts_k_of_n(demo_dumps, ui):
    app = ui.app(*demo_dumps)
    async with app.run_test(size=ui.size) as pilot:
        await ui.settle(pilot)
        await pilot.press("slash", *"lstm")
        count = app.query_one("#search-count")
        hits = app.model.search("lstm")
        assert str(count.render()) == f"{len(hits)} match"
        assert [n.label for n in hits[:2]] == ["track · LstmHead", "track.lstm · LSTM"], "modules first"
        assert {n.kind for n in hits} >= {"module", "call", "leaf"}
        assert "lstm" in app.call_tree.highlight
        await pilot.press("enter")
        assert _cursor(app) is hits[0] and str(count.render()) == f"1/{len(hits)}"
        await pilot.press("enter", "enter")
        assert _cursor(app) is hits[2] and str(count.render()) == f"3/{len(hits)}"
        await pilot.press("shift+enter")
        assert _cursor(app) is hits[1] and str(count.render()) == f"2/{len(hits)}"
        await pilot.press("up", "up")
        assert _cursor(app) is hits[-1], "wraps around backwards"
        await pilot.press("escape")
        assert app.call_tree.highlight == "" and app.call_tree.has_focus


async def test_next_and_previous_failure_in_execution_order(demo_dumps, ui):
    app = ui.app(*demo_dumps)
    async with app.run_test(size=ui.size) as pilot:
        await ui.settle(pilot)
        # the failures, and the entries of the calls the diagnosis names (the culprit's inputs pass)
        order = [n for n in app.model.ordered_leaves() if n.status is Status.FAIL or app.model.named(n)]
        assert len(order) > app.model.status_counts()[Status.FAIL]
        await pilot.press("n")
        assert _cursor(app) is order[0]
        await pilot.press("n")
        assert _cursor(app) is order[1]
        await pilot.press("N")
        assert _cursor(app) is order[0]
        await pilot.press("N")
        assert _cursor(app) is order[-1], "wraps around"


async def test_flat_view_lists_calls_in_execution_order(demo_dumps, ui):
    app = ui.app(*demo_dumps)
    async with app.run_test(size=ui.size) as pilot:
        await ui.settle(pilot)
        await pilot.press("s")
        tops = [t.data for t in app.call_tree.root.children]
        assert all(isinstance(n, Node) and n.kind == "call" for n in tops)
        firsts = [n.children[0].row.seq for n in tops]
        assert firsts == sorted(firsts)
        assert tops[0].key == "Functional_conv2d_0_forward"
        labels = {n.key: app.call_tree._label(n).plain for n in tops}
        assert "forward" in labels["VF_lstm_0_forward"] and "backward" in labels["VF_lstm_0_backward"]
        await pilot.press("c")
        assert _cursor(app).key == "VF_lstm_0_backward"
        await pilot.press("s")
        assert [t.data.key for t in app.call_tree.root.children] == ["forward", "backward"]
        assert _cursor(app).key == "VF_lstm_0_backward", "the cursor survives the switch"


async def test_help_and_palette_commands(demo_dumps, ui):
    app = ui.app(*demo_dumps)
    async with app.run_test(size=ui.size) as pilot:
        await ui.settle(pilot)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for title in (
            "Find",
            "Filter",
            "Next failure",
            "Previous failure",
            "Next suspect",
            "Export CSV",
            "Toggle tree / flat view",
            "Help",
            "Match: align",
            "Rank/step overview",
        ):
            assert title in titles


async def test_export_writes_the_cli_csv(demo_dumps, ui, tmp_path):
    npu, bench = demo_dumps
    assert (
        cli_main(
            ["compare", str(npu), str(bench), "-o", str(tmp_path / "cli"), "--no-progress", "--jobs", "1"]
        )
        == 0
    )
    (cli_csv,) = (tmp_path / "cli").glob("compare_result_*.csv")
    target = tmp_path / "app" / "mine.csv"
    app = ui.app(npu, bench)
    async with app.run_test(size=ui.size) as pilot:
        await ui.settle(pilot)
        await pilot.press("e")
        box = app.screen.query_one("#export-path")
        assert box.value.startswith("./compare_result_") and box.value.endswith(".csv")
        box.value = ""
        await pilot.press(*"a/b")
        assert box.value == "a/b" and not app.query_one("#searchbar").has_class("-visible"), "/ is typed"
        box.value = str(target)
        await pilot.press("enter")
        await ui.wait_until(pilot, target.exists)
        await app.workers.wait_for_complete()
    # the CLI's columns and cells, then our verdict (the original's tools read the columns they know)
    exported = list(csv.reader(target.open()))
    assert [row[:-1] for row in exported] == list(csv.reader(cli_csv.open()))
    assert exported[0][-1] == "Diagnosis"
    culprit = {row[0]: row[-1] for row in exported[1:] if row[-1].startswith("culprit")}
    assert culprit and all(name.startswith("VF_lstm_0_backward_") for name in culprit)
    assert all(v.startswith("culprit: introduces error ×") for v in culprit.values())


async def test_wide_parents_show_a_window_of_children(small_dumps, ui, monkeypatch):
    from ptdbg_tui.app import call_tree

    monkeypatch.setattr(call_tree, "CHUNK", 2)
    app = ui.app(*small_dumps)
    async with app.run_test(size=ui.size) as pilot:
        await ui.settle(pilot)
        await pilot.press("s")  # flat: twelve calls at the top, two per chunk
        kids = app.call_tree.root.children
        assert len(kids) == 3 and isinstance(kids[-1].data, More) and kids[-1].data.hidden == 10
        app.call_tree.move_cursor(kids[-1])
        await pilot.press("enter")
        assert [isinstance(k.data, More) for k in app.call_tree.root.children] == [False] * 4 + [True]
        await pilot.press("s", "s")  # back to a fresh flat view: two calls shown
        await pilot.press("c")  # the culprit is the ninth call: the window moves to it
        assert _cursor(app).key == "VF_lstm_0_backward"
        kids = app.call_tree.root.children
        assert isinstance(kids[0].data, More) and kids[0].data.earlier and kids[0].data.hidden == 7
        app.call_tree.move_cursor(kids[0])
        await pilot.press("enter")  # "… 7 earlier": two more shown above, the cursor just above the old first
        kids = app.call_tree.root.children
        assert isinstance(kids[0].data, More) and kids[0].data.hidden == 5
        assert _cursor(app).key == "Torch_sum_0_backward"


async def test_worker_processes_compare_inside_the_running_app(demo_dumps, ui):
    """The default: tensors compared in a spawned process pool started from the engine thread."""
    app = ui.app(*demo_dumps, jobs=2)
    async with app.run_test(size=ui.size) as pilot:
        await ui.settle(pilot)
        assert app.model.status_counts()[Status.FAIL] == 11
        assert app.model.first_culprit()[0].call == "VF_lstm_0_backward"


async def test_what_is_typed_right_after_slash_goes_to_the_search_box(demo_dumps, ui):
    """A fast typist (or a paste): the keys after / are already queued when it is handled."""
    app = ui.app(*demo_dumps)
    async with app.run_test(size=ui.size) as pilot:
        await ui.settle(pilot)
        cursor = app.call_tree.cursor_line
        for key in ("slash", *"lstm"):
            app._driver.send_message(Key(key, "/" if key == "slash" else key))  # a burst, no waiting
        await ui.wait_until(pilot, lambda: app.search_box.value == "lstm")
        assert app.call_tree.cursor_line == cursor and not app.call_tree.flat, "l, s: not the tree"
        assert app.engine.options.match == "auto", "nor m the app"


async def test_the_user_s_script_is_the_top_of_the_tree_not_the_launcher(script_dumps, ui):
    """``ptdbg-dump run train.py``: the console script that started train.py is no user code."""
    app = ui.app(*script_dumps)
    async with app.run_test(size=ui.size) as pilot:
        await ui.settle(pilot)
        forward = app.model.root.children[0].child("forward")
        (top,) = [n for n in forward.children if n.kind == "frame"]  # the calls outside any module
        assert top.label == "<module>  train.py:12", top.label
        assert {n.label.split(":")[0] for n in top.children} == {"main  train.py"}
        labels = [n.label for n in app.model.search("ptdbg")]
        assert not labels, labels


async def test_the_model_s_node_holds_its_submodules_and_its_own_calls(demo_dumps, ui):
    """The demo model calls sigmoid in its own forward (module chain ``(model) · CenterNetLike``)
    after its backbone and heatmap ran: its node is their parent, not their sibling, in both
    directions, and the screen shows them inside it in execution order."""
    app = ui.app(*demo_dumps)
    async with app.run_test(size=ui.size) as pilot:
        await ui.settle(pilot)
        (pair,) = app.model.root.children
        for direction in pair.children:
            modules = [n for n in direction.children if n.kind == "module"]
            assert [n.label for n in modules] == ["(model) · CenterNetLike"], direction.label
        model = pair.child("forward").child("")
        labels = [n.label for n in model.children]
        assert labels == [
            "backbone · Backbone",
            "heatmap · Conv2d",
            "Torch_sigmoid_0",
            "size · Conv2d",
            "track · LstmHead",
        ]
        assert model.total == sum(n.total for n in model.children)
        app.call_tree.reveal(model.children[0])
        await pilot.press("right")  # expands (model) · CenterNetLike's first child, backbone
        screen = ui.screen_text(app)
        assert re.search(r"\(model\) · CenterNetLike.*\n.*├─ ▼ ✔ backbone · Backbone", screen), screen


async def test_the_culprit_s_detail_says_the_call_sidecar_could_not_be_read(tmp_path, demo_dumps, ui):
    """A folder where the NPU dump's call sidecar belongs: the verdict stands (the LSTM backward), and
    the culprit's detail notes that the keyword arguments were not compared, and why."""
    npu, cpu = (shutil.copytree(side, tmp_path / side.name) for side in demo_dumps)
    (sidecar,) = npu.rglob("*.calls.jsonl")
    sidecar.unlink()
    sidecar.mkdir()
    app = ui.app(npu, cpu)
    async with app.run_test(size=ui.size) as pilot:
        await ui.settle(pilot)
        await pilot.press("c")
        assert app.call_tree.cursor_model_node.key == "VF_lstm_0_backward"
        text = " ".join(ui.detail_text(app, width=400).split())
        why = f"{sidecar}: is a directory, not a regular file"
        assert f"Note: call sidecar not read ({why}): keyword arguments not compared" in text, text
