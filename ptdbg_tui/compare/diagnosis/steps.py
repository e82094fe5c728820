"""Across the dumped steps of one rank: whether the parameters that differ on entry to a step are
where that step's divergence starts.

A step's parameters carry whatever the steps before did to them. When the step before named a
suspect of its own (a kernel, a random op …), parameters that differ on entry are its error,
inherited: the step's own suspects are what comes after (the replay finds a kernel that is still
wrong on inputs that already differ). When the step before named nothing, the parameters changed
between the two dumps — and when that step's gradients of them agree, the optimizer's update
between the steps is what made them differ — unless that update was an adaptive optimizer's that
turned gradient elements which are rounding noise on both sides into full steps: no fault then.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from ptdbg_tui.compare.diagnosis.diagnose import explain_failures, signature_of
from ptdbg_tui.compare.diagnosis.evidence import OnParameter, StillRandom
from ptdbg_tui.compare.diagnosis.findings import PARAMETERS, RANDOM, Diagnosis, Suspect, copied
from ptdbg_tui.compare.diagnosis.notes import Carried, StepNote
from ptdbg_tui.compare.diagnosis.propagation import ENTERS, GROWTH, LEAN, MARGIN, own_rounding
from ptdbg_tui.compare.model import ErrorMeasures, Row
from ptdbg_tui.compare.ops import in_place
from ptdbg_tui.formats.naming import BACKWARD, FORWARD, INPUT, OUTPUT, parse_name


@dataclass(frozen=True, slots=True)
class StepView:
    """One compared pair as the cross-step view needs it."""

    step: int | None
    rank: int | None
    rows: Sequence[Row]
    diagnosis: Diagnosis


def _own(diagnosis: Diagnosis) -> list[Suspect]:
    """The suspects of a step that are not parameters differing on entry."""
    return [s for s in diagnosis.suspects if s.kind != PARAMETERS]


#: Where a step's error came from, for the steps after it: its step, its first own suspect's call,
#: whether that step was seen from its statistics only, the suspect's kind (ENTERS: error entering
#: outside the dumped calls, no culprit there: in a job of several ranks, what another rank's error
#: looks like when the collective that brought it was not dumped, DDP's gradient all-reduce; "" for
#: rounding carried), and whether it entered right after calls only the bench run makes (the NPU
#: script lacks them: a micro-batch it skips).
Origin = tuple[int | None, str, bool, str, bool]


def _gradient_agrees(rows: Sequence[Row], parameter_entry: str) -> float | None:
    """The relative error of a parameter's gradient in a step (the backward output at the parameter's
    argument position), when it was compared and agrees within rounding; ``None`` otherwise."""
    found = _gradient_error(rows, parameter_entry)
    if found is None:
        return None
    rel, rounding = found
    return rel if rel <= MARGIN * rounding else None


def _gradient_error(rows: Sequence[Row], parameter_entry: str) -> tuple[float, float] | None:
    """The relative error of a parameter's gradient in a step (the backward output at the parameter's
    argument position) and its dtype's own rounding, when it was compared; ``None`` otherwise."""
    entry = parse_name(parameter_entry)
    if entry is None:
        return None
    for row in rows:
        e = row.record.entry
        if (
            e is None
            or e.direction != BACKWARD
            or e.kind != OUTPUT
            or e.api != entry.api
            or e.index != entry.index
            or e.path != entry.path
            or row.result is None
        ):
            continue
        errors = row.result.errors
        if errors is None or not math.isfinite(errors.rel):
            return None
        return errors.rel, own_rounding(errors)
    return None


def _entry_measures(rows: Sequence[Row], parameter_entry: str) -> ErrorMeasures | None:
    """The errors of the parameter row ``parameter_entry`` in the step ``rows`` hold."""
    row = next((r for r in rows if r.name == parameter_entry), None)
    return row.result.errors if row is not None and row.result is not None else None


def _entry_error(rows: Sequence[Row], parameter_entry: str) -> float | None:
    """The relative error of the parameter row ``parameter_entry`` in the step ``rows`` hold."""
    errors = _entry_measures(rows, parameter_entry)
    return errors.rel if errors is not None and math.isfinite(errors.rel) else None


