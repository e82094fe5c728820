"""Keyword arguments that differ between the runs, from the two call sidecars (this project's dumper).

A pkl records a call's positional arguments only, so the two dumps alone see a call whose keyword
differs (``F.gelu(x, approximate="tanh")`` against ``approximate="none"``: a script that differs) as a
call that introduces error. Where both sides' sidecars hold the call, a suspect that blames its kernel
is the *different arguments* finding instead, as a non-tensor positional argument that differs is.

The sidecar also names the tensors the pkl does not record: a call that takes a complex tensor
(``torch.view_as_real(c)``, ``c.abs()``) shows no input and no input error, so error that came in with
that tensor read as the call's own. Such a suspect is error entering with the undumped input instead.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ptdbg_tui.compare.diagnosis.diagnose import Keywords, is_device, suspect_order, values_differ
from ptdbg_tui.compare.diagnosis.evidence import Argument, Arguments, Undumped
from ptdbg_tui.compare.diagnosis.findings import ARGUMENTS, NOT_A_KERNEL, Diagnosis, Suspect
from ptdbg_tui.compare.diagnosis.notes import Autocast, Sidecar, Unread
from ptdbg_tui.compare.diagnosis.propagation import ENTERS, Judgement
from ptdbg_tui.compare.model import Row, rows_by_call, side_call
from ptdbg_tui.formats.calls import CallSpec, Device, Dtype, Opaque, TensorArg, TorchConst
from ptdbg_tui.formats.files import reason
from ptdbg_tui.formats.naming import FORWARD, call_key

#: Sidecar values that are no argument to compare: tensors (their data is compared), devices (they
#: differ by design), objects recorded by their type only.
_NOT_COMPARED = (TensorArg, Device, Opaque)


#: Dtypes no dump records a tensor of (the pkl's statistics are real numbers), by their name's start.
_UNDUMPED_DTYPES = ("torch.complex",)


#: A reducing collective's position of ``op`` (``torch.distributed.all_reduce(tensor, op=SUM, …)``):
#: the one keyword whose default is known, so that a side that leaves it out is compared too.
_OP_AT = {"all_reduce": 1, "reduce": 2, "reduce_scatter": 2, "reduce_scatter_tensor": 2}
_SUM = "torch.distributed.ReduceOp.SUM"


def _reduction(spec: CallSpec) -> str | None:
    """A reducing collective's ``op`` by name, by keyword, position or its default (SUM); None for any
    other call."""
    space, _, fn = spec.fn.rpartition(".")
    at = _OP_AT.get(fn) if space == "torch.distributed" else None
    if at is None:
        return None
    op = spec.kwargs.get("op", spec.args[at] if len(spec.args) > at else None)
    return op.name if isinstance(op, TorchConst) else _SUM if op is None else None


def keywords_differ(npu: CallSpec, bench: CallSpec) -> tuple[Argument, ...]:
    """The keyword arguments both sides pass, differently (said "approximate: 'tanh' against 'none'");
    empty when they agree (a keyword one side leaves out is not compared: its default may be
    the other's value). Also the named torch constants passed by position, which the pkl does not
    record (it compares numbers, and tensors, itself), and a reducing collective's ``op`` however it
    is passed, its default SUM included (one rank passing ``op=MAX`` where its bench run passes none)."""
    out = []
    ops = _reduction(npu), _reduction(bench)
    if None not in ops and ops[0] != ops[1]:
        out.append(Argument(place="op", npu=f"{ops[0]}", bench=f"{ops[1]}"))
    at = _OP_AT.get(npu.fn.rpartition(".")[2]) if None not in ops else None
    for key, a in npu.kwargs.items():
        if key not in bench.kwargs or (at is not None and key == "op"):
            continue
        b = bench.kwargs[key]
        if _compared(a) and _compared(b) and (type(a) is not type(b) or values_differ(a, b)):
            out.append(Argument(place=key, npu=_shown(a), bench=_shown(b)))
    for i, (a, b) in enumerate(zip(npu.args, bench.args, strict=False)):
        if i == at:
            continue
        if isinstance(a, TorchConst) and isinstance(b, TorchConst) and a.name != b.name:
            out.append(Argument(place=f"argument {i}", npu=a.name, bench=b.name))
    return tuple(out)


def _shown(value: Any) -> str:
    """A sidecar value as the evidence shows it: a named torch value by its name."""
    return value.name if isinstance(value, (TorchConst, Dtype)) else repr(value)


def _compared(value: Any) -> bool:
    if isinstance(value, (list, tuple)):
        return all(_compared(v) for v in value)
    return not isinstance(value, _NOT_COMPARED) and not is_device(value)


def keywords_of(specs: Callable[[], Mapping[str, CallSpec]]) -> Keywords:
    """A call's keyword arguments by its name, from a side's call sidecar, read when first asked (most
    pairs never ask); a sidecar that cannot be read answers as none at all (``with_keywords`` says so)."""
    read: list[Mapping[str, CallSpec]] = []

    def of(call: str) -> Mapping[str, object] | None:
        if not read:
            try:
                read.append(specs())
            except OSError:
                read.append({})
        spec = read[0].get(call_key(call))
        return spec.kwargs if spec is not None else None

    return of


def with_keywords(
    diagnosis: Diagnosis,
    npu: Callable[[], Mapping[str, CallSpec]],
    bench: Callable[[], Mapping[str, CallSpec]],
    rows: Sequence[Row] = (),
) -> Diagnosis:
    """``diagnosis`` (new where it changed) with each suspect that blames a kernel, of a call the runs
    pass different keyword arguments, become that finding. ``npu``, ``bench``: each side's sidecar
    specs by call key, read only when a suspect blames a kernel, or (with the pair's ``rows``) when the
    runs differ and nothing blames one: then every call whose keywords differ is that finding (at a
    later step the parameters an earlier step's ``add_(grad, alpha=-lr)`` left different hide the same
    learning rate's effect now). A sidecar that cannot be read (OSError) leaves the two dumps' verdict
    and says so in a note: the user must know the check was not done."""
    kernels = [i for i, s in enumerate(diagnosis.suspects) if s.kind not in NOT_A_KERNEL]
    unblamed = not kernels and bool(rows) and bool(diagnosis.suspects or diagnosis.failing)
    if not kernels and not unblamed:
        return diagnosis
    try:
        specs = npu(), bench()
    except OSError as e:
        return replace(diagnosis, notes=[*diagnosis.notes, Unread(sidecar=Sidecar.CALLS, reason=reason(e))])
    if unblamed:
        return _unblamed(diagnosis, specs, rows)
    suspects = list(diagnosis.suspects)
    changed = False
    for i in kernels:
        s = suspects[i]
        if differs := _differs(specs, s.rows, s.call):
            suspects[i] = _arguments(s, differs)
            changed = True
        elif undumped := _undumped_input(specs[0].get(call_key(s.call))):
            suspects[i] = _entering(s, undumped)
            changed = True
    return replace(diagnosis, suspects=sorted(suspects, key=suspect_order)) if changed else diagnosis


#: Each side's sidecar specs by call key.
Specs = tuple[Mapping[str, CallSpec], Mapping[str, CallSpec]]


def _lines(specs: Specs, rows: Sequence[Row], call: str) -> tuple[CallSpec, CallSpec] | None:
    """Each side's sidecar line of a call (``rows``: its rows, which name the bench's call); None where
    a side has none."""
    n = specs[0].get(call_key(call))
    b = specs[1].get(call_key(side_call(rows, "bench", call)))
    return (n, b) if n is not None and b is not None else None


def _differs(specs: Specs, rows: Sequence[Row], call: str) -> tuple[Argument, ...]:
    """:func:`keywords_differ` of a call, empty where a side's sidecar has no line for it."""
    lines = _lines(specs, rows, call)
    return keywords_differ(*lines) if lines is not None else ()


def _unblamed(diagnosis: Diagnosis, specs: Specs, rows: Sequence[Row]) -> Diagnosis:
    """Where nothing blames a kernel, ``diagnosis`` with every paired call the runs pass different
    keyword arguments as that finding (a suspect in execution order)."""
    if not specs[0] or not specs[1]:
        return diagnosis
    suspects = list(diagnosis.suspects)
    named = {s.call for s in diagnosis.suspects}
    step = next((s.step for s in diagnosis.suspects), None)
    autocast: dict[tuple[str | None, str | None], list[str]] = {}  # (NPU's, bench's) autocast: the calls
    for call, members in rows_by_call(rows).items():
        paired = [r for r in members if r.npu is not None and r.bench is not None]
        entry = paired[0].record.entry if paired else None
        if entry is None or entry.direction != FORWARD:  # a backward shares its keywords and state
            continue
        lines = _lines(specs, members, call)
        if lines is None:
            continue
        if (ours := _autocasts(*lines)) is not None:
            autocast.setdefault(ours, []).append(call)
        if call in named or not (differs := keywords_differ(*lines)):
            continue
        judgement = _arguments_judgement(paired[-1].name)
        stack = next((r.stack for r in members if r.stack is not None), None)
        seq = min(r.seq for r in members)
        suspects.append(
            Suspect(
                call=call,
                api=entry.api,
                direction=entry.direction,
                kind=ARGUMENTS,
                score=math.inf,
                evidence=Arguments(values=differs),
                judgement=judgement,
                rows=members,
                stack=stack,
                seq=seq,
                step=step,
            )
        )
    autocasts = [
        Autocast(calls=len(calls), npu=n, bench=b, first=calls[0]) for (n, b), calls in autocast.items()
    ]
    return replace(
        diagnosis, suspects=sorted(suspects, key=suspect_order), notes=[*diagnosis.notes, *autocasts]
    )


def _autocasts(npu: CallSpec, bench: CallSpec) -> tuple[str | None, str | None] | None:
    """The dtype each side's sidecar line records the call autocast to (None: no autocast), where they
    differ (a device type differs by design); None where they agree."""
    n, b = (a.dtype if (a := line.state.autocast) is not None else None for line in (npu, bench))
    return (n, b) if n != b else None


def _arguments_judgement(output: str) -> Judgement:
    """The judgement of a different-arguments finding: no error measure says it, so it ranks first."""
    return Judgement(0.0, math.inf, 0.0, math.inf, ARGUMENTS, output)


def _arguments(s: Suspect, differs: tuple[Argument, ...]) -> Suspect:
    judgement = _arguments_judgement(s.judgement.output)
    return replace(s, kind=ARGUMENTS, score=math.inf, evidence=Arguments(values=differs), judgement=judgement)


def _undumped_input(spec: CallSpec | None) -> str:
    """The first positional tensor argument of a call that no dump records (a complex one), in words:
    ``input.0 (torch.complex64 [8, 8])``; empty where it has none."""
    if spec is None:
        return ""
    pending: list[tuple[str, Any]] = [(str(i), a) for i, a in enumerate(spec.args)]
    while pending:
        path, value = pending.pop(0)
        if isinstance(value, TensorArg):
            if value.entry is None and (value.dtype or "").startswith(_UNDUMPED_DTYPES):
                shape = "" if value.shape is None else f" {list(value.shape)}"
                return f"input.{path} ({value.dtype}{shape})"
        elif isinstance(value, (list, tuple)):
            pending += [(f"{path}.{j}", v) for j, v in enumerate(value)]
    return ""


def _entering(s: Suspect, undumped: str) -> Suspect:
    """A suspect whose call takes a tensor no dump records: the error its outputs carry may have come
    in with that tensor, so the call's own kernel is not blamed."""
    j = s.judgement
    evidence = Undumped(tensor=undumped, output_error=j.output_error)
    return replace(s, kind=ENTERS, evidence=evidence, judgement=replace(j, kind=ENTERS))
