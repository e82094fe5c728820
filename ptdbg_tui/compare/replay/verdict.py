"""Whether a side's kernel is wrong on its own inputs: its recorded results against the float64 replay,
judged against the result dtype's rounding and how much rounding-sized changes of the inputs move the
result (its conditioning: a sum of near-cancelling terms moves far), and tested for a one-sided shift
(rounding errors average out over many elements; a biased kernel's do not).

Both sides are judged, so the user learns "NPU kernel wrong (error 0.29, allowed 2e-05); bench 3e-07",
or "both within rounding: the difference is inherited". No torch here: the arrays come from
:mod:`~.run`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

import numpy as np

from ptdbg_tui.compare.diagnosis.findings import fmt_error
from ptdbg_tui.compare.diagnosis.propagation import MARGIN, own_rounding
from ptdbg_tui.compare.metrics.errors import unit_roundoff
from ptdbg_tui.compare.model import ErrorMeasures

#: A shift shared by all elements is judged once there are this many (fewer cannot tell it from rounding).
BIAS_MIN_ELEMENTS = 64
#: The largest mean shift honest rounding leaves, as a fraction of what it may leave on one element:
#: ``1/√n`` of it for ``n`` elements, never below this fraction (kernels of one precision may share a
#: sub-ulp lean: another libm, another order of accumulation).
BIAS_FLOOR = 1 / 32
#: A mean error is told from chance only this many of its standard errors away from 0: a replay judges
#: hundreds of results, and errors that share an input (one rounded weight in many sums) lean together
#: (a conv's weight gradient under bf16 autocast, no fault, leaned 4.6 standard errors and was called
#: wrong; bench/replay.py's one-sided kernels are still confirmed at 8).
LEAN_SIGMAS = 8.0
#: What torch's own CPU kernel in the recorded dtypes does is honest: the side may do this many times
#: worse (error or lean) before it is wrong.
HONEST_MARGIN = 2 * MARGIN

#: A result's error within its allowance is shown with that allowance from this size up: an error of
#: 0.96 "within rounding" is so only where cancellation allows 7.7, which the words must say.
SHOWN_ALLOWED = 0.01


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


#: Why a rebuild from the records alone may lack arguments.
NO_KEYWORDS = "the tool that wrote this dump does not record keyword arguments"
NO_SIDECAR_LINE = "the dump's call sidecar holds no line for it (truncated or damaged)"


@dataclass(frozen=True, slots=True)
class SideVerdict:
    """One side's kernel on its own inputs."""

    error: float  # the largest relative error of a result against the float64 replay
    allowed: float  # what rounding and conditioning allow it (the margin included)
    bias: float  # the mean signed error of that result, relative to its mean magnitude
    bias_allowed: float
    output: str  # the result judged (the worst)

    @property
    def wrong(self) -> bool:
        return self.error > self.allowed or abs(self.bias) > self.bias_allowed

    @property
    def text(self) -> str:
        """The side's figures in words (the repro's docstring and the replay's words quote them)."""
        if self.error > self.allowed:
            return f"error {fmt_error(self.error)}, allowed {fmt_error(self.allowed)}"
        if abs(self.bias) > self.bias_allowed:
            return (
                f"one-sided: mean error {self.bias:+.2g} where unbiased rounding allows "
                f"±{fmt_error(self.bias_allowed)} (error {fmt_error(self.error)})"
            )
        if self.error >= SHOWN_ALLOWED:  # "within rounding (NPU 0.96 …)" read as 96% of rounding
            return f"{fmt_error(self.error)} of {fmt_error(self.allowed)} allowed"
        return f"{fmt_error(self.error)}"


def _floor(dtype: str) -> ErrorMeasures:
    u = unit_roundoff(dtype) or 2.0**-24
    return ErrorMeasures(0.0, 0.0, 0.0, 0.0, 0, u)


