"""The Steps screen (issue 30): two trainings' monitor folders compared, live while they train.

The manifests' differences first, then the first divergent step and module (or the all-clear), the
first NaN/Inf, the first divergent rank, in ``ptdbg-tui monitor``'s words; plots of both runs' loss,
the selected module's output norm and their relative difference with the rounding band; the modules
in forward order with their largest difference. A thread follows both streams
(:class:`~ptdbg_tui.compare.monitor.Follow`) and analyses again as steps arrive; the screen takes each
result in one update. ``t`` writes the next dump's config for the first divergence, as
``ptdbg-tui monitor --narrow`` does.

The chart data are plain functions (testable without a screen) that never hand Plotext a NaN, an Inf
or a zero on a log axis.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import numpy.typing as npt
from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.coordinate import Coordinate
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable, Footer, Header
from textual_plotext import PlotextPlot

from ptdbg_tui.app.charts import downsample, log_axis, log_error
from ptdbg_tui.app.literal import LiteralStatic, LiteralTable
from ptdbg_tui.compare.monitor import (
    Curves,
    Follow,
    MonitorAnalysis,
    MonitorInputError,
    Phase,
    RankAnalysis,
)
from ptdbg_tui.compare.report.monitor_words import divergence_line, nonfinite_text, rank_lines
from ptdbg_tui.compare.report.words import (
    RUNS_DIFFER_FIRST,
    differences_notes,
    differences_text,
    narrowed_text,
)
from ptdbg_tui.formats import monitor as fmon
from ptdbg_tui.formats.layout import DumpLayoutError, discover
from ptdbg_tui.formats.untrusted import one_line

if TYPE_CHECKING:
    from ptdbg_tui.engine.narrow import Narrowing

#: Seconds between two reads of the streams while a training writes them.
POLL_S = 2.0
#: A norm curve is drawn on a log axis when its largest value is this many times its smallest.
LOG_SPAN = 100.0


def holds_monitor(folder: str | Path) -> bool:
    """The folder holds a monitor stream (``monitor_rank<R>.arrows``); one not readable holds none."""
    try:
        return bool(fmon.rank_files(Path(folder)))
    except OSError:
        return False


def holds_dump(folder: str | Path) -> bool:
    try:
        discover(folder)
    except DumpLayoutError:
        return False
    return True


def opens_on_steps(npu: str | Path, bench: str | Path) -> bool:
    """The app opens on the Steps screen: a folder holds a monitor stream and neither holds a dump (one
    side without a stream is said on that screen)."""
    return (holds_monitor(npu) or holds_monitor(bench)) and not (holds_dump(npu) or holds_dump(bench))


# --- the charts' data ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Series:
    xs: list[float]
    ys: list[float]
    label: str
    color: str


@dataclass(frozen=True)
class ChartSpec:
    """What a chart draws: its series (finite values only), whether y is log10 (ticks labelled as
    powers of ten), a horizontal line (the band) and a vertical one (the divergent step)."""

    title: str
    series: tuple[Series, ...] = ()
    log: bool = False
    hline: float | None = None
    vline: float | None = None

    @property
    def empty(self) -> bool:
        return not any(s.xs for s in self.series)


def _picks(n: int, width: int) -> npt.NDArray[np.intp]:
    """At most two points per column, evenly spread over the steps (the last one always)."""
    return np.unique(np.linspace(0, n - 1, min(n, max(2, 2 * width))).round().astype(np.intp))


def finite_points(
    steps: npt.NDArray[np.int64], values: npt.NDArray[np.float64], width: int, log: bool = False
) -> tuple[list[float], list[float]]:
    """(step, value) at most ``2 * width`` of them, the non-finite values left out (and on a log axis
    the values ≤ 0, as their log10)."""
    if not len(values):
        return [], []
    idx = _picks(len(values), width)
    x, y = steps[idx].astype(np.float64), values[idx].astype(np.float64)
    keep = np.isfinite(y) & (y > 0 if log else True)
    y = np.log10(y[keep]) if log else y[keep]
    return x[keep].tolist(), y.tolist()


def loss_spec(c: Curves, width: int, mark: int | None) -> ChartSpec:
    """Both runs' loss against the step."""
    return ChartSpec(
        "loss: NPU, bench",
        (
            Series(*finite_points(c.steps, c.loss_npu, width), "NPU", "orange"),
            Series(*finite_points(c.steps, c.loss_bench, width), "bench", "cyan"),
        ),
        vline=mark,
    )


