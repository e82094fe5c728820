"""Our verdict in every view: a kernel 2% off passes the original's thresholds (every row ✔, "0
failed"), yet the header counts the calls the diagnosis names, ``n`` and ``f`` reach them and their
rows, the tree marks them ●, and the export says so in a last column."""

from __future__ import annotations

import csv

from ptdbg_tui.compare.model import Status

CULPRIT, SECOND = "Torch_tanh_0_forward", "Functional_linear_0_backward"


def _named(app) -> list[str]:
    return [s.call for s, _ in app.model.suspects()]


async def test_the_header_counts_the_calls_named_beside_the_original_s_failures(passing_culprit_dumps, ui):
    app = ui.app(*passing_culprit_dumps)
    async with app.run_test(size=(80, 24)) as pilot:
        await ui.settle(pilot)
        assert app.model.status_counts()[Status.FAIL] == 0, "the original's thresholds pass 2%"
        assert _named(app) == [CULPRIT, SECOND]
        header = str(app.query_one("#progress").render())
        assert header.startswith("✘ 0 · ● 2 named │ all 14 compared"), header


async def test_n_walks_the_named_calls_rows_in_execution_order(passing_culprit_dumps, ui):
    app = ui.app(*passing_culprit_dumps)
    async with app.run_test(size=ui.size) as pilot:
        await ui.settle(pilot)
        reached = []
        for _ in range(6):
            await pilot.press("n")
            node = app.call_tree.cursor_model_node
            reached.append((node.parent.key, node.label))
        assert reached == [
            (CULPRIT, "input.0"),
            (CULPRIT, "output.0"),
            (SECOND, "input.0"),
            (SECOND, "output.0"),
            (SECOND, "output.1"),
            (CULPRIT, "input.0"),  # wraps around
        ]
        await pilot.press("N")
        assert app.call_tree.cursor_model_node.parent.key == SECOND
        assert not [n for n in app._notifications if "No failing entry" in n.message]


async def test_f_shows_the_named_calls_and_their_rows_marked(passing_culprit_dumps, ui):
    app = ui.app(*passing_culprit_dumps)
    async with app.run_test(size=ui.size) as pilot:
        await ui.settle(pilot)
        await pilot.press("f")
        assert "filter: failures + named" in str(app.query_one("#progress").render())
        assert not app._notifications, "the tree is not empty"
        await pilot.press("n")
        text = ui.screen_text(app)
        assert "● Torch_tanh_0  2  ◀ culprit" in text
        assert "✔ ● input.0" in text and "✔ ● output.0" in text, "a ✔ row of a named call is marked"
        shown = [n for n in app.model.ordered_leaves() if app.model.visible(n)]
        assert {n.parent.key for n in shown} == {CULPRIT, SECOND}
        assert len(shown) == 5, "every row of both calls, none else"
        unnamed = app.model.calls[(app.model.root.children[0].key, "Functional_relu_0_forward")]
        assert not app.model.visible(unnamed) and not app.model.named(unnamed.children[0])


async def test_the_export_adds_our_verdict_after_the_original_s_columns(passing_culprit_dumps, ui, tmp_path):
    target = tmp_path / "mine.csv"
    app = ui.app(*passing_culprit_dumps)
    async with app.run_test(size=ui.size) as pilot:
        await ui.settle(pilot)
        await pilot.press("e")
        app.screen.query_one("#export-path").value = str(target)
        await pilot.press("enter")
        await ui.wait_until(pilot, target.exists)
        await app.workers.wait_for_complete()
    header, *rows = list(csv.reader(target.open()))
    assert header[-3:] == ["Accuracy Reached or Not", "Err_message", "Diagnosis"]
    verdicts = {row[0]: (row[-3], row[-1]) for row in rows}
    assert verdicts["Torch_tanh_0_forward_output.0"] == ("Yes", "culprit: introduces error ×1,240")
    assert verdicts["Functional_linear_0_backward_output.0"][1].startswith("suspect 2: introduces error ×")
    assert verdicts["Functional_relu_0_forward_output.0"][1] == ""
