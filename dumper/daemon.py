"""The dump daemon: a writer thread that takes records off the training thread.

The queue is bounded in items and in bytes of pending tensor copies: when it is full the
training thread waits, so memory cannot grow without limit. Writing goes through
:class:`ptdbg_tui.formats.RankWriter` (npy to a temporary name, renamed, then the pkl line
appended and flushed). A disk-full or permission error stops dumping with one logged message;
the training goes on.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
import threading
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from dumper.arguments import PendingCall, torch_value
from dumper.capture import InFlight, Value
from dumper.patching import TLS
from ptdbg_tui.formats.modules import ModuleChain
from ptdbg_tui.formats.stats import checksum
from ptdbg_tui.formats.writer import RankWriter

log = logging.getLogger("dumper")

DUMP_STEP = 0  # the pkl's dump_step for API hooks
REMEMBERED = 32  # host copies whose npy can be linked to (SeenTensors keeps 16)


@dataclass(slots=True)
class CallRecord:
    """Everything one call and direction writes, in file order: its call sidecar line, tensors, then
    its stack line."""

    values: list[Value] = field(default_factory=list)
    stack: tuple[str, list[list[str | None]]] | None = None
    modules: tuple[str, ModuleChain] | None = None
    call: PendingCall | None = None
    in_flight: InFlight | None = None  # what the device has still to finish for its values

    @property
    def nbytes(self) -> int:
        return sum(v.nbytes for v in self.values)


_STOP = object()


def _array(v: Value) -> Any:
    """A value's host copy as numpy (a CUDA one is a pinned tensor)."""
    return v.array.numpy() if isinstance(v.array, torch.Tensor) else v.array


