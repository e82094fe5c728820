"""The app opened on one folder: that dump's check (:mod:`ptdbg_tui.engine.replay.check`), where its
first NaN or Inf comes from and what its float64 replay says, as ``ptdbg-tui check`` prints it."""

from __future__ import annotations

from typing import ClassVar

from textual.app import App, ComposeResult
from textual.binding import BindingType
from textual.widgets import Footer, Header

from ptdbg_tui.app.literal import LiteralStatic
from ptdbg_tui.compare.report.words import check_walk_lines
from ptdbg_tui.engine.replay.check import check_walk
from ptdbg_tui.engine.replay.replayer import ReproInputError, before_ui


class CheckApp(App[None]):
    """One dump's non-finite origin; the check runs in a thread (its replay in a background worker
    process), the screen says so until it ends."""

    TITLE = "ptdbg-tui check"
    BINDINGS: ClassVar[list[BindingType]] = [("q", "quit", "Quit")]

    def __init__(self, path: str, step: int | None = None, rank: int | None = None) -> None:
        super().__init__()
        self.path, self.step, self.rank = path, step, rank
        self.sub_title = path
        before_ui()

    def compose(self) -> ComposeResult:
        yield Header()
        yield LiteralStatic(f"checking {self.path} for NaN and Inf…", id="check")
        yield Footer()

    def on_mount(self) -> None:
        self.run_worker(self._check, thread=True, exit_on_error=False)

    def _check(self) -> None:
        try:
            walk = check_walk(self.path, self.step, self.rank, background=True)
            found = [(d.label, c.origin, c.bad) for d, c in walk.found]
            lines = check_walk_lines(self.path, found, walk.dumps, walk.steps)
        except ReproInputError as e:
            lines = [f"cannot check {self.path}: {e}"]
        except OSError as e:
            lines = [f"cannot check {self.path}: {e.strerror or e}"]
        self.call_from_thread(self.query_one("#check", LiteralStatic).update, "\n".join(lines))
