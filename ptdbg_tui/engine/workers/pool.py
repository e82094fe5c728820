"""Worker processes for the tensor metrics.

Small tasks travel in batches (one pool round trip per batch, not per tensor); at most a few
batches per worker are in flight, so memory stays bounded by the workers' chunk buffers whatever
the dump size. Workers are forked from a fork server (a fresh single-threaded process that has
imported what they need once: :mod:`~ptdbg_tui.engine.workers.worker_preload`, and for a big job the
compiled pass, :mod:`~ptdbg_tui.engine.workers.fused_preload`), or spawned where there is none; the app has
threads, so never from the caller's own process. A worker
that dies takes only its own tasks down: they are retried one by one in a fresh pool and report
an ERROR if they kill it again.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import types
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from multiprocessing import forkserver
from typing import TYPE_CHECKING, NamedTuple, Protocol

from ptdbg_tui.compare.notices import CompareFailed, Error, Uncompared, WorkerFault

if TYPE_CHECKING:
    from ptdbg_tui.compare.model import Result
    from ptdbg_tui.engine.workers.tasks import CompareTask

#: A batch closes at this many bytes of tensor data or this many tasks.
BATCH_BYTES = 32 << 20
BATCH_TASKS = 64
#: Batches in flight per worker.
INFLIGHT = 2
#: numpy's BLAS would start threads of its own in every worker; one each is what we want.
THREAD_ENV = {var: "1" for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}
#: A job of this many bytes of tensor files (both sides) or more runs the compiled (numba) pass: its
#: gain over the numpy pass, ~0.5 s of CPU a GB, then pays for loading it (~0.5 s, once).
FUSED_BYTES = 1 << 30


def job_size(paths: Sequence[str | os.PathLike[str]]) -> int:
    """Bytes of tensor files in the dumps at ``paths`` (a guess before they are read: e.g. ``--rank`` may
    compare fewer), counted up to :data:`FUSED_BYTES`; 0 where a side has none (statistics only: no
    worker is needed) or a path is no dump (the compare says why)."""
    from ptdbg_tui.formats.layout import DumpLayoutError, scan, tensor_bytes

    sides = []
    for path in paths:
        try:
            sides.append([d.tensor_dir for d in scan(path).dumps if d.has_tensors])
        except DumpLayoutError:
            return 0
    if not all(sides):
        return 0
    return tensor_bytes([f for folders in sides for f in folders], FUSED_BYTES)


def output_to_devnull() -> None:
    """A worker's stdout and stderr to /dev/null: what it prints would tear an app's screen."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for fd in (1, 2):
        os.dup2(devnull, fd)


def let_go(pool: ProcessPoolExecutor, kill: bool) -> None:
    """Let a pool's workers go; ``kill``: end them now, in the middle of a call. Killed, the pool's manager
    thread ends at once: it is joined here rather than during the interpreter's exit, where CPython before
    3.12 may write to its closed wakeup pipe."""
    if kill:
        for process in list(getattr(pool, "_processes", {}).values()):
            process.terminate()
    pool.shutdown(wait=kill, cancel_futures=True)


def _init_worker(fused: bool) -> None:
    os.environ.update(THREAD_ENV)  # read by the BLAS when numpy is first imported, just after this
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's business
    if fused:  # a no-op where the fork server loaded it (a spawned worker, or a server started small)
        from ptdbg_tui.compare.metrics.accumulator import warm_up

        warm_up()


def _context(fused: bool = True) -> multiprocessing.context.BaseContext:
    if "forkserver" not in multiprocessing.get_all_start_methods():  # Windows
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    preload = [
        "ptdbg_tui.engine.workers.worker_preload",
        *(["ptdbg_tui.engine.workers.fused_preload"] if fused else []),
    ]
    ctx.set_forkserver_preload(preload)  # effective when the server starts
    return ctx


def prestart(fused: bool = True) -> bool:
    """Start the fork server now, without waiting for it: it loads what the workers need (``fused``:
    the compiled pass too) while the caller does its own preparation (call it before replacing
    ``sys.stderr``: the server and the resource tracker inherit it). False where there is no fork
    server."""
    if _context(fused).get_start_method() != "forkserver":
        return False
    forkserver.ensure_running()
    return True


@contextmanager
def main_hidden() -> Iterator[None]:
    """Start workers without re-running the caller's ``__main__``.

    ``spawn`` and the fork server re-import the main script in every child; the original's users call
    ``compare()`` at the top level of a plain script (no ``if __name__ == "__main__"`` guard), which
    would run the whole comparison again inside each worker. Workers need nothing from ``__main__``.
    """
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")  # no __file__, no __spec__: nothing to re-run
    try:
        yield
    finally:
        if main is not None:
            sys.modules["__main__"] = main


def _run_batch(tasks: list[CompareTask]) -> list[Result]:
    from ptdbg_tui.engine.workers.tasks import run_task

    return [run_task(t) for t in tasks]


def _crashed(fault: WorkerFault) -> Result:
    from ptdbg_tui.compare.metrics.settled import error_result
    from ptdbg_tui.compare.report.notice_words import worker_fault_text

    return error_result(worker_fault_text(fault))


def batches(
    tasks: Sequence[CompareTask],
    order: Sequence[int],
    batch_bytes: int = BATCH_BYTES,
    batch_tasks: int = BATCH_TASKS,
) -> Iterator[list[int]]:
    """Indices of ``tasks`` in ``order``, cut into batches of at most ``batch_bytes`` (a bigger task
    alone) or ``batch_tasks`` tasks."""
    batch: list[int] = []
    size = 0
    for i in order:
        nbytes = tasks[i].nbytes
        if batch and (size + nbytes > batch_bytes or len(batch) >= batch_tasks):
            yield batch
            batch, size = [], 0
        batch.append(i)
        size += nbytes
    if batch:
        yield batch


