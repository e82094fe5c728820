"""What the live engine tells the app: row deltas per pair, diagnoses, progress and notices,
merged in an :class:`Outbox` that the app drains at its own pace — never one message per row."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ptdbg_tui.compare.diagnosis.findings import Diagnosis, NoReplay
from ptdbg_tui.compare.matching.pairing import AutoAligned, Misfits
from ptdbg_tui.compare.model import Row
from ptdbg_tui.engine.callpath import Seg
from ptdbg_tui.formats.layout import RankDump, Unpaired
from ptdbg_tui.formats.records import StackRecord


@dataclass(frozen=True, slots=True)
class PairInfo:
    """A compared pair of rank dumps as the app sees it; ``key`` is stable (the NPU records file)."""

    key: str
    label: str
    npu: RankDump
    bench: RankDump | None
    summary: bool  # statistics only: asked for, or a side has no npy dir (as ``ptdbg-tui compare``)
    same: bool = False  # both sides are one and the same dump file: every row is compared with itself


@dataclass(slots=True)
class Placed:
    """A row and where it goes in the tree (``site``: the stack that placed its call)."""

    row: Row
    path: tuple[Seg, ...]
    site: StackRecord | None


@dataclass(frozen=True, slots=True)
class MatchNote:
    """How a pair was matched: the mode asked for, the mode used, why ``auto`` chose it, and why
    another mode may pair better (:func:`~ptdbg_tui.compare.matching.match_advice`)."""

    asked: str
    used: str
    note: AutoAligned | None = None
    advice: Misfits | None = None


@dataclass
class PairDelta:
    info: PairInfo
    upserts: dict[str, Placed] = field(default_factory=dict)
    removes: set[str] = field(default_factory=set)
    diagnosis: Diagnosis | None = None  # None: unchanged
    match: MatchNote | None = None  # None: unchanged


#: What a side's path holds (:attr:`SideStatus.state`).
MISSING = "missing"  # the path does not exist (yet)
NO_DUMP = "no dump"  # it exists but holds no dump, or cannot be read
FOUND = "found"  # rank dumps were found


@dataclass(frozen=True)
class SideStatus:
    """One side's path as the engine last saw it, and what it lacks (:mod:`ptdbg_tui.compare.report.words`
    says it)."""

    role: str  # "NPU" | "bench"
    path: str
    state: str = MISSING
    detail: str = ""  # why there is no dump (MISSING, NO_DUMP), in the scan's words
    steps: tuple[int | None, ...] = ()
    ranks: tuple[int | None, ...] = ()
    writing: bool = False  # one of its dumps grew within the last quiet_s seconds
    problems: tuple[str, ...] = ()  # folders or files of it that cannot be read now
    waiting: bool = False  # MISSING, and watched: the folder may still appear

    @property
    def found(self) -> bool:
        return self.state == FOUND


@dataclass(frozen=True)
class Progress:
    npu_seen: int = 0
    bench_seen: int = 0
    rows: int = 0
    compared: int = 0
    pairs: int = 0
    watching: str = "static"  # "inotify" | "polling" | "static"
    done: bool = False  # nothing left to compare (for now, when watching)
    npu: SideStatus | None = None
    bench: SideStatus | None = None
    unpaired: tuple[Unpaired, ...] = ()  # dumps on one side only, or why no pair formed
    faults: tuple[str, ...] = ()  # pairs that failed and wait for a change to be tried again
    replayed: int = 0  # calls of the current replay round done
    replaying: int = 0  # calls of the current replay round (done or to do)
    #: why no replay will come to confirm a suspect (no torch, ``--replay-budget 0``, the budget ran out);
    #: None while one may
    replay_off: NoReplay | None = None

    @property
    def pending(self) -> int:
        return self.rows - self.compared


@dataclass
class EngineUpdate:
    """Everything that changed since the app last drained the outbox."""

    pairs: dict[str, PairDelta] = field(default_factory=dict)
    dropped: set[str] = field(default_factory=set)
    progress: Progress | None = None
    notices: list[str] = field(default_factory=list)
    #: the verdict across ranks (``words.rank_summary``: the first divergent rank, the bits that differ
    #: before it); None: unchanged
    ranks: tuple[str, ...] | None = None

    def __bool__(self) -> bool:
        return bool(self.pairs or self.dropped or self.progress or self.notices or self.ranks is not None)


class Outbox:
    """Deltas merged until the app takes them; at most one notification in flight."""

    def __init__(self, notify: Callable[[], None], flush_s: float) -> None:
        self._notify = notify
        self._flush_s = flush_s
        self._lock = threading.Lock()
        self._update = EngineUpdate()
        self._posted = False
        self._last = 0.0
        self._progress: Progress | None = None  # the last one put: the same again is no news

    def put_rows(self, info: PairInfo, upserts: dict[str, Placed], removes: set[str]) -> None:
        with self._lock:
            delta = self._delta(info)
            for key in removes:
                delta.upserts.pop(key, None)
            delta.removes |= removes
            delta.removes -= upserts.keys()
            delta.upserts.update(upserts)

    def put_diagnosis(self, info: PairInfo, diagnosis: Diagnosis) -> None:
        with self._lock:
            self._delta(info).diagnosis = diagnosis

    def put_match(self, info: PairInfo, match: MatchNote) -> None:
        with self._lock:
            self._delta(info).match = match

    def drop_pair(self, key: str) -> None:
        with self._lock:
            self._update.pairs.pop(key, None)
            self._update.dropped.add(key)

    def put_progress(self, progress: Progress) -> None:
        with self._lock:
            if progress != self._progress:
                self._progress = self._update.progress = progress

    def put_ranks(self, summary: tuple[str, ...]) -> None:
        with self._lock:
            self._update.ranks = summary

    def notice(self, text: str) -> None:
        with self._lock:
            self._update.notices.append(text)

    def _delta(self, info: PairInfo) -> PairDelta:
        delta = self._update.pairs.get(info.key)
        if delta is None:
            delta = self._update.pairs[info.key] = PairDelta(info)
            self._update.dropped.discard(info.key)
        delta.info = info
        return delta

    def pair_news(self) -> bool:
        """Whether rows, verdicts or pairs wait for the app (the progress and notices aside)."""
        with self._lock:
            return bool(self._update.pairs or self._update.dropped)

    def flush(self, force: bool = False) -> bool:
        """Notify the app if there is news and the last notification is old enough.

        Returns whether the caller should come back soon (news held back by the rate limit);
        news merged while a notification is pending is taken with it.
        """
        with self._lock:
            if not self._update or self._posted:
                return False
            now = time.monotonic()
            if not force and now - self._last < self._flush_s:
                return True
            self._posted, self._last = True, now
        self._notify()
        return False

    def take(self) -> EngineUpdate | None:
        """Called by the app: everything merged so far (``None`` if nothing)."""
        with self._lock:
            update, self._update = self._update, EngineUpdate()
            self._posted = False
        return update or None
