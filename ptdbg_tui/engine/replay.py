"""Replaying a pair's calls in a worker process, within a time budget, most telling calls first.

The worker is a spawned process that imports torch (the ``dump`` extra), so neither the command nor
the app ever holds torch or runs an op. Each call is one task; the budget stops new tasks, and progress
is reported per call. Without torch the replay says how to install it.
"""

from __future__ import annotations

import importlib.util
import multiprocessing
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

from ptdbg_tui.compare.diagnosis.findings import Diagnosis
from ptdbg_tui.compare.diagnosis.replayed import apply_replays
from ptdbg_tui.compare.model import Row
from ptdbg_tui.compare.replay.calls import SideSource, call_rows, replay_call, replay_order
from ptdbg_tui.compare.replay.verdict import CallReplay
from ptdbg_tui.engine.batch import PairOutcome
from ptdbg_tui.formats.dialects import dialect_of, producer
from ptdbg_tui.formats.layout import RankDump
from ptdbg_tui.formats.reader import open_reader

#: Seconds a replay may take by default (``--replay-budget``).
BUDGET_S = 60.0
#: Suspects replayed first (``--replay-top``).
TOP = 10
INSTALL = 'replay needs torch: pip install torch==2.13.0 && pip install -e ".[dump]"'

#: progress(done calls, calls to replay)
ReplayProgress = Callable[[int, int], None]


class ReplayUnavailable(Exception):
    """Replay cannot run here (the message says how to make it run)."""


def require_torch() -> None:
    if importlib.util.find_spec("torch") is None:
        raise ReplayUnavailable(INSTALL)


def sources(npu: RankDump, bench: RankDump, npu_dir: str | None,
            bench_dir: str | None) -> tuple[SideSource, SideSource]:
    """What each side's replays are built from: its tensor folder, its call sidecar (this project's
    dumper), and what its tool records."""
    out = []
    for dump, folder in ((npu, npu_dir), (bench, bench_dir)):
        reader = open_reader(dump)
        batch = reader.read(final=True)
        reader.read_calls(final=True)
        dialect = dialect_of(producer(dump.format, batch.stacks, batch.tensors))
        out.append(SideSource(folder, reader.call_specs(), dialect.keywords_recorded, dialect.inputs_after_call))
    return out[0], out[1]


class Replayer:
    """One worker process that replays calls; start it early, it imports torch in the background."""

    def __init__(self) -> None:
        self._pool: ProcessPoolExecutor | None = None

    def start(self) -> None:
        if self._pool is None:
            require_torch()
            self._pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=_warm)
            self._pool.submit(_warm)

    def replay(self, rows: Sequence[Row], calls: Sequence[str], npu: SideSource, bench: SideSource,
               budget_s: float = BUDGET_S, progress: ReplayProgress | None = None) -> Iterator[CallReplay]:
        """Each call's replay as it finishes, until the calls or the budget run out."""
        self.start()
        assert self._pool is not None
        deadline = time.monotonic() + budget_s
        todo = list(calls)
        pending: dict[Future[CallReplay], str] = {}
        done = 0
        while todo or pending:
            while todo and len(pending) < 2 and time.monotonic() < deadline:
                call = todo.pop(0)
                pending[self._pool.submit(replay_call, call_rows(rows, call), call, npu, bench)] = call
            if not pending:
                break
            finished, _ = wait(pending, timeout=max(0.0, deadline - time.monotonic()) + 5,
                               return_when=FIRST_COMPLETED)
            if not finished:  # a call past the budget: leave it
                break
            for f in finished:
                call = pending.pop(f)
                done += 1
                if progress is not None:
                    progress(done, len(calls))
                yield self._result(f, call)
        for f in pending:
            f.cancel()

    def _result(self, future: Future[CallReplay], call: str) -> CallReplay:
        """A finished call's replay; a worker that died is that call's reason (and a new one starts)."""
        try:
            return future.result()
        except Exception as e:
            if isinstance(e, BrokenProcessPool):
                self.close()
                self.start()
            return CallReplay(call, f"the replay worker failed: {type(e).__name__}: {e}", "", False)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> Replayer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _warm() -> None:
    """Import torch and the runner once, in the worker."""
    import ptdbg_tui.compare.replay.run  # noqa: F401


def replay_pair(replayer: Replayer, rows: Sequence[Row], diagnosis: Diagnosis, npu: RankDump,
                bench: RankDump, npu_dir: str | None, bench_dir: str | None, *, budget_s: float = BUDGET_S,
                top: int = TOP, calls: Sequence[str] | None = None,
                progress: ReplayProgress | None = None) -> dict[str, CallReplay]:
    """Replay a pair's calls (``calls``, else :func:`replay_order`'s) and fold the results into its
    diagnosis; returns them by call."""
    npu_src, bench_src = sources(npu, bench, npu_dir, bench_dir)
    chosen = list(calls) if calls is not None else replay_order(rows, diagnosis, top)
    got = {r.call: r for r in replayer.replay(rows, chosen, npu_src, bench_src, budget_s, progress)}
    apply_replays(diagnosis, rows, got, npu.step)
    return got


def replay_outcomes(outcomes: Sequence[PairOutcome], *, budget_s: float = BUDGET_S, top: int = TOP,
                    calls: Sequence[str] | None = None, progress: ReplayProgress | None = None,
                    replayer: Replayer | None = None) -> dict[str, dict[str, CallReplay]]:
    """Replay the compared pairs' calls within one budget, pair after pair; by pair label, each call's
    replay. A pair compared from statistics only is left as it is (its diagnosis says so)."""
    out: dict[str, dict[str, CallReplay]] = {}
    deadline = time.monotonic() + budget_s
    worker = replayer or Replayer()
    try:
        for o in outcomes:
            if o.npu_tensors is None or o.bench_tensors is None:
                o.diagnosis.replay = "not replayed: the pair was compared from statistics, without tensors"
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                o.diagnosis.replay = "not replayed: the replay budget ran out (--replay-budget)"
                continue
            out[o.label] = replay_pair(worker, o.rows, o.diagnosis, o.npu, o.bench, str(o.npu_tensors),
                                       str(o.bench_tensors), budget_s=left, top=top, calls=calls,
                                       progress=progress)
    finally:
        if replayer is None:  # a worker started here ends here; one given stays for its owner
            worker.close()
    return out
