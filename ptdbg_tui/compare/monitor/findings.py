"""What the two-run monitor analysis finds, as values (numbers, names, steps; no sentences: those are
made in :mod:`ptdbg_tui.compare.report.monitor_words`)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ptdbg_tui.formats.manifest import ManifestDifference


class Phase(str, Enum):
    """Where in a step the first divergence lies, in the order a step runs them (a finding of an
    earlier phase of a step explains the later ones); prints as its value."""

    DATA = "data"  # the input side's first module differs while its parameters agree
    FORWARD = "forward"  # a module's output differs beyond its inputs' difference and rounding
    BACKWARD = "backward"  # forward outputs agree; a parameter's gradient differs first in backward order
    HYPERPARAMETER = "hyperparameter"  # a param group's lr, or the loss scale
    OPTIMIZER = "optimizer"  # gradients and lr agree; a parameter's update differs

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


PHASES = tuple(Phase)


@dataclass(frozen=True, kw_only=True)
class Band:
    """The relative difference rounding explains on this pair: ``floor`` (float32's), the largest
    difference of the ``early`` steps (the lower-precision side's rounding, seen), times the margin,
    at most ``cap`` (bfloat16's). ``value`` is the band used."""

    value: float
    floor: float
    early: float
    early_steps: int
    cap: float

    @property
    def capped(self) -> bool:
        """The early steps already differ beyond any rounding the band allows."""
        return self.value >= self.cap


@dataclass(frozen=True, kw_only=True)
class Divergence:
    """The first divergent step and where: ``iteration`` (the runs align on it), ``step`` (the NPU
    run's ``step``: narrow's ``--step``), the phase, ``module`` (narrow's ``--module``; "" for a
    hyperparameter), ``name`` (the row's: the module, parameter, param group or ``loss_scale``), and
    the evidence: the row's ``statistic`` on each side, its relative ``difference``, and what would
    have explained it: the ``inputs``' difference (earlier modules at that step, or the gradients for
    an update), the row's own difference over the ``previous`` steps, the ``parameters``' difference at
    entry, and the ``band``; ``allowed`` is their sum as the rule weighs them."""

    rank: int
    iteration: int
    step: int
    phase: Phase
    module: str
    name: str
    statistic: str
    npu: float
    bench: float
    difference: float
    inputs: float
    previous: float
    parameters: float
    band: float
    allowed: float

    def order(self) -> tuple[int, int]:
        """Which of two divergences (two ranks') came first."""
        return self.iteration, PHASES.index(self.phase)


@dataclass(frozen=True, kw_only=True)
class FirstNonFinite:
    """Where a run's first NaN/Inf appears while what feeds it is finite: a module's output (its
    earlier modules' outputs and its parameters finite), the loss, a parameter's gradient (the forward
    finite; a step a GradScaler skipped does not count) or update."""

    side: str  # "npu" or "bench"
    rank: int
    iteration: int
    step: int
    kind: str  # the row kind: output, loss, grad, update
    name: str
    module: str
    count: int  # its NaN + Inf elements


@dataclass(frozen=True, kw_only=True, eq=False)
class Curves:
    """Both runs' curves on the aligned iterations, for plots: the loss, and each common module's
    output norm and relative difference (``difference[i, m]``: iteration ``i``, module ``m``)."""

    iterations: npt.NDArray[np.int64]
    steps: npt.NDArray[np.int64]
    loss_npu: npt.NDArray[np.float64]
    loss_bench: npt.NDArray[np.float64]
    modules: tuple[str, ...]
    norm_npu: npt.NDArray[np.float64]
    norm_bench: npt.NDArray[np.float64]
    difference: npt.NDArray[np.float64]


@dataclass(frozen=True, kw_only=True, eq=False)
class RankAnalysis:
    """One rank's pair of runs: its files, how many iterations each holds and how many align, the
    band, the first divergence (None: nothing beyond rounding), each side's first NaN/Inf, the
    GradScaler's skipped steps on each side, modules and parameters recorded on one side only, the
    bytes after the last whole step of a stream still written or cut (0: none), and the curves."""

    rank: int
    npu_file: Path
    bench_file: Path
    npu_iterations: int
    bench_iterations: int
    band: Band
    divergence: Divergence | None
    nonfinite: tuple[FirstNonFinite, ...]
    skipped: tuple[int, int]
    only_npu: tuple[str, ...]
    only_bench: tuple[str, ...]
    cut: tuple[int, int]
    ended: tuple[bool, bool]
    curves: Curves

    @property
    def aligned(self) -> int:
        return len(self.curves.iterations)


@dataclass(frozen=True, kw_only=True, eq=False)
class MonitorAnalysis:
    """Two monitor folders compared: the manifests' differences (the lowest common rank's; the reason
    a side's manifest was not read, the NPU run's script), each common rank's analysis, the ranks on
    one side only, and the first divergent rank (None with one rank, or where no rank diverges)."""

    npu: Path
    bench: Path
    manifest: tuple[ManifestDifference, ...]
    manifest_unread: tuple[tuple[str, str], ...]
    script: str | None  # the NPU run's script, as its manifest records it (untrusted text)
    ranks: tuple[RankAnalysis, ...]
    only_npu_ranks: tuple[int, ...]
    only_bench_ranks: tuple[int, ...]
    first_rank: int | None

    @property
    def first(self) -> Divergence | None:
        """The divergence the narrowing follows: the first divergent rank's, else the only rank's."""
        found = [r.divergence for r in self.ranks if r.divergence is not None]
        return min(found, key=lambda d: (*d.order(), d.rank), default=None)
