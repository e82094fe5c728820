"""Where the two runs start to differ: every call of a pair judged in execution order, the ranked
suspects (:mod:`~ptdbg_tui.compare.diagnosis.findings` says what each kind means).

The original's advisor names the first failing row, which is usually downstream noise, and its
absolute thresholds miss small-magnitude and pure-scale faults while blaming rounding in fp16. Here
each call's outputs are judged against what its inputs carry (:mod:`~.propagation`): a forward call
by its inputs, a backward call by its incoming gradients and the tensors its forward call saved. On
the way, each call's inputs are checked for error that nothing dumped before explains (it entered
through code no hook saw, a parameter that differs on entry to the step, or a call only the NPU run
made), its non-tensor arguments for values that differ, and a random op for draws that differ.

Suspects are ranked in execution order (an optimizer's calls after the backward come after the
backward's suspects; the ``.grad`` they read is the backward's, so what it carries is inherited).
The first suspect is the culprit.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from ptdbg_tui.compare.diagnosis.checksums import departure, departure_evidence
from ptdbg_tui.compare.diagnosis.evidence import (
    Argument,
    Arguments,
    Entered,
    Evidence,
    Judged,
    NpuOnly,
    OneRunChange,
    OnParameter,
    Unjudged,
    Written,
    WrittenChange,
)
from ptdbg_tui.compare.diagnosis.findings import (
    ARGUMENTS,
    NONDETERMINISTIC,
    PARAMETERS,
    RANDOM,
    SHAPE,
    UNPAIRED,
    CallEvidence,
    Diagnosis,
    Suspect,
    Unexplained,
)
from ptdbg_tui.compare.diagnosis.kinds import Kind
from ptdbg_tui.compare.diagnosis.notes import Amplified
from ptdbg_tui.compare.diagnosis.propagation import (
    ENTERS,
    MARGIN,
    NORMALISED,
    QUOTIENTS,
    ROUNDINGS,
    SELECTIONS,
    STATS_SCATTER,
    Judgement,
    Operand,
    beyond_rounding,
    judge,
    judge_entry,
    one_run_change,
    own_rounding,
    selected,
)
from ptdbg_tui.compare.metrics.errors import stats_errors
from ptdbg_tui.compare.metrics.settled import overwritten_input
from ptdbg_tui.compare.metrics.verdict import original_pick
from ptdbg_tui.compare.model import ErrorMeasures, Row, Status
from ptdbg_tui.compare.ops import DATA_SHAPED, PARAMETER_SLOTS, RANDOM_OPS, in_place, op_name
from ptdbg_tui.formats.dialects import RUNNING_STATE
from ptdbg_tui.formats.naming import BACKWARD, FORWARD, INPUT, OUTPUT_KINDS, EntryName
from ptdbg_tui.formats.records import StackRecord, TensorRecord, stat_value

MODULE_PREFIX = "Module"
#: Ops whose gradient is their output times (a function of) the incoming gradient: softmax y·(g − Σg·y),
#: sigmoid y·(1 − y)·g, exp y·g.
OUTPUT_SCALED = frozenset({"softmax", "softmin", "sigmoid", "exp"})
#: A non-tensor number that differs by less than this (relative) is not a different argument (a value
#: printed and parsed again, a schedule computed in another precision).
ARGUMENT_TOLERANCE = 1e-4
#: Kinds found at a call's inputs rank before that call's own verdict.
_AT_INPUTS = frozenset({ENTERS, PARAMETERS, UNPAIRED, ARGUMENTS})

CallKey = tuple[str, int, str]  # (api, index, direction)
#: A tensor as one run's record shows it: dtype, shape and the four statistics. What an in-place call
#: leaves, the call that reads that tensor next records alike: it ties the two calls.
Signature = tuple[str, tuple[int, ...], tuple[float, ...]]
#: A call's keyword arguments as the NPU run's call sidecar records them, by the call's name (``None``
#: where it has no line for the call): what the pkl, which holds positional arguments only, does not say.
Keywords = Callable[[str], Mapping[str, object] | None]
#: Which run's record: the bench's (``True``) or the NPU's.
Bench = bool


def _errors(row: Row) -> ErrorMeasures | None:
    """The row's error measures; for a tensor pair whose files could not be compared (a missing or
    unreadable npy: an error row), the estimate from both records' statistics, as a statistics dump
    gives it, so that one lost file does not hide the error it carries from the walk."""
    result = row.result
    if result is None:
        return None
    if result.errors is not None or result.status is not Status.ERROR:
        return result.errors
    npu, bench = row.npu, row.bench
    if npu is None or bench is None or npu.is_scalar or not (npu.has_stats and bench.has_stats):
        return None
    return stats_errors(npu, bench, row.transposed)


def _op(entry: EntryName) -> str:
    return (entry.op or entry.api).rsplit(".", 1)[-1]


class _Member:
    """One row of a call with what the walk asks of it, worked out once per row (a forward call's rows
    are read again by its backward call)."""

    __slots__ = (
        "_empty",
        "_left_out",
        "errors",
        "input",
        "overwritten",
        "row",
        "running",
        "scalar",
        "slot",
    )

    def __init__(
        self,
        row: Row,
        rec: TensorRecord,  # its record
        errors: ErrorMeasures | None,
        empty: dict[tuple[object, ...], bool],
        overwritten: bool = False,
        input: bool = False,  # an input (not an output or another kind)
        running: bool = False,  # a running statistic the op updates (batch_norm's mean and variance)
        slot: str | None = None,  # the parameter the input holds (``weight``), if it holds one
    ) -> None:
        self.row, self.errors, self.overwritten = row, errors, overwritten
        self.input, self.running, self.slot = input, running, slot
        self._empty = empty  # shape -> no elements, shared by the pair's rows
        self.scalar = rec.is_scalar  # a Python value (its NPU record's, where there is one)
        self._left_out: bool | None = True if self.scalar else None

    @property
    def entry(self) -> EntryName:
        """Its record's entry: every row of a call has one (:class:`_Calls` groups them by it)."""
        entry = self.row.record.entry
        assert entry is not None
        return entry

    @property
    def differing_input(self) -> ErrorMeasures | None:
        """Its error, where it is an input that carries data (not left out, not a running statistic)
        and does not match exactly; ``None`` otherwise."""
        errors = self.errors
        if errors is None or not self.input or self.left_out or self.running or errors.exact:
            return None
        return errors

    @property
    def parameter(self) -> str | None:
        """``weight of Functional_linear_1``: the module parameter the input holds."""
        return _parameter(self.entry, self.slot) if self.slot is not None else None

    @property
    def left_out(self) -> bool:
        """A value the compare leaves out by design: a Python scalar, an empty tensor, an input that an
        in-place initialiser overwrites (uninitialised memory, not data). Worked out when first asked (a
        malformed shape fails where it did when it was asked each time)."""
        if self._left_out is None:
            self._left_out = self._no_elements() or self.overwritten
        return self._left_out

    def _no_elements(self) -> bool:
        """``numel == 0``; shapes repeat, so it is worked out once per shape (equal JSON dimensions give
        equal integers)."""
        rec = self.row.record
        try:
            key = tuple(rec.shape_raw)
            empty = self._empty.get(key)
        except TypeError:  # a dimension that is no number (unhashable): as the record says
            return rec.numel == 0
        if empty is None:
            empty = self._empty[key] = rec.numel == 0
        return empty


