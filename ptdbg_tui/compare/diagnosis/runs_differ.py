"""Runs that differ before any kernel: other models, other data, other hyperparameters.

Two scripts that build different models (a block more, a layer renamed or wider) or train with another
learning rate differ from their first call on, and the two dumps alone blame what shows it first: a
parameter that differs on entry to a step (the embedding of a model with a block more, whose other
random draws initialised it otherwise), a random op, a kernel whose inputs have another shape. None of
that is a fault; the scripts differ. Each such difference is a finding of its own, said before any
culprit (the report's ``runs differ:`` lines, the app's bar and overview):

- **the runs' models differ** — from the module structure (this project's module sidecar, msprobe's
  construct.json): a module one run has and the other not, a module of another class, a parameter of
  another shape (from the records of the calls that take it). Without a module structure, the
  parameters of paired calls whose shapes differ. No suspect is named inside what differs, nor any
  finding that is not a kernel's (parameters, random draws, error entering: all follow from it);
- **the runs pass different data** — the first input the model takes (its first call's first argument,
  where the module structure says which call that is) differs beyond noise: another batch. No suspect
  judged by error sizes estimated from statistics stands then: on other data they measure nothing;
- **the runs pass different hyperparameters** — the optimizer's values each run's call sidecar shows
  (:mod:`~.hyperparameters`): ``lr 0.001 against 0.0001``.

Before all of these, where both runs were started by ``ptdbg-dump run``, their manifests say what the
runs were started with (:func:`with_manifests`): hyperparameters, the parameters' checksums at the first
step, the first batches, the settings and environment, and where a run ran (which changes no number).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

from ptdbg_tui.compare.diagnosis.diagnose import parameter_slot
from ptdbg_tui.compare.diagnosis.differences import (
    ClassDiffers,
    DataApart,
    DataShapes,
    HyperparametersDiffer,
    ModelsDiffer,
    ModulesOnly,
    RunsDiffer,
    ShapeDiffers,
)
from ptdbg_tui.compare.diagnosis.findings import NOT_A_KERNEL, RANDOM, SHAPE, Diagnosis, Suspect, Unexplained
from ptdbg_tui.compare.diagnosis.hyperparameters import hyperparameters, hyperparameters_differ
from ptdbg_tui.compare.diagnosis.kinds import Kind
from ptdbg_tui.compare.diagnosis.notes import Note, Sidecar, Unread
from ptdbg_tui.compare.model import Row
from ptdbg_tui.formats.calls import CallSpec
from ptdbg_tui.formats.files import reason
from ptdbg_tui.formats.layout import Side
from ptdbg_tui.formats.manifest import Manifest, ManifestError, manifest_differences
from ptdbg_tui.formats.modules import ModuleChain
from ptdbg_tui.formats.naming import FORWARD, INPUT, EntryName

T = TypeVar("T")
ChainOf = Callable[[EntryName], "ModuleChain | None"]
#: The NPU's and the bench's module chain of a call (None: the side has no module structure).
Chains = tuple["ChainOf | None", "ChainOf | None"]
Specs = tuple[Mapping[str, CallSpec], Mapping[str, CallSpec]]
#: The first input that differs by more than this (relative) is other data, not rounding or noise.
DATA_TOLERANCE = 1e-3
#: Suspects that follow from models that differ wherever they are: they are no kernel's.
_CONSEQUENCES = NOT_A_KERNEL | {RANDOM, SHAPE}
#: Kinds judged by the size of an error against its allowance (not NaN, zeros or a missing call).
_SIZED = frozenset({Kind.GROWTH, Kind.LEAN, Kind.SUMS})


@dataclass(slots=True)
class _Model:
    """One run's model as its records show it: each module's class and where in execution its first
    call is (a row's seq), each parameter's shape (by module and slot, ``blocks.0.fc.weight``), and the
    chain of each call."""

    classes: dict[str, str] = field(default_factory=dict)
    first: dict[str, int] = field(default_factory=dict)
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    chains: dict[str, ModuleChain] = field(default_factory=dict)


def _model(rows: Iterable[Row], bench: bool, chain_of: ChainOf) -> _Model:
    """One side's model (``bench``: the bench's) from the pair's rows, in execution order."""
    model = _Model()
    for row in rows:
        rec = row.bench if bench else row.npu
        entry = rec.entry if rec is not None else None
        if rec is None or entry is None:
            continue
        chain = model.chains.get(entry.label)
        if chain is None:
            chain = model.chains[entry.label] = chain_of(entry) or ()
            for q, c in chain:
                if q and q not in model.classes:
                    model.classes[q], model.first[q] = c, row.seq
        slot = parameter_slot(entry)
        if slot is not None and chain:
            model.shapes[f"{chain[-1][0]}.{slot}".lstrip(".")] = rec.shape
    return model