def link_steps(
    views: Sequence[StepView], earlier: Mapping[tuple[int | None, int | None], StepView] | None = None
) -> list[Diagnosis]:
    """Each step's diagnosis (in the order of ``views``), new, its parameters-on-entry suspects adjusted
    by the steps before it (among ``views`` and ``earlier``, views of steps compared only for this, from
    their statistics); the views' diagnoses are left as they are, and again gives the same. A step whose
    parameters were themselves inherited passes on where they came from: step 2 after a clean step 1
    names step 0's culprit, not step 1."""
    views = [replace(v, diagnosis=copied(v.diagnosis)) for v in views]  # adjusted below, as they go
    context = {key: replace(v, diagnosis=copied(v.diagnosis)) for key, v in (earlier or {}).items()}
    by_key = {**context, **{(v.step, v.rank): v for v in views}}
    origin: dict[tuple[int | None, int | None], Origin] = {}
    rounded: set[tuple[int | None, int | None]] = set()  # steps whose parameters carry rounding only
    for key in sorted((k for k in by_key if k[0] is not None), key=lambda k: (str(k[1]), k[0])):
        view = by_key[key]
        before = [k for k in by_key if k[1] == view.rank and k[0] is not None and k[0] < (view.step or 0)]
        prev = by_key[max(before, key=lambda k: k[0] or 0)] if before else None
        came = origin.get((prev.step, prev.rank)) if prev is not None else None
        if prev is not None and key not in context:
            _still_random(view, prev)
        if came is not None and key not in context:
            _inherit_state(view, came)
            _after_different_calls(view, came)
        own = _own(view.diagnosis)
        found = [s for s in view.diagnosis.suspects if s.kind == PARAMETERS]
        # a step whose rows fail but that names nothing of its own carries the earlier error on (its
        # parameters differ below what names them: statistics' margin), to a step where they are named
        carries = not own and view.diagnosis.failing > 0
        if came is not None and (found or _inherited(view.diagnosis) or key in context or carries):
            # the error entered with the parameters: it is the earlier step's (a step seen from its
            # statistics only cannot tell its own error from what it inherited: it passes it on)
            origin[key] = came
        elif own:
            first = own[0]
            origin[key] = (
                view.step,
                first.call,
                key in context,
                first.kind,
                first.after_bench_only,
            )
        _not_dumped(view, found, prev is None and key not in context, rounded)
        if not found or prev is None:
            continue
        if came is not None:
            if key not in context:
                _inherit(view, came)
            continue
        prev_key = (prev.step, prev.rank)
        chain = [by_key[k] for k in sorted(before, key=lambda k: k[0] or 0)]
        if _not_inherited([*chain, view], found, prev_key in context, prev_key in rounded):
            rounded.add(key)
    return [v.diagnosis for v in views]


def _not_dumped(
    view: StepView, found: list[Suspect], first: bool, rounded: set[tuple[int | None, int | None]]
) -> None:
    """Parameters that differ on entry to the first step dumped (``first``), a later one, become a note,
    and what the steps after carry on (``rounded``): the steps
    that made them differ are not in the dump. There an adaptive optimizer turns the rounding noise of
    gradients that are zero in exact arithmetic (an attention's key bias) into steps of full size, so
    every healthy Adam run dumped from step 1 on named its qkv bias the culprit; a fault in those steps
    would make them differ too. Neither is this step's: the note says to dump the steps before it."""
    if not (found and first and (view.step or 0) > 0):
        return
    names = tuple(dict.fromkeys(s.evidence.parameter for s in found if isinstance(s.evidence, OnParameter)))
    _as_note(view, found, StepNote(kind=Carried.NOT_DUMPED, step=view.step, origin=None, names=names))
    rounded.add((view.step, view.rank))


def _not_inherited(
    chain: Sequence[StepView], found: list[Suspect], from_statistics: bool, prev_carried: bool
) -> bool:
    """After a step that named nothing (``chain``: the rank's steps up to this one, in order):
    parameters that differ on entry by what its gradients carried, or by what its adaptive update made of
    gradient noise (:func:`_amplified_noise`), become a note; of the others, those whose gradients agreed
    there say the update made them differ. Whether some were carried."""
    view, prev = chain[-1], chain[-2]
    noise = _amplified_noise(view, prev, found)
    if noise:
        calls = tuple(dict.fromkeys(call for _, call in noise))
        quiet = [s for s, _ in noise]
        _as_note(view, quiet, StepNote(kind=Carried.NOISE, step=view.step, origin=prev.step, names=calls))
        found = [s for s in found if all(s is not q for q in quiet)]
    carried = [s for s in found if _update_carried(chain, s.judgement.output, prev_carried)]
    if carried:
        note = StepNote(
            kind=Carried.ROUNDING,
            step=view.step,
            origin=prev.step,
            from_statistics=from_statistics,
            gradient=_worst_gradient(prev, carried),
        )
        _as_note(view, carried, note)
    for s in found:
        if s in carried:
            continue
        agree = _gradient_agrees(prev.rows, s.judgement.output)
        evidence = s.evidence
        if agree is not None and isinstance(evidence, OnParameter) and evidence.agreed is None:
            s.evidence = replace(evidence, agreed=(prev.step, agree, view.step))
    return bool(carried or noise)


