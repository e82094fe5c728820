"""Which rank diverges first, from each rank's own diagnosis and the ranks' collectives.

In a data- or tensor-parallel job every rank runs the same program, and the collective calls
(``Distributed_*`` entries: all_reduce, all_gather, broadcast …) are where the ranks meet. An error
made on one rank reaches the others only through a collective, where it shows as a collective whose
inputs match and whose outputs do not: that rank *receives* the error. So each rank's first suspect in
execution order is placed by the collectives before it (its epoch: how many it had passed); the first
divergent rank is the one whose own (non-collective) first suspect has the earliest step and epoch,
then the earliest place within the epoch, then the lowest rank.

Within one run, a collective's result must be the same on every rank where the collective says so
(all_reduce, all_gather, broadcast): a rank whose result departs from its peers', which agree among
themselves, is where the error is made — the collective is that rank's culprit
(:func:`collective_departures`), read from the records' statistics of every rank of the NPU run.
Against the bench run, any collective (reduce_scatter, a permutation that leaves the statistics equal)
whose inputs agree on every rank of its group and whose result differs on one rank alone is that rank's
error (:func:`wrong_on_one_rank`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from ptdbg_tui.compare.diagnosis.evidence import Departs, OnOneRank
from ptdbg_tui.compare.diagnosis.findings import (
    ARGUMENTS,
    COLLECTIVE,
    NONDETERMINISTIC,
    NOT_A_KERNEL,
    OWN_COLLECTIVE,
    RANK_ALONE,
    RECEIVED,
    Diagnosis,
    Received,
    Suspect,
)
from ptdbg_tui.compare.diagnosis.propagation import (
    ENTERS,
    GROWTH,
    LEAN,
    MARGIN,
    NAN_ORIGIN,
    SUMS,
    ZEROS,
    Judgement,
)
from ptdbg_tui.compare.model import Row
from ptdbg_tui.formats.naming import FORWARD, INPUT, OUTPUT_KINDS
from ptdbg_tui.formats.records import TensorRecord

COLLECTIVE_PREFIX = "Distributed"
#: Collectives whose result is the same on every rank (reduce_scatter, all_to_all give each rank its own).
SAME_ON_EVERY_RANK = frozenset(
    {"all_reduce", "all_gather", "all_gather_into_tensor", "broadcast", "_all_gather_base"}
)
#: Two ranks' results agree when every statistic does within this (relative): collectives give every rank
#: the same bits; the room is for statistics written in another precision.
RANK_AGREEMENT = 1e-6


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
        """The rank's first suspect is a collective (whose result agrees with the other ranks'), or error
        entering outside the dumped calls (a collective no hook saw): the error came from another rank,
        or from code not dumped."""
        s = self.suspect
        # a collective this rank calls with other arguments than its bench run (another ReduceOp) is its own
        own = (*OWN_COLLECTIVE, ARGUMENTS)
        # error entering right after calls this rank's NPU script lacks is its own too
        entering = s is not None and s.kind == ENTERS and not s.after_bench_only
        return s is not None and s.kind not in own and (is_collective(s.api) or entering)

    @property
    def name(self) -> str:
        return rank_name(self.view)


@dataclass(slots=True)
class CrossRank:
    """The ranks' verdicts (in the order given) and the first divergent one."""

    verdicts: list[RankVerdict] = field(default_factory=list)
    first: RankVerdict | None = None
    #: ranks whose checksums alone differ before the first divergent rank's values do
    bits: list[RankVerdict] = field(default_factory=list)
    #: each rank's first suspect whose values diverge (its first by checksums alone where it has no
    #: other), in the order of ``verdicts``: what a rank receives, or where the error first shows
    valued: list[RankVerdict] = field(default_factory=list)

    @property
    def shows_first(self) -> RankVerdict | None:
        """Where the error first shows when every rank only receives it (no first divergent rank): the
        place the headline names, and what a narrowing follows."""
        return min((v for v in self.valued if v.received), key=_order, default=None)

    def bits_where(self) -> dict[str, list[str]]:
        """Each call whose checksums alone differ before the first divergent rank's values, and the
        ranks it differs on (their names), in execution order: the first difference in bits, which the
        headline passes over (:func:`~ptdbg_tui.compare.report.words.bits_lines` says it)."""
        where: dict[str, list[str]] = {}
        for v in sorted(self.bits, key=_order):
            assert v.suspect is not None
            where.setdefault(v.suspect.call, []).append(v.name)
        return where

    def received(self, label: str) -> Received | None:
        """For the pair ``label`` whose first suspect only receives the error another rank made (its
        own verdict says "introduces error": its collective's result differs), what it receives from
        where; None for any other pair."""
        first = self.first
        if first is None or first.suspect is None:
            return None
        v = next((v for v in self.valued if v.view.label == label), None)
        if v is None or v.view is first.view or not v.received or v.suspect is None:
            return None
        # no dumped call carries it in: a collective no hook saw (another rank's error), or, on the
        # first divergent rank itself at a later step, its own error carried over in undumped state
        entered = v.suspect.kind == ENTERS
        return Received(
            rank=v.name,
            call=v.suspect.call,
            entered=entered,
            own=entered and v.view.rank is not None and v.view.rank == first.view.rank,
            first=first.name,
            first_call=first.suspect.call,
        )


