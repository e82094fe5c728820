"""One call replayed on both sides, and the order in which a pair's calls are worth replaying.

:func:`replay_call` is what a replay worker runs (torch imported there, in :mod:`~.run`); everything
it gets is picklable: the call's rows and what each side's plans are built from.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from ptdbg_tui.compare.diagnosis.diagnose import is_device, values_differ
from ptdbg_tui.compare.diagnosis.evidence import Argument
from ptdbg_tui.compare.diagnosis.findings import NOT_A_KERNEL, Diagnosis
from ptdbg_tui.compare.diagnosis.replay_outcome import CallReplay, SideVerdict
from ptdbg_tui.compare.diagnosis.replay_reasons import Failed, Incomplete, Lacks, WhyNot, refusal
from ptdbg_tui.compare.model import Row, Status, rows_by_call, side_call
from ptdbg_tui.compare.replay.plan import NotReplayable, Plan, Value, build_plan
from ptdbg_tui.compare.replay.verdict import judge_side
from ptdbg_tui.formats.calls import CallSpec
from ptdbg_tui.formats.naming import OUTPUT_KINDS, call_key


@dataclass(frozen=True)
class SideSource:
    """What one side's replay plans are built from."""

    tensor_dir: str | None
    specs: Mapping[str, CallSpec] = field(default_factory=dict)  # by call key (``Functional_gelu_0``)
    keywords_recorded: bool = False  # the tool records keyword arguments (msprobe)
    inputs_after_call: bool = False  # the tool records a forward's inputs after the call (the original)
    node_order: bool = False  # the tool records a backward's gradients in autograd-node order
    sidecar: bool = False  # the dump has a call sidecar (kept when :meth:`only` narrows the specs)

    def __post_init__(self) -> None:
        if self.specs and not self.sidecar:
            object.__setattr__(self, "sidecar", True)

    @property
    def lacking(self) -> Lacks:
        """Why a rebuild of this side from its records alone may lack arguments."""
        return Lacks.NO_SIDECAR_LINE if self.sidecar else Lacks.NO_KEYWORDS

    def only(self, call: str) -> SideSource:
        """This source with the sidecar line of ``call`` (as this side names it) alone: what one replay
        task carries (every line of a large dump's sidecar, pickled with each task, would cost more than
        the replay)."""
        spec = self.specs.get(call_key(call))
        return replace(self, specs={call_key(call): spec} if spec is not None else {})


def call_rows(rows: Sequence[Row] | Mapping[str, list[Row]], call: str) -> list[Row]:
    """The rows a replay of ``call`` needs: its forward call's and its own (``rows``: a pair's rows, or
    :func:`rows_by_call` of them)."""
    by_call = rows if isinstance(rows, Mapping) else rows_by_call(rows)
    mine = by_call.get(call, [])
    entry = next((r.record.entry for r in mine if r.record.entry), None)
    forward = entry.forward_call if entry is not None else call
    return mine if forward == call else [*by_call.get(forward, []), *mine]


def side_plan(
    rows: Sequence[Row], side: str, call: str, source: SideSource, like: Plan | None = None
) -> tuple[Plan | NotReplayable, bool]:
    """One side's plan of ``call`` (or why none) and whether its call ran with TF32 matmuls. ``like``:
    the NPU's plan; when it lacks keyword arguments, this side is rebuilt as that one was (its records,
    the same keywords), never from what only this side's tool records: its replay matching then shows
    that rebuild right."""
    spec = source.specs.get(call_key(side_call(rows, side, call)))
    mirror = like is not None and not like.complete
    plan = build_plan(
        rows,
        side,
        call,
        source.tensor_dir,
        None if mirror else spec,
        source.keywords_recorded and not mirror,
        source.inputs_after_call,
        source.node_order,
    )
    if mirror and like is not None and isinstance(plan, Plan):
        plan.kwargs = {k: v for k, v in plan.kwargs.items() if k in like.kwargs}
    return plan, spec.state.tf32_matmul if spec is not None else False