class TaskPool(Protocol):
    """What runs compare tasks: a :class:`MetricPool` here, a
    :class:`~ptdbg_tui.engine.workers.cluster.ClusterPool` on a Dask cluster."""

    def map(
        self, tasks: Sequence[CompareTask], *, largest_first: bool = False
    ) -> Iterator[tuple[int, Result]]: ...

    def close(self) -> None: ...


class _Batch(NamedTuple):
    """Tasks submitted together: their indices, whether alone (a crash suspect), the pool."""

    rows: list[int]
    single: bool
    pool: ProcessPoolExecutor


class MetricPool:
    """``with MetricPool(jobs) as pool: for i, result in pool.map(tasks): ...``

    ``fused``: the workers (or with one job, this process) run the compiled pass, for big jobs; else
    the numpy pass, which gives the very same values without numba's load."""

    def __init__(
        self, jobs: int, *, fused: bool = True, batch_bytes: int = BATCH_BYTES, batch_tasks: int = BATCH_TASKS
    ) -> None:
        self.jobs = max(1, int(jobs))
        self.fused = fused
        self.batch_bytes = batch_bytes
        self.batch_tasks = batch_tasks
        self._executor: ProcessPoolExecutor | None = None

    def __enter__(self) -> MetricPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Start the workers (or the fork server that forks them) now, so that their imports overlap
        the caller's own preparation."""
        if self.jobs > 1 and self._executor is None and not prestart(self.fused):
            for _ in range(self.jobs):  # each submit spawns one process while none is idle
                self._submit([])

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None

    def _discard(self, broken: ProcessPoolExecutor | None) -> None:
        """Drop ``broken`` if it is still the current pool (an old pool's late news must not
        take down its healthy successor)."""
        if broken is not None and broken is self._executor:
            broken.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    def _pool(self) -> ProcessPoolExecutor:
        if self._executor is None:
            self._executor = ProcessPoolExecutor(
                self.jobs, mp_context=_context(self.fused), initializer=_init_worker, initargs=(self.fused,)
            )
        return self._executor

    def _submit(self, tasks: list[CompareTask]) -> tuple[Future[list[Result]], ProcessPoolExecutor]:
        with main_hidden():  # workers start inside submit()
            pool = self._pool()
            try:
                return pool.submit(_run_batch, tasks), pool
            except BrokenProcessPool:  # broke since the last result: start afresh
                self._discard(pool)
                pool = self._pool()
                return pool.submit(_run_batch, tasks), pool

    def _batches(self, tasks: Sequence[CompareTask], order: Sequence[int]) -> Iterator[list[int]]:
        return batches(tasks, order, self.batch_bytes, self.batch_tasks)

    def map(
        self, tasks: Sequence[CompareTask], *, largest_first: bool = False
    ) -> Iterator[tuple[int, Result]]:
        """``(index into tasks, result)`` as they complete.

        ``largest_first`` schedules big tensors first so that no worker is left with a long tail
        (batch runs); otherwise tasks start in the given order (the live view fills top-down).
        """
        order: Sequence[int] = range(len(tasks))
        if largest_first:
            order = sorted(order, key=lambda i: -tasks[i].nbytes)
        if self.jobs <= 1:
            from ptdbg_tui.compare.metrics.accumulator import warm_up
            from ptdbg_tui.engine.workers.tasks import run_task

            if self.fused and tasks:
                warm_up()
            for i in order:
                yield i, run_task(tasks[i])
            return
        yield from self._map_processes(tasks, self._batches(tasks, order))

    def _map_processes(
        self, tasks: Sequence[CompareTask], batches: Iterator[list[int]]
    ) -> Iterator[tuple[int, Result]]:
        pending: dict[Future[list[Result]], _Batch] = {}
        retry: list[list[int]] = []  # batches of a pool that broke, to rerun one task at a time
        try:
            while True:
                self._fill(tasks, batches, pending, retry)
                if not pending:
                    return
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    batch = pending.pop(future)
                    results = self._results(future, batch, retry)
                    if results is not None:
                        yield from zip(batch.rows, results, strict=True)
        finally:
            for future in pending:
                future.cancel()

    def _fill(
        self,
        tasks: Sequence[CompareTask],
        batches: Iterator[list[int]],
        pending: dict[Future[list[Result]], _Batch],
        retry: list[list[int]],
    ) -> None:
        """Submit batches until enough are in flight; a suspect of a crash runs alone, so that a
        second crash names it."""
        while len(pending) < self.jobs * INFLIGHT:
            single = bool(retry)
            if single and pending:
                return
            rows = retry.pop() if single else next(batches, None)
            if rows is None:
                return
            future, pool = self._submit([tasks[i] for i in rows])
            pending[future] = _Batch(rows, single, pool)
            if single:
                return

    def _results(
        self, future: Future[list[Result]], batch: _Batch, retry: list[list[int]]
    ) -> list[Result] | None:
        """A finished batch's results; ``None`` when its pool broke and its tasks go to ``retry``."""
        try:
            return future.result()
        except BrokenProcessPool:
            self._discard(batch.pool)  # the next submit starts a fresh pool
            if batch.single:
                return [_crashed(Uncompared.WORKER_DIED)]
            retry += [[i] for i in batch.rows]
            return None
        except Exception as e:  # e.g. a result that cannot be pickled back
            fault = CompareFailed(error=Error.of(e), worker=True)
            return [_crashed(fault) for _ in batch.rows]