@dataclass(slots=True)
class _Call:
    """One call's rows in execution order, its outputs and the rest (inputs)."""

    entry: EntryName
    op: str  # the op as the rules name it (``relu`` for ``relu_``)
    container: bool  # a module's call (its APIs' calls may be dumped too)
    paired: bool = False  # some row has a bench record (else a call only the NPU run made)
    npu_made: bool = False  # some row has an NPU record (else a call only the bench run made)
    rows: list[Row] = field(default_factory=list)
    members: list[_Member] = field(default_factory=list)
    ins: list[_Member] = field(default_factory=list)
    outs: list[_Member] = field(default_factory=list)
    name: str = ""


def _operands(members: Sequence[_Member], same_kind: bool) -> tuple[list[Operand], bool]:
    """The compared tensors of ``members`` as operands, and whether some were not compared."""
    out: list[Operand] = []
    missing = False
    for m in members:
        if m.errors is None or m.overwritten:
            missing = missing or not m.left_out
            continue
        row = m.row
        out.append(Operand(m.errors, same_kind, row.bench, row.npu))
    return out, missing


def _key(entry: EntryName) -> CallKey:
    return (entry.api, entry.index, entry.direction)


#: What sets apart the key of a call only the bench run made whose name an NPU call bears.
_BENCH_ONLY_KEY = "bench only: "


class _BenchKeys:
    """The call a row only the bench run has belongs to. By its name, unless the pairing put that bench
    call with an NPU call of another name (aligned calls: the NPU's optimizer ``Tensor_add__1`` with the
    bench's ``Tensor_add__2`` when the bench run made one more ``add_`` before): it belongs to that NPU
    call. A bench call paired with none, whose name an NPU call bears, is a call of its own: it was merged
    into that NPU call, which was then judged where the bench call was made (a skipped micro-batch's
    batch-norm counter, ``Tensor_add__1``, made the optimizer's ``Tensor_add__1`` enter error 'after
    Functional_conv1d_1_forward'), or no longer counted as made by the NPU run alone (an NPU call paired
    with none, made at another code site than the bench's call of its name)."""

    def __init__(self, rows: Sequence[Row]) -> None:
        self.npu_of: dict[CallKey, CallKey] = {}  # a bench call -> the NPU call it was paired with
        self.npu_calls: set[CallKey] = set()  # the NPU's calls, paired or not
        for row in rows:  # every row of the pair: _key written out
            npu = row.npu.entry if row.npu is not None else None
            bench = row.bench.entry if row.bench is not None else None
            if npu is not None:
                key = (npu.api, npu.index, npu.direction)
                self.npu_calls.add(key)
                if bench is not None:
                    self.npu_of.setdefault((bench.api, bench.index, bench.direction), key)

    def of(self, entry: EntryName) -> CallKey:
        """The key of the call a bench-only row of ``entry`` belongs to."""
        key = _key(entry)
        if key in self.npu_of:
            return self.npu_of[key]
        if key in self.npu_calls:  # the NPU call of that name is another bench call's, or none's
            return (_BENCH_ONLY_KEY + entry.api, entry.index, entry.direction)
        return key


#: The directions a call is judged in (other entries are no call's).
_WAYS = frozenset({FORWARD, BACKWARD})


class _Calls:
    """Rows grouped by call, in execution order."""

    def __init__(self, rows: Sequence[Row], keywords: Keywords | None = None) -> None:
        self.keywords = keywords
        self.calls: dict[CallKey, _Call] = {}
        empty: dict[tuple[object, ...], bool] = {}
        keys = _BenchKeys(rows)
        calls = self.calls
        # the loop over every row of the pair: what it calls per row is written out here
        for row in rows:
            npu, bench = row.npu, row.bench
            rec = npu or bench
            assert rec is not None
            entry = rec.entry
            if entry is None or (way := entry.direction) not in _WAYS:
                continue
            key = (entry.api, entry.index, way) if npu is not None else keys.of(entry)  # _key
            call = calls.get(key)
            if call is None:
                call = calls[key] = _Call(entry, op_name(_op(entry)), entry.prefix == MODULE_PREFIX)
            result = row.result  # _errors(row): nearly every row has its errors
            errors = result.errors if result is not None and result.errors is not None else _errors(row)
            kind = entry.kind
            member: _Member
            if kind == INPUT:
                op = call.op  # the call's api, and so its op, is the entry's (the key holds it)
                path, forward = entry.path, way == FORWARD
                overwritten = forward and path[:1] == (0,) and overwritten_input(entry)
                member = _Member(
                    row,
                    rec,
                    errors,
                    empty,
                    overwritten,
                    True,
                    path[:1] != () and path[0] in RUNNING_STATE.get(op, ()),
                    PARAMETER_SLOTS.get(op, {}).get(path[0]) if forward and path else None,
                )
                call.ins.append(member)
            else:
                member = _Member(row, rec, errors, empty)
                (call.outs if kind in OUTPUT_KINDS else call.ins).append(member)
            call.rows.append(row)
            call.paired = call.paired or bench is not None
            call.npu_made = call.npu_made or npu is not None
            call.members.append(member)
        for call in self.calls.values():
            call.name = _call_name(call.rows)
            if call.op in RUNNING_STATE and _evaluating(call):
                for m in call.ins:  # in eval mode the running statistics are what it normalises by
                    m.running = False
        self.api_level = {
            d: any(not c.container for k, c in self.calls.items() if k[2] == d) for d in (FORWARD, BACKWARD)
        }
        #: some row has both runs' checksums: without one no call departs (:func:`departure`)
        self.checksums = any(
            r.npu is not None and r.bench is not None and r.npu.md5 and r.bench.md5 for r in rows
        )

    def around_apis(self, call: _Call) -> bool:
        """A module's call whose APIs are dumped too (in its direction): its rows repeat theirs."""
        return call.container and self.api_level[call.entry.direction]

    def forward_of(self, key: CallKey) -> _Call | None:
        return self.calls.get((key[0], key[1], FORWARD))


