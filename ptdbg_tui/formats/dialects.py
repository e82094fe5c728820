"""How each dump tool records what a comparison must know: the one place that knows the tools.

Three tools write the dumps we read: this project's dumper (``ptdbg``), the original ptdbg_ascend
and msprobe. They share the naming grammar and most of what they record, and differ in a few
places that matching must know of to pair the same tensors:

- **gradient order**: msprobe and the original take a backward's gradients in its autograd node's
  order, ours by forward argument, so ``linear``'s bias gradient is ``output.0`` there and
  ``output.2`` here (:data:`LINEAR_NODE_GRADIENTS`); some ops' backward is recorded at an inner
  node (:data:`INNER_NODE_BACKWARD`);
- **in-place inputs**: the original records a forward's inputs once the call has returned, so an
  in-place call's ``input.0`` there is the written value (:attr:`Dialect.inputs_after_call`);
- **noise**: the original's hooks detach every tensor they record, through the wrapped
  ``Tensor.detach``, which it records as a call (:func:`tool_noise`); both other tools record the
  calls made while a backward pass runs (a custom autograd Function's backward, a checkpoint's
  recomputation) as forward calls, ours none (:func:`inside_backward`);
- **frames**: each tool's own frames in the recorded stacks (:data:`TOOL_PATH_MARKS`).

A dump's tool is known from its format (msprobe) or its stacks (:func:`producer`); a pkl without
stack lines so far says nothing yet.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ptdbg_tui.formats.naming import BACKWARD, STYLE_MSPROBE, STYLE_PTDBG
from ptdbg_tui.formats.records import StackRecord, TensorRecord

#: The tools, by the name :func:`producer` gives them.
OURS = STYLE_PTDBG
MSPROBE = STYLE_MSPROBE
ORIGINAL_PTDBG = "ptdbg_ascend"

#: The original's stack lines start in its own hook module.
_ORIGINAL_FRAME = "/ptdbg_ascend/hook_module/"
#: This project's dumper's modules whose frames can sit between the user's line and a recorded call.
_OUR_MODULES = (
    "patching",
    "session",
    "capture",
    "backward",
    "debugger",
    "cli",
    "daemon",
    "module_chain",
    "stack",
    "arguments",
    "faults",
)
#: Frames whose path contains one of these belong to a dump tool, not to the user's code (our dumper's by
#: its module files: a user's own folder named ``dumper`` stays user code).
TOOL_PATH_MARKS = ("ptdbg_ascend", "/site-packages/msprobe/", *(f"/dumper/{m}.py" for m in _OUR_MODULES))


@dataclass(frozen=True, slots=True)
class Dialect:
    """What one tool records differently."""

    tool: str
    #: A backward's gradients in its autograd node's order (else by forward argument position).
    gradients_in_node_order: bool
    #: A forward's inputs recorded once the call has returned (an in-place input shows the written value).
    inputs_after_call: bool
    #: A call's keyword arguments recorded beside its positional ones (a replay can rebuild the call).
    keywords_recorded: bool = False
    #: Calls made while a backward pass runs are recorded, as forward calls (:func:`inside_backward`).
    records_inside_backward: bool = True


DIALECTS = {
    OURS: Dialect(
        OURS, gradients_in_node_order=False, inputs_after_call=False, records_inside_backward=False
    ),
    MSPROBE: Dialect(MSPROBE, gradients_in_node_order=True, inputs_after_call=False, keywords_recorded=True),
    ORIGINAL_PTDBG: Dialect(ORIGINAL_PTDBG, gradients_in_node_order=True, inputs_after_call=True),
}


def dialect_of(tool: str | None) -> Dialect:
    """The dialect of a tool named by :func:`producer` (one that does not say yet reads as ours)."""
    return DIALECTS.get(tool or OURS, DIALECTS[OURS])


#: Ops whose backward the node-order tools record at their last autograd node rather than the op's
#: own gradient: cross_entropy's ``output.0`` there is nll_loss's (the log-probabilities' gradient),
#: ours the logits'. Same shape, different tensors.
INNER_NODE_BACKWARD = frozenset({"cross_entropy"})

#: ``linear``'s gradients as a dump in autograd order numbers them (its ``addmm`` node: bias, input,
#: transposed weight; ``mm`` without a bias: input, transposed weight), by the node's arity, each
#: mapped to our argument position and whether it holds ours transposed (the weight's, even square).
LINEAR_NODE_GRADIENTS: dict[int, tuple[tuple[int, bool], ...]] = {
    3: ((2, False), (0, False), (1, True)),
    2: ((0, False), (1, True)),
}

#: The dropouts' op names (each may also work in place).
DROPOUTS = frozenset(
    {"dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout"}
)

#: Inputs that are a module's running state, which a training call updates in place (a tool that records
#: inputs after the call shows the new values). torch moves no version counter as it writes them, so
#: the dumper must not take an earlier record of them for their values now.
RUNNING_STATE = {"batch_norm": (1, 2), "instance_norm": (1, 2)}

#: Ops that may write their first argument (``relu(x, inplace=True)``, and any ``op_``).
INPLACE_CAPABLE = frozenset(
    {
        "relu",
        "relu6",
        "elu",
        "selu",
        "celu",
        "leaky_relu",
        "rrelu",
        "hardtanh",
        "silu",
        "hardswish",
        "hardsigmoid",
        "mish",
        "threshold",
    }
    | DROPOUTS
)


def producer(fmt: str, stacks: Iterable[StackRecord], tensors: Iterable[TensorRecord] = ()) -> str | None:
    """The tool that wrote a dump of format ``fmt`` with these stacks and records: :data:`MSPROBE`,
    :data:`ORIGINAL_PTDBG`, :data:`OURS`, or ``None`` while nothing says (a pkl without stack lines
    so far)."""
    if fmt == STYLE_MSPROBE:
        return MSPROBE
    for stack in stacks:
        if stack.frames:
            original = _ORIGINAL_FRAME in stack.frames[0].path.replace("\\", "/")
            return ORIGINAL_PTDBG if original else OURS
    return ORIGINAL_PTDBG if original_detach(tensors)[0] else None


def original_detach(tensors: Iterable[TensorRecord], backward: bool = False) -> tuple[bool, bool]:
    """Whether the records show the original's mark where it writes no stack lines (its mode
    ``all``): its backward hooks detach each tensor they record through the wrapped
    ``Tensor.detach``, which it records as a forward call after a backward one. Also whether a
    backward record was seen (``backward``: one was, in earlier records)."""
    for rec in tensors:
        entry = rec.entry
        if entry is None:
            continue
        if entry.direction == BACKWARD:
            backward = True
        elif backward and is_detach(rec):
            return True, backward
    return False, backward


def is_detach(rec: TensorRecord) -> bool:
    """A ``Tensor_detach`` call: the original's hooks record their own (see :func:`original_detach`)."""
    entry = rec.entry  # its api first: building the key of every record cost a pair ~15 ms
    return entry is not None and entry.api in _DETACH_APIS and entry.key[:2] == ("Tensor", "detach")


