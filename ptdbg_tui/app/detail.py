"""The detail panel: NPU vs bench side by side for an entry, a verdict for a call, counts above.

Builders are plain functions from model nodes to Rich renderables (testable without a screen);
styles come from the widget's component classes so that they follow the theme.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from rich.console import Group, RenderableType
from rich.style import Style
from rich.table import Table
from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from ptdbg_tui.app.tree_model import Node, TreeModel
from ptdbg_tui.compare.csv_export import header
from ptdbg_tui.compare.model import Result, Row, Status
from ptdbg_tui.engine.callpath import user_frames
from ptdbg_tui.formats.naming import OUTPUT_KINDS
from ptdbg_tui.formats.records import StackRecord, TensorRecord

Styles = Mapping[str, Style]
STAT_LABELS = ("max", "min", "mean", "l2norm")
SPARK = " ▁▂▃▄▅▆▇█"
MAX_FRAMES = 8


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    if value is None:
        return "—"
    return str(value)


def sparkline(counts: tuple[int, ...] | list[int]) -> str:
    """Block characters scaled to the largest count (a zero count stays blank)."""
    top = max(counts, default=0)
    if top <= 0:
        return ""
    return "".join(SPARK[0] if c <= 0 else SPARK[max(1, round(c / top * (len(SPARK) - 1)))] for c in counts)


def status_text(status: Status, styles: Styles, reason: str = "") -> Text:
    text = Text(f"{status.symbol} {status.value}", style=styles.get(status.value, Style()))
    if reason:
        text.append(f" — {reason}")
    return text


def _side_table(row: Row, styles: Styles) -> Table:
    table = Table(box=None, pad_edge=False, show_edge=False, expand=False, header_style=styles.get("head"))
    table.add_column("")
    table.add_column("NPU")
    table.add_column("Bench")

    def cells(rec: TensorRecord | None, attr: str) -> str:
        if rec is None:
            return "—"
        if attr == "shape":
            return "scalar" if rec.is_scalar else str(list(rec.shape))
        return rec.dtype

    if row.fuzzy and row.npu and row.bench:
        table.add_row("name", Text(row.npu.name), Text(row.bench.name))
    table.add_row("dtype", cells(row.npu, "dtype"), cells(row.bench, "dtype"))
    table.add_row("shape", cells(row.npu, "shape"), cells(row.bench, "shape"))
    for i, label in enumerate(STAT_LABELS):
        n = _fmt(row.npu.stat(i)) if row.npu else "—"
        b = _fmt(row.bench.stat(i)) if row.bench else "—"
        table.add_row(label, n, b)
    return table


def _metrics_table(result: Result, summary: bool, styles: Styles) -> Table:
    names = header(False, summary)[6:6 + len(result.cells)]
    table = Table(box=None, pad_edge=False, show_edge=False, show_header=False)
    table.add_column("metric", style=styles.get("muted"))
    table.add_column("value")
    for name, cell in zip(names, result.cells, strict=False):
        table.add_row(name, cell)
    if not summary:
        table.add_row("Accuracy Reached or Not", result.accuracy)
    return table


def _where(result: Result, styles: Styles) -> list[RenderableType]:
    out: list[RenderableType] = []
    if result.worst_index is not None:
        diff = (abs(result.worst_npu - result.worst_bench)
                if result.worst_npu is not None and result.worst_bench is not None else None)
        out.append(Text.assemble(("Worst element ", styles.get("head", Style())),
                                 f"{list(result.worst_index)}: NPU {_fmt(result.worst_npu)} vs bench "
                                 f"{_fmt(result.worst_bench)} (|Δ| {_fmt(diff)})"))
    counts = result.histogram
    if counts and any(counts):
        used = [i for i, c in enumerate(counts) if c]
        lo, hi = used[0], used[-1] + 1
        edges = result.histogram_edges
        span = f"  |Δ| in [{_edge(edges, lo)}, {_edge(edges, hi)})" if len(edges) == len(counts) + 1 else ""
        out.append(Text.assemble(("|Δ| histogram ", styles.get("head", Style())),
                                 (f"▕{sparkline(counts)}▏", styles.get("spark", Style())),
                                 (span, styles.get("muted", Style()))))
    return out


def _edge(edges: tuple[float, ...], i: int) -> str:
    value = edges[i]
    return "∞" if value == float("inf") else f"{value:.3g}"


def stack_lines(stack: StackRecord | None, styles: Styles) -> list[RenderableType]:
    """The call's user frames, innermost first: ``file:line  function`` and the source line."""
    frames = list(reversed(user_frames(stack.frames))) if stack else []
    if not frames:
        return []
    out: list[RenderableType] = [Text("Stack", style=styles.get("head", Style()))]
    for f in frames[:MAX_FRAMES]:
        out.append(Text.assemble(f"  {f[0]}:{f[1]}  ", (f[2], styles.get("muted", Style()))))
        if f[3]:
            out.append(Text(f"      {f[3]}", style=styles.get("source", Style())))
    if len(frames) > MAX_FRAMES:
        out.append(Text(f"  … {len(frames) - MAX_FRAMES} outer frames", style=styles.get("muted", Style())))
    return out


