"""Where one dump's first NaN or Inf comes from, without a second dump (``ptdbg-tui check``).

The calls are walked in execution order. The first call that holds a non-finite tensor is where the
values start: when some output is non-finite while every input is finite, that call made them (its
kernel, or the range of its dtype: a replay in float64 tells which, :mod:`~ptdbg_tui.compare.replay
.nonfinite`); when an input already is, no dumped call made it — it comes in with the data, or through
a value made outside the dumped calls. Every later non-finite value is inherited. A call's inputs are
the diagnosis' (:mod:`~.diagnose`): a forward call's input entries; a backward call's incoming gradients
and its forward call's tensors.

A tensor is judged by its statistics where they are finite (a finite max, min and mean leave no NaN or
Inf), else by its tensor file where the dump has one (which counts them), else by the statistics alone.
msprobe's ``overflow_check`` looks for the same first call, one kernel at a time on the device.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from ptdbg_tui.compare.diagnosis.diagnose import MODULE_PREFIX
from ptdbg_tui.compare.diagnosis.replay_reasons import WhyNot
from ptdbg_tui.compare.metrics.settled import overwritten_input
from ptdbg_tui.compare.ops import in_place
from ptdbg_tui.formats.naming import BACKWARD, FORWARD, OUTPUT_KINDS, EntryName
from ptdbg_tui.formats.records import Frame, StackRecord, TensorRecord
from ptdbg_tui.formats.sites import stack_site

#: The statistics by position in a record (the fourth, the norm, is left out: the original writes its
#: ``"Nan"`` sentinel there for tensors it has no norm of).
STAT_NAMES = ("max", "min", "mean")
#: A statistic written as a word: the original's sentinel, which says no value, not a NaN.
_SENTINEL = "Nan"

#: ``count(record)``: the NaN and Inf elements its tensor file holds, or None where it has none.
Count = Callable[[TensorRecord], tuple[int, int] | None]


@dataclass(frozen=True, slots=True)
class NonFinite:
    """One recorded tensor that holds NaN or Inf: counted in its tensor file, or told by its statistics
    (``nan``/``inf`` None, ``stats`` the statistics that are not finite)."""

    entry: str  # its argument within the call (``output.0``)
    dtype: str
    nan: int | None = None
    inf: int | None = None
    stats: tuple[tuple[str, float], ...] = ()  # (name, value) of each non-finite statistic


class OriginKind(Enum):
    """Where a dump's first non-finite value comes from."""

    KERNEL = "kernel"  # a call's output is non-finite while its inputs are finite
    DATA = "data"  # a call's input already is, and no dumped call made it


class Overflow(Enum):
    """What the float64 replay of an origin says of its non-finite outputs."""

    OVERFLOW = "overflow"  # the true result exceeds the output dtype's range
    KERNEL_WRONG = "kernel wrong"  # the true result is finite and in range
    UNDEFINED = "undefined"  # the float64 result is NaN too: the inputs lie outside the function's domain


@dataclass(frozen=True, slots=True)
class OriginReplay:
    """The float64 re-run of the origin call on its recorded inputs, against its recorded outputs."""

    outcome: Overflow
    entry: str  # the output judged (the first non-finite one)
    dtype: str  # its recorded dtype
    largest: float  # the float64 result's largest magnitude where the record is not finite
    limit: float | None  # the dtype's largest finite value, where known


@dataclass(slots=True)
class NonFiniteOrigin:
    """The call where a dump's non-finite values start, and what is known of it."""

    call: str
    direction: str
    kind: OriginKind
    found: list[NonFinite]  # KERNEL: its non-finite outputs; DATA: its non-finite inputs
    stack: StackRecord | None = None
    module: str = ""  # the innermost module it ran in (``encoder.fc · Linear``), where known
    replay: OriginReplay | None = None
    not_replayed: WhyNot | None = None  # why there is no replay (None when it ran, or for DATA)

    @property
    def site(self) -> Frame | None:
        return stack_site(self.stack)