#: The apis of a detach call in either grammar (what :attr:`EntryName.key` then tells apart).
_DETACH_APIS = frozenset({"Tensor_detach", "Tensor.detach"})


def inside_backward(records: Sequence[TensorRecord]) -> set[int]:
    """The ids of the forward records between a dump's first and last backward record: calls its
    tool recorded while a backward pass ran (a custom autograd Function's backward, a
    recomputation), where no user code calls the model."""
    backward = [i for i, r in enumerate(records) if r.entry is not None and r.entry.direction == BACKWARD]
    if not backward:
        return set()
    return {
        id(r)
        for r in records[backward[0] : backward[-1]]
        if r.entry is not None and r.entry.direction != BACKWARD
    }


def tool_noise(records: Sequence[TensorRecord]) -> set[int]:
    """The ids of the original's own ``detach`` records: the ``Tensor_detach`` calls recorded once
    the backward has begun (its forward hooks run inside the wrapped call, where nothing is
    recorded; its backward hooks outside any, where their detaches of each tensor they record and
    of its statistics are), those of the first backward tensor just before its record included."""
    backward = (i for i, r in enumerate(records) if r.entry is not None and r.entry.direction == BACKWARD)
    start = next(backward, len(records))
    while start > 0 and is_detach(records[start - 1]):
        start -= 1
    return {id(rec) for rec in records[start:] if is_detach(rec)}
