"""``PtdbgApp``: the live explorer of an NPU dump against its benchmark dump.

The engine thread compares; the app drains its outbox in slices of a few milliseconds (so keys
stay responsive while 100k rows arrive), applies them to the :class:`TreeModel`, and refreshes
only what is materialised in the tree.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterable
from pathlib import Path
from typing import ClassVar

from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.color import Color
from textual.containers import Horizontal
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Header, Input, Static, Tree

from ptdbg_tui.app.call_tree import CallTree, More
from ptdbg_tui.app.detail import DetailPanel
from ptdbg_tui.app.export import default_path, export_pairs
from ptdbg_tui.app.screens import ExportRequest, ExportScreen, HelpScreen
from ptdbg_tui.app.sides_text import caveat_text, missing_text, sides_text
from ptdbg_tui.app.tree_model import FILTERS, Node, TreeModel
from ptdbg_tui.compare.model import Status
from ptdbg_tui.engine.callpath import frame_site
from ptdbg_tui.engine.live import LiveEngine, LiveOptions

#: Seconds of UI-thread work per slice when applying a large update.
SLICE_S = 0.02
SLICE_ROWS = 400  # rows applied between two clock checks
SHOW_S = 0.1  # least time between two refreshes of the widgets while a big update is applied
DRAIN_GAP_S = 0.001  # pause between two slices, for the event loop
GC_THRESHOLD = 50_000  # allocations between two young-generation collections


class EngineNews(Message):
    """The engine put something in its outbox."""


class PtdbgApp(App[None]):
    """Call tree, detail panel, diagnosis and progress over a :class:`LiveEngine`."""

    CSS_PATH = "app.tcss"
    TITLE = "ptdbg-tui"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "search", "Search"),
        Binding("f", "filter", "Filter"),
        Binding("n", "next_failure", "Next fail"),
        Binding("N", "previous_failure", "Prev fail", show=False),
        Binding("c", "culprit", "Culprit"),
        Binding("C", "previous_suspect", "Prev suspect", show=False),
        Binding("e", "export", "Export CSV"),
        Binding("s", "toggle_view", "Tree/flat"),
        Binding("question_mark,f1", "help", "Help"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, npu: str | Path, bench: str | Path, options: LiveOptions | None = None,
                 csv_format: str | None = None) -> None:
        super().__init__()
        self.npu, self.bench = Path(npu), Path(bench)
        self.options = options or LiveOptions()
        self.csv_format = csv_format  # the export's columns (None: the NPU dump's format)
        self.model = TreeModel()
        self.engine = LiveEngine(self.npu, self.bench, self.options, self._engine_news)
        self.call_tree = CallTree(self.model, id="calls")
        self.detail = DetailPanel(self.model, id="detail")
        self.progress_line = Static(id="progress", markup=False)  # paths and names, never markup
        self.diagnosis_bar = Static(id="diagnosis", markup=False)
        self.search_box = Input(placeholder="search entry names (Enter: next match, Esc: close)", id="search")
        self.filter_index = 0
        self._draining = False
        self._shown_at = 0.0
        self._search_text = ""
        self._suspect_index = -1  # the suspect c/C went to last
        self._gc_threshold = gc.get_threshold()

    # -- layout --------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Header(icon="")
        yield self.progress_line
        yield self.diagnosis_bar
        with Horizontal(id="main"):
            yield self.call_tree
            yield self.detail
        yield self.search_box
        yield Footer()

    def get_css_variables(self) -> dict[str, str]:
        """Adds ``$text-status-error``: a magenta readable on the theme's background."""
        variables = super().get_css_variables()
        background = Color.parse(variables.get("background", "#000000"))
        if background.ansi is not None:
            variables["text-status-error"] = "ansi_magenta"
        else:
            magenta = Color(200, 60, 200).with_alpha(0.66)
            variables["text-status-error"] = background.get_contrast_text(1.0).tint(magenta).hex
        return variables

    @property
    def settled(self) -> bool:
        """Everything found so far is compared and shown (tests and benchmarks wait on this)."""
        p = self.model.progress
        return p.done and p.pending == 0 and not self.model.loading and not self._draining

    def on_mount(self) -> None:
        # Rows, records and tree nodes are many small long-lived objects: with the default
        # thresholds the cyclic GC rescans all of them again and again while 100k rows arrive,
        # and a full collection stops both threads for a long moment. Fewer young collections,
        # and what is loaded is frozen (refcounting still frees it; only cycles would wait).
        gc.freeze()
        gc.set_threshold(GC_THRESHOLD, *self._gc_threshold[1:])
        self.sub_title = f"{self.npu.name or self.npu} ↔ {self.bench.name or self.bench}"
        self.call_tree.focus()
        self.call_tree.rebuild()
        self._show_progress()
        self._show_diagnosis()
        self.detail.show(None)
        self.engine.start()

    def on_unmount(self) -> None:
        self.engine.stop()
        gc.set_threshold(*self._gc_threshold)
        gc.unfreeze()

    # -- engine updates ------------------------------------------------------------------------
    def _engine_news(self) -> None:
        self.post_message(EngineNews())  # called on the engine thread; post_message is thread-safe

    @on(EngineNews)
    def _news(self) -> None:
        if not self._draining:
            self._drain()

    def _drain(self) -> None:
        """Apply a slice of pending updates; schedules itself again while work remains."""
        if not self.call_tree.is_attached:  # shutting down: the engine's last news comes too late
            self._draining = False
            return
        self._draining = True
        if not self.model.loading:
            update = self.engine.outbox.take()
            if update is None:
                self._draining = False
                return
            self.model.load(update)
            for text in update.notices:
                self.notify(text, severity="warning", timeout=6, markup=False)  # paths, JSON: not markup
        start = time.perf_counter()
        more = True
        while more and time.perf_counter() - start < SLICE_S:
            more = self.model.apply(SLICE_ROWS)
        if not more:
            gc.freeze()  # what the model now holds stays: keep it out of later full collections
        if not more or start - self._shown_at >= SHOW_S:
            self._shown_at = start
            with self.batch_update():
                changed = self.call_tree.apply_changes()
                self._show_progress()
                self._show_diagnosis()
                if self.detail.node is not None and self.detail.node in changed:
                    self.detail.refresh_detail()
        # A timer, not call_later: the next slice waits for the event loop, so key presses, the
        # other widgets' queues and repaints get their turn between slices.
        self.set_timer(DRAIN_GAP_S, self._drain, name="drain")

    def _show_progress(self) -> None:
        p = self.model.progress
        counts = self.model.status_counts()
        parts = [sides_text(p), f"compared {p.compared:,}/{p.rows:,}", f"pending {p.pending:,}"]
        if p.pairs > 1:
            parts.insert(0, f"{p.pairs} pairs")
        tally = "  ".join(f"{s.symbol} {counts[s]:,}" for s in
                          (Status.PASS, Status.FAIL, Status.WARN, Status.UNMATCHED, Status.ERROR))
        mode = p.watching if not p.done or p.watching == "static" else f"{p.watching}, idle"
        name = FILTERS[self.filter_index][0]
        view = "flat" if self.call_tree.flat else "tree"
        self.progress_line.update(
            f"{' · '.join(parts)}  │  {tally}  │  {mode} · {view} · filter: {name}")

    def _show_diagnosis(self) -> None:
        bar = self.diagnosis_bar
        suspects = self.model.suspects()
        p = self.model.progress
        originals = [d.original for d in self.model.diagnoses.values() if d.original]
        original = f"  │  original: first No row {originals[0]}" if originals else ""
        if suspects:
            culprit = suspects[0][0]
            site = culprit.site
            where = f" · {frame_site(site)}" if site else ""
            more = f"  (+{len(suspects) - 1} more; c/C: walk)" if len(suspects) > 1 else "  (c: jump)"
            bar.update(f"{Status.FAIL.symbol} Culprit: {culprit.call} — {culprit.evidence}{where}{more}"
                       f"{original}")
            bar.set_class(True, "-culprit")
            return
        bar.set_class(False, "-culprit")
        compared = sum(d.compared for d in self.model.diagnoses.values())
        judged = sum(d.judged for d in self.model.diagnoses.values())
        missing = missing_text(p)
        if compared and judged and p.done:
            bar.update(f"{Status.PASS.symbol} No operator introduces an error beyond rounding "
                       f"({judged:,} calls judged).{caveat_text(p)}{original}")
        elif compared and p.done:
            bar.update(f"{compared:,} rows compared, but no call has both inputs and outputs compared: "
                       f"no verdict.{caveat_text(p)}")
        elif missing:
            bar.update(f"No verdict: {missing}")
        elif p.done:
            bar.update("Nothing compared: no verdict.")
        else:
            bar.update("Diagnosis: waiting for results…")

    # -- tree events ---------------------------------------------------------------------------
    @on(Tree.NodeHighlighted, "#calls")
    def _highlighted(self, event: Tree.NodeHighlighted[object]) -> None:
        data = event.node.data
        self.detail.show(data.parent if isinstance(data, More) else data if isinstance(data, Node) else None)

    def _position(self) -> tuple[int, int] | None:
        node = self.call_tree.cursor_model_node
        return self.model.position(node) if node is not None and node.kind not in ("root",) else None

    def _go(self, node: Node) -> bool:
        """Reveal ``node``; clears a filter that hides it."""
        if not self.model.visible(node):
            self._set_filter(0)
            self.notify("Filter cleared to show the target.", timeout=3)
        target = self.call_tree.reveal(node)
        if target is None:
            return False
        self.detail.show(node)
        return True

    # -- actions -------------------------------------------------------------------------------
    def action_search(self) -> None:
        box = self.search_box
        box.add_class("-visible")
        box.value = self._search_text
        box.focus()

    @on(Input.Submitted, "#search")
    def _search_submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        self._search_text = text
        if not text:
            return
        node, count = self.model.search(text, self._position())
        if node is None:
            self.notify(f"No entry name contains {text!r}.", severity="warning", timeout=3, markup=False)
            return
        self._go(node)
        self.notify(f"{count:,} entries match {text!r}.", timeout=2, markup=False)

    def on_key(self, event) -> None:
        box = self.search_box
        if event.key == "escape" and box.has_class("-visible"):
            box.remove_class("-visible")
            self.call_tree.focus()
            event.stop()

    def _set_filter(self, index: int) -> None:
        self.filter_index = index
        self.model.filter = FILTERS[index][1]
        self.call_tree.rebuild()
        self._show_progress()

    def action_filter(self) -> None:
        self._set_filter((self.filter_index + 1) % len(FILTERS))

    def _failure(self, backward: bool) -> None:
        node = self.model.next_failure(self._position(), backward)
        if node is None:
            self.notify("No failing entry.", timeout=2)
            return
        self._go(node)

    def action_next_failure(self) -> None:
        self._failure(False)

    def action_previous_failure(self) -> None:
        self._failure(True)

    def _walk_suspects(self, step: int) -> None:
        suspects = [(s, node) for s, node in self.model.suspects() if node is not None]
        if not suspects:
            self.notify("No suspect found (yet).", timeout=3)
            return
        self._suspect_index = (self._suspect_index + step) % len(suspects)
        suspect, node = suspects[self._suspect_index]
        self._go(node)
        target = self.call_tree.cursor_node
        if target is not None and target.allow_expand and not target.is_expanded:
            target.expand()
        self.notify(f"Suspect {self._suspect_index + 1}/{len(suspects)}: {suspect.call}", timeout=3,
                    markup=False)

    def action_culprit(self) -> None:
        self._walk_suspects(1)

    def action_previous_suspect(self) -> None:
        self._walk_suspects(-1)

    def action_toggle_view(self) -> None:
        self.call_tree.flat = not self.call_tree.flat
        self.call_tree.rebuild()
        self._show_progress()

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_export(self) -> None:
        pairs = self.engine.pairs()
        if not pairs:
            self.notify("Nothing to export yet.", severity="warning", timeout=3)
            return
        self.push_screen(ExportScreen(default_path(), len(pairs)), self._export_chosen)

    def _export_chosen(self, request: ExportRequest | None) -> None:
        if request is not None:
            self._export(request)

    @work(thread=True, exclusive=True, group="export", exit_on_error=False)
    def _export(self, request: ExportRequest) -> None:
        pairs = self.engine.pairs()
        pending = sum(1 for _, rows in pairs for r in rows if r.result is None)
        try:
            written = export_pairs(pairs, request.path, request.stack, self.csv_format)
        except (OSError, ValueError) as e:
            self.call_from_thread(self.notify, f"Export failed: {e}", severity="error", timeout=8,
                                  markup=False)
            return
        note = f" ({pending:,} rows not compared yet)" if pending else ""
        names = ", ".join(str(p) for p in written)
        self.call_from_thread(self.notify, f"Wrote {names}{note}", timeout=6, markup=False)

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Search by name", "Find an entry by (part of) its name (/)", self.action_search)
        yield SystemCommand("Filter", "Cycle all / failures only / unmatched only (f)", self.action_filter)
        yield SystemCommand("Next failure", "Next failing entry in execution order (n)",
                            self.action_next_failure)
        yield SystemCommand("Previous failure", "Previous failing entry (N)", self.action_previous_failure)
        yield SystemCommand("Next suspect", "Walk the ranked suspects, the culprit first (c)",
                            self.action_culprit)
        yield SystemCommand("Previous suspect", "Walk the ranked suspects backwards (C)",
                            self.action_previous_suspect)
        yield SystemCommand("Export CSV", "Write compare_result_<ts>.csv like ptdbg-tui compare (e)",
                            self.action_export)
        yield SystemCommand("Toggle tree / flat view", "Call tree or execution order (s)",
                            self.action_toggle_view)
        yield SystemCommand("Help", "All keys (?)", self.action_help)
