"""Work on what this process holds, done in a forked child while this process goes on: a batch
compare's diagnoses of the pairs of statistics it has read (and their CSVs) while it reads on.
Work made of parts (:class:`Claims`) is shared at the end: this process takes the parts the child has
not begun, so that neither waits long on the other.

The child inherits the pairs' rows. Its result comes back pickled, each object of this process it
names (a row, a record, a result) sent as its index (:mod:`.sharing`). Where there is no
fork (Windows), where other threads run (a fork copies their locks, held or not), and when a child
fails, the work is done here instead: the result is the same.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Generic, TypeVar

from ptdbg_tui.engine.workers.sharing import dumps, loads

T = TypeVar("T")


def can_fork() -> bool:
    return hasattr(os, "fork") and threading.active_count() == 1


#: The most parts a :class:`Claims` shares with a child: their tokens fit any pipe without a wait (Linux
#: gives a user over his limit pipes of one page).
MOST_PARTS = 1024
_TOKEN = 2  # bytes a part's index takes in the pipe


class Claims:
    """The parts ``0 .. count - 1`` of a child's work, each taken once: by the child as it goes, or by
    this process (:meth:`take`) once it has nothing else to do.

    Their indexes wait in a pipe, written whole before the fork: a read of one index is never cut, so
    whoever reads it does that part. Where nothing is shared (no fork, more than :data:`MOST_PARTS`
    parts), the child, or the work done here, takes every part this process has not."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.taken: set[int] = set()  # by this process
        self._owner = os.getpid()
        self._fd = -1
        if not can_fork() or count > MOST_PARTS:
            return
        read, write = os.pipe()
        try:
            os.write(write, b"".join(i.to_bytes(_TOKEN, "little") for i in range(count)))
        finally:
            os.close(write)
        os.set_blocking(read, False)  # its writer is closed: an empty pipe reads as its end
        self._fd = read

    def take(self) -> int | None:
        """A part nobody has begun, now this process's; None when none is left."""
        if self._fd < 0:
            return None
        try:
            token = os.read(self._fd, _TOKEN)
        except BlockingIOError:
            return None
        if len(token) != _TOKEN:
            return None
        part = int.from_bytes(token, "little")
        if os.getpid() == self._owner:
            self.taken.add(part)
        return part

    def parts(self) -> Iterator[int]:
        """The parts the work takes: in a child, one at a time as it goes; here (the child failed, or
        there is none), every part this process has not taken."""
        if os.getpid() == self._owner or self._fd < 0:
            yield from (i for i in range(self.count) if i not in self.taken)
            return
        while (part := self.take()) is not None:
            yield part

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class Forked(Generic[T]):
    """``work()`` in a forked child; :meth:`result` waits for it (or runs it here)."""

    def __init__(self, work: Callable[[], T], shared: Sequence[object]) -> None:
        self._work, self._shared = work, shared
        self._pid: int | None = None
        self._fd = -1
        if not can_fork():
            return
        _reap()
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            os.close(read)
            _child(work, shared, write)
        os.close(write)
        self._pid, self._fd = pid, read

    def ready(self) -> bool:
        """Whether :meth:`result` will not wait long: the child has written its result (or ended), or
        there is no child (the work is done here when asked)."""
        return self._pid is None or bool(select.select([self._fd], [], [], 0)[0])

    def result(self) -> T:
        if self._pid is None:
            return self._work()
        pid, self._pid = self._pid, None
        try:
            with os.fdopen(self._fd, "rb") as f:
                data = f.read()
            result: T = loads(data, self._shared)
        except Exception:  # the child failed (its result is cut short, or none): the work again, here
            os.waitpid(pid, 0)
            return self._work()
        _EXITING.append(pid)  # a whole result: the child only has to exit (tens of ms for a big process)
        _reap()
        return result

    def cancel(self) -> None:
        """Stop the child and forget it (the caller gave up on the result)."""
        if self._pid is not None:
            os.close(self._fd)
            with contextlib.suppress(ProcessLookupError):  # it ended already
                os.kill(self._pid, signal.SIGKILL)
            os.waitpid(self._pid, 0)
            self._pid = None


#: Children whose result is in and that are still exiting: reaped without waiting, later.
_EXITING: list[int] = []


def _reap() -> None:
    for pid in list(_EXITING):
        with contextlib.suppress(ChildProcessError):
            if os.waitpid(pid, os.WNOHANG)[0] == 0:
                continue
        _EXITING.remove(pid)


def _child(work: Callable[[], Any], shared: Sequence[object], fd: int) -> None:
    """Run ``work``, write its pickled result and leave at once: no exit handlers, no flushing of the
    buffers the parent's copy will flush (the parent's output would appear twice)."""
    code = 1
    try:
        data = dumps(work(), shared)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        code = 0
    finally:
        os._exit(code)
