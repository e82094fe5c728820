"""A diagnosis' notes as values (:data:`Note`): a check that could not be done and why, what the scripts
chose, what another step says of this one, an update that amplified rounding noise;
:func:`ptdbg_tui.compare.report.words.note_text` says each.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Sidecar(str, Enum):
    """A file beside a dump that a check reads."""

    CALLS = "call sidecar"  # the calls' keyword arguments
    MODULES = "module sidecar"  # the culprit's module
    STRUCTURE = "module structure"  # the runs' models


@dataclass(frozen=True, slots=True, kw_only=True)
class Unread:
    """A sidecar that is there but could not be read (``reason``): its check was not done."""

    sidecar: Sidecar
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Autocast:
    """The NPU run makes ``calls`` calls under another autocast than the bench run (a dtype, or None
    for none), the first of them ``first``: a precision the scripts chose."""

    calls: int
    npu: str | None
    bench: str | None
    first: str


class Carried(str, Enum):
    """What a step's note says of the suspects it takes the place of (:mod:`.steps`)."""

    INHERITED = "inherited"  # parameters differ on entry: an earlier step's culprit's error
    STATE_INHERITED = "state inherited"  # the optimizer's state differs on entry: the same
    NOISE = "noise"  # what an adaptive update made of rounding noise at a step that named nothing
    ROUNDING = "rounding"  # no more than the gradients differed at a step that named nothing
    NOT_TOLD_APART = "not told apart"  # from statistics, a call's own error hidden by the earlier one's


@dataclass(frozen=True, slots=True, kw_only=True)
class StepNote:
    """Suspects of step ``step`` that an earlier step, ``origin``, explains (``kind`` says how): that
    step's culprit (``call``, or where error entered before it), as its statistics (``from_statistics``)
    show it. Only the values its kind says are set."""

    kind: Carried
    step: int | None
    origin: int | None
    from_statistics: bool = False
    call: str = ""
    entered: bool = False  # the earlier error entered before ``call``, outside the dumped calls
    bench_only: bool = False  # it entered after calls only the bench run makes
    names: tuple[str, ...] = ()  # STATE_INHERITED: the state's tensors; NOISE: the updates' calls
    scored: tuple[tuple[str, float], ...] = ()  # NOT_TOLD_APART: the calls and their scores
    gradient: float | None = None  # ROUNDING: the worst gradient's error there (None: not compared)


@dataclass(frozen=True, slots=True, kw_only=True)
class Amplified:
    """An update (``call``) within what its quotient may carry, and only with that: its numerator's
    rounding noise, which an adaptive optimizer turns into steps of full size; no kernel at fault. The
    other updates found so are named after it."""

    call: str
    output: str
    error: float  # the output's error
    allowed: float  # what rounding and what came in allow it, without the quotient's share
    numerator: str
    numerator_error: float
    flips: int  # the numerator's elements that change sign between the runs
    elements: int  # of its elements
    with_it: float  # what is allowed with the quotient's share
    others: tuple[str, ...] = ()


Note = Unread | Autocast | StepNote | Amplified