def leaf_detail(leaf: Node, model: TreeModel, styles: Styles) -> RenderableType:
    row = leaf.row
    assert row is not None
    info = model.infos.get(leaf.pair)
    summary = info.summary if info else False
    parts: list[RenderableType] = [Text(row.name, style=styles.get("title", Style()))]
    result = row.result
    if result is None:
        reason = "waiting for the bench side" if not row.matched else "not compared yet"
        parts.append(status_text(Status.PENDING, styles, reason))
    else:
        parts.append(status_text(result.status, styles, result.reason))
    parts += [Text(""), _side_table(row, styles)]
    if result is not None:
        parts += [Text(""), _metrics_table(result, summary, styles)]
        if result.message:
            parts.append(Text.assemble(("Err_message ", styles.get("head", Style())), result.message))
        parts += _where(result, styles)
    call = leaf.parent
    stack = row.stack or (call.site if call is not None else None)
    lines = stack_lines(stack, styles)
    if lines:
        parts += [Text(""), *lines]
    return Group(*parts)


def _row_line(row: Row, metric: str, styles: Styles) -> Text:
    status = row.result.status if row.result else Status.PENDING
    entry = row.record.entry
    label = entry.arg if entry else row.name
    text = Text(f"  {status.symbol} {label}", style=styles.get(status.value, Style()))
    if row.result is not None and row.result.cells:
        text.append(f"  {metric} {row.result.cells[0]}", style=styles.get("muted", Style()))
    return text


def call_detail(call: Node, model: TreeModel, styles: Styles) -> RenderableType:
    rows = model.call_rows(call)
    name = rows[0].record.call if rows else call.key
    parts: list[RenderableType] = [Text(name, style=styles.get("title", Style()))]
    culprit = model.first_culprit()
    if culprit is not None and culprit[1] is call:
        parts.append(Text(f"Culprit: {culprit[0].text}", style=styles.get("fail", Style())))
    evidence = model.evidence(call)
    if evidence is not None:
        head = ("introduces error: " if evidence.introduces else
                "no error of its own: " if evidence.judgement is not None else "not judged: ")
        verdict = head + evidence.text
        parts.append(Text(verdict, style=styles.get("fail" if evidence.introduces else "head", Style())))
    info = model.infos.get(call.pair)
    metric = header(False, info.summary if info else False)[6]  # Cosine, or Max diff for statistics
    outputs = [r for r in rows if r.record.entry is None or r.record.entry.kind in OUTPUT_KINDS]
    inputs = [r for r in rows if r not in outputs]
    for title, group in (("Inputs", inputs), ("Outputs", outputs)):
        if group:
            parts.append(Text(title, style=styles.get("head", Style())))
            parts += [_row_line(r, metric, styles) for r in group]
    lines = stack_lines(call.site, styles)
    if lines:
        parts += [Text(""), *lines]
    return Group(*parts)


def _failing_calls(node: Node, limit: int) -> list[Node]:
    found: list[Node] = []
    stack = [node]
    while stack and len(found) < limit:
        n = stack.pop()
        if n.is_leaf or not n.count(Status.FAIL):
            continue
        if n.kind == "call":
            found.append(n)
        else:
            stack.extend(reversed(n.children))
    return found


def summary_text(node: Node, styles: Styles) -> Text:
    text = Text()
    for status in Status:
        n = node.count(status)
        if n:
            text.append(f"{status.symbol} {n:,} {status.value}   ", style=styles.get(status.value, Style()))
    return text


def inner_detail(node: Node, model: TreeModel, styles: Styles) -> RenderableType:
    parts: list[RenderableType] = [Text(node.label or "all pairs", style=styles.get("title", Style())),
                                   Text(f"{node.total:,} entries", style=styles.get("muted", Style())),
                                   summary_text(node, styles)]
    failing = _failing_calls(node, 8)
    if failing:
        parts += [Text(""), Text("Failing calls (first in tree order)", style=styles.get("head", Style()))]
        parts += [Text(f"  {Status.FAIL.symbol} {c.label}  {c.count(Status.FAIL)} fail",
                       style=styles.get("fail", Style())) for c in failing]
    return Group(*parts)


def detail_for(node: Node | None, model: TreeModel, styles: Styles) -> RenderableType:
    if node is None:
        return Text("Select an entry or a call to see how NPU and bench compare.", style=styles.get("muted"))
    if node.is_leaf:
        return leaf_detail(node, model, styles)
    if node.kind == "call":
        return call_detail(node, model, styles)
    return inner_detail(node, model, styles)


class DetailPanel(VerticalScroll, can_focus=True):
    """Scrollable panel showing :func:`detail_for` the highlighted node."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        *(f"detail--{s.value}" for s in Status),
        "detail--title", "detail--head", "detail--muted", "detail--source", "detail--spark",
    }
    DEFAULT_CSS = """
    DetailPanel > .detail--pass { color: $text-success; }
    DetailPanel > .detail--fail { color: $text-error; text-style: bold; }
    DetailPanel > .detail--warn { color: $text-warning; }
    DetailPanel > .detail--error { color: $text-status-error; }
    DetailPanel > .detail--unmatched { color: $text-muted; }
    DetailPanel > .detail--pending { }
    DetailPanel > .detail--title { text-style: bold; }
    DetailPanel > .detail--head { color: $text-accent; text-style: bold; }
    DetailPanel > .detail--muted { color: $text-muted; }
    DetailPanel > .detail--source { color: $text-secondary; }
    DetailPanel > .detail--spark { color: $text-warning; }
    """

    def __init__(self, model: TreeModel, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.model = model
        self.node: Node | None = None

    def compose(self):
        yield Static(id="detail-body")

    def styles_map(self) -> dict[str, Style]:
        return {name.removeprefix("detail--"): self.get_component_rich_style(name, partial=True)
                for name in self.COMPONENT_CLASSES}

    def show(self, node: Node | None) -> None:
        self.node = node
        self.refresh_detail()

    def refresh_detail(self) -> None:
        body = self.query_one("#detail-body", Static)
        node = self.node if self.node is None or self.node.alive else None
        body.update(detail_for(node, self.model, self.styles_map()))