def _log_wanted(*columns: npt.NDArray[np.float64]) -> bool:
    """No finite value negative, the positive ones spanning more than :data:`LOG_SPAN` (a zero norm is
    then left out of the plot: a log axis has no zero)."""
    values = np.concatenate(columns)
    values = values[np.isfinite(values)]
    positive = values[values > 0]
    return bool(len(positive)) and not (values < 0).any() and positive.max() > LOG_SPAN * positive.min()


def norm_spec(c: Curves, module: int, width: int, mark: int | None) -> ChartSpec:
    """The module's output norm on both sides."""
    a, b = c.norm_npu[:, module], c.norm_bench[:, module]
    log = _log_wanted(a, b)
    return ChartSpec(
        f"output norm of {one_line(c.modules[module], 60)}" + (" (log)" if log else ""),
        (
            Series(*finite_points(c.steps, a, width, log), "NPU", "orange"),
            Series(*finite_points(c.steps, b, width, log), "bench", "cyan"),
        ),
        log=log,
        vline=mark,
    )


def difference_spec(c: Curves, module: int, band: float, width: int, mark: int | None) -> ChartSpec:
    """The module's relative difference on a log axis (0 at the floor, NaN and Inf at the ceiling:
    every step has its point) and the rounding band."""
    xs, ys = downsample(c.difference[:, module].tolist(), max(2, 2 * width))
    steps = [float(c.steps[int(x) - 1]) for x in xs]
    return ChartSpec(
        f"rel. difference of {one_line(c.modules[module], 60)}, band ┄",
        (Series(steps, ys, "rel. difference", "red"),),
        log=True,
        hline=log_error(band),
        vline=mark,
    )


def module_maxima(c: Curves) -> list[tuple[float, int | None]]:
    """Each module's largest relative difference (NaN counted as infinite) and the step of it (None:
    no step aligned)."""
    if not len(c.iterations):
        return [(0.0, None)] * len(c.modules)
    d = np.where(np.isnan(c.difference), np.inf, c.difference)
    at = d.argmax(axis=0)
    return [(float(d[i, m]), int(c.steps[i])) for m, i in enumerate(at)]


def rel_text(x: float) -> str:
    return "NaN/Inf" if not math.isfinite(x) else "0" if x == 0 else f"{x:.2g}"


class StepsChart(PlotextPlot):
    """One of the Steps screen's plots: draws a :class:`ChartSpec` (again only when it changes)."""

    DEFAULT_CSS = "StepsChart { height: 12; }"

    _drawn: ChartSpec | None = None

    def width_hint(self) -> int:
        """The plot's columns: the parent's while it is not laid out."""
        return self.size.width or (self.parent.size.width if isinstance(self.parent, Widget) else 0) or 60

    def draw(self, spec: ChartSpec) -> None:
        if spec == self._drawn:
            return
        self._drawn = spec
        plt = self.plt
        plt.clear_figure()
        plt.title(spec.title if not spec.empty else f"{spec.title}: no finite value yet")
        if spec.empty:
            self.refresh()
            return
        xs = [x for s in spec.series for x in s.xs]
        if spec.vline is not None:
            plt.vline(spec.vline, "orange")
        for s in spec.series:
            if s.xs:
                plt.plot(s.xs, s.ys, label=s.label, color=s.color, marker="braille")
        ys = [y for s in spec.series for y in s.ys] + ([spec.hline] if spec.hline is not None else [])
        if spec.hline is not None:
            plt.hline(spec.hline, "gray")
        if spec.log:
            ticks, labels = log_axis(ys)
            plt.ylim(ticks[0], ticks[-1])
            plt.yticks(ticks, labels)
        low, high = min(xs), max(xs)
        high = high if high > low else low + 1
        plt.xlim(low, high)
        plt.xticks([round(low + (high - low) * k / 4) for k in range(5)])  # steps: whole numbers
        self.refresh()


# --- the state the thread hands over ---------------------------------------------------------------


@dataclass(frozen=True)
class StepsState:
    """One read of both streams: the analysis (None before a side has a whole step), the problem that
    stopped it (one line), and whether the streams are still followed."""

    analysis: MonitorAnalysis | None = None
    problem: str | None = None
    following: bool = True
    reads: int = 0


