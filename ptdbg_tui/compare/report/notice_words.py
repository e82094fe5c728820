"""The words of what the engines meet while they run (:mod:`ptdbg_tui.compare.notices`) and of a tensor
pair's worker that failed: the live engine's notices and the Err_message of a row its worker lost."""

from __future__ import annotations

from ptdbg_tui.compare.notices import (
    ClusterLost,
    CompareFailed,
    DtypeHeld,
    EngineRestarted,
    EngineStopped,
    Error,
    ModulesUnreadable,
    OnCluster,
    PairFailed,
    Polling,
    PoolSaid,
    RecordsUnreadable,
    ReproFault,
    ReproNotReplayable,
    ReproUnwritable,
    SideFault,
    Uncompared,
    Unserved,
    WorkerFault,
)


def error_text(e: Error) -> str:
    """``TypeName: text``, or the type's name alone when the error has no text."""
    return f"{e.kind}: {e.text}" if e.text else e.kind


def side_fault_text(f: SideFault) -> str:
    if isinstance(f, RecordsUnreadable):
        return f"cannot read {f.reason}"
    if isinstance(f, ModulesUnreadable):
        return f"module sidecar {f.reason}: calls are placed by their stack lines"
    return f"reading {f.records} failed: {error_text(f.error)}"


def pair_failed_text(f: PairFailed) -> str:
    return f"{f.label}: comparing failed ({error_text(f.error)}); trying again on the next change"


def engine_text(n: EngineRestarted | EngineStopped) -> str:
    if isinstance(n, EngineRestarted):
        return f"The comparison engine hit an unexpected error ({error_text(n.error)}) and restarted."
    return f"The comparison engine stopped: {error_text(n.error)}"


def pool_text(p: PoolSaid) -> str:
    if isinstance(p, OnCluster):
        return f"Comparing tensors on the Dask cluster {p.address}."
    return f"{p.why}; comparing here instead."


def polling_text(p: Polling) -> str:
    return f"inotify unavailable ({p.reason}); polling the folders instead"


def repro_fault_text(f: ReproFault) -> str:
    if isinstance(f, ReproUnwritable):
        return f"{f.call}: cannot write the repro to {f.path}: {f.reason}"
    if isinstance(f, ReproNotReplayable):
        return f"{f.call}: not replayable: {f.why}"
    return f"{f.call}: the repro failed: {f.error.kind}: {f.error.text}"


_UNCOMPARED = {
    Uncompared.NO_TENSOR_DIRS: "No tensor data directory for this dump, so tensors cannot be compared.",
    Uncompared.NO_PART: "No part of this tensor pair was compared.",
    Uncompared.OUT_OF_MEMORY: "Out of memory while comparing this tensor.",
    Uncompared.WORKER_DIED: "A worker process died while comparing this tensor.",
}


def worker_fault_text(f: WorkerFault) -> str:
    """A row's Err_message (and reason) when its worker gave no metrics."""
    if isinstance(f, Uncompared):
        return _UNCOMPARED[f]
    if isinstance(f, CompareFailed):
        return f"{'Worker' if f.worker else 'Comparison'} failed: {f.error.kind}: {f.error.text}"
    if isinstance(f, ClusterLost):
        return f"The cluster lost this task {f.attempts} times."
    lost = " (its workers were lost)" if f.lost else ""
    return f"No worker of the cluster can read {' and '.join(f.dirs)}.{lost}"


def dtype_held_text(d: DtypeHeld) -> str:
    return f"Dump file {d.file} holds {d.held} data but the dump records {d.recorded}."


def unserved_text(u: Unserved) -> str:
    return f"{u.root}: no worker serves a dump below it"
