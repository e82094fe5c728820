"""What the engines meet while they run (a dump they cannot read, a pass that failed, where tensors are
compared, a worker that died), as values: names, paths and the error, no sentences. The words are
:mod:`ptdbg_tui.compare.report.notice_words`'."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path


@dataclass(frozen=True, slots=True, kw_only=True)
class Error:
    """An exception as the user is told of it: its type's name and its text (either may be empty)."""

    kind: str
    text: str

    @classmethod
    def of(cls, e: BaseException) -> Error:
        return cls(kind=type(e).__name__, text=str(e))


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordsUnreadable:
    """A side's records cannot be read now (``reason``: the OS's, see ``formats.files.reason``)."""

    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ModulesUnreadable:
    """A side's module sidecar cannot be read now: calls are placed by their stack lines."""

    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ReaderFailed:
    """Reading a side's records raised what a reader should not (a bug): it waits for the next change."""

    records: Path
    error: Error


#: Why a side cannot be read now.
SideFault = RecordsUnreadable | ModulesUnreadable | ReaderFailed


@dataclass(frozen=True, slots=True, kw_only=True)
class PairFailed:
    """A pair's pass failed; it is tried again on the next change."""

    label: str
    error: Error


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineRestarted:
    """The live engine met an unexpected error and restarted."""

    error: Error


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineStopped:
    """The live engine could not start (its watcher failed): updates stopped."""

    error: Error


@dataclass(frozen=True, slots=True, kw_only=True)
class OnCluster:
    """Tensors are compared on the Dask cluster at ``address``."""

    address: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterUnusable:
    """The cluster cannot be used (``why``: the cluster's own error text): tensors are compared here."""

    why: str


#: Where the live engine compares tensors.
PoolSaid = OnCluster | ClusterUnusable


@dataclass(frozen=True, slots=True, kw_only=True)
class Polling:
    """inotify is unavailable (``reason``: the OS's): the watcher polls the folders."""

    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ReproUnwritable:
    """A repro file cannot be written to ``path`` (``reason``: the OS's)."""

    call: str
    path: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ReproNotReplayable:
    """A call asked for a repro cannot be replayed (``why``: the plan's reason)."""

    call: str
    why: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ReproFailed:
    """Writing a repro failed (a bug, or the worker died): the app goes on."""

    call: str
    error: Error


#: What the live replay says of a repro it could not write.
ReproFault = ReproUnwritable | ReproNotReplayable | ReproFailed


class Uncompared(Enum):
    """Why a tensor pair's worker gave no metrics, where nothing more is to say."""

    NO_TENSOR_DIRS = "no tensor dirs"  # the dump has no tensor data directory
    NO_PART = "no part"  # none of the pair's parts was compared
    OUT_OF_MEMORY = "out of memory"
    WORKER_DIED = "worker died"  # its worker process died (a crash names its tensor: it ran alone)


@dataclass(frozen=True, slots=True, kw_only=True)
class CompareFailed:
    """Comparing a tensor pair raised ``error`` (``worker``: in the pool's or the cluster's machinery,
    not in the comparison itself)."""

    error: Error
    worker: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterLost:
    """The cluster lost a task ``attempts`` times."""

    attempts: int


@dataclass(frozen=True, slots=True, kw_only=True)
class NoWorkerReads:
    """No worker of the cluster can read ``dirs`` (``lost``: the workers that could were lost)."""

    dirs: tuple[str, ...]
    lost: bool = False


#: Why a row of tensors has no metrics, from the workers.
WorkerFault = Uncompared | CompareFailed | ClusterLost | NoWorkerReads


@dataclass(frozen=True, slots=True, kw_only=True)
class DtypeHeld:
    """A tensor file holds data of another dtype than the dump records (the recorded one stays the
    authority, spec FAQ 14)."""

    file: str
    held: str
    recorded: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Unserved:
    """No worker of the cluster serves a dump below ``root``."""

    root: str
