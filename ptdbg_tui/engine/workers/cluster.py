"""Metric work on a Dask distributed cluster (``--cluster ADDRESS``), behind the pool's ``map``.

Tensors never travel: a task carries two file paths and sends back a Result, or for a part of a
big tensor a few sums per chunk (:func:`~ptdbg_tui.engine.workers.tasks.run_part`). A task may only run on
workers that can read both its folders: every worker is asked which folders it can read, and one
started with ``PTDBG_TUI_DUMP_ROOTS=ROOT[:ROOT...]`` serves only dumps under those roots (node-local
disks); without it, any folder it can see (shared storage).

A lost worker's tasks are rerun by the scheduler on the other workers that can read their files. A
task whose every such worker is gone waits for one to come back (a restarted or reconnected worker
is asked again) for ``reconnect_s``, then becomes an ERROR row; so does a task that killed the
workers it ran on (after a batch, each of its tensors is retried alone to name the one).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ptdbg_tui.compare.metrics.accumulator import warm_up
from ptdbg_tui.compare.metrics.settled import error_result
from ptdbg_tui.compare.model import Result
from ptdbg_tui.compare.notices import (
    ClusterLost,
    CompareFailed,
    Error,
    NoWorkerReads,
    Uncompared,
    Unserved,
    WorkerFault,
)
from ptdbg_tui.compare.report.notice_words import unserved_text, worker_fault_text
from ptdbg_tui.engine.workers.pool import BATCH_BYTES, BATCH_TASKS, THREAD_ENV, batches
from ptdbg_tui.engine.workers.tasks import (
    CompareTask,
    PartOutcome,
    finish_parts,
    part_bounds,
    run_part,
    run_task,
)
from ptdbg_tui.formats.layout import LayoutProblem, RankDump, Scan, Unscanned

if TYPE_CHECKING:
    from distributed import Client, Future

#: Set on a worker: the folders (``os.pathsep``-separated) whose dumps it serves.
ROOTS_ENV = "PTDBG_TUI_DUMP_ROOTS"
INSTALL_HINT = 'pip install "ptdbg-tui[cluster]"'
#: A tensor pair larger than this (both files) is split into parts of about this size, one task each.
PART_BYTES = 64 << 20
#: Seconds between two looks at the cluster while no task completes.
HEAL_S = 0.5
#: How long a task waits for a worker that can read its files after the last one was lost.
RECONNECT_S = 60.0
#: Times a task lost with the scheduler's state (a scheduler restart) is submitted again.
RESUBMITS = 3
CONNECT_S = 10.0
#: Seconds to fetch a finished task's result (a few KB) before taking it for lost with its worker.
RESULT_S = 10.0

_LOCAL_RE = re.compile(r"^local:(\d+)$")


class ClusterError(Exception):
    """The cluster cannot be used (the message is one line for the user)."""


def _distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise ClusterError(f"--cluster needs Dask's distributed package: {INSTALL_HINT}") from None
    return distributed


def require(address: str) -> None:
    """Raise :class:`ClusterError` now if ``address`` cannot be used: a bad address, no Dask installed."""
    check_address(address)
    _distributed()


def check_address(address: str) -> None:
    """Raise :class:`ClusterError` for an address that is neither ``local:N`` nor a scheduler's."""
    m = _LOCAL_RE.match(address)
    if m is not None:
        if int(m.group(1)) < 1:
            raise ClusterError("--cluster local:N needs at least 1 worker")
    elif "://" not in address and not re.match(r"^[\w.-]+:\d+$", address):
        raise ClusterError(
            f"--cluster {address!r}: expected a scheduler address (tcp://host:port) or local:N"
        )


# --- what the workers run -----------------------------------------------------------------------


def served_roots() -> list[str] | None:
    """This worker's advertised dump roots (``None``: any folder it can read)."""
    value = os.environ.get(ROOTS_ENV, "")
    roots = [os.path.abspath(r) for r in value.split(os.pathsep) if r]
    return roots or None


