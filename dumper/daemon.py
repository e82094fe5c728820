"""The dump daemon: a writer thread that takes records off the training thread.

The queue is bounded in items and in bytes of pending tensor copies: when it is full the
training thread waits, so memory cannot grow without limit. Writing goes through
:class:`ptdbg_tui.formats.RankWriter` (npy to a temporary name, renamed, then the pkl line
appended and flushed). A disk-full or permission error stops dumping with one logged message;
the training goes on.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import torch

from dumper.capture import Value
from dumper.patching import TLS
from ptdbg_tui.formats.modules import ModuleChain
from ptdbg_tui.formats.writer import RankWriter

log = logging.getLogger("dumper")

DUMP_STEP = 0  # the pkl's dump_step for API hooks
REMEMBERED = 32  # host copies whose npy can be linked to (SeenTensors keeps 16)


@dataclass(slots=True)
class CallRecord:
    """Everything one call and direction writes, in file order: tensors, then its stack line."""

    values: list[Value] = field(default_factory=list)
    stack: tuple[str, list[list[str | None]]] | None = None
    modules: tuple[str, ModuleChain] | None = None

    @property
    def nbytes(self) -> int:
        return sum(v.nbytes for v in self.values)


_STOP = object()


@dataclass(slots=True)
class _Open:
    rank_dir: Path
    mode: str
    summary_only: bool
    fresh: bool


class DumpDaemon:
    """Background writer of one start()..stop() window; :meth:`put` blocks while more than the
    limits are pending, and returns at once after a write failure or :meth:`shutdown`."""

    def __init__(self, max_items: int = 4096, max_bytes: int = 1 << 30) -> None:
        self.max_items = max_items
        self.max_bytes = max_bytes
        self.failed: str | None = None
        self._queue: deque[tuple[object, int]] = deque()
        self._bytes = 0
        self._closed = False
        self._cv = threading.Condition()
        self._writer: RankWriter | None = None
        self._written: dict[int, tuple[object, Path]] = {}  # last host copies written, by identity
        self._thread = threading.Thread(target=self._run, name="ptdbg-dump-daemon", daemon=True)
        self._thread.start()

    def open(self, rank_dir: Path, mode: str, summary_only: bool, fresh: bool) -> None:
        self._put(_Open(rank_dir, mode, summary_only, fresh), 0)

    def put(self, record: CallRecord) -> None:
        if record.values or record.stack or record.modules:
            self._put(record, record.nbytes)

    def shutdown(self, timeout: float | None = None) -> bool:
        """Write everything queued, close the files and end the thread (False on timeout)."""
        with self._cv:  # after a failure too: the thread must end
            self._queue.append((_STOP, 0))
            self._cv.notify_all()
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _put(self, item: object, nbytes: int) -> None:
        with self._cv:
            while (self.failed is None and not self._closed and self._queue
                   and (len(self._queue) >= self.max_items or self._bytes + nbytes > self.max_bytes)):
                self._cv.wait()
            if self.failed is not None or self._closed:
                return
            self._queue.append((item, nbytes))
            self._bytes += nbytes
            self._cv.notify_all()

    def _run(self) -> None:
        TLS.inside = True  # nothing this thread does is a user call
        while True:
            with self._cv:
                self._cv.wait_for(lambda: bool(self._queue))
                item, nbytes = self._queue.popleft()
                self._cv.notify_all()  # room in the queue again
            if item is _STOP:
                self._finish()
                return
            try:
                if self.failed is None:
                    self._handle(item)
            except OSError as e:
                self._fail(e)
            except Exception:  # a bug must not kill the thread and hang the training on put()
                log.exception("dumper: unexpected error while writing a record; record skipped")
            finally:
                with self._cv:
                    self._bytes -= nbytes
                    self._cv.notify_all()

    def _handle(self, item: object) -> None:
        if isinstance(item, _Open):
            self._close()
            self._written.clear()
            self._writer = RankWriter(item.rank_dir, item.mode, item.summary_only, item.fresh)
        elif isinstance(item, CallRecord) and self._writer is not None:
            w = self._writer
            for v in item.values:
                # a tensor recorded twice unchanged shares one host copy: link to its first npy
                done = self._written.get(id(v.array)) if v.array is not None else None
                same_as = done[1] if done is not None and done[0] is v.array else None
                array = v.array.numpy() if isinstance(v.array, torch.Tensor) else v.array
                npy = w.write_tensor(v.name, DUMP_STEP, v.dtype, v.shape, v.stats, array, same_as)
                if npy is not None and same_as is None:
                    self._remember(v.array, npy)
            if item.stack is not None:
                w.write_stack(*item.stack)
            if item.modules is not None:
                w.write_modules(*item.modules)

    def _remember(self, array: object, npy: Path) -> None:
        self._written[id(array)] = (array, npy)
        if len(self._written) > REMEMBERED:
            del self._written[next(iter(self._written))]

    def _finish(self) -> None:
        try:
            self._close()
        except OSError as e:
            self._fail(e)
        with self._cv:
            self._closed = True
            self._queue.clear()
            self._cv.notify_all()

    def _close(self) -> None:
        if self._writer is not None:
            writer, self._writer = self._writer, None
            writer.close()

    def _fail(self, e: OSError) -> None:
        where = f" ({e.filename})" if e.filename else ""
        log.error("dumper: cannot write the dump%s: %s. Dumping stopped; the training continues.",
                  where, e.strerror or e)
        with self._cv:
            self.failed = f"{e.strerror or e}{where}"
            self._bytes -= sum(n for _, n in self._queue)
            stop = [entry for entry in self._queue if entry[0] is _STOP]  # shutdown() waits for it
            self._queue.clear()
            self._queue.extend(stop)
            self._cv.notify_all()
        with contextlib.suppress(OSError):
            self._close()
