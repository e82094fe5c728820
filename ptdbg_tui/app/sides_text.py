"""The two sides' states in words, for the progress line and for a diagnosis that has no verdict:
what is missing, never an all-clear that nothing backs."""

from __future__ import annotations

from pathlib import Path

from ptdbg_tui.compare.report.words import unpaired_text
from ptdbg_tui.engine.live.updates import FOUND, Progress, SideStatus


def short_path(path: str, parts: int = 2) -> str:
    """The last ``parts`` components of a path (``…/dumps/cpuu``)."""
    p = Path(path)
    tail = p.parts[-parts:]
    return str(Path(*tail)) if len(p.parts) <= parts else "…/" + str(Path(*tail))


def side_text(status: SideStatus | None, seen: int, watching: bool) -> str:
    """One side for the progress line: its count and whether it is being written, or what it lacks."""
    if status is None:
        return f"{'?'} {seen:,}"
    if status.state != FOUND:
        if status.detail.startswith("waiting for"):
            return f"{status.role}: waiting for {short_path(status.path)}"
        return f"{status.role}: no dump at {short_path(status.path)}"
    text = f"{status.role} {seen:,}"
    if watching:
        text += " (writing)" if status.writing else " (quiet)"
    if status.problems:
        text += f" ⚠ {len(status.problems)} unreadable"
    return text


def sides_text(p: Progress) -> str:
    watching = p.watching != "static"
    return " · ".join((side_text(p.npu, p.npu_seen, watching), side_text(p.bench, p.bench_seen, watching)))


def missing_text(p: Progress) -> str:
    """What keeps rows from being compared on both sides, in words ("" when nothing seems to)."""
    for status in (p.npu, p.bench):
        if status is not None and status.state != FOUND:
            return f"{status.role}: {status.detail}"
    if p.unpaired and not p.pairs:
        return unpaired_text(p.unpaired[0])
    if p.faults:
        return p.faults[0]
    for status in (p.npu, p.bench):
        if status is not None and status.problems:
            return f"{status.role}: {status.problems[0]}"
    if p.pairs and not p.bench_seen:
        return "the bench dump has no entries yet (has the bench run started?)"
    if p.pairs and not p.npu_seen:
        return "the NPU dump has no entries yet"
    return ""


def caveat_text(p: Progress) -> str:
    """What a verdict does not cover: dumps without a counterpart, failed pairs, unreadable files."""
    gaps = [*p.faults, *map(unpaired_text, p.unpaired)]
    gaps += [f"{s.role}: {q}" for s in (p.npu, p.bench) if s is not None for q in s.problems]
    if not gaps:
        return ""
    more = f" (+{len(gaps) - 1} more)" if len(gaps) > 1 else ""
    return f" Not covered: {gaps[0]}{more}."
