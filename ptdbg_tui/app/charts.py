"""The detail panel's plots (textual-plotext): the |Δ| histogram of an entry and the relative error of
every call of a pair in execution order, where the error starts showing at a glance.

The data functions are plain (testable without a screen); the widgets only draw what they are given.
Both plots use log axes drawn on log10 values, since Plotext cannot put bars on a log axis.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

from textual.widget import Widget
from textual_plotext import PlotextPlot

from ptdbg_tui.app.tree_model import Node, TreeModel
from ptdbg_tui.compare.model import Result
from ptdbg_tui.formats.naming import BACKWARD, OUTPUT_KINDS

#: Errors below this are drawn at it (a log axis has no zero).
ERROR_FLOOR = 1e-12
#: Where an infinite or NaN error is drawn (a shape that differs, a side's Inf): at the top, never a crash.
ERROR_CEILING = 1e12
#: Seconds an outdated error series may still be shown.
STALE_S = 1.0
#: The selected call's column in the error chart (the forward│backward divider is a solid line).
SELECTED = "┊"


def sci(value: float) -> str:
    """A short power-of-ten label: 2e-10, 1e-6, 0.06, 1, 20, 300."""
    if math.isinf(value):
        return "∞"
    if 1e-2 <= value < 1e4:
        return f"{value:.1g}" if value < 1 else f"{value:.0f}"
    mantissa, exponent = f"{value:.0e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def histogram_bins(result: Result | None) -> list[tuple[str, int]]:
    """The used range of a result's |Δ| bins as (upper edge label, element count)."""
    if result is None or not result.histogram or not any(result.histogram):
        return []
    counts, edges = result.histogram, result.histogram_edges
    if len(edges) != len(counts) + 1:
        return []
    used = [i for i, c in enumerate(counts) if c]
    return [
        (f"≥{sci(edges[i])}" if math.isinf(edges[i + 1]) else f"<{sci(edges[i + 1])}", counts[i])
        for i in range(used[0], used[-1] + 1)
    ]


@dataclass(frozen=True, slots=True)
class ErrorSeries:
    """One value per call of a pair in execution order: its relative error (None: not compared)."""

    errors: Sequence[float | None]
    suspects: frozenset[int]  # indices of the calls that introduce error
    backward_from: int | None = None  # index of the first backward call


def call_error(model: TreeModel, call: Node) -> float | None:
    """The relative error a call's verdict rests on, else that of its worst compared output."""
    evidence = model.evidence(call)
    if evidence is not None and evidence.judgement is not None:
        return evidence.judgement.output_error
    rels = [
        r.result.errors.rel
        for r in model.call_rows(call)
        if r.result is not None
        and r.result.errors is not None
        and (r.record.entry is None or r.record.entry.kind in OUTPUT_KINDS)
    ]
    return max(rels, default=None)


def error_series(model: TreeModel, pair: str) -> ErrorSeries:
    calls = model.flat.get(pair, [])
    suspects = {node for _, node in model.suspects() if node is not None and node.pair == pair}
    backward = next((i for i, c in enumerate(calls) if _direction(c) == BACKWARD), None)
    return ErrorSeries(
        [call_error(model, c) for c in calls],
        frozenset(i for i, c in enumerate(calls) if c in suspects),
        backward,
    )


def _direction(call: Node) -> str:
    return next((n.key for n in call.ancestors() if n.kind == "direction"), "")


def downsample(errors: Sequence[float | None], buckets: int) -> tuple[list[float], list[float]]:
    """(x, y) with at most ``buckets`` points: the largest error of each run of calls (x: 1-based)."""
    n = len(errors)
    size = max(1, math.ceil(n / max(1, buckets)))
    xs: list[float] = []
    ys: list[float] = []
    for start in range(0, n, size):
        chunk = [(e, i) for i, e in enumerate(errors[start : start + size], start) if e is not None]
        if chunk:
            e, i = max(chunk)
            xs.append(i + 1)
            ys.append(log_error(e))
    return xs, ys


def log_error(error: float) -> float:
    """An error's height on the chart's log axis, within the floor and the ceiling (NaN and inf at the
    ceiling: an error that no number measures is the largest there is)."""
    if not error <= ERROR_CEILING:  # inf, NaN
        return math.log10(ERROR_CEILING)
    return math.log10(max(error, ERROR_FLOOR))


def log_axis(values: Sequence[float]) -> tuple[list[float], list[str]]:
    """Labelled ticks on a log10 axis whose first and last are its limits and hold every value
    between them: whole decades, at most five (no point is drawn above the top label)."""
    first, last = math.floor(min(values)), math.ceil(max(values))
    step = max(1, math.ceil((last - first) / 4))
    ticks = [first + k * step for k in range(max(1, math.ceil((last - first) / step)) + 1)]
    return [float(t) for t in ticks], [sci(10.0**t) for t in ticks]