def _stat_nonfinite(rec: TensorRecord) -> tuple[tuple[str, float], ...] | None:
    """The statistics of ``rec`` that are not finite; None where it has none to tell."""
    if not rec.has_stats or len(rec.stats) < len(STAT_NAMES):
        return None
    out: list[tuple[str, float]] = []
    told = False
    for name, raw in zip(STAT_NAMES, rec.stats, strict=False):
        if isinstance(raw, str) and raw != _SENTINEL:
            try:
                value = float(raw)  # msprobe's words: "inf", "-inf", "nan"
            except ValueError:
                continue
        elif isinstance(raw, (int, float)) and not isinstance(raw, bool):
            value = float(raw)
        else:
            continue
        told = True
        if not math.isfinite(value):
            out.append((name, value))
    return tuple(out) if told else None


def nonfinite(rec: TensorRecord, count: Count) -> NonFinite | None:
    """``rec`` as a :class:`NonFinite` where it holds NaN or Inf, else None (finite, or no value)."""
    if rec.is_scalar or rec.is_none or rec.entry is None:
        return None
    stats = _stat_nonfinite(rec)
    if stats == ():
        return None  # finite statistics: no file read
    counted = count(rec)
    if counted is not None:
        nan, inf = counted
        return NonFinite(rec.entry.arg, rec.dtype, nan, inf, stats or ()) if nan or inf else None
    return NonFinite(rec.entry.arg, rec.dtype, stats=stats) if stats else None


def _calls(records: Sequence[TensorRecord]) -> dict[str, list[TensorRecord]]:
    """Each call's records, calls in execution order: API calls where the dump has any (a module's
    output is its last API call's), else the modules'."""
    by_call: dict[str, list[TensorRecord]] = {}
    for rec in sorted(records, key=lambda r: r.order):
        e = rec.entry
        if e is not None and e.direction in (FORWARD, BACKWARD):
            by_call.setdefault(rec.call, []).append(rec)
    apis = {c: recs for c, recs in by_call.items() if recs[0].entry and recs[0].entry.prefix != MODULE_PREFIX}
    return apis or by_call


def _judged_input(entry: EntryName, inputs_after_call: bool) -> bool:
    """Whether an input entry holds what the call was given: not the first input of an op that
    overwrites it (``uniform_``: uninitialised memory, not data), nor of an in-place op whose tool
    records its inputs after the call (the original: what it wrote, its output)."""
    if overwritten_input(entry):
        return False
    written = entry.direction == FORWARD and entry.path[:1] == (0,) and in_place(entry.op)
    return not (inputs_after_call and written)


def find_origin(
    records: Sequence[TensorRecord],
    stacks: Mapping[str, StackRecord],
    count: Count,
    inputs_after_call: bool = False,
) -> NonFiniteOrigin | None:
    """The first call of one dump that holds a non-finite value, as its origin; None when none does.
    ``inputs_after_call``: the dump's tool records a forward's inputs after the call
    (:class:`~ptdbg_tui.formats.dialects.Dialect`)."""
    calls = _calls(records)
    for call, recs in calls.items():
        entry = recs[0].entry
        assert entry is not None
        outs = [r for r in recs if r.entry is not None and r.entry.kind in OUTPUT_KINDS]
        ins = [
            r
            for r in recs
            if r.entry is not None
            and r.entry.kind not in OUTPUT_KINDS
            and _judged_input(r.entry, inputs_after_call)
        ]
        if entry.direction == BACKWARD and entry.forward_call != call:
            ins += calls.get(entry.forward_call, [])
        bad_in = [f for r in ins if (f := nonfinite(r, count)) is not None]
        stack = stacks.get(entry.forward_call) or stacks.get(call)
        if bad_in:
            return NonFiniteOrigin(call, entry.direction, OriginKind.DATA, bad_in, stack)
        bad_out = [f for r in outs if (f := nonfinite(r, count)) is not None]
        if bad_out:
            return NonFiniteOrigin(call, entry.direction, OriginKind.KERNEL, bad_out, stack)
    return None
