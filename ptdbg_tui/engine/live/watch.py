"""Waking the live engine when anything changes under the dump folders.

No single file-system event means "a record is complete", so events are only a hint: any
event sets the engine's wake-up flag and the engine re-reads its followers from their byte
offsets. A folder that does not exist yet is waited for by watching its nearest existing
parent; :meth:`DumpWatcher.refresh` (called on every periodic rescan) moves the watch down once
the folder appears, or back up when it is removed. inotify is used where it works; when its
limits are hit (``ENOSPC``/``EMFILE``) or ``poll=True`` the polling observer takes over.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver, ObservedWatch
from watchdog.observers.polling import PollingObserver

from ptdbg_tui.compare.notices import Polling

log = logging.getLogger(__name__)

#: Seconds between two directory snapshots of the polling observer (it stats every file).
POLL_INTERVAL = 2.0
_LIMIT_ERRORS = (errno.ENOSPC, errno.EMFILE)


class _Wake(FileSystemEventHandler):
    def __init__(self, wake: Callable[[], None]) -> None:
        self._wake = wake

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type not in ("opened", "closed_no_write"):
            self._wake()


@dataclass
class _Target:
    root: Path
    watched: Path | None = None
    identity: tuple[int, int] | None = None
    watch: ObservedWatch | None = None


def watch_point(root: Path) -> Path:
    """The folder to watch for ``root``: itself, or its nearest existing parent."""
    path = root
    while not path.is_dir() and path.parent != path:
        path = path.parent
    return path


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


class DumpWatcher:
    """watchdog observer over the dump roots that calls ``wake()`` on every change."""

    def __init__(self, roots: list[Path], wake: Callable[[], None], poll: bool = False) -> None:
        self._targets = [_Target(Path(r).absolute()) for r in roots]
        self._handler = _Wake(wake)
        self._lock = threading.Lock()
        self._observer: BaseObserver | None = None
        self.polling = poll
        self.fallback: Polling | None = None  # why the watcher had to fall back to polling, for the user

    @property
    def mode(self) -> str:
        return "polling" if self.polling else "inotify"

    def start(self) -> None:
        with self._lock:
            self._start_observer()
            self._retarget()

    def refresh(self) -> None:
        """Follow folders that appeared, vanished or were replaced since the last call."""
        with self._lock:
            if self._observer is not None:
                self._retarget()

    def set_roots(self, roots: list[Path]) -> None:
        """Watch these roots instead (any thread)."""
        with self._lock:
            for t in self._targets:
                if t.watch is not None and self._observer is not None:
                    with contextlib.suppress(KeyError, OSError):
                        self._observer.unschedule(t.watch)
            self._targets = [_Target(Path(r).absolute()) for r in roots]
            if self._observer is not None:
                self._retarget()

    def stop(self) -> None:
        with self._lock:
            observer, self._observer = self._observer, None
        if observer is not None:
            observer.stop()
            observer.join(timeout=5)

    def _start_observer(self) -> None:
        self._observer = PollingObserver(timeout=POLL_INTERVAL) if self.polling else Observer()
        self._observer.daemon = True
        self._observer.start()

    def _fall_back(self, error: OSError) -> None:
        self.fallback = Polling(reason=str(error.strerror or error))
        log.warning("inotify unavailable (%s); polling the folders instead", self.fallback.reason)
        old = self._observer
        self.polling = True
        self._start_observer()
        for t in self._targets:
            t.watched = t.identity = t.watch = None
        if old is not None:
            old.stop()

    def _retarget(self) -> None:
        for t in self._targets:
            point = watch_point(t.root)
            identity = _identity(point)
            if point == t.watched and identity == t.identity:
                continue
            assert self._observer is not None
            if t.watch is not None:
                with contextlib.suppress(KeyError, OSError):
                    self._observer.unschedule(t.watch)
                t.watch = None
            recursive = point == t.root  # a parent is watched only for the root's creation
            try:
                t.watch = self._observer.schedule(self._handler, str(point), recursive=recursive)
            except OSError as e:
                if e.errno in _LIMIT_ERRORS and not self.polling:
                    self._fall_back(e)
                    self._retarget()
                    return
                log.warning("cannot watch %s: %s", point, e)  # the periodic rescan still runs
                continue
            t.watched, t.identity = point, identity
