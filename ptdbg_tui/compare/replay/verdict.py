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
from collections.abc import Hashable, Mapping
from typing import TypeVar

import numpy as np

from ptdbg_tui.compare.diagnosis.propagation import MARGIN, own_rounding
from ptdbg_tui.compare.diagnosis.replay_outcome import (
    SideVerdict,
)
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


#: What a side's results are keyed by (an argument path).
K = TypeVar("K", bound=Hashable)


def judge_side(
    results: Mapping[K, tuple[np.ndarray, np.ndarray, float]],
    dtypes: Mapping[K, str],
    names: Mapping[K, str],
    honest: Mapping[K, tuple[float, float]] | None = None,
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
