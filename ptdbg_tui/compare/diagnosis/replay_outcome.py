"""What a replay found, as values the diagnosis holds and the words module says: the outcome of one
call's replay and each side's figures. Here, beneath both, so that replay (which judges) imports the
diagnosis and the diagnosis (which holds its findings) never imports replay."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from ptdbg_tui.compare.diagnosis.evidence import Argument
from ptdbg_tui.compare.diagnosis.replay_reasons import Lacks, WhyNot


class ReplayOutcome(str, Enum):
    """What the replay of a call found; its value is the word the replay CSV's Outcome column and the
    report's counts use (:mod:`ptdbg_tui.compare.report.words`)."""

    CONFIRMED = "confirmed"  # the NPU kernel is wrong on its own inputs
    REFUTED = "refuted"  # both sides compute right on their own inputs: the difference is inherited
    INCONCLUSIVE = "inconclusive"  # the rebuild or the bench's kernel leaves it open
    NOT_REPLAYED = "not replayed"  # the NPU side could not be replayed
    ARGUMENTS = "different arguments"  # each kernel right on its own, the runs' arguments differ

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


@dataclass(frozen=True, slots=True)
class SideVerdict:
    """One side's kernel on its own inputs (:func:`ptdbg_tui.compare.report.words.side_text` says its
    figures)."""

    error: float  # the largest relative error of a result against the float64 replay
    allowed: float  # what rounding and conditioning allow it (the margin included)
    bias: float  # the mean signed error of that result, relative to its mean magnitude
    bias_allowed: float
    output: str  # the result judged (the worst)

    @property
    def wrong(self) -> bool:
        return self.error > self.allowed or abs(self.bias) > self.bias_allowed


@dataclass(frozen=True, slots=True)
class CallReplay:
    """What the replay of one call says, both sides."""

    call: str
    npu: SideVerdict | WhyNot  # a verdict, or why that side was not replayed
    bench: SideVerdict | WhyNot
    complete: bool = True  # every argument was known (else the bench's replay vouches for the rebuild)
    seconds: float = 0.0
    differs: tuple[Argument, ...] = ()  # the non-tensor arguments the two runs passed differently
    lacking: Lacks = Lacks.NO_KEYWORDS  # why an incomplete rebuild lacks arguments

    @property
    def outcome(self) -> ReplayOutcome:
        npu, bench = self.npu, self.bench
        if not isinstance(npu, SideVerdict):
            return ReplayOutcome.NOT_REPLAYED
        bench_ok = isinstance(bench, SideVerdict) and not bench.wrong
        if npu.wrong:
            if bench_ok or (self.complete and not isinstance(bench, SideVerdict)):
                return ReplayOutcome.CONFIRMED
            return ReplayOutcome.INCONCLUSIVE
        if self.differs:  # both kernels right on their own inputs and arguments: the arguments differ
            return ReplayOutcome.ARGUMENTS
        # the NPU's result matches its replay, which also shows the rebuild right
        if isinstance(bench, SideVerdict) and bench.wrong:
            return ReplayOutcome.INCONCLUSIVE
        return ReplayOutcome.REFUTED

    @property
    def confirmed(self) -> bool:
        """The NPU kernel is wrong on its own inputs."""
        return self.outcome is ReplayOutcome.CONFIRMED
