"""The comparison's stages, composed once: the batch compare (:mod:`~ptdbg_tui.engine.batch`, here or on
a Dask cluster) and the live engine (:mod:`~ptdbg_tui.engine.live`, on what it has read so far) run the
same functions, each taking values and returning new ones.

A pair: its records matched into rows, the NPU call's stack on each (:func:`match_pair`); the rows settled
without data, the others compared by the workers (the callers: all at once, or as they arrive); then its
own diagnosis (:func:`judge_pair`: the two dumps' suspects, the keyword arguments the call sidecars
record, the runs' manifests, what differs between the runs before any kernel). A replay folds into that
diagnosis (:mod:`~ptdbg_tui.compare.replay.replayed`).

A job: the pairs' own diagnoses, then the other ranks' collectives at each step, then the steps before
each pair, then the verdict across ranks (:func:`judge_job`). Each pair's own diagnosis is left as it is:
a replay folds into it, and the job is judged again from it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

from ptdbg_tui.compare.diagnosis.diagnose import diagnose
from ptdbg_tui.compare.diagnosis.findings import Diagnosis, copied
from ptdbg_tui.compare.diagnosis.keywords import keywords_of, with_keywords
from ptdbg_tui.compare.diagnosis.ranks import CrossRank, RankView, cross_rank, mark_received
from ptdbg_tui.compare.diagnosis.runs_differ import Chains, with_manifests, with_runs_differ
from ptdbg_tui.compare.matching.pairing import Matching, attach_stacks, choose_match, model_rows
from ptdbg_tui.compare.model import Row
from ptdbg_tui.engine.context import Compared, Earlier, check_collectives, link_to_earlier_steps
from ptdbg_tui.formats.calls import CallSpec
from ptdbg_tui.formats.dialects import Dialect
from ptdbg_tui.formats.layout import RankDump
from ptdbg_tui.formats.manifest import manifest_of
from ptdbg_tui.formats.records import StackRecord, TensorRecord

# --- a pair -----------------------------------------------------------------------------------------


class SideRecords(NamedTuple):
    """One side's records as far as they are read, as matching needs them."""

    tensors: Sequence[TensorRecord]
    stacks: Mapping[str, StackRecord]  # by call
    dialect: Dialect  # how the tool that wrote it differs


def match_pair(npu: SideRecords, bench: SideRecords, mode: str) -> Matching:
    """The pair's rows, matched in ``mode`` (``auto``: the mode that fits, said in the matching's note),
    each with its NPU call's stack; no results yet."""
    matching = choose_match(
        npu.tensors, bench.tensors, mode, (npu.dialect, bench.dialect), (npu.stacks, bench.stacks)
    )
    attach_stacks(matching.rows, npu.stacks)
    return matching


#: A side's call sidecar by call key, read when called (OSError: there but unreadable).
SpecsOf = Callable[[], Mapping[str, CallSpec]]


@dataclass(frozen=True, slots=True)
class Sidecars:
    """What a pair's diagnosis reads besides its rows, each only where a stage needs it: the sides' dumps
    (their manifests, their tools), call sidecars and module chains. No bench dump: the two dumps'
    suspects alone."""

    npu: RankDump
    bench: RankDump | None
    npu_specs: SpecsOf
    bench_specs: SpecsOf
    chains: Callable[[], Chains]  # each side's module chains (None: no module structure)


def judge_pair(rows: Sequence[Row], sidecars: Sidecars) -> Diagnosis:
    """A pair's own diagnosis: the two dumps' suspects, then the keyword arguments the call sidecars
    record (read only where a suspect blames a kernel: a pkl records positional arguments only), the runs'
    manifests, and what differs between the runs before any kernel (their models, as two dumps of one tool
    show them; data; hyperparameters)."""
    modelled = model_rows(rows)
    npu, bench = sidecars.npu, sidecars.bench
    d = diagnose(modelled, npu.step, keywords=keywords_of(sidecars.npu_specs))
    if bench is None:
        return d
    d = with_keywords(d, sidecars.npu_specs, sidecars.bench_specs, modelled)
    d = with_manifests(d, partial(manifest_of, npu), partial(manifest_of, bench))
    same_tool = npu.format == bench.format  # module trees of two tools differ in form
    return with_runs_differ(
        d,
        modelled,
        sidecars.chains if same_tool else lambda: (None, None),
        lambda: (sidecars.npu_specs(), sidecars.bench_specs()),
    )


# --- a job ------------------------------------------------------------------------------------------


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
    context: Context | None,
    ranked: Callable[[int], bool] = lambda i: True,
    fault: Callable[[Exception], None] | None = None,
) -> Judged:
    """Collectives → steps → ranks, from each pair's own diagnosis (``context`` ``None``: the pairs alone).
    The first divergent rank is found among the pairs ``ranked`` (by index); with several ranks each of
    those learns what it receives. ``fault``: where a failure of the collectives' or the steps' stage is
    told, the pairs' verdicts standing as the stages before left them (else it raises)."""
    diagnoses = [copied(p.diagnosis) for p in pairs]  # what the caller adds to them stays off the pairs'
    if context is not None:
        try:
            if context.peers is not None:
                diagnoses = check_collectives(_with(pairs, diagnoses), context.peers)
            diagnoses = link_to_earlier_steps(_with(pairs, diagnoses), context.pairs, context.earlier)
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