def mark_received(ranks: CrossRank) -> list[Diagnosis]:
    """Each rank's diagnosis (in the order of ``ranks.verdicts``), new, with whether its first suspect only
    receives the error the first divergent rank made (:meth:`CrossRank.received`, its ``received``
    words); on such a rank every collective suspect whose result agrees with the other ranks' receives it
    too: that finding, not a kernel that introduces error. Nothing is received without a first divergent
    rank (a collective wrong alike on every rank is no rank's to receive)."""
    out = []
    for v in ranks.verdicts:
        d = v.view.diagnosis
        received = ranks.received(v.view.label)
        suspects = d.suspects
        if received is not None:
            suspects = [
                replace(s, kind=RECEIVED)
                if is_collective(s.api) and s.kind not in NOT_A_KERNEL and s.kind not in OWN_COLLECTIVE
                else s
                for s in d.suspects
            ]
        out.append(replace(d, received=received, suspects=suspects))
    return out


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


def verdict_of(view: RankView, by_value: bool = False) -> RankVerdict:
    """The rank's first suspect in execution order (``by_value``: leaving out those its checksums alone
    name), and the collectives it had passed by then."""
    suspects = (s for s in view.diagnosis.suspects if not (by_value and bits_only(s)))
    suspect = min(suspects, key=lambda s: s.seq, default=None)
    if suspect is None:
        return RankVerdict(view, None)
    before = [seq for seq in _collective_seqs(view.rows) if seq < suspect.seq]
    return RankVerdict(view, suspect, len(before), suspect.seq - (before[-1] if before else 0))


def _order(v: RankVerdict) -> tuple[int, int, int, int]:
    step = v.view.step if v.view.step is not None else -1
    rank = v.view.rank if v.view.rank is not None else -1
    return (step, v.epoch, v.offset, rank)


def bits_only(suspect: Suspect) -> bool:
    """A call its checksums alone name (its output's bits differ from bit-equal inputs, its statistics
    agree): between two devices every fused kernel's bits differ, on one device it is nondeterminism;
    either way no value that diverges."""
    return suspect.kind == NONDETERMINISTIC


def _by_value(v: RankVerdict) -> RankVerdict:
    """The rank's first suspect whose values diverge, where its first one is named by its checksums
    alone; the verdict itself where it has no other."""
    if v.suspect is None or not bits_only(v.suspect):
        return v
    w = verdict_of(v.view, by_value=True)
    return w if w.suspect is not None else v


def cross_rank(views: Sequence[RankView]) -> CrossRank:
    """Each rank's first suspect and the first divergent rank (ranks on one side only are not here:
    the layout's notes name them). The first divergent rank is the first whose values diverge: bits
    that differ alone (a checksum) come first on every rank alike where the runs' kernels differ, and
    hid the rank whose values diverge behind rank0; they are the first divergent rank only where no
    value diverges."""
    verdicts = [verdict_of(v) for v in views]
    valued = [_by_value(v) for v in verdicts]
    own = [v for v in valued if v.suspect is not None and not v.received]
    by_value = [v for v in own if v.suspect is not None and not bits_only(v.suspect)]
    first = min(by_value or own, key=_order, default=None)
    bits: list[RankVerdict] = []
    if by_value and first is not None:
        bits = [
            v
            for v in verdicts
            if v.suspect is not None and bits_only(v.suspect) and _order(v) < _order(first)
        ]
    return CrossRank(verdicts, first, bits, valued)


# --- a collective's result across the ranks of one run ---------------------------------------------

Stats = tuple[float, ...]


def result_stats(rec: TensorRecord) -> Stats:
    """A recorded result's finite statistics (max, min, mean, l2norm), as ranks compare them."""
    return tuple(v for i in range(4) if (v := rec.stat(i)) is not None and math.isfinite(v))


