"""What the diagnosis finds, as values: the kinds of finding (:class:`~.kinds.Kind`, named here), a
suspect call with its evidence, the diagnosis of one pair. Their words are
:mod:`ptdbg_tui.compare.report.words`.

A suspect is where the two runs start to differ, by one of these kinds:

- ``growth``, ``nan``, ``zeros``: the call's outputs carry more error than its inputs, the op and
  rounding explain (:mod:`~ptdbg_tui.compare.diagnosis.propagation`): a kernel that computes wrong;
- ``bench_nan``: the bench output gains NaN/Inf from finite inputs, the NPU's is finite: the bench run is
  no reference from there on (no NPU kernel at fault);
- ``enters``: an input carries error that nothing dumped before it carried (code no hook saw);
- ``parameters``: a module parameter differs at its first use in a step, beyond rounding (the update
  between steps, or an earlier step, made the runs differ);
- ``unpaired``: a call only the NPU run made, after which the data differs;
- ``arguments``: the runs pass different non-tensor arguments to the same call (the scripts differ);
- ``shape``: an output's shape differs where the inputs' shapes and arguments agree (a kernel, or a
  keyword argument only the call sidecar records);
- ``random``: a random op's draws differ (the generators are not aligned): no numerical fault;
- ``collective``: a collective whose result on one rank departs from the other ranks' (cross-rank);
- ``rank_alone``: a collective wrong on one rank alone: its inputs agree with the bench run's on every
  rank of its group, its result differs on that rank only (cross-rank, against the bench run);
- ``replayed``: a call whose kernel, re-run in float64 on its own recorded inputs, is wrong;
- ``nondeterministic``: two runs on the same device, compared by checksums: a call whose inputs are
  bit-equal and whose output is not.

A replay (:mod:`~ptdbg_tui.compare.replay`) may confirm a suspect (its kernel is wrong on its own
inputs) or refute it (both sides compute right on their inputs: the difference is inherited); the
suspect holds its :class:`~ptdbg_tui.compare.diagnosis.replay_outcome.CallReplay`.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field, fields, replace
from enum import Enum
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from ptdbg_tui.compare.diagnosis.differences import RunsDiffer
from ptdbg_tui.compare.diagnosis.evidence import Evidence, Unjudged
from ptdbg_tui.compare.diagnosis.kinds import Kind
from ptdbg_tui.compare.diagnosis.notes import Note, NoVerdict
from ptdbg_tui.compare.diagnosis.propagation import (
    BENCH_NAN,
    ENTERS,
    Judgement,
)
from ptdbg_tui.compare.model import Row
from ptdbg_tui.formats.frozen import quick_frozen
from ptdbg_tui.formats.manifest import ManifestDifference
from ptdbg_tui.formats.records import Frame, StackRecord
from ptdbg_tui.formats.sites import stack_site

if TYPE_CHECKING:
    from ptdbg_tui.compare.diagnosis.replay_outcome import CallReplay

PARAMETERS = Kind.PARAMETERS
UNPAIRED = Kind.UNPAIRED
ARGUMENTS = Kind.ARGUMENTS
RANDOM = Kind.RANDOM
COLLECTIVE = Kind.COLLECTIVE
RANK_ALONE = Kind.RANK_ALONE
RECEIVED = Kind.RECEIVED
REPLAYED = Kind.REPLAYED
NONDETERMINISTIC = Kind.NONDETERMINISTIC
SHAPE = Kind.SHAPE

#: A rank's own collective findings (across ranks): that rank makes the error, it receives none.
OWN_COLLECTIVE = frozenset({COLLECTIVE, RANK_ALONE})
#: Kinds that say where the runs start to differ without a kernel at fault.
NOT_A_KERNEL = frozenset({ENTERS, PARAMETERS, UNPAIRED, ARGUMENTS, RANDOM, BENCH_NAN, RECEIVED})


@quick_frozen
class CallEvidence:
    """The verdict on one call, in numbers, or why there is none (the detail panel shows it)."""

    call: str
    direction: str
    judgement: Judgement | None  # None when it could not be judged
    why_not: Unjudged | None = None  # why it could not be judged

    @property
    def introduces(self) -> bool:
        return self.judgement is not None and self.judgement.kind is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class Unexplained:
    """Failing rows but no suspect: the first failing row and why its call is not at fault (its verdict,
    or that it could not be compared), with the calls only the NPU run made before it; or that the runs
    differ before any kernel."""

    row: str = ""  # the first failing row ("": the runs differ before any kernel)
    uncompared: bool = False  # it could not be compared
    message: str = ""  # why, where its comparison says
    verdict: CallEvidence | None = None  # its call's verdict (None: its call was not judged)
    npu_only: tuple[str, ...] = ()  # the first calls only the NPU run made before it


@dataclass(frozen=True, slots=True, kw_only=True)
class Received:
    """Across ranks: a rank (``rank``, ``rankR (stepS)``) whose first suspect, ``call``, only receives
    the error the first divergent rank (``first``, its culprit ``first_call``) made; ``entered``: it
    enters before ``call``, outside the dumped calls (``own``: on the first divergent rank itself, its
    own error from an earlier step)."""

    rank: str
    call: str
    entered: bool
    own: bool
    first: str
    first_call: str


@dataclass(slots=True, kw_only=True)
class Suspect:
    """A call where the runs start to differ, with its evidence (:mod:`ptdbg_tui.compare.report.words`
    says it)."""

    call: str  # the NPU call, e.g. ``Functional_silu_3_backward``
    api: str
    direction: str
    kind: Kind
    score: float  # times the output error exceeds what is allowed (inf for a NaN origin or a lost zero)
    evidence: Evidence  # the numbers and names behind it (words.evidence_text says them)
    judgement: Judgement
    rows: list[Row] = field(default_factory=list)
    stack: StackRecord | None = None  # the forward call's stack (where the call was made)
    seq: int = 0  # execution order: the seq of the call's first row
    step: int | None = None  # the dump's step, when known
    replay: CallReplay | None = None  # what the replay found, when it was replayed
    #: chosen for a replay that its budget did not reach: its verdict stands on the two dumps alone
    unreached: bool = False
    #: error entering right after calls only the bench run makes: the NPU run's own code lacks them (a
    #: rank that skips a gradient's division), not a collective no hook saw bringing another rank's error
    after_bench_only: bool = False
    #: the call only the bench run makes that wrote, in place and in this step, the tensor the error
    #: entered through (AdamW's decay the NPU script lacks): not an optimizer's state an earlier step left
    written_by: str = ""

    @property
    def site(self) -> Frame | None:
        return stack_site(self.stack)

    @property
    def worst_row(self) -> Row | None:
        """The output row the verdict rests on."""
        named = (r for r in self.rows if r.name == self.judgement.output)
        return next(named, self.rows[0] if self.rows else None)

    @property
    def confirmed(self) -> bool:
        """A replay found its NPU kernel wrong on its own inputs."""
        return self.replay is not None and self.replay.confirmed

    @property
    def replay_chosen(self) -> bool:
        """A replay was chosen for it: done, or not reached within its budget (either outranks, and
        says more than, the two dumps' provisional word)."""
        return self.replay is not None or self.unreached


class Unreplayed(Enum):
    """Why a pair was not replayed at all."""

    NO_VERDICT = "no verdict"  # its rows say nothing of the NPU run (one dump twice, an empty side)
    STATISTICS = "statistics"  # compared from statistics, without tensors
    BUDGET = "budget"  # the replay budget ran out before it
    UNREADABLE = "unreadable"  # a side's records or call sidecar cannot be read (any more)


@dataclass(frozen=True, slots=True)
class PairNotReplayed:
    """Why a pair was not replayed at all (:func:`ptdbg_tui.compare.report.words.pair_not_replayed_text`
    says it)."""

    why: Unreplayed
    no_verdict: NoVerdict | None = None  # NO_VERDICT: which
    reason: str = ""  # UNREADABLE: the reader's reason


class ReplayOff(Enum):
    """Why no replay will come on its own to confirm a suspect (the live engine's)."""

    UNAVAILABLE = "unavailable"  # replay cannot run here (no torch, …): the reason says why
    DIED = "died"  # the replay worker died on every call, so many times in a row
    NO_BUDGET = "no budget"  # ``--replay-budget 0``: only what the user asks for is replayed
    RAN_OUT = "ran out"  # the budget ran out with calls left


@dataclass(frozen=True, slots=True)
class NoReplay:
    """Why no replay will come on its own (:func:`ptdbg_tui.compare.report.words.no_replay_text` says
    it)."""

    why: ReplayOff
    reason: str = ""  # UNAVAILABLE: why, in the replayer's words
    deaths: int = 0  # DIED: how many times in a row


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayRun:
    """That a replay ran for a pair, or why it did not: what it found of each call is the diagnosis'
    ``replays`` (:func:`ptdbg_tui.compare.report.words.replay_run_text` says it all in one line)."""

    replayed: int = 0  # calls replayed
    refuted: tuple[str, ...] = ()  # the suspects it refuted, which are no longer suspects
    missed: int = 0  # calls chosen for it that its budget did not reach
    why_not: PairNotReplayed | None = None  # why the pair was not replayed at all (then nothing else holds)


@dataclass(slots=True)
class Diagnosis:
    """The suspects of one pair of dumps, and the evidence on every call judged."""

    suspects: list[Suspect] = field(default_factory=list)
    calls: dict[str, CallEvidence] = field(default_factory=dict)  # by NPU (else bench) call name
    compared: int = 0  # rows whose tensors or statistics were compared on both sides
    judged: int = 0  # calls judged
    original: str | None = None  # the row the original's advisor names (its first "No" row)
    failing: int = 0  # rows that fail or could not be compared (the app counts them alike)
    errors: int = 0  # of them, those that could not be compared
    unexplained: Unexplained | None = None  # failing rows but no suspect: why nothing is at fault
    replay: ReplayRun | None = None  # that a replay ran (or why not), when one was tried
    #: what other steps or ranks say of this one, and checks that could not be done
    notes: list[Note] = field(default_factory=list)
    replays: dict[str, CallReplay] = field(default_factory=dict)  # by call: what its replay found
    received: Received | None = None  # across ranks: its first suspect only receives another rank's error
    fault: str = ""  # why the diagnosis could not be made (the rows are still compared)
    #: the kind of an earlier step's culprit whose error this step's parameters (or optimizer state)
    #: carry on entry, where they do
    inherited: str = ""
    #: the updates whose quotient turned gradient elements that are rounding noise on both sides into
    #: steps of full size (an adaptive optimizer's): the NPU record of the tensor each left (dtype, shape,
    #: statistics) -> the call, so that the next step knows the parameter it wrote
    amplified: dict[tuple[Any, ...], str] = field(default_factory=dict)
    #: what differs between the runs before any kernel (their models, data, hyperparameters)
    #: (:mod:`~.runs_differ`): said before any culprit
    differ: list[RunsDiffer] = field(default_factory=list)
    #: where the runs' manifests differ (:mod:`ptdbg_tui.formats.manifest`), numeric ones first: said
    #: first of all; empty where either run has no manifest
    manifest: tuple[ManifestDifference, ...] = ()
    #: each side whose manifest is there but could not be read (``NPU``/``bench``, the reader's reason)
    manifest_unread: tuple[tuple[str, str], ...] = ()

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (a forked child's result, a cluster worker's) with the calls' evidence as plain
        tuples: as objects, a pair's thousands of them took twice as long to pickle and to load. They are
        pickled apart, at once: a forked child's pickler asks of each object it meets whether it is one of
        the parent's (~70,000 of them a pair in the tuples)."""
        return {
            name: _packed(self.calls) if name == "calls" else getattr(self, name) for name in self.__slots__
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            setattr(self, name, _unpacked(value) if name == "calls" else value)

    @property
    def culprit(self) -> Suspect | None:
        return self.suspects[0] if self.suspects else None

    @property
    def all_clear(self) -> bool:
        """Rows were judged, none fails, no call is a suspect and the runs do not differ before any kernel."""
        return bool(self.judged) and not self.suspects and not self.failing and not self.differ


def copied(diagnosis: Diagnosis) -> Diagnosis:
    """A copy of ``diagnosis`` that a stage may adjust (the steps before, the other ranks, a replay),
    ``diagnosis`` untouched: its suspects and notes are its own, the evidence on every call is shared
    (nothing adjusts it)."""
    return replace(diagnosis, suspects=[replace(s) for s in diagnosis.suspects], notes=list(diagnosis.notes))


_JUDGED = attrgetter(*(f.name for f in fields(Judgement)))
Packed = list[tuple[str, str, str, Unjudged | None, tuple[Any, ...] | None]]


def _packed(calls: dict[str, CallEvidence]) -> bytes:
    packed: Packed = [
        (key, e.call, e.direction, e.why_not, None if e.judgement is None else _JUDGED(e.judgement))
        for key, e in calls.items()
    ]
    return pickle.dumps(packed, protocol=pickle.HIGHEST_PROTOCOL)


def _unpacked(data: bytes) -> dict[str, CallEvidence]:
    packed: Packed = pickle.loads(data)  # what _packed wrote: the same pickle that carries it
    return {
        key: CallEvidence(call, direction, None if j is None else Judgement(*j), why_not)
        for key, call, direction, why_not, j in packed
    }