def lean(diff: np.ndarray, reference: np.ndarray) -> tuple[float, float]:
    """The mean one-sided error relative to the mean magnitude: an offset (all elements up) or a scale
    (all magnitudes up), whichever leans more; about 0 for rounding. With its standard error: the spread
    of the same terms over √n, how far chance moves such a mean."""
    n = reference.size
    magnitude = float(np.mean(np.abs(reference))) if n else 0.0
    if magnitude <= 0:
        return 0.0, 0.0
    terms = (diff, diff * np.sign(reference))
    means = [float(np.mean(t)) / magnitude for t in terms]
    k = 0 if abs(means[0]) >= abs(means[1]) else 1
    return means[k], float(np.std(terms[k])) / magnitude / math.sqrt(n)


def judge_result(
    recorded: np.ndarray,
    reference: np.ndarray,
    sensitivity: float,
    dtype: str,
    name: str,
    honest: tuple[float, float] | None = None,
    op: str = "",
) -> SideVerdict:
    """One recorded result against its float64 replay (``honest``: the error and lean of torch's own CPU
    kernel in the recorded dtypes, which any allowance covers; ``op``: the call's op, whose own rounding
    is a reduction's single one where it is one)."""
    finite = np.isfinite(recorded) & np.isfinite(reference)
    if not np.array_equal(np.isfinite(recorded), np.isfinite(reference)):
        return SideVerdict(math.inf, 0.0, 0.0, math.inf, name)  # NaN/Inf the replay does not make (or v.v.)
    r, f = recorded[finite], reference[finite]
    den = float(np.linalg.norm(f))
    diff = r - f
    num = float(np.linalg.norm(diff))
    error = num / den if den > 0 else (0.0 if num == 0 else math.inf)
    rounding = own_rounding(_floor(dtype), op)
    allowed = MARGIN * (sensitivity + rounding)
    n = int(f.size)
    bias, chance = lean(diff, f)
    # rounding and rounding-sized input changes move each element either way: their mean shrinks as 1/√n;
    # and a mean within LEAN_SIGMAS standard errors of 0 is what these very errors leave by chance
    bias_allowed = (
        max(MARGIN * (rounding + sensitivity) * max(1 / math.sqrt(n), BIAS_FLOOR), LEAN_SIGMAS * chance)
        if n >= BIAS_MIN_ELEMENTS
        else math.inf
    )
    if honest is not None and all(math.isfinite(v) for v in honest):
        allowed = max(allowed, HONEST_MARGIN * honest[0])
        bias_allowed = max(bias_allowed, HONEST_MARGIN * abs(honest[1]))
    return SideVerdict(error, allowed, bias, bias_allowed, name)


def judge_side(
    results: Mapping[object, tuple[np.ndarray, np.ndarray, float]],
    dtypes: Mapping[object, str],
    names: Mapping[object, str],
    honest: Mapping[object, tuple[float, float]] | None = None,
    op: str = "",
) -> SideVerdict:
    """A side's verdict: its worst result (wrong ones first, then by how far beyond what is allowed)."""
    verdicts = [
        judge_result(rec, ref, sens, dtypes[p], names[p], (honest or {}).get(p), op)
        for p, (rec, ref, sens) in results.items()
    ]
    return max(verdicts, key=lambda v: (v.wrong, _beyond(v)))


def _beyond(v: SideVerdict) -> float:
    over = v.error / v.allowed if v.allowed > 0 else math.inf
    lean = abs(v.bias) / v.bias_allowed if v.bias_allowed > 0 else 0.0
    return max(over, lean)


@dataclass(frozen=True, slots=True)
class CallReplay:
    """What the replay of one call says, both sides."""

    call: str
    npu: SideVerdict | str  # a verdict, or why that side was not replayed
    bench: SideVerdict | str
    complete: bool = True  # every argument was known (else the bench's replay vouches for the rebuild)
    seconds: float = 0.0
    differs: str = ""  # the non-tensor arguments the two runs passed differently, in words
    lacking: str = NO_KEYWORDS  # why an incomplete rebuild lacks arguments

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