def readable(path: str) -> bool:
    """Whether this worker serves the folder ``path``: under one of its roots, and readable here."""
    path = os.path.abspath(path)
    roots = served_roots()
    if roots is not None and not any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots):
        return False
    return os.path.isdir(path) and os.access(path, os.R_OK | os.X_OK)


def probe(dirs: Sequence[str]) -> list[bool]:
    return [readable(d) for d in dirs]


def _order(dump: RankDump) -> tuple[int, int, str]:
    return (
        dump.step if dump.step is not None else -1,
        dump.rank if dump.rank is not None else -1,
        str(dump.records),
    )


def _where() -> str:
    from distributed import get_worker

    return get_worker().address


def located(fn: Any, *args: Any) -> tuple[str, Any]:
    """Where ``fn(*args)`` ran, and its value, or what it raised: a task that raises is logged by its
    worker, traceback and all, on the terminal of the command that started the cluster (a pair whose pkl
    cannot be read is the user's input, which the report says in a line)."""
    try:
        return _where(), fn(*args)
    except Exception as e:
        return _where(), e


def run_batch(tasks: list[CompareTask]) -> tuple[str, list[Result]]:
    warm_up()  # a worker serves job after job: the compiled pass is loaded once in its life
    return _where(), [run_task(t) for t in tasks]


def run_one_part(task: CompareTask, start: int, stop: int) -> tuple[str, PartOutcome]:
    warm_up()
    return _where(), run_part(task, start, stop)


# --- the client side ----------------------------------------------------------------------------


def task_dirs(task: CompareTask) -> tuple[str, ...]:
    """The folders a worker must read for ``task``."""
    return tuple(sorted({os.path.dirname(p) for p in (task.npu_path, task.bench_path) if p}))


#: Per big task: the outcomes of its parts that came back, by part number.
_Parts = dict[int, dict[int, PartOutcome]]


@dataclass(eq=False)
class _Job:
    """One Dask task: a batch of small tensor pairs, or one part of a big one."""

    indices: list[int]
    dirs: tuple[str, ...]
    priority: int
    part: tuple[int, int, int, int] | None = None  # (part number, start, stop, parts of the task)
    workers: list[str] = field(default_factory=list)
    attempts: int = 0
    orphaned_at: float | None = None  # since when no live worker can run it


@dataclass(eq=False)
class Call:
    """A step of the caller's on a worker that can read ``dirs`` (see :meth:`ClusterPool.submit`)."""

    fn: Any
    args: tuple[Any, ...]
    dirs: tuple[str, ...]
    workers: list[str]
    future: Future[Any] | None = None


