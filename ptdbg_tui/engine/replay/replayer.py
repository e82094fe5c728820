"""Replaying a pair's calls in a worker process, within a time budget, most telling calls first.

The worker is a spawned process that imports torch (the ``dump`` extra), so neither the command nor
the app ever holds torch or runs an op. Each call is one task; the budget stops new tasks, and progress
is reported per call. Without torch the replay says how to install it.
"""

from __future__ import annotations

import difflib
import importlib.util
import multiprocessing
import os
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import replace
from multiprocessing import resource_tracker
from typing import TYPE_CHECKING, Any, TypeVar

from ptdbg_tui.compare.diagnosis.findings import (
    NOT_A_KERNEL,
    PARAMETERS,
    Diagnosis,
    PairNotReplayed,
    ReplayRun,
    Unreplayed,
)
from ptdbg_tui.compare.diagnosis.notes import JobNote, NotReplayed, ReplayCould, Undecided
from ptdbg_tui.compare.diagnosis.replay_outcome import CallReplay
from ptdbg_tui.compare.diagnosis.replay_reasons import Failed
from ptdbg_tui.compare.matching.pairing import attach_stacks
from ptdbg_tui.compare.model import Row, rows_by_call, side_call
from ptdbg_tui.compare.replay.calls import (
    SideSource,
    call_rows,
    differing_suspects,
    replay_call,
    replay_order,
)
from ptdbg_tui.compare.replay.replayed import with_replays
from ptdbg_tui.compare.report.layout_words import layout_error_text
from ptdbg_tui.compare.report.replay_words import INSTALL
from ptdbg_tui.engine.batch import Outcomes, PairOutcome, judge
from ptdbg_tui.engine.workers.pool import let_go, output_to_devnull
from ptdbg_tui.formats.dialects import dialect_of
from ptdbg_tui.formats.files import reason
from ptdbg_tui.formats.layout import DumpLayoutError, RankDump, discover
from ptdbg_tui.formats.reader import DumpReader, open_reader, report_bad
from ptdbg_tui.formats.records import BadLine, StackRecord, TensorRecord
from ptdbg_tui.formats.sites import stack_site
from ptdbg_tui.formats.untrusted import one_line

if TYPE_CHECKING:
    from ptdbg_tui.compare.replay.repro import Origin, Written

#: Seconds a replay may take by default (``--replay``, ``ptdbg-tui replay``, the app: ``--replay-budget``).
BUDGET_S = 60.0
#: Suspects replayed first (``--replay-top``).
TOP = 10

#: How much lower the app's replay worker runs than the app (``os.nice``).
BACKGROUND_NICE = 10
#: Calls in the worker's queue at once: one running, the next one ready.
IN_FLIGHT = 2
#: Most seconds a budget waits for the worker to import torch before it starts counting (the budget is
#: the replays' own time: on a loaded machine or a slow file system the import alone can take longer).
WARM_S = 300.0

T = TypeVar("T")
#: progress(done calls, calls to replay)
ReplayProgress = Callable[[int, int], None]


class ReplayUnavailable(Exception):
    """Replay cannot run here (the message says how to make it run)."""


def undecided(d: Diagnosis) -> Undecided:
    """Where two dumps cannot name a kernel and a replay can, what holds for the pair: the report's note
    and the app's say it alike, each with its own way to replay (``--replay``; the app's ``r``)."""
    return Undecided.FAILING if d.failing > d.errors else Undecided.PARAMETERS


def replay_would_decide(o: PairOutcome) -> bool:
    """:func:`replay_could_decide` of a pair whose rows say something of the NPU run, after the compare's
    default replay (of the suspects only: every call was not searched)."""
    return o.no_verdict is None and replay_could_decide(o.diagnosis, o.summary, searched=False)


def replay_could_decide(d: Diagnosis, summary: bool, searched: bool | None = None) -> bool:
    """Whether a pair's rows fail (or its parameters differ on entry) where its inputs already differ,
    and no suspect blames a kernel: two dumps cannot tell a kernel wrong there, a replay of every call on
    each side's own recorded inputs can. Tensor pairs only (not ``summary``); not where such a replay ran
    (``searched``; by default, where any replay ran); not where the error is an earlier step's whose
    culprit is no kernel (a call only the NPU script makes): every kernel of this step would be found
    right; nor where the runs differ before any kernel (their models, data or
    hyperparameters: :mod:`~ptdbg_tui.compare.diagnosis.runs_differ`)."""
    ran = bool(d.replay) if searched is None else searched
    if summary or d.fault or ran or d.inherited in NOT_A_KERNEL or d.differ:
        return False
    if any(s.kind not in NOT_A_KERNEL for s in d.suspects):  # a kernel is named, first or further down
        return False
    culprit = d.culprit
    return culprit.kind == PARAMETERS if culprit is not None else d.failing > d.errors


