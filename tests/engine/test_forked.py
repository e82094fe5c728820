"""Work done in a forked child (:mod:`ptdbg_tui.engine.workers.forked`): its result names the parent's own
objects, a failed child's work is done again here, a cancelled child is stopped."""

from __future__ import annotations

import os
import select

import pytest

from ptdbg_tui.engine.workers import forked
from ptdbg_tui.engine.workers.forked import Forked

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")


@pytest.fixture(autouse=True)
def _fork_with_idle_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fork although earlier tests left idle threads (Dask's offload thread): these children use none."""
    monkeypatch.setattr(forked, "can_fork", lambda: True)


class Box:
    def __init__(self, value: int) -> None:
        self.value = value


def test_the_result_names_the_parents_objects_and_was_made_in_a_child() -> None:
    held = [Box(1), Box(2), Box(3)]
    parent = os.getpid()

    def work() -> tuple[int, list[Box], Box]:
        return os.getpid(), [held[2], held[0]], Box(held[1].value * 10)

    pid, named, made = Forked(work, held).result()
    assert pid != parent  # done in a child
    assert named[0] is held[2] and named[1] is held[0]  # the parent's own objects, not copies
    assert made.value == 20 and made not in held


def test_ready_once_the_child_has_written_its_result() -> None:
    read, write = os.pipe()
    try:
        waiting = Forked(lambda: os.read(read, 1), [])
        assert not waiting.ready()  # its work waits on the pipe
        os.write(write, b"x")
        assert waiting.result() == b"x"
    finally:
        os.close(read)
        os.close(write)
    done = Forked(lambda: 5, [])
    os.waitpid(done._pid, 0)  # the child has ended: its result is written
    assert done.ready() and done.result() == 5


def test_a_child_that_fails_has_its_work_done_here() -> None:
    parent = os.getpid()

    def work() -> int:
        if os.getpid() != parent:
            raise RuntimeError("only in the child")
        return 7

    assert Forked(work, []).result() == 7


def test_a_cancelled_child_is_stopped_and_reaped() -> None:
    read, write = os.pipe()  # nothing is ever written: the child's work never ends
    try:
        forked = Forked(lambda: os.read(read, 1), [])
        pid = forked._pid
        forked.cancel()
        forked.cancel()  # twice: nothing left to do
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # reaped
    finally:
        os.close(read)
        os.close(write)


def test_each_part_is_taken_once_by_the_child_or_by_this_process() -> None:
    claims = forked.Claims(50)
    began_r, began_w = os.pipe()
    gate_r, gate_w = os.pipe()
    try:

        def work() -> list[int]:  # one part, then a wait while this process takes what is left
            parts = claims.parts()
            first = next(parts)
            os.write(began_w, b"b")
            os.read(gate_r, 1)
            return [first, *parts]

        child = Forked(work, [])
        assert select.select([began_r], [], [], 60)[0], "the child did not begin"
        here = []
        while (part := claims.take()) is not None:
            here.append(part)
        os.write(gate_w, b"g")
        theirs = child.result()
    finally:
        claims.close()
        for fd in (began_r, began_w, gate_r, gate_w):
            os.close(fd)
    assert len(theirs) == 1 and len(here) == 49
    assert sorted(theirs + here) == list(range(50))


def test_the_parts_of_a_child_that_fails_are_done_here_but_those_taken_here() -> None:
    parent = os.getpid()
    claims = forked.Claims(10)
    assert [claims.take(), claims.take()] == [0, 1]

    def work() -> list[int]:
        parts = list(claims.parts())  # the child takes every part left, then fails
        if os.getpid() != parent:
            raise RuntimeError("only in the child")
        return parts

    try:
        assert Forked(work, []).result() == list(range(2, 10))
    finally:
        claims.close()


def test_parts_beyond_what_a_pipe_holds_are_not_shared() -> None:
    claims = forked.Claims(forked.MOST_PARTS + 1)
    assert claims.take() is None
    assert list(claims.parts()) == list(range(forked.MOST_PARTS + 1))
