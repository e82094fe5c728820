"""What a compared pair's verdict needs from the pairs around it: the other ranks' collective results
at its step, and the step before it on its rank (:mod:`~ptdbg_tui.compare.diagnosis.ranks`,
:mod:`~ptdbg_tui.compare.diagnosis.steps`).

A user who compares one step of one rank (``--step 2 --rank 3``) still gets both: the peers' records
are read (no tensors), and the step before is compared from its statistics, only when the verdict
needs it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

from ptdbg_tui.compare.diagnosis.findings import Diagnosis
from ptdbg_tui.compare.diagnosis.ranks import (
    Departure,
    Stats,
    apply_alone,
    apply_departure,
    bench_tie_departures,
    collective_departures,
    collective_results,
    result_stats,
    wrong_on_one_rank,
)
from ptdbg_tui.compare.diagnosis.steps import StepView, inherits, link_steps
from ptdbg_tui.compare.model import Row
from ptdbg_tui.formats.layout import RankDump
from ptdbg_tui.formats.reader import read_dump

log = logging.getLogger(__name__)


class Compared(NamedTuple):
    """A compared pair, as the context needs it (batch outcomes and live pairs alike)."""

    npu: RankDump
    rows: Sequence[Row]
    diagnosis: Diagnosis


#: ``earlier(npu, bench)``: a pair's rows and diagnosis from its statistics, or ``None``.
Earlier = Callable[[RankDump, RankDump], tuple[Sequence[Row], Diagnosis] | None]


def _npu_records(dump: RankDump) -> dict[tuple[str, str], Stats]:
    try:
        return collective_results(read_dump(dump).tensors)
    except Exception:  # a peer that cannot be read leaves the check to the others
        log.debug("collectives of %s not read", dump.records, exc_info=True)
        return {}


def check_collectives(pairs: Sequence[Compared], npu_dumps: Iterable[RankDump]) -> list[Diagnosis]:
    """Each pair's diagnosis (in the order of ``pairs``), new where it changed: per step, a collective
    whose result on a compared rank departs from the other ranks' (of all the NPU run's ranks at that
    step, compared or not), or that is wrong on that rank alone against the bench run, becomes that
    rank's own suspect."""
    out = [p.diagnosis for p in pairs]
    by_step: dict[int | None, dict[int, int]] = {}  # the index of each step's compared rank
    for i, p in enumerate(pairs):
        if p.npu.rank is not None:
            by_step.setdefault(p.npu.step, {})[p.npu.rank] = i
    peers: dict[int | None, list[RankDump]] = {}
    for d in npu_dumps:
        peers.setdefault(d.step, []).append(d)
    for step, compared in by_step.items():
        views = {rank: (pairs[i].rows, out[i]) for rank, i in compared.items()}
        for alone in wrong_on_one_rank(views, len(peers.get(step, ()))):
            i = compared[alone.rank]
            out[i] = apply_alone(out[i], alone)
        for i, departure in _departures(pairs, compared, peers.get(step, ())):
            out[i] = apply_departure(out[i], pairs[i].rows, departure, step)
    return out


def _departures(
    pairs: Sequence[Compared], compared: dict[int, int], peers: Iterable[RankDump]
) -> list[tuple[int, Departure]]:
    """One step's collectives whose result departs from the other ranks' (``compared``: the index in
    ``pairs`` of each compared rank; ``peers``: the NPU dumps of the step), each with the index of its
    compared rank."""
    results = {
        rank: collective_results([r.npu for r in pairs[i].rows if r.npu is not None])
        for rank, i in compared.items()
    }
    if not any(results.values()):
        return []
    for d in peers:
        if d.rank is not None and d.rank not in results:
            results[d.rank] = _npu_records(d)
    bench = {  # each compared rank's bench result of the same collectives, under the NPU's names
        rank: {
            key: result_stats(r.bench)
            for r in pairs[i].rows
            if r.npu is not None
            and r.bench is not None
            and (key := (r.npu.call, r.npu.name)) in results[rank]
        }
        for rank, i in compared.items()
    }
    departures = [*collective_departures(results), *bench_tie_departures(results, bench)]
    return [(compared[d.rank], d) for d in departures if d.rank in compared]


def link_to_earlier_steps(
    pairs: Sequence[Compared], all_pairs: Iterable[tuple[RankDump, RankDump]], earlier: Earlier
) -> list[Diagnosis]:
    """Each pair's diagnosis (in the order of ``pairs``), new: parameters (or an optimizer's state) that
    differ on entry to a step are inherited when a step before (compared here, or else from its
    statistics) named a suspect of its own, and every step between inherited it."""
    views = [StepView(p.npu.step, p.npu.rank, p.rows, p.diagnosis) for p in pairs]
    have = {(v.step, v.rank) for v in views}
    extra: dict[tuple[int | None, int | None], StepView] = {}
    pairs_by_key = {(n.step, n.rank): (n, b) for n, b in all_pairs}
    for v in views:
        if v.step is None or not inherits(v):
            continue
        before = [k for k in pairs_by_key if k[1] == v.rank and k[0] is not None and k[0] < v.step]
        for key in before:  # every step before: one whose parameters were inherited passes them on
            if key in have or key in extra:
                continue
            got = earlier(*pairs_by_key[key])
            if got is not None:
                extra[key] = StepView(key[0], key[1], got[0], got[1])
    return link_steps(views, extra)
