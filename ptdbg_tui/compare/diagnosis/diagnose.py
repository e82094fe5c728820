"""Which operator introduced the error: every call judged by the error it adds, the ranked suspects,
and the texts that name them (the report, the advisor file and the app show them).

The original's advisor names the first failing row, which is usually downstream noise, and its
absolute thresholds miss small-magnitude and pure-scale faults while blaming rounding in fp16. Here
each call's outputs are judged against what its inputs carry (:mod:`ptdbg_tui.compare.diagnosis.propagation`):
a forward call by its inputs, a backward call by its incoming gradients and the tensors its forward
call saved. Every call that introduces error is a suspect; forward suspects come first, each
direction in execution order. The first suspect is the culprit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from ptdbg_tui.compare.diagnosis.propagation import (
    ENTERS,
    GROWTH,
    NAN_ORIGIN,
    ZEROS,
    Judgement,
    Operand,
    judge,
    judge_entry,
    op_name,
)
from ptdbg_tui.compare.metrics.verdict import original_pick
from ptdbg_tui.compare.model import ErrorMeasures, Row, Status
from ptdbg_tui.formats.naming import BACKWARD, FORWARD, INPUT, OUTPUT_KINDS, EntryName
from ptdbg_tui.formats.records import Frame, StackRecord
from ptdbg_tui.formats.sites import stack_site

#: Ops whose outputs are random draws: they differ between devices unless generators match, which is no
#: numerical fault of theirs.
RANDOM_OPS = frozenset({
    "rand", "randn", "randint", "rand_like", "randn_like", "randint_like", "randperm", "normal", "uniform",
    "bernoulli", "multinomial", "poisson", "random", "exponential", "geometric", "cauchy", "log_normal",
    "dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout", "rrelu",
    "gumbel_softmax",
})
MODULE_PREFIX = "Module"
#: Ops whose gradient is their output times (a function of) the incoming gradient: softmax y·(g − Σg·y),
#: sigmoid y·(1 − y)·g, exp y·g.
OUTPUT_SCALED = frozenset({"softmax", "softmin", "sigmoid", "exp"})

_KIND_WORDS = {GROWTH: "introduces error", NAN_ORIGIN: "NaN/Inf origin", ZEROS: "all-zero output",
               ENTERS: "error enters before it, outside the dumped calls"}

CallKey = tuple[str, int, str]  # (api, index, direction)


@dataclass(frozen=True, slots=True)
class CallEvidence:
    """The verdict on one call, in numbers and in words (the detail panel shows it)."""

    call: str
    direction: str
    judgement: Judgement | None  # None when it could not be judged
    why_not: str = ""  # why it could not be judged

    @property
    def text(self) -> str:
        return evidence_text(self.judgement) if self.judgement is not None else self.why_not

    @property
    def introduces(self) -> bool:
        return self.judgement is not None and self.judgement.kind is not None


@dataclass(slots=True)
class Suspect:
    """A call that introduces error, with its evidence."""

    call: str  # the NPU call, e.g. ``Functional_silu_3_backward``
    api: str
    direction: str
    kind: str  # GROWTH, NAN_ORIGIN, ZEROS, or ENTERS (its input got the error before the call)
    score: float  # times the output error exceeds what is allowed (inf for a NaN origin or a lost zero)
    evidence: str  # e.g. "inputs 3e-07, outputs 0.24, allowed 4e-06: ×60,000"
    judgement: Judgement
    rows: list[Row] = field(default_factory=list)
    stack: StackRecord | None = None  # the forward call's stack (where the call was made)
    seq: int = 0  # execution order: the seq of the call's first row

    @property
    def site(self) -> Frame | None:
        return stack_site(self.stack)

    @property
    def worst_row(self) -> Row | None:
        """The output row the verdict rests on."""
        named = (r for r in self.rows if r.name == self.judgement.output)
        return next(named, self.rows[0] if self.rows else None)

    @property
    def finding(self) -> str:
        """What it did and the numbers: "introduces error — inputs …"."""
        return f"{_KIND_WORDS[self.kind]} — {self.evidence}"

    @property
    def text(self) -> str:
        site = self.site
        where = f"; called at {site.path}:{site.line} in {site.function}" if site else ""
        return f"{self.call} ({self.direction}): {self.finding}{where}"


@dataclass(slots=True)
class Diagnosis:
    """The suspects of one pair of dumps, and the evidence on every call judged."""

    suspects: list[Suspect] = field(default_factory=list)
    calls: dict[str, CallEvidence] = field(default_factory=dict)  # by NPU (else bench) call name
    compared: int = 0  # rows whose tensors or statistics were compared on both sides
    judged: int = 0  # calls judged
    original: str | None = None  # the row the original's advisor names (its first "No" row)
    failing: int = 0  # rows that fail or could not be compared (the app counts them alike)

    @property
    def culprit(self) -> Suspect | None:
        return self.suspects[0] if self.suspects else None

    @property
    def verdict(self) -> str:
        """One line: the culprit, or what was found instead."""
        if not self.compared:
            return "Nothing was compared: no verdict."
        if not self.judged:
            return (f"{self.compared:,} rows compared, but no call has both inputs and outputs compared: "
                    "no verdict.")
        if not self.suspects and self.failing:  # e.g. bf16 rounding beyond the original's thresholds
            return (f"{self.failing:,} entries fail, yet no call judged introduces an error beyond rounding "
                    f"({self.judged:,} calls judged).")
        if not self.suspects:
            return f"No operator introduces an error beyond rounding ({self.judged:,} calls judged)."
        more = len(self.suspects) - 1
        tail = f" (+{more} more suspect{'s' if more > 1 else ''})" if more else ""
        return f"Culprit: {self.suspects[0].text}{tail}"


def fmt_error(value: float) -> str:
    """A relative error in two significant digits."""
    if math.isinf(value):
        return "inf"
    if value == 0:
        return "0"
    return f"{value:.2g}"


def times_text(score: float) -> str:
    """A suspect's score as the evidence ends with it: ``×12,728``."""
    if math.isinf(score):
        return "×∞"
    return f"×{score:,.0f}" if score >= 10 else f"×{score:.1f}"