def collective_results(records: Sequence[TensorRecord]) -> dict[tuple[str, str], Stats]:
    """Per (call, output entry) of the collectives that give every rank the same result: the recorded
    statistics of the result (one rank's records, any tool)."""
    out: dict[tuple[str, str], Stats] = {}
    for rec in records:
        e = rec.entry
        if (
            e is None
            or e.direction != FORWARD
            or e.kind not in OUTPUT_KINDS
            or not is_collective(e.api)
            or e.op not in SAME_ON_EVERY_RANK
            or rec.is_scalar
        ):
            continue
        stats = result_stats(rec)
        if stats:
            out[(e.call, rec.name)] = stats
    return out


def _off(a: Stats, b: Stats) -> float:
    """How far two results' statistics are apart (relative, the worst one; infinite when they differ in
    kind)."""
    if len(a) != len(b):
        return math.inf
    return max((abs(x - y) / max(abs(x), abs(y), 1e-30) for x, y in zip(a, b, strict=True)), default=0.0)


def _agree(a: Stats, b: Stats) -> bool:
    return _off(a, b) <= RANK_AGREEMENT


@dataclass(frozen=True, slots=True)
class Departure:
    """A collective whose result on one rank departs from its peers', which agree among themselves."""

    rank: int
    call: str  # e.g. ``Distributed_all_reduce_0_forward``
    entry: str  # the result's entry
    peers: tuple[int, ...]
    mine: Stats
    theirs: Stats
    by_bench: bool = False  # two ranks: the bench run told which one departs

    @property
    def evidence(self) -> Departs:
        return Departs(
            entry=self.entry, peers=self.peers, mine=self.mine, theirs=self.theirs, by_bench=self.by_bench
        )


def collective_departures(results: Mapping[int, Mapping[tuple[str, str], Stats]]) -> list[Departure]:
    """Per rank of one step of one run (its :func:`collective_results`): the results that depart from
    the agreeing majority of the ranks (at least two peers that agree, and more of them than depart).
    Each (call, entry) once per departing rank, in call order."""
    keys = Counter(k for per in results.values() for k in per)
    out: list[Departure] = []
    for key in keys:
        have = {r: per[key] for r, per in results.items() if key in per}
        if len(have) < 3:
            continue
        groups: list[list[int]] = []
        for r, stats in sorted(have.items()):
            group = next((g for g in groups if _agree(have[g[0]], stats)), None)
            group.append(r) if group is not None else groups.append([r])
        groups.sort(key=len, reverse=True)
        majority = groups[0]
        if len(majority) < 2 or len(majority) * 2 <= len(have):
            continue
        for group in groups[1:]:
            out += [Departure(r, key[0], key[1], tuple(majority), have[r], have[majority[0]]) for r in group]
    return out


#: Of two ranks whose results differ, the one that departs is off its bench run's result this many
#: times more than the other.
BENCH_TIE = 10.0


def bench_tie_departures(
    results: Mapping[int, Mapping[tuple[str, str], Stats]],
    bench: Mapping[int, Mapping[tuple[str, str], Stats]],
) -> list[Departure]:
    """Two ranks whose results of a collective differ, which no majority can settle: the bench run breaks
    the tie (``bench``: each rank's bench result of the same entries). The rank far off its own bench
    result, where the other matches its own, departs."""
    out: list[Departure] = []
    for key in dict.fromkeys(k for per in results.values() for k in per):  # in call order
        have = {r: per[key] for r, per in results.items() if key in per}
        if len(have) != 2:
            continue
        (a, sa), (b, sb) = sorted(have.items())
        if _agree(sa, sb) or key not in bench.get(a, {}) or key not in bench.get(b, {}):
            continue
        off = {a: _off(sa, bench[a][key]), b: _off(sb, bench[b][key])}
        for r, other in ((a, b), (b, a)):
            if off[r] > BENCH_TIE * off[other] and off[r] > RANK_AGREEMENT:
                out.append(Departure(r, key[0], key[1], (other,), have[r], have[other], by_bench=True))
    return out


def apply_departure(
    diagnosis: Diagnosis, rows: Sequence[Row], departure: Departure, step: int | None = None
) -> Diagnosis:
    """``diagnosis`` with the departing collective as a suspect of the rank's own (in execution order),
    in place of what the two dumps said of that call."""
    members = [r for r in rows if r.record.call == departure.call]
    old = next((s for s in diagnosis.suspects if s.call == departure.call), None)
    if old is not None:
        suspect = replace(old, kind=COLLECTIVE, evidence=departure.evidence)
    else:
        entry = members[0].record.entry if members else None
        judgement = Judgement(0.0, math.inf, 0.0, math.inf, COLLECTIVE, departure.entry)
        suspect = Suspect(
            call=departure.call,
            api=entry.api if entry else departure.call,
            direction=FORWARD,
            kind=COLLECTIVE,
            score=math.inf,
            evidence=departure.evidence,
            judgement=judgement,
            rows=members,
            stack=next((r.stack for r in members if r.stack is not None), None),
            seq=min((r.seq for r in members), default=0),
            step=step,
        )
    others = [s for s in diagnosis.suspects if s.call != departure.call]
    return replace(diagnosis, suspects=sorted([*others, suspect], key=lambda s: s.seq))


