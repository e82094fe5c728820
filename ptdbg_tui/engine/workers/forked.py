"""Work on what this process holds, done in a forked child while this process goes on: a batch
compare's diagnoses of the pairs of statistics it has read (and their CSVs) while it reads on.

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
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from ptdbg_tui.engine.workers.sharing import dumps, loads

T = TypeVar("T")


def can_fork() -> bool:
    return hasattr(os, "fork") and threading.active_count() == 1


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