def evidence_text(j: Judgement) -> str:
    """The numbers behind a verdict, in words."""
    partial = " (some inputs not compared)" if j.partial else ""
    if j.kind == NAN_ORIGIN:
        return f"{j.output} gains NaN/Inf from finite inputs{partial}"
    if math.isinf(j.input_error):
        return "its inputs already carry NaN/Inf where the bench is finite"
    head = f"inputs {fmt_error(j.input_error)}{partial}, outputs {fmt_error(j.output_error)}"
    if j.kind == ZEROS:
        return f"{j.output} is all zeros where the bench is not: {head}"
    if j.kind == ENTERS:
        return (f"{j.output} carries {fmt_error(j.output_error)} where no tensor dumped before it carried "
                f"more than {fmt_error(j.input_error)}, allowed {fmt_error(j.allowed)}: "
                f"{times_text(j.score)}")
    return f"{head}, allowed {fmt_error(j.allowed)}: {times_text(j.score)}"


def _entry(row: Row) -> EntryName | None:
    return row.record.entry


def _errors(row: Row) -> ErrorMeasures | None:
    return row.result.errors if row.result is not None else None


def _key(entry: EntryName) -> CallKey:
    return (entry.api, entry.index, entry.direction)


def _op(entry: EntryName) -> str:
    return (entry.op or entry.api).rsplit(".", 1)[-1]


def _operands(rows: Sequence[Row], same_kind: bool) -> tuple[list[Operand], bool]:
    """The compared tensors of ``rows`` as operands, and whether some were not compared."""
    out: list[Operand] = []
    missing = False
    for row in rows:
        errors = _errors(row)
        if errors is None:
            missing = missing or not _scalar_only(row)
            continue
        out.append(Operand(errors, same_kind, row.bench))
    return out, missing


def _scalar_only(row: Row) -> bool:
    """A value the compare leaves out by design (a Python scalar or empty tensor without data)."""
    rec = row.record
    return rec.is_scalar or rec.numel == 0


class _Calls:
    """Rows grouped by call, in execution order."""

    def __init__(self, rows: Sequence[Row]) -> None:
        self.rows: dict[CallKey, list[Row]] = {}
        self.entry: dict[CallKey, EntryName] = {}
        for row in rows:
            entry = _entry(row)
            if entry is None or entry.direction not in (FORWARD, BACKWARD):
                continue
            key = _key(entry)
            if key not in self.rows:
                self.rows[key] = []
                self.entry[key] = entry
            self.rows[key].append(row)
        self.api_level = {d: any(self.entry[k].prefix != MODULE_PREFIX for k in self.rows if k[2] == d)
                          for d in (FORWARD, BACKWARD)}

    def forward_of(self, key: CallKey) -> list[Row]:
        return self.rows.get((key[0], key[1], FORWARD), [])


def _stack(rows: Sequence[Row]) -> StackRecord | None:
    return next((r.stack for r in rows if r.stack is not None), None)