def _amplified_noise(view: StepView, prev: StepView, found: Sequence[Suspect]) -> list[tuple[Suspect, str]]:
    """Of the parameters that differ on entry to a step after a step that named nothing, those that an
    update of that step left as they are (the NPU records of the two tensors are alike) where its
    quotient amplified rounding noise (:attr:`Diagnosis.amplified`): each with that update's call."""
    if prev.diagnosis.suspects or not prev.diagnosis.amplified:
        return []
    out: list[tuple[Suspect, str]] = []
    for s in found:
        row = next((r for r in view.rows if r.name == s.judgement.output), None)
        signature = signature_of(row.npu) if row is not None else None
        call = prev.diagnosis.amplified.get(signature) if signature is not None else None
        if call is not None:
            out.append((s, call))
    return out


def _still_random(view: StepView, prev: StepView) -> None:
    """A random op whose draws differed at the step before, compared here from statistics with a suspect
    after it: statistics cannot show that two masks or draws differ once its inputs carry some error
    (an innocent linear after a dropout kept on was the culprit at step 2, ×3.6). Its generators have
    not met again since: it is a suspect of this step too, before the calls that take its draws."""
    named = {s.call for s in view.diagnosis.suspects}
    for random in (s for s in prev.diagnosis.suspects if s.kind == RANDOM and s.call not in named):
        rows = [r for r in view.rows if r.record.call == random.call]
        evidence = view.diagnosis.calls.get(random.call)
        if (
            not rows
            or evidence is None
            or evidence.judgement is None
            or not all(_from_stats(r) for r in rows)
        ):
            continue
        seq = min(r.seq for r in rows)
        later = [i for i, s in enumerate(view.diagnosis.suspects) if s.seq > seq and not s.confirmed]
        if not later:
            continue
        judgement = replace(evidence.judgement, kind=RANDOM)
        found = Suspect(
            call=random.call,
            api=random.api,
            direction=random.direction,
            kind=RANDOM,
            score=judgement.score,
            evidence=StillRandom(step=prev.step, judgement=evidence.judgement),
            judgement=judgement,
            rows=rows,
            stack=random.stack,
            seq=seq,
            step=view.step,
        )
        view.diagnosis.suspects.insert(later[0], found)


def _from_stats(row: Row) -> bool:
    """The row's error was estimated from statistics (or it was not compared)."""
    errors = row.result.errors if row.result is not None else None
    return errors is None or errors.from_stats


def _update_carried(chain: Sequence[StepView], name: str, prev_carried: bool) -> bool:
    """A parameter that differs on entry to a step after a step that named nothing (no suspect of any
    kind: parameters that differed there beyond what they carried are still a fault), by no more than
    ``MARGIN`` times what its gradient (or the parameter itself) differed by there: the update
    ``p - lr * g`` moves a parameter by less than its size, so it passes on at most the gradient's
    relative error — rounding that step judged honest (a run under bf16 autocast on one side only, whose
    fp32 parameters take bf16 gradients). Only where the parameter agreed on entry to that step, or
    carried that step's own rounding (``prev_carried``): otherwise its gradients there differed by what
    it did, which statistics may not show (AdamW's decay on one side, 1e-4 a step). A parameter whose
    gradient agreed is not carried: the update itself made it differ. ``chain``: the rank's steps up to
    this one, in order; the parameter ``name`` carried rounding on entry to the step before where that
    step named no parameter (seen from its statistics, which hide 1e-4) but it passes this test there
    too."""
    view, prev = chain[-1], chain[-2]
    err = _entry_error(view.rows, name)
    if err is None or prev.diagnosis.suspects:  # the step before named something: not its rounding
        return False
    entry = _entry_measures(prev.rows, name)
    agreed = entry is not None and entry.rel <= MARGIN * own_rounding(entry)
    carried = agreed or prev_carried or (len(chain) > 2 and _update_carried(chain[:-1], name, False))
    if not carried:  # its gradients differed by what its parameters did, unseen there
        return False
    found = _gradient_error(prev.rows, name)
    gradient = found[0] if found is not None and found[0] > MARGIN * found[1] else 0.0
    before = entry.rel if entry is not None and math.isfinite(entry.rel) else 0.0
    return 0 < err <= MARGIN * max(gradient, before)


def _worst_gradient(prev: StepView, carried: Sequence[Suspect]) -> float | None:
    """The largest relative error of the carried parameters' gradients at the step before (None: not
    compared)."""
    errors = [f[0] for s in carried if (f := _gradient_error(prev.rows, s.judgement.output)) is not None]
    return max(errors) if errors else None