class DeltaHistogram(PlotextPlot):
    """Element counts of |NPU − bench| per log bin, each bar labelled with its count."""

    DEFAULT_CSS = "DeltaHistogram { height: 12; }"

    _drawn: object = None  # what the plot shows: drawing it again would only cost a repaint

    def draw(self, bins: list[tuple[str, int]]) -> None:
        if bins == self._drawn:
            return
        self._drawn = bins
        self.display = bool(bins)
        plt = self.plt
        plt.clear_figure()
        if not bins:
            return
        heights = [math.log10(c + 1) for _, c in bins]
        plt.bar([label for label, _ in bins], heights, width=0.6, color="orange")
        for i, (_, count) in enumerate(bins):
            plt.text(f"{count:,}", x=i + 1, y=heights[i] + 0.35, alignment="center")
        top = max(heights) + 0.8
        plt.ylim(0, top)
        ticks: list[float] = list(range(0, math.floor(top) + 1, max(1, math.ceil(top / 4))))
        plt.yticks(ticks, [sci(10.0**t) for t in ticks])
        plt.title("|Δ| per bin (elements, log)")
        self.refresh()


class ErrorChart(PlotextPlot):
    """Relative error of each call of the pair in execution order; suspects in red, the selected call
    marked by a dotted vertical line."""

    DEFAULT_CSS = "ErrorChart { height: 12; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._cache: tuple[tuple[object, ...], ErrorSeries] | None = None
        self._computed = 0.0
        self._points: tuple[ErrorSeries, int, tuple[list[float], list[float]]] | None = None
        self._drawn: tuple[ErrorSeries | None, int | None, int] | None = None

    def show_node(self, model: TreeModel, node: Node | None) -> None:
        """The chart of the node's pair, the node's call marked (nothing for no node or several pairs)."""
        if node is None or not node.pair:
            self.draw(None, None)
            return
        calls = model.flat.get(node.pair, [])
        key = (node.pair, id(model.diagnoses.get(node.pair)), len(calls), model.version)
        now = time.monotonic()
        # While results arrive the series changes all the time: recomputed at most every STALE_S, not
        # at every key press (100k entries take ~0.1 s).
        busy = model.loading or not model.progress.done
        if (
            self._cache is None
            or self._cache[0][0] != node.pair
            or (self._cache[0] != key and (not busy or now - self._computed >= STALE_S))
        ):
            self._cache = (key, error_series(model, node.pair))
            self._computed = now
        call = node.parent if node.is_leaf else node if node.kind == "call" else None
        selected = calls.index(call) if call is not None and call in calls else None
        self.draw(self._cache[1], selected)

    def _width(self) -> int:
        """The panel's width: the plot's own is 0 while it is hidden."""
        return self.size.width or (self.parent.size.width if isinstance(self.parent, Widget) else 0) or 80

    def on_resize(self) -> None:
        if self._drawn is not None and self._drawn[2] != self._width():
            series, selected, _ = self._drawn
            self._drawn = None
            self.draw(series, selected)

    def draw(self, series: ErrorSeries | None, selected: int | None) -> None:
        drawn = (series, selected, self._width())
        if self._drawn is not None and all(a is b or a == b for a, b in zip(drawn, self._drawn, strict=True)):
            return
        self._drawn = drawn
        plt = self.plt
        plt.clear_figure()
        has_data = series is not None and any(e is not None for e in series.errors)
        self.display = has_data
        if not has_data:
            return
        assert series is not None
        width = max(10, self._width() - 8)
        if self._points is None or self._points[0] is not series or self._points[1] != width:
            self._points = (series, width, downsample(series.errors, width * 2))  # same for every call
        xs, ys = self._points[2]
        bad = [(i + 1, e) for i in sorted(series.suspects) if (e := series.errors[i]) is not None]
        ticks, labels = log_axis(ys + [log_error(e) for _, e in bad])
        if selected is not None:  # dotted, under the points: not the forward│backward divider
            plt.plot([selected + 1] * 2, [ticks[0], ticks[-1]], marker=SELECTED, color="orange")
        plt.scatter(xs, ys, marker="•", color="cyan")
        if bad:
            plt.scatter(
                [x for x, _ in bad],
                [log_error(e) for _, e in bad],
                marker="●",
                color="red",
            )
        if series.backward_from:
            plt.vline(series.backward_from + 0.5, "gray")
        plt.ylim(ticks[0], ticks[-1])
        plt.yticks(ticks, labels)
        n = max(2, len(series.errors))
        plt.xlim(1, n)
        step = max(1, math.ceil(n / 4))
        plt.xticks(list(range(1, n + 1, step)))
        keys = [
            *(["fwd│bwd"] if series.backward_from else []),
            *([f"{SELECTED} selected"] if selected is not None else []),
        ]
        long = "rel. error per call, in execution order" + (f" ({', '.join(keys)})" if keys else "")
        plt.title("rel. error per call →" if self._width() < 50 else long)
        self.refresh()
