"""``PtdbgApp``: the live explorer of an NPU dump against its benchmark dump.

The engine thread compares; the app drains its outbox in slices of a few milliseconds (so keys
stay responsive while 100k rows arrive), applies them to the :class:`TreeModel`, and refreshes
only what is materialised in the tree.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from platformdirs import user_downloads_path
from rich.style import Style
from rich.text import Text
from textual import events, on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.color import Color
from textual.containers import Horizontal
from textual.message import Message
from textual.screen import ModalScreen, Screen
from textual.widgets import Footer, Input, Static, Tree

from ptdbg_tui.app.bars import ViewState, diagnosis_lines, fit, header_segments
from ptdbg_tui.app.call_tree import CallTree, More
from ptdbg_tui.app.detail import DetailPanel
from ptdbg_tui.app.export import default_path, export_pairs
from ptdbg_tui.app.literal import Literal
from ptdbg_tui.app.tree_model import FILTERS, Node, TreeModel
from ptdbg_tui.compare.matching.pairing import MODES
from ptdbg_tui.compare.model import Status
from ptdbg_tui.engine.gcpolicy import GC_THRESHOLD
from ptdbg_tui.engine.live.loop import LiveEngine
from ptdbg_tui.engine.live.options import LiveOptions
from ptdbg_tui.formats.monitor import rank_files
from ptdbg_tui.formats.untrusted import replaced

if TYPE_CHECKING:
    from textual.notifications import SeverityLevel

    from ptdbg_tui.app.overview import OverviewScreen
    from ptdbg_tui.app.screens import ExportRequest
    from ptdbg_tui.compare.diagnosis.findings import Diagnosis
    from ptdbg_tui.engine.narrow import Narrowing, Written

#: Seconds of UI-thread work per slice when applying a large update.
SLICE_S = 0.02
SLICE_ROWS = 400  # rows applied between two clock checks
SHOW_S = 0.1  # least time between two refreshes of the widgets while a big update is applied
DRAIN_GAP_S = 0.001  # pause between two slices, for the event loop
FREEZE_S = 0.05
HINT_S = 8.0  # seconds the matching hint's toast stays (the header keeps the hint)


class EngineNews(Message):
    """The engine put something in its outbox."""


class FitBar(Literal, Static):
    """A bar whose lines are built for its current width (one or more lines: it takes their height)."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        *(f"bar--{s.value}" for s in Status),
        "bar--muted",
        "bar--site",
        "bar--source",
    }
    DEFAULT_CSS = """
    FitBar > .bar--pass { color: $text-success; }
    FitBar > .bar--fail { color: $text-error; text-style: bold; }
    FitBar > .bar--warn { color: $text-warning; }
    FitBar > .bar--error { color: $text-status-error; text-style: bold; }
    FitBar > .bar--unmatched { color: $text-muted; }
    FitBar > .bar--pending { }
    FitBar > .bar--muted { color: $text-muted; }
    FitBar > .bar--site { color: $text-accent; text-style: bold; }
    FitBar > .bar--source { color: $text-secondary; }
    """

    def __init__(self, build: Callable[[int, dict[str, Style]], list[Text]], *, id: str) -> None:
        super().__init__(id=id)
        self.build = build
        self.lines: list[Text] = []
        self._styles: tuple[str, dict[str, Style]] | None = None

    def styles_map(self) -> dict[str, Style]:
        """The component styles (cached per theme: resolving them costs ~2 ms, a bar redraws often)."""
        if self._styles is None or self._styles[0] != self.app.theme:
            self._styles = (
                self.app.theme,
                {
                    name.removeprefix("bar--"): self.get_component_rich_style(name, partial=True)
                    for name in self.COMPONENT_CLASSES
                },
            )
        return self._styles[1]

    def redraw(self) -> None:
        width = self.content_size.width or max(1, self.app.size.width - 2)
        self.lines = self.build(width, self.styles_map())
        if self.styles.height is None or self.styles.height.value != len(self.lines):
            self.styles.height = len(self.lines)
        self.update(Text("\n").join(self.lines))

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda _: self.redraw())

    def on_resize(self) -> None:
        self.redraw()


