"""The rank/step overview: one line per compared pair, the pair that diverges first on top.

With many ranks or steps the tree's top level is a long list of ``stepS/rankR`` nodes; this table
says at once which pair to open: its counts, its worst state, its first suspect and where in its
execution that suspect (else its first failure) sits. It follows the comparison while open: a pair
is listed as soon as it is found ("comparing…") and takes its verdict when its diagnosis comes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.coordinate import Coordinate
from textual.screen import ModalScreen
from textual.widgets import DataTable, Label

from ptdbg_tui.app.bars import module_of, receives_through
from ptdbg_tui.app.literal import LiteralLabel, LiteralTable
from ptdbg_tui.app.tree_model import TreeModel
from ptdbg_tui.compare.diagnosis.propagation import ENTERS
from ptdbg_tui.compare.model import Status
from ptdbg_tui.compare.report.words import (
    no_fault_text,
    overview_differ_text,
    overview_more_text,
    overview_suspect_text,
    runs_differ_texts,
    sentence,
    unpaired_text,
)

COUNTED = (Status.FAIL, Status.ERROR, Status.WARN, Status.UNMATCHED, Status.PENDING, Status.PASS)


@dataclass(frozen=True, slots=True)
class PairLine:
    key: str
    label: str
    worst: Status
    counts: tuple[int, ...]  # per COUNTED status
    suspect: str  # the first suspect's call and module, or ""
    suspects: int
    divergence: int | None  # execution position of the first suspect, else of the first failure
    judged: bool = True  # its diagnosis has come and no row waits (else it is still being compared)
    received: bool = False  # its first suspect only receives another rank's error
    why: str = ""  # entries fail but no call is a suspect: why (an error inherited …), or no verdict
    differ: str = ""  # what differs between the runs before any kernel (their models, data …), in words


def overview(model: TreeModel) -> list[PairLine]:
    """Every pair, sorted by first divergence: the earliest step first, then the pairs whose first
    suspect is their own error before those that only receive another rank's, then the earliest
    position in execution (positions count within a pair: step 1's call 5 runs after step 0's call
    40); pairs that do not diverge last, in tree order."""
    first: dict[str, tuple[str, int, int]] = {}
    for suspect, node in model.suspects():
        if node is None:
            continue
        name, count, seq = first.get(node.pair, ("", 0, suspect.seq))
        if not name:
            d = model.diagnoses.get(node.pair)
            # not its own error; error entering before a call came in outside the dumped calls
            enters = suspect.kind == ENTERS and d is not None and d.received is not None
            name = overview_suspect_text(
                suspect.call,
                module_of(node),
                enters=enters,
                receives=not enters and receives_through(d, suspect),
            )
        first[node.pair] = (name, count + 1, seq)
    fails = model.first_failures()
    lines = []
    for pair in model.root.children:
        name, count, named_at = first.get(pair.key, ("", 0, None))
        divergence = named_at if name else fails.get(pair.key)
        d = model.diagnoses.get(pair.key)
        why = no_fault_text(d) if d is not None and not name and divergence is not None else ""
        lines.append(
            PairLine(
                pair.key,
                pair.label,
                pair.worst,
                tuple(pair.count(s) for s in COUNTED),
                name,
                count,
                divergence,
                pair.key in model.diagnoses and not pair.count(Status.PENDING),
                bool(name) and bool(model.diagnoses[pair.key].received),
                why,
                "; ".join(runs_differ_texts(d)) if d is not None else "",
            )
        )
    order = {p.key: p.order for p in model.root.children}
    return sorted(
        lines,
        key=lambda p: (
            p.divergence is None,
            model.step_of(p.key) if p.divergence is not None else 0,
            p.received,
            p.divergence or 0,
            order[p.key],
        ),
    )


def _suspect_cell(line: PairLine, styles: Mapping[str, Style]) -> str | Text:
    """A pair's first suspect (how many more first: long names are cut), or why it has none; what
    differs between the runs before any kernel before either."""
    if line.differ:
        return Text(overview_differ_text(line.differ, line.suspect, line.suspects))
    if line.suspect:
        return overview_more_text(line.suspect, line.suspects)
    return Text(line.why, style=styles.get("muted", ""))


class OverviewScreen(ModalScreen["str | None"]):
    """The pairs as a table; Enter dismisses with the chosen pair's key. Toasts wait behind it (app.tcss)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,o,q", "dismiss(None)", "Close")]
    DEFAULT_CSS = """
    OverviewScreen { align: center middle; }
    OverviewScreen > Vertical { width: 100%; max-width: 140; height: auto; max-height: 100%;
                                border: thick $primary; background: $surface; padding: 0 1; }
    OverviewScreen DataTable { height: auto; max-height: 100%; }
    OverviewScreen #ranks { width: 100%; color: $warning; }
    """

    def __init__(self, model: TreeModel, styles: Mapping[str, Style]) -> None:
        super().__init__()
        self.model = model
        self.lines = overview(model)
        self.row_styles = styles

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self._title(), id="title")
            yield LiteralLabel(id="ranks")
            yield LiteralTable(cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("pair", "state", *(s.symbol for s in COUNTED), "at", "first suspect")
        self.lines = overview(self.model)  # news may have come since the screen was made (follow waits)
        self.query_one("#title", Label).update(self._title())
        self._fill(table)
        self._show_ranks()
        table.focus()

    def follow(self) -> None:
        """The lines again, after the engine's news (the cursor stays on its pair). Nothing while the
        screen's widgets are not there: news can come between its push and its mount (:meth:`on_mount`
        shows the lines of then), and while it is taken down (``NoMatches`` ended the app, once in about
        twenty runs of bench/llm_scale.py)."""
        if not self.is_mounted or not self.query("#ranks") or not self.query(DataTable):
            return
        self._show_ranks()
        lines = overview(self.model)
        if lines == self.lines:
            return
        self.lines = lines
        self.query_one("#title", Label).update(self._title())
        table = self.query_one(DataTable)
        row = table.cursor_row
        current = table.coordinate_to_cell_key(Coordinate(row, 0)).row_key.value if table.row_count else None
        table.clear()
        self._fill(table)
        keys = [line.key for line in self.lines]
        if current in keys:
            table.move_cursor(row=keys.index(current))

    def _title(self) -> str:
        waiting = sum(not line.judged for line in self.lines)
        comparing = f" ({waiting} still comparing)" if waiting else ""
        return (
            f"{len(self.lines)} rank/step pairs{comparing}, first divergence first — "
            "Enter opens one, Esc closes"
        )

    def _show_ranks(self) -> None:
        """The verdict across ranks as the report words it: the first divergent rank, and where
        checksums alone differ before it; then the report's notes on the ranks and steps not compared
        (the header has room for the first only). Wrapped, not cut: the table's column cuts the suspect."""
        label = self.query_one("#ranks", Label)
        lines = (*self.model.ranks, *map(unpaired_text, self.model.progress.unpaired))
        label.update(Text("\n".join(map(sentence, lines))))  # dump text: never markup
        label.display = bool(lines)

    def _fill(self, table: DataTable[object]) -> None:
        for line in self.lines:
            style = self.row_styles.get(line.worst.value, "")
            shown = line.judged or line.worst is Status.PENDING  # a row that waits for its other side
            state = f"{line.worst.symbol} {line.worst.value}" if shown else "… comparing"
            table.add_row(  # a plain str cell is markup: dump text goes in as Text
                Text(line.label),
                Text(state, style=style if shown else "dim"),
                *(f"{c:,}" for c in line.counts),
                "" if line.divergence is None else f"#{line.divergence:,}",
                _suspect_cell(line, self.row_styles),
                key=line.key,
            )

    @on(DataTable.RowSelected)
    def _chosen(self, event: DataTable.RowSelected) -> None:
        self.dismiss(event.row_key.value)