#: The argument of batch_norm and instance_norm that says whether it normalises by the batch's own
#: statistics (``training``, ``use_input_stats``) or by the running ones it is given.
_BATCH_STATS = (5,)


def _evaluating(call: _Call) -> bool:
    """A batch_norm (or instance_norm) call that both runs make in eval mode: it normalises by its
    running statistics, which are then inputs like any other (in training mode it only updates them)."""
    flag = next((m.row for m in call.ins if m.entry.path == _BATCH_STATS), None)
    if flag is None or flag.npu is None or flag.bench is None:
        return False
    return all(_value(rec) is False or _value(rec) == "False" for rec in (flag.npu, flag.bench))


def _stack(rows: Sequence[Row]) -> StackRecord | None:
    return next((r.stack for r in rows if r.stack is not None), None)


def _coarsest(members: Sequence[_Member], coarsest: float) -> float:
    """The coarsest rounding among ``members`` that differ between the runs and ``coarsest``."""
    for m in members:
        e = m.errors
        if e is not None and e.rel > 0 and not e.exact:
            coarsest = max(coarsest, e.floor)
    return coarsest


def _judge_call(calls: _Calls, key: CallKey, inherited: float = 0.0) -> Judgement | Unjudged | None:
    """The judgement of one call, or why it cannot be judged; ``inherited``: the coarsest rounding of a
    differing tensor dumped before its outputs (:func:`~.propagation.judge`)."""
    call = calls.calls[key]
    backward = call.entry.direction == BACKWARD
    forward = calls.forward_of(key) if backward else None
    reshaped = _reshaped(call, [*call.ins, *(forward.members if forward is not None else [])])
    if reshaped is not None:
        return reshaped
    outputs = [(m.row.name, m.errors) for m in call.outs if m.errors is not None]
    if not outputs:
        return Unjudged.OUTPUTS_NOT_COMPARED if call.outs else Unjudged.NO_OUTPUTS
    operands, missing = _operands(call.ins, same_kind=True)
    gains = None
    if backward:
        if forward is not None:
            saved, missing_saved = _operands(forward.members, same_kind=False)
            operands += saved
            missing = missing or missing_saved
        gains = _gains(call.op, call.outs, forward.outs if forward is not None else [])
    if missing and not operands:
        return Unjudged.INPUTS_NOT_COMPARED
    value = None if backward or call.op not in QUOTIENTS else _quotient_value(calls, call)
    means = None if backward or call.op not in NORMALISED else _means(call.outs)
    return judge(
        outputs,
        operands,
        call.op,
        partial=missing,
        backward=backward,
        gains=gains,
        value=value,
        means=means,
        inherited=inherited,
    )


def _means(outs: Sequence[_Member]) -> dict[str, tuple[float, float]]:
    """Each compared output's recorded means, NPU's and bench's (NaN where one is not a number)."""
    out = {}
    for m in outs:
        if m.errors is not None and m.row.npu is not None and m.row.bench is not None:
            n, b = m.row.npu.stat(2), m.row.bench.stat(2)
            out[m.row.name] = (math.nan if n is None else n, math.nan if b is None else b)
    return out


#: The position of a :data:`QUOTIENTS` op's factor, and its name as a keyword (``addcdiv(p, a, b, value)``).
_VALUE_AT, _VALUE = (3,), "value"


def _quotient_value(calls: _Calls, call: _Call) -> float | None:
    """The factor of an ``addcdiv``'s quotient (an optimizer's ``-lr``): its recorded positional argument,
    else the NPU call sidecar's keyword (its default, 1, where the sidecar's line has none); ``None``
    where neither records the call, or it is no number."""
    member = next((m for m in call.ins if m.scalar and m.entry.path == _VALUE_AT), None)
    if member is not None:
        value: object = _value(member.row.record)
    else:
        keywords = calls.keywords(call.name) if calls.keywords is not None else None
        if keywords is None:
            return None
        value = keywords.get(_VALUE, 1.0)
    number = stat_value(value) if not isinstance(value, bool) else None
    return number if number is not None and math.isfinite(number) else None


def _reshaped(call: _Call, ins: Sequence[_Member]) -> Judgement | None:
    """An output whose shape differs between the runs where nothing the call takes explains it: ``ins``
    (a backward call's incoming gradients and its forward call's tensors) were compared, so their shapes
    agree, and none whose values may decide a shape differs (an integer or bool tensor: indices, a mask;
    any input of a :data:`DATA_SHAPED` op), nor a non-tensor argument. ``None`` otherwise."""
    row = next((m.row for m in call.outs if m.row.matched and not m.row.shapes_agree), None)
    if row is None or row.npu is None or row.bench is None:
        return None
    for m in ins:
        e = m.errors
        if e is None and not m.left_out:
            return None  # not compared: its shape may differ too
        if e is not None and e.rel > 0 and (e.exact or call.op in DATA_SHAPED):
            return None
    if _different_arguments(call.ins):
        return None
    return Judgement(0.0, math.inf, 0.0, math.inf, SHAPE, row.name, shapes=(row.npu.shape, row.bench.shape))


def _gains(op: str, grads: Sequence[_Member], forward: Sequence[_Member]) -> dict[str, float] | None:
    """For an op whose gradient is its output times the incoming gradient (:data:`OUTPUT_SCALED`): the
    forward output's RMS (``forward``: the forward call's outputs), the size the incoming gradients
    come out at (softmax's gradient is small because its probabilities are, not because terms cancel)."""
    if op not in OUTPUT_SCALED:
        return None
    outputs = [m.errors for m in forward if m.errors is not None]
    if len(outputs) != 1 or outputs[0].numel <= 0:
        return None
    rms = outputs[0].bench_norm / math.sqrt(outputs[0].numel)
    return {m.row.name: rms for m in grads} if rms > 0 and math.isfinite(rms) else None