def replay_note(outcomes: Sequence[PairOutcome]) -> list[JobNote]:
    """The note a compare without ``--replay`` ends with where a replay of every call could still name a
    kernel."""
    undecided_pairs = [o for o in outcomes if replay_would_decide(o)]
    if not undecided_pairs:
        return []
    found = {undecided(o.diagnosis) for o in undecided_pairs}
    said = found.pop() if len(found) == 1 else None
    return [ReplayCould(labels=tuple(o.npu.label for o in undecided_pairs), said=said)]


def not_run_note(outcomes: Sequence[PairOutcome], why: str) -> list[JobNote]:
    """The one note a compare that did not replay (``why``: no torch, ``--no-replay``) makes, where a pair
    has a suspect the replay would have confirmed or refuted."""
    waiting = tuple(
        o.npu.label
        for o in outcomes
        if o.no_verdict is None and not o.summary and differing_suspects(o.diagnosis, 1)
    )
    return [NotReplayed(why=why, labels=waiting)] if waiting else []


def torch_importable() -> bool:
    """Whether replay can run here: torch is installed (an import hook or a broken install that
    raises while torch is looked for counts as no torch, never as a failed compare)."""
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


def require_torch() -> None:
    if not torch_importable():
        raise ReplayUnavailable(INSTALL)


def side_source(reader: DumpReader, folder: str | None) -> SideSource:
    """What one side's replays are built from, by the reader that read its records: its tensor folder,
    its call sidecar (this project's dumper; read here, to the end), and what its tool records."""
    reader.read_calls(final=True)
    dialect = dialect_of(reader.producer)
    return SideSource(
        folder,
        reader.call_specs(),
        dialect.keywords_recorded,
        dialect.inputs_after_call,
        dialect.gradients_in_node_order,
    )


def sources(
    npu: RankDump,
    bench: RankDump,
    npu_dir: str | None,
    bench_dir: str | None,
    bad: tuple[list[BadLine], list[BadLine]] | None = None,
) -> tuple[SideSource, SideSource]:
    """Both sides' :func:`side_source`, their records read again; ``bad``: each side's bad lines,
    which the call sidecars' skipped lines join."""
    out = []
    for k, (dump, folder) in enumerate(((npu, npu_dir), (bench, bench_dir))):
        reader = open_reader(dump)
        reader.read(final=True)
        out.append(side_source(reader, folder))
        report_bad(reader, bad[k] if bad is not None else None)
    return out[0], out[1]


def before_ui() -> None:
    """Start multiprocessing's resource tracker now, where torch can replay: a replay worker spawned
    later needs it, and it is spawned with sys.stderr's descriptor, which a UI that replaced sys.stderr
    no longer has ("bad value(s) in fds_to_keep": the first replay under the app failed)."""
    if torch_importable():
        resource_tracker.ensure_running()


