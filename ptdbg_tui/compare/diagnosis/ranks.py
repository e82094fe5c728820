"""Which rank diverges first, from each rank's own diagnosis.

In a data- or tensor-parallel job every rank runs the same program, and the collective calls
(``Distributed_*`` entries: all_reduce, all_gather, broadcast …) are where the ranks meet. An error
made on one rank reaches the others only through a collective, where it shows as a collective whose
inputs match and whose outputs do not: that rank *receives* the error. So each rank's first suspect in
execution order is placed by the collectives before it (its epoch: how many it had passed); the first
divergent rank is the one whose own (non-collective) first suspect has the earliest step and epoch,
then the earliest place within the epoch, then the lowest rank.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ptdbg_tui.compare.diagnosis.diagnose import Diagnosis, Suspect
from ptdbg_tui.compare.diagnosis.propagation import ENTERS
from ptdbg_tui.compare.model import Row

COLLECTIVE_PREFIX = "Distributed"


@dataclass(frozen=True, slots=True)
class RankView:
    """One compared pair as the cross-rank view needs it."""

    label: str  # e.g. ``step0/rank3``
    step: int | None
    rank: int | None
    rows: Sequence[Row]
    diagnosis: Diagnosis


@dataclass(frozen=True, slots=True)
class RankVerdict:
    """One rank's first suspect in execution order, placed by the collectives before it."""

    view: RankView
    suspect: Suspect | None
    epoch: int = 0  # collectives this rank had passed before its first suspect
    offset: int = 0  # rows since the last of them

    @property
    def received(self) -> bool:
        """The rank's first suspect is a collective, or error entering outside the dumped calls (a
        collective no hook saw): the error came from another rank, or from code not dumped."""
        return self.suspect is not None and (is_collective(self.suspect.api) or self.suspect.kind == ENTERS)

    @property
    def name(self) -> str:
        return rank_name(self.view)

    @property
    def text(self) -> str:
        if self.suspect is None:
            return f"{self.name}: no suspect"
        if self.suspect.kind == ENTERS:
            return f"{self.name}: the error enters outside the dumped calls, before {self.suspect.call}"
        if self.received:
            return f"{self.name}: receives the error through {self.suspect.call}"
        return f"{self.name}: {self.suspect.text}"


@dataclass(slots=True)
class CrossRank:
    """The ranks' verdicts (in the order given) and the first divergent one."""

    verdicts: list[RankVerdict] = field(default_factory=list)
    first: RankVerdict | None = None

    @property
    def headline(self) -> str:
        """The report line: ``first divergent rank: rankR (stepS): <suspect>``, or why there is none."""
        if self.first is not None:
            assert self.first.suspect is not None
            return f"first divergent rank: {self.first.name}: {self.first.suspect.text}"
        received = [v for v in self.verdicts if v.received]
        if received:
            v = min(received, key=_order)
            call = v.suspect.call if v.suspect else "?"
            return (f"first divergent rank: none of the dumped ranks makes an error of its own; it first "
                    f"shows in {call} on {v.name} (the collective itself, or a rank not dumped)")
        return "first divergent rank: none (no rank has a suspect)"

    def lines(self) -> list[str]:
        """The headline and each rank's verdict, for the report."""
        return [self.headline, *(f"  {v.text}" for v in self.verdicts)]


def is_collective(api: str) -> bool:
    """A collective communication call (``Distributed_all_reduce``, msprobe's ``Distributed.all_reduce``)."""
    return api.startswith((COLLECTIVE_PREFIX + "_", COLLECTIVE_PREFIX + "."))


def rank_name(view: RankView) -> str:
    """``rankR (stepS)``; the folder label where a side has no rank or step number."""
    who = f"rank{view.rank}" if view.rank is not None else view.label
    return f"{who} (step{view.step})" if view.step is not None else who


def _collective_seqs(rows: Sequence[Row]) -> list[int]:
    """The execution position of each collective call's first row, in order."""
    seen: set[str] = set()
    out: list[int] = []
    for row in rows:
        entry = row.record.entry
        if entry is None or not is_collective(entry.api) or entry.call in seen:
            continue
        seen.add(entry.call)
        out.append(row.seq)
    return sorted(out)


def verdict_of(view: RankView) -> RankVerdict:
    """The rank's first suspect in execution order, and the collectives it had passed by then."""
    suspect = min(view.diagnosis.suspects, key=lambda s: s.seq, default=None)
    if suspect is None:
        return RankVerdict(view, None)
    before = [seq for seq in _collective_seqs(view.rows) if seq < suspect.seq]
    return RankVerdict(view, suspect, len(before), suspect.seq - (before[-1] if before else 0))


def _order(v: RankVerdict) -> tuple[int, int, int, int]:
    step = v.view.step if v.view.step is not None else -1
    rank = v.view.rank if v.view.rank is not None else -1
    return (step, v.epoch, v.offset, rank)


def cross_rank(views: Sequence[RankView]) -> CrossRank:
    """Each rank's first suspect and the first divergent rank (ranks on one side only are not here:
    the layout's notes name them)."""
    verdicts = [verdict_of(v) for v in views]
    own = [v for v in verdicts if v.suspect is not None and not v.received]
    return CrossRank(verdicts, min(own, key=_order, default=None))
