"""The header line and the diagnosis bar as prioritised segments that fit any terminal width.

A line is a list of :class:`Segment`\\ s in display order; each has a priority (0: must stay). When the
line is too wide the least important segments go first, and what is left is cut with an ellipsis,
so that at 80 columns the failure counts, the culprit's api and its ``file:line`` stay on screen.
These builders are plain functions of the model (testable without a screen).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from rich.style import Style
from rich.text import Text

from ptdbg_tui.app.tree_model import FILTERS, NAMED, Node, TreeModel
from ptdbg_tui.compare.diagnosis.findings import (
    NONDETERMINISTIC,
    NOT_A_KERNEL,
    OWN_COLLECTIVE,
    RECEIVED,
    REPLAYED,
    Diagnosis,
    Suspect,
)
from ptdbg_tui.compare.diagnosis.ranks import bits_only
from ptdbg_tui.compare.model import Status
from ptdbg_tui.compare.report.words import (
    NOTHING_COMPARED,
    ONE_DUMP_TWICE,
    caveat_text,
    missing_text,
    no_culprit_texts,
    replay_mark_text,
    runs_differ_head,
    runs_differ_texts,
    scored_evidence,
    sides_text,
    suspect_head,
    suspect_lead,
    suspect_replay_text,
    unpaired_text,
)

Styles = Mapping[str, Style]
SEP = "  │  "
NARROW_SEP = " │ "  # when the segments do not fit with SEP
INDENT = "  "  # before a bar's second line
#: A word cut to fit is left out whole when this many characters or fewer of it would show.
CUT_WORD = 12
#: The diagnosis bar takes one line when everything fits, else two.
MAX_BAR_LINES = 2


@dataclass(frozen=True, slots=True)
class Segment:
    text: Text
    priority: int = 0  # 0 stays longest; the highest number is dropped first
    shrink: int = 0  # > 0: may be cut with an ellipsis down to this many cells instead of dropped


def seg(text: str | Text, priority: int = 0, style: Style | str = "", shrink: int = 0) -> Segment:
    return Segment(text if isinstance(text, Text) else Text(text, style=style), priority, shrink)


def fit(segments: Sequence[Segment], width: int, sep: str = SEP) -> Text:
    """The segments joined by ``sep`` (the narrow one when they do not fit): while too wide, the least
    important one is cut (when it may shrink that far) or dropped; the last one left is cut after a
    whole word with an ellipsis (a note cut "where the bench r…" reads as a typo)."""
    kept = [s for s in segments if s.text.cell_len]
    if not fits(kept, width, sep):
        sep = NARROW_SEP
    while len(kept) > 1 and (excess := _width(kept, sep) - width) > 0:
        i = _least_important(kept)
        victim = kept[i]
        if victim.shrink and victim.text.cell_len - excess >= victim.shrink:
            cut = _cut(victim, victim.text.cell_len - excess)
            if not _one_word(cut):
                kept[i] = cut
                break
        del kept[i]
    if len(kept) == 1 and width > 0:  # one left, too wide: after its last whole word, as _cut cuts
        kept = [_cut(kept[0], width)]
    line = Text(sep).join(s.text for s in kept)
    line.truncate(max(0, width), overflow="ellipsis")
    return line


def flow(segments: Sequence[Segment], width: int, lines: int = MAX_BAR_LINES) -> list[Text]:
    """The segments on one line when they fit, else wrapped in order onto at most ``lines`` lines
    (the later ones indented), dropping the least important ones until they fit; a segment that
    may shrink is cut to end the last line."""
    kept = [s for s in segments if s.text.cell_len]
    if fits(kept, width, NARROW_SEP):
        return [fit(kept, width)]
    while True:
        rows = _wrap(kept, width, lines)
        if rows is not None:
            return [
                Text(NARROW_SEP).join(s.text for s in row)
                if i == 0
                else Text(INDENT).append_text(Text(NARROW_SEP).join(s.text for s in row))
                for i, row in enumerate(rows)
            ]
        if all(s.priority == 0 for s in kept) or len(kept) == 1:  # nothing may go: cut what is too long
            rest = [Text(INDENT).append_text(fit(kept[1:], width - len(INDENT)))] if kept[1:] else []
            return [fit(kept[:1], width), *rest][:lines]
        del kept[_least_important(kept)]


def _wrap(segments: Sequence[Segment], width: int, lines: int) -> list[list[Segment]] | None:
    """The segments on at most ``lines`` lines (the later ones ``INDENT`` narrower), each on the first
    line with room for it (order kept within a line); one that may shrink and fits nowhere is cut
    to end the last line. None when they do not fit."""
    rows: list[list[Segment]] = [[] for _ in range(lines)]
    used = [len(INDENT) if i else 0 for i in range(lines)]

    def room(i: int) -> int:
        return width - used[i] - (len(NARROW_SEP) if rows[i] else 0)

    for s in segments:
        i = next((i for i in range(lines) if s.text.cell_len <= room(i)), None)
        if i is None and s.shrink and room(lines - 1) >= s.shrink:
            i, s = lines - 1, _cut(s, room(lines - 1))
        if i is None:
            return None
        used[i] = width - room(i) + s.text.cell_len
        rows[i].append(s)
    return [row for row in rows if row]


def _least_important(segments: Sequence[Segment]) -> int:
    return max(range(len(segments)), key=lambda i: (segments[i].priority, i))


def _cut(segment: Segment, cells: int) -> Segment:
    """The segment in ``cells`` cells, cut after its last whole word (" …"): a number cut short reads
    as another number ("allowed 2.3e-0…"), a word as a typo ("kernel wron…"). A long word (a path)
    is cut within, as is one with nothing before it: the part of it that fits says more than none."""
    text = segment.text.copy()
    if text.cell_len > cells:
        text.truncate(cells - 1)
        space = text.plain.rfind(" ")
        if space > 0 and len(text.plain) - space <= CUT_WORD and text.plain[:space].strip():
            text.right_crop(len(text) - space)
            text.rstrip()
            text.append(" …")
        else:
            text.append("…")
    return Segment(text, segment.priority)


def _one_word(segment: Segment) -> bool:
    """A part cut down to one word and " …" ("NPU …"), which says nothing: better dropped."""
    plain = segment.text.plain
    return plain.endswith(" …") and " " not in plain[:-2].strip()


def _width(segments: Sequence[Segment], sep: str) -> int:
    return sum(s.text.cell_len for s in segments) + len(sep) * (len(segments) - 1)


def fits(segments: Sequence[Segment], width: int, sep: str = SEP) -> bool:
    return _width([s for s in segments if s.text.cell_len], sep) <= width


# -- header ----------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ViewState:
    """What the app adds to the model's figures in the header."""

    title: str
    filter_index: int = 0
    flat: bool = False
    match: str = ""  # the matching the user asked for ("auto" …)


