"""The app places a pair's rows in its tree only when something needs them: until then the pair's line,
the header and the overview count them; opening, searching and exporting see every row."""

from __future__ import annotations

import csv

from ptdbg_tui.app.overview import OverviewScreen
from ptdbg_tui.compare.model import Status
from ptdbg_tui.formats.synthetic import write_ranks_pair


async def test_a_pair_s_rows_wait_until_it_is_opened_or_searched_and_export_writes_them_all(tmp_path, ui):
    npu, bench = write_ranks_pair(tmp_path, ranks=3, layers=2, faulty_rank=None)  # nothing named
    app = ui.app(npu, bench)
    async with app.run_test(size=(160, 45)) as pilot:
        await ui.settle(pilot)
        model = app.model
        rows = {info.key: len(pair_rows) for info, pair_rows in app.engine.pairs()}
        pairs = model.root.children
        assert len(pairs) == 3 and set(model._waiting) == set(rows) and not model.leaves, (
            "nothing needed them"
        )
        assert {p.key: p.total for p in pairs} == rows and model.root.total == sum(rows.values())
        assert all(p.worst is Status.PASS for p in pairs)
        text = ui.screen_text(app)
        assert all(f"✔ {p.label}" in text and f"{p.total:,}" in text for p in pairs), text

        await pilot.press("e")  # the export reads the engine's rows: it places nothing
        target = tmp_path / "out" / "all.csv"
        app.screen.query_one("#export-path").value = str(target)
        await pilot.press("enter")
        await ui.wait_until(pilot, lambda: len(list(target.parent.glob("*.csv"))) == 3)
        await app.workers.wait_for_complete()
        written = sorted(len(list(csv.reader(f.open()))) - 1 for f in target.parent.glob("*.csv"))
        assert written == sorted(rows.values()) and len(model._waiting) == 3

        await pilot.press("o")
        screen = app.screen
        assert isinstance(screen, OverviewScreen)
        assert {line.key: sum(line.counts) for line in screen.lines} == rows
        opened = screen.lines[0].key
        await pilot.press("enter")  # the pair opens: its rows are placed, the others still wait
        await pilot.pause()
        assert opened not in model._waiting and len(model._waiting) == 2
        assert sum(pair == opened for pair, _ in model.leaves) == rows[opened]
        assert app.call_tree.cursor_model_node is model.root.child(opened)
        assert app.call_tree.cursor_node is not None and app.call_tree.cursor_node.is_expanded

        await pilot.press("slash", *"tanh_1_forward_output")  # the search looks at every pair's rows
        await pilot.pause()
        hits = model.search("tanh_1_forward_output")
        assert not model._waiting and {n.pair for n in hits} == set(rows)
        assert str(app.search_count.render()) == f"{len(hits):,} match"
