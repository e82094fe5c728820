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


def check_collectives(pairs: Sequence[Compared], npu_dumps: Iterable[RankDump]) -> None:
    """Per step: a collective whose result on a compared rank departs from the other ranks' (of all the
    NPU run's ranks at that step, compared or not), or that is wrong on that rank alone against the bench
    run, becomes that rank's own suspect."""
    by_step: dict[int | None, dict[int, Compared]] = {}
    for p in pairs:
        if p.npu.rank is not None:
            by_step.setdefault(p.npu.step, {})[p.npu.rank] = p
    peers: dict[int | None, list[RankDump]] = {}
    for d in npu_dumps:
        peers.setdefault(d.step, []).append(d)
    for step, compared in by_step.items():
        _check_alone(compared, len(peers.get(step, ())))
        results = {
            rank: collective_results([r.npu for r in p.rows if r.npu is not None])
            for rank, p in compared.items()
        }
        if not any(results.values()):
            continue
        for d in peers.get(step, ()):
            if d.rank is not None and d.rank not in results:
                results[d.rank] = _npu_records(d)
        bench = {  # each compared rank's bench result of the same collectives, under the NPU's names
            rank: {
                key: result_stats(r.bench)
                for r in p.rows
                if r.npu is not None
                and r.bench is not None
                and (key := (r.npu.call, r.npu.name)) in results[rank]
            }
            for rank, p in compared.items()
        }
        for departure in [*collective_departures(results), *bench_tie_departures(results, bench)]:
            hit = compared.get(departure.rank)
            if hit is not None:
                apply_departure(hit.diagnosis, hit.rows, departure, step)


def _check_alone(compared: dict[int, Compared], dumped: int) -> None:
    """One step's collectives wrong on one compared rank alone, against the bench run (of ``dumped``
    NPU ranks there): each that rank's own suspect."""
    views = {rank: (p.rows, p.diagnosis) for rank, p in compared.items()}
    for alone in wrong_on_one_rank(views, dumped):
        apply_alone(compared[alone.rank].diagnosis, alone)


def link_to_earlier_steps(
    pairs: Sequence[Compared], all_pairs: Iterable[tuple[RankDump, RankDump]], earlier: Earlier
) -> None:
    """Parameters (or an optimizer's state) that differ on entry to a step: inherited when a step before
    (compared here, or else from its statistics) named a suspect of its own, and every step between
    inherited it."""
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
    link_steps(views, extra)
