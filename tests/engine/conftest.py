"""Real dump folders written call by call with the format's own writer, and a collector that
follows a running LiveEngine's outbox until a condition holds (no sleeps)."""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from ptdbg_tui.compare.diagnosis.findings import Diagnosis
from ptdbg_tui.compare.model import Status
from ptdbg_tui.engine.live.loop import LiveEngine
from ptdbg_tui.engine.live.options import LiveOptions
from ptdbg_tui.engine.live.updates import Placed, Progress
from ptdbg_tui.formats.layout import rank_dir_path
from ptdbg_tui.formats.naming import entry_name, stack_name
from ptdbg_tui.formats.stats import array_stats
from ptdbg_tui.formats.synthetic import write_array
from ptdbg_tui.formats.writer import RankWriter

WAIT_S = 20.0


@pytest.fixture
def msprobe_python() -> str:
    """A Python with mindstudio-probe (the real msprobe, never a dependency): $MSPROBE_PYTHON, else this
    one if it has it; the test is skipped without one."""
    python = os.environ.get("MSPROBE_PYTHON")
    if python:
        return python
    if importlib.util.find_spec("msprobe") is not None:
        return sys.executable
    pytest.skip(
        "msprobe (mindstudio-probe) is not installed: set MSPROBE_PYTHON to a Python that has it "
        "(tests/fixtures/msprobe/make_fixtures.py says how to make one)"
    )


def array_for(name: str, shape: tuple[int, ...] = (4, 6)) -> np.ndarray:
    """The same data for the same entry name on both sides."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    return rng.standard_normal(shape).astype(np.float32)


class Dump:
    """One rank dump being written: ``call()`` appends a call's tensors and its stack line."""

    def __init__(self, root: Path, step: int | None = 0, rank: int = 0, summary_only: bool = False) -> None:
        self.root = root
        self.writer = RankWriter(rank_dir_path(root, rank, step), summary_only=summary_only)

    def call(
        self,
        api: str,
        index: int,
        direction: str = "forward",
        inputs: int = 1,
        outputs: int = 1,
        wrong: float = 1.0,
        site: int = 10,
        with_npy: bool = True,
    ) -> None:
        """``wrong`` scales the outputs (1.0: identical to the other side)."""
        for kind, count in (("input", inputs), ("output", outputs)):
            for k in range(count):
                name = entry_name(api, index, direction, kind, (k,))
                a = array_for(name)
                if kind == "output":
                    a = a * np.float32(wrong)
                if with_npy:
                    write_array(self.writer, name, a)
                else:  # the line alone: the original tool may write the data later
                    stats = array_stats(a, "torch.float32")
                    self.writer.write_tensor(name, 0, "torch.float32", list(a.shape), stats)
        call = f"{api}_{index}_{direction}"
        frames = [
            ["/home/u/model.py", str(site), "forward", f"y = {api}(x)"],
            ["/home/u/train.py", "99", "main", "model(x)"],
        ]
        self.writer.write_stack(stack_name(call), frames)

    def close(self) -> None:
        self.writer.close()


@dataclass
class Collected:
    """Everything the engine sent, merged as the app would merge it."""

    rows: dict[str, dict[str, Placed]] = field(default_factory=dict)
    diagnoses: dict[str, Diagnosis] = field(default_factory=dict)
    progress: Progress = field(default_factory=Progress)
    notices: list[str] = field(default_factory=list)
    ever: dict[str, set[Status]] = field(default_factory=dict)  # every status a key was sent with

    def statuses(self) -> dict[str, Status]:
        return {
            k: (p.row.result.status if p.row.result else Status.PENDING)
            for rows in self.rows.values()
            for k, p in rows.items()
        }


class Follower:
    """Drains a LiveEngine's outbox on the test thread."""

    def __init__(self, npu: Path, bench: Path, **options: object) -> None:
        self.news = threading.Event()
        self.engine = LiveEngine(npu, bench, LiveOptions(**options), self.news.set)
        self.seen = Collected()

    def drain(self) -> None:
        update = self.engine.outbox.take()
        if update is None:
            return
        s = self.seen
        for key in update.dropped:
            s.rows.pop(key, None)
        for key, delta in update.pairs.items():
            rows = s.rows.setdefault(key, {})
            for k in delta.removes:
                rows.pop(k, None)
            for k, placed in delta.upserts.items():
                rows[k] = placed
                status = placed.row.result.status if placed.row.result else Status.PENDING
                s.ever.setdefault(k, set()).add(status)
            if delta.diagnosis is not None:
                s.diagnoses[key] = delta.diagnosis
        if update.progress is not None:
            s.progress = update.progress
        s.notices += update.notices

    def wait(self, condition: Callable[[Collected], bool], timeout: float = WAIT_S) -> Collected:
        deadline = time.monotonic() + timeout
        while True:
            self.drain()
            if condition(self.seen):
                return self.seen
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(
                    f"condition not reached; last state: {self.seen.statuses()} "
                    f"{self.seen.progress} {self.seen.notices}"
                )
            if self.news.wait(min(left, 0.5)):
                self.news.clear()


@pytest.fixture
def follow():
    """``follow(npu, bench, **options)`` starts an engine; all are stopped at the end."""
    started: list[Follower] = []

    def start(npu: Path, bench: Path, start: bool = True, **options: object) -> Follower:
        """``start``: False leaves the engine's start to the test."""
        f = Follower(npu, bench, **options)
        if start:
            f.engine.start()
        started.append(f)
        return f

    yield start
    for f in started:
        f.engine.stop()


@pytest.fixture
def make_dump():
    """``make_dump(root, step=0, rank=0, summary_only=False)``: a :class:`Dump` being written."""
    made: list[Dump] = []

    def make(root: Path, **kw: object) -> Dump:
        d = Dump(root, **kw)
        made.append(d)
        return d

    yield make
    for d in made:
        d.close()
