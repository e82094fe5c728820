"""Replay in the live engine: once the comparison settles, each pair's calls are replayed in a worker
process (:class:`~ptdbg_tui.engine.replay.replayer.Replayer`: torch only there), the suspects of every
pair first, then the calls up to the first failing row, within a budget (``--replay-budget``); the user
asks for one call (``r``) or a repro (``R``) ahead of the others and outside the budget.

It runs on the engine's thread and never waits for the worker: a task is handed over, its future wakes
the engine when it is done, and the next pass collects it. A finished replay is kept on its pair
(:meth:`~ptdbg_tui.engine.live.pair.PairState.keep_replay`), which sends its diagnosis again with it and
folds it into every later one while the call's records stay the same. Only :meth:`LiveReplay.ask` is
called from another thread (the app's).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

from ptdbg_tui.compare.diagnosis.findings import Diagnosis, NoReplay, ReplayOff
from ptdbg_tui.compare.notices import Error, ReproFailed, ReproFault, ReproNotReplayable, ReproUnwritable
from ptdbg_tui.compare.replay.calls import SideSource, call_rows, replay_order, suspect_calls
from ptdbg_tui.compare.replay.plan import CannotReplay
from ptdbg_tui.compare.report.notice_words import repro_fault_text
from ptdbg_tui.compare.report.words import (
    asked_replay_text,
    budget_ran_out_text,
    call_not_replayed_text,
    call_unreadable_text,
    no_replay_text,
    replay_stopped_text,
    repro_written_text,
)
from ptdbg_tui.engine.live.pair import PairContext, PairState, Signature
from ptdbg_tui.engine.live.updates import Outbox
from ptdbg_tui.engine.replay.replayer import (
    IN_FLIGHT,
    Replayer,
    ReplayUnavailable,
    origin_of,
    repro_task,
    side_source,
)
from ptdbg_tui.formats.files import reason

#: Least seconds between two diagnoses of a pair sent while its replays come in.
SEND_S = 0.5
#: The worker may die on this many tasks in a row before replay stops (a crash on every call).
MAX_DEATHS = 3


@dataclass(frozen=True, slots=True)
class Job:
    """One call to replay (or to write a repro of) for a pair."""

    pair: str  # the pair's key
    call: str  # e.g. ``VF_lstm_0_backward``
    asked: bool = False  # the user asked: ahead of the others, outside the budget, said when done
    repro: str = ""  # write a repro to this folder instead of replaying


class LiveReplay:
    """The live engine's replays: what is queued, in the worker, and done."""

    def __init__(self, budget_s: float, top: int, outbox: Outbox, wake: Callable[[], None]) -> None:
        self.budget_s = budget_s  # 0: replay only what the user asks for
        self.top = top
        self._outbox = outbox
        self._wake = wake
        self._replayer = Replayer(background=True)
        self._lock = threading.Lock()
        self._asked: list[Job] = []  # from the app, not taken yet
        self._queue: deque[Job] = deque()
        self._pending: dict[Future[Any], tuple[Job, Signature]] = {}
        self._round_at = 0.0  # the current round's budget began then (it counts once the worker is ready)
        self._scheduled: dict[str, Diagnosis] = {}  # by pair: the two dumps' diagnosis its calls came from
        self._sources: dict[str, tuple[tuple[int, int], SideSource, SideSource]] = {}  # by pair, at versions
        self._off: NoReplay | None = None  # why replay cannot run here (said once)
        self._deaths = 0  # the worker died on this many tasks in a row
        self._ran_out = False  # the current round's budget ran out with calls left
        self._unsent: set[str] = set()  # pairs with replays kept since their diagnosis was last sent
        self._sent_at = 0.0
        self.done = 0  # jobs of the current round finished
        self.total = 0  # jobs of the current round

    def prestart(self) -> None:
        """Start the worker now, so that it imports torch while the comparison runs (replay on its own
        once the comparison settles); without torch, say so now."""
        if self.budget_s > 0:
            try:
                self._replayer.start()
            except ReplayUnavailable as e:
                self._stop(NoReplay(ReplayOff.UNAVAILABLE, reason=str(e)))

    def ask(self, job: Job) -> None:
        """Replay a call (or write its repro) as soon as the worker is free (any thread)."""
        with self._lock:
            self._asked.append(job)
        self._wake()

    @property
    def busy(self) -> bool:
        return bool(self._queue or self._pending)

    @property
    def why_not(self) -> NoReplay | None:
        """Why no replay will come on its own to confirm a suspect (None while one may): the app marks
        such a culprit unconfirmed, and says why."""
        if self._off is not None:
            return self._off
        if self.budget_s <= 0:
            return NoReplay(ReplayOff.NO_BUDGET)
        if self._ran_out:
            return NoReplay(ReplayOff.RAN_OUT)
        return None

    def step(self, pairs: Mapping[str, PairState], ctx: PairContext, settled: bool) -> bool:
        """Collect the finished tasks, queue the calls of the pairs diagnosed anew once the comparison
        has ``settled``, and hand the worker the next ones; whether a diagnosis was sent or the progress
        changed."""
        before = (self.done, self.total)
        sent = self._collect(pairs, ctx)
        with self._lock:
            asked, self._asked = self._asked, []
        if self._off is not None:
            for job in asked:
                self._outbox.notice(call_not_replayed_text(job.call, no_replay_text(self._off)))
            return sent
        if asked:
            self._start_round()
            self.total += len(asked)
            self._queue.extendleft(reversed(asked))
        if settled and self.budget_s > 0:
            self._schedule(pairs)
        self._submit(pairs)
        return sent or (self.done, self.total) != before

    def close(self) -> None:
        self._replayer.close(kill=True)

    def _start_round(self) -> None:
        if not self.busy:
            self.done = self.total = 0

    def _schedule(self, pairs: Mapping[str, PairState]) -> None:
        """Queue the calls of each pair whose two-dump diagnosis is new: every pair's suspects first,
        then the calls up to the first failing row and the failing ones; not those already replayed on
        the same records, queued or in the worker."""
        first: list[Job] = []
        rest: list[Job] = []
        waiting = {(j.pair, j.call) for j in (*self._queue, *(j for j, _ in self._pending.values()))}
        for key, pair in pairs.items():
            dumps = pair.clock.dumps
            if dumps is None or self._scheduled.get(key) is dumps or pair.info.summary or pair.bench is None:
                continue
            self._scheduled[key] = dumps
            top = set(suspect_calls(dumps, self.top))
            for call in replay_order(pair.rows, dumps, self.top):
                if (key, call) not in waiting and not pair.holds(call):
                    (first if call in top else rest).append(Job(key, call))
        if first or rest:
            if not any(not j.asked for j in (*self._queue, *(j for j, _ in self._pending.values()))):
                self._round_at = time.monotonic()  # a new round, a new budget
                self._ran_out = False
            self._start_round()
            self.total += len(first) + len(rest)
            self._queue.extend(first + rest)

    def _submit(self, pairs: Mapping[str, PairState]) -> None:
        while self._queue and len(self._pending) < IN_FLIGHT:
            job = self._queue[0]
            if not job.asked and self._replayer.counted(self._round_at) >= self.budget_s:
                self._out_of_budget()
                continue
            self._queue.popleft()
            pair = pairs.get(job.pair)
            if pair is None:  # the pair went (its dump was removed)
                self.total -= 1
                continue
            try:
                future, signature = self._start(job, pair)
            except ReplayUnavailable as e:
                self._stop(NoReplay(ReplayOff.UNAVAILABLE, reason=str(e)))
                return
            except OSError as e:  # its call sidecar cannot be read now
                self.total -= 1
                self._outbox.notice(call_unreadable_text(job.call, reason(e)))
                continue
            self._pending[future] = (job, signature)
            future.add_done_callback(lambda _: self._wake())

    def _start(self, job: Job, pair: PairState) -> tuple[Future[Any], Signature]:
        npu, bench = self._sources_of(job.pair, pair)
        if not job.repro:
            return self._replayer.submit(pair.by_call(), job.call, npu, bench), pair.signature(job.call)
        rows = call_rows(pair.by_call(), job.call)
        entry = rows[-1].record.entry if rows else None
        stack = pair.npu.stacks.get(entry.forward_call if entry is not None else job.call)
        origin = origin_of(pair.info.npu, stack)
        return self._replayer.run(repro_task, rows, job.call, npu.only(job.call), job.repro, origin), ()

    def _sources_of(self, key: str, pair: PairState) -> tuple[SideSource, SideSource]:
        """Both sides' replay sources, read again when a side grew."""
        assert pair.bench is not None
        versions = (pair.npu.version, pair.bench.version)
        found = self._sources.get(key)
        if found is None or found[0] != versions:
            info = pair.info
            npu = side_source(pair.npu.reader, str(info.npu.tensor_dir))
            bench = side_source(pair.bench.reader, str(info.bench.tensor_dir) if info.bench else None)
            found = self._sources[key] = (versions, npu, bench)
        return found[1], found[2]

    def _collect(self, pairs: Mapping[str, PairState], ctx: PairContext) -> bool:
        """Keep the finished replays on their pairs; send the pairs' diagnoses with them at most every
        SEND_S while more are coming (each one folds every replay kept so far), at once when the
        user asked or nothing is left; whether any was sent."""
        asked = False
        for future in [f for f in self._pending if f.done()]:
            job, signature = self._pending.pop(future)
            self.done += 1
            self._deaths = self._deaths + 1 if isinstance(future.exception(), BrokenProcessPool) else 0
            if job.repro:
                self._outbox.notice(_repro_said(job, future))
                continue
            replay = self._replayer.result(future, job.call)
            pair = pairs.get(job.pair)
            if pair is not None:
                pair.keep_replay(replay, signature)
                self._unsent.add(job.pair)
            if job.asked:
                asked = True
                self._outbox.notice(asked_replay_text(job.call, replay))
        now = time.monotonic()
        sent = bool(self._unsent) and (asked or not self.busy or now - self._sent_at >= SEND_S)
        if sent:
            for key in self._unsent:
                if key in pairs:
                    pairs[key].send_replays(ctx)
            self._unsent.clear()
            self._sent_at = now
        if self._deaths >= MAX_DEATHS:
            self._stop(NoReplay(ReplayOff.DIED, deaths=self._deaths))
        return sent

    def _out_of_budget(self) -> None:
        left = [j for j in self._queue if not j.asked]
        self._queue = deque(j for j in self._queue if j.asked)
        self.total -= len(left)
        self._ran_out = True
        self._outbox.notice(budget_ran_out_text(self.budget_s, len(left)))

    def _stop(self, why: NoReplay) -> None:
        """Replay cannot run here: say why once, and queue nothing more."""
        self._off = why
        self._queue.clear()
        self.done = self.total = 0
        self._outbox.notice(replay_stopped_text(why))


def _repro_said(job: Job, future: Future[Any]) -> str:
    """What the app is told of a repro written (or not)."""
    try:
        written = future.result()
    except OSError as e:
        fault: ReproFault = ReproUnwritable(call=job.call, path=job.repro, reason=str(e.strerror or e))
    except CannotReplay as e:
        fault = ReproNotReplayable(call=job.call, why=str(e))
    except Exception as e:  # a bug, or the worker died: this repro is not written, the app goes on
        fault = ReproFailed(call=job.call, error=Error.of(e))
    else:
        return repro_written_text(written.script, written.verdict)
    return repro_fault_text(fault)
