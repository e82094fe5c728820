"""One run's monitor table as arrays: a row per recorded iteration, a column per module (``output``
rows) or parameter (``grad``, ``update``, ``param`` rows), in the order the rows come (the modules'
forward order, each module when its call ends, the root last).

A name that appears only at a later step (a module run conditionally) gets its column then; a cell
with no row is NaN. The names are dump text: kept as they are, said through ``one_line`` downstream.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ptdbg_tui.formats import monitor as fmon

Array = npt.NDArray[np.float64]
Index = npt.NDArray[np.int64]


def cells(values: Array, rows: Index, columns: Sequence[int]) -> Array:
    """``values`` at every (row, column) of ``rows`` × ``columns``."""
    picked = values[rows[:, None], np.asarray(columns, dtype=np.int64)[None, :]]
    return np.asarray(picked, dtype=np.float64)


#: The statistics of an ``output`` row, in the order :class:`Stats` holds them.
OUTPUT_STATS = ("norm", "mean", "max", "min")


@dataclass(frozen=True, kw_only=True, eq=False)
class Stats:
    """One kind's rows: ``names`` in row order; ``values[s]`` a (iterations, names) array per
    statistic; ``nonfinite``: the NaN + Inf counts."""

    names: tuple[str, ...]
    values: dict[str, Array]
    nonfinite: Array

    def index(self) -> dict[str, int]:
        return {n: i for i, n in enumerate(self.names)}


@dataclass(frozen=True, kw_only=True, eq=False)
class RunRows:
    """A run's (one rank's) rows by iteration: ``iterations`` sorted, ``steps`` their ``step`` column,
    ``loss``, ``skipped`` (1: a GradScaler skipped the step), ``loss_scale`` (NaN: none), ``lr`` a
    (iterations, groups) array with ``groups`` the param groups' names, and the statistics rows."""

    iterations: npt.NDArray[np.int64]
    steps: npt.NDArray[np.int64]
    loss: Array
    skipped: Array
    loss_scale: Array
    groups: tuple[str, ...]
    lr: Array
    outputs: Stats
    grads: Stats
    updates: Stats
    params: Stats


def _column(table: fmon.Table, name: str) -> Array:
    """A numeric column as float64, null as NaN."""
    return np.asarray(table.column(name).to_numpy(zero_copy_only=False), dtype=np.float64)


def run_rows(table: fmon.Table) -> RunRows:
    """The arrays of a monitor table (:meth:`ptdbg_tui.formats.monitor.MonitorStream.table`)."""
    iteration = np.asarray(table.column("iteration").to_numpy(zero_copy_only=False), dtype=np.int64)
    step = np.asarray(table.column("step").to_numpy(zero_copy_only=False), dtype=np.int64)
    kinds = table.column("kind").to_pylist()
    names = table.column("name").to_pylist()
    iterations, row_at = np.unique(iteration, return_inverse=True)
    steps = np.zeros(len(iterations), dtype=np.int64)
    steps[row_at] = step
    cols = {c: _column(table, c) for c in ("value", *OUTPUT_STATS)}
    counts = np.nan_to_num(_column(table, "nan")) + np.nan_to_num(_column(table, "inf"))
    columns: dict[str, dict[str, int]] = {k: {} for k in fmon.KINDS}
    where: dict[str, list[int]] = {k: [] for k in fmon.KINDS}
    for i, (kind, name) in enumerate(zip(kinds, names, strict=True)):
        if kind in columns:
            columns[kind].setdefault(name or "", len(columns[kind]))
            where[kind].append(i)

    def grid(kind: str, source: Array) -> Array:
        rows = np.asarray(where[kind], dtype=np.int64)
        out = np.full((len(iterations), len(columns[kind])), np.nan)
        index = columns[kind]
        out[row_at[rows], [index[names[r] or ""] for r in rows]] = source[rows]
        return out

    def stats(kind: str, statistics: tuple[str, ...]) -> Stats:
        return Stats(
            names=tuple(columns[kind]),
            values={s: grid(kind, cols[s]) for s in statistics},
            nonfinite=np.nan_to_num(grid(kind, counts)),
        )

    def scalar(kind: str) -> Array:
        values = grid(kind, cols["value"])
        return values[:, 0] if values.shape[1] else np.full(len(iterations), np.nan)

    return RunRows(
        iterations=iterations,
        steps=steps,
        loss=scalar(fmon.LOSS),
        skipped=np.nan_to_num(scalar(fmon.SKIPPED)),
        loss_scale=scalar(fmon.LOSS_SCALE),
        groups=tuple(columns[fmon.LR]),
        lr=grid(fmon.LR, cols["value"]),
        outputs=stats(fmon.OUTPUT, OUTPUT_STATS),
        grads=stats(fmon.GRAD, ("norm",)),
        updates=stats(fmon.UPDATE, ("norm",)),
        params=stats(fmon.PARAM, ("norm",)),
    )