def _call_name(rows: Sequence[Row]) -> str:
    first = next((r for r in rows if r.npu is not None), rows[0])
    return first.record.call


def parameter_slot(entry: EntryName) -> str | None:
    """``weight`` for a forward input that holds a module parameter (``weights[2]`` for an RNN's third);
    ``None`` otherwise."""
    if entry.kind != INPUT or entry.direction != FORWARD or not entry.path:
        return None
    slot = PARAMETER_SLOTS.get(op_name(_op(entry)), {}).get(entry.path[0])
    return _which(entry, slot) if slot is not None else None


def parameter_name(entry: EntryName) -> str | None:
    """``weight of Functional_linear_1`` for an input that holds a module parameter; ``None`` otherwise."""
    which = parameter_slot(entry)
    return f"{which} of {entry.call}" if which is not None else None


def _which(entry: EntryName, slot: str) -> str:
    """The parameter ``slot`` an input ``entry`` holds, an RNN's weights by their index."""
    return f"{slot}[{entry.path[1]}]" if slot == "weights" and len(entry.path) > 1 else slot


def _parameter(entry: EntryName, slot: str) -> str:
    """:func:`parameter_name` of an input ``entry`` that holds the parameter ``slot``."""
    return f"{_which(entry, slot)} of {entry.call}"


def _entering(
    members: Sequence[_Member], before: float, parameters: list[str], after_unpaired: bool
) -> tuple[Judgement, _Member] | None:
    """The worst input of a call whose error entered before it: any tensor a forward call takes (its
    activations, weights, biases), a backward call's incoming gradients. On the way, the parameters
    among them that differ beyond rounding on entry join ``parameters``. (``after_unpaired``: see
    :func:`judge_entry`.)"""
    worst: tuple[Judgement, _Member] | None = None
    for m in members:
        errors = m.errors
        if errors is None:
            continue
        if m.slot is not None and judge_entry(m.row.name, errors, 0.0) is not None:
            parameters.append(_parameter(m.entry, m.slot))
        if not m.input or m.left_out or m.running:
            continue
        j = judge_entry(m.row.name, errors, before, after_unpaired)
        if j is not None and (worst is None or j.score > worst[0].score):
            worst = (j, m)
    return worst


def _largest_error(members: Sequence[_Member], before: float) -> float:
    """The largest error among ``members`` and ``before``; a running statistic a training call only
    updates is no data that flows on (where eval mode reads it, its error is its own finding)."""
    for m in members:
        errors = m.errors
        if errors is None or m.running:
            continue
        if not errors.exact and math.isfinite(errors.rel) and not m.left_out:
            before = max(before, errors.rel)
    return before


def _value(rec: TensorRecord) -> object:
    return rec.stats[0] if rec.stats else None


def values_differ(x: object, y: object) -> bool:
    """Two recorded non-tensor values that are different arguments (a number beyond
    :data:`ARGUMENT_TOLERANCE`, an integer, a flag or any other value at all)."""
    if isinstance(x, bool) or isinstance(y, bool) or (isinstance(x, int) and isinstance(y, int)):
        return x != y
    fx, fy = stat_value(x), stat_value(y)
    if fx is not None and fy is not None:
        if math.isnan(fx) and math.isnan(fy):
            return False
        if math.isinf(fx) or math.isinf(fy):  # inf against inf is the same value; against -inf or 1e30 not
            return fx != fy
        return not abs(fx - fy) <= ARGUMENT_TOLERANCE * max(abs(fx), abs(fy))
    return x != y


def _different_arguments(members: Sequence[_Member]) -> list[Row]:
    """The non-tensor arguments of a call whose values differ between the runs."""
    out = []
    for m in members:
        row = m.row
        npu, bench = row.npu, row.bench
        if not m.input or npu is None or bench is None:
            continue
        if (
            m.scalar
            and bench.is_scalar
            and not (_device(npu) and _device(bench))  # npu:0 against cuda:0: by design
            and values_differ(_value(npu), _value(bench))
        ):
            out.append(row)
    return out


#: A device as a recorded argument names it (``x.to("npu")``, ``device=torch.device("cuda:0")``).
_DEVICE = re.compile(r"(cpu|cuda|npu|xpu|mps|meta|hpu)(:\d+)?")


def is_device(value: object) -> bool:
    """A value that names a device: the runs differ there by design (``npu:0`` against ``cuda:0``)."""
    return isinstance(value, str) and _DEVICE.fullmatch(value) is not None


def _device(rec: TensorRecord) -> bool:
    return "device" in rec.dtype or is_device(_value(rec))


def _place(row: Row) -> str:
    """Where an argument sits in its call: ``input.1``."""
    entry = row.record.entry
    assert entry is not None
    return f"{entry.kind}.{'.'.join(map(str, entry.path))}"


def _shown(value: object) -> str:
    return repr(value) if isinstance(value, str) else str(value)