#: Actions whose key the footer shows from 120 columns only: at 80 the others just fit whole, and ``?``
#: (first) lists every key.
WIDE_KEYS = frozenset({"toggle_view", "overview", "export", "narrow", "steps"})


class KeyFooter(Footer):
    """Textual's footer, which cuts the hints that do not fit (``s Vi``): the keys of :data:`WIDE_KEYS`
    are classed ``-wide-only``, hidden below 120 columns (app.tcss)."""

    def compose(self) -> ComposeResult:
        for widget in super().compose():
            if getattr(widget, "action", None) in WIDE_KEYS:  # a FooterKey (not public in Textual)
                widget.add_class("-wide-only")
            yield widget


class PtdbgApp(App[None]):
    """Call tree, detail panel, diagnosis and progress over a :class:`LiveEngine`."""

    CSS_PATH = "app.tcss"
    #: Below 120 columns the tree and the detail panel share the width equally (app.tcss).
    #: (textual declares it ``ClassVar[...] | None``, which mypy reads as an instance variable)
    HORIZONTAL_BREAKPOINTS: ClassVar[list[tuple[int, str]]] = [(0, "-narrow"), (120, "-wide")]  # type: ignore[misc]
    TITLE = "ptdbg-tui"
    # The footer shows these in order and cuts what does not fit: help and quit first; those of
    # WIDE_KEYS from 120 columns only.
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark,f1", "help", "Help"),
        Binding("q", "quit", "Quit"),
        Binding("c", "culprit", "Suspect"),
        Binding("C", "previous_suspect", "Prev suspect", show=False),
        Binding("r", "replay", "Replay"),
        Binding("R", "repro", "Repro", show=False),
        # A priority binding: handled by the app as the key arrives, so the keys typed right after
        # it go to the search box instead of waiting in the tree's queue (see check_action).
        Binding("slash", "search", "Find", priority=True),
        Binding("n", "next_failure", "Fail"),
        Binding("N", "previous_failure", "Prev fail", show=False),
        Binding("f", "filter", "Filter"),
        Binding("m", "match", "Match"),
        Binding("s", "toggle_view", "View"),
        Binding("o", "overview", "Overview"),
        Binding("e", "export", "Export"),
        Binding("t", "narrow", "Narrow"),
        Binding("S", "steps", "Steps"),  # where the folders hold monitor streams too (check_action)
    ]

    def __init__(
        self,
        npu: str | Path,
        bench: str | Path,
        options: LiveOptions | None = None,
        csv_format: str | None = None,
    ) -> None:
        super().__init__()
        self.npu, self.bench = Path(npu), Path(bench)
        self.options = options or LiveOptions()
        self.csv_format = csv_format  # the export's columns (None: the NPU dump's format)
        self.model = TreeModel(lazy=True)  # a pair's rows are placed when something needs them
        self.engine = LiveEngine(self.npu, self.bench, self.options, self._engine_news)
        self.call_tree = CallTree(self.model, id="calls")
        self.detail = DetailPanel(self.model, id="detail")
        self.header_bar = FitBar(self._header_lines, id="progress")
        self.diagnosis_bar = FitBar(self._diagnosis_lines, id="diagnosis")
        self.search_box = Input(
            placeholder="entries, calls, modules (Enter/↓ next, shift+Enter/↑ back, Esc)", id="search"
        )
        self.search_count = Static(id="search-count")
        self.filter_index = 0
        self._draining = False
        self._shown_at = 0.0
        self._search_text = ""
        self._suspect_index = -1  # the suspect c/C went to last
        self._hinted = ""  # the matching hint last shown
        self._hinted_at = 0.0  # when its toast was shown
        self._gc_threshold = gc.get_threshold()
        self._overview: OverviewScreen | None = None  # while open: it follows the comparison
        self.monitored = _monitored(self.npu) or _monitored(self.bench)  # S: the Steps screen

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """A toast, whose names and paths (dump text) reach the terminal without a control character;
        a toast that holds dump text is also given ``markup=False`` where it is made."""
        super().notify(replaced(message), title=title, severity=severity, timeout=timeout, markup=markup)

    # -- layout --------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield self.header_bar
        yield self.diagnosis_bar
        with Horizontal(id="main"):
            yield self.call_tree
            yield self.detail
        with Horizontal(id="searchbar"):
            yield self.search_box
            yield self.search_count
        yield KeyFooter(compact=True)

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
        # While the engine reads and compares, what it and the model build is frozen every
        # FREEZE_S (freezing costs nothing): a collection never scans more than that much new
        # work. Left alone, the middle generation of a 100k-row load stopped both threads ~0.2 s.
        self.set_interval(FREEZE_S, self._freeze_while_busy, name="gc freeze")
        # The slices of a big update, one a tick while there is one. An interval, not a timer set again
        # after each slice: Textual drops a one-shot timer whose delay has passed by the time it first
        # reads the clock (its ``skip``), which the engine's thread, holding the interpreter for
        # milliseconds, made happen: the next slice never came and the view stopped, half filled.
        self._drain_ticks = self.set_interval(DRAIN_GAP_S, self._drain, name="drain", pause=True)
        self.call_tree.focus()
        self.call_tree.rebuild()
        self._show_progress()
        self._show_diagnosis()
        self.detail.show(None)
        # The engine's first reads hold the GIL for long stretches (a chunk of records is one json call):
        # it starts once the first frame is out.
        self.call_after_refresh(self._start_engine)

    def _start_engine(self) -> None:
        if self.call_tree.is_attached:  # not when the app already closed
            self.engine.start()

    def _freeze_while_busy(self) -> None:
        if not self.settled:
            gc.freeze()

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
        """Apply a slice of pending updates; ticks again while work remains (see :meth:`on_mount`)."""
        if not self.call_tree.is_attached:  # shutting down: the engine's last news comes too late
            self._stop_draining()
            return
        self._draining = True
        if not self.model.loading:
            update = self.engine.outbox.take()
            if update is None:
                self._stop_draining()
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
                if self.detail.node is not None and (self.detail.node in changed or not more):
                    self.detail.refresh_detail()  # the last slice: the error chart is final too
                if self._overview is not None and self._overview.is_current:
                    self._overview.follow()
        # A tick, not call_later: the next slice waits for the event loop, so key presses, the other
        # widgets' queues and repaints get their turn between slices.
        self._drain_ticks.resume()

    def _stop_draining(self) -> None:
        self._draining = False
        self._drain_ticks.pause()

    def _header_lines(self, width: int, styles: dict[str, Style]) -> list[Text]:
        npu, bench = self.engine.npu_root, self.engine.bench_root  # a narrowed dump may replace them
        view = ViewState(
            f"{npu.name or npu} ↔ {bench.name or bench}",
            self.filter_index,
            self.call_tree.flat,
            self.engine.options.match,
        )
        return [fit(header_segments(self.model, view, styles), width)]

    def _diagnosis_lines(self, width: int, styles: dict[str, Style]) -> list[Text]:
        return diagnosis_lines(self.model, width, styles, max(0, self._suspect_index))

    def _show_progress(self) -> None:
        self.header_bar.redraw()
        hint = self.model.match_hint()
        if hint != self._hinted:
            if self._hinted and time.monotonic() - self._hinted_at < HINT_S:
                # its toast would outlive what it says (Textual withdraws no single toast publicly)
                self.clear_notifications()
            if hint:  # said once as a toast too; the header keeps it
                self.notify(
                    f"The matching leaves entries unpaired or shapes apart: {hint}",
                    timeout=HINT_S,
                    markup=False,
                )
                self._hinted_at = time.monotonic()
        self._hinted = hint

    def _show_diagnosis(self) -> None:
        self.diagnosis_bar.redraw()

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
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """``/`` opens the search only from the main screen and outside a text box (where it is a
        character: a path in the search or in the export dialog)."""
        if action == "search":
            return self.screen is self.screen_stack[0] and not isinstance(self.focused, Input)
        if action == "steps":
            return self.monitored and self.screen is self.screen_stack[0]
        if not isinstance(self.screen, ModalScreen) and self.screen is not self.screen_stack[0]:
            return action not in _TREE_ACTIONS  # the Steps screen: the call tree's keys wait behind it
        return True

    def action_search(self) -> None:
        self.query_one("#searchbar").add_class("-visible")
        self.search_box.value = self._search_text
        self.screen.set_focus(self.search_box)  # at once: focus() waits for the queued messages

    @on(Input.Changed, "#search")
    def _search_changed(self, event: Input.Changed) -> None:
        """Count and highlight as the user types; the cursor moves on Enter."""
        self._search_text = event.value.strip()
        self.call_tree.highlight = self._search_text
        self.call_tree.refresh()
        self._show_search_count(None)

    def _show_search_count(self, index: int | None) -> None:
        hits = self.model.search(self._search_text) if self._search_text else []
        where = f"{index + 1:,}/{len(hits):,}" if index is not None else f"{len(hits):,} match"
        self.search_count.update(where if self._search_text else "")

    @on(Input.Submitted, "#search")
    def _search_submitted(self) -> None:
        self._search_step(backward=False)

    def _search_step(self, backward: bool) -> None:
        """Go to the next (previous) match after the cursor, in execution order; shows k/N."""
        text = self._search_text
        if not text:
            return
        hits = self.model.search(text)
        if not hits:
            self._show_search_count(None)
            self.notify(f"Nothing matches {text!r}.", severity="warning", timeout=3, markup=False)
            return
        index = self.model.next_hit(hits, self.call_tree.cursor_model_node, backward)
        self._go(hits[index])
        self._show_search_count(index)

    def on_key(self, event: events.Key) -> None:
        bar = self.query_one("#searchbar")
        if not bar.has_class("-visible") or not self.search_box.has_focus:
            if event.key == "escape" and bar.has_class("-visible"):
                self._close_search()
                event.stop()
            return
        if event.key == "escape":
            self._close_search()
        elif event.key in ("shift+enter", "up"):
            self._search_step(backward=True)
        elif event.key == "down":
            self._search_step(backward=False)
        else:
            return
        event.stop()
        event.prevent_default()

    def _close_search(self) -> None:
        self.query_one("#searchbar").remove_class("-visible")
        self.call_tree.highlight = ""
        self.call_tree.refresh()
        self.call_tree.focus()

    def _set_filter(self, index: int) -> None:
        self.filter_index = index
        self.model.filter = FILTERS[index]
        self.call_tree.rebuild()
        self._show_progress()
        if self.model.filtering and not self.model.visible(self.model.root):
            shown = FILTERS[index].name
            self.notify(f"No entry to show with the filter {shown} (yet); f cycles it.", timeout=3)

    def action_filter(self) -> None:
        self._set_filter((self.filter_index + 1) % len(FILTERS))

    def _failure(self, backward: bool) -> None:
        node = self.model.next_failure(self._position(), backward)
        if node is None:
            self.notify("No failing entry, and no call the diagnosis names.", timeout=2)
            return
        self._go(node)

    def action_next_failure(self) -> None:
        self._failure(False)

    def action_previous_failure(self) -> None:
        self._failure(True)

    def _walk_suspects(self, step: int) -> None:
        """Every pair's suspects in turn (both directions, all steps and ranks); the bar names the one
        reached."""
        suspects = self.model.suspects()
        shown = [i for i, (_, node) in enumerate(suspects) if node is not None]
        if not shown:
            self.notify("No suspect found (yet).", timeout=3)
            return
        if self._suspect_index not in shown:
            i = 0 if step > 0 else len(shown) - 1
        else:
            i = (shown.index(self._suspect_index) + step) % len(shown)
        self._suspect_index = shown[i]
        node = suspects[self._suspect_index][1]
        assert node is not None
        self._go(node)
        target = self.call_tree.cursor_node
        if target is not None and target.allow_expand and not target.is_expanded:
            target.expand()
        self._show_diagnosis()

    def action_culprit(self) -> None:
        self._walk_suspects(1)

    def action_previous_suspect(self) -> None:
        self._walk_suspects(-1)

    def _selected_call(self, verb: str) -> tuple[str, str] | None:
        """The pair and the call under the cursor (a call or one of its entries) that a replay can run
        on; None, with a notice that says why, when there is none (torch missing: how to install it)."""
        from ptdbg_tui.engine.replay.replayer import ReplayUnavailable, require_torch

        try:
            require_torch()
        except ReplayUnavailable as e:
            self.notify(f"No replay here: {e}", severity="warning", timeout=10, markup=False)
            return None
        call = self.model.call_of(self.call_tree.cursor_model_node)
        if call is None:
            self.notify(f"Select a call or one of its entries to {verb} it.", timeout=3)
            return None
        info = self.model.infos.get(call.pair)
        if info is None or info.summary:
            self.notify(
                f"{call.key}: compared from statistics, without tensors: nothing to {verb} from.",
                severity="warning",
                timeout=5,
                markup=False,
            )
            return None
        if all(r.npu is None for r in self.model.call_rows(call)):
            self.notify(
                f"{call.key}: only the bench run made this call.", severity="warning", timeout=5, markup=False
            )
            return None
        return call.pair, call.key

    def action_replay(self) -> None:
        """Replay the selected call on each side's own recorded inputs, ahead of the others."""
        selected = self._selected_call("replay")
        if selected is not None:
            self.engine.replay(*selected)
            self.notify(f"Replaying {selected[1]} on each side's own inputs…", timeout=3, markup=False)

    def action_repro(self) -> None:
        """Write the selected call's repro for the kernel team (asks for the folder)."""
        selected = self._selected_call("write a repro of")
        if selected is None:
            return
        from ptdbg_tui.app.screens import ReproScreen
        from ptdbg_tui.compare.report.outputs import repro_folder

        pair, call = selected

        def chosen(folder: str | None) -> None:
            if folder:
                self.engine.repro(pair, call, folder)
                self.notify(f"Writing the repro of {call} to {folder}…", timeout=3, markup=False)

        info = self.model.infos.get(pair)
        several = len(self.model.root.children) > 1 and info is not None  # one call name in several pairs
        folder = "./" + repro_folder(call, info.label if several and info is not None else None)
        self.push_screen(ReproScreen(call, folder), chosen)

    def action_match(self, mode: str | None = None) -> None:
        """Re-match every pair: the next mode of auto → exact → fuzzy → align, or ``mode``."""
        current = self.engine.options.match
        mode = mode or MODES[(MODES.index(current) + 1) % len(MODES)]
        self.engine.set_match(mode)
        self._show_progress()
        self.notify(f"Matching: {mode} — re-matching every pair.", timeout=3, markup=False)

    def action_overview(self) -> None:
        if len(self.model.root.children) < 2:
            self.notify("One rank/step pair only: its tree is the overview.", timeout=3)
            return
        from ptdbg_tui.app.overview import OverviewScreen  # screens load when first asked for

        self._overview = OverviewScreen(self.model, self.header_bar.styles_map())
        self.push_screen(self._overview, self._open_pair)

    def _open_pair(self, key: str | None) -> None:
        self._overview = None
        node = self.model.root.child(key) if key else None
        if node is not None and self._go(node):
            target = self.call_tree.cursor_node
            if target is not None and not target.is_expanded:
                target.expand()

    def action_screenshot(self, filename: str | None = None, path: str | None = None) -> None:
        """Textual saves to ~/Downloads; on a server that folder is usually missing: the current one."""
        if path is None:
            downloads = user_downloads_path()
            path = str(downloads) if downloads.is_dir() else "."
        super().action_screenshot(filename, path)

    def action_toggle_view(self) -> None:
        self.call_tree.flat = not self.call_tree.flat
        self.call_tree.rebuild()
        self._show_progress()

    def action_steps(self) -> None:
        """The Steps screen over the folders' monitor streams (Esc comes back)."""
        from ptdbg_tui.app.steps import StepsScreen  # its analysis loads when first asked for

        self.push_screen(StepsScreen(self.npu, self.bench))

    def action_help(self) -> None:
        from ptdbg_tui.app.screens import HelpScreen  # Markdown and its parser: ~0.1 s off the start-up

        self.push_screen(HelpScreen())

    def action_export(self) -> None:
        pairs = self.engine.pairs()
        if not pairs:
            self.notify("Nothing to export yet.", severity="warning", timeout=3)
            return
        from ptdbg_tui.app.screens import ExportScreen

        self.push_screen(ExportScreen(default_path(), len(pairs)), self._export_chosen)

    def _export_chosen(self, request: ExportRequest | None) -> None:
        if request is not None:
            self._export(request, dict(self.model.diagnoses))  # as shown now, taken on the app's thread

    @work(thread=True, exclusive=True, group="export", exit_on_error=False)
    def _export(self, request: ExportRequest, diagnoses: dict[str, Diagnosis]) -> None:
        pairs = self.engine.pairs()
        pending = sum(1 for _, rows in pairs for r in rows if r.result is None)
        try:
            written = export_pairs(pairs, request.path, request.stack, self.csv_format, diagnoses)
        except (OSError, ValueError) as e:
            self.call_from_thread(
                self.notify, f"Export failed: {e}", severity="error", timeout=8, markup=False
            )
            return
        note = f" ({pending:,} rows not compared yet)" if pending else ""
        names = ", ".join(str(p) for p in written)
        self.call_from_thread(self.notify, f"Wrote {names}{note}", timeout=6, markup=False)

    def action_narrow(self) -> None:
        """On a module or a call: ask where the next dump's config goes, write it, show the commands,
        and compare the narrowed dump in place of this one once both sides hold it."""
        from ptdbg_tui.app.screens import NarrowScreen
        from ptdbg_tui.compare.report.words import narrowed_text
        from ptdbg_tui.engine.narrow import NarrowError, default_config

        try:
            narrowing = self._narrowing_at(self.call_tree.cursor_model_node)
        except NarrowError as e:  # a module path from the dump that no model has
            self.notify(f"Cannot narrow: {e}", severity="warning", timeout=8, markup=False)
            return
        if narrowing is None:
            return

        def chosen(path: str | None) -> None:
            if path:
                self._write_narrowing(narrowing, path)

        self.push_screen(
            NarrowScreen(narrowed_text(narrowing.target), default_config(narrowing.target)), chosen
        )

    def _narrowing_at(self, node: Node | None) -> Narrowing | None:
        """The next dump's target at a tree node (an entry stands for its call); None, said, elsewhere."""
        from ptdbg_tui.compare.diagnosis.narrowing import Chosen
        from ptdbg_tui.engine.narrow import narrowing_in

        if node is not None and node.is_leaf:
            node = node.parent
        info = self.model.infos.get(node.pair) if node is not None else None
        if node is None or info is None or node.kind not in ("module", "call"):
            self.notify(
                "Put the cursor on a module or a call (c goes to the culprit) to narrow the next dump to it.",
                timeout=4,
            )
            return None
        dumps, names = [i.npu for i in self.model.infos.values()], self.model.call_names()
        if node.kind == "module":
            if not node.key:
                self.notify("That is the whole model: choose a module inside it.", timeout=4)
                return None
            first = node
            while first.site is None and first.children:  # its first call names the script
                first = first.children[0]
            return narrowing_in(
                info.npu,
                Chosen(node.label, module=True),
                module=node.key,
                stack=first.site,
                dumps=dumps,
                names=names,
            )
        rows = self.model.call_rows(node)
        entry = next((r.npu.entry for r in rows if r.npu is not None and r.npu.entry is not None), None)
        if entry is None:
            self.notify("This call has no NPU entry to narrow to.", timeout=4)
            return None
        rank = self.model.suspect_rank(node)
        why = Chosen(entry.call, module=False, rank=rank)
        return narrowing_in(info.npu, why, call=entry, stack=node.site, dumps=dumps, names=names)

    @work(thread=True, exclusive=True, group="narrow", exit_on_error=False)
    def _write_narrowing(self, narrowing: Narrowing, path: str) -> None:
        from ptdbg_tui.engine.narrow import write_narrowing

        try:
            written = write_narrowing(narrowing, path)
        except OSError as e:
            self.call_from_thread(
                self.notify,
                f"Cannot write {path}: {e.strerror or e}",
                severity="error",
                timeout=8,
                markup=False,
            )
            return
        self.call_from_thread(self._narrowed, written)

    def _narrowed(self, written: Written) -> None:
        """Show the commands; a watching app awaits the narrowed dump."""
        from ptdbg_tui.app.screens import TextScreen

        npu, bench = written.dump_dir / "npu", written.dump_dir / "bench"
        if self.engine.watching == "static":
            after = f"Once it is written, open the app on it: ptdbg-tui {npu} {bench}"
        else:
            self.engine.narrow_to(npu, bench)
            after = (
                f"This app compares {npu} with {bench} in place of the current dumps as soon as both "
                "hold a dump."
            )
        self.push_screen(TextScreen([*written.lines, "", after]))

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand(
            "Find", "Entries, calls and modules by (part of) their name or path (/)", self.action_search
        )
        yield SystemCommand("Filter", "Cycle all / failures + named / unmatched only (f)", self.action_filter)
        yield SystemCommand(
            "Next failure",
            "Next failing entry, or entry of a call the diagnosis names, in execution order (n)",
            self.action_next_failure,
        )
        yield SystemCommand(
            "Previous failure", "Previous failing or named entry (N)", self.action_previous_failure
        )
        yield SystemCommand(
            "Next suspect", "Walk the ranked suspects, the culprit first (c)", self.action_culprit
        )
        yield SystemCommand(
            "Previous suspect", "Walk the ranked suspects backwards (C)", self.action_previous_suspect
        )
        for mode in MODES:
            yield SystemCommand(
                f"Match: {mode}",
                f"Re-match every pair in {mode} mode (m cycles)",
                lambda mode=mode: self.action_match(mode),
            )
        yield SystemCommand(
            "Rank/step overview", "One line per pair, first divergence first (o)", self.action_overview
        )
        yield SystemCommand(
            "Replay call",
            "Re-run the selected call in float64 on each side's own inputs (r)",
            self.action_replay,
        )
        yield SystemCommand(
            "Repro", "Write repro.py of the selected call for the kernel team (R)", self.action_repro
        )
        yield SystemCommand(
            "Export CSV", "Write compare_result_<ts>.csv like ptdbg-tui compare (e)", self.action_export
        )
        yield SystemCommand(
            "Narrow the next dump",
            "Tensors of the module or call under the cursor only: "
            "write its config, then compare it here once dumped (t)",
            self.action_narrow,
        )
        yield SystemCommand(
            "Toggle tree / flat view", "Call tree or execution order (s)", self.action_toggle_view
        )
        if self.monitored:
            yield SystemCommand(
                "Steps", "The monitors' first divergent step and module, plotted (S)", self.action_steps
            )
        yield SystemCommand("Help", "All keys (?)", self.action_help)


#: The call tree's actions, which do nothing on the Steps screen.
_TREE_ACTIONS = frozenset(
    b.action for b in PtdbgApp.BINDINGS if isinstance(b, Binding) and b.action not in ("help", "quit")
)


def _monitored(folder: Path) -> bool:
    """The folder holds a monitor stream (``ptdbg-dump run --monitor``); one not readable holds none."""
    try:
        return bool(rank_files(folder))
    except OSError:
        return False