def _one_dump_twice(model: TreeModel) -> bool:
    return bool(model.infos) and all(info.same for info in model.infos.values())


def _compared_segments(model: TreeModel, counts: Mapping[Status, int], styles: Styles) -> list[Segment]:
    """The failures and how many rows were compared — or that nothing was."""
    p = model.progress
    if counts[Status.UNMATCHED] == sum(counts.values()):
        # no row has both sides (no rows yet, a side missing or empty, no name in common): no count
        # of failures or of rows compared ("compared 0/0"), while one side writes too; the sides
        # segment or the matching hint says why
        return [seg(NOTHING_COMPARED, 0, styles.get("warn", Style()))]
    if _one_dump_twice(model):  # each row equals itself (the tree's ✔, the CLI's "passed"): no counts
        return [seg(ONE_DUMP_TWICE, 0, styles.get("warn", Style()))]
    bad = Text()
    for status in (Status.FAIL, Status.ERROR):
        if counts[status] or status is Status.FAIL:  # "✘ 0" plain: red means failures
            bad.append(
                f"{status.symbol} {counts[status]:,} ",
                style=styles.get(status.value if counts[status] else "muted", Style()),
            )
    bad.rstrip()
    named = model.named_calls()
    if named:  # our verdict beside the original's: a 2% kernel error passes its thresholds ("✘ 0")
        bad.append(" · ")
        bad.append(f"{NAMED} {named:,} named", style=styles.get("fail", Style()))
    done = p.done and p.rows and not p.pending
    # on one side only, or could not be compared (the bar says "1 entry could not be compared")
    left = counts[Status.UNMATCHED] + counts[Status.ERROR]
    whole = f"all {p.rows:,} compared" if not left else f"{p.rows - left:,} of {p.rows:,} compared"
    return [Segment(bad, 0), seg(whole if done else f"compared {p.compared:,}/{p.rows:,}", 0)]