@dataclass(slots=True)
class _Open:
    rank_dir: Path
    mode: str
    summary_only: bool
    fresh: bool
    checksums: bool


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
        self._written: dict[int, tuple[object, Path | str]] = {}  # last host copies written (their
        # npy, or their checksum), by identity
        self._bugs: dict[str, int] = {}  # unexpected errors by text, and how often each happened
        self._folder: Path | None = None  # the rank folder being written
        self._checksums = False  # md5 mode: each value's array is its raw bytes, to checksum
        self._thread = threading.Thread(target=self._run, name="ptdbg-dump-daemon", daemon=True)
        self._thread.start()

    def open(
        self, rank_dir: Path, mode: str, summary_only: bool, fresh: bool, checksums: bool = False
    ) -> None:
        self._put(_Open(rank_dir, mode, summary_only, fresh, checksums), 0)

    def put(self, record: CallRecord) -> None:
        if record.values or record.stack or record.modules or record.call:
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
            while (
                self.failed is None
                and not self._closed
                and self._queue
                and (len(self._queue) >= self.max_items or self._bytes + nbytes > self.max_bytes)
            ):
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
            except Exception as e:  # a bug must not kill the thread and hang the training on put()
                self._bug(e)
            finally:
                with self._cv:
                    self._bytes -= nbytes
                    self._cv.notify_all()

    def _handle(self, item: object) -> None:
        if isinstance(item, _Open):
            self._folder = item.rank_dir
            self._close()
            self._written.clear()
            self._writer = RankWriter(item.rank_dir, item.mode, item.summary_only, item.fresh)
            self._checksums = item.checksums
        elif isinstance(item, CallRecord) and self._writer is not None:
            self._write(item, self._writer)

    def _write(self, item: CallRecord, w: RankWriter) -> None:
        """One record: its data files, its sidecar line, its pkl lines and their npy, its stack line."""
        if item.in_flight is not None:
            item.in_flight.wait()
        for v in item.values:  # data files the sidecar line names: on disk before it
            if v.file_only:
                self._data_file(w, v)
        if item.call is not None:
            w.write_call(item.call.spec({v.name for v in item.values}), torch_value)
        for v in item.values:
            if not v.file_only:
                self._tensor_line(w, v)
        if item.stack is not None:
            w.write_stack(*item.stack)
        if item.modules is not None:
            w.write_modules(*item.modules)

    def _tensor_line(self, w: RankWriter, v: Value) -> None:
        if self._checksums:
            w.write_tensor(v.name, DUMP_STEP, v.dtype, v.shape, v.stats, md5=self._checksum(v))
            return
        # a tensor recorded twice unchanged shares one host copy: link to its first npy
        same_as = self._done(v)
        npy = w.write_tensor(v.name, DUMP_STEP, v.dtype, v.shape, v.stats, _array(v), same_as)
        if npy is not None and same_as is None:
            self._remember(v.array, npy)

    def _data_file(self, w: RankWriter, v: Value) -> None:
        """A value's npy with no pkl line (a keyword tensor), linked to an npy of the same host copy."""
        same_as = self._done(v)
        if same_as is not None:
            w.link_npy(v.name, same_as)
        else:
            self._remember(v.array, w.save_npy(v.name, _array(v)))

    def _done(self, v: Value) -> Any:
        """What was made of this value's host copy before (its npy or its checksum), if anything."""
        done = self._written.get(id(v.array)) if v.array is not None else None
        return done[1] if done is not None and done[0] is v.array else None

    def _checksum(self, v: Value) -> str | None:
        """The CRC-32 of a tensor's bytes, once per host copy; None for a Python value (no copy)."""
        if v.array is None:
            return None
        crc: str | None = self._done(v)
        if crc is None:
            crc = checksum(_array(v))
            self._remember(v.array, crc)
        return crc

    def _remember(self, array: object, done: Path | str) -> None:
        self._written[id(array)] = (array, done)
        if len(self._written) > REMEMBERED:
            del self._written[next(iter(self._written))]

    def _bug(self, e: Exception) -> None:
        """Log a writer bug once with its traceback; the same one again is only counted."""
        key = f"{type(e).__name__}: {e}"
        self._bugs[key] = self._bugs.get(key, 0) + 1
        if self._bugs[key] == 1:
            log.exception(
                "dumper: unexpected error while writing a record; record skipped (the same "
                "error again is counted, not logged)"
            )

    def _finish(self) -> None:
        try:
            self._close()
        except OSError as e:
            self._fail(e)
        for key, count in self._bugs.items():
            if count > 1:
                log.error("dumper: the same unexpected error skipped %d records in all: %s", count, key)
        self._bugs.clear()
        with self._cv:
            self._closed = True
            self._queue.clear()
            self._cv.notify_all()

    def _close(self) -> None:
        if self._writer is not None:
            writer, self._writer = self._writer, None
            writer.close()

    def _fail(self, e: OSError) -> None:
        why = write_error(e, self._folder)
        log.error("dumper: %s. Dumping stopped; the training continues.", why)
        with self._cv:
            self.failed = why
            self._bytes -= sum(n for _, n in self._queue)
            stop = [entry for entry in self._queue if entry[0] is _STOP]  # shutdown() waits for it
            self._queue.clear()
            self._queue.extend(stop)
            self._cv.notify_all()
        with contextlib.suppress(OSError):
            self._close()


#: Free bytes below which a short write is taken for a full disk.
LOW_SPACE = 1 << 20


def _size(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return ""


def write_error(e: OSError, folder: Path | None) -> str:
    """Why a write failed, in words, with the path and the free space where it matters: a full disk
    (ENOSPC, a quota, or numpy's "N requested and M written" on a nearly full file system), missing
    permission, a read-only file system."""
    path = e.filename or folder or "the dump folder"
    where = folder
    while where is not None and not where.exists() and where != where.parent:
        where = where.parent  # a folder that could not be made: the free space where it would be
    try:
        free: int | None = shutil.disk_usage(where).free if where is not None else None
    except OSError:
        free = None
    space = f"{_size(free)} free on its file system" if free is not None else "free space unknown"
    short = e.errno is None and "requested and" in str(e)
    if e.errno in (errno.ENOSPC, errno.EDQUOT) or (short and free is not None and free < LOW_SPACE):
        quota = " (or the user's quota is used up)" if e.errno == errno.EDQUOT else ""
        return f"the disk is full{quota}: cannot write {path} ({space})"
    if e.errno in (errno.EACCES, errno.EPERM):
        return (
            f"permission denied: cannot write {path} (user id {os.getuid()} needs write access to "
            f"{folder or 'the dump folder'}; {space})"
        )
    if e.errno == errno.EROFS:
        return f"the file system is read-only: cannot write {path}"
    return f"cannot write {path}: {e.strerror or e} ({space})"
