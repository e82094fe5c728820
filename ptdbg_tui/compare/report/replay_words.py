"""The words of why a call was not replayed (:mod:`ptdbg_tui.compare.diagnosis.replay_reasons`): the
replay's ``not replayable: …``, a side's ``not replayed: …``, a check's origin's, a repro's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ptdbg_tui.compare.diagnosis.replay_reasons import (
    CallFails,
    CannotRead,
    Failed,
    FileDtype,
    FileShape,
    Fixed,
    Incomplete,
    InnerNode,
    Lacks,
    LinearGradients,
    Message,
    NeedsTorchNpu,
    NestedKeyword,
    NodeOrder,
    NoResult,
    NoSuchFunction,
    NoTensorFile,
    NotHeld,
    NotPassed,
    NotPositional,
    NotTorchApi,
    NotWrapped,
    OpaqueArgument,
    OtherFunction,
    OutsideNamespaces,
    PassedElsewhere,
    ReplayShape,
    ResultSize,
    SidecarDisagrees,
    TooLarge,
    UnknownConstant,
    UnknownDtype,
    Unreadable,
    UnrebuiltValue,
    UnrecordedTensor,
    WhyNot,
)

#: How to install what a replay needs (also the message of a replay asked for without torch).
INSTALL = 'replay needs torch: pip install torch==2.13.0 && pip install -e ".[dump]"'

_FIXED = {
    Fixed.COLLECTIVE: "a collective: its result needs the other ranks",
    Fixed.MODULE: "a module: only API calls are replayed",
    Fixed.RANDOM_OP: "a random op: a replay draws other numbers without its generator's state",
    Fixed.STATISTICS_ONLY: "the dump holds statistics only: no tensors to replay from",
    Fixed.INPLACE_AFTER: "an in-place call whose inputs were recorded after it wrote them",
    Fixed.NO_RESULTS: "no tensor results were recorded to check",
    Fixed.ALL_FINITE: "its recorded results hold no NaN or Inf where the replay reads them",
    Fixed.NOT_ASKED: "--no-replay",
    Fixed.NO_TORCH: INSTALL,
}

_LACKS = {
    Lacks.NO_KEYWORDS: "the tool that wrote this dump does not record keyword arguments",
    Lacks.NO_SIDECAR_LINE: "the dump's call sidecar holds no line for it (truncated or damaged)",
}

#: Why a call whose sidecar line says another call than the dump's records is not judged: the
#: verdict would be of a call the run never made.
SIDECAR_DISAGREES = "the sidecar disagrees with the dump: "
#: Why a call whose tensor file holds another tensor than its record says is not judged.
DATA_DISAGREES = "a tensor file disagrees with its record: "


def lacking_text(lacking: Lacks) -> str:
    """Why a rebuild from the records alone may lack arguments."""
    return _LACKS[lacking]


def _opaque(o: OpaqueArgument) -> str:
    if o.keyword is not None:
        return f"the keyword argument {o.keyword}, of type {o.type_name}, cannot be rebuilt"
    return f"an argument of type {o.type_name} cannot be rebuilt"


def _unrecorded(u: UnrecordedTensor) -> str:
    what = u.entry or f"a {u.dtype} tensor of shape {list(u.shape)}"
    if u.keyword is not None:
        return f"the keyword argument {u.keyword} ({what}) was not recorded"
    return f"the tensor argument {what} was not recorded"


def _node_order(n: NodeOrder) -> str:
    return (
        f"its tool records the gradients in its autograd node's order ({n.gradients}), which does not "
        f"match its {n.floating} floating tensor arguments ({n.needing} needing a gradient) one to one"
    )


def _held(n: NotHeld) -> str:
    return f"the {n.side.upper() if n.side == 'npu' else n.side} dump does not hold it"


def _failed(f: Failed) -> str:
    return f"the replay {'worker ' if f.worker else ''}failed: {f.error}: {f.message}"


_SAID: dict[type, Callable[[Any], str]] = {
    NotTorchApi: lambda w: f"{w.api} is not an API of torch's namespaces",
    NotHeld: _held,
    OpaqueArgument: _opaque,
    UnrecordedTensor: _unrecorded,
    UnrebuiltValue: lambda w: f"the value {w.name} ({w.dtype}) cannot be rebuilt from the records",
    NestedKeyword: lambda w: f"the keyword argument {w.keyword} holds a nested value",
    NotPositional: lambda w: f"argument path {w.path} is not positional",
    InnerNode: lambda w: (
        f"its tool records {w.op}'s backward at an inner autograd node, not the gradients of its arguments"
    ),
    LinearGradients: lambda w: f"linear's backward records {w.count} gradients, not its node's 2 or 3",
    NodeOrder: _node_order,
    OtherFunction: lambda w: f"it calls {w.fn}, the dump records {w.api} ({w.recorded})",
    PassedElsewhere: lambda w: (
        f"it passes {w.name} as argument {w.where}, which the dump records as no input there"
    ),
    NotPassed: lambda w: f"it does not pass the recorded tensor input {w.name}",
    ResultSize: lambda w: (
        f"{w.fn} gives {list(w.shape)} where the dump records {w.name} as {list(w.recorded)}"
    ),
    SidecarDisagrees: lambda w: SIDECAR_DISAGREES + why_not_text(w.what),
    OutsideNamespaces: lambda w: f"{w.fn} is outside torch's namespaces",
    NotWrapped: lambda w: f"{w.fn} is not in the dumped API list",
    NeedsTorchNpu: lambda w: f"{w.fn} needs torch_npu, which is not installed here",
    NoSuchFunction: lambda w: f"{w.fn} does not exist in this torch",
    NoTensorFile: lambda w: f"{w.name} has no tensor file",
    Unreadable: lambda w: f"{w.name} cannot be read: {w.error}",
    FileShape: lambda w: (
        f"{DATA_DISAGREES}{w.file} holds shape {list(w.shape)} but the dump records {list(w.recorded)}"
    ),
    FileDtype: lambda w: f"{DATA_DISAGREES}{w.file} holds {w.dtype} data but the dump records {w.recorded}",
    TooLarge: lambda w: w.message,
    UnknownDtype: lambda w: f"unknown dtype {w.name}",
    UnknownConstant: lambda w: f"unknown torch constant {w.name}",
    CallFails: lambda w: f"the call fails when rebuilt: {w.error}: {w.message}",
    NoResult: lambda w: f"the replay gives no result for {w.name}",
    ReplayShape: lambda w: f"{w.name} holds {list(w.recorded)} but the replay gives {list(w.replayed)}",
    Message: lambda w: w.message,
    Failed: _failed,
    CannotRead: lambda w: f"cannot read {w.error}",
    Incomplete: lambda w: f"{why_not_text(w.why)} ({lacking_text(w.lacking)})",
}


def why_not_text(why: WhyNot) -> str:
    """Why a call (one side of it, a check's origin, a repro's) was not replayed, in words."""
    if isinstance(why, Fixed):
        return _FIXED[why]
    return _SAID[type(why)](why)
