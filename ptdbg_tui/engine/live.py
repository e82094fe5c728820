"""The live engine: follows two dump folders and compares entries as both sides arrive.

One thread owns all state. Each pass it (re)discovers rank dumps, reads new pkl lines from
byte offsets, re-matches a pair whose records grew (cheap), reuses results cached by
(NPU name, bench name), computes the missing ones (statistics in-process, tensors in the
:class:`~ptdbg_tui.engine.pool.MetricPool`), and puts row deltas into an :class:`Outbox` that
the app drains at its own pace — never one message per row.

When a row without counterpart becomes "unmatched" (the rule, also in the README):

* while the other side is still growing the row stays pending;
* it becomes unmatched once the other side has moved past it (a matched row comes after it in
  execution order), or the other side is quiet: its pkl has not grown for ``quiet_s`` seconds
  (an absent bench dump counts as quiet once the NPU side itself is quiet);
* with ``watch=False`` everything is final at once.

Bench-only rows are shown only once final, so a bench run that is ahead of the NPU run does
not fill the tree with rows that are about to be matched.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from multiprocessing import resource_tracker
from pathlib import Path
from typing import TYPE_CHECKING

from ptdbg_tui.compare.diagnosis import Diagnosis, diagnose
from ptdbg_tui.compare.matching import Matching, attach_stacks, choose_match, match_advice
from ptdbg_tui.compare.model import Result, Row, Status
from ptdbg_tui.compare.ranks import RankView, cross_rank
from ptdbg_tui.compare.tasks import settled_result, task_for
from ptdbg_tui.engine.callpath import Seg, call_path, placement_stack
from ptdbg_tui.engine.watch import DumpWatcher
from ptdbg_tui.formats.layout import DumpLayoutError, RankDump, discover, pair_dumps
from ptdbg_tui.formats.reader import mixed_pair, open_reader
from ptdbg_tui.formats.records import BadLine, StackRecord, TensorRecord

if TYPE_CHECKING:
    from ptdbg_tui.engine.cluster import ClusterPool
    from ptdbg_tui.engine.pool import MetricPool

log = logging.getLogger(__name__)

#: Seconds before a tensor whose npy file was missing is tried again (live dumps only).
RETRY_S = 0.5
#: Least seconds between two diagnoses of a pair while results arrive, and the largest share of the
#: engine's time they may take.
DIAGNOSE_S = 0.5
DIAGNOSE_SHARE = 0.2
#: Bytes of pkl decoded per read. json decodes a chunk in one call that holds the GIL, so the
#: chunk bounds how long the UI thread can be kept waiting (1 MiB: a few tens of ms).
READ_CHUNK = 1 << 20


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
    cluster: str | None = None  # a Dask scheduler (or local:N) for the metric work


@dataclass(frozen=True, slots=True)
class PairInfo:
    """A compared pair of rank dumps as the app sees it; ``key`` is stable (the NPU pkl)."""

    key: str
    label: str
    npu: RankDump
    bench: RankDump | None
    summary: bool  # statistics only: asked for, or a side has no npy dir (as ``ptdbg-tui compare``)


@dataclass(slots=True)
class Placed:
    """A row and where it goes in the tree (``site``: the stack that placed its call)."""

    row: Row
    path: tuple[Seg, ...]
    site: StackRecord | None


@dataclass(frozen=True, slots=True)
class MatchNote:
    """How a pair was matched: the mode asked for, the mode used, why ``auto`` chose it, and why
    another mode may pair better (:func:`~ptdbg_tui.compare.matching.match_advice`)."""

    asked: str
    used: str
    note: str = ""
    advice: str = ""


@dataclass
class PairDelta:
    info: PairInfo
    upserts: dict[str, Placed] = field(default_factory=dict)
    removes: set[str] = field(default_factory=set)
    diagnosis: Diagnosis | None = None  # None: unchanged
    match: MatchNote | None = None  # None: unchanged


@dataclass(frozen=True)
class Progress:
    npu_seen: int = 0
    bench_seen: int = 0
    rows: int = 0
    compared: int = 0
    pairs: int = 0
    watching: str = "static"  # "inotify" | "polling" | "static"
    done: bool = False  # nothing left to compare (for now, when watching)

    @property
    def pending(self) -> int:
        return self.rows - self.compared


@dataclass
class EngineUpdate:
    """Everything that changed since the app last drained the outbox."""

    pairs: dict[str, PairDelta] = field(default_factory=dict)
    dropped: set[str] = field(default_factory=set)
    progress: Progress | None = None
    notices: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.pairs or self.dropped or self.progress or self.notices)


class Outbox:
    """Deltas merged until the app takes them; at most one notification in flight."""

    def __init__(self, notify: Callable[[], None], flush_s: float) -> None:
        self._notify = notify
        self._flush_s = flush_s
        self._lock = threading.Lock()
        self._update = EngineUpdate()
        self._posted = False
        self._last = 0.0

    def put_rows(self, info: PairInfo, upserts: dict[str, Placed], removes: set[str]) -> None:
        with self._lock:
            delta = self._delta(info)
            for key in removes:
                delta.upserts.pop(key, None)
            delta.removes |= removes
            delta.removes -= upserts.keys()
            delta.upserts.update(upserts)

    def put_diagnosis(self, info: PairInfo, diagnosis: Diagnosis) -> None:
        with self._lock:
            self._delta(info).diagnosis = diagnosis

    def put_match(self, info: PairInfo, match: MatchNote) -> None:
        with self._lock:
            self._delta(info).match = match

    def drop_pair(self, key: str) -> None:
        with self._lock:
            self._update.pairs.pop(key, None)
            self._update.dropped.add(key)

    def put_progress(self, progress: Progress) -> None:
        with self._lock:
            self._update.progress = progress

    def notice(self, text: str) -> None:
        with self._lock:
            self._update.notices.append(text)

    def _delta(self, info: PairInfo) -> PairDelta:
        delta = self._update.pairs.get(info.key)
        if delta is None:
            delta = self._update.pairs[info.key] = PairDelta(info)
            self._update.dropped.discard(info.key)
        delta.info = info
        return delta

    def flush(self, force: bool = False) -> bool:
        """Notify the app if there is news and the last notification is old enough.

        Returns whether the caller should come back soon (news held back by the rate limit);
        news merged while a notification is pending is taken with it.
        """
        with self._lock:
            if not self._update or self._posted:
                return False
            now = time.monotonic()
            if not force and now - self._last < self._flush_s:
                return True
            self._posted, self._last = True, now
        self._notify()
        return False

    def take(self) -> EngineUpdate | None:
        """Called by the app: everything merged so far (``None`` if nothing)."""
        with self._lock:
            update, self._update = self._update, EngineUpdate()
            self._posted = False
        return update or None


class SideState:
    """One rank dump being followed (any format), with its stacks and module structure."""

    def __init__(self, dump: RankDump) -> None:
        self.dump = dump
        self.reader = open_reader(dump, READ_CHUNK)
        self.tensors: list[TensorRecord] = []
        self.stacks: dict[str, StackRecord] = {}
        self.bad: list[BadLine] = []
        self.reported_bad = 0
        self.version = 0
        self.changed_at = _monotonic_mtime(dump.pkl)

    def poll(self, final: bool) -> None:
        """Read what was appended (``version`` counts the changes)."""
        changed = False
        while True:
            batch = self.reader.read(final)
            if batch.reset:
                self.tensors, self.stacks, self.bad, self.reported_bad = [], {}, [], 0
            if batch:
                self.tensors += batch.tensors
                self.stacks.update((s.call, s) for s in batch.stacks)
                self.bad += batch.bad
                changed = True
            if not batch.more:
                break
        if self.reader.read_modules(final):
            changed = True
        if changed:
            self.version += 1
            self.changed_at = _monotonic_mtime(self.dump.pkl)

    def quiet(self, now: float, quiet_s: float) -> bool:
        return now - self.changed_at >= quiet_s

    @property
    def tail_call(self) -> str | None:
        return self.tensors[-1].call if self.tensors else None


def _monotonic_mtime(path: Path) -> float:
    """The file's mtime on the monotonic clock (now for a missing file)."""
    try:
        age = max(0.0, time.time() - path.stat().st_mtime)
    except OSError:
        age = 0.0
    return time.monotonic() - age