def _judge_call(calls: _Calls, key: CallKey) -> Judgement | str | None:
    """The judgement of one call, or why it cannot be judged."""
    members = calls.rows[key]
    entry = calls.entry[key]
    if op_name(_op(entry)) in RANDOM_OPS:
        return "a random op: its draws differ unless the generators match"
    outs = [r for r in members if r.record.entry.kind in OUTPUT_KINDS]
    ins = [r for r in members if r.record.entry.kind not in OUTPUT_KINDS]
    outputs = [(r.name, r.result.errors) for r in outs if _errors(r) is not None]
    if not outputs:
        return "outputs not compared" if outs else "no outputs recorded"
    operands, missing = _operands(ins, same_kind=True)
    gains = None
    if entry.direction == BACKWARD:
        forward = calls.forward_of(key)
        saved, missing_saved = _operands(forward, same_kind=False)
        operands += saved
        missing = missing or missing_saved
        gains = _gains(_op(entry), outs, forward)
    if missing and not operands:
        return "inputs not compared"
    return judge(outputs, operands, _op(entry), partial=missing, backward=entry.direction == BACKWARD,
                 gains=gains)


def _gains(op: str, grads: Sequence[Row], forward: Sequence[Row]) -> dict[str, float] | None:
    """For an op whose gradient is its output times the incoming gradient (:data:`OUTPUT_SCALED`): the
    forward output's RMS, the size the incoming gradients come out at (softmax's gradient is small because
    its probabilities are, not because terms cancel)."""
    if op_name(op) not in OUTPUT_SCALED:
        return None
    outputs = [e for r in forward if r.record.entry.kind in OUTPUT_KINDS and (e := _errors(r)) is not None]
    if len(outputs) != 1 or outputs[0].numel <= 0:
        return None
    rms = outputs[0].bench_norm / math.sqrt(outputs[0].numel)
    return {r.name: rms for r in grads} if rms > 0 and math.isfinite(rms) else None


def _call_name(rows: Sequence[Row]) -> str:
    first = next((r for r in rows if r.npu is not None), rows[0])
    return first.record.call


def _entering(members: Sequence[Row], before: float, backward: bool) -> Judgement | None:
    """The worst input of a call whose error entered before it: a forward call's activation (its first
    argument), a backward call's incoming gradients."""
    worst = None
    for row in members:
        entry, errors = _entry(row), _errors(row)
        if entry is None or errors is None or entry.kind != INPUT or not (backward or entry.path[:1] == (0,)):
            continue
        j = judge_entry(row.name, errors, before)
        if j is not None and (worst is None or j.score > worst.score):
            worst = j
    return worst


def _largest_error(members: Sequence[Row], before: float) -> float:
    for row in members:
        errors = _errors(row)
        if errors is not None and not errors.exact and math.isfinite(errors.rel):
            before = max(before, errors.rel)
    return before


def _suspect(calls: _Calls, key: CallKey, name: str, judgement: Judgement, evidence: str) -> Suspect:
    """The call ``key`` as a suspect of ``judgement``'s kind; located by its forward call's stack."""
    assert judgement.kind is not None
    members, entry = calls.rows[key], calls.entry[key]
    stack = _stack(calls.forward_of(key)) or _stack(members)
    return Suspect(name, entry.api, entry.direction, judgement.kind, judgement.score, evidence, judgement,
                   list(members), stack, min(r.seq for r in members))


def diagnose(rows: Sequence[Row]) -> Diagnosis:
    """Judge every call of one pair's rows (in execution order) and rank the suspects."""
    calls = _Calls(rows)
    diagnosis = Diagnosis(compared=sum(1 for r in rows if _errors(r) is not None),
                          failing=sum(1 for r in rows if r.status in (Status.FAIL, Status.ERROR)))
    found: list[Suspect] = []
    before = {FORWARD: 0.0, BACKWARD: 0.0}  # per direction, the largest error dumped so far
    previous = {FORWARD: "", BACKWARD: ""}  # per direction, the call dumped last
    for key, members in calls.rows.items():
        entry = calls.entry[key]
        name = _call_name(members)
        way = entry.direction
        if op_name(_op(entry)) not in RANDOM_OPS:
            entering = _entering(members, before[way], way == BACKWARD)
            if entering is not None:
                after = (f"; it entered after {previous[way]}" if previous[way] else
                         f"; it entered before the first {way} call")
                found.append(_suspect(calls, key, name, entering, evidence_text(entering) + after))
            before[way] = _largest_error(members, before[way])
            previous[way] = name
        verdict = _judge_call(calls, key)
        if not isinstance(verdict, Judgement):
            diagnosis.calls[name] = CallEvidence(name, way, None, verdict or "no verdict")
            continue
        diagnosis.judged += 1
        evidence = diagnosis.calls[name] = CallEvidence(name, way, verdict)
        container = entry.prefix == MODULE_PREFIX and calls.api_level[way]
        if verdict.kind is not None and not container:
            found.append(_suspect(calls, key, name, verdict, evidence.text))
    found.sort(key=lambda s: (s.direction != FORWARD, s.seq))
    diagnosis.suspects = found
    first_no = original_pick(rows)
    diagnosis.original = first_no.name if first_no is not None else None
    return diagnosis
