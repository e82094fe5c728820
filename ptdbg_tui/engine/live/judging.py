"""A big pair of statistics judged in a worker process beside the app, so that the diagnosis (a third of
the engine's time on an LLM's dump) does not share the app's interpreter with its UI and its reading.

The worker reads the pair's files again, as the engine did (:class:`~.side.SideState`), matches and
settles the rows and judges them with the engine's own stages; only the diagnosis comes back, naming
the engine's rows, records and results by their index (:mod:`~ptdbg_tui.engine.workers.sharing`): a
pair's rows sent the other way would cost as much as reading them. The worker checks that it read what
the engine read (the records files unchanged, the same rows by name); where it did not, or where it
failed, the engine judges the pair itself: the diagnosis is the same either way.
"""

from __future__ import annotations

import multiprocessing
import signal
import threading
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from functools import partial
from typing import NamedTuple

from ptdbg_tui.compare.diagnosis.findings import Diagnosis
from ptdbg_tui.compare.metrics.stats_pass import settled_results
from ptdbg_tui.compare.model import Row
from ptdbg_tui.engine.gcpolicy import fewer_collections
from ptdbg_tui.engine.live.side import FileMark, SideState, file_mark
from ptdbg_tui.engine.pipeline import Sidecars, judge_pair, match_pair
from ptdbg_tui.engine.workers.pool import let_go, main_hidden, output_to_devnull
from ptdbg_tui.engine.workers.sharing import dumps, loads, row_objects
from ptdbg_tui.formats.calls import CallSpec
from ptdbg_tui.formats.layout import RankDump

#: Pairs of fewer rows are judged in the engine's thread: the worker's start (its imports, ~1 s of a core)
#: costs more than their diagnosis.
WORKER_ROWS = 4096
#: A records file this big holds about :data:`WORKER_ROWS` rows or more: its engine starts the worker as
#: soon as it finds such a pair of statistics, so that the worker has imported what it needs by the time
#: the pair is read.
WORKER_BYTES = 1 << 20
#: Pairs at the worker at once (one judged, the next one read): while it has as many, the engine judges
#: the next pair itself. The worker reads each pair again, so it is no faster than the engine: the two
#: share the pairs.
IN_FLIGHT = 2


class Expected(NamedTuple):
    """What the engine read of a pair: the worker judges only the same."""

    files: tuple[FileMark, FileMark]  # each side's records file
    rows: int
    names: int  # :func:`names_of` the rows


class Judged(NamedTuple):
    """A pair's diagnosis from the worker, and whether it read each side's call sidecar (the engine then
    reads it too: its skipped lines are reported by the engine's side)."""

    data: bytes  # pickled, naming the engine's objects by their index in :func:`row_objects`
    read_specs: tuple[bool, bool]


def names_of(rows: Sequence[Row]) -> int:
    """A checksum of the rows' entry names, in order."""
    text = "\n".join(f"{r.npu.name if r.npu else ''}\t{r.bench.name if r.bench else ''}" for r in rows)
    return zlib.crc32(text.encode("utf-8", "surrogatepass"))


def diagnosis_of(judged: Judged, rows: Sequence[Row]) -> Diagnosis:
    found: Diagnosis = loads(judged.data, row_objects(rows))
    return found


def judge_files(npu: RankDump, bench: RankDump, mode: str, final: bool, expected: Expected) -> Judged | None:
    """In the worker: a pair of statistics read (``final``: as the engine reads without a watcher), matched,
    settled and judged as the engine does once both sides are quiet; None where it is not what the engine
    read (or a row is not settled by its statistics). Without the cyclic collector, as a batch compare
    (:func:`~ptdbg_tui.engine.gcpolicy.fewer_collections`): its young collections, scanning the pair's
    records and rows again and again as they are built, took a third of the worker's time; what it built
    is freed by reference counts once sent."""
    with fewer_collections():
        return _judged(npu, bench, mode, final, expected)


def _judged(npu: RankDump, bench: RankDump, mode: str, final: bool, expected: Expected) -> Judged | None:
    sides = (SideState(npu), SideState(bench))
    for side in sides:
        side.poll(final)
        if side.error is not None:
            return None
    if (sides[0].mark, sides[1].mark) != expected.files:  # other files, or changed while read
        return None
    rows = match_pair(sides[0].records(), sides[1].records(), mode).rows
    if len(rows) != expected.rows or names_of(rows) != expected.names:
        return None
    for row, result in zip(rows, settled_results(rows, True), strict=True):
        if result is None:
            return None
        row.result = result
    read = [False, False]

    def specs(k: int) -> dict[str, CallSpec]:
        read[k] = True
        return sides[k].call_specs(True)

    n, b = sides
    sidecars = Sidecars(
        npu, bench, partial(specs, 0), partial(specs, 1), lambda: (n.module_chains(), b.module_chains())
    )
    found = judge_pair(rows, sidecars)
    return Judged(dumps(found, row_objects(rows)), (read[0], read[1]))


def _quiet_worker() -> None:
    """The worker's output to /dev/null (it would tear the app's screen); Ctrl-C is the app's business."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    output_to_devnull()


def _ready() -> None:
    """Nothing: sent to start the worker (its unpickling imports this module and what it needs)."""


def big(dump: RankDump) -> bool:
    """Whether a dump's records file is big enough for the worker (:data:`WORKER_BYTES`)."""
    mark = file_mark(dump)
    return mark is not None and mark[0] >= WORKER_BYTES


class Judges:
    """The worker process, spawned (never forked: the app has threads) once the engine finds a big pair of
    statistics, or at the first pair it would send."""

    def __init__(self, wake: Callable[[], None]) -> None:
        self._wake = wake
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()
        self._queue: list[Future[Judged | None]] = []  # pairs submitted and not judged yet, in order
        self._ready: Future[None] | None = None  # done once the worker has started
        self._broken = False  # the worker died: the engine judges every pair itself from then on

    def free(self) -> bool:
        """Whether a pair sent now would be judged soon: the worker started (it is started now, where it
        is not: until it has imported what it needs, the engine judges its pairs itself) and not busy."""
        self.start()
        ready = self._ready is not None and self._ready.done() and self._ready.exception() is None
        return ready and not self._broken and len(self._queue) < IN_FLIGHT

    @property
    def started(self) -> bool:
        return self._pool is not None

    def start(self) -> None:
        """Start the worker now, where it is not (it imports the compare's code while the engine reads)."""
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                1, mp_context=multiprocessing.get_context("spawn"), initializer=_quiet_worker
            )
            with main_hidden():  # the worker starts inside the first submit()
                self._ready = self._pool.submit(_ready)

    def submit(
        self, npu: RankDump, bench: RankDump, mode: str, final: bool, expected: Expected
    ) -> Future[Judged | None] | None:
        assert self._pool is not None, "submitted while not free()"
        try:
            future = self._pool.submit(judge_files, npu, bench, mode, final, expected)
        except BrokenProcessPool:  # it died since free() was asked
            self._broken = True
            return None
        with self._lock:
            self._queue.append(future)
        future.add_done_callback(self._done)
        return future

    def waiting(self, future: Future[Judged | None]) -> bool:
        """Whether the worker has not begun this pair yet (one is judged at a time, in order)."""
        with self._lock:
            return future in self._queue[1:]

    def _done(self, future: Future[Judged | None]) -> None:
        with self._lock:
            self._queue.remove(future)
        if not future.cancelled() and isinstance(future.exception(), BrokenProcessPool):
            self._broken = True
        self._wake()

    def close(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            let_go(pool, kill=True)  # a pair half judged is of no use now
