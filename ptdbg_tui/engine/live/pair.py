"""One compared pair of rank dumps in the live engine: its rows, the results cache, what the app
was sent, when to diagnose, and the pass that reads, matches, compares and emits it.

When a row without counterpart becomes "unmatched" (the rule, also in docs/app.md#live):

* while the other side is still growing the row stays pending;
* it becomes unmatched once the other side has moved past it (a matched row comes after it in
  execution order), or the other side is quiet: its records have not grown for ``quiet_s`` seconds
  (an absent bench dump counts as quiet once the NPU side itself is quiet);
* with ``watch=False`` everything is final at once.

Bench-only rows are shown only once final, so a bench run that is ahead of the NPU run does
not fill the tree with rows that are about to be matched.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, NamedTuple

from ptdbg_tui.compare.diagnosis.findings import Diagnosis
from ptdbg_tui.compare.diagnosis.replay_outcome import CallReplay
from ptdbg_tui.compare.matching.pairing import Matching, match_advice, model_rows
from ptdbg_tui.compare.metrics.stats_pass import settled_results
from ptdbg_tui.compare.model import Result, Row, Status, rows_by_call
from ptdbg_tui.compare.notices import PairFailed
from ptdbg_tui.compare.replay.calls import call_rows
from ptdbg_tui.compare.replay.replayed import with_replays
from ptdbg_tui.engine.callpath import Seg, call_path, placement_stack
from ptdbg_tui.engine.live.judging import WORKER_ROWS, Expected, Judged, Judges, diagnosis_of, names_of
from ptdbg_tui.engine.live.options import LiveOptions
from ptdbg_tui.engine.live.side import SideState
from ptdbg_tui.engine.live.updates import MatchNote, Outbox, PairInfo, Placed
from ptdbg_tui.engine.pipeline import Sidecars, SideRecords, judge_pair, match_pair
from ptdbg_tui.engine.workers.tasks import task_for
from ptdbg_tui.formats.records import StackRecord, TensorRecord

if TYPE_CHECKING:
    from ptdbg_tui.engine.workers.pool import TaskPool

#: Seconds before a tensor whose npy file was missing is tried again (live dumps only).
RETRY_S = 0.5
#: Least seconds between two diagnoses of a pair while results arrive, and the largest share of the
#: engine's time they may take.
DIAGNOSE_S = 0.5
DIAGNOSE_SHARE = 0.2
#: Rows whose data files failed to read that one rescan looks at again (a fixed file is compared
#: again; a dump whose data folder is empty must not cost a stat per tensor every rescan).
RECHECK_MAX = 2048

#: The records a replay of a call read (its rows' NPU and bench records): it stands while they are the same.
Signature = tuple[TensorRecord | None, ...]


@dataclass(frozen=True, slots=True)
class Kept:
    """A call's replay, kept on its pair while the records it read stay the same."""

    signature: Signature
    replay: CallReplay


#: What a data file was when it failed to read: ``stat`` fields, or the errno that stat gave.
FileState = tuple[int, ...] | None
Paths = tuple[str | None, str | None]  # a row's NPU and bench data files
TIME_SLACK_NS = 50_000_000


def file_state(path: str | None) -> FileState:
    """Enough of a file's status to see that it changed (rewritten, replaced, chmod-ed, created)."""
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError as e:
        return (-1, e.errno or 0)
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)


def _states(paths: Paths) -> tuple[FileState, FileState]:
    return file_state(paths[0]), file_state(paths[1])


def _changed_since(state: FileState, t_ns: int) -> bool:
    """Whether a file's status changed since shortly before ``t_ns``, when its read began: the read
    may have seen it half done (file times may lag the clock by a tick; a future time is skew)."""
    return state is not None and state[0] != -1 and t_ns - TIME_SLACK_NS <= state[3] <= time.time_ns()


@dataclass(frozen=True)
class PairContext:
    """What a pair's pass needs of the engine that runs it."""

    options: LiveOptions
    static: bool  # not watching: everything is final at once
    outbox: Outbox
    pool: Callable[[], TaskPool]  # here or on a Dask cluster
    stopping: Callable[[], bool]
    progress: Callable[[], None]  # the engine's progress, sent between two rounds of work
    judges: Judges | None = None  # the worker that judges big pairs of statistics
    #: whether a pair is worth sending to the worker, as far as the other pairs say
    worth_sending: Callable[[PairState], bool] = lambda _: False
    #: whether a pair other than this one waits for its first diagnosis (work for the engine's thread)
    others_wait: Callable[[PairState], bool] = lambda _: False


