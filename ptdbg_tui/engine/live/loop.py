"""The live engine: follows two dump folders and compares entries as both sides arrive.

One thread owns all state. Each pass it (re)discovers rank dumps, reads new records of every
followed side (:mod:`~ptdbg_tui.engine.live.side`), and runs each pair's pass
(:mod:`~ptdbg_tui.engine.live.pair`): re-match when records grew, reuse cached results, compute the
missing ones (statistics in-process, tensors in the :class:`~ptdbg_tui.engine.workers.pool.MetricPool`),
and put row deltas into the :class:`~ptdbg_tui.engine.live.updates.Outbox` that the app drains.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from multiprocessing import resource_tracker
from pathlib import Path
from typing import TYPE_CHECKING

from ptdbg_tui.compare.diagnosis.findings import Diagnosis
from ptdbg_tui.compare.diagnosis.notes import NoEntries, NoVerdict, OnPair, Repeated
from ptdbg_tui.compare.model import Row
from ptdbg_tui.compare.notices import (
    ClusterUnusable,
    EngineRestarted,
    EngineStopped,
    Error,
    OnCluster,
    PairFailed,
    Polling,
    PoolSaid,
    ReaderFailed,
)
from ptdbg_tui.compare.report.layout_words import layout_problem_text, no_dump_text
from ptdbg_tui.compare.report.notice_words import engine_text, pair_failed_text, polling_text, pool_text
from ptdbg_tui.compare.report.words import (
    job_note_text,
    narrowed_arrived_text,
    rank_notice,
    rank_summary,
    side_notice_text,
    skipped_lines_text,
    unpaired_text,
)
from ptdbg_tui.engine.batch import earlier_from_statistics
from ptdbg_tui.engine.context import Compared
from ptdbg_tui.engine.live.judging import Judges, big
from ptdbg_tui.engine.live.options import LiveOptions
from ptdbg_tui.engine.live.pair import FailedPass, PairContext, PairState
from ptdbg_tui.engine.live.replays import Job, LiveReplay
from ptdbg_tui.engine.live.side import SideState
from ptdbg_tui.engine.live.updates import FOUND, MISSING, NO_DUMP, Outbox, PairInfo, Progress, SideStatus
from ptdbg_tui.engine.live.watch import DumpWatcher
from ptdbg_tui.engine.pipeline import Context, judge_job
from ptdbg_tui.engine.replay.replayer import before_ui
from ptdbg_tui.engine.workers.pool import FUSED_BYTES, job_size, prestart
from ptdbg_tui.formats.layout import (
    DumpLayoutError,
    RankDump,
    Side,
    Unpaired,
    pair_dumps,
    same_dump,
    scan,
    statistics_only,
    steps_and_ranks,
    unpaired,
)

if TYPE_CHECKING:
    from ptdbg_tui.engine.workers.pool import TaskPool

log = logging.getLogger(__name__)


class LiveEngine:
    """Background thread comparing ``npu_root`` against ``bench_root`` for the app."""

    def __init__(
        self, npu_root: str | Path, bench_root: str | Path, options: LiveOptions, notify: Callable[[], None]
    ) -> None:
        self.npu_root = Path(npu_root)
        self.bench_root = Path(bench_root)
        self.options = options
        self.outbox = Outbox(notify, options.flush_s)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._sides: dict[Path, SideState] = {}
        self._pairs: dict[str, PairState] = {}
        self._pool: TaskPool | None = None
        self._pool_said: PoolSaid | None = None  # the last notice on where tensors are compared
        self._headline: tuple[str, ...] = ()  # the cross-rank verdict last reported (words.rank_summary)
        self._judged: tuple[int, ...] = ()  # the diagnoses it was drawn from
        # every pair of any step and rank, and the NPU dumps: the steps before a held one (--step S)
        self._around: tuple[list[RankDump], list[tuple[RankDump, RankDump]]] = ([], [])
        self._earlier: dict[tuple[Path, Path, float, float], tuple[list[Row], Diagnosis] | None] = {}
        self._fallback: Polling | None = None  # the watcher's fallback, once reported
        self._watcher = (
            DumpWatcher([self.npu_root, self.bench_root], self.wake, options.poll) if options.watch else None
        )
        self._npu_status: SideStatus | None = None
        self._bench_status: SideStatus | None = None
        self._unpaired: tuple[Unpaired, ...] = ()
        self._noted: set[str] = set()  # notices whose condition still holds
        self._noted_now: set[str] = set()
        self._restarts = 0
        self._next: tuple[Path, Path] | None = None  # folders that replace the roots once they hold a pair
        self._thread = threading.Thread(target=self._run, name="ptdbg-live-engine", daemon=True)
        # big pairs of statistics are judged in a worker process, beside this interpreter's UI and reading
        self._judges = Judges(self.wake) if options.jobs > 1 else None
        self._context = PairContext(
            options,
            not options.watch,
            self.outbox,
            self._metric_pool,
            self._stop.is_set,
            lambda: self._progress(done=False),
            self._judges,
            self._worth_sending,
            self._others_wait,
        )
        self._replay = LiveReplay(options.replay_budget_s, options.replay_top, self.outbox, self.wake)
        # The compiled pass only where the tensor files already make a big job (numba's load would
        # compete with the app's start; a dump that grows past it runs the numpy pass: same values).
        size = job_size([self.npu_root, self.bench_root])
        self._fused = options.cluster is None and size >= FUSED_BYTES
        # Worker processes need multiprocessing's resource tracker (which the fork server starts),
        # spawned with sys.stderr's descriptor: start them now, before a UI replaces sys.stderr. No
        # fork server for statistics alone (it would take a core from the reading; tensor files that
        # come later start it then).
        if options.jobs > 1 and (options.cluster is not None or not size or not prestart(self._fused)):
            resource_tracker.ensure_running()
        else:  # the replay worker's: started by the settled comparison or later by r and R
            before_ui()

    def _worth_sending(self, pair: PairState) -> bool:
        """Whether the worker should judge ``pair`` rather than this thread: the app has a first verdict
        already (this thread's is sooner), and another pair waits for its first diagnosis (this thread
        has other work meanwhile; with none, it would only wait for the worker)."""
        return any(p.diagnosis is not None for p in self._pairs.values()) and self._others_wait(pair)

    def _others_wait(self, pair: PairState) -> bool:
        return any(p is not pair and p.diagnosis is None and p.pending is None for p in self._pairs.values())

    # -- control -------------------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        """Its thread still runs (:meth:`stop` waits for it a while only)."""
        return self._thread.is_alive()

    @property
    def watching(self) -> str:
        return self._watcher.mode if self._watcher else "static"

    def set_match(self, mode: str) -> None:
        """Re-match every pair in ``mode`` (any thread): results already computed are kept."""
        self.options = replace(self.options, match=mode)
        self._context = replace(self._context, options=self.options)
        self.wake()

    def replay(self, pair: str, call: str) -> None:
        """Replay ``call`` of the pair keyed ``pair`` now, ahead of the others (any thread)."""
        self._replay.ask(Job(pair, call, asked=True))

    def repro(self, pair: str, call: str, folder: str) -> None:
        """Write the repro of ``call`` of the pair keyed ``pair`` to ``folder`` (any thread)."""
        self._replay.ask(Job(pair, call, asked=True, repro=folder))

    def narrow_to(self, npu_root: str | Path, bench_root: str | Path) -> None:
        """Compare these folders in place of the current ones as soon as they hold a pair of dumps (the
        narrowed tensor dump the app asked for); until then the current comparison stays (any thread)."""
        roots = (Path(npu_root), Path(bench_root))
        self._next = roots
        if self._watcher is not None:
            self._watcher.set_roots([self.npu_root, self.bench_root, *roots])
        self.wake()

    @property
    def awaited(self) -> tuple[Path, Path] | None:
        """The folders :meth:`narrow_to` waits for, until they arrive."""
        return self._next

    def pairs(self) -> list[tuple[PairInfo, list[Row]]]:
        """The current rows of every pair in execution order (for export)."""
        return [(p.info, list(p.rows)) for p in list(self._pairs.values())]

    # -- thread --------------------------------------------------------------------------------
    def _run(self) -> None:
        """The engine never dies of a fault: whatever escapes a pass is reported, every pair is
        rebuilt from the records, and the loop starts again (after a pause, so a fault that
        repeats cannot spin)."""
        try:
            self._replay.prestart()
            if self._watcher is not None:
                self._watcher.start()
            while not self._stop.is_set():
                try:
                    self._loop()
                    return
                except Exception as e:
                    log.exception("live engine: unexpected error; restarting")
                    self.outbox.notice(engine_text(EngineRestarted(error=Error.of(e))))
                    self.outbox.flush(force=True)
                    self._restarts += 1
                    for key in list(self._pairs):
                        self._rebuild(key)
                    if self._watcher is None and self._restarts > 3:
                        return  # a static run that keeps failing: what was sent stays
                    self._stop.wait(min(1.0, self.options.rescan_s))
        except Exception as e:  # the watcher itself failed to start: say why updates stopped
            log.exception("live engine failed")
            self.outbox.notice(engine_text(EngineStopped(error=Error.of(e))))
            self.outbox.flush(force=True)
        finally:
            if self._watcher is not None:
                self._watcher.stop()
            if self._pool is not None:
                self._pool.close()
            if self._judges is not None:
                self._judges.close()
            self._replay.close()

    def _loop(self) -> None:
        next_rescan = 0.0
        while not self._stop.is_set():
            now = time.monotonic()
            rescan = now >= next_rescan
            if rescan:
                self._rescan()
                next_rescan = now + self.options.rescan_s
            due = self._pass(rescan)
            if self._replay.step(self._pairs, self._context, settled=due is None and self._quiet()):
                self._cross_rank()  # the pairs around a pair adjust its diagnosis with the replays in
                self._progress(done=due is None)
            if self._watcher is None:
                self.outbox.flush(force=True)
                if self._pool is not None:  # no idle worker processes while nothing is asked
                    self._pool.close()
                    self._pool = None
                self._wake.wait()
                self._wake.clear()
                continue
            timeout = next_rescan - time.monotonic()
            if due is not None:
                timeout = min(timeout, due - time.monotonic())
            if self.outbox.flush():
                timeout = min(timeout, self.options.flush_s)
            if self._wake.wait(max(0.0, timeout)):
                self._wake.clear()

    def _rescan(self) -> None:
        """Look for dumps that came or went, and at the watcher (say when it falls back to polling)."""
        self._discover()
        if self._watcher is not None:
            self._watcher.refresh()
            fallback = self._watcher.fallback  # set once, never cleared: a watcher does not recover
            if fallback is not None and fallback != self._fallback:
                self._fallback = fallback
                self.outbox.notice(polling_text(fallback))

    def _quiet(self) -> bool:
        """No side of a pair may still grow (a static run: none ever does)."""
        now = time.monotonic()
        quiet_s = self.options.quiet_s
        return self._watcher is None or not any(p.settling(now, quiet_s) for p in self._pairs.values())

    # -- discovery -----------------------------------------------------------------------------
    def _find(self, role: str, root: Path) -> tuple[list[RankDump], SideStatus]:
        """A side's rank dumps and its status; nothing here raises for what is on disk."""
        try:
            found = scan(root)
        except DumpLayoutError as e:
            missing = not os.path.lexists(root)
            if missing and self._watcher is not None:  # it may still appear
                return [], SideStatus(role, str(root), MISSING, waiting=True)
            return [], SideStatus(role, str(root), MISSING if missing else NO_DUMP, str(e))
        if not found.dumps:
            return [], SideStatus(
                role,
                str(root),
                NO_DUMP,
                no_dump_text(root, found.problems),
                problems=tuple(map(layout_problem_text, found.problems)),
            )
        steps, ranks = steps_and_ranks(found.dumps)
        return found.dumps, SideStatus(
            role,
            str(root),
            FOUND,
            "",
            tuple(steps),
            tuple(ranks),
            problems=tuple(map(layout_problem_text, found.problems)),
        )

    def _side(self, dump: RankDump) -> SideState:
        side = self._sides.get(dump.records)
        if side is None:
            side = self._sides[dump.records] = SideState(dump)
        return side

    def _arrived(self, roots: tuple[Path, Path]) -> bool:
        """Whether both folders hold dumps that pair (for the steps and ranks asked)."""
        try:
            npu, bench = scan(roots[0]).dumps, scan(roots[1]).dumps
        except DumpLayoutError:
            return False
        return bool(pair_dumps(npu, bench, self.options.step, self.options.rank))

    def _switch(self) -> None:
        """The awaited folders arrived: they are the roots now (the old pairs go at this discovery)."""
        nxt = self._next
        if nxt is None or not self._arrived(nxt):
            return
        old = (self.npu_root, self.bench_root)
        self.npu_root, self.bench_root = nxt
        self._next = None
        if self._watcher is not None:
            self._watcher.set_roots([self.npu_root, self.bench_root])
        self.outbox.notice(narrowed_arrived_text((self.npu_root, self.bench_root), old))

    def _discover(self) -> None:
        self._switch()
        npu, self._npu_status = self._find("NPU", self.npu_root)
        bench, self._bench_status = self._find("bench", self.bench_root)
        for status in (self._npu_status, self._bench_status):
            for text in (side_notice_text(status), *status.problems):
                if text:
                    self._note(text)
        self._refresh_pairs(npu, self._wanted_pairs(npu, bench))
        used = {s.dump.records for p in self._pairs.values() for s in (p.npu, p.bench) if s is not None}
        self._sides = {path: side for path, side in self._sides.items() if path in used}

    def _wanted_pairs(self, npu: list[RankDump], bench: list[RankDump]) -> dict[Path, RankDump | None]:
        """Each NPU dump's bench, by the NPU records file (``None``: its rows wait as pending)."""
        o = self.options
        paired = pair_dumps(npu, bench, o.step, o.rank)
        self._around = (npu, pair_dumps(npu, bench))
        pairs: dict[Path, RankDump | None] = {n.records: b for n, b in paired}
        for n in npu:
            if (o.step is None or n.step == o.step) and (o.rank is None or n.rank == o.rank):
                pairs.setdefault(n.records, None)
        self._unpaired = unpaired(npu, bench, paired, o.step, o.rank)
        for note in self._unpaired:
            self._note(unpaired_text(note))
        return pairs

    def _refresh_pairs(self, npu: list[RankDump], pairs: dict[Path, RankDump | None]) -> None:
        """Drop the pairs that went, start those that came or whose bench changed."""
        by_records = {n.records: n for n in npu}
        for key in [k for k in self._pairs if Path(k) not in pairs]:
            del self._pairs[key]
            self.outbox.drop_pair(key)
        for path, b in pairs.items():
            n = by_records[path]
            state = self._pairs.get(str(path))
            info = self._pair_info(n, b)
            if state is not None and state.info.bench == b and state.info.summary == info.summary:
                continue
            # the bench changed, or the tensor files came (a tensor dump written over a statistics
            # one): same tree node, everything recomputed
            sent = state.sent if state is not None else None
            bench_side = self._side(b) if b is not None else None
            self._pairs[info.key] = PairState(info, self._side(n), bench_side, sent)
            self.outbox.put_rows(info, {}, set())  # listed in the app before its rows are read
            why = None if self.options.summary else statistics_only(n, b)
            if why:
                self._note(job_note_text(OnPair(pair=info.label, what=why)))
        self._start_judges()

    def _start_judges(self) -> None:
        """Start the worker once the job holds three big pairs of statistics, so that it has imported what
        it needs by the time they are read: this thread judges the first pair and the last itself, so
        fewer would never send it one."""
        if self._judges is None or self._judges.started:
            return
        pairs = self._pairs.values()
        if sum(p.info.summary and p.info.bench is not None and big(p.info.npu) for p in pairs) >= 3:
            self._judges.start()

    def _pair_info(self, n: RankDump, b: RankDump | None) -> PairInfo:
        label = n.label if b is None or b.label == n.label else f"{n.label} ↔ {b.label}"
        summary = self.options.summary or b is None or not (n.has_tensors and b.has_tensors)
        same = b is not None and same_dump(n, b) is not None
        return PairInfo(str(n.records), label, n, b, summary, same)

    def _rebuild(self, key: str) -> None:
        """A pair that failed starts over from its sides' records; the app keeps its rows until
        the new ones replace them."""
        old = self._pairs.get(key)
        if old is not None:
            new = self._pairs[key] = PairState(old.info, old.npu, old.bench, old.sent)
            new.failed = old.failed
            new.replays = old.replays

    def _note(self, text: str) -> None:
        """A notice, once for as long as its condition lasts (it may come back later)."""
        self._noted_now.add(text)
        if text not in self._noted:
            self._noted.add(text)
            self.outbox.notice(text)

    # -- one pass ------------------------------------------------------------------------------
    def _pass(self, rescan: bool = False) -> float | None:
        """Read, match, compare, emit. Returns when undecided rows should be looked at again.

        A side that cannot be read, or a pair whose pass fails, is a notice on that pair; the pair
        is tried again when its sides change or at the next rescan, and the other pairs go on."""
        static = self._watcher is None
        self._send_news()  # the pairs just found are listed before any is read
        polled: set[int] = set()
        due: float | None = None
        for key, pair in list(self._pairs.items()):
            if self._stop.is_set():
                return None
            for side in (pair.npu, pair.bench):
                if side is not None and id(side) not in polled:
                    polled.add(id(side))
                    self._poll(side, static)
            ran, pair_due = self._update(key, pair, rescan)
            if not ran:
                continue
            for side in (pair.npu, pair.bench):
                if side is not None:
                    self._report_bad(side)
            if pair_due is not None:
                due = pair_due if due is None else min(due, pair_due)
            self._pair_notes(pair, static)
            self._send_news()  # each pair as it is done: the app shows its rows and verdict early
        self._progress(done=due is None)
        self._cross_rank()
        if rescan:  # every condition was looked at: those that ended may be noticed again if they return
            self._noted &= self._noted_now
            self._noted_now = set()
        return due

    def _send_news(self) -> None:
        """The rows a pass found so far, with the progress, before the pass ends; nothing when it found
        none. A progress or notice still held back by the rate limit is no reason: a pass that found
        nothing would replace the last pass's 'done' with 'comparing', every pass, for good."""
        if self.outbox.pair_news():
            self._progress(done=False)
            self.outbox.flush()

    def _poll(self, side: SideState, static: bool) -> None:
        """Read what a side added; what it cannot read is a notice."""
        try:
            side.poll(final=static)
        except Exception as e:  # a reader bug: this dump waits for the next change or rescan
            log.exception("live engine: reading %s failed", side.dump.records)
            side.error = ReaderFailed(records=side.dump.records, error=Error.of(e))
        for problem in side.problems:
            self._note(problem)
        self._report_bad(side)

    def _report_bad(self, side: SideState) -> None:
        """The lines a side skipped since the last notice, its sidecars' included (a pair's pass reads
        the call sidecar), as one notice."""
        side.sidecar_lines()
        if len(side.bad) > side.reported_bad:
            self.outbox.notice(skipped_lines_text(side.dump.records, side.bad[side.reported_bad :]))
            side.reported_bad = len(side.bad)

    def _update(self, key: str, pair: PairState, rescan: bool) -> tuple[bool, float | None]:
        """One pair's pass: whether it ran, and when to look again. A pass that fails is rebuilt and
        waits for a change (or a rescan)."""
        for other in self._pairs.values():  # the worker's diagnoses as they come, not a pass later
            other.collect(self._context)
        versions = (pair.npu.version, pair.bench.version if pair.bench else -1)
        if pair.failed is not None and pair.failed.versions == versions and not rescan:
            self._note(pair_failed_text(pair.failed.fault))
            return False, None
        try:
            due = pair.update(self._context, rescan)
            pair.failed = None
            return True, due
        except Exception as e:
            log.exception("live engine: pair %s failed", pair.info.label)
            self._rebuild(key)
            fault = PairFailed(label=pair.info.label, error=Error.of(e))
            self._pairs[key].failed = FailedPass(versions, fault)
            self._note(pair_failed_text(fault))
            return False, None

    def _pair_notes(self, pair: PairState, static: bool) -> None:
        """A settled side without entries or with names that repeat; the same dump on both sides."""
        now = time.monotonic()
        found: list[NoVerdict | Repeated] = []
        for role, side in ((Side.NPU, pair.npu), (Side.BENCH, pair.bench)):
            if side is None or side.error or not (static or side.quiet(now, self.options.quiet_s)):
                continue
            if not side.tensors:
                found.append(NoEntries(side=role, records=side.dump.records))
            elif repeats := side.repeats():
                found.append(Repeated(side=role, records=side.dump.records, repeats=repeats))
        if pair.bench is not None and (same := same_dump(pair.npu.dump, pair.bench.dump)):
            found.append(same)
        for what in found:
            self._note(job_note_text(OnPair(pair=pair.info.label, what=what)))

    def _side_status(self, status: SideStatus, records: set[Path]) -> SideStatus:
        """``status`` with whether its dumps are being written and what keeps them from being read."""
        if status.state != FOUND:
            return status
        sides = [s for s in self._sides.values() if s.dump.records in records]
        now = time.monotonic()
        return replace(
            status,
            writing=any(not s.quiet(now, self.options.quiet_s) for s in sides),
            problems=status.problems + tuple(p for s in sides for p in s.problems),
        )

    def _earlier_step(self, npu: RankDump, bench: RankDump) -> tuple[list[Row], Diagnosis] | None:
        """A step the app does not hold (``--step S``), compared from its statistics once for what a
        later step's verdict needs of it (again when its files changed)."""
        try:
            key = (npu.records, bench.records, npu.records.stat().st_mtime, bench.records.stat().st_mtime)
        except OSError:
            return None
        if key not in self._earlier:
            self._earlier[key] = earlier_from_statistics(npu, bench, self.options.match, self._around[0])
        return self._earlier[key]

    def _cross_rank(self) -> None:
        """Whenever a pair's diagnosis changed: the job's verdict from each pair's own diagnosis
        (:func:`~ptdbg_tui.engine.pipeline.judge_job`: the other ranks' collectives and the step before
        each pair), and with several ranks the app learns which one diverges first. Not while the worker
        judges a pair: each diagnosis it sends would change it (and each reads every other rank's
        collectives)."""
        if any(p.pending is not None for p in self._pairs.values()):
            return
        pairs = [p for p in self._pairs.values() if p.diagnosis is not None]
        seen = tuple(id(p.diagnosis) for p in pairs)
        if seen == self._judged:
            return
        self._judged = seen
        around = len(pairs) > 1 or self.options.step is not None
        context = None
        if around:
            peers = [p.info.npu for p in pairs] if len(pairs) > 1 else None
            context = Context(peers, self._around[1], self._earlier_step)
        # a rank with no bench dump is compared with nothing: not one of the ranks compared (as in the report)
        judged = judge_job(
            [Compared(p.info.npu, p.rows, p.diagnosis) for p in pairs if p.diagnosis is not None],
            context,
            ranked=lambda i: pairs[i].bench is not None,
        )
        if around:
            for p, d in zip(pairs, judged.diagnoses, strict=True):
                self.outbox.put_diagnosis(p.info, d)
        ranks = judged.ranks if judged.several else None
        summary = rank_summary(ranks) if ranks is not None else ()
        if summary == self._headline:
            return
        self._headline = summary
        self.outbox.put_ranks(summary)  # the overview shows it whole
        if ranks is not None:
            # the notice: the headline, and where only checksums differ before it (the overview has all)
            self.outbox.notice(rank_notice(ranks))

    def _metric_pool(self) -> TaskPool:
        if self._pool is None:
            from ptdbg_tui.engine.workers.pool import MetricPool

            if self.options.cluster is not None:
                self._pool = self._cluster_pool(self.options.cluster)
            if self._pool is None:
                self._pool = MetricPool(max(1, self.options.jobs), fused=self._fused)
        return self._pool

    def _cluster_pool(self, address: str) -> TaskPool | None:
        """The Dask cluster's pool, or ``None`` when it cannot be used; said once, not at every
        reconnection (a static run lets go of its pool between passes)."""
        from ptdbg_tui.engine.workers.cluster import ClusterError, ClusterPool

        pool: ClusterPool | None
        pool = ClusterPool(address)
        said: PoolSaid
        try:
            pool.start()
            said = OnCluster(address=address)
        except ClusterError as e:
            pool, said = None, ClusterUnusable(why=str(e))
        if said != self._pool_said:
            self._pool_said = said
            self.outbox.notice(pool_text(said))
        return pool

    def _progress(self, done: bool) -> None:
        pairs = list(self._pairs.values())
        npu = {p.npu.dump.records: len(p.npu.tensors) for p in pairs}
        bench = {p.bench.dump.records: len(p.bench.tensors) for p in pairs if p.bench}
        rows = sum(len(p.rows) for p in pairs)
        compared = sum(p.compared for p in pairs)
        statuses = [
            self._side_status(s, set(npu if s.role == "NPU" else bench)) if s else None
            for s in (self._npu_status, self._bench_status)
        ]
        faults = tuple(pair_failed_text(p.failed.fault) for p in pairs if p.failed is not None)
        self.outbox.put_progress(
            Progress(
                sum(npu.values()),
                sum(bench.values()),
                rows,
                compared,
                len(pairs),
                self.watching,
                done,
                statuses[0],
                statuses[1],
                self._unpaired,
                faults,
                self._replay.done,
                self._replay.total,
                self._replay.why_not,
            )
        )