@dataclass
class _Walk:
    """What the walk over calls in execution order carries from one call to the next."""

    step: int | None
    before: dict[str, float] = field(default_factory=lambda: {FORWARD: 0.0, BACKWARD: 0.0})
    previous: dict[str, str] = field(default_factory=lambda: {FORWARD: "", BACKWARD: ""})
    npu_only: dict[str, list[CallKey]] = field(default_factory=lambda: {FORWARD: [], BACKWARD: []})
    #: per direction, the last call both runs made (not a module's around dumped APIs), and the calls
    #: only the bench run made since
    both_made: dict[str, CallKey | None] = field(default_factory=lambda: {FORWARD: None, BACKWARD: None})
    bench_made: dict[str, list[CallKey]] = field(default_factory=lambda: {FORWARD: [], BACKWARD: []})
    #: per direction, whether the call visited last is one only the bench run made (by the call, not its
    #: name: an NPU call may bear the name of a bench call it was not paired with)
    bench_only: dict[str, bool] = field(default_factory=lambda: {FORWARD: False, BACKWARD: False})
    #: per direction, the calls only the bench run made since error entering last named them
    skipped: dict[str, list[str]] = field(default_factory=lambda: {FORWARD: [], BACKWARD: []})
    found: list[Suspect] = field(default_factory=list)
    parameters: list[str] = field(default_factory=list)  # parameters that differ beyond rounding on entry
    #: the tensors that calls only one run made wrote in place, by that run and what they left (its
    #: signature in that run's records)
    written: dict[tuple[Bench, Signature], CallKey] = field(default_factory=dict)
    #: per direction, how many calls both runs made so far (each starts a stretch of calls of one run);
    #: per run and direction, the last stretch where that run made a call the other did not; per call
    #: that wrote a tensor, its stretch
    stretch: dict[str, int] = field(default_factory=lambda: {FORWARD: 0, BACKWARD: 0})
    own_stretch: dict[tuple[Bench, str], int] = field(default_factory=dict)
    written_in: dict[CallKey, int] = field(default_factory=dict)
    named: set[CallKey] = field(default_factory=set)  # of those calls, the ones named a suspect
    #: the updates within their allowance only with their quotient's
    amplified: list[Amplified] = field(default_factory=list)
    #: the coarsest rounding (a dtype's floor) of any tensor dumped so far that differs between the runs
    coarsest: float = 0.0

    def explained(self) -> float:
        """The largest error dumped before, which a call's inputs may carry without a suspect: a forward
        call after the backward began (an optimizer) reads ``.grad``, what the backward made; a backward
        call's gradients carry what its forward saved."""
        return max(self.before.values())


def _suspect(
    calls: _Calls,
    key: CallKey,
    name: str,
    kind: Kind,
    judgement: Judgement,
    evidence: Evidence,
    step: int | None,
) -> Suspect:
    """The call ``key`` as a suspect of ``kind``; located by its forward call's stack."""
    call = calls.calls[key]
    members, entry = call.rows, call.entry
    forward = calls.forward_of(key)
    stack = _stack(forward.rows if forward is not None else []) or _stack(members)
    return Suspect(
        call=name,
        api=entry.api,
        direction=entry.direction,
        kind=kind,
        score=judgement.score,
        evidence=evidence,
        judgement=judgement,
        rows=list(members),
        stack=stack,
        seq=min(r.seq for r in members),
        step=step,
    )


def _at_inputs(calls: _Calls, key: CallKey, walk: _Walk) -> None:
    """The findings at one call's inputs: error entering before it (through a parameter, after a call only
    the NPU run made, or through code no hook saw), and non-tensor arguments that differ."""
    call = calls.calls[key]
    way, name = call.entry.direction, call.name
    unpaired = bool(walk.npu_only[way]) or walk.bench_only[way]  # the place is known
    written = _written_by_one_run(calls, key, walk)
    ins = [m for m in call.ins if m not in written]
    entering = _entering(ins, walk.explained(), walk.parameters, unpaired)
    args = _different_arguments(call.ins)
    between = call.npu_made and not calls.around_apis(call)  # after calls of one run
    # after the NPU's calls, error entering names them too: the stronger evidence stands (×318 for their
    # change where error entering, against the drift before, said ×1.0)
    weak = entering is None or (bool(walk.npu_only[way]) and entering[0].score < math.inf)
    if weak and between and (walk.npu_only[way] or walk.bench_made[way]):
        changed = _changed_by_one_run(calls, key, ins, walk)
        if changed is not None and (entering is None or changed.score > entering[0].score):
            walk.found.append(changed)
            entering = None
    if entering is not None:
        judgement, member = entering
        first = _entering_suspect(calls, key, name, judgement, member, walk)
        walk.found.append(first)
        if first.kind == ENTERS and in_place(call.entry.op) and member.entry.path[:1] == (0,):
            # what an in-place call updates may be an optimizer's state an earlier step left different
            # (a note then): error entering through its other arguments (this step's gradient) as well
            # is a finding of its own
            rest = [m for m in ins if m is not member]
            other = _entering(rest, walk.explained(), [], unpaired)
            if other is not None:
                walk.found.append(_entering_suspect(calls, key, name, *other, walk))
    if args:  # also after error entering: that may be an earlier step's (an optimizer's state)
        row = args[0]
        assert row.npu is not None and row.bench is not None
        what = tuple(
            Argument(place=_place(r), npu=_shown(_value(r.npu)), bench=_shown(_value(r.bench)))
            for r in args
            if r.npu is not None and r.bench is not None and r.record.entry is not None
        )
        judgement = Judgement(0.0, math.inf, 0.0, math.inf, ARGUMENTS, row.name)
        walk.found.append(_suspect(calls, key, name, ARGUMENTS, judgement, Arguments(values=what), walk.step))
    if not calls.around_apis(call):
        walk.npu_only[way] = []


def _changed_by_one_run(
    calls: _Calls, key: CallKey, members: Sequence[_Member], walk: _Walk
) -> Suspect | None:
    """The calls only one run made since the last call both runs made (the NPU's, or the bench's), where
    one of ``members`` is, in the other run, that call's output passed on unchanged (equal
    statistics) and, in the run that made them, that output changed beyond rounding: they did what the
    other run does not. Error entering weighs the input's error against the largest before; at a later
    step, the drift that earlier steps left in every activation hid a 1 % change there
    (``h + 0.01 * gelu(h)`` that one run computed)."""
    way = calls.calls[key].entry.direction
    source = walk.both_made[way]
    found = None
    for bench, chain in ((False, walk.npu_only[way]), (True, walk.bench_made[way])):  # whose calls
        found = _changed(calls.calls[source], members, bench) if chain and source is not None else None
        if found is not None:
            break
    if found is None:
        return None
    judgement, m, o = found
    first, last = calls.calls[chain[0]].name, calls.calls[chain[-1]].name
    assert m.errors is not None
    evidence = OneRunChange(
        judgement=judgement,
        npu=not bench,
        first=first,
        call=last,
        source=o.row.name,
        tensor=m.row.name,
        carries=m.errors.rel,
    )
    if not bench:
        walk.named.add(chain[-1])  # not named again where a later call reads what it made
        return _suspect(calls, chain[-1], last, UNPAIRED, judgement, evidence, walk.step)
    judgement = replace(judgement, kind=ENTERS)
    suspect = _suspect(calls, key, calls.calls[key].name, ENTERS, judgement, evidence, walk.step)
    suspect.after_bench_only = True  # the NPU script lacks them
    named = {calls.calls[k].name for k in chain}
    walk.skipped[way] = [n for n in walk.skipped[way] if n not in named]
    return suspect


