"""Modal screens: the key help, the CSV export dialog, the narrowing dialog and its commands, the
repro's folder."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, TypeVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, Label, Markdown

from ptdbg_tui.app.literal import LiteralLabel, LiteralStatic

HELP = """\
# ptdbg-tui keys

| key | action |
| --- | --- |
| ↑ ↓ / `j` `k` | move the cursor |
| → ← / `l` `h` | expand / collapse (or go to the parent) |
| Enter, Space | expand or collapse; Enter on "… more" shows the next chunk |
| `g` `G` (Home End) | top / bottom |
| `c` / `C` | next / previous suspect: the culprit, then those of every direction, step and rank |
| `r` | replay the selected call: re-run it in float64 on each side's own recorded inputs |
| `R` | write the selected call's repro for the kernel team (`repro.py`: `python repro.py` needs torch) |
| `/` | find entries, calls, modules by name or path: Enter/↓ next, shift+Enter/↑ back (3/12: 3rd of 12) |
| `n` / `N` | next / previous failure (✘, ⚠ could not compare) or entry of a call named ● |
| `f` | filter: all → failures + named (●) → unmatched only |
| `m` | matching: auto → exact → fuzzy → align (every pair re-matched) |
| `o` | overview of the rank/step pairs, sorted by first divergence (Enter opens one) |
| `s` | switch between the call tree and the flat execution-order view |
| `e` | export the comparison as CSV (`ptdbg-tui compare`'s columns, then our Diagnosis) |
| `t` | on a module or a call: the next dump's config, its tensors only; then that dump replaces this one |
| `S` | the Steps screen, where the folders hold monitor streams too (`ptdbg-dump run --monitor`) |
| `?` | this help (↑ ↓ `j` `k` PgUp PgDn `g` `G` scroll, Esc closes) |
| ctrl+p | command palette (every action above, the match modes, the theme, a screenshot) |
| `q` | quit |

Symbols: ✔ pass · ✘ fail · ! warning · ⚠ error (could not compare) · ∅ unmatched · … pending ·
· passed without comparing data (a scalar, a value without tensor).
An inner node shows the worst state under it and its number of failing entries.
`◀ culprit`, `◀ suspect k`: the calls the diagnosis names. A red ● marks them, their entries and the
branches that lead to them: their entries may pass the original's thresholds (✔: they pass a 2%
error), the diagnosis says they carry more error than their inputs and rounding allow. The header
counts them beside the failures: `✘ 0 · ● 2 named`.

The bar under the header names the culprit: its call, module (path · class), the step/rank when
there are several, and where the user's code called it (file:line and the source line), with the
evidence: the relative error of its inputs and outputs against what rounding allows.

Replay (needs torch): once the comparison settles, the suspects and the calls up to the first failing
row are re-run in float64 on each side's own recorded inputs (`--replay-budget` seconds at most). A
suspect the replay proves wrong on its own inputs says "confirmed by replay"; one that both sides
compute right on their inputs is refuted and drops (its error is inherited). The detail panel of a
replayed call shows its replay.
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
    """Every key (of the call tree, or ``text``'s screen). Toasts wait behind it (app.tcss)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,question_mark", "dismiss", "Close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 100%; max-width: 100; height: auto; max-height: 100%;
                                  border: thick $primary; background: $surface; padding: 0 1; }
    """

    def __init__(self, text: str = HELP) -> None:
        super().__init__()
        self.text = text

    def compose(self) -> ComposeResult:
        with HelpScroll():
            yield Markdown(self.text)

    def on_mount(self) -> None:
        self.query_one(HelpScroll).focus()


T = TypeVar("T")


@dataclass(frozen=True)
class ExportRequest:
    path: str
    stack: bool


