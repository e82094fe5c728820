"""DumpWatcher on real folders: wakes on changes, waits for missing folders, falls back to polling."""

from __future__ import annotations

import errno
import threading

import pytest
from watchdog.observers.inotify import InotifyObserver

from ptdbg_tui.compare.notices import Polling
from ptdbg_tui.engine.live import watch
from ptdbg_tui.engine.live.watch import DumpWatcher, watch_point

WAIT_S = 10.0


@pytest.fixture
def watcher():
    made: list[DumpWatcher] = []

    def make(*roots, poll=False):
        woke = threading.Event()
        w = DumpWatcher(list(roots), woke.set, poll=poll)
        w.start()
        made.append(w)
        return w, woke

    yield make
    for w in made:
        w.stop()


def test_wakes_on_a_file_written_below_the_root(tmp_path, watcher):
    root = tmp_path / "npu"
    (root / "step0" / "rank0").mkdir(parents=True)
    w, woke = watcher(root)
    assert w.mode == "inotify"
    (root / "step0" / "rank0" / "api_stack_dump.pkl").write_text("[]\n")
    assert woke.wait(WAIT_S)


def test_a_missing_root_is_waited_for_from_its_parent(tmp_path, watcher):
    root = tmp_path / "run" / "npu"
    assert watch_point(root) == tmp_path
    w, woke = watcher(root)
    (tmp_path / "run").mkdir()
    assert woke.wait(WAIT_S), "creating a folder on the way to the root wakes the engine"
    root.mkdir()
    w.refresh()  # the engine calls this on every rescan: the root itself is watched now
    woke.clear()
    (root / "rank0").mkdir()
    (root / "rank0" / "dump.pkl").write_text("[]\n")
    assert woke.wait(WAIT_S)


class _NoWatchesLeft(InotifyObserver):
    def schedule(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "inotify watch limit reached")


def test_inotify_limits_fall_back_to_polling(tmp_path, watcher, monkeypatch):
    monkeypatch.setattr(watch, "Observer", _NoWatchesLeft)
    monkeypatch.setattr(watch, "POLL_INTERVAL", 0.1)
    w, woke = watcher(tmp_path)
    assert w.mode == "polling"
    assert w.fallback == Polling(reason="inotify watch limit reached")
    (tmp_path / "dump.pkl").write_text("[]\n")
    assert woke.wait(WAIT_S)


def test_poll_option_uses_the_polling_observer(tmp_path, watcher, monkeypatch):
    monkeypatch.setattr(watch, "POLL_INTERVAL", 0.1)
    w, woke = watcher(tmp_path, poll=True)
    assert w.mode == "polling" and w.fallback is None
    (tmp_path / "dump.pkl").write_text("[]\n")
    assert woke.wait(WAIT_S)