class ClusterPool:
    """``with ClusterPool("tcp://host:8786") as pool: for i, result in pool.map(tasks): ...``

    ``placements`` counts the Dask tasks each worker ran; ``resubmitted`` those submitted again (their
    workers were lost).
    """

    def __init__(
        self,
        address: str,
        *,
        batch_bytes: int = BATCH_BYTES,
        batch_tasks: int = BATCH_TASKS,
        part_bytes: int = PART_BYTES,
        reconnect_s: float = RECONNECT_S,
    ) -> None:
        check_address(address)
        self.address = address
        self.batch_bytes = batch_bytes
        self.batch_tasks = batch_tasks
        self.part_bytes = part_bytes
        self.reconnect_s = reconnect_s
        self.placements: Counter[str] = Counter()
        self.resubmitted = 0
        self._client: Client | None = None
        self._local: Any = None
        self._seen: dict[str, dict[str, bool]] = {}  # worker -> folder -> readable

    def __enter__(self) -> ClusterPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def client(self) -> Client:
        if self._client is None:
            self.start()
        assert self._client is not None
        return self._client

    def start(self) -> None:
        """Connect (or start the local cluster) now."""
        if self._client is not None:
            return
        distributed = _distributed()
        m = _LOCAL_RE.match(self.address)
        try:
            if m is not None:
                self._local = distributed.LocalCluster(
                    n_workers=int(m.group(1)),
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=":0",
                    silence_logs=logging.ERROR,
                    env=dict(THREAD_ENV),
                )
                self._client = distributed.Client(self._local)
            else:
                self._client = distributed.Client(self.address, timeout=CONNECT_S)
        except (OSError, TimeoutError) as e:
            self.close()
            raise ClusterError(f"cannot reach the Dask scheduler at {self.address}: {e}") from None

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._local is not None:
            self._local.close()
            self._local = None

    # -- who can read what -------------------------------------------------------------------
    def _live(self) -> set[str]:
        return set(self.client.nthreads())

    def _learn(self, dirs: set[str]) -> set[str]:
        """Ask the live workers about the folders they were not asked about yet; the live workers."""
        live = self._live()
        for gone in set(self._seen) - live:
            del self._seen[gone]
        ask = {w: sorted(d for d in dirs if d not in self._seen.get(w, {})) for w in live}
        need = sorted({d for todo in ask.values() for d in todo})
        targets = [w for w, todo in ask.items() if todo]
        if need and targets:
            answers = self.client.run(probe, need, workers=targets, on_error="ignore")
            for worker, flags in answers.items():
                self._seen.setdefault(worker, {}).update(zip(need, flags, strict=True))
        return live

    def eligible(self, dirs: Sequence[str]) -> list[str]:
        """The live workers that can read every folder of ``dirs``."""
        return self._eligible_by_dirs({tuple(dirs)})[tuple(dirs)]

    def _eligible_by_dirs(self, groups: set[tuple[str, ...]]) -> dict[tuple[str, ...], list[str]]:
        """:meth:`eligible` of each folder group, with one look at the cluster."""
        live = self._learn({d for dirs in groups for d in dirs})
        return {
            dirs: sorted(w for w in live if all(self._seen.get(w, {}).get(d) for d in dirs))
            for dirs in groups
        }

    def scan(
        self, roots: Sequence[str], scan_roots: Callable[[Sequence[str]], list[Scan | str]]
    ) -> list[Scan]:
        """What the workers find below each root (``scan_roots`` runs on every worker: a list of a
        :class:`~ptdbg_tui.formats.layout.Scan` or the reason for none, per root), merged: every rank
        dump some worker serves, and the problems met in the dump (a rank folder without a readable pkl:
        the report says them as a local compare does). Raises :class:`ClusterError` when no worker
        answers."""
        answers: dict[str, list[Scan | str]] = self.client.run(scan_roots, list(roots), on_error="ignore")
        if not answers:
            raise ClusterError(f"no worker of the cluster at {self.address} answered")
        merged: list[Scan] = []
        for k, root in enumerate(roots):
            dumps: dict[str, RankDump] = {}
            problems: list[LayoutProblem] = []
            for worker in sorted(answers):
                got = answers[worker][k]
                found = Scan([], [Unscanned(message=got)]) if isinstance(got, str) else got
                dumps.update((str(d.records), d) for d in found.dumps)
                problems += [p for p in found.problems if p not in problems]
            if not dumps and not problems:
                problems.append(Unscanned(message=unserved_text(Unserved(root=str(root)))))
            if dumps:  # a worker that could not scan a root another one served says nothing of the dump
                problems = [p for p in problems if not isinstance(p, Unscanned)]
            merged.append(Scan(sorted(dumps.values(), key=_order), problems))
        return merged

    def submit(self, fn: Any, *args: Any, dirs: Sequence[str]) -> Call | None:
        """Run ``fn(*args)`` on a worker that can read every folder of ``dirs`` (a step of the caller's,
        e.g. reading a rank pair's records); ``None`` when no worker can. Results via :meth:`gather`."""
        call = Call(fn, args, tuple(dirs), self.eligible(dirs))
        if not call.workers:
            return None
        self._send(call)
        return call

    def _send(self, call: Call) -> None:
        call.future = self.client.submit(
            located, call.fn, *call.args, workers=call.workers, allow_other_workers=False, pure=False
        )

    def gather(self, calls: Sequence[Call]) -> Iterator[Any]:
        """The values of :meth:`submit`'s calls, in order, each as it comes; a call that raised gives its
        exception. A call whose workers are all lost goes to those that can read its folders now; with
        none for ``reconnect_s``, :class:`ClusterError`."""
        for call in calls:
            orphaned: float | None = None
            while True:
                assert call.future is not None
                with contextlib.suppress(TimeoutError):
                    _distributed().wait([call.future], timeout=HEAL_S)
                if call.future.done():
                    # Fetched once, without a deadline: a pair's rows take seconds to serialize, and a
                    # fetch given up after HEAL_S made the worker serialize them again, forever.
                    try:
                        worker, value = call.future.result()
                    except Exception as e:  # the workers running it died (or it could not be sent back)
                        worker, value = "", e
                    if isinstance(value, Exception):  # it raised (located): no worker is credited with it
                        worker = ""
                    break
                with contextlib.suppress(OSError, TimeoutError):  # reconnecting: look again next time
                    if self._live() & set(call.workers):
                        orphaned = None
                        continue
                    call.workers = self.eligible(call.dirs)
                    if call.workers:
                        call.future.cancel()
                        self._send(call)
                        orphaned = None
                        continue
                orphaned = orphaned or time.monotonic()
                if time.monotonic() - orphaned >= self.reconnect_s:
                    where = " and ".join(call.dirs)
                    raise ClusterError(f"no worker of the cluster can read {where} any more")
            if worker:
                self.placements[worker] += 1
            yield value

    # -- the metric tasks --------------------------------------------------------------------
    def _jobs(self, tasks: Sequence[CompareTask], order: Sequence[int]) -> tuple[list[_Job], _Parts]:
        groups: dict[tuple[str, ...], list[int]] = {}
        for i in order:
            groups.setdefault(task_dirs(tasks[i]), []).append(i)
        rank = {i: k for k, i in enumerate(order)}
        jobs: list[_Job] = []
        parts: _Parts = {}
        for dirs, members in groups.items():
            small = []
            for i in members:
                bounds = part_bounds(tasks[i], self.part_bytes)
                if len(bounds) == 1:
                    small.append(i)
                    continue
                parts[i] = {}
                jobs += [_Job([i], dirs, 0, (k, a, z, len(bounds))) for k, (a, z) in enumerate(bounds)]
            jobs += [_Job(b, dirs, 0) for b in batches(tasks, small, self.batch_bytes, self.batch_tasks)]
        jobs.sort(key=lambda j: rank[j.indices[0]])
        for k, job in enumerate(jobs):
            job.priority = len(jobs) - k  # Dask runs higher priorities first
        return jobs, parts

    def _submit(self, job: _Job, tasks: Sequence[CompareTask]) -> Future[Any]:
        self.resubmitted += job.attempts > 0
        job.attempts += 1
        job.orphaned_at = None
        opts = dict(workers=job.workers, allow_other_workers=False, priority=job.priority, pure=False)
        if job.part is None:
            return self.client.submit(run_batch, [tasks[i] for i in job.indices], **opts)
        _, start, stop, _ = job.part
        return self.client.submit(run_one_part, tasks[job.indices[0]], start, stop, **opts)

    def map(
        self, tasks: Sequence[CompareTask], *, largest_first: bool = False
    ) -> Iterator[tuple[int, Result]]:
        """``(index into tasks, result)`` as they complete (see :meth:`MetricPool.map`)."""
        order = list(range(len(tasks)))
        if largest_first:
            order.sort(key=lambda i: -tasks[i].nbytes)
        jobs, parts = self._jobs(tasks, order)
        who = self._eligible_by_dirs({job.dirs for job in jobs}) if jobs else {}
        pending: dict[Future[Any], _Job] = {}
        waiting: list[_Job] = []
        try:
            for job in jobs:
                job.workers = who[job.dirs]
                if not job.workers:
                    yield from self._give_up(job, tasks, parts, NoWorkerReads(dirs=job.dirs))
                    continue
                pending[self._submit(job, tasks)] = job
            while pending or waiting:
                done = self._wait(pending)
                for future in done:
                    job = pending.pop(future)
                    yield from self._collect(future, job, tasks, parts, pending)
                if not done:
                    yield from self._heal(pending, waiting, tasks, parts)
        finally:
            for future in pending:
                future.cancel()

    def _wait(self, pending: dict[Future[Any], _Job]) -> set[Future[Any]]:
        if not pending:
            time.sleep(HEAL_S)  # only orphaned jobs: wait for a worker to come back
            return set()
        try:
            return set(_distributed().wait(list(pending), timeout=HEAL_S, return_when="FIRST_COMPLETED").done)
        except TimeoutError:
            return set()

    def _results(
        self, job: _Job, results: Sequence[PartOutcome], tasks: Sequence[CompareTask], parts: _Parts
    ) -> Iterator[tuple[int, Result]]:
        if job.part is None:
            yield from zip(job.indices, results, strict=True)
            return
        i = job.indices[0]
        got = parts[i]
        got[job.part[0]] = results[0]
        if len(got) == job.part[3] or isinstance(results[0], Result):  # all in, or one settles it
            del parts[i]
            yield i, finish_parts(tasks[i], [got[k] for k in sorted(got)])

    def _give_up(
        self, job: _Job, tasks: Sequence[CompareTask], parts: _Parts, fault: WorkerFault
    ) -> Iterator[tuple[int, Result]]:
        if job.part is not None and job.indices[0] not in parts:
            return  # its task already settled by another part
        message = worker_fault_text(fault)
        yield from self._results(job, [error_result(message) for _ in job.indices], tasks, parts)

    def _collect(
        self,
        future: Future[Any],
        job: _Job,
        tasks: Sequence[CompareTask],
        parts: _Parts,
        pending: dict[Future[Any], _Job],
    ) -> Iterator[tuple[int, Result]]:
        if job.part is not None and job.indices[0] not in parts:
            return
        status = future.status
        if status == "finished":
            try:
                worker, payload = future.result(timeout=RESULT_S)
            except Exception:  # its worker died before the result was fetched: run it again
                future.cancel()
                status = "lost"
            else:
                self.placements[worker] += 1
                yield from self._results(job, payload if job.part is None else [payload], tasks, parts)
                return
        if status == "error":
            exc = future.exception()
            if isinstance(exc, _distributed().KilledWorker):
                if job.part is None and len(job.indices) > 1:  # rerun alone, so a crash names its tensor
                    for i in job.indices:
                        single = _Job([i], job.dirs, job.priority, workers=job.workers)
                        pending[self._submit(single, tasks)] = single
                    return
                yield from self._give_up(job, tasks, parts, Uncompared.WORKER_DIED)
                return
            yield from self._give_up(job, tasks, parts, CompareFailed(error=Error.of(exc), worker=True))
            return
        if job.attempts <= RESUBMITS:  # cancelled or lost with the scheduler: submit it again
            with contextlib.suppress(OSError, TimeoutError):  # reconnecting: keep the last known
                job.workers = self.eligible(job.dirs) or job.workers
            pending[self._submit(job, tasks)] = job
            return
        yield from self._give_up(job, tasks, parts, ClusterLost(attempts=job.attempts))

    def _heal(
        self,
        pending: dict[Future[Any], _Job],
        waiting: list[_Job],
        tasks: Sequence[CompareTask],
        parts: _Parts,
    ) -> Iterator[tuple[int, Result]]:
        """Move jobs whose workers are all gone to the workers that can read their files now; give
        up on those that found none for ``reconnect_s``."""
        try:
            live = self._live()
        except (OSError, TimeoutError):  # the scheduler is reconnecting: look again next time
            return
        now = time.monotonic()
        for future, job in list(pending.items()):
            if live & set(job.workers):
                continue
            future.cancel()
            del pending[future]
            waiting.append(job)
        who = self._eligible_by_dirs({job.dirs for job in waiting}) if waiting else {}
        for job in list(waiting):
            job.workers = who[job.dirs]
            if job.workers:
                waiting.remove(job)
                pending[self._submit(job, tasks)] = job
                continue
            job.orphaned_at = job.orphaned_at or now
            if now - job.orphaned_at >= self.reconnect_s:
                waiting.remove(job)
                yield from self._give_up(job, tasks, parts, NoWorkerReads(dirs=job.dirs, lost=True))