# --- a collective wrong on one rank alone, against the bench run --------------------------------------

#: Kinds that say a call's result differs from its bench run's where its inputs agree (or that it
#: receives another rank's error, which a later look at every rank may undo).
_INTRODUCES = frozenset({GROWTH, NAN_ORIGIN, ZEROS, LEAN, SUMS, RECEIVED})
#: Collectives called as ``op(output, input)`` whose two tensors differ in size by the group's size.
SIZED_BY_SHAPES = frozenset(
    {"reduce_scatter_tensor", "all_gather_into_tensor", "_reduce_scatter_base", "_all_gather_base"}
)


def group_size(rows: Sequence[Row], call: str) -> int | None:
    """A collective's group size from its two tensors' sizes (``reduce_scatter_tensor(out, in)``: in is
    the group's size times out), where its op says so; ``None`` where nothing recorded tells (the dump
    records no world size)."""
    sizes = [
        r.record.numel
        for r in rows
        if (e := r.record.entry) is not None
        and e.call == call
        and e.op in SIZED_BY_SHAPES
        and e.kind == INPUT
        and len(e.path) == 1
        and not r.record.is_scalar
    ]
    if len(sizes) != 2 or min(sizes) <= 0 or max(sizes) % min(sizes):
        return None
    return max(sizes) // min(sizes)


def _clean_through(rows: Sequence[Row], diagnosis: Diagnosis, call: str) -> bool:
    """Nothing differs on this rank up to the call, the call included: it was judged within rounding, and
    the rank's first suspect (if any) comes after it. (The call's own verdict alone would not do: its
    allowance grows with the error its inputs carry.)"""
    evidence = diagnosis.calls.get(call)
    j = evidence.judgement if evidence is not None else None
    if j is None or j.kind is not None or j.output_error > j.allowed:
        return False
    at = min((r.seq for r in rows if r.record.call == call), default=None)
    return at is not None and all(s.seq > at for s in diagnosis.suspects)


@dataclass(frozen=True, slots=True)
class Alone:
    """A collective whose inputs agree with the bench run's on every rank of its group and whose result
    differs on one rank only: that rank's own error, not one it receives."""

    rank: int
    call: str
    peers: tuple[int, ...]  # the other ranks, whose call matches their bench run's
    group: int | None  # the group's size from the call's shapes; None: not recorded


def wrong_on_one_rank(ranks: Mapping[int, tuple[Sequence[Row], Diagnosis]], dumped: int) -> list[Alone]:
    """Of one step's compared ranks (every rank the NPU run dumped there: ``dumped`` of them), each
    collective that introduces error on one rank from inputs that agree, where every other rank's same
    call agrees with its bench run. Only where the call's whole group is compared: a rank not dumped may
    have sent that rank alone a wrong part (reduce_scatter, all_to_all)."""
    out: list[Alone] = []
    for rank, (rows, diagnosis) in ranks.items():
        peers = tuple(r for r in sorted(ranks) if r != rank)
        s = min(diagnosis.suspects, key=lambda s: s.seq, default=None)  # nothing differs before it there
        if s is None or not is_collective(s.api) or s.kind not in _INTRODUCES or not peers:
            continue
        if s.judgement.input_error > s.judgement.allowed / MARGIN:  # its inputs carry error of their own
            continue
        if not all(_clean_through(*ranks[r], s.call) for r in peers):
            continue
        group = group_size(rows, s.call)
        if len(ranks) >= (group if group is not None else dumped):
            out.append(Alone(rank, s.call, peers, group))
    return out


def apply_alone(diagnosis: Diagnosis, alone: Alone) -> Diagnosis:
    """``diagnosis`` with the collective wrong on this rank alone as the rank's own suspect, its numbers
    kept."""
    suspects = [
        replace(
            s,
            kind=RANK_ALONE,
            evidence=OnOneRank(before=s.evidence, rank=alone.rank, peers=alone.peers, group=alone.group),
        )
        if s.call == alone.call
        else s
        for s in diagnosis.suspects
    ]
    return replace(diagnosis, suspects=suspects)
