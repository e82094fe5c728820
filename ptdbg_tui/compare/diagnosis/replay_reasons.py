"""Why a call was not replayed, or not judged by its replay, as values: the plan that cannot rebuild it
(:mod:`ptdbg_tui.compare.replay.plan`), the runner that refuses it (:mod:`~ptdbg_tui.compare.replay.run`),
the worker that failed. They hold names, numbers and paths; the words are
:func:`ptdbg_tui.compare.report.replay_words.why_not_text`'s. Here, beneath both diagnosis and replay,
as :mod:`.replay_outcome` is.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, auto
from typing import Any


class Fixed(Enum):
    """A reason without figures."""

    COLLECTIVE = auto()  # a Distributed call: its result needs the other ranks
    MODULE = auto()  # a Module call: only API calls are replayed
    RANDOM_OP = auto()  # a replay draws other numbers without the generator's state
    STATISTICS_ONLY = auto()  # the dump holds no tensor files
    INPLACE_AFTER = auto()  # an in-place call whose inputs were recorded after it wrote them
    NO_RESULTS = auto()  # no tensor results were recorded to check
    ALL_FINITE = auto()  # a non-finite origin's recorded results hold no NaN or Inf where the replay reads
    NOT_ASKED = auto()  # ``--no-replay``
    NO_TORCH = auto()  # torch is not installed: the install hint


class Lacks(Enum):
    """Why a rebuild from the records alone may lack arguments."""

    NO_KEYWORDS = auto()  # the dump's tool records no keyword arguments
    NO_SIDECAR_LINE = auto()  # the dump's call sidecar holds no line for the call


@dataclass(frozen=True, slots=True, kw_only=True)
class NotTorchApi:
    """The recorded API is not one of torch's namespaces."""

    api: str


@dataclass(frozen=True, slots=True, kw_only=True)
class NotHeld:
    """One side's dump does not hold the call."""

    side: str  # "npu" or "bench"


@dataclass(frozen=True, slots=True, kw_only=True)
class OpaqueArgument:
    """An argument of a type no replay rebuilds (``keyword``: the keyword argument it is, if one)."""

    type_name: str
    keyword: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class UnrecordedTensor:
    """A tensor argument the dump does not hold: its entry, or its dtype and shape."""

    entry: str | None
    dtype: str | None = None
    shape: tuple[int, ...] = ()
    keyword: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class UnrebuiltValue:
    """A recorded non-tensor argument of a type the records cannot rebuild."""

    name: str
    dtype: str


@dataclass(frozen=True, slots=True, kw_only=True)
class NestedKeyword:
    """A keyword argument recorded as a nested value."""

    keyword: str


@dataclass(frozen=True, slots=True, kw_only=True)
class NotPositional:
    """An argument path that is not positional."""

    path: tuple[Any, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class InnerNode:
    """The tool records ``op``'s backward at an inner autograd node."""

    op: str


@dataclass(frozen=True, slots=True, kw_only=True)
class LinearGradients:
    """linear's backward records another count of gradients than its node's 2 or 3."""

    count: int


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeOrder:
    """Gradients recorded in autograd-node order that match the floating arguments in no way."""

    gradients: int
    floating: int
    needing: int  # the floating arguments that need a gradient


@dataclass(frozen=True, slots=True, kw_only=True)
class OtherFunction:
    """The sidecar's line calls another function than the dump's record names."""

    fn: str  # the sidecar's
    api: str  # the record's
    recorded: str  # the function the record's name makes


@dataclass(frozen=True, slots=True, kw_only=True)
class PassedElsewhere:
    """The sidecar's line passes a recorded tensor where the dump records no input."""

    name: str
    where: str  # the argument's path, dotted (``2.0``)


@dataclass(frozen=True, slots=True, kw_only=True)
class NotPassed:
    """The sidecar's line leaves out a recorded tensor input."""

    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ResultSize:
    """The rebuilt call gives a result of another size than the dump records."""

    fn: str
    shape: tuple[int, ...]
    name: str  # the recorded result
    recorded: tuple[int, ...]


#: What a call's sidecar line says otherwise than the dump.
SidecarDiffers = OtherFunction | PassedElsewhere | NotPassed | ResultSize


@dataclass(frozen=True, slots=True, kw_only=True)
class SidecarDisagrees:
    """The call's sidecar line describes another call than the dump's records: not judged."""

    what: SidecarDiffers


@dataclass(frozen=True, slots=True, kw_only=True)
class OutsideNamespaces:
    fn: str


@dataclass(frozen=True, slots=True, kw_only=True)
class NotWrapped:
    """The function is not in the dumped API list."""

    fn: str


@dataclass(frozen=True, slots=True, kw_only=True)
class NeedsTorchNpu:
    fn: str


@dataclass(frozen=True, slots=True, kw_only=True)
class NoSuchFunction:
    """This torch has no such function."""

    fn: str


@dataclass(frozen=True, slots=True, kw_only=True)
class NoTensorFile:
    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Unreadable:
    """A recorded tensor's file cannot be read (``error``: the reader's message)."""

    name: str
    error: str


@dataclass(frozen=True, slots=True, kw_only=True)
class FileShape:
    """A tensor file holds another shape than its record says."""

    file: str
    shape: tuple[int, ...]
    recorded: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class FileDtype:
    """A tensor file holds another dtype than its record says."""

    file: str
    dtype: str
    recorded: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TooLarge:
    """A tensor or a result would take more memory than one entry may (the budget's message)."""

    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class UnknownDtype:
    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class UnknownConstant:
    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CallFails:
    """The op rejects the rebuilt arguments (its exception's type and first line)."""

    error: str
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class NoResult:
    """The replay gives no result for a recorded one."""

    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayShape:
    """A recorded result holds another number of elements than the replay gives."""

    name: str
    recorded: tuple[int, ...]
    replayed: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """A refusal raised with its words: the harness's (it ships alone in every repro script, so it says
    why in its exception's message) and the repro writer's, kept as they are."""

    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Failed:
    """The replay raised (a bug or an odd dump): the exception's type and message. ``worker``: the
    worker process itself failed."""

    error: str
    message: str
    worker: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class CannotRead:
    """The dump cannot be read (the reader's words for its OSError, with its path)."""

    error: str


#: Why one side of a call is not replayed.
Refusal = (
    Fixed
    | NotTorchApi
    | NotHeld
    | OpaqueArgument
    | UnrecordedTensor
    | UnrebuiltValue
    | NestedKeyword
    | NotPositional
    | InnerNode
    | LinearGradients
    | NodeOrder
    | SidecarDisagrees
    | ResultSize
    | OutsideNamespaces
    | NotWrapped
    | NeedsTorchNpu
    | NoSuchFunction
    | NoTensorFile
    | Unreadable
    | FileShape
    | FileDtype
    | TooLarge
    | UnknownDtype
    | UnknownConstant
    | CallFails
    | NoResult
    | ReplayShape
    | Message
    | Failed
    | CannotRead
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Incomplete:
    """A refusal of a rebuild that lacked arguments, and why it lacked them."""

    why: Refusal
    lacking: Lacks


#: Why a call's side, or a check's origin, was not replayed.
WhyNot = Refusal | Incomplete


def refusal(e: Exception) -> Refusal:
    """The reason a :class:`~ptdbg_tui.compare.replay.harness.Refused` carries: the value the runner
    raised it with, or the :class:`Message` it was raised with."""
    why = e.args[0] if e.args else ""
    return Message(message=str(e)) if isinstance(why, str) else why
