"""A suspect's evidence as values: the numbers, names and sites behind each kind of finding, one frozen
dataclass per way of finding it (:data:`Evidence`). :func:`ptdbg_tui.compare.report.words.evidence_text`
says each; the app takes the score apart from the rest by these values, never from the words.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from ptdbg_tui.compare.diagnosis.propagation import Judgement


@dataclass(frozen=True, slots=True, kw_only=True)
class Judged:
    """A judged call's own numbers (its inputs' error, its outputs', what rounding allows)."""

    judgement: Judgement


@dataclass(frozen=True, slots=True, kw_only=True)
class Entered:
    """Error that entered before a call, outside the dumped calls: ``judgement``'s numbers, and where."""

    judgement: Judgement
    way: str  # the call's direction: ``forward``/``backward``
    previous: str = ""  # the call dumped right before it in that direction ("" where it is the first)
    running: bool = False  # through a running statistic that training calls update in place
    bench_only: bool = False  # ``previous`` is a call only the bench run makes
    skipped: tuple[str, ...] = ()  # calls only the bench run makes before it, other than ``previous``


@dataclass(frozen=True, slots=True, kw_only=True)
class OnParameter:
    """A module parameter that differs at its first use in a step (``judgement``'s numbers), with the
    others that do."""

    judgement: Judgement
    parameter: str
    others: tuple[str, ...] = ()
    #: where its gradients agreed at the step before (that step, their error) so the update between
    #: that step and this one made it differ (:mod:`.steps`)
    agreed: tuple[int | None, float, int | None] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class NpuOnly:
    """A call only the NPU run makes, after which ``tensor`` carries error (``judgement``'s numbers)."""

    judgement: Judgement
    call: str
    tensor: str


@dataclass(frozen=True, slots=True, kw_only=True)
class OneRunChange:
    """Calls only one run makes (the NPU's: ``npu``), from ``first`` to ``call``, between a call whose
    output ``source`` the other run passes on unchanged as ``tensor`` and the call that reads it: they
    change it beyond rounding (``judgement``: that change, allowed, score). Seen where the tensor's
    error, weighed against the largest before, could not tell them from the drift that earlier steps
    left in every activation."""

    judgement: Judgement
    npu: bool
    first: str
    call: str
    source: str
    tensor: str
    carries: float  # ``tensor``'s error against the bench's


@dataclass(frozen=True, slots=True, kw_only=True)
class Argument:
    """A non-tensor argument whose values differ: where it sits (``input.1``) and each run's value."""

    place: str
    npu: str
    bench: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Arguments:
    """The runs pass different non-tensor arguments to the call."""

    values: tuple[Argument, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class WrittenChange:
    """What a call only one run makes did to a tensor: changed it in place, or made another of it."""

    in_place: bool
    tensor: str  # the tensor it wrote (in place) or made its output of
    made: str  # its output
    values: tuple[tuple[str, str], ...]  # its non-tensor arguments: (place, value)
    change: float  # the relative change
    scale: bool  # measured as a scale (its max, min and norm moved by one factor)
    allowed: float
    score: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Written:
    """A call only one run makes that wrote a tensor a later call reads: the NPU's (``npu``) is the
    suspect itself; the bench's is error entering after it."""

    change: WrittenChange
    npu: bool
    call: str  # the call that wrote it
    wrote: bool  # in place (else: made it)
    tensor: str  # the tensor read
    carries: float  # its error against the other run's


@dataclass(frozen=True, slots=True, kw_only=True)
class StillRandom:
    """A random op whose draws differed at step ``step``: statistics cannot show they still do."""

    step: int | None
    judgement: Judgement  # its call's judgement at this step


class Unjudged(Enum):
    """Why the two dumps give no verdict on a call."""

    OUTPUTS_NOT_COMPARED = "outputs not compared"
    NO_OUTPUTS = "no outputs recorded"
    INPUTS_NOT_COMPARED = "inputs not compared"
    NO_VERDICT = "no verdict"  # compared, yet the rule says nothing (see ``propagation.judge``)


@dataclass(frozen=True, slots=True, kw_only=True)
class TwoDumps:
    """What the two dumps said of a call the replay found wrong: its judgement, or why it was not judged
    (neither: not judged)."""

    judgement: Judgement | None = None
    why_not: Unjudged | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Checksums:
    """An output whose checksum differs where every input's is equal (same device, two runs)."""

    tensor: str
    npu: str
    bench: str
    statistics: bool  # both sides recorded statistics, which agree within rounding


@dataclass(frozen=True, slots=True, kw_only=True)
class Undumped:
    """A call taking a tensor no dump records (``tensor``, in words): its outputs' error may come in
    with it."""

    tensor: str
    output_error: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Departs:
    """A collective whose result (``entry``) on this rank departs from its ``peers``', which agree among
    themselves (``by_bench``: two ranks, and the bench run told which one departs): both statistics."""

    entry: str
    peers: tuple[int, ...]
    mine: tuple[float, ...]
    theirs: tuple[float, ...]
    by_bench: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class OnOneRank:
    """A collective wrong on rank ``rank`` alone (its inputs agree with the bench run's on every rank of
    its group, of ``group`` ranks where its shapes tell; ``peers`` match theirs): what was found of it
    before, and that."""

    before: Evidence
    rank: int
    peers: tuple[int, ...]
    group: int | None


Evidence = (
    Judged
    | Entered
    | OnParameter
    | NpuOnly
    | OneRunChange
    | Arguments
    | Written
    | StillRandom
    | TwoDumps
    | Checksums
    | Undumped
    | Departs
    | OnOneRank
)