def row_key(row: Row) -> str:
    """A row's identity in the tree; stable when a pending NPU row finds its bench."""
    return row.npu.name if row.npu is not None else "bench:" + row.name


def _same(a: Row, b: Row) -> bool:
    return (
        a.npu is b.npu
        and a.bench is b.bench
        and a.result is b.result
        and a.seq == b.seq
        and a.stack is b.stack
        and a.fuzzy == b.fuzzy
    )


def _is_retryable(result: Result) -> bool:
    """A missing tensor file of a live dump: the original tool writes its records before all data."""
    return result.status is Status.ERROR and result.missing_data


def _same_records(a: Signature, b: Signature) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def _pending(row: Row) -> bool:
    """A row not judged yet (unpaired: the other side may still write its counterpart)."""
    return row.result is None


def _cache_key(row: Row) -> RowId:
    return (row.npu.name if row.npu else None, row.bench.name if row.bench else None)


class Pending(NamedTuple):
    """A diagnosis the worker is making, and of which rows."""

    future: Future[Judged | None]
    rows: list[Row]


class FailedPass(NamedTuple):
    """A pair's pass that raised: the sides' versions then, and what it raised."""

    versions: tuple[int, int]
    fault: PairFailed


class Errored(NamedTuple):
    """A row whose data files could not be compared: the files, and their states then."""

    paths: Paths
    states: tuple[FileState, FileState]


RowId = tuple[str | None, str | None]  # the NPU and bench entry names of a row


@dataclass
class ResultCache:
    """Results by row, kept across re-matches; rows to retry (a file being written) and rows that
    failed to read, which a rescan compares again once one of their files changed (restored, made
    readable, rewritten)."""

    results: dict[RowId, Result] = field(default_factory=dict)
    retry: dict[RowId, float] = field(default_factory=dict)  # when to try again
    errored: dict[RowId, Errored] = field(default_factory=dict)
    recheck_at: int = 0  # where the next rescan's look at ``errored`` starts

    def put(self, key: RowId, result: Result) -> None:
        self.results[key] = result
        self.retry.pop(key, None)

    def recheck(self) -> bool:
        """Forget the results of failed rows whose data files changed since; whether any was."""
        keys = list(self.errored)
        start = self.recheck_at % len(keys)
        look = (keys[start:] + keys[:start])[:RECHECK_MAX]
        self.recheck_at = start + len(look)
        changed = [k for k in look if self.errored[k].states != _states(self.errored[k].paths)]
        for k in changed:
            del self.errored[k]
            self.results.pop(k, None)
        return bool(changed)


@dataclass
class Sent:
    """What the app was sent of a pair's rows, and what is to send."""

    rows: dict[str, Row] = field(default_factory=dict)  # by row key; never mutated once sent
    paths: dict[tuple[str, str], tuple[tuple[Seg, ...], StackRecord | None]] = field(default_factory=dict)
    full: bool = True  # rows were re-matched: diff them all against what the app has
    changed: set[int] = field(default_factory=set)  # rows whose result arrived since the last emit
    unplaced: set[int] = field(default_factory=set)  # rows whose call's place is not known yet


@dataclass
class DiagnosisClock:
    """A pair's latest diagnosis and when to judge again: at most every DIAGNOSE_S while results
    arrive, and never more than DIAGNOSE_SHARE of the engine's time (~20 µs a call)."""

    diagnosis: Diagnosis | None = None  # with the replays folded in (what the app is sent)
    dumps: Diagnosis | None = None  # the two dumps' judgement alone
    at: float = 0.0
    cost: float = 0.0  # seconds the last one took
    dirty: bool = True

    def due(self, now: float, final: bool) -> bool:
        wait = max(DIAGNOSE_S, self.cost / DIAGNOSE_SHARE)
        return self.dirty and (final or now - self.at >= wait)


