"""Where does the error start? Per call: do its inputs pass and its outputs fail?

The original's advisor looks at the first "No" row, which is usually downstream noise. Here the
culprit is the first call, in execution order and per direction, whose inputs pass and whose
outputs fail: that call introduces the error. For backward, inputs are the incoming gradients
(``backward_input``) and outputs the gradients it produced (``backward_output``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ptdbg_tui.compare.model import Row, Status, worst
from ptdbg_tui.formats.naming import BACKWARD, FORWARD, INPUT, OUTPUT
from ptdbg_tui.formats.records import Frame, StackRecord

#: Frames whose path contains one of these belong to a dumper, not to the user's code.
TOOL_PATH_MARKS = ("ptdbg_ascend", "/dumper/")
#: Frames inside these belong to the framework; the user's call site is further out.
LIBRARY_PATH_MARKS = ("/site-packages/torch/", "/dist-packages/torch/", "/site-packages/torch_npu/")

_PASSING = (Status.PASS, Status.WARN)
_ALL_PASS = "All data in comparison result meets the accuracy requirements."


@dataclass(frozen=True, slots=True)
class CallVerdict:
    """How one call's inputs and outputs compare."""

    inputs: Status
    outputs: Status
    introduces: bool  # inputs pass, outputs fail
    text: str


@dataclass(slots=True)
class Culprit:
    """The first call of a direction that introduces the error."""

    direction: str
    call: str  # e.g. ``VF_lstm_0_backward``
    api: str  # e.g. ``VF_lstm``
    rows: list[Row] = field(default_factory=list)
    stack: StackRecord | None = None
    text: str = ""

    @property
    def site(self) -> Frame | None:
        return stack_site(self.stack)


def _kind(row: Row) -> str:
    e = row.record.entry
    return e.kind if e else ""


def _call_of(row: Row) -> str:
    return row.record.call


def _direction(row: Row) -> str:
    e = row.record.entry
    return e.direction if e else ""


def call_verdict(rows: Sequence[Row]) -> CallVerdict:
    """Verdict of one call from its rows (any order)."""
    ins = worst(r.status for r in rows if _kind(r) == INPUT)
    outs = worst(r.status for r in rows if _kind(r) == OUTPUT)
    direction = _direction(rows[0]) if rows else ""
    introduces = ins in _PASSING and outs is Status.FAIL
    if introduces:
        text = f"inputs pass, outputs fail: this op's {direction} introduces the error"
    elif outs is Status.FAIL:
        text = f"inputs {ins.value}, outputs fail: the error comes from its inputs"
    elif Status.PENDING in (ins, outs):
        text = "not compared yet"
    elif ins in _PASSING and outs in _PASSING:
        text = "inputs and outputs pass"
    else:
        text = f"inputs {ins.value}, outputs {outs.value}"
    return CallVerdict(ins, outs, introduces, text)


def _useful(frame: Frame, marks: tuple[str, ...]) -> bool:
    path = frame[0].replace("\\", "/")
    return not any(m in path for m in marks)


def stack_site(stack: StackRecord | None) -> Frame | None:
    """The user's call site: the innermost frame outside the dumper (and, when there is one,
    outside the framework itself)."""
    if stack is None:
        return None
    own = [f for f in stack.frames if _useful(f, TOOL_PATH_MARKS)]
    user = [f for f in own if _useful(f, LIBRARY_PATH_MARKS)]
    return (user or own or [None])[0]


def _stack_for(call: str, direction: str, stacks: Mapping[str, StackRecord]) -> StackRecord | None:
    """A backward stack shows the autograd thread, not the call site: prefer the forward call's."""
    if direction == BACKWARD:
        forward = stacks.get(call[: -len(BACKWARD)] + FORWARD)
        if forward is not None and stack_site(forward) is not None:
            return forward
    return stacks.get(call)


def _culprit_text(call: str, api: str, op: str, direction: str, stack: StackRecord | None) -> str:
    site = stack_site(stack)
    where = f"; called at {site[0]}:{site[1]} in {site[2]}" if site else ""
    what = "incoming gradient" if direction == BACKWARD else "input"
    made = "gradient it produces" if direction == BACKWARD else "output"
    return (f"{call}: the {direction} {what} matches the benchmark, the {made} does not — "
            f"{op or api} {direction} ({api}) introduces the error{where}")


def group_calls(rows: Sequence[Row]) -> dict[str, list[Row]]:
    """Rows by call, in order of first appearance."""
    calls: dict[str, list[Row]] = {}
    for row in rows:
        calls.setdefault(_call_of(row), []).append(row)
    return calls


def find_culprits(rows: Sequence[Row], stacks: Mapping[str, StackRecord] | None = None) -> list[Culprit]:
    """Per direction, forward first: the first call whose inputs pass and outputs fail.

    ``stacks`` (NPU stack lines by call) adds to the stacks attached to the rows.
    """
    known = {row.npu.call: row.stack for row in rows if row.stack is not None and row.npu is not None}
    known.update(stacks or {})
    found: dict[str, Culprit] = {}
    for call, members in group_calls(rows).items():
        direction = _direction(members[0])
        if direction in found or direction not in (FORWARD, BACKWARD):
            continue
        if call_verdict(members).introduces:
            entry = members[0].record.entry
            api, op = (entry.api, entry.op) if entry else (call, "")
            stack = _stack_for(call, direction, known)
            found[direction] = Culprit(direction, call, api, list(members), stack,
                                       _culprit_text(call, api, op, direction, stack))
    return [found[d] for d in (FORWARD, BACKWARD) if d in found]


def advisor_text(rows: Sequence[Row], culprits: Sequence[Culprit]) -> str:
    """The original's ``advisor_<ts>.txt`` (``Line``/``Suspect Nodes``/``Expert Advice``), with the
    culprit as the suspect instead of the first failing row. Lines are CSV line numbers."""
    line_of = {id(row): i + 2 for i, row in enumerate(rows)}
    suspect: Row | None = None
    advice = _ALL_PASS
    if culprits:
        first = culprits[0]
        failing = (r for r in first.rows if _kind(r) == OUTPUT and r.status is Status.FAIL)
        suspect = next(failing, first.rows[0])
        advice = first.text
    else:
        suspect = next((r for r in rows if r.status is Status.FAIL), None)
        if suspect is not None:
            advice = (f"{suspect.name} is the first failing entry, but no call was found whose inputs pass "
                      "and outputs fail (inputs missing, unmatched or failing already).")
    if suspect is None:
        return f"Line: NA\nSuspect Nodes: NA\nExpert Advice: {advice}\n"
    return f"Line: {line_of[id(suspect)]}\nSuspect Nodes: {suspect.name}\nExpert Advice: {advice}\n"