class Replayer:
    """One worker process that replays calls; start it early, it imports torch in the background.

    ``background``: the worker's stdout and stderr go to /dev/null (under the app, whose screen a warning
    printed by torch's import would tear) and it runs at a lower priority (it gives way to the comparison
    and the app on a busy machine)."""

    def __init__(self, background: bool = False) -> None:
        self._pool: ProcessPoolExecutor | None = None
        self._background = background
        self._warm: Future[None] | None = None  # done once the worker has imported torch (or failed to)
        self._ready_at: float | None = None  # then (time.monotonic)

    def start(self) -> None:
        if self._pool is None:
            require_torch()
            self._pool = ProcessPoolExecutor(
                1,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_warm,
                initargs=(self._background,),
            )
            self._ready_at = None
            self._warm = self._pool.submit(_ready)  # the worker starts now, not at the first call
            self._warm.add_done_callback(self._warmed)

    def _warmed(self, warm: Future[None]) -> None:
        if warm is self._warm:
            self._ready_at = time.monotonic()

    def counted(self, since: float) -> float:
        """Seconds of a budget begun at ``since`` (``time.monotonic``) spent so far: none until the worker
        is ready (the budget is the replays' time: on a loaded machine or a slow file system torch's import
        alone can take longer than the default 20 s)."""
        if self._ready_at is None:
            return 0.0
        return max(0.0, time.monotonic() - max(since, self._ready_at))

    def wait_ready(self, timeout: float = WARM_S) -> None:
        """Start the worker and wait until it has imported torch (or failed to start: its calls then say why),
        ``timeout`` seconds at most: a budget counts from there."""
        self.start()
        assert self._warm is not None
        wait([self._warm], timeout=timeout)

    def submit(
        self, rows: Sequence[Row] | Mapping[str, list[Row]], call: str, npu: SideSource, bench: SideSource
    ) -> Future[CallReplay]:
        """Replay ``call`` (``rows``: the pair's, or :func:`rows_by_call` of them) in the worker."""
        mine = call_rows(rows, call)
        return self.run(replay_call, mine, call, npu.only(call), bench.only(side_call(mine, "bench", call)))

    def run(self, fn: Callable[..., T], *args: object) -> Future[T]:
        """Run ``fn(*args)`` in the worker (a module-level function: it is pickled by name)."""
        self.start()
        assert self._pool is not None
        return self._pool.submit(fn, *args)

    def replay(
        self,
        rows: Sequence[Row],
        calls: Sequence[str],
        npu: SideSource,
        bench: SideSource,
        budget_s: float = BUDGET_S,
        progress: ReplayProgress | None = None,
    ) -> Iterator[CallReplay]:
        """Each call's replay as it finishes, until the calls or the budget run out (counted once the
        worker is ready)."""
        self.wait_ready()
        deadline = time.monotonic() + budget_s
        by_call = rows_by_call(rows)
        todo = list(calls)
        pending: dict[Future[CallReplay], str] = {}
        done = 0
        while todo or pending:
            while todo and len(pending) < IN_FLIGHT and time.monotonic() < deadline:
                call = todo.pop(0)
                pending[self.submit(by_call, call, npu, bench)] = call
            if not pending:
                break
            finished, _ = wait(
                pending, timeout=max(0.0, deadline - time.monotonic()) + 5, return_when=FIRST_COMPLETED
            )
            if not finished:  # a call past the budget: leave it
                break
            for f in finished:
                call = pending.pop(f)
                done += 1
                if progress is not None:
                    progress(done, len(calls))
                yield self.result(f, call)
        for f in pending:
            f.cancel()

    def result(self, future: Future[CallReplay], call: str) -> CallReplay:
        """A finished call's replay; a worker that died is that call's reason (and a new one starts)."""
        try:
            return future.result()
        except Exception as e:
            if isinstance(e, BrokenProcessPool):
                self.close()
                self.start()
            failed = Failed(error=type(e).__name__, message=str(e), worker=True)
            return CallReplay(call, failed, failed, False)

    def close(self, kill: bool = False) -> None:
        """Let the worker go; ``kill``: end it now, in the middle of a call (the app quits: a long call
        would hold the interpreter's exit, which waits for the pool's workers)."""
        if self._pool is not None:
            pool, self._pool = self._pool, None
            let_go(pool, kill)

    def __enter__(self) -> Replayer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _warm(background: bool = False) -> None:
    """Import torch and the runner once, in the worker (``background``: its output to /dev/null and a
    lower priority first). Warnings are not shown: a rebuilt call's deprecation notices (softmax without
    ``dim``) would interleave with the report and say nothing about the user's code."""
    warnings.simplefilter("ignore")
    if background:
        output_to_devnull()
        os.nice(BACKGROUND_NICE)
    import ptdbg_tui.compare.replay.run  # noqa: F401


def _ready() -> None:
    """Nothing: submitted to make the pool start its worker."""


def replay_pair(
    replayer: Replayer,
    rows: Sequence[Row],
    diagnosis: Diagnosis,
    npu: RankDump,
    bench: RankDump,
    npu_dir: str | None,
    bench_dir: str | None,
    *,
    budget_s: float = BUDGET_S,
    top: int = TOP,
    calls: Sequence[str] | None = None,
    progress: ReplayProgress | None = None,
    full: bool = True,
    bad: tuple[list[BadLine], list[BadLine]] | None = None,
) -> tuple[list[str], dict[str, CallReplay]]:
    """Replay a pair's calls: ``calls``, else :func:`replay_order`'s (``full``) or the suspects whose
    inputs already differ (:func:`differing_suspects`: the default of ``ptdbg-tui compare``); the calls
    chosen and, by call, those replayed within the budget (:func:`with_replays` folds them in; ``bad``: as
    in :func:`sources`)."""
    if calls is not None:
        chosen = list(calls)
    else:
        chosen = replay_order(rows, diagnosis, top) if full else differing_suspects(diagnosis, top)
    if not chosen:
        return chosen, {}
    npu_src, bench_src = sources(npu, bench, npu_dir, bench_dir, bad)
    got = {r.call: r for r in replayer.replay(rows, chosen, npu_src, bench_src, budget_s, progress)}
    return chosen, got