def summary_lines(state: StepsState, rank: RankAnalysis | None) -> list[str]:
    """The screen's text: what is followed, the manifests, the verdict, the NaN origin, the rank."""
    a = state.analysis
    if a is None:
        status = "following both streams…" if state.following else "stopped"
        return [f"{status} {state.problem or ''}".rstrip()]
    steps = min(r.aligned for r in a.ranks)
    ended = all(all(r.ended) for r in a.ranks)
    lines = [
        f"both runs ended: {steps} steps aligned"
        if ended
        else f"following… {steps} steps aligned"
        if state.following
        else f"stopped following: {steps} steps aligned"
    ]
    if state.problem:
        lines.append(f"note: {state.problem}")
    if manifest := differences_text(a.manifest):
        lines.append(f"{RUNS_DIFFER_FIRST}: {manifest}")
    lines += [f"note: {n}" for n in differences_notes(a.manifest, a.manifest_unread)]
    first = a.first
    verdict = next((r for r in a.ranks if first is not None and r.rank == first.rank), a.ranks[0])
    lines.append(divergence_line(first, verdict.aligned if first else steps, verdict.band))
    lines += [nonfinite_text(f) for r in a.ranks for f in r.nonfinite]
    if a.first_rank is not None:
        lines.append(f"first divergent rank: {a.first_rank}")
    for side, ranks in (("NPU", a.only_npu_ranks), ("bench", a.only_bench_ranks)):
        if ranks:
            lines.append(f"note: ranks monitored on the {side} side only: {', '.join(map(str, ranks))}")
    if rank is not None:
        if len(a.ranks) > 1:
            shown = ", ".join(str(r.rank) for r in a.ranks)
            lines.append(f"rank {rank.rank} shown of {shown} (r: next rank)")
            lines.append(f"  rank {rank.rank}: {divergence_line(rank.divergence, rank.aligned, rank.band)}")
        lines += rank_lines(rank)
    return lines


# --- the screen ------------------------------------------------------------------------------------

STEPS_HELP = """\
# The Steps screen: two trainings' monitors

| key | action |
| --- | --- |
| ↑ ↓ / `j` `k` | select a module: its output norm and relative difference are plotted |
| `r` | the next rank (with several ranks) |
| `t` | the next dump's config for the first divergence, as `monitor --narrow` writes it; its commands |
| Tab | move between the modules and the text (which scrolls) |
| Esc | back to the call tree (where `S` opened this screen) |
| `q` | quit |

The first divergent step is the first step where a module's difference grows beyond what its
inputs' difference, its own growth and rounding explain (the band: the gray line of the difference
plot). The orange line marks that step. While a training writes its stream, the screen reads both
streams every few seconds and analyses them again.
"""


