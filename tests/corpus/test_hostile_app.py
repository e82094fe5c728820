"""Markup and terminal escapes in a dump's names and stack text, in the app: shown literally, and the
app lives on (issue 29, breach 4: ``[/x]`` in a stack function name raised MarkupError in the
overview's rank label and ended the app; ``[@click=app.screenshot(...)]`` made a link)."""

from __future__ import annotations

import time

from textual.geometry import Region
from textual.pilot import Pilot

from ptdbg_tui.app.app import PtdbgApp
from ptdbg_tui.engine.live.options import LiveOptions
from tests.corpus.hostile import RAW_CONTROL, write_hostile_pair


def drawn(app: PtdbgApp) -> str:
    """The text of every line each widget of the screen draws, as it goes to the terminal (an SVG
    screenshot drops control characters, the terminal does not)."""
    return "\n".join(
        "".join(seg.text for seg in strip if not seg.control)
        for widget in app.screen.walk_children(with_self=True)
        if widget.display and widget.size.area
        for strip in widget.render_lines(Region(0, 0, *widget.size))
    )


async def settled(app: PtdbgApp, pilot: Pilot) -> None:
    deadline = time.monotonic() + 60
    while not (app.model.progress.done and app.settled):
        assert time.monotonic() < deadline, "the app did not settle"
        await pilot.pause(0.02)


FUNCTION = "[@click=app.screenshot('X.svg','..')]fwd[/] [/x]\x1b]0;t\x07"
MODULE = "net.[bold]act"


async def test_markup_and_escapes_from_the_dump_are_shown_literally(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    npu, bench = write_hostile_pair(
        tmp_path / "d", MODULE, FUNCTION, "y = relu(x)  # [/x][red]", ranks=(0, 1)
    )
    app = PtdbgApp(npu, bench, LiveOptions(watch=False, jobs=1))
    async with app.run_test(size=(160, 45)) as pilot:
        await settled(app, pilot)
        await pilot.press("c")  # the culprit: its detail and stack
        await pilot.pause()
        main = drawn(app)
        await pilot.press("o")  # the overview: the rank label and the table
        await pilot.pause()
        assert app.is_running and app.screen.__class__.__name__ == "OverviewScreen"
        overview = drawn(app)
        await pilot.press("escape")
    assert app.return_code in (None, 0)
    assert RAW_CONTROL.search(main + overview) is None
    assert "[/x]" in overview  # the rank label's stack function name, as written
    assert "fwd[/]" in main and "[bold]act" in main  # the stack's function name and the module
    assert not list(tmp_path.rglob("X.svg"))


async def test_escapes_in_dump_text_never_reach_the_terminal(tmp_path, monkeypatch):
    """A dtype text holding an OSC 52 and a CSI (kept as the dump writes it: the detail and the tree
    show it), and a toast naming it: the widgets and the toasts drew them raw; now each as U+FFFD.
    (Names holding a control character are refused when read: test_hostile_compare.)"""
    monkeypatch.chdir(tmp_path)
    dtype = "torch.float32\x1b]52;c;cHduZWQ=\x07\x1b[2J\u202e"
    npu, bench = write_hostile_pair(
        tmp_path / "d", "net.act", "fwd", "y = relu(x)", ranks=(0, 1), dtype=dtype
    )
    app = PtdbgApp(npu, bench, LiveOptions(watch=False, jobs=1))
    async with app.run_test(size=(160, 45)) as pilot:
        await settled(app, pilot)
        await pilot.press("c", "right", "down", "enter")  # the culprit, its entries, one entry's detail
        await pilot.pause()
        app.notify(f"The dtype {dtype} …", markup=False)
        await pilot.pause()
        main = drawn(app)
        await pilot.press("o")
        await pilot.pause()
        overview = drawn(app)
        toasts = [n.message for n in app._notifications]
    assert "float32\ufffd]52;c" in main and "Functional_relu" in overview
    assert RAW_CONTROL.search(main + overview) is None
    assert toasts and all(RAW_CONTROL.search(t) is None for t in toasts)