@dataclass(slots=True)
class _Difference:
    """What differs between the runs' models (``found``), and the modules it lies in."""

    found: ModelsDiffer = field(default_factory=ModelsDiffer)
    modules: set[str] = field(default_factory=set)
    calls: set[str] = field(default_factory=set)  # calls (without a module structure) whose parameters differ


def _parent(name: str) -> str:
    return name.rpartition(".")[0]


def _children(classes: Mapping[str, str], parent: str) -> int:
    return sum(1 for q in classes if _parent(q) == parent and q.rpartition(".")[2].isdigit())


def _only(one: _Model, other: _Model, side: Side, kernel: float) -> tuple[ModulesOnly | None, list[str]]:
    """The modules ``one`` has and ``other`` not (the outermost of them); none where the first of them
    runs after ``kernel`` (the seq of the first suspect that blames a kernel): a kernel's error may have
    sent the run another way (an expert a wrong router did not choose)."""
    only = [q for q in one.classes if q not in other.classes]
    if only and min(one.first[q] for q in only) > kernel:
        return None, []
    top = [q for q in only if _parent(q) not in only or not _parent(q)]
    if not top:
        return None, only
    counts = {
        p: (_children(one.classes, p), _children(other.classes, p))
        for q in top
        if q.rpartition(".")[2].isdigit() and (p := _parent(q))
    }
    return ModulesOnly(
        side=side,
        modules=tuple((q, one.classes[q]) for q in top),
        counts=tuple((p, a, b) for p, (a, b) in counts.items()),
    ), only


def _models_differ(npu: _Model, bench: _Model, kernel: float) -> _Difference:
    diff = _Difference()
    found = []
    for one, other, side in ((bench, npu, Side.BENCH), (npu, bench, Side.NPU)):
        modules, only = _only(one, other, side, kernel)
        if modules is not None:
            found.append(modules)
            diff.modules.update(only)
    classes = [q for q, c in npu.classes.items() if bench.classes.get(q, c) != c]
    diff.modules.update(classes)
    shapes = {k: (s, bench.shapes[k]) for k, s in npu.shapes.items() if bench.shapes.get(k, s) != s}
    diff.modules.update(_parent(k) for k in shapes)
    diff.found = ModelsDiffer(
        only=tuple(found),
        classes=tuple(ClassDiffers(module=q, npu=npu.classes[q], bench=bench.classes[q]) for q in classes),
        shapes=tuple(ShapeDiffers(name=k, npu=n, bench=b) for k, (n, b) in shapes.items()),
    )
    return diff


def _shapes_differ(rows: Sequence[Row]) -> _Difference:
    """Without a module structure: the parameters of paired calls whose shapes differ."""
    diff = _Difference()
    shapes: dict[tuple[str, str], ShapeDiffers] = {}
    for row in rows:
        entry = row.record.entry
        if row.npu is None or row.bench is None or entry is None or row.shapes_agree:
            continue
        slot = parameter_slot(entry)
        if slot is not None and row.npu.shape != row.bench.shape:
            shapes[slot, entry.call] = ShapeDiffers(
                name=slot, npu=row.npu.shape, bench=row.bench.shape, call=entry.call
            )
            diff.calls.add(entry.call)
    diff.found = ModelsDiffer(shapes=tuple(shapes.values()))
    return diff


def _inside(suspect: Suspect, diff: _Difference, chains: Mapping[str, ModuleChain]) -> bool:
    """Whether a suspect lies in what differs: a module that differs, a call whose parameters or other
    inputs have another shape on the two runs."""
    if any(r.npu is not None and r.bench is not None and not r.shapes_agree for r in suspect.rows):
        return True
    entry = next((r.record.entry for r in suspect.rows if r.record.entry is not None), None)
    if entry is None:
        return False
    if entry.forward_call in diff.calls or entry.call in diff.calls:
        return True
    return any(q in diff.modules for q, _ in chains.get(entry.label, ()))


def _first_input(rows: Sequence[Row], model: _Model) -> Row | None:
    """The first input the model takes: its first call's first argument (a call that runs in a module)."""
    for row in rows:
        entry = row.record.entry
        if entry is None or entry.direction != FORWARD or entry.kind != INPUT or entry.path != (0,):
            continue
        if model.chains.get(entry.label):
            return row
    return None


