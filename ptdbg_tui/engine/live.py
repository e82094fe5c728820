"""The live engine: follows two dump folders and compares entries as both sides arrive.

One thread owns all state. Each pass it (re)discovers rank dumps, reads new records of every
followed side (:mod:`~ptdbg_tui.engine.side`), and runs each pair's pass
(:mod:`~ptdbg_tui.engine.pair`): re-match when records grew, reuse cached results, compute the
missing ones (statistics in-process, tensors in the :class:`~ptdbg_tui.engine.pool.MetricPool`),
and put row deltas into the :class:`~ptdbg_tui.engine.updates.Outbox` that the app drains.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing import resource_tracker
from pathlib import Path
from typing import TYPE_CHECKING

from ptdbg_tui.compare.model import Row
from ptdbg_tui.engine.pair import PairContext, PairState
from ptdbg_tui.engine.side import SideState
from ptdbg_tui.engine.updates import Outbox, PairInfo, Progress
from ptdbg_tui.engine.watch import DumpWatcher
from ptdbg_tui.formats.layout import DumpLayoutError, RankDump, discover, pair_dumps

if TYPE_CHECKING:
    from ptdbg_tui.engine.pool import MetricPool

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LiveOptions:
    step: int | None = None
    rank: int | None = None
    match: str = "auto"
    summary: bool = False
    jobs: int = 1
    watch: bool = True
    poll: bool = False
    rescan_s: float = 2.0  # periodic rediscovery, heals missed events
    quiet_s: float = 2.0  # a side that has not grown for this long is finished (for now)
    flush_s: float = 0.1  # least time between two notifications of the app
    chunk: int = 512  # compare tasks per pool round between two flushes


class LiveEngine:
    """Background thread comparing ``npu_root`` against ``bench_root`` for the app."""

    def __init__(self, npu_root: str | Path, bench_root: str | Path, options: LiveOptions,
                 notify: Callable[[], None]) -> None:
        self.npu_root = Path(npu_root)
        self.bench_root = Path(bench_root)
        self.options = options
        self.outbox = Outbox(notify, options.flush_s)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._sides: dict[Path, SideState] = {}
        self._pairs: dict[str, PairState] = {}
        self._pool: MetricPool | None = None
        self._notice = ""  # the watcher's fallback notice, once reported
        self._watcher = (DumpWatcher([self.npu_root, self.bench_root], self.wake, options.poll)
                         if options.watch else None)
        self._waiting_reported: set[Path] = set()
        self._thread = threading.Thread(target=self._run, name="ptdbg-live-engine", daemon=True)
        self._context = PairContext(options, not options.watch, self.outbox, self._metric_pool,
                                    self._stop.is_set, lambda: self._progress(done=False))
        if options.jobs > 1:
            # Worker processes need multiprocessing's resource tracker, which is spawned with
            # sys.stderr's descriptor: start it now, before a UI replaces sys.stderr.
            resource_tracker.ensure_running()

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
    def watching(self) -> str:
        return self._watcher.mode if self._watcher else "static"

    def pairs(self) -> list[tuple[PairInfo, list[Row]]]:
        """The current rows of every pair in execution order (for export)."""
        return [(p.info, list(p.rows)) for p in list(self._pairs.values())]

    # -- thread --------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            if self._watcher is not None:
                self._watcher.start()
            self._loop()
        except Exception as e:  # the app must learn why updates stopped
            log.exception("live engine failed")
            self.outbox.notice(f"The comparison engine stopped: {type(e).__name__}: {e}")
            self.outbox.flush(force=True)
        finally:
            if self._watcher is not None:
                self._watcher.stop()
            if self._pool is not None:
                self._pool.close()

    def _loop(self) -> None:
        next_rescan = 0.0
        while not self._stop.is_set():
            now = time.monotonic()
            if now >= next_rescan:
                self._discover()
                if self._watcher is not None:
                    self._watcher.refresh()
                    if self._watcher.notice != self._notice:
                        self._notice = self._watcher.notice
                        self.outbox.notice(self._notice)
                next_rescan = now + self.options.rescan_s
            due = self._pass()
            if self._watcher is None:
                self.outbox.flush(force=True)
                return
            timeout = next_rescan - time.monotonic()
            if due is not None:
                timeout = min(timeout, due - time.monotonic())
            if self.outbox.flush():
                timeout = min(timeout, self.options.flush_s)
            if self._wake.wait(max(0.0, timeout)):
                self._wake.clear()

    # -- discovery -----------------------------------------------------------------------------
    def _find(self, root: Path) -> list[RankDump]:
        try:
            return discover(root)
        except DumpLayoutError as e:
            if root not in self._waiting_reported:
                self._waiting_reported.add(root)
                self.outbox.notice(f"Waiting for a dump: {e}")
            return []

    def _side(self, dump: RankDump) -> SideState:
        side = self._sides.get(dump.pkl)
        if side is None:
            side = self._sides[dump.pkl] = SideState(dump)
        return side

    def _discover(self) -> None:
        npu, bench = self._find(self.npu_root), self._find(self.bench_root)
        o = self.options
        pairs: dict[Path, RankDump | None] = {n.pkl: b for n, b in pair_dumps(npu, bench, o.step, o.rank)}
        for n in npu:  # NPU dumps without a bench yet: their rows wait as pending
            wanted = (o.step is None or n.step == o.step) and (o.rank is None or n.rank == o.rank)
            if wanted and n.pkl not in pairs:
                pairs[n.pkl] = None
        by_pkl = {n.pkl: n for n in npu}
        for key in [k for k in self._pairs if Path(k) not in pairs]:
            del self._pairs[key]
            self.outbox.drop_pair(key)
        for pkl, b in pairs.items():
            n = by_pkl[pkl]
            state = self._pairs.get(str(pkl))
            if state is not None and state.info.bench == b:
                continue
            info = self._pair_info(n, b)
            new = PairState(info, self._side(n), self._side(b) if b is not None else None)
            if state is not None:  # the bench changed: same tree node, everything recomputed
                new.emitted = state.emitted
            self._pairs[info.key] = new
        used = {s.dump.pkl for p in self._pairs.values() for s in (p.npu, p.bench) if s is not None}
        self._sides = {pkl: side for pkl, side in self._sides.items() if pkl in used}

    def _pair_info(self, n: RankDump, b: RankDump | None) -> PairInfo:
        label = n.label if b is None or b.label == n.label else f"{n.label} ↔ {b.label}"
        summary = self.options.summary or b is None or not (n.has_npy and b.has_npy)
        return PairInfo(str(n.pkl), label, n, b, summary)

    # -- one pass ------------------------------------------------------------------------------
    def _pass(self) -> float | None:
        """Read, match, compare, emit. Returns when undecided rows should be looked at again."""
        static = self._watcher is None
        for side in self._sides.values():
            side.poll(final=static)
            if len(side.bad) > side.reported_bad:
                first = side.bad[side.reported_bad]
                self.outbox.notice(f"{side.dump.pkl}: {len(side.bad) - side.reported_bad} malformed "
                                   f"line(s) skipped (line {first.line}: {first.reason})")
                side.reported_bad = len(side.bad)
        due: float | None = None
        for pair in list(self._pairs.values()):
            if self._stop.is_set():
                return None
            pair_due = pair.update(self._context)
            if pair_due is not None:
                due = pair_due if due is None else min(due, pair_due)
        self._progress(done=due is None)
        return due

    def _metric_pool(self) -> MetricPool:
        if self._pool is None:
            from ptdbg_tui.engine.pool import MetricPool

            self._pool = MetricPool(max(1, self.options.jobs))
        return self._pool

    def _progress(self, done: bool) -> None:
        pairs = list(self._pairs.values())
        npu = {p.npu.dump.pkl: len(p.npu.tensors) for p in pairs}
        bench = {p.bench.dump.pkl: len(p.bench.tensors) for p in pairs if p.bench}
        rows = sum(len(p.rows) for p in pairs)
        compared = sum(p.compared for p in pairs)
        self.outbox.put_progress(Progress(sum(npu.values()), sum(bench.values()), rows, compared, len(pairs),
                                          self.watching, done))
