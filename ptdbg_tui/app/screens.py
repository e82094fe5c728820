"""Modal screens: the key help, the CSV export dialog, the narrowing dialog and its commands."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, Label, Markdown, Static

HELP = """\
# ptdbg-tui keys

| key | action |
| --- | --- |
| ↑ ↓ / `j` `k` | move the cursor |
| → ← / `l` `h` | expand / collapse (or go to the parent) |
| Enter, Space | expand or collapse; Enter on "… more" shows the next chunk |
| `g` `G` (Home End) | top / bottom |
| `c` / `C` | next / previous suspect: the culprit, then those of every direction, step and rank |
| `/` | find entries, calls, modules by name or path: Enter/↓ next, shift+Enter/↑ previous (k/N) |
| `n` / `N` | next / previous failure in execution order |
| `f` | filter: all → failures only → unmatched only |
| `m` | matching: auto → exact → fuzzy → align (every pair re-matched) |
| `o` | overview of the rank/step pairs, sorted by first divergence (Enter opens one) |
| `s` | switch between the call tree and the flat execution-order view |
| `e` | export the comparison as CSV (same format as `ptdbg-tui compare`) |
| `t` | on a module or a call: the next dump's config, its tensors only; then that dump replaces this one |
| `?` | this help (↑ ↓ `j` `k` PgUp PgDn `g` `G` scroll, Esc closes) |
| ctrl+p | command palette (every action above, the match modes, the theme, a screenshot) |
| `q` | quit |

Symbols: ✔ pass · ✘ fail · ! warning · ⚠ error (could not compare) · ∅ unmatched · … pending ·
· passed without comparing data (a scalar, a value without tensor).
An inner node shows the worst state under it and its number of failing entries.
`◀ culprit`, `◀ suspect k`: the calls the diagnosis names (their entries may still pass); a red ●
marks the branches that lead to them.

The bar under the header names the culprit: its call, module (path · class), the step/rank when
there are several, and where the user's code called it (file:line and the source line), with the
evidence: the relative error of its inputs and outputs against what rounding allows.
"""


class HelpScroll(VerticalScroll):
    """The help's text, which scrolls with the tree's keys too."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j", "scroll_down", "Down", show=False),
        Binding("k", "scroll_up", "Up", show=False),
        Binding("g", "scroll_home", "Top", show=False),
        Binding("G", "scroll_end", "Bottom", show=False),
    ]


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,question_mark", "dismiss", "Close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 100%; max-width: 100; height: auto; max-height: 100%;
                                  border: thick $primary; background: $surface; padding: 0 1; }
    """

    def compose(self) -> ComposeResult:
        with HelpScroll():
            yield Markdown(HELP)

    def on_mount(self) -> None:
        self.query_one(HelpScroll).focus()


@dataclass(frozen=True)
class ExportRequest:
    path: str
    stack: bool


class ExportScreen(ModalScreen["ExportRequest | None"]):
    """Asks where the CSV goes; dismisses with an :class:`ExportRequest` or ``None``."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]
    DEFAULT_CSS = """
    ExportScreen { align: center middle; }
    ExportScreen > Vertical { width: 84; max-width: 100%; height: auto; max-height: 100%;
                              border: thick $primary; background: $surface; padding: 1 2; }
    ExportScreen Horizontal { height: auto; margin-top: 1; }
    ExportScreen Button { margin-right: 2; }
    """

    def __init__(self, default_path: str, pairs: int) -> None:
        super().__init__()
        self.default_path = default_path
        self.pairs = pairs

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("Export the comparison as CSV (the format of ptdbg-tui compare)")
            if self.pairs > 1:
                yield Label(f"{self.pairs} rank/step pairs: one file each, named after the pair.")
            yield Input(self.default_path, id="export-path")
            yield Checkbox("add the NPU_Stack_Info column", id="export-stack")
            with Horizontal():
                yield Button("Export", variant="primary", id="export-ok")
                yield Button("Cancel", id="export-cancel")

    def _submit(self) -> None:
        path = self.query_one("#export-path", Input).value.strip()
        if path:
            self.dismiss(ExportRequest(path, self.query_one("#export-stack", Checkbox).value))

    @on(Input.Submitted)
    def _entered(self) -> None:
        self._submit()

    @on(Button.Pressed, "#export-ok")
    def _ok(self) -> None:
        self._submit()

    @on(Button.Pressed, "#export-cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)


class NarrowScreen(ModalScreen["str | None"]):
    """Asks where the next dump's config goes; dismisses with the path or ``None``."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]
    DEFAULT_CSS = """
    NarrowScreen { align: center middle; }
    NarrowScreen > Vertical { width: 84; max-width: 100%; height: auto; max-height: 100%;
                              border: thick $primary; background: $surface; padding: 1 2; }
    NarrowScreen Horizontal { height: auto; margin-top: 1; }
    NarrowScreen Button { margin-right: 2; }
    """

    def __init__(self, what: str, default_path: str) -> None:
        super().__init__()
        self.what = what
        self.default_path = default_path

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(f"Narrow the next dump to {self.what}: tensors, forward and backward, at this "
                        "step and rank. Write its config (ptdbg-dump run --config) to:", markup=False)
            yield Input(self.default_path, id="narrow-path")
            with Horizontal():
                yield Button("Write", variant="primary", id="narrow-ok")
                yield Button("Cancel", id="narrow-cancel")

    def _submit(self) -> None:
        path = self.query_one("#narrow-path", Input).value.strip()
        if path:
            self.dismiss(path)

    @on(Input.Submitted)
    def _entered(self) -> None:
        self._submit()

    @on(Button.Pressed, "#narrow-ok")
    def _ok(self) -> None:
        self._submit()

    @on(Button.Pressed, "#narrow-cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)


class TextScreen(ModalScreen[None]):
    """Lines to read and copy (the commands a narrowing prints)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,enter", "dismiss", "Close")]
    DEFAULT_CSS = """
    TextScreen { align: center middle; }
    TextScreen > VerticalScroll { width: 100%; max-width: 140; height: auto; max-height: 100%;
                                  border: thick $primary; background: $surface; padding: 0 1; }
    """

    def __init__(self, lines: list[str]) -> None:
        super().__init__()
        self.lines = lines

    def compose(self) -> ComposeResult:
        with HelpScroll():
            yield Static("\n".join(self.lines), markup=False, id="text-lines")

    def on_mount(self) -> None:
        self.query_one(HelpScroll).focus()
