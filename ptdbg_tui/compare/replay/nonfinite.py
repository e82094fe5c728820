"""The float64 replay of a dump's non-finite origin (:mod:`~ptdbg_tui.compare.diagnosis.nonfinite`): the
call re-run on its own recorded inputs tells an overflow (the true result lies beyond the output
dtype's range: a loss scale or a range problem, not the kernel) from a kernel wrong on its inputs (the
true result is finite and in range, the recorded one is not).

:func:`replay_origin` is what a replay worker runs (torch imported there, in :mod:`~.run`); the verdict,
:func:`judge_overflow`, needs numpy alone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

import numpy as np

from ptdbg_tui.compare.diagnosis.nonfinite import OriginReplay, Overflow
from ptdbg_tui.compare.diagnosis.replay_reasons import Failed, Fixed, WhyNot, refusal
from ptdbg_tui.compare.model import Row
from ptdbg_tui.compare.replay.calls import SideSource, side_plan
from ptdbg_tui.compare.replay.plan import NotReplayable
from ptdbg_tui.formats import float8

#: bfloat16's largest finite value (numpy has no bfloat16).
BFLOAT16_MAX = 3.3895313892515355e38


@cache
def dtype_max(dtype: str) -> float | None:
    """The largest finite value of a recorded floating dtype (``torch.float16``: 65504); None if unknown."""
    name = dtype.removeprefix("torch.")
    if name == "bfloat16":
        return BFLOAT16_MAX
    if name in float8.FORMATS:
        values = float8.table(name)
        return float(np.max(np.abs(values[np.isfinite(values)])))
    try:
        return float(np.finfo(np.dtype(name)).max)
    except (TypeError, ValueError):  # not a numpy dtype, or not a floating one
        return None


def rounds_to_inf(limit: float) -> float:
    """The smallest magnitude a correctly rounded result takes to Inf in a dtype whose largest value is
    ``limit``: half an ulp above it (float16: 65520; a value between 65504 and that rounds to 65504)."""
    return (limit + 2.0 ** math.ceil(math.log2(limit))) / 2


def judge_overflow(
    results: Mapping[Any, tuple[np.ndarray, np.ndarray, float]],
    dtypes: Mapping[Any, str],
    names: Mapping[Any, str],
) -> OriginReplay | WhyNot:
    """The replay's word on the first recorded result that is not finite (``results``: by path, the
    recorded values and the float64 ones, as :class:`~.run.Replayed` holds them); why none where the
    recorded results are all finite (a file that disagrees with its statistics)."""
    for path, (recorded, reference, _) in results.items():
        bad = ~np.isfinite(recorded)
        if not bad.any():
            continue
        true = np.abs(reference[bad])
        limit = dtype_max(dtypes[path])
        largest = float(np.max(true)) if not np.isnan(true).all() else float("nan")
        if np.isnan(true).any():
            outcome = Overflow.UNDEFINED
        elif np.isinf(largest) or (limit is not None and largest >= rounds_to_inf(limit)):
            outcome = Overflow.OVERFLOW
        else:
            outcome = Overflow.KERNEL_WRONG
        return OriginReplay(outcome, names[path], dtypes[path], largest, limit)
    return Fixed.ALL_FINITE


def replay_origin(rows: Sequence[Row], call: str, source: SideSource) -> OriginReplay | WhyNot:
    """Re-run ``call`` of one dump (``rows``: its records as a pair's NPU side) in float64 and judge its
    non-finite outputs; never raises (why it was not replayed is the answer)."""
    from ptdbg_tui.compare.replay.harness import Refused
    from ptdbg_tui.compare.replay.run import run

    plan, tf32 = side_plan(rows, "npu", call, source)
    if isinstance(plan, NotReplayable):
        return plan.why
    try:
        done = run(plan, tf32=tf32)
    except Refused as e:
        return refusal(e)
    except Exception as e:  # a bug or an odd dump: the origin is still named
        return Failed(error=type(e).__name__, message=str(e))
    return judge_overflow(done.results, done.dtypes, done.names)
