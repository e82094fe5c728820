"""A pair's diagnosis after replay: a suspect whose kernel the replay confirms wrong on its own inputs
ranks first and says so, a refuted one drops (both sides compute right on their inputs: its error is
inherited), and a call the two dumps could not blame but whose kernel the replay proves wrong becomes a
suspect of its own (where the inputs already differ, at a later step).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

from ptdbg_tui.compare.diagnosis.evidence import TwoDumps
from ptdbg_tui.compare.diagnosis.findings import NOT_A_KERNEL, REPLAYED, Diagnosis, ReplayRun, Suspect, copied
from ptdbg_tui.compare.diagnosis.propagation import Judgement
from ptdbg_tui.compare.diagnosis.replay_outcome import CallReplay, ReplayOutcome
from ptdbg_tui.compare.model import Row


def _new_suspect(diagnosis: Diagnosis, rows: Sequence[Row], replay: CallReplay, step: int | None) -> Suspect:
    members = [r for r in rows if r.record.call == replay.call]
    entry = members[0].record.entry if members else None
    forward = entry.forward_call if entry is not None else replay.call
    stack = next((r.stack for r in rows if r.record.call == forward and r.stack is not None), None)
    evidence = diagnosis.calls.get(replay.call)
    judgement = (
        evidence.judgement
        if evidence is not None and evidence.judgement is not None
        else Judgement(0.0, 0.0, 0.0, math.inf, REPLAYED, replay.call)
    )
    two_dumps = TwoDumps(judgement=evidence.judgement, why_not=evidence.why_not) if evidence else TwoDumps()
    return Suspect(
        call=replay.call,
        api=entry.api if entry else replay.call,
        direction=entry.direction if entry else "forward",
        kind=REPLAYED,
        score=math.inf,
        evidence=two_dumps,
        judgement=judgement,
        rows=members,
        stack=stack,
        seq=min((r.seq for r in members), default=0),
        step=step,
        replay=replay,
    )


def apply_replays(
    diagnosis: Diagnosis, rows: Sequence[Row], replays: Mapping[str, CallReplay], step: int | None = None
) -> Diagnosis:
    """``diagnosis`` with the replays of a pair's calls folded in, ``diagnosis`` untouched: its suspects
    and notes are the copy's own."""
    kept: list[Suspect] = []
    named = set()
    refuted: list[str] = []
    for s in diagnosis.suspects:
        r = replays.get(s.call)
        if r is None or s.kind in NOT_A_KERNEL:
            # not a finding about its kernel ("error enters before it", parameters that differ): it
            # stands whatever the replay says, and a kernel confirmed wrong there is a suspect of its own
            kept.append(replace(s))
            continue
        named.add(s.call)
        if r.outcome is not ReplayOutcome.REFUTED:
            kept.append(replace(s, replay=r))
        else:
            refuted.append(s.call)
    for call, r in replays.items():
        if r.confirmed and call not in named:
            kept.append(_new_suspect(diagnosis, rows, r, step))
    kept.sort(key=lambda s: (0, s.seq) if s.confirmed else (1, 0))  # confirmed ones first, in execution order
    return replace(
        diagnosis,
        suspects=kept,
        notes=list(diagnosis.notes),
        replays=dict(replays),
        replay=ReplayRun(replayed=len(replays), refuted=tuple(refuted)),
    )


def with_replays(
    diagnosis: Diagnosis,
    rows: Sequence[Row],
    replays: Mapping[str, CallReplay],
    step: int | None = None,
    chosen: Sequence[str] = (),
) -> Diagnosis:
    """A copy of ``diagnosis`` (a pair's own) with the replays folded in, ``diagnosis`` untouched: the
    batch compare and the live engine keep a pair's two-dump diagnosis and fold the replays done so far
    into each new copy, from which the pairs around it make their own (:mod:`ptdbg_tui.engine.pipeline`).
    A call ``chosen`` for a replay that its budget did not reach says so (its verdict stands on the two
    dumps alone)."""
    folded = apply_replays(diagnosis, rows, replays, step) if replays else copied(diagnosis)
    missed = set(chosen) - set(replays)
    if not missed:
        return folded
    unreached = [
        replace(s, unreached=True)
        if s.call in missed and s.replay is None and s.kind not in NOT_A_KERNEL
        else s
        for s in folded.suspects
    ]
    ran = folded.replay if replays and folded.replay is not None else ReplayRun()
    return replace(folded, suspects=unreached, replay=replace(ran, missed=len(missed)))