#: A pair's replay: the calls chosen and those replayed, or why it was not replayed.
PairReplay = tuple[list[str], dict[str, CallReplay]] | PairNotReplayed


def replay_outcomes(
    outcomes: Sequence[PairOutcome],
    *,
    budget_s: float = BUDGET_S,
    top: int = TOP,
    calls: Sequence[str] | None = None,
    progress: ReplayProgress | None = None,
    replayer: Replayer | None = None,
    full: bool = True,
) -> dict[str, dict[str, CallReplay]]:
    """Replay the compared pairs' calls within one budget, pair after pair (``full``: as
    :func:`replay_pair`); by pair label, each call's replay. A pair compared from statistics only is left
    as it is (its diagnosis says so)."""
    found: list[PairReplay] = []
    begun = time.monotonic()
    worker = replayer or Replayer()
    try:
        for o in outcomes:
            left = budget_s - worker.counted(begun)
            found.append(_replay_outcome(worker, o, left, top=top, calls=calls, progress=progress, full=full))
    finally:
        if replayer is None:  # a worker started here ends here (a call past the budget with it); one given
            worker.close(kill=True)  # stays for its owner
    return fold_outcomes(outcomes, found)


def _replay_outcome(worker: Replayer, o: PairOutcome, left: float, **kw: Any) -> PairReplay:
    """One pair's :func:`replay_pair` within the ``left`` seconds, or why it is not replayed."""
    if o.no_verdict is not None:  # one dump twice, an empty side: both sides' replays say nothing of it
        return PairNotReplayed(Unreplayed.NO_VERDICT, no_verdict=o.no_verdict)
    if o.npu_tensors is None or o.bench_tensors is None:
        return PairNotReplayed(Unreplayed.STATISTICS)
    if left <= 0:
        return PairNotReplayed(Unreplayed.BUDGET)
    try:
        return replay_pair(
            worker,
            o.rows,
            o.diagnosis,
            o.npu,
            o.bench,
            str(o.npu_tensors),
            str(o.bench_tensors),
            budget_s=left,
            bad=o.bad_lines,
            **kw,
        )
    except OSError as e:  # a side's records or call sidecar cannot be read (any more)
        return PairNotReplayed(Unreplayed.UNREADABLE, reason=reason(e))


def fold_outcomes(
    outcomes: Sequence[PairOutcome], found: Sequence[PairReplay]
) -> dict[str, dict[str, CallReplay]]:
    """Fold each pair's replays into its diagnosis: of a job's pairs (:class:`Outcomes`), into the pair's
    own diagnosis (``dumps``), and the job is judged again (:func:`~ptdbg_tui.engine.batch.judge`): a later
    step's note names the earlier step's culprit as the replay leaves it (a refuted one is no culprit)."""
    out: dict[str, dict[str, CallReplay]] = {}
    job = isinstance(outcomes, Outcomes)
    # no pair replayed, of a job judged already: no stage of the job reads what the replay says, and each
    # keeps it, so the job's verdict only takes it on (a statistics job is not judged twice)
    judged = job and all(o.dumps is not None for o in outcomes)
    rejudge = not judged or not all(isinstance(r, PairNotReplayed) for r in found)
    for o, result in zip(outcomes, found, strict=False):
        own = o.dumps if job and o.dumps is not None else o.diagnosis
        if isinstance(result, PairNotReplayed):
            d = replace(own, replay=ReplayRun(why_not=result))
            if not rejudge:
                o.diagnosis = replace(o.diagnosis, replay=d.replay)
        else:
            d = with_replays(own, o.rows, result[1], o.npu.step, chosen=result[0])
            out[o.label] = result[1]
        if job:
            o.dumps = d
        else:
            o.diagnosis = d
    if job and rejudge:
        assert isinstance(outcomes, Outcomes)
        judge(outcomes)
    return out


# --- a repro for the kernel team ----------------------------------------------------------------