class PathDialog(ModalScreen[T]):
    """Asks for a path: Enter or the first button submits (:meth:`result` of the path typed), Escape or
    Cancel dismisses with ``None``. ``compose`` yields the form (:meth:`buttons` at its end)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]
    DEFAULT_CSS = """
    PathDialog { align: center middle; }
    PathDialog > Vertical { width: 84; max-width: 100%; height: auto; max-height: 100%;
                            border: thick $primary; background: $surface; padding: 1 2; }
    PathDialog Label { width: 100%; }  /* wraps a long question instead of cutting it */
    PathDialog Horizontal { height: auto; margin-top: 1; }
    PathDialog Button { margin-right: 2; }
    """

    def result(self, path: str) -> T:
        raise NotImplementedError

    @staticmethod
    def buttons(ok: str, name: str) -> ComposeResult:
        with Horizontal():
            yield Button(ok, variant="primary", id=f"{name}-ok", classes="ok")
            yield Button("Cancel", id=f"{name}-cancel", classes="cancel")

    def _submit(self) -> None:
        path = self.query_one(Input).value.strip()
        if path:
            self.dismiss(self.result(path))

    @on(Input.Submitted)
    def _entered(self) -> None:
        self._submit()

    @on(Button.Pressed, ".ok")
    def _ok(self) -> None:
        self._submit()

    @on(Button.Pressed, ".cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)


class ExportScreen(PathDialog["ExportRequest | None"]):
    """Asks where the CSV goes; dismisses with an :class:`ExportRequest` or ``None``."""

    def __init__(self, default_path: str, pairs: int) -> None:
        super().__init__()
        self.default_path = default_path
        self.pairs = pairs

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(
                "Export the comparison as CSV: the columns of ptdbg-tui compare, then Diagnosis "
                "(culprit or suspect k on the rows of the calls the diagnosis names)"
            )
            if self.pairs > 1:
                yield Label(f"{self.pairs} rank/step pairs: one file each, named after the pair.")
            yield Input(self.default_path, id="export-path")
            yield Checkbox("add the NPU_Stack_Info column", id="export-stack")
            yield from self.buttons("Export", "export")

    def result(self, path: str) -> ExportRequest | None:
        return ExportRequest(path, self.query_one("#export-stack", Checkbox).value)


class NarrowScreen(PathDialog["str | None"]):
    """Asks where the next dump's config goes; dismisses with the path or ``None``."""

    def __init__(self, what: str, default_path: str) -> None:
        super().__init__()
        self.what = what
        self.default_path = default_path

    def compose(self) -> ComposeResult:
        with Vertical():
            yield LiteralLabel(
                f"Narrow the next dump to {self.what}: tensors, forward and backward, at this "
                "step and rank. Write its config (ptdbg-dump run --config) to:",
                markup=False,
            )
            yield Input(self.default_path, id="narrow-path")
            yield from self.buttons("Write", "narrow")

    def result(self, path: str) -> str | None:
        return path


class TextScreen(ModalScreen[None]):
    """Lines to read and copy (the commands a narrowing prints). ``y`` copies them whole: a terminal's
    own selection picks up the line breaks where a narrow screen wraps a long command."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,enter", "dismiss", "Close"),
        Binding("y", "copy", "Copy"),
    ]
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
            yield LiteralStatic(
                "\n".join([*self.lines, "", "y: copy these lines · Esc: close"]),
                markup=False,
                id="text-lines",
            )

    def on_mount(self) -> None:
        self.query_one(HelpScroll).focus()

    def action_copy(self) -> None:
        self.app.copy_to_clipboard("\n".join(self.lines) + "\n")
        self.notify(
            f"Copied {len(self.lines)} lines to the clipboard (through the terminal, where it allows it)"
        )


class ReproScreen(PathDialog["str | None"]):
    """Asks where a call's repro goes; dismisses with the folder or ``None``."""

    def __init__(self, call: str, default_folder: str) -> None:
        super().__init__()
        self.call = call
        self.default_folder = default_folder

    def compose(self) -> ComposeResult:
        with Vertical():
            yield LiteralLabel(
                f"Write the repro of {self.call} (repro.py, repro_data.pt) to the folder:", markup=False
            )
            yield Input(self.default_folder, id="repro-folder")
            yield from self.buttons("Write", "repro")

    def result(self, path: str) -> str | None:
        return path