class PairState:
    """Rows of one pair, and its pass: read, match, compare, diagnose, emit."""

    def __init__(
        self, info: PairInfo, npu: SideState, bench: SideState | None, sent: Sent | None = None
    ) -> None:
        self.info = info
        self.npu = npu
        self.bench = bench
        self.rows: list[Row] = []
        self.keys: list[str] = []  # row_key of each row, made unique
        self.versions: tuple[int, int] = (-1, -1)
        self.resets: tuple[int, int] = (npu.resets, bench.resets if bench else -1)
        self.cache = ResultCache()
        self.sent = Sent(rows=sent.rows) if sent is not None else Sent()
        self.open: set[int] = set()  # rows without a result
        self.last_matched = -1  # seq of the last matched row
        self.compared = 0
        self.clock = DiagnosisClock()
        self.matching: Matching | None = None
        self.match_asked = ""  # the mode of the last re-match
        self.note: MatchNote | None = None  # what the app was last told of the matching
        self.failed: FailedPass | None = None
        self.replays: dict[str, Kept] = {}  # by call: folded into each diagnosis while its records hold
        self._by_call: dict[str, list[Row]] | None = None  # rows_by_call of the rows (None: stale)
        self.pending: Pending | None = None  # the diagnosis the worker is making
        self.to_worker = True  # until the worker fails to judge it

    @property
    def diagnosis(self) -> Diagnosis | None:
        return self.clock.diagnosis

    def side_of(self, row: Row) -> SideState | None:
        return self.npu if row.npu is not None else self.bench

    def settling(self, now: float, quiet_s: float) -> bool:
        """Whether either side may still grow (a missing tensor file may still come)."""
        return not (self.npu.quiet(now, quiet_s) and (self.bench is None or self.bench.quiet(now, quiet_s)))

    def rematch(self, mode: str) -> None:
        npu = self.npu.records()
        bench = self.bench.records() if self.bench is not None else SideRecords([], {}, npu.dialect)
        self.matching = match_pair(npu, bench, mode)
        self.match_asked = mode
        rows = self.matching.rows
        keys: list[str] = []
        seen: set[str] = set()
        self.open = set()
        self.last_matched = -1
        for i, row in enumerate(rows):
            row.result = self.cache.results.get(_cache_key(row))
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
        self._by_call = None
        self.sent.full = self.clock.dirty = True
        self.sent.changed.clear()
        self.sent.unplaced.clear()

    def update(self, ctx: PairContext, rescan: bool = False) -> float | None:
        resets = (self.npu.resets, self.bench.resets if self.bench else -1)
        if resets != self.resets:  # a side was rewritten: its files may hold other data now
            self.resets = resets
            self.cache = ResultCache()
            self.sent.paths.clear()
        versions = (self.npu.version, self.bench.version if self.bench else -1)
        reopened = rescan and bool(self.cache.errored) and self.cache.recheck()  # match again to reopen them
        rematched = reopened or versions != self.versions or self.match_asked != ctx.options.match
        if rematched:
            self.versions = versions
            self.rematch(ctx.options.match)
        todo, due = self.todo(ctx, time.monotonic())
        for _ in self.compute(ctx, todo):
            if rematched:  # how it was matched, before the data files are compared (statistics: below, once)
                self.send_match(ctx)
                rematched = False
            self.emit(ctx)
            self.diagnose(ctx, final=False)
            ctx.progress()
            ctx.outbox.flush()
            if ctx.stopping():
                return None
        self.send_match(ctx)  # rows that became unmatched may now say the matching is off
        self.emit(ctx)
        self.diagnose(ctx, final=True)
        if self.pending is not None:  # its end wakes the engine; this is in case it does not
            soon = time.monotonic() + ctx.options.rescan_s
            due = soon if due is None else min(due, soon)
        if self.sent.unplaced:  # some calls wait for their stack line or for quiet
            soon = time.monotonic() + ctx.options.quiet_s / 4
            due = soon if due is None else min(due, soon)
        return due

    def send_match(self, ctx: PairContext) -> None:
        """Tell the app how the pair was matched, when that changed. Only unpaired rows already
        judged unmatched count toward the advice to align: while the other side still writes, its
        tail is pending, not a sign that the names fail to match."""
        m = self.matching
        assert m is not None
        note = MatchNote(self.match_asked, m.mode, m.note, match_advice(m, _pending))
        if note != self.note:
            self.note = note
            ctx.outbox.put_match(self.info, note)

    def todo(self, ctx: PairContext, now: float) -> tuple[list[int], float | None]:
        """Indices of rows to compare now, and when undecided rows should be looked at again."""
        static = ctx.static
        quiet_s = ctx.options.quiet_s
        todo: list[int] = []
        due: float | None = None
        for i in sorted(self.open):
            row = self.rows[i]
            if row.matched:
                at = self.cache.retry.get(_cache_key(row))
                if at is None or now >= at:
                    todo.append(i)
                else:
                    due = at if due is None else min(due, at)
                continue
            other = self.bench if row.npu is not None else self.npu
            final = (
                static
                or row.seq < self.last_matched
                or (self.npu.quiet(now, quiet_s) if other is None else other.quiet(now, quiet_s))
            )
            if final:
                todo.append(i)
            else:
                wake = (other or self.npu).changed_at + quiet_s
                due = wake if due is None else min(due, wake)
        return todo, due

    def compute(self, ctx: PairContext, todo: list[int]) -> Iterator[None]:
        """Fill the results of the ``todo`` rows; yields after each round of work."""
        static = ctx.static
        tasks_at: list[int] = []
        settled = settled_results([self.rows[i] for i in todo], self.info.summary)
        for i, result in zip(todo, settled, strict=True):
            if result is not None:
                self.set(i, result)
            else:
                tasks_at.append(i)
        if not tasks_at:
            return
        yield
        pool = ctx.pool()
        npu_dir = self.info.npu.tensor_dir
        bench_dir = self.info.bench.tensor_dir if self.info.bench else None
        for start in range(0, len(tasks_at), ctx.options.chunk):
            part = tasks_at[start : start + ctx.options.chunk]
            tasks = [task_for(self.rows[i], npu_dir, bench_dir) for i in part]
            started = time.time_ns()
            for k, result in pool.map(tasks):
                i = part[k]
                now = time.monotonic()
                key = _cache_key(self.rows[i])
                if not static and result.status is Status.ERROR:
                    paths = (tasks[k].npu_path, tasks[k].bench_path)
                    states = _states(paths)
                    if any(_changed_since(st, started) for st in states) or (
                        _is_retryable(result) and self.settling(now, ctx.options.quiet_s)
                    ):
                        self.cache.retry[key] = now + RETRY_S  # being written, or changed while read
                        continue
                    self.cache.errored[key] = Errored(paths, states)
                self.set(i, result)
            yield
            if ctx.stopping():
                return

    def set(self, i: int, result: Result) -> None:
        row = self.rows[i]
        key = _cache_key(row)
        self.cache.put(key, result)
        self.compared += row.result is None
        self.open.discard(i)
        self.sent.changed.add(i)
        self.clock.dirty = True
        if self.sent.rows.get(self.keys[i]) is row:  # the app holds it: emitted rows are never mutated
            self.rows[i] = replace(row, result=result)
        else:
            row.result = result

    def diagnose(self, ctx: PairContext, final: bool) -> None:
        """Judge the pair's calls again when :class:`DiagnosisClock` says it is time: a big pair of
        statistics whose sides are quiet in the worker (:mod:`.judging`), the others here."""
        self.collect(ctx)
        if final and self.take_back(ctx):
            self.clock.dirty = True
        now = time.monotonic()
        if not self.clock.due(now, final):
            return
        self.clock.dirty = False
        if final and self.offload(ctx):
            return
        npu, bench = self.npu, self.bench  # unreadable: a note says so; the next diagnosis tries again
        sidecars = Sidecars(
            npu.dump,
            bench.dump if bench is not None else None,
            lambda: npu.call_specs(final),
            lambda: bench.call_specs(final) if bench is not None else {},
            lambda: (npu.module_chains(), bench.module_chains() if bench is not None else None),
        )
        self.judged(ctx, judge_pair(self.rows, sidecars), time.monotonic() - now)

    def judged(self, ctx: PairContext, dumps: Diagnosis, cost: float) -> None:
        self.clock.dumps = dumps
        self.clock.diagnosis = self.replayed(dumps)
        self.clock.at = time.monotonic()
        self.clock.cost = cost
        ctx.outbox.put_diagnosis(self.info, self.clock.diagnosis)

    def offload(self, ctx: PairContext) -> bool:
        """Send the pair to the worker, where it is worth its cost and the worker can read what the
        engine read: all of both sides, quiet, and every row settled by its statistics."""
        bench = self.bench
        if (
            ctx.judges is None
            or not self.to_worker
            or bench is None
            or not self.info.summary
            or self.open
            or len(self.rows) < WORKER_ROWS
            or (self.settling(time.monotonic(), ctx.options.quiet_s) and not ctx.static)
            or self.npu.mark is None
            or bench.mark is None
            or not ctx.worth_sending(self)
            or not ctx.judges.free()  # last: it starts the worker
        ):
            return False
        expected = Expected((self.npu.mark, bench.mark), len(self.rows), names_of(self.rows))
        future = ctx.judges.submit(self.npu.dump, bench.dump, self.match_asked, ctx.static, expected)
        if future is None:
            return False
        self.pending = Pending(future, self.rows)
        return True

    def take_back(self, ctx: PairContext) -> bool:
        """Take the pair back from the worker where it has not begun it and this thread has nothing else
        to do (the job's last pairs: this thread would wait for the worker)."""
        pending = self.pending
        if pending is None or ctx.judges is None or not ctx.judges.waiting(pending.future):
            return False
        if ctx.others_wait(self):
            return False
        self.pending = None  # what the worker sends later is left
        return True

    def collect(self, ctx: PairContext) -> None:
        """The worker's diagnosis, once it came, if the rows it judged are still the pair's; where the
        worker could not judge them, the pair is judged here from now on."""
        pending = self.pending
        if pending is None or not pending.future.done():
            return
        self.pending = None
        if pending.rows is not self.rows:  # matched again since: a newer diagnosis is due
            return
        try:
            judged = pending.future.result()
            found = diagnosis_of(judged, self.rows) if judged is not None else None
        except Exception:  # the worker died, or cannot start: nothing is lost but its time
            judged = found = None
        if judged is None or found is None:
            self.to_worker = False
            self.clock.dirty = True
            return
        for side, read in zip((self.npu, self.bench), judged.read_specs, strict=True):
            if read and side is not None:  # as the diagnosis here would have read it
                side.call_specs(True)
        self.judged(ctx, found, 0.0)

    # -- replays -------------------------------------------------------------------------------
    def by_call(self) -> dict[str, list[Row]]:
        """The rows of each call (worked out once per re-match)."""
        if self._by_call is None:
            self._by_call = rows_by_call(self.rows)
        return self._by_call

    def signature(self, call: str) -> Signature:
        """The records a replay of ``call`` reads now."""
        return tuple(rec for r in call_rows(self.by_call(), call) for rec in (r.npu, r.bench))

    def holds(self, call: str) -> bool:
        """Whether ``call`` has a replay that still stands (its records unchanged since)."""
        kept = self.replays.get(call)
        return kept is not None and _same_records(kept.signature, self.signature(call))

    def replayed(self, dumps: Diagnosis) -> Diagnosis:
        """The two dumps' diagnosis with the replays that still stand folded in."""
        standing = {call: kept.replay for call, kept in self.replays.items() if self.holds(call)}
        return with_replays(dumps, model_rows(self.rows), standing, self.info.npu.step)

    def keep_replay(self, replay: CallReplay, signature: Signature) -> None:
        """Keep a finished replay (:meth:`send_replays` sends the diagnosis with it)."""
        self.replays[replay.call] = Kept(signature, replay)

    def send_replays(self, ctx: PairContext) -> None:
        """Send the diagnosis with the replays kept so far (once the pair was diagnosed)."""
        if self.clock.dumps is not None:
            self.clock.diagnosis = self.replayed(self.clock.dumps)
            ctx.outbox.put_diagnosis(self.info, self.clock.diagnosis)

    def placement(self, ctx: PairContext, row: Row) -> tuple[tuple[Seg, ...], StackRecord | None] | None:
        """Path of the row's call, or ``None`` while it cannot be known yet."""
        side = self.side_of(row)
        assert side is not None
        rec = row.record
        key = ("npu" if row.npu is not None else "bench", rec.call)
        found = self.sent.paths.get(key)
        if found is not None:
            return found
        entry = rec.entry
        chain = side.reader.module_chain(entry) if entry else None
        stack = placement_stack(entry, side.stacks)
        # The dumper writes a call's tensor lines, then its stack line, then its module line:
        # only the last call of a file may still be missing them.
        settled = (
            ctx.static
            or chain is not None
            or rec.call != side.tail_call
            or (stack is not None and not side.reader.has_modules)
            or side.quiet(time.monotonic(), ctx.options.quiet_s)
        )
        if not settled:
            return None
        found = self.sent.paths[key] = (call_path(entry, rec.name, chain, stack, row.noise), stack)
        return found

    def emit(self, ctx: PairContext) -> None:
        """Send the rows that are new or changed since the last emit (all of them after a re-match)."""
        sent = self.sent
        indices = range(len(self.rows)) if sent.full else sorted(sent.changed | sent.unplaced)
        sent.changed.clear()
        sent.unplaced.clear()
        sent.full = False
        upserts: dict[str, Placed] = {}
        for i in indices:
            row, key = self.rows[i], self.keys[i]
            prev = sent.rows.get(key)
            if prev is not None and _same(prev, row):
                continue
            if prev is None and row.npu is None and row.result is None:
                continue  # bench-only rows show once final
            placement = self.placement(ctx, row)
            if placement is None:
                sent.unplaced.add(i)  # look again next pass
                continue
            upserts[key] = Placed(row, *placement)
            sent.rows[key] = row
        removes: set[str] = set()
        if isinstance(indices, range):
            keys = set(self.keys)
            removes = {k for k in sent.rows if k not in keys}
            for k in removes:
                del sent.rows[k]
        if upserts or removes:
            ctx.outbox.put_rows(self.info, upserts, removes)