def header_segments(model: TreeModel, view: ViewState, styles: Styles) -> list[Segment]:
    """Failures and progress first; then the match mode, the filter, counts of the other states,
    pairs, the watch mode and the view; the dumps' names last."""
    p = model.progress
    counts = model.status_counts()
    out = _compared_segments(model, counts, styles)
    if mode := model.compared_from():  # as the report's "(statistics only)": what a ✔ or ✘ rests on
        out.append(seg(mode, 0, styles.get("warn", Style())))
    hint = model.match_hint()
    if hint:
        out.append(seg(hint, 1, styles.get("warn", Style()), shrink=10))
    if view.filter_index:
        out.append(seg(f"filter: {FILTERS[view.filter_index].name}", 1, styles.get("warn", Style())))
    if not _one_dump_twice(model):
        others = Text()
        for status in (Status.PASS, Status.WARN, Status.UNMATCHED):
            others.append(f"{status.symbol} {counts[status]:,} ", style=styles.get(status.value, Style()))
        others.rstrip()
        out.append(Segment(others, 2))
    if p.replayed < p.replaying:
        out.append(seg(f"replaying {p.replayed:,}/{p.replaying:,}", 2))
    if p.pairs > 1:
        out.append(seg(f"{p.pairs} pairs (o: overview)", 2))
    if p.pairs and p.unpaired:  # a dump on one side only is compared with nothing: said, culprit or not
        more = f" (+{len(p.unpaired) - 1} more)" if len(p.unpaired) > 1 else ""
        out.append(seg(unpaired_text(p.unpaired[0]) + more, 1, styles.get("warn", Style()), shrink=12))
    modes = model.match_modes()
    if modes:
        out.append(seg(f"match {modes}", 3))
    watching = p.watching if not p.done or p.watching == "static" else f"{p.watching}, idle"
    out.append(seg(watching, 4))
    lacking = any(s is not None and (not s.found or s.problems) for s in (p.npu, p.bench))
    out.append(
        seg(
            sides_text(p),
            0 if lacking else 5,
            styles.get("warn", Style()) if lacking else "",
            shrink=24 if lacking else 0,
        )
    )
    out.append(seg("flat" if view.flat else "tree", 6))
    out.append(seg(view.title, 7, styles.get("muted", Style())))
    return out


# -- diagnosis bar ---------------------------------------------------------------------------------
def module_of(call: Node | None) -> str:
    """The innermost module around a call node (``path · Class``), or ``""``."""
    if call is None:
        return ""
    return next((n.label for n in call.ancestors() if n.kind == "module"), "")


def receives_through(d: Diagnosis | None, suspect: Suspect) -> bool:
    """Whether the pair of diagnosis ``d`` only receives another rank's error at ``suspect``: a
    collective's finding, or its first suspect where the pair receives the error; not a call its
    checksums alone name (bits that differ before any rank's values do: the report's rank lines keep
    it as the rank's own, and the error it receives comes later)."""
    if suspect.kind == RECEIVED:
        return True
    first = d is not None and bool(d.received) and bool(d.suspects) and d.suspects[0] is suspect
    return first and not bits_only(suspect)


#: Suspects a replay does not judge: no kernel at fault, or a finding across ranks or of checksums.
_NOT_REPLAYED_KINDS = NOT_A_KERNEL | OWN_COLLECTIVE | {REPLAYED, NONDETERMINISTIC}


def replay_mark(model: TreeModel, suspect: Suspect, node: Node | None) -> str:
    """Whether a suspect that blames a kernel still waits for its replay ("provisional: …"), or why none
    will come ("unconfirmed: …"); "" once replayed, or where a replay does not judge it. The bar's verdict
    is updated in place when the replay's comes."""
    if suspect.replay_chosen or suspect.kind in _NOT_REPLAYED_KINDS:
        return ""
    info = model.infos.get(node.pair) if node is not None else None
    p = model.progress
    return replay_mark_text(info is not None and info.summary, p.replay_off, p.replayed < p.replaying)


