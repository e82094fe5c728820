"""The comparison's stages, composed once: the batch compare (:mod:`~ptdbg_tui.engine.batch`, here or on
a Dask cluster) and the live engine (:mod:`~ptdbg_tui.engine.live`, on what it has read so far) run the
same functions, each taking values and returning new ones.

A job: the pairs' own diagnoses, then the other ranks' collectives at each step, then the steps before
each pair, then the verdict across ranks (:func:`judge_job`). Each pair's own diagnosis is left as it is:
a replay folds into it, and the job is judged again from it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ptdbg_tui.compare.diagnosis.findings import Diagnosis, copied
from ptdbg_tui.compare.diagnosis.ranks import CrossRank, RankView, cross_rank, mark_received
from ptdbg_tui.engine.context import Compared, Earlier, check_collectives, link_to_earlier_steps
from ptdbg_tui.formats.layout import RankDump


@dataclass(frozen=True, slots=True)
class Context:
    """What a job's verdict reads besides its compared pairs."""

    #: the NPU dumps whose collectives the compared ranks' are checked against (compared or not, by
    #: step); ``None``: no check
    peers: Sequence[RankDump] | None
    pairs: Sequence[tuple[RankDump, RankDump]]  # every pair of any step and rank: the steps before
    earlier: Earlier  # a step before that is not compared here, from its statistics


@dataclass(frozen=True, slots=True)
class Judged:
    """A job's diagnoses (in the order of its pairs) and the verdict across the ranks it was given."""

    diagnoses: list[Diagnosis]
    ranks: CrossRank
    several: bool  # the ranked pairs are of more than one rank: each was told what it receives


def judge_job(
    pairs: Sequence[Compared],
    around: Context | None,
    ranked: Callable[[int], bool] = lambda i: True,
    fault: Callable[[Exception], None] | None = None,
) -> Judged:
    """Collectives → steps → ranks, from each pair's own diagnosis (``around`` ``None``: the pairs alone).
    The first divergent rank is found among the pairs ``ranked`` (by index); with several ranks each of
    those learns what it receives. ``fault``: where a failure of the collectives' or the steps' stage is
    told, the pairs' verdicts standing as the stages before left them (else it raises)."""
    diagnoses = [copied(p.diagnosis) for p in pairs]  # what the caller adds to them stays off the pairs'
    if around is not None:
        try:
            if around.peers is not None:
                diagnoses = check_collectives(_with(pairs, diagnoses), around.peers)
            diagnoses = link_to_earlier_steps(_with(pairs, diagnoses), around.pairs, around.earlier)
        except Exception as e:
            if fault is None:
                raise
            fault(e)
    at = [i for i in range(len(pairs)) if ranked(i)]
    views = [
        RankView(pairs[i].npu.label, pairs[i].npu.step, pairs[i].npu.rank, pairs[i].rows, diagnoses[i])
        for i in at
    ]
    ranks = cross_rank(views)
    several = len({v.rank for v in views}) > 1
    if several:
        for i, d in zip(at, mark_received(ranks), strict=True):
            diagnoses[i] = d
    return Judged(diagnoses, ranks, several)


def _with(pairs: Sequence[Compared], diagnoses: Sequence[Diagnosis]) -> list[Compared]:
    return [p._replace(diagnosis=d) for p, d in zip(pairs, diagnoses, strict=True)]