def _changed(
    source: _Call, members: Sequence[_Member], bench: Bench
) -> tuple[Judgement, _Member, _Member] | None:
    """The worst of ``members`` that the run without the calls in between (the bench's where ``bench``
    is false) passes on unchanged from an output of ``source``, and the run with them changed beyond
    rounding; with that output."""
    outputs: dict[Signature, _Member] = {}
    for o in source.outs:
        signature = signature_of(_side(o.row, not bench))
        if signature is not None and signature[2][0] != signature[2][1]:  # not a constant (max = min)
            outputs.setdefault(signature, o)
    worst: tuple[Judgement, _Member, _Member] | None = None
    for m in members if outputs else ():
        errors = m.differing_input
        if errors is None:
            continue
        signature = signature_of(_side(m.row, not bench))
        source_out = outputs.get(signature) if signature is not None else None
        if source_out is None or one_run_change(errors)[2] <= 1:
            continue
        after, before = _side(m.row, bench), _side(source_out.row, bench)
        change = stats_errors(after, before) if after is not None and before is not None else None
        if change is None or not math.isfinite(change.rel):
            continue
        size, allowed, score = one_run_change(change)
        if score > 1 and (worst is None or score > worst[0].score):
            came = source_out.errors.rel if source_out.errors is not None else 0.0
            worst = Judgement(came, size, allowed, score, UNPAIRED, m.row.name), m, source_out
    return worst


def _side(row: Row, bench: Bench) -> TensorRecord | None:
    return row.bench if bench else row.npu


def _written_args(call: _Call) -> tuple[_Member, _Member] | None:
    """A call's first argument as it came in and its one output: what an in-place call left of it, or
    what a call made of it (``p.data = p.data * 0.9999``, ``torch.mul(p, 0.9999, out=p)``)."""
    if len(call.outs) != 1:
        return None
    before = next((m for m in call.ins if m.entry.path == (0,)), None)
    return (before, call.outs[0]) if before is not None and not before.scalar else None


def signature_of(rec: TensorRecord | None) -> Signature | None:
    """The :data:`Signature` of a tensor's record; ``None`` for a Python value or without four finite
    statistics."""
    if rec is None or rec.is_scalar:
        return None
    values = rec.stat_values()
    if not all(v is not None and math.isfinite(v) for v in values):
        return None
    try:
        shape = rec.shape
    except (TypeError, ValueError):  # a dimension that is no number
        return None
    return rec.dtype, shape, tuple(v for v in values if v is not None)


def _remember_written(call: _Call, key: CallKey, walk: _Walk, bench: Bench) -> None:
    """A call only one run made (``bench``: the bench run) that writes its first argument in place
    (AdamW's decay ``param.mul_(1 - lr * wd)``, which Adam lacks): what it left is remembered, for the
    call that reads that tensor later, however many calls of both runs come between."""
    args = _written_args(call)
    signature = signature_of(_side(args[1].row, bench)) if args is not None else None
    if signature is not None:
        walk.written[bench, signature] = key
        walk.written_in[key] = walk.stretch[call.entry.direction]


def _written_by_one_run(calls: _Calls, key: CallKey, walk: _Walk) -> list[_Member]:
    """The inputs of the call ``key`` that a call only one run made wrote in place earlier (that run's
    records of them are what it left), where it changed them beyond rounding and they differ from the
    other run's beyond rounding. That call is where the runs differ (named once), whatever error the data
    carries by then: the other run's tensor is as if an identity had left it. From statistics the margin
    for error entering (×256) hid AdamW's decay, 1e-4 a step, at every step, on either side (the NPU
    script that forgot the bench's weight decay was an all-clear)."""
    found: list[_Member] = []
    for m in calls.calls[key].ins if walk.written else ():
        errors = m.differing_input
        if errors is None:
            continue
        for bench in (False, True):
            signature = signature_of(_side(m.row, bench))
            wrote = walk.written.get((bench, signature)) if signature is not None else None
            if (
                wrote is None
                or _just_before(calls, wrote, walk)
                or _made_otherwise(calls, wrote, walk, bench)
            ):
                continue
            change = _written_change(calls.calls[wrote], bench)
            if change is None or not _carries(errors, change[0]):
                continue
            found.append(m)
            if wrote not in walk.named:
                walk.named.add(wrote)
                walk.found.append(_written_suspect(calls, key, wrote, m, change, walk))
            break
    return found


def _carries(errors: ErrorMeasures, change: Judgement) -> bool:
    """Whether a tensor that a call only one run made wrote differs from the other run's for it: beyond
    rounding, or, after a scale finer than that (AdamW's decay at lr 1e-3, 1e-5 a step), by at least half
    the scale (the other run did not scale it some other way)."""
    allowed, score = beyond_rounding(errors)
    return score > 1 or (change.allowed < allowed and errors.rel >= change.output_error / 2)


def _scale(after: TensorRecord, before: TensorRecord, change: ErrorMeasures) -> float | None:
    """The factor ``c`` a call scaled a tensor by, where its max, min and norm after are ``c`` times
    before (max and min within an elementwise op's rounding, the norm within its summation's): AdamW's
    decay ``param.mul_(1 - lr * wd)``. Three statistics of one run that move by one factor measure it
    exactly, where estimating an error from statistics scatters. ``None`` otherwise."""
    ratios = []
    for i in (0, 1, 3):  # max, min, l2norm; a mean near zero loses its digits to cancellation
        x, y = after.stat(i), before.stat(i)
        if x is None or y is None or y == 0 or not (math.isfinite(x) and math.isfinite(y)):
            return None
        ratios.append(x / y)
    c = ratios[0]
    elementwise, summed = MARGIN * ROUNDINGS * change.floor, MARGIN * own_rounding(change)
    if abs(ratios[1] - c) > elementwise * abs(c) or abs(ratios[2] - c) > summed * abs(c):
        return None
    return c


def _just_before(calls: _Calls, wrote: CallKey, walk: _Walk) -> bool:
    """A call only one run made, not in place, right before the call that reads what it made: error
    entering there names it already (``out * 1.001`` only the NPU run makes, before the loss). Not one
    of several before it (AdamW's decay as ``p.data = p.data * 0.9999``, one per parameter, before
    Adam's first ``zeros_like(p)``): that names the last."""
    call = calls.calls[wrote]
    return not in_place(call.entry.op) and walk.previous[call.entry.direction] == call.name