def _suspect_segments(
    model: TreeModel, suspects: Sequence[tuple[Suspect, Node | None]], index: int, styles: Styles
) -> list[Segment]:
    """The suspect's call, module, pair and rank among the suspects; its call site and evidence."""
    suspect, node = suspects[index]
    fail = styles.get("fail", Style())
    total = len(suspects)
    head = f"{Status.FAIL.symbol} {suspect_head(index, total)}"
    d = model.diagnoses.get(node.pair) if node is not None else None
    # another rank made it (the overview's top pair)
    where = suspect_lead(suspect, receives_through(d, suspect))
    evidence, score = scored_evidence(suspect)  # the score stays with the call's name; the rest may be cut
    name = Text.assemble((f"{head} {where}", fail), (suspect.call, fail + Style(bold=True)), (score, fail))
    out = [seg(name, 0)]
    module = module_of(node)
    if module:
        out.append(seg(module, 1))
    if len(model.infos) > 1 and node is not None and node.pair in model.infos:
        out.append(seg(model.infos[node.pair].label, 1))
    if index == 0 and total > 1:  # the others say "Suspect k/N" in their head
        out.append(seg(f"+{total - 1} more (c/C)", 0, styles.get("muted", Style())))
    site = suspect.site
    if site is not None:
        text = Text(f"{os.path.basename(site.path)}:{site.line}", style=styles.get("site", Style()))
        # a long source line is cut, not the file:line dropped with it (it must stay: module docstring)
        shrink = text.cell_len + 1 if site.source else 0
        if site.source:
            text.append(f"  {site.source.strip()}", style=styles.get("source", Style()))
        out.append(Segment(text, 0, shrink))
    if suspect.replay_chosen:  # the replay's verdict outranks the two dumps' evidence
        style = fail if suspect.confirmed else styles.get("muted", Style())
        out.append(seg(suspect_replay_text(suspect), 1, style, shrink=16))
    elif mark := replay_mark(model, suspect, node):
        out.append(seg(mark, 1, styles.get("warn", Style()), shrink=16))
    out.append(seg(evidence, 2, styles.get("muted", Style()), shrink=12))
    return out


def diagnosis_lines(model: TreeModel, width: int, styles: Styles, index: int = 0) -> list[Text]:
    """The bar's text for ``width`` columns: one line when it all fits, else two.

    ``index`` is the suspect the user walked to with c/C (0: the culprit)."""
    suspects = model.suspects()
    differ = _differ_segments(model, styles)
    if suspects:
        return flow(differ + _suspect_segments(model, suspects, min(index, len(suspects) - 1), styles), width)
    texts = no_suspect_texts(model)
    last = seg(texts[-1], int(len(texts) > 1), shrink=24)
    return flow(differ + [seg(text, 0) for text in texts[:-1]] + [last], width)


def differ_texts(diagnoses: Iterable[Diagnosis]) -> list[str]:
    """What differs between the runs before any kernel, the manifests first, each once (every step of
    a pair says it)."""
    return list(dict.fromkeys(text for d in diagnoses for text in runs_differ_texts(d)))


def _differ_segments(model: TreeModel, styles: Styles) -> list[Segment]:
    """The runs' differences before any kernel (their models, data, hyperparameters), said first: what
    the culprit after them shows follows from them."""
    texts = differ_texts(model.diagnoses.values())
    if not texts:
        return []
    return [seg(runs_differ_head(texts), 0, styles.get("fail", Style()), shrink=24)]


def no_suspect_texts(model: TreeModel) -> list[str]:
    """Why there is no culprit (:func:`~ptdbg_tui.compare.report.words.no_culprit_texts`), from the
    model's pairs and what their sides lack."""
    p = model.progress
    return no_culprit_texts(
        model.diagnoses,
        {key: info.label for key, info in model.infos.items()},
        {key for key, info in model.infos.items() if info.same},
        model.status_counts(),
        done=p.done,
        lacking=missing_text(p),
        caveat=caveat_text(p).strip(),
    )