def row_key(row: Row) -> str:
    """A row's identity in the tree; stable when a pending NPU row finds its bench."""
    return row.npu.name if row.npu is not None else "bench:" + row.name


def _same(a: Row, b: Row) -> bool:
    return (a.npu is b.npu and a.bench is b.bench and a.result is b.result and a.seq == b.seq
            and a.stack is b.stack and a.fuzzy == b.fuzzy)


def _is_retryable(result: Result) -> bool:
    """A missing npy of a live dump: the original tool writes its pkl lines before all data."""
    return result.status is Status.ERROR and "not found" in result.message


class PairState:
    """Rows of one pair, what the app was sent, and the results cache."""

    def __init__(self, info: PairInfo, npu: SideState, bench: SideState | None) -> None:
        self.info = info
        self.npu = npu
        self.bench = bench
        self.rows: list[Row] = []
        self.keys: list[str] = []  # row_key of each row, made unique
        self.versions: tuple[int, int] = (-1, -1)
        self.cache: dict[tuple[str | None, str | None], Result] = {}
        self.retry: dict[tuple[str | None, str | None], float] = {}
        self.emitted: dict[str, Row] = {}
        self.paths: dict[tuple[str, str], tuple[tuple[Seg, ...], StackRecord | None]] = {}
        self.full_emit = True  # rows were re-matched: diff them all against what the app has
        self.changed: set[int] = set()  # rows whose result arrived since the last emit
        self.unplaced: set[int] = set()  # rows whose call's place is not known yet
        self.open: set[int] = set()  # rows without a result
        self.last_matched = -1  # seq of the last matched row
        self.compared = 0
        self.diagnosis: Diagnosis | None = None
        self.matching: Matching | None = None
        self.match_asked = ""  # the mode of the last re-match
        self.diagnosed_at = 0.0
        self.diagnose_cost = 0.0  # seconds the last diagnosis took
        self.diagnosis_dirty = True

    def side_of(self, row: Row) -> SideState | None:
        return self.npu if row.npu is not None else self.bench

    def settling(self, now: float, quiet_s: float) -> bool:
        """Whether either side may still grow (a missing npy may still come)."""
        return not (self.npu.quiet(now, quiet_s) and (self.bench is None or self.bench.quiet(now, quiet_s)))

    def rematch(self, mode: str) -> None:
        mixed = self.bench is not None and mixed_pair(self.npu.reader.producer, self.bench.reader.producer)
        self.matching = choose_match(self.npu.tensors, self.bench.tensors if self.bench else [], mode, mixed)
        self.match_asked = mode
        rows = self.matching.rows
        attach_stacks(rows, self.npu.stacks)
        keys: list[str] = []
        seen: set[str] = set()
        self.open = set()
        self.last_matched = -1
        for i, row in enumerate(rows):
            row.result = self.cache.get(_cache_key(row))
            if row.result is None:
                self.open.add(i)
            if row.matched:
                self.last_matched = row.seq
            key = row_key(row)
            if key in seen:  # duplicate names (module dumps): keep every row
                n = 1
                while f"{key}#{n}" in seen:
                    n += 1
                key = f"{key}#{n}"
            seen.add(key)
            keys.append(key)
        self.rows, self.keys, self.compared = rows, keys, len(rows) - len(self.open)
        self.full_emit = self.diagnosis_dirty = True
        self.changed.clear()
        self.unplaced.clear()


