"""The detail panel: NPU vs bench side by side for an entry, a verdict for a call, counts above.

Builders are plain functions from model nodes to Rich renderables (testable without a screen);
styles come from the widget's component classes so that they follow the theme.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import ClassVar

from rich.console import Group, RenderableType
from rich.style import Style
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll

from ptdbg_tui.app.charts import DeltaHistogram, ErrorChart, histogram_bins
from ptdbg_tui.app.literal import LiteralStatic
from ptdbg_tui.app.tree_model import Node, TreeModel
from ptdbg_tui.compare.diagnosis.findings import NONDETERMINISTIC, RANDOM
from ptdbg_tui.compare.diagnosis.replay_outcome import CallReplay
from ptdbg_tui.compare.model import Result, Row, Status
from ptdbg_tui.compare.report.csv_ptdbg import header
from ptdbg_tui.compare.report.metric_words import reason_text
from ptdbg_tui.compare.report.words import (
    call_evidence_text,
    finding,
    manifest_notes,
    note_texts,
    received_text,
    replay_key_text,
    replay_text,
    suspect_head,
)
from ptdbg_tui.engine.callpath import user_frames
from ptdbg_tui.engine.replay.replayer import replay_could_decide, undecided
from ptdbg_tui.formats.naming import OUTPUT_KINDS
from ptdbg_tui.formats.records import StackRecord, TensorRecord

Styles = Mapping[str, Style]
STAT_LABELS = ("max", "min", "mean", "l2norm")
MAX_FRAMES = 8
#: Below this many columns the statistics and their differences are two tables, not one.
WIDE = 56
NEUTRAL = "neutral"  # style of a row that passes without being compared (a scalar, an int)
_DTYPES = {"float": "f", "bfloat": "bf", "int": "i", "uint": "u", "complex": "c"}


def short_dtype(dtype: str) -> str:
    """``torch.float32`` → ``f32``, ``torch.bfloat16`` → ``bf16``, ``<class 'int'>`` (a Python
    value's type, as the dumpers record it) → ``int``; other names lose ``torch.`` only."""
    if dtype.startswith("<class '") and dtype.endswith("'>"):
        return dtype[8:-2]
    name = dtype.removeprefix("torch.").removeprefix("numpy.")
    for word, short in _DTYPES.items():
        bits = name.removeprefix(word)
        if bits != name and bits.isdigit():
            return short + bits
    return name


def _fmt(value: object, digits: int = 6) -> str:
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    if value is None:
        return "—"
    return str(value)


def short_cell(cell: str, digits: int = 6) -> str:
    """A CSV cell's number in ``digits`` significant digits (text cells unchanged)."""
    try:
        return f"{float(cell):.{digits}g}"
    except ValueError:
        return cell


def not_compared(row: Row) -> bool:
    """A pass that compared no data: a scalar or a value without tensor (shown neutral, not green)."""
    result = row.result
    return (
        result is not None
        and result.status is Status.PASS
        and (result.errors is None or row.record.is_scalar)
    )


def one_side_text(row: Row) -> str:
    """Which side a row without counterpart is on, in the tree's words ("" for a paired row)."""
    if row.matched:
        return ""
    return "no bench" if row.npu is not None else "bench only"


def row_style_name(row: Row) -> str:
    return NEUTRAL if not_compared(row) else (row.result.status if row.result else Status.PENDING).value


def row_symbol(row: Row) -> str:
    return "·" if not_compared(row) else (row.result.status if row.result else Status.PENDING).symbol


def status_text(status: Status, styles: Styles, reason: str = "") -> Text:
    text = Text(f"{status.symbol} {status.value}", style=styles.get(status.value, Style()))
    if reason:
        text.append(f" — {reason}")
    return text


def _table(styles: Styles, *columns: str, header: bool = True) -> Table:
    table = Table(
        box=None,
        pad_edge=False,
        show_edge=False,
        expand=False,
        show_header=header,
        header_style=styles.get("head"),
    )
    for i, name in enumerate(columns):
        table.add_column(name, style=styles.get("muted") if i == 0 else None, overflow="fold")
    return table


def _delta(n: object, b: object, digits: int) -> tuple[str, str]:
    """NPU − bench and that relative to |bench|."""
    if not (isinstance(n, (int, float)) and isinstance(b, (int, float))) or isinstance(n, bool):
        return "—", "—"
    d = float(n) - float(b)
    rel = "—" if b == 0 else f"{d / abs(float(b)):+.{max(2, digits - 2)}g}"
    return f"{d:+.{digits}g}", rel


def _side_tables(row: Row, styles: Styles, width: int) -> list[Table | Text]:
    """dtype, shape and statistics of both sides with Δ and relative Δ: one table, or two when narrow;
    a row on one side only has no Δ (a column of dashes would say nothing)."""
    both = row.npu is not None and row.bench is not None
    wide = width >= WIDE and both
    digits = 6 if width >= 72 else 4
    sides = _table(styles, "", "NPU", "Bench", *(("Δ", "rel Δ") if wide else ()))
    deltas = _table(styles, "", "Δ", "rel Δ")

    def cells(rec: TensorRecord | None, attr: str) -> str:
        if rec is None:
            return "—"
        if attr == "shape":
            return "scalar" if rec.is_scalar else str(list(rec.shape))
        return short_dtype(rec.dtype)

    if row.fuzzy and row.npu and row.bench:
        sides.add_row("name", Text(row.npu.name), Text(row.bench.name))
    for attr in ("dtype", "shape"):
        sides.add_row(attr, Text(cells(row.npu, attr)), Text(cells(row.bench, attr)))
    for i, label in enumerate(STAT_LABELS):
        n = row.npu.stat(i) if row.npu else None
        b = row.bench.stat(i) if row.bench else None
        d = _delta(n, b, digits)
        sides.add_row(label, _fmt(n, digits), _fmt(b, digits), *(d if wide else ()))
        deltas.add_row(label, *d)
    return [sides] if wide or not both else [sides, Text(""), deltas]


def _metrics_table(result: Result, summary: bool, styles: Styles, width: int) -> Table:
    names = header(False, summary)[6 : 6 + len(result.cells)]
    table = _table(styles, "metric", "value", header=False)
    digits = 6 if width >= 48 else 4
    for name, cell in zip(names, result.cells, strict=False):
        table.add_row(name, Text(short_cell(cell, digits)))  # dump text: never markup
    if not summary:
        table.add_row("Accuracy Reached or Not" if width >= 48 else "Accuracy", result.accuracy)
    return table


def _where(result: Result, styles: Styles) -> list[RenderableType]:
    out: list[RenderableType] = []
    if result.worst_index is not None:
        diff = (
            abs(result.worst_npu - result.worst_bench)
            if result.worst_npu is not None and result.worst_bench is not None
            else None
        )
        out.append(
            Text.assemble(
                ("Worst element ", styles.get("head", Style())),
                f"{list(result.worst_index)}: NPU {_fmt(result.worst_npu)} vs bench "
                f"{_fmt(result.worst_bench)} (|Δ| {_fmt(diff)})",
            )
        )
    return out


def display_path(path: str) -> str:
    """A frame's file relative to the current folder, or under ``~``: shorter, and no machine's layout."""
    for root, shown in ((os.getcwd(), ""), (os.path.expanduser("~"), "~/")):
        if root not in ("", "/") and path.startswith(root.rstrip("/") + "/"):
            return shown + path[len(root.rstrip("/")) + 1 :]
    return path


def stack_lines(stack: StackRecord | None, styles: Styles) -> list[RenderableType]:
    """The call's user frames, innermost first: ``file:line  function`` and the source line."""
    frames = list(reversed(user_frames(stack.frames))) if stack else []
    if not frames:
        return []
    out: list[RenderableType] = [Text("Stack", style=styles.get("head", Style()))]
    for f in frames[:MAX_FRAMES]:
        muted = styles.get("muted", Style())
        out.append(Text.assemble(f"  {display_path(f.path)}:{f.line}  ", (f.function, muted)))
        if f.source:
            out.append(Text(f"      {f.source}", style=styles.get("source", Style())))
    if len(frames) > MAX_FRAMES:
        out.append(Text(f"  … {len(frames) - MAX_FRAMES} outer frames", style=styles.get("muted", Style())))
    return out


def leaf_detail(leaf: Node, model: TreeModel, styles: Styles, width: int = 100) -> RenderableType:
    row = leaf.row
    assert row is not None
    info = model.infos.get(leaf.pair)
    summary = info.summary if info else False
    parts: list[RenderableType] = [Text(row.name, style=styles.get("title", Style()))]
    result = row.result
    if result is None:
        reason = "waiting for the bench side" if not row.matched else "not compared yet"
        parts.append(status_text(Status.PENDING, styles, reason))
    elif not_compared(row):
        parts.append(
            Text(
                f"· not compared — {reason_text(result.reason) or 'no tensor data: nothing to compare'}",
                style=styles.get(NEUTRAL, Style()),
            )
        )
    else:
        parts.append(status_text(result.status, styles, reason_text(result.reason)))
    call = model.call_of(leaf)
    replay = model.replay_of(call) if call is not None else None
    if call is not None and replay is not None:
        parts.append(replay_line(f"Replay of {call.key}", replay, styles))
    parts += [Text(""), *_side_tables(row, styles, width)]
    # a row on one side only was compared with nothing: its metrics are NaN by the CSV's convention,
    # which here would read as a comparison made (the status line says which side it is on)
    if result is not None and result.status is not Status.UNMATCHED:
        parts += [Text(""), _metrics_table(result, summary, styles, width)]
        if result.message:
            parts.append(Text.assemble(("Err_message ", styles.get("head", Style())), result.message))
        parts += _where(result, styles)
    return Group(*parts)


def replay_line(head: str, replay: CallReplay, styles: Styles) -> Text:
    """A call's replay in words: red when it proves the NPU kernel wrong."""
    style = styles.get("fail" if replay.confirmed else "head", Style())
    return Text(f"{head}: {replay_text(replay)}", style=style)


def _row_line(row: Row, metric: str, styles: Styles) -> Text:
    entry = row.record.entry
    label = entry.arg if entry else row.name
    text = Text(f"  {row_symbol(row)} {label}", style=styles.get(row_style_name(row), Style()))
    alone = one_side_text(row)
    if alone:  # compared with nothing: no metric (its NaN would read as a comparison made)
        return text.append(f"  {alone}", style=styles.get("muted", Style()))
    cell = short_cell(row.result.cells[0]) if row.result is not None and row.result.cells else ""
    if cell and not not_compared(row):  # no value (statistics that are NaN on a side): no label either
        text.append(f"  {metric} {cell}", style=styles.get("muted", Style()))
    return text


def call_detail(call: Node, model: TreeModel, styles: Styles, width: int = 100) -> RenderableType:
    rows = model.call_rows(call)
    name = rows[0].record.call if rows else call.key
    parts: list[RenderableType] = [Text(name, style=styles.get("title", Style()))]
    suspects = model.suspects()
    mine = [(k, suspect) for k, (suspect, node) in enumerate(suspects) if node == call]
    for k, suspect in mine:  # an error that entered before the call may come with one of its own
        head = suspect_head(k, len(suspects))
        parts.append(Text(f"{head}: {finding(suspect)}", style=styles.get("fail", Style())))
    diagnosis = model.diagnoses.get(call.pair)
    if mine and diagnosis is not None:  # what bears on the finding: a check not done, other steps' word
        parts += [Text(f"Note: {note}", style=styles.get("warn", Style())) for note in note_texts(diagnosis)]
    evidence = model.evidence(call)
    # a replayed finding quotes the two dumps' figures
    quoted = any(suspect.replay_chosen for _, suspect in mine)
    # a call named by its checksums (an output differing from bit-equal inputs) may be within rounding
    # by its statistics: "no error of its own" would contradict its finding
    departs = any(s.judgement.kind in (NONDETERMINISTIC, RANDOM) for _, s in mine)
    if evidence is not None and not (mine and evidence.introduces) and not quoted and not departs:
        head = (
            "introduces error: "
            if evidence.introduces
            else "no error of its own: "
            if evidence.judgement is not None
            else "not judged: "
        )
        parts.append(
            Text(
                head + call_evidence_text(evidence),
                style=styles.get("fail" if evidence.introduces else "head", Style()),
            )
        )
    replay = model.replay_of(call)
    if replay is not None and not quoted:  # a suspect's finding says it already
        parts.append(replay_line("Replay", replay, styles))
    info = model.infos.get(call.pair)
    metric = header(False, info.summary if info else False)[6]  # Cosine, or Max diff for statistics
    outputs = [r for r in rows if r.record.entry is None or r.record.entry.kind in OUTPUT_KINDS]
    inputs = [r for r in rows if r not in outputs]
    for title, group in (("Inputs", inputs), ("Outputs", outputs)):
        if group:
            parts.append(Text(title, style=styles.get("head", Style())))
            parts += [_row_line(r, metric, styles) for r in group]
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


def pair_notes(node: Node, model: TreeModel) -> list[str]:
    """What the report's notes say of a pair, for its node: whether it only receives another rank's
    error, what its diagnosis notes (a precision the scripts chose, parameters that carry an earlier
    step's rounding…), and, where its rows fail and no kernel is named, the app's replay (the report
    offers ``--replay``)."""
    d = model.diagnoses.get(node.pair)
    info = model.infos.get(node.pair)
    if node.kind != "pair" or d is None or info is None or info.same:
        return []
    notes = [received_text(d.received)] if d.received else []
    notes += [*manifest_notes(d), *note_texts(d)]  # in the report's order
    if replay_could_decide(d, info.summary):
        notes.append(replay_key_text(undecided(d)))
    return notes


def inner_detail(node: Node, model: TreeModel, styles: Styles) -> RenderableType:
    parts: list[RenderableType] = [
        Text(node.label or "all pairs", style=styles.get("title", Style())),
        Text(f"{node.total:,} entries", style=styles.get("muted", Style())),
        summary_text(node, styles),
    ]
    parts += [Text(f"Note: {note}", style=styles.get("warn", Style())) for note in pair_notes(node, model)]
    failing = _failing_calls(node, 8)
    if failing:
        parts += [Text(""), Text("Failing calls (first in tree order)", style=styles.get("head", Style()))]
        parts += [
            Text(
                f"  {Status.FAIL.symbol} {c.label}  {c.count(Status.FAIL)} fail",
                style=styles.get("fail", Style()),
            )
            for c in failing
        ]
    return Group(*parts)


def node_stack(node: Node | None) -> StackRecord | None:
    """Where an entry's or a call's call was made."""
    if node is None:
        return None
    if node.is_leaf:
        call = node.parent
        return (node.row.stack if node.row is not None else None) or (call.site if call is not None else None)
    return node.site if node.kind == "call" else None


def detail_for(
    node: Node | None, model: TreeModel, styles: Styles, width: int = 100, stack: bool = True
) -> RenderableType:
    """The panel's text for ``node`` (``stack``: with its stack, which the panel shows below its plots)."""
    if node is None:
        return Text(
            "Select an entry or a call to see how NPU and bench compare.", style=styles.get("muted", Style())
        )
    if node.is_leaf:
        body = leaf_detail(node, model, styles, width)
    elif node.kind == "call":
        body = call_detail(node, model, styles, width)
    else:
        return inner_detail(node, model, styles)
    lines = stack_lines(node_stack(node), styles) if stack else []
    return Group(body, Text(""), *lines) if lines else body


class DetailPanel(VerticalScroll, can_focus=True):
    """Scrollable panel showing :func:`detail_for` the highlighted node."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        *(f"detail--{s.value}" for s in Status),
        "detail--title",
        "detail--head",
        "detail--muted",
        "detail--source",
        f"detail--{NEUTRAL}",
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
    DetailPanel > .detail--neutral { color: $text-muted; }
    """

    def __init__(self, model: TreeModel, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.model = model
        self.node: Node | None = None
        self._body = LiteralStatic(id="detail-body")
        self._histogram = DeltaHistogram(id="histogram")
        self._along = ErrorChart(id="along")
        self._stack = LiteralStatic(id="detail-stack")

    def compose(self) -> ComposeResult:
        yield self._body
        yield self._histogram
        yield self._along
        yield self._stack

    def on_mount(self) -> None:
        self.refresh_detail()  # what was asked for before the panel was mounted

    def styles_map(self) -> dict[str, Style]:
        return {
            name.removeprefix("detail--"): self.get_component_rich_style(name, partial=True)
            for name in self.COMPONENT_CLASSES
        }

    def show(self, node: Node | None) -> None:
        self.node = node
        self.refresh_detail()

    def refresh_detail(self) -> None:
        """Draw the node shown. Nothing before the panel and its parts are mounted (:meth:`on_mount`
        draws it then) or once they are gone: the engine's news and the tree's events come at any
        time, and a query of a part not there ended the app under watch (``NoMatches``)."""
        parts = (self._body, self._histogram, self._along, self._stack)
        if not (self.is_mounted and all(p.is_attached for p in parts)):
            return
        node = self.node if self.node is None or self.node.alive else None
        if node is not None:  # a pair's summary and chart need its rows placed
            self.model.place(node.pair)
        width = self.scrollable_content_region.width or 100
        styles = self.styles_map()
        self._body.update(detail_for(node, self.model, styles, width, stack=False))
        self._stack.update(Group(*stack_lines(node_stack(node), styles)))
        row = node.row if node is not None and node.is_leaf else None
        self._histogram.draw(histogram_bins(row.result if row is not None else None))
        self._along.show_node(self.model, node)