def _side(
    rows: Sequence[Row], side: str, call: str, source: SideSource, like: Plan | None = None
) -> tuple[SideVerdict | WhyNot, Plan | None]:
    """One side's verdict (or why none) and its plan (:func:`side_plan`)."""
    from ptdbg_tui.compare.replay.harness import Refused
    from ptdbg_tui.compare.replay.run import run

    plan, tf32 = side_plan(rows, side, call, source, like)
    if isinstance(plan, NotReplayable):
        return plan.why, None
    try:
        done = run(plan, tf32=tf32)
    except Refused as e:
        why = refusal(e)
        return (why if plan.complete else Incomplete(why=why, lacking=source.lacking)), plan
    return judge_side(done.results, done.dtypes, done.names, done.honest, done.op), plan


def replay_call(rows: Sequence[Row], call: str, npu: SideSource, bench: SideSource) -> CallReplay:
    """Replay ``call`` on each side's own recorded inputs; never raises (a failure is the reason)."""
    start = time.perf_counter()
    try:
        n, plan = _side(rows, "npu", call, npu)
        b, other = _side(rows, "bench", call, bench, plan)
        complete = plan is not None and plan.complete
        differs = arguments_differ(plan, other) if plan is not None and other is not None else ()
    except Exception as e:  # a bug or an odd dump: this call is not replayed, the others are
        n = b = Failed(error=type(e).__name__, message=str(e))
        complete, differs = False, ()
    return CallReplay(call, n, b, complete, time.perf_counter() - start, differs, npu.lacking)


def arguments_differ(npu: Plan, bench: Plan) -> tuple[Argument, ...]:
    """The non-tensor arguments the two plans pass differently (said "approximate: 'tanh' against
    'none'"); empty when they agree (a keyword known on one side only is not compared, nor a device)."""
    pairs = [(f"argument {i}", a, b) for i, (a, b) in enumerate(zip(npu.args, bench.args, strict=False))]
    pairs += [(k, v, bench.kwargs[k]) for k, v in npu.kwargs.items() if k in bench.kwargs]
    return tuple(
        Argument(place=where, npu=repr(a.value), bench=repr(b.value))
        for where, a, b in pairs
        if isinstance(a, Value)
        and isinstance(b, Value)
        and a.kind == b.kind
        and not (is_device(a.value) and is_device(b.value))
        and values_differ(a.value, b.value)
    )


def suspect_calls(diagnosis: Diagnosis, top: int) -> list[str]:
    """The ``top`` suspects that blame a kernel, in rank order: what a replay looks at first."""
    return list(dict.fromkeys(s.call for s in diagnosis.suspects if s.kind not in NOT_A_KERNEL))[:top]


def differing_suspects(diagnosis: Diagnosis, top: int) -> list[str]:
    """The ``top`` suspects that blame a kernel whose inputs already differ between the runs: what the
    default replay confirms. A suspect whose inputs are equal on both sides is proven by the two dumps
    alone (its outputs' error is all its own)."""
    calls = (s.call for s in diagnosis.suspects if s.kind not in NOT_A_KERNEL and s.judgement.input_error > 0)
    return list(dict.fromkeys(calls))[:top]


def replay_order(rows: Sequence[Row], diagnosis: Diagnosis, top: int) -> list[str]:
    """The calls worth replaying, most telling first: the ``top`` suspects that blame a kernel, every call
    up to the first failing row in execution order, the calls whose results fail, then every other call
    (a kernel whose results pass, as inherited error hides its own, is still found within the budget)."""
    order = dict.fromkeys(suspect_calls(diagnosis, top))
    calls: dict[str, None] = {}
    failing: dict[str, None] = {}
    rest: dict[str, None] = {}
    first_fail = False
    for r in rows:
        rec, entry = r.npu, r.record.entry
        if rec is None or r.bench is None or entry is None:
            continue
        (rest if first_fail else calls)[rec.call] = None
        if entry.kind in OUTPUT_KINDS and r.status in (Status.FAIL, Status.WARN):
            first_fail = True
            failing[rec.call] = None
    for c in (*calls, *failing, *rest):
        order.setdefault(c, None)
    return list(order)