class StepsScreen(Screen[None]):
    """The Steps screen over two monitor folders, followed by a thread until both streams end."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark,f1", "steps_help", "Help"),
        Binding("q", "app.quit", "Quit"),
        Binding("escape", "back", "Back"),
        Binding("t", "narrow", "Narrow"),
        Binding("r", "next_rank", "Rank"),
        Binding("j", "cursor(1)", "Down", show=False),
        Binding("k", "cursor(-1)", "Up", show=False),
    ]
    DEFAULT_CSS = """
    StepsScreen #steps-summary { height: auto; max-height: 40%; padding: 0 1; background: $boost; }
    StepsScreen #steps-main { height: 1fr; }
    StepsScreen #steps-modules { width: 40; max-width: 55%; height: 1fr; }
    StepsScreen #steps-charts { width: 1fr; height: 1fr; border-left: vkey $panel-lighten-2; }
    StepsScreen StepsChart { height: 12; min-width: 30; }
    """

    def __init__(self, npu: str | Path, bench: str | Path, poll_s: float = POLL_S) -> None:
        super().__init__()
        self.npu, self.bench, self.poll_s = Path(npu), Path(bench), poll_s
        self.state = StepsState()
        self.rank_index = 0
        self.module = 0  # the selected module's index in the curves
        self._preselected: tuple[int, str] | None = None  # the divergence whose module was selected
        self._stop = threading.Event()
        self._modules: tuple[str, ...] = ()

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll(id="steps-summary"):
            yield LiteralStatic("reading both monitor streams…", markup=False, id="steps-text")
        with Horizontal(id="steps-main"):
            table = LiteralTable(id="steps-modules", cursor_type="row", zebra_stripes=True)
            table.add_columns("module", "max diff", "step")
            yield table
            with VerticalScroll(id="steps-charts"):
                yield StepsChart(id="chart-loss")
                yield StepsChart(id="chart-norm")
                yield StepsChart(id="chart-difference")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = f"{one_line(str(self.npu), 80)} against {one_line(str(self.bench), 80)}"
        self.query_one("#steps-modules").focus()
        self._follow()

    def on_unmount(self) -> None:
        self._stop.set()

    # -- the thread ----------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="steps", exit_on_error=False)
    def _follow(self) -> None:
        """Read both streams until both end (or the screen goes), handing each new analysis over."""
        follow: Follow | None = None
        analysis: MonitorAnalysis | None = None
        reads = 0
        while not self._stop.is_set():
            problem, done, started = None, False, time.monotonic()
            try:
                if follow is None:
                    follow = Follow(self.npu, self.bench)
                reads += 1
                if follow.poll() or analysis is None:
                    analysis = follow.analysis()
                done = follow.ended
            except fmon.MonitorUnavailable as e:
                problem, done = str(e), True
            except MonitorInputError as e:
                problem = str(e)
                done = follow is not None and follow.ended
            except OSError as e:
                problem = f"cannot read the streams: {e.strerror or e}"
            except Exception as e:  # a fault of ours: said on the screen, where the thread ends
                problem, done = one_line(f"the analysis failed: {type(e).__name__}: {e}", 500), True
            state = StepsState(analysis, problem, following=not done, reads=reads)
            if self._stop.is_set():
                return
            self.app.call_from_thread(self.show, state)
            # a long run's analysis takes seconds: at most every other second of a core goes to it
            if done or self._stop.wait(max(self.poll_s, time.monotonic() - started)):
                return

    # -- what the screen shows -----------------------------------------------------------------

    @property
    def rank(self) -> RankAnalysis | None:
        a = self.state.analysis
        return a.ranks[min(self.rank_index, len(a.ranks) - 1)] if a is not None else None

    def show(self, state: StepsState) -> None:
        """Take a read: the text, the module list (the divergent module selected when it appears), the
        charts."""
        ranks = len(self.state.analysis.ranks) if self.state.analysis else 0
        self.state = state
        if (len(state.analysis.ranks) if state.analysis else 0) != ranks:
            self.refresh_bindings()  # r shows with several ranks
        rank = self.rank
        if rank is not None:
            d = rank.divergence or (self.state.analysis.first if self.state.analysis else None)
            key = (rank.rank, d.module) if d is not None else None
            if key is not None and key != self._preselected and d is not None:
                self._preselected = key
                if d.phase is not Phase.HYPERPARAMETER and d.module in rank.curves.modules:
                    self.module = rank.curves.modules.index(d.module)
        self._show_text()
        self._show_modules()
        self._show_charts()

    def _show_text(self) -> None:
        text = "\n".join(summary_lines(self.state, self.rank))
        self.query_one("#steps-text", LiteralStatic).update(Text(text))

    def _show_modules(self) -> None:
        table = self.query_one("#steps-modules", LiteralTable)
        rank = self.rank
        if rank is None:
            table.clear()
            self._modules = ()
            return
        c = rank.curves
        d = rank.divergence
        marked = d.module if d is not None and d.phase is not Phase.HYPERPARAMETER else None
        rows = [
            (
                Text(("● " if name == marked else "  ") + (one_line(name, 200) or "(the model)")),
                Text(rel_text(top), justify="right"),
                Text("" if at is None else str(at), justify="right"),
            )
            for name, (top, at) in zip(c.modules, module_maxima(c), strict=True)
        ]
        self.module = min(self.module, max(0, len(rows) - 1))
        if c.modules == self._modules and table.row_count == len(rows):
            for i, row in enumerate(rows):
                for j, cell in enumerate(row):
                    table.update_cell_at(Coordinate(i, j), cell)
        else:
            table.clear()
            for i, row in enumerate(rows):
                table.add_row(*row, key=str(i))
            self._modules = c.modules
            widths = [
                max([len(str(column.label)), *(row[j].cell_len for row in rows)]) + 2 * table.cell_padding
                for j, column in enumerate(table.columns.values())
            ]
            table.styles.width = sum(widths) + 2  # and the scrollbar
        if rows and table.cursor_row != self.module:
            table.move_cursor(row=self.module)

    def _show_charts(self) -> None:
        rank = self.rank
        self.query_one("#steps-charts").display = rank is not None  # no empty frames before a step
        if rank is None:
            return
        c = rank.curves
        first = self.state.analysis.first if self.state.analysis else None
        mark = first.step if first is not None and first.rank == rank.rank else None
        loss = self.query_one("#chart-loss", StepsChart)
        loss.draw(loss_spec(c, loss.width_hint(), mark))
        if not c.modules:
            return
        norm = self.query_one("#chart-norm", StepsChart)
        norm.draw(norm_spec(c, self.module, norm.width_hint(), mark))
        diff = self.query_one("#chart-difference", StepsChart)
        diff.draw(difference_spec(c, self.module, rank.band.value, diff.width_hint(), mark))

    @on(DataTable.RowHighlighted, "#steps-modules")
    def _module_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.cursor_row != self.module:
            self.module = event.cursor_row
            self._show_charts()

    # -- keys ----------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """``Esc`` only where the screen was opened from the call tree; ``r`` with several ranks."""
        if action == "back":
            return self is not self.app.screen_stack[0]
        if action == "next_rank":
            a = self.state.analysis
            return a is not None and len(a.ranks) > 1
        return True

    def action_back(self) -> None:
        self.dismiss()

    def action_cursor(self, by: int) -> None:
        table = self.query_one("#steps-modules", LiteralTable)
        if table.row_count:
            table.move_cursor(row=max(0, min(table.row_count - 1, table.cursor_row + by)))

    def action_next_rank(self) -> None:
        a = self.state.analysis
        if a is None or len(a.ranks) < 2:
            return
        self.rank_index = (self.rank_index + 1) % len(a.ranks)
        self._preselected = None
        self.show(self.state)

    def action_steps_help(self) -> None:
        from ptdbg_tui.app.screens import HelpScreen

        self.app.push_screen(HelpScreen(STEPS_HELP))

    def action_narrow(self) -> None:
        """The first divergence's config, where the user says; then the commands for both machines."""
        from ptdbg_tui.app.screens import NarrowScreen
        from ptdbg_tui.engine.monitor_narrow import first_narrowing
        from ptdbg_tui.engine.narrow import NarrowError, default_config

        a = self.state.analysis
        if a is None:
            self.notify("Nothing to narrow yet: no step of both runs is read.", timeout=4)
            return
        try:
            narrowing = first_narrowing(a)
        except NarrowError as e:
            self.notify(f"Nothing to narrow: {e}", severity="warning", timeout=8, markup=False)
            return

        def chosen(path: str | None) -> None:
            if path is not None:
                self._write(narrowing, path)

        self.app.push_screen(
            NarrowScreen(narrowed_text(narrowing.target), default_config(narrowing.target)), chosen
        )

    @work(thread=True, exclusive=True, group="steps-narrow", exit_on_error=False)
    def _write(self, narrowing: Narrowing, path: str) -> None:
        from ptdbg_tui.app.screens import TextScreen
        from ptdbg_tui.engine.narrow import write_narrowing

        try:
            written = write_narrowing(narrowing, path)
        except OSError as e:
            self.app.call_from_thread(
                self.notify, f"Cannot write {path}: {e.strerror or e}", severity="error", markup=False
            )
            return
        self.app.call_from_thread(self.app.push_screen, TextScreen(written.lines))


class StepsApp(App[None]):
    """The app on two monitor folders without a dump: the Steps screen alone."""

    TITLE = "ptdbg-tui steps"

    def __init__(self, npu: str | Path, bench: str | Path, poll_s: float = POLL_S) -> None:
        super().__init__()
        self.npu, self.bench, self.poll_s = Path(npu), Path(bench), poll_s

    def get_default_screen(self) -> Screen[None]:
        return StepsScreen(self.npu, self.bench, self.poll_s)

    @property
    def steps(self) -> StepsScreen:
        screen = self.screen_stack[0]
        assert isinstance(screen, StepsScreen)
        return screen