def _made_otherwise(calls: _Calls, wrote: CallKey, walk: _Walk, bench: Bench) -> bool:
    """A call only one run made (``bench``: the bench run), not in place, where the other run made calls
    of its own too, from the last call both made before it on: the runs computed that stretch each in
    their own way (the NPU's GELU as ``x.double()``, GELU, ``.float()``, which no pairing puts with
    the bench's GELU), not one run alone changing a tensor the other leaves as it is (a decay by hand)."""
    call = calls.calls[wrote]
    way = call.entry.direction
    other = walk.own_stretch.get((not bench, way), -1)
    return not in_place(call.entry.op) and other >= walk.written_in.get(wrote, 0)


def _written_suspect(
    calls: _Calls,
    key: CallKey,
    wrote: CallKey,
    member: _Member,
    change: tuple[Judgement, WrittenChange],
    walk: _Walk,
) -> Suspect:
    """The call ``wrote`` only one run made, which wrote ``member``'s tensor (in place, or as its output),
    as a suspect: the NPU's itself; the bench's where the call ``key`` reads that tensor, as error
    entering after a call only the bench run makes (a bench call is no NPU call, and the NPU's call of its
    name another one)."""
    judgement, what = change
    errors = member.errors
    assert errors is not None
    name = calls.calls[wrote].name
    npu = calls.calls[wrote].npu_made
    evidence = Written(
        change=what,
        npu=npu,
        call=name,
        wrote=in_place(calls.calls[wrote].entry.op),
        tensor=member.row.name,
        carries=errors.rel,
    )
    if npu:
        return _suspect(calls, wrote, name, UNPAIRED, judgement, evidence, walk.step)
    judgement = replace(judgement, kind=ENTERS, output=member.row.name)
    found = _suspect(calls, key, calls.calls[key].name, ENTERS, judgement, evidence, walk.step)
    found.after_bench_only, found.written_by = True, name  # the NPU script lacks it
    way = calls.calls[key].entry.direction
    walk.skipped[way] = [n for n in walk.skipped[way] if n != name]  # named here
    return found


def _written_change(call: _Call, bench: Bench) -> tuple[Judgement, WrittenChange] | None:
    """What a call only one run made (``bench``: the bench run) changed in the tensor it writes in place
    (or made of its first argument), that run's record after against before (statistics: a tensor's
    files are not read here), where that is beyond rounding; and that change as evidence (said as
    ``changes Tensor_mul__0_forward_input.0 in place (input.1: 0.9999) by 0.0001, allowed …``)."""
    args = _written_args(call)
    if args is None:
        return None
    before, after = (_side(m.row, bench) for m in args)
    assert before is not None and after is not None
    change = stats_errors(after, before)
    if change is None or not math.isfinite(change.rel):
        return None
    allowed, score = beyond_rounding(change)
    scale = False
    if score <= 1:  # below what estimating from statistics allows: a scale measures finer
        c = _scale(after, before, change)
        if c is None:
            return None
        allowed = MARGIN * ROUNDINGS * change.floor * STATS_SCATTER
        rel = abs(1 - c)
        score = rel / allowed
        if score <= 1:
            return None
        change = replace(change, rel=rel)
        scale = True
    values = tuple(
        (_place(a.row), _shown(_value(rec)))
        for a in call.ins
        if a.scalar and (rec := _side(a.row, bench)) is not None
    )
    what = WrittenChange(
        in_place=in_place(call.entry.op),
        tensor=args[0].row.name,
        made=args[1].row.name,
        values=values,
        change=change.rel,
        scale=scale,
        allowed=allowed,
        score=score,
    )
    return Judgement(0.0, change.rel, allowed, score, UNPAIRED, args[1].row.name), what


def _entering_suspect(
    calls: _Calls, key: CallKey, name: str, judgement: Judgement, member: _Member, walk: _Walk
) -> Suspect:
    """Error that entered before a call: after a call only the NPU run made (that call is the suspect),
    through a parameter (the step's parameters differ on entry), or through code no hook saw."""
    way = calls.calls[key].entry.direction
    row = member.row
    if walk.npu_only[way]:
        extra = walk.npu_only[way][-1]
        extra_name = calls.calls[extra].name
        walk.named.add(extra)  # not named again where a later call reads what it made
        unpaired = NpuOnly(judgement=judgement, call=extra_name, tensor=row.name)
        return _suspect(calls, extra, extra_name, UNPAIRED, judgement, unpaired, walk.step)
    param = member.parameter
    if param is not None:
        others = tuple(p for p in dict.fromkeys(walk.parameters) if p != param)
        on = OnParameter(judgement=judgement, parameter=param, others=others)
        return _suspect(calls, key, name, PARAMETERS, judgement, on, walk.step)
    previous = walk.previous[way]
    skipped = [n for n in walk.skipped[way] if n != previous]
    walk.skipped[way] = []
    entry = row.record.entry
    running = bool(
        entry is not None and entry.path[:1] and entry.path[0] in RUNNING_STATE.get(calls.calls[key].op, ())
    )
    entered = Entered(
        judgement=judgement,
        way=way,
        previous=previous,
        running=running,
        bench_only=walk.bench_only[way],
        skipped=tuple(skipped),
    )
    found = _suspect(calls, key, name, ENTERS, judgement, entered, walk.step)
    found.after_bench_only = walk.bench_only[way] or bool(skipped)
    return found


