"""A run's first NaN/Inf whose inputs are finite: per step, in the order the step runs, the module
outputs (forward order: every earlier output is finite by then, and the parameters were finite after
the step before), the loss, the gradients (backward order; a step a GradScaler skipped does not
count: its gradients overflowed as the scaler expects), the updates."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ptdbg_tui.compare.monitor.findings import FirstNonFinite
from ptdbg_tui.compare.monitor.rows import RunRows, Stats
from ptdbg_tui.compare.monitor.rule import owner


def _bad(s: Stats) -> np.ndarray:
    return (s.nonfinite > 0) | np.isinf(s.values["norm"])


def first_nonfinite(
    run: RunRows, side: str, rank: int, backward: Sequence[str], modules: Sequence[str]
) -> FirstNonFinite | None:
    """The first non-finite row of ``run`` (``backward``: its parameters in backward order;
    ``modules``: the module paths, to name a parameter's)."""
    out, grad, update = _bad(run.outputs), _bad(run.grads), _bad(run.updates)
    grad_index = run.grads.index()
    order = [grad_index[p] for p in backward if p in grad_index]
    # a loss that is NaN at every step was not recorded (no backward): only a recorded one counts
    loss_bad = ~np.isfinite(run.loss) & ~np.isnan(run.loss).all()
    for i, iteration in enumerate(run.iterations):

        def found(kind: str, name: str, module: str, count: int) -> FirstNonFinite:
            return FirstNonFinite(
                side=side,
                rank=rank,
                iteration=int(iteration),  # noqa: B023  (called in the same iteration)
                step=int(run.steps[i]),  # noqa: B023
                kind=kind,
                name=name,
                module=module,
                count=count,
            )

        if out[i].any():
            m = int(np.argmax(out[i]))
            name = run.outputs.names[m]
            return found("output", name, name, _count(run.outputs, i, m))
        if loss_bad[i]:
            return found("loss", "", "", 1)
        if run.skipped[i]:
            continue
        for kind, bad, stats in (("grad", grad, run.grads), ("update", update, run.updates)):
            cols = order if kind == "grad" else list(range(len(stats.names)))
            hit = next((c for c in cols if bad[i, c]), None)
            if hit is not None:
                name = stats.names[hit]
                return found(kind, name, owner(name, modules), _count(stats, i, hit))
    return None


def _count(s: Stats, i: int, c: int) -> int:
    """A cell's NaN + Inf elements (a non-finite norm whose elements were not counted: at least one)."""
    return max(1, int(s.nonfinite[i, c]))