def _cache_key(row: Row) -> tuple[str | None, str | None]:
    return (row.npu.name if row.npu else None, row.bench.name if row.bench else None)


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
        self._pool: MetricPool | ClusterPool | None = None
        self._headline = ""  # the cross-rank verdict last reported
        self._judged: tuple[int, ...] = ()  # the diagnoses it was drawn from
        self._notice = ""  # the watcher's fallback notice, once reported
        self._watcher = (DumpWatcher([self.npu_root, self.bench_root], self.wake, options.poll)
                         if options.watch else None)
        self._waiting_reported: set[Path] = set()
        self._thread = threading.Thread(target=self._run, name="ptdbg-live-engine", daemon=True)
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

    def set_match(self, mode: str) -> None:
        """Re-match every pair in ``mode`` (any thread): results already computed are kept."""
        self.options = replace(self.options, match=mode)
        self.wake()

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
            if self._watcher is None:  # static: all done until the app asks for another matching
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
            pair_due = self._update_pair(pair)
            if pair_due is not None:
                due = pair_due if due is None else min(due, pair_due)
        self._progress(done=due is None)
        self._cross_rank()
        return due

    def _cross_rank(self) -> None:
        """Several ranks: tell the app which one diverges first, whenever that changes."""
        pairs = [p for p in self._pairs.values() if p.diagnosis is not None]
        seen = tuple(id(p.diagnosis) for p in pairs)
        if len({p.info.npu.rank for p in pairs}) < 2 or seen == self._judged:
            return
        self._judged = seen
        views = [RankView(p.info.npu.label, p.info.npu.step, p.info.npu.rank, p.rows, p.diagnosis)
                 for p in pairs if p.diagnosis is not None]
        headline = cross_rank(views).headline
        if headline != self._headline:
            self._headline = headline
            self.outbox.notice(headline[0].upper() + headline[1:])

    def _update_pair(self, p: PairState) -> float | None:
        versions = (p.npu.version, p.bench.version if p.bench else -1)
        if versions != p.versions or p.match_asked != self.options.match:
            p.versions = versions
            p.rematch(self.options.match)
            m = p.matching
            self.outbox.put_match(p.info, MatchNote(p.match_asked, m.mode, m.note, match_advice(m)))
        todo, due = self._todo(p, time.monotonic())
        for _ in self._compute(p, todo):
            self._emit(p)
            self._diagnose(p, final=False)
            self._progress(done=False)
            self.outbox.flush()
            if self._stop.is_set():
                return None
        self._emit(p)
        self._diagnose(p, final=True)
        if p.unplaced:  # some calls wait for their stack line or for quiet
            soon = time.monotonic() + self.options.quiet_s / 4
            due = soon if due is None else min(due, soon)
        return due

    def _todo(self, p: PairState, now: float) -> tuple[list[int], float | None]:
        """Indices of rows to compare now, and when undecided rows should be looked at again."""
        static = self._watcher is None
        quiet_s = self.options.quiet_s
        todo: list[int] = []
        due: float | None = None
        for i in sorted(p.open):
            row = p.rows[i]
            if row.matched:
                at = p.retry.get(_cache_key(row))
                if at is None or now >= at:
                    todo.append(i)
                else:
                    due = at if due is None else min(due, at)
                continue
            other = p.bench if row.npu is not None else p.npu
            final = static or row.seq < p.last_matched or (
                p.npu.quiet(now, quiet_s) if other is None else other.quiet(now, quiet_s))
            if final:
                todo.append(i)
            else:
                wake = (other or p.npu).changed_at + quiet_s
                due = wake if due is None else min(due, wake)
        return todo, due

    def _compute(self, p: PairState, todo: list[int]) -> Iterator[None]:
        """Fill the results of the ``todo`` rows; yields after each round of work."""
        static = self._watcher is None
        tasks_at: list[int] = []
        for i in todo:
            result = settled_result(p.rows[i], p.info.summary)
            if result is not None:
                self._set(p, i, result)
            else:
                tasks_at.append(i)
        if not tasks_at:
            return
        yield
        pool = self._metric_pool()
        npu_dir = p.info.npu.npy_dir
        bench_dir = p.info.bench.npy_dir if p.info.bench else None
        for start in range(0, len(tasks_at), self.options.chunk):
            part = tasks_at[start:start + self.options.chunk]
            tasks = [task_for(p.rows[i], npu_dir, bench_dir) for i in part]
            for k, result in pool.map(tasks):
                i = part[k]
                now = time.monotonic()
                if not static and _is_retryable(result) and p.settling(now, self.options.quiet_s):
                    p.retry[_cache_key(p.rows[i])] = now + RETRY_S
                    continue
                self._set(p, i, result)
            yield
            if self._stop.is_set():
                return

    def _set(self, p: PairState, i: int, result: Result) -> None:
        row = p.rows[i]
        key = _cache_key(row)
        p.cache[key] = result
        p.retry.pop(key, None)
        p.compared += row.result is None
        p.open.discard(i)
        p.changed.add(i)
        p.diagnosis_dirty = True
        if p.emitted.get(p.keys[i]) is row:  # the app holds it: emitted rows are never mutated
            p.rows[i] = Row(row.npu, row.bench, row.fuzzy, row.stack, result, row.seq)
        else:
            row.result = result

    def _diagnose(self, p: PairState, final: bool) -> None:
        """Judge the pair's calls again: at once when final, else at most every DIAGNOSE_S and never
        more than DIAGNOSE_SHARE of the engine's time (it takes ~20 µs a call)."""
        now = time.monotonic()
        wait = max(DIAGNOSE_S, p.diagnose_cost / DIAGNOSE_SHARE)
        if not p.diagnosis_dirty or (not final and now - p.diagnosed_at < wait):
            return
        p.diagnosis_dirty = False
        p.diagnosis = diagnose(p.rows)
        p.diagnosed_at = time.monotonic()
        p.diagnose_cost = p.diagnosed_at - now
        self.outbox.put_diagnosis(p.info, p.diagnosis)

    def _metric_pool(self) -> MetricPool | ClusterPool:
        if self._pool is None:
            from ptdbg_tui.engine.pool import MetricPool

            if self.options.cluster is not None:
                from ptdbg_tui.engine.cluster import ClusterError, ClusterPool

                try:
                    self._pool = ClusterPool(self.options.cluster)
                    self._pool.start()
                    self.outbox.notice(f"Comparing tensors on the Dask cluster {self.options.cluster}.")
                except ClusterError as e:
                    self.outbox.notice(f"{e}; comparing here instead.")
                    self._pool = None
            if self._pool is None:
                self._pool = MetricPool(max(1, self.options.jobs))
        return self._pool

    # -- emitting ------------------------------------------------------------------------------
    def _placement(self, p: PairState, row: Row) -> tuple[tuple[Seg, ...], StackRecord | None] | None:
        """Path of the row's call, or ``None`` while it cannot be known yet."""
        side = p.side_of(row)
        assert side is not None
        rec = row.record
        key = ("npu" if row.npu is not None else "bench", rec.call)
        found = p.paths.get(key)
        if found is not None:
            return found
        entry = rec.entry
        chain = side.reader.module_chain(entry) if entry else None
        stack = placement_stack(entry, side.stacks)
        # The dumper writes a call's tensor lines, then its stack line, then its module line:
        # only the last call of a file may still be missing them.
        settled = (self._watcher is None or chain is not None or rec.call != side.tail_call
                   or (stack is not None and not side.reader.has_modules)
                   or side.quiet(time.monotonic(), self.options.quiet_s))
        if not settled:
            return None
        found = p.paths[key] = (call_path(entry, rec.name, chain, stack, row.noise), stack)
        return found

    def _emit(self, p: PairState) -> None:
        """Send the rows that are new or changed since the last emit (all of them after a re-match)."""
        indices = range(len(p.rows)) if p.full_emit else sorted(p.changed | p.unplaced)
        p.changed.clear()
        p.unplaced.clear()
        p.full_emit = False
        upserts: dict[str, Placed] = {}
        for i in indices:
            row, key = p.rows[i], p.keys[i]
            prev = p.emitted.get(key)
            if prev is not None and _same(prev, row):
                continue
            if prev is None and row.npu is None and row.result is None:
                continue  # bench-only rows show once final
            placement = self._placement(p, row)
            if placement is None:
                p.unplaced.add(i)  # look again next pass
                continue
            upserts[key] = Placed(row, *placement)
            p.emitted[key] = row
        removes: set[str] = set()
        if isinstance(indices, range):
            keys = set(p.keys)
            removes = {k for k in p.emitted if k not in keys}
            for k in removes:
                del p.emitted[k]
        if upserts or removes:
            self.outbox.put_rows(p.info, upserts, removes)

    def _progress(self, done: bool) -> None:
        pairs = list(self._pairs.values())
        npu = {p.npu.dump.pkl: len(p.npu.tensors) for p in pairs}
        bench = {p.bench.dump.pkl: len(p.bench.tensors) for p in pairs if p.bench}
        rows = sum(len(p.rows) for p in pairs)
        compared = sum(p.compared for p in pairs)
        self.outbox.put_progress(Progress(sum(npu.values()), sum(bench.values()), rows, compared, len(pairs),
                                          self.watching, done))
