"""A diagnosis' notes as values (:data:`Note`): a check that could not be done and why, what the scripts
chose, what another step says of this one, an update that amplified rounding noise;
:func:`ptdbg_tui.compare.report.words.note_text` says each. And a job's notes (:data:`JobNote`): what was
not compared or not read, and why a pair says nothing of the NPU run (:data:`NoVerdict`);
:func:`ptdbg_tui.compare.report.words.job_note_text` says each.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from ptdbg_tui.formats.layout import LayoutProblem, SameDump, Side, StatisticsOnly, Unpaired
from ptdbg_tui.formats.records import RepeatedNames


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
    #: parameters differ on entry to the first step dumped, a later one: from steps not dumped
    NOT_DUMPED = "not dumped"


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
    #: STATE_INHERITED: the state's tensors; NOISE: the updates' calls; NOT_DUMPED: the parameters
    names: tuple[str, ...] = ()
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


@dataclass(frozen=True, slots=True, kw_only=True)
class NoEntries:
    """A side's dump file (``records``) holds no entries: no row is compared."""

    side: Side
    records: Path


#: Why a pair's rows say nothing about the NPU run: one dump file on both sides, or a side empty.
NoVerdict = SameDump | NoEntries


@dataclass(frozen=True, slots=True, kw_only=True)
class Repeated:
    """Entry names repeat in a side's dump file (``records``)."""

    side: Side
    records: Path
    repeats: RepeatedNames


@dataclass(frozen=True, slots=True, kw_only=True)
class NotCompared:
    """A pair not compared: the error's message (``fault``), or ``None`` where no worker of the cluster
    can read both its folders."""

    fault: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class OnPair:
    """A note on one pair (``pair``: its label)."""

    pair: str
    what: StatisticsOnly | NoVerdict | Repeated | NotCompared


@dataclass(frozen=True, slots=True, kw_only=True)
class ScanProblem:
    """What could not be read while a side's dumps were looked for."""

    side: Side
    problem: LayoutProblem


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextFailed:
    """The verdict across ranks and steps failed (``fault``: the error's message); each pair's stands."""

    fault: str


class Undecided(Enum):
    """Where two dumps cannot name a kernel and a replay of every call can (:mod:`.replayer`)."""

    FAILING = "failing"  # rows fail where the inputs already differ
    PARAMETERS = "parameters"  # parameters differ on entry


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayCould:
    """A compare without ``--replay`` where replaying every call could still name a kernel: the pairs
    (``labels``) and what their verdicts say instead (``said``, or ``None`` where they differ)."""

    labels: tuple[str, ...]
    said: Undecided | None


@dataclass(frozen=True, slots=True, kw_only=True)
class NotReplayed:
    """A compare that did not replay (``why``: no torch, ``--no-replay``), where pairs (``labels``) have
    suspects the replay would have confirmed or refuted."""

    why: str
    labels: tuple[str, ...]


#: What a job's report says after its pairs: dumps not compared or not read, pairs compared from
#: statistics only, a check that failed, a replay that could still decide.
JobNote = ScanProblem | Unpaired | OnPair | ContextFailed | ReplayCould | NotReplayed