def _inherited(d: Diagnosis) -> bool:
    """The step was linked before: its parameters' note says whose error they carry."""
    return any(isinstance(n, StepNote) and n.kind is Carried.INHERITED for n in d.notes)


def _inherit(view: StepView, came: Origin) -> None:
    """The step's parameters-on-entry suspects become a note: their error is the earlier culprit's."""
    found = [s for s in view.diagnosis.suspects if s.kind == PARAMETERS]
    _as_note(view, found, _sourced(Carried.INHERITED, view, came))
    view.diagnosis.inherited = came[3]


def _carried_state(view: StepView, suspect: Suspect) -> bool:
    """Error that enters at what an in-place call updates, after the step's backward began: an
    optimizer's state (Adam's moments, a momentum buffer), which it carries from step to step as it
    does the parameters. Not a tensor that a call only the bench run makes wrote in this step (AdamW's
    decay that the NPU script lacks, made again at every step): that is this step's own."""
    if suspect.kind != ENTERS or suspect.direction != FORWARD or suspect.written_by:
        return False
    row = next((r for r in suspect.rows if r.name == suspect.judgement.output), None)
    entry = row.record.entry if row is not None else None
    if entry is None or entry.kind != INPUT or entry.path[:1] != (0,) or not in_place(entry.op):
        return False
    entries = ((r.seq, r.record.entry) for r in view.rows)
    first = min((seq for seq, e in entries if e is not None and e.direction == BACKWARD), default=None)
    return first is not None and suspect.seq > first


def inherits(view: StepView) -> bool:
    """Whether the step's verdict may be an earlier step's error: parameters that differ on entry, or
    error entering at an optimizer's state (Adam's moments after a step whose update was still equal
    on both sides: its bias correction cancels ``beta1`` at the first step). Then the steps before it
    are needed, compared from their statistics when not compared here."""
    return any(s.kind == PARAMETERS or _carried_state(view, s) for s in view.diagnosis.suspects)


def _inherit_state(view: StepView, came: Origin) -> None:
    """After a step with a culprit, error entering at an optimizer's state is that culprit's too: a note,
    not a suspect of this step."""
    carried = [s for s in view.diagnosis.suspects if _carried_state(view, s)]
    if carried:
        tensors = tuple(dict.fromkeys(s.judgement.output for s in carried))
        _as_note(view, carried, _sourced(Carried.STATE_INHERITED, view, came, names=tensors))
        view.diagnosis.inherited = came[3]


def _sourced(
    kind: Carried,
    view: StepView,
    came: Origin,
    names: tuple[str, ...] = (),
    scored: tuple[tuple[str, float], ...] = (),
) -> StepNote:
    """The note of ``kind`` on ``view``'s step, naming the earlier step's culprit that ``came`` says."""
    step, call, from_statistics, kind_of, bench_only = came
    entered = kind_of == ENTERS  # error entering outside the dumped calls is no culprit
    return StepNote(
        kind=kind,
        step=view.step,
        origin=step,
        from_statistics=from_statistics,
        call=call,
        entered=entered,
        bench_only=bench_only and entered,
        names=names,
        scored=scored,
    )


def _as_note(view: StepView, carried: list[Suspect], note: StepNote) -> None:
    """A step's ``carried`` suspects become a ``note``: their error is an earlier step's."""
    d = view.diagnosis
    gone = {id(s) for s in carried}
    d.suspects = [s for s in d.suspects if id(s) not in gone]
    if note not in d.notes:
        d.notes.append(note)
    if not d.suspects:
        d.unexplained = explain_failures(view.rows, d)


def _after_different_calls(view: StepView, came: Origin) -> None:
    """After a step whose error entered right after calls only the bench run makes (the NPU script skips
    a micro-batch), the runs no longer train the same model: the parameters differ by what those calls
    did, far beyond rounding, and statistics estimate a call's error too coarsely to tell its own from
    that (an innocent linear backward was the culprit at step 2, ×1.2). A call named from statistics
    for growing the error, unless a replay confirmed it, becomes a note; what says where the runs
    differ (error entering, calls only one run makes, arguments) stays."""
    if not came[4]:
        return
    blurred = [
        s
        for s in view.diagnosis.suspects
        if s.kind in (GROWTH, LEAN) and not s.confirmed and all(_from_stats(r) for r in s.rows)
    ]
    if blurred:
        scored = tuple((s.call, s.score) for s in blurred)
        _as_note(view, blurred, _sourced(Carried.NOT_TOLD_APART, view, came, scored=scored))