class ReproInputError(Exception):
    """The dump or the call cannot be used for a repro (the message says why)."""


def origin_of(dump: RankDump, stack: StackRecord | None) -> Origin:
    """Where a call of ``dump`` came from, in words for the repro's docstring."""
    from ptdbg_tui.compare.replay.repro import Origin

    site = stack_site(stack)
    where = f"{one_line(site.path)}:{site.line} in {one_line(site.function)}" if site is not None else ""
    if site is not None and site.source:  # the site's own line breaks only (dump text: one line each)
        where += f"\n    {one_line(site.source.strip())}"
    return Origin(str(dump.records), dump.label, where)


def dumps_of(path: str, step: int | None, rank: int | None) -> list[RankDump]:
    """The rank dumps at or below ``path`` of that step and rank (None: any), in step and rank order;
    raises :class:`ReproInputError` where there is none."""
    return _dumps_of(path, step, rank)[1]


def one_dump(path: str, step: int | None, rank: int | None) -> RankDump:
    """The one rank dump at or below ``path`` of that step and rank."""
    found, dumps = _dumps_of(path, step, rank)
    if len(dumps) != 1:
        raise ReproInputError(
            f"{path}: several dumps: pick one with --step, --rank (found {', '.join(d.label for d in found)})"
        )
    return dumps[0]


def _dumps_of(path: str, step: int | None, rank: int | None) -> tuple[list[RankDump], list[RankDump]]:
    """Every rank dump at or below ``path``, and those of that step and rank (at least one)."""
    try:
        found = discover(path)
    except DumpLayoutError as e:
        raise ReproInputError(layout_error_text(e)) from None
    dumps = [d for d in found if (step is None or d.step == step) and (rank is None or d.rank == rank)]
    if not dumps:
        raise ReproInputError(
            f"{path}: no dump of that step and rank (found {', '.join(d.label for d in found)})"
        )
    return found, dumps


def named_call(records: Sequence[TensorRecord], call: str) -> str:
    """The recorded call ``call`` names: a call (``VF_lstm_0_backward``), its forward by its key
    (``VF_lstm_0``), or one of its entries (``VF_lstm_0_backward_output.0``)."""
    calls = dict.fromkeys(r.call for r in records)
    by_entry = {r.name: r.call for r in records}
    for name in (call, f"{call}_forward", f"{call}.forward"):
        if name in calls:
            return name
    if call in by_entry:
        return by_entry[call]
    close = difflib.get_close_matches(call, list(calls), n=3)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    raise ReproInputError(f"the dump holds no call {call}{hint}")


def repro_task(
    rows: Sequence[Row], call: str, source: SideSource, out_dir: str, origin: Origin, device: str = "cpu"
) -> Written:
    """:func:`~ptdbg_tui.compare.replay.repro.write_repro` as a worker runs it (imported there: torch)."""
    from ptdbg_tui.compare.replay.repro import write_repro

    return write_repro(rows, call, source, out_dir, origin, device)


def repro_of_dump(
    path: str,
    call: str,
    out_dir: str,
    *,
    step: int | None = None,
    rank: int | None = None,
    device: str = "cpu",
) -> Written:
    """``ptdbg-tui repro``: write the repro of ``call`` of the NPU dump at ``path``, in this process (it
    imports torch). Raises :class:`ReproInputError`, or
    :class:`~ptdbg_tui.compare.replay.plan.CannotReplay` when the call cannot be rebuilt."""
    from ptdbg_tui.compare.replay.repro import write_repro

    dump = one_dump(path, step, rank)
    reader = open_reader(dump)
    tensors: list[TensorRecord] = []
    stacks: dict[str, StackRecord] = {}
    try:
        while True:
            batch = reader.read(final=True)
            tensors += batch.tensors
            stacks.update((s.call, s) for s in batch.stacks)
            if not batch.more:
                break
        source = side_source(reader, str(dump.tensor_dir) if dump.has_tensors else None)
    except OSError as e:
        raise ReproInputError(f"cannot read {reason(e)}") from None
    name = named_call(tensors, call)
    rows = [Row(rec, None, seq=i) for i, rec in enumerate(tensors)]
    attach_stacks(rows, stacks)  # the call's source line, for a tool that records no keyword arguments
    mine = call_rows(rows, name)
    entry = mine[-1].record.entry if mine else None
    stack = stacks.get(entry.forward_call if entry is not None else name) or stacks.get(name)
    return write_repro(mine, name, source, out_dir, origin_of(dump, stack), device)