def _visit(calls: _Calls, key: CallKey, walk: _Walk, diagnosis: Diagnosis) -> None:
    call = calls.calls[key]
    entry = call.entry
    name, way = call.name, entry.direction
    if not call.paired:  # a call only the NPU run made
        walk.npu_only[way].append(key)
        walk.own_stretch[False, way] = walk.stretch[way]
        walk.previous[way], walk.bench_only[way] = name, False
        _remember_written(call, key, walk, bench=False)
        return
    if not call.npu_made:
        walk.skipped[way].append(name)
        walk.bench_made[way].append(key)
        walk.own_stretch[True, way] = walk.stretch[way]
        _remember_written(call, key, walk, bench=True)
    _at_inputs(calls, key, walk)
    if call.npu_made and not calls.around_apis(call):
        walk.both_made[way], walk.bench_made[way] = key, []
        walk.stretch[way] += 1
    seen = walk.explained()  # before this call's tensors
    walk.before[way] = _largest_error(call.members, walk.before[way])
    walk.previous[way], walk.bench_only[way] = name, not call.npu_made
    walk.coarsest = _coarsest(call.ins, walk.coarsest)
    verdict = _judge_call(calls, key, walk.coarsest)
    walk.coarsest = _coarsest(call.outs, walk.coarsest)
    if isinstance(verdict, Judgement) and call.op in SELECTIONS and way == FORWARD:
        verdict = selected(verdict, seen, any(m.errors.from_stats for m in call.outs if m.errors is not None))
    if not isinstance(verdict, Judgement):
        diagnosis.calls[name] = CallEvidence(name, way, None, verdict or Unjudged.NO_VERDICT)
        return
    diagnosis.judged += 1
    diagnosis.calls[name] = CallEvidence(name, way, verdict)
    if verdict.kind is None and call.op in QUOTIENTS:
        _amplified(call, verdict, diagnosis, walk)
    container = calls.around_apis(call)
    if verdict.kind is not None and not container:
        kind = RANDOM if call.op in RANDOM_OPS else verdict.kind
        walk.found.append(_suspect(calls, key, name, kind, verdict, Judged(judgement=verdict), walk.step))
    elif not container and calls.checksums and (row := _departure(calls, key)) is not None:
        kind = RANDOM if call.op in RANDOM_OPS else NONDETERMINISTIC
        judgement = replace(verdict, score=math.inf, kind=kind, output=row.name)
        walk.found.append(_suspect(calls, key, name, kind, judgement, departure_evidence(row), walk.step))


def _amplified(call: _Call, verdict: Judgement, diagnosis: Diagnosis, walk: _Walk) -> None:
    """An update within what its quotient may carry (:func:`~.propagation.quotient_error`): where it needs
    that, where that alone may carry all its output's error, or where its numerator holds elements of
    either sign on the two sides (rounding noise), the tensor it left is remembered for the next step
    (the parameter it wrote differs there for no kernel's fault); where it needs it, a note says why it
    is no suspect (:func:`_amplified_note`)."""
    numerator = next((m for m in call.ins if m.entry.path == QUOTIENTS[call.op][0]), None)
    errors = numerator.errors if numerator is not None else None
    flips = errors.sign_flips if errors is not None else 0
    out = call.outs[0].row.npu if len(call.outs) == 1 else None
    signature = signature_of(out)
    share = verdict.amplified
    needed = verdict.output_error > verdict.allowed - share
    if errors is None or signature is None or share <= 0:
        return
    if needed or flips > 0 or verdict.output_error <= share:
        diagnosis.amplified[signature] = call.name
    if not needed:
        return
    assert numerator is not None
    found = Amplified(
        call=call.name,
        output=verdict.output,
        error=verdict.output_error,
        allowed=verdict.allowed - verdict.amplified,
        numerator=numerator.row.name,
        numerator_error=errors.rel,
        flips=flips,
        elements=errors.numel,
        with_it=verdict.allowed,
    )
    walk.amplified.append(found)


def _amplified_note(amplified: Sequence[Amplified]) -> Amplified | None:
    """One note for the updates :func:`_amplified` found: the first in full, the others by name (a
    model of many blocks has a key bias in each)."""
    if not amplified:
        return None
    return replace(amplified[0], others=tuple(a.call for a in amplified[1:]))


def _departure(calls: _Calls, key: CallKey) -> Row | None:
    """:func:`departure` of a call: its outputs against its inputs (a backward call's: its incoming
    gradients and its forward call's tensors)."""
    call = calls.calls[key]
    operands = call.ins
    if call.entry.direction == BACKWARD and (forward := calls.forward_of(key)) is not None:
        operands = [*operands, *forward.members]
    return departure((m.row for m in call.outs), (m.row for m in operands if not m.scalar))


def suspect_order(suspect: Suspect) -> tuple[int, int]:
    """Execution order; at one call, what was found at its inputs first."""
    return (suspect.seq, 0 if suspect.kind in _AT_INPUTS else 1)


def explain_failures(rows: Sequence[Row], diagnosis: Diagnosis) -> Unexplained | None:
    """Failing rows without a suspect: where the first one is, the calls only the NPU run made before
    it, and why its call was not judged at fault (None: no row fails)."""
    first = next((r for r in rows if r.status in (Status.FAIL, Status.ERROR)), None)
    if first is None:
        return None
    seen: dict[str, None] = {}
    for r in rows:
        if r is first:
            break
        if r.npu is not None and r.bench is None:
            seen[r.npu.call] = None
    uncompared = first.status is Status.ERROR
    message = first.result.message.strip() if uncompared and first.result is not None else ""
    return Unexplained(
        row=first.name,
        uncompared=uncompared,
        message=message,
        verdict=diagnosis.calls.get(first.record.call),
        npu_only=tuple(list(seen)[:5]),
    )


def diagnose(rows: Sequence[Row], step: int | None = None, keywords: Keywords | None = None) -> Diagnosis:
    """Judge every call of one pair's rows (in execution order) and rank the suspects (``step``: the
    dump's step, for the words; ``keywords``: the NPU call sidecar's keyword arguments, where there is
    one)."""
    calls = _Calls(rows, keywords)
    results = [r.result for r in rows if r.result is not None]  # a pending row neither fails nor errs
    statuses = Counter(r.status for r in results)
    diagnosis = Diagnosis(
        compared=sum(1 for r in results if r.errors is not None),
        failing=statuses[Status.FAIL] + statuses[Status.ERROR],
        errors=statuses[Status.ERROR],
    )
    walk = _Walk(step)
    for key in calls.calls:
        _visit(calls, key, walk, diagnosis)
    diagnosis.suspects = sorted(walk.found, key=suspect_order)
    if note := _amplified_note(walk.amplified):
        diagnosis.notes.append(note)
    if not diagnosis.suspects and diagnosis.failing:  # else no row fails: nothing to explain
        diagnosis.unexplained = explain_failures(rows, diagnosis)
    first_no = original_pick(rows)
    diagnosis.original = first_no.name if first_no is not None else None
    return diagnosis
