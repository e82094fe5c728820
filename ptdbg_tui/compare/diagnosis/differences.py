"""What differs between the runs before any kernel (:mod:`.runs_differ`), as values: the runs' models,
the data they pass, their hyperparameters; :func:`ptdbg_tui.compare.report.words.runs_differ_text`
says each.
"""

from __future__ import annotations

from dataclasses import dataclass

from ptdbg_tui.formats.layout import Side


@dataclass(frozen=True, slots=True, kw_only=True)
class ModulesOnly:
    """Modules one run's model has (``side``) and the other's not: the outermost of them
    (``modules``: name and class each), and of those numbered in a parent, how many each side holds
    there (``counts``: the parent, this side's, the other's)."""

    side: Side
    modules: tuple[tuple[str, str], ...]
    counts: tuple[tuple[str, int, int], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassDiffers:
    """A module of another class on each run."""

    module: str
    npu: str
    bench: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ShapeDiffers:
    """A parameter of another shape on each run: by its name in the model (``name``), or, without a
    module structure, by its slot in the call (``call``) that takes it."""

    name: str
    npu: tuple[int, ...]
    bench: tuple[int, ...]
    call: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelsDiffer:
    """The runs' models differ: modules one has and the other not (the bench's first), modules of
    another class, parameters of other shapes."""

    only: tuple[ModulesOnly, ...] = ()
    classes: tuple[ClassDiffers, ...] = ()
    shapes: tuple[ShapeDiffers, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DataShapes:
    """The model's first input (``name``) has another shape on each run: another batch."""

    name: str
    npu: tuple[int, ...]
    bench: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DataApart:
    """The model's first input (``name``) is ``error`` apart (relative), beyond noise: another batch;
    the statistics that differ (``stats``: name, NPU's, bench's)."""

    name: str
    error: float
    stats: tuple[tuple[str, float, float], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class HyperparametersDiffer:
    """The values both runs' optimizers show, where they differ (name, NPU's, bench's)."""

    values: tuple[tuple[str, float, float], ...]


#: One thing that differs between the runs before any kernel.
RunsDiffer = ModelsDiffer | DataShapes | DataApart | HyperparametersDiffer