def _data_differs(row: Row) -> DataShapes | DataApart | None:
    """The first input's difference; None where it is within noise."""
    npu, bench = row.npu, row.bench
    if npu is None or bench is None or npu.is_scalar or bench.is_scalar:
        return None
    if npu.shape != bench.shape:
        return DataShapes(name=row.name, npu=npu.shape, bench=bench.shape)
    errors = row.result.errors if row.result is not None else None
    if errors is None or not (errors.rel > DATA_TOLERANCE or (errors.exact and errors.rel > 0)):
        return None
    stats = tuple(
        (name, a, b)
        for name, a, b in zip(("max", "min", "mean"), npu.stat_values(), bench.stat_values(), strict=False)
        if a is not None and b is not None and a != b
    )
    return DataApart(name=row.name, error=errors.rel, stats=stats)


def _read(read: Callable[[], T], sidecar: Sidecar | None, notes: list[Note]) -> T | None:
    """What ``read`` returns; None where a sidecar is there but cannot be read, with a note that says
    so where ``sidecar`` names it."""
    try:
        return read()
    except OSError as e:
        if sidecar is not None:
            notes.append(Unread(sidecar=sidecar, reason=reason(e)))
        return None


def with_manifests(
    diagnosis: Diagnosis, npu: Callable[[], Manifest | None], bench: Callable[[], Manifest | None]
) -> Diagnosis:
    """``diagnosis`` with where the runs' manifests differ (``npu``, ``bench``: each side's, None where it
    has none): what the runs were started with, before any kernel ran. A manifest that is there but
    cannot be read is named, and nothing is compared."""
    read = []
    unread = []
    for side, manifest in (("NPU", npu), ("bench", bench)):
        try:
            read.append(manifest())
        except ManifestError as e:
            read.append(None)
            unread.append((side, str(e)))
    a, b = read
    found = tuple(manifest_differences(a, b)) if a is not None and b is not None else ()
    return replace(diagnosis, manifest=found, manifest_unread=tuple(unread))


def _first_kernel(suspects: Sequence[Suspect]) -> float:
    """The seq of the first suspect that blames a kernel (inf: none)."""
    return min((s.seq for s in suspects if s.kind not in _CONSEQUENCES), default=math.inf)


def _estimated(suspect: Suspect) -> bool:
    """A suspect judged by the size of errors estimated from statistics: on other data those are no
    measure (two batches' statistics may agree to 1%: a model's first add was named ×1.4 at one step of
    a run whose bench model had a block more, and so other random draws and other batches)."""
    return suspect.kind in _SIZED and any(
        r.result is not None and r.result.errors is not None and r.result.errors.from_stats
        for r in suspect.rows
    )


def with_runs_differ(
    diagnosis: Diagnosis,
    rows: Sequence[Row],
    chains: Callable[[], Chains],
    specs: Callable[[], Specs],
) -> Diagnosis:
    """``diagnosis`` with what differs between the runs before any kernel, less the suspects that lie
    inside models that differ, and on other data those judged by sizes estimated from statistics.
    ``rows``: the pair's model rows; ``chains``, ``specs``: each side's module chains and call sidecar
    (read only where the runs differ at all: a suspect, or a failing row). A module structure that
    cannot be read leaves a note."""
    found: list[RunsDiffer] = []
    notes = list(diagnosis.notes)
    read = _read(chains, Sidecar.STRUCTURE, notes)
    npu_chain, bench_chain = read if read is not None else (None, None)
    npu = _model(rows, False, npu_chain) if npu_chain else _Model()
    bench = _model(rows, True, bench_chain) if bench_chain else _Model()
    suspects = diagnosis.suspects
    kernel = _first_kernel(suspects)
    first = _first_input(rows, npu)
    data = _data_differs(first) if first is not None and first.seq < kernel else None
    if data is not None:
        suspects = [
            s for s in suspects if not ((first in s.rows and s.kind in NOT_A_KERNEL) or _estimated(s))
        ]
        kernel = _first_kernel(suspects)
    diff = _models_differ(npu, bench, kernel) if npu.classes and bench.classes else _shapes_differ(rows)
    if diff.found.only or diff.found.classes or diff.found.shapes:
        found.append(diff.found)
        suspects = [s for s in suspects if s.kind not in _CONSEQUENCES and not _inside(s, diff, npu.chains)]
    if data is not None:
        found.append(data)
    differ = suspects or diagnosis.failing  # else no update differs: nothing to read
    # a call sidecar that cannot be read: :func:`~.keywords.with_keywords`, which reads it where the runs
    # differ too, has said so
    sidecars = _read(specs, None, []) if differ else None
    if sidecars is not None and (hyper := hyperparameters_differ(*map(hyperparameters, sidecars))):
        found.append(HyperparametersDiffer(values=hyper))
    # the runs differ before any kernel: nothing is unexplained
    unexplained = Unexplained() if found and not suspects else diagnosis.unexplained
    return replace(diagnosis, suspects=list(suspects), notes=notes, differ=found, unexplained=unexplained)
