"""What a replay of one recorded call runs: the function, its arguments with the recorded tensors in
place, and the recorded results it is checked against — or why the call cannot be replayed.

Built without torch from one side's records: this project's call sidecar
(:mod:`~ptdbg_tui.formats.calls`: every argument, keyword ones included), or the records alone —
msprobe records keyword arguments (``input.<name>``), the original ptdbg_ascend only positional ones,
so a replay of its calls is *incomplete* (a keyword the call took is missing, unless its source line
spells it: :mod:`~.source_keywords`) and counts only when the other side's replay of the same call
shows that the rebuild is right.

Only a function of torch's namespaces that the dumpers wrap is ever named; the runner
(:mod:`~.run`) resolves it and nothing else.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from ptdbg_tui.compare.diagnosis import replay_reasons as reasons
from ptdbg_tui.compare.diagnosis.replay_reasons import Fixed, Refusal
from ptdbg_tui.compare.model import Row, side_call
from ptdbg_tui.compare.ops import RANDOM_OPS, in_place, op_name
from ptdbg_tui.compare.replay.source_keywords import source_keywords
from ptdbg_tui.formats.calls import CallSpec, Device, Dtype, Opaque, Size, TensorArg, TorchConst
from ptdbg_tui.formats.dialects import INNER_NODE_BACKWARD, LINEAR_NODE_GRADIENTS
from ptdbg_tui.formats.naming import BACKWARD, FORWARD, INPUT, OUTPUT, EntryName
from ptdbg_tui.formats.records import NONE_DTYPE, TensorRecord
from ptdbg_tui.formats.sites import stack_site
from ptdbg_tui.formats.tensorfile import data_path
from ptdbg_tui.formats.wrapped_apis import QUALIFIED

#: Prefixes whose calls cannot be replayed alone, and why.
REFUSED = {"Distributed": Fixed.COLLECTIVE, "Module": Fixed.MODULE}
#: Where each replayable dump prefix's functions live.
NAMESPACES = {prefix: module for prefix, module in QUALIFIED.items() if prefix not in REFUSED}


@dataclass(frozen=True, slots=True)
class Recorded:
    """A recorded tensor a replay reads (an argument) or checks (a result). Its file must hold the
    ``dtype`` and ``shape`` its record (or, for a keyword tensor, the sidecar: ``sidecar``) says."""

    name: str
    path: str | None  # its tensor file; None when the dump holds no data for it
    dtype: str
    shape: tuple[int, ...]
    sidecar: bool = False  # dtype and shape from the call sidecar alone: no pkl record vouches for its size


@dataclass(frozen=True, slots=True)
class Value:
    """A recorded non-tensor argument the runner turns into its Python or torch value."""

    kind: str  # "plain", "dtype", "size", "device", "const", "slice"
    value: Any


@dataclass(slots=True)
class Plan:
    """One call, on one side, ready to replay."""

    call: str  # e.g. ``Functional_gelu_0_forward``
    direction: str
    fn: str  # e.g. ``torch.nn.functional.gelu``
    args: list[Any] = field(default_factory=list)  # nested lists/tuples of Recorded, Value
    kwargs: dict[str, Any] = field(default_factory=dict)
    results: dict[tuple[Any, ...], Recorded] = field(default_factory=dict)  # forward: outputs by path;
    # backward: the recorded gradients by the forward argument's path
    incoming: dict[tuple[Any, ...], Recorded] = field(default_factory=dict)  # backward: by output path
    inplace: int | None = None  # the argument the call writes into
    complete: bool = True  # every argument is known (keyword ones too)
    transposed: set[tuple[Any, ...]] = field(default_factory=set)  # results recorded transposed
    from_source: tuple[str, ...] = ()  # keyword arguments read from the call's source line
    autocast: str | None = None  # the dtype the call ran under torch.autocast to (its sidecar), if any
    sidecar: bool = False  # rebuilt from its call sidecar line (checked against the records)


@dataclass(frozen=True, slots=True, kw_only=True)
class NotReplayable:
    """Why one side's call cannot be replayed (its words:
    :func:`ptdbg_tui.compare.report.replay_words.why_not_text`)."""

    call: str
    why: Refusal


class CannotReplay(Exception):
    """A call that cannot be rebuilt, raised (the message is the reason: "not replayable: <reason>")."""


def function_of(entry: EntryName) -> str | NotReplayable:
    """The qualified function a recorded call named (``torch.nn.functional.gelu``), or why none."""
    prefix, op = entry.prefix, entry.op
    call = entry.call
    if prefix in REFUSED:
        return NotReplayable(call=call, why=REFUSED[prefix])
    if op_name(op) in RANDOM_OPS:
        return NotReplayable(call=call, why=Fixed.RANDOM_OP)
    space = NAMESPACES.get(prefix)
    if space is None or not op.replace("_", "a").isidentifier():
        return NotReplayable(call=call, why=reasons.NotTorchApi(api=entry.api))
    return f"{space}.{op}"


def _source_line(rows: Sequence[Row], call: str) -> str | None:
    """The line of code that made ``call``, from the NPU stack on its first row (both sides ran the same
    script; a rebuild from it counts only when the other side's replay matches)."""
    stack = next((r.stack for r in rows if r.stack is not None and r.stack.call == call), None)
    site = stack_site(stack)
    return site.source if site is not None else None


def _records(rows: Sequence[Row], side: str) -> dict[str, TensorRecord]:
    recs = (r.npu if side == "npu" else r.bench for r in rows)
    return {rec.name: rec for rec in recs if rec is not None}


def _recorded(rec: TensorRecord, tensor_dir: str | None) -> Recorded:
    path = data_path(tensor_dir, rec) if tensor_dir is not None else None
    return Recorded(rec.name, path, rec.dtype, rec.shape)


class _Missing(Exception):
    """An argument the replay cannot rebuild (its one argument, a :data:`Refusal`, says which and why)."""


def _unrebuilt(arg: TensorArg | Opaque, keyword: str | None) -> _Missing:
    """Why ``arg`` (a tensor the pkl does not hold, a value no replay rebuilds) stops the replay, naming
    the keyword argument it is as the user's code spells it (``attn_mask``; the pkl records positional
    tensors only)."""
    if isinstance(arg, Opaque):
        return _Missing(reasons.OpaqueArgument(type_name=arg.type_name, keyword=keyword))
    shape = tuple(arg.shape or ())
    return _Missing(reasons.UnrecordedTensor(entry=arg.entry, dtype=arg.dtype, shape=shape, keyword=keyword))


def _from_spec(
    arg: Any, recs: Mapping[str, TensorRecord], tensor_dir: str | None, keyword: str | None = None
) -> Any:
    """A sidecar ARG as the runner takes it; ``keyword``: the keyword argument it is, or is in."""
    if isinstance(arg, TensorArg):
        rec = recs.get(arg.entry) if arg.entry is not None else None
        if rec is not None:
            return _recorded(rec, tensor_dir)
        if arg.data is not None and arg.dtype is not None and arg.shape is not None:
            # a keyword tensor: its data file, named by the sidecar alone
            path = os.path.join(tensor_dir, arg.data) if tensor_dir is not None else None
            return Recorded(arg.data.removesuffix(".npy"), path, arg.dtype, arg.shape, sidecar=True)
        raise _unrebuilt(arg, keyword)
    if isinstance(arg, Opaque):
        raise _unrebuilt(arg, keyword)
    if isinstance(arg, (list, tuple)):
        return type(arg)(_from_spec(a, recs, tensor_dir, keyword) for a in arg)
    if isinstance(arg, dict):
        return {k: _from_spec(v, recs, tensor_dir, keyword) for k, v in arg.items()}
    for kind, cls, attr in (
        ("dtype", Dtype, "name"),
        ("size", Size, "dims"),
        ("device", Device, "name"),
        ("const", TorchConst, "name"),
    ):
        if isinstance(arg, cls):
            return Value(kind, getattr(arg, attr))
    if isinstance(arg, slice):
        return Value("slice", (arg.start, arg.stop, arg.step))
    return Value("plain", arg)


#: Recorded non-tensor types (msprobe's ``type``) whose value is rebuilt, and how; msprobe writes a
#: ``None`` argument (a conv2d without bias) as ``null``, which its reader records as NONE_DTYPE.
_VALUE_TYPES = {
    NONE_DTYPE: "plain",
    "int": "plain",
    "float": "plain",
    "bool": "plain",
    "str": "plain",
    "NoneType": "plain",
    "torch.dtype": "dtype",
    "torch.Size": "size",
    "slice": "slice",
    "torch.device": "device",
}


def _from_record(rec: TensorRecord, tensor_dir: str | None) -> Any:
    """A recorded argument as the runner takes it: a tensor, or a value the records hold."""
    if not rec.is_scalar:
        return _recorded(rec, tensor_dir)
    kind = _VALUE_TYPES.get(rec.dtype.removeprefix("<class '").removesuffix("'>"))
    if kind is None:
        raise _Missing(reasons.UnrebuiltValue(name=rec.name, dtype=rec.dtype))
    value = rec.stats[0] if rec.stats else None
    return Value(kind, value)


def _nest(items: Mapping[tuple[Any, ...], Any]) -> tuple[list[Any], bool]:
    """Positional arguments from their paths (``(2, 0)``: the first element of the third argument), and
    whether any position was missing: the original records no ``None`` (a conv2d without bias has no
    ``input.2``), so a gap is rebuilt as ``None`` and the rebuild counts as lacking arguments."""
    out: list[Any] = []
    gaps = False
    for path in sorted(items, key=lambda p: tuple(str(k).zfill(8) for k in p)):
        target = out
        for depth, k in enumerate(path):
            if not isinstance(k, int):
                raise _Missing(reasons.NotPositional(path=path))
            last = depth == len(path) - 1
            while len(target) < k:
                target.append(_GAP)
                gaps = True
            if len(target) == k:
                target.append(items[path] if last else [])
            elif last:
                target[k] = items[path]
            elif target[k] is _GAP:
                target[k] = []
            if not last:
                target = target[k]
    return _filled(out), gaps


#: A position the records skip, until :func:`_filled` makes it ``None``.
_GAP = object()


def _filled(args: list[Any]) -> list[Any]:
    return [Value("plain", None) if a is _GAP else (_filled(a) if isinstance(a, list) else a) for a in args]


def _from_records(
    fwd: Sequence[TensorRecord], tensor_dir: str | None
) -> tuple[list[Any], dict[str, Any], bool]:
    """A call's positional and keyword arguments from its forward input records, and whether a position
    was missing (:func:`_nest`)."""
    positional: dict[tuple[Any, ...], Any] = {}
    kwargs: dict[str, Any] = {}
    for rec in fwd:
        e = rec.entry
        if e is None or e.kind != INPUT or not e.path:
            continue
        if isinstance(e.path[0], str):
            if len(e.path) > 1:
                raise _Missing(reasons.NestedKeyword(keyword=e.path[0]))
            kwargs[e.path[0]] = _from_record(rec, tensor_dir)
        else:
            positional[e.path] = _from_record(rec, tensor_dir)
    args, gaps = _nest(positional)
    return args, kwargs, gaps


#: A ``None`` argument, as the plan holds it.
_NONE = Value("plain", None)


def _node_order(
    grads: Sequence[TensorRecord], args: Sequence[Any], fwd: Sequence[TensorRecord], op: str
) -> list[tuple[int, bool]] | Refusal:
    """Where the gradients of a tool that records them in autograd-node order belong: per recorded
    gradient (``output.k``, a ``null`` one included), its forward argument's position and whether it is
    recorded transposed; or why that cannot be told."""
    if op in INNER_NODE_BACKWARD:
        return reasons.InnerNode(op=op)
    if op == "linear":
        mapping = LINEAR_NODE_GRADIENTS.get(len(grads))
        if mapping is None:
            return reasons.LinearGradients(count=len(grads))
        return list(mapping)
    wants = {
        r.entry.path[0]: r.requires_grad
        for r in fwd
        if r.entry is not None
        and r.entry.kind == INPUT
        and len(r.entry.path) == 1
        and isinstance(r.entry.path[0], int)
    }
    floating = [i for i, a in enumerate(args) if isinstance(a, Recorded) and "float" in a.dtype]
    needing = [i for i in floating if wants.get(i) is not False]
    # an optional tensor passed as None (conv2d's bias) keeps its slot in the node, a null gradient
    optional = [i for i, a in enumerate(args) if i in floating or a == _NONE]
    # one gradient (a null one included) per floating argument, or per one that needs a gradient
    candidates = next((c for c in (floating, needing) if len(c) == len(grads)), None)
    if candidates is None and len(optional) == len(grads):
        nulls = all(g.is_scalar for i, g in zip(optional, grads, strict=True) if args[i] == _NONE)
        candidates = optional if nulls else None
    if candidates is None:
        return reasons.NodeOrder(gradients=len(grads), floating=len(floating), needing=len(needing))
    return [(i, False) for i in candidates]


def _by_node_order(
    plan: Plan, entries: Sequence[TensorRecord], fwd: Sequence[TensorRecord], op: str, tensor_dir: str
) -> Plan | NotReplayable:
    """The plan's results moved from node order to the forward arguments they belong to."""
    outs = sorted(
        (
            r
            for r in entries
            if r.entry is not None
            and r.entry.direction == BACKWARD
            and r.entry.kind == OUTPUT
            and len(r.entry.path) == 1
            and isinstance(r.entry.path[0], int)
        ),
        key=attrgetter("entry.path"),  # each a path of one int
    )
    targets = _node_order(outs, plan.args, fwd, op)
    if not isinstance(targets, list):
        return NotReplayable(call=plan.call, why=targets)
    plan.results = {}
    for rec, (position, transposed) in zip(outs, targets, strict=True):
        if rec.is_scalar:  # a null: no gradient for that argument
            continue
        plan.results[(position,)] = _recorded(rec, tensor_dir)
        if transposed:
            plan.transposed.add((position,))
    return plan


def _spec_tensors(arg: Any, path: tuple[Any, ...]) -> list[tuple[tuple[Any, ...], str]]:
    """The recorded tensors a sidecar line passes positionally, with the path each is passed at."""
    if isinstance(arg, TensorArg):
        return [(path, arg.entry)] if arg.entry is not None else []
    if isinstance(arg, (list, tuple)):
        return [t for i, a in enumerate(arg) for t in _spec_tensors(a, (*path, i))]
    return []


def sidecar_disagrees(
    spec: CallSpec, fn: str, entry: EntryName, fwd: Sequence[TensorRecord], recs: Mapping[str, TensorRecord]
) -> reasons.SidecarDiffers | None:
    """What a call's sidecar line says otherwise than the dump's records (None where they agree):
    the function the record's name makes, and each recorded tensor input at its place — no other
    tensor (an output, another call's) passed as one, none of them left out. The dumper writes exactly
    these; a line that differs was damaged or crafted, and a replay of it would judge another call."""
    if spec.fn != fn:
        return reasons.OtherFunction(fn=spec.fn, api=entry.api, recorded=fn)
    passed = [t for i, a in enumerate(spec.args) for t in _spec_tensors(a, (i,))]
    inputs = {
        r.name: r.entry.path
        for r in fwd
        if r.entry is not None and r.entry.kind == INPUT and r.entry.path and isinstance(r.entry.path[0], int)
    }
    for path, name in passed:
        rec = recs.get(name)
        if rec is not None and inputs.get(name) != path:
            return reasons.PassedElsewhere(name=name, where=".".join(map(str, path)))
    left = [
        name for name, path in inputs.items() if not recs[name].is_scalar and not _tensor_at(spec.args, path)
    ]
    if left:
        return reasons.NotPassed(name=left[0])
    return None


def _spec_arguments(
    spec: CallSpec,
    fn: str,
    entry: EntryName,
    fwd: Sequence[TensorRecord],
    recs: Mapping[str, TensorRecord],
    tensor_dir: str | None,
) -> tuple[list[Any], dict[str, Any]]:
    """A call's arguments from its sidecar line, once that line agrees with the dump's records."""
    if differs := sidecar_disagrees(spec, fn, entry, fwd, recs):
        raise _Missing(reasons.SidecarDisagrees(what=differs))
    args = [_from_spec(a, recs, tensor_dir) for a in spec.args]
    return args, {k: _from_spec(v, recs, tensor_dir, k) for k, v in spec.kwargs.items()}


def _tensor_at(args: Sequence[Any], path: tuple[Any, ...]) -> bool:
    """Whether a sidecar line passes a tensor (recorded or not) at ``path`` of its arguments."""
    here: Any = args
    for k in path:
        if not isinstance(here, (list, tuple)) or not isinstance(k, int) or k >= len(here):
            return False
        here = here[k]
    return isinstance(here, TensorArg)


def build_plan(
    rows: Sequence[Row],
    side: str,
    call: str,
    tensor_dir: str | None,
    spec: CallSpec | None,
    keywords_recorded: bool,
    inputs_after_call: bool,
    node_order: bool = False,
) -> Plan | NotReplayable:
    """The plan of one call (``call``: its direction's name, e.g. ``Functional_gelu_0_backward``) on one
    side (``"npu"``/``"bench"``) from the pair's rows; ``spec``: that side's sidecar line of the call;
    ``keywords_recorded``/``inputs_after_call``/``node_order``: what the side's tool records
    (:class:`~ptdbg_tui.formats.dialects.Dialect`; ``node_order``: a backward's gradients in its autograd
    node's order, not by argument)."""
    recs = _records(rows, side)
    mine = [r for r in recs.values() if r.entry is not None]
    call = side_call(rows, side, call)
    entries = [r for r in mine if r.call == call]
    if not entries:
        return NotReplayable(call=call, why=reasons.NotHeld(side=side))
    entry = entries[0].entry
    assert entry is not None
    fn = function_of(entry)
    if isinstance(fn, NotReplayable):
        return fn
    forward_call = entry.forward_call
    fwd = [r for r in mine if r.call == forward_call]
    if tensor_dir is None:
        return NotReplayable(call=call, why=Fixed.STATISTICS_ONLY)
    try:
        if spec is not None:
            args, kwargs = _spec_arguments(spec, fn, entry, fwd, recs, tensor_dir)
            complete, inplace = True, spec.inplace
        else:
            args, kwargs, gaps = _from_records(fwd, tensor_dir)
            complete, inplace = keywords_recorded and not gaps, (0 if in_place(entry.op) else None)
    except _Missing as e:
        return NotReplayable(call=call, why=e.args[0])
    read: dict[str, Any] = {}
    if spec is None and not keywords_recorded:
        read = {
            k: v
            for k, v in source_keywords(_source_line(rows, forward_call), entry.op).items()
            if k not in kwargs
        }
        kwargs.update((k, Value("plain", v)) for k, v in read.items())
    if inplace is None and kwargs.get("inplace") == Value("plain", True):
        inplace = 0  # F.relu(x, inplace=True): writes its input as relu_ does
    if inplace is not None and inputs_after_call and spec is None:
        return NotReplayable(call=call, why=Fixed.INPLACE_AFTER)
    autocast = spec.state.autocast if spec is not None else None
    plan = Plan(
        call,
        entry.direction,
        fn,
        args,
        kwargs,
        inplace=inplace,
        complete=complete,
        from_source=tuple(read),
        autocast=autocast.dtype if autocast is not None else None,
        sidecar=spec is not None,
    )
    done = _with_results(plan, entries, fwd, tensor_dir, node_order and spec is None)
    if isinstance(done, Plan) and not done.results:
        return NotReplayable(call=call, why=Fixed.NO_RESULTS)
    return done


def _with_results(
    plan: Plan,
    entries: Sequence[TensorRecord],
    fwd: Sequence[TensorRecord],
    tensor_dir: str,
    node_order: bool,
) -> Plan | NotReplayable:
    """The recorded results a replay checks: a forward's outputs; a backward's gradients by the forward
    argument they belong to, and the incoming gradients it is fed."""
    if plan.direction == FORWARD:
        plan.results = {
            r.entry.path: _recorded(r, tensor_dir)
            for r in fwd
            if r.entry is not None and r.entry.kind == OUTPUT and not r.is_scalar
        }
        return plan
    grads = [
        (e, r) for r in entries if (e := r.entry) is not None and e.direction == BACKWARD and not r.is_scalar
    ]
    plan.results = {e.path: _recorded(r, tensor_dir) for e, r in grads if e.kind == OUTPUT}
    plan.incoming = {e.path: _recorded(r, tensor_dir) for e, r in grads if e.kind == INPUT}
    op = grads[0][0].op if grads else ""
    return _by_node_order(plan, entries, fwd, op, tensor_dir) if node_order else plan
