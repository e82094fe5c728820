"""The first divergent step and module of two runs' monitor rows (docs/monitor.md, "The rule").

A row's difference is relative: the output statistics' (norm, mean, max, min) largest difference, the
norm's against the norm, the others against the output's range; a gradient's, update's or parameter's
norm against the norm. A difference where one side is NaN/Inf or has no row is infinite.

A row diverges where its difference exceeds what explains it:

    band + GROWTH × (its inputs' difference + its parameters' difference at entry)
         + GROWTH × (its own largest difference over the HISTORY previous steps)

- **Inputs**: for a module's output, every module that ended before it at that step (its inputs are
  among them); for a gradient, the forward outputs of the step and the gradients before it in
  backward order; for an update, the parameter's gradient. The **parameters at entry** are the
  ``param`` rows of the step before (all of the module's parameters).
- **History** separates the chaotic growth of rounding over training from a fault: growth raises a
  row's difference a little each step, from what the previous steps already showed; a fault jumps.
- **GROWTH** = 4: how much a layer may amplify a difference it is given within one step (and a row
  its own from one step to the next). On the pairs without a fault in bench/monitor.py (1e-6 noise,
  bf16 autocast; 300 steps), no row came above 0.47 of what this allows; the faults came 1.3× to
  thousands of times above it.
- **The band** is rounding: float32's floor (:data:`FLOOR`), or 4× the largest difference of the first
  :data:`EARLY_STEPS` steps: a lower-precision side (bf16 autocast) shows its rounding from step 0,
  as a constant relative difference. At most :data:`CAP` (bf16's rounding); a pair that differs more
  from the start diverges at its first step.

The phases of a step are judged in the order they run: the forward, then the backward, then the
hyperparameters (an lr or loss scale that differs is a finding of its own), then the optimizer. The
first step with a divergent row names it; a later row of the same step inherits it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ptdbg_tui.compare.monitor.findings import Band, Divergence, Phase
from ptdbg_tui.compare.monitor.rows import OUTPUT_STATS, Array, Index, RunRows, Stats, cells

Mask = npt.NDArray[np.bool_]

#: float32's unit roundoff (2^-24) times 64: a statistic reduced over thousands of elements by two
#: correct kernels that sum in another order differs by a few dozen units at most.
FLOOR = 64 * 2.0**-24
#: bfloat16's unit roundoff (2^-9) times 16: the most a pair's rounding may explain; a pair whose
#: first steps differ more than that differs by more than any precision it may run in.
CAP = 16 * 2.0**-9
#: The first steps whose differences show the pair's rounding (a lower-precision side's from step 0,
#: before training has had time to amplify it).
EARLY_STEPS = 5
#: The band over those early differences: their largest, with room for the later steps' rounding.
MARGIN = 4.0
#: How much a layer may amplify a difference within a step, and a row its own from one step to the next.
GROWTH = 4.0
#: The previous steps a row's own difference is taken over (the largest): a difference that crosses
#: zero between two steps does not make the next one look new.
HISTORY = 8
#: An lr or loss scale that differs by more than this (relative) is no rounding: both are float64
#: scalars computed by the same schedule.
HYPER_TOLERANCE = 1e-9


def relative(a: Array, b: Array, scale: Array) -> Array:
    """|a − b| / scale, 0 where both are equal (0/0 included)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.abs(a - b) / scale
    return np.where(a == b, 0.0, out)


def _mark(d: Array, a_vals: Array, b_vals: Array, a_bad: Mask, b_bad: Mask) -> Array:
    """A difference infinite where one side is non-finite or has no row; 0 where both are."""
    a_absent, b_absent = np.isnan(a_vals) & ~a_bad, np.isnan(b_vals) & ~b_bad
    d = np.where(a_absent != b_absent, np.inf, d)
    d = np.where(a_absent & b_absent, 0.0, d)
    d = np.where(a_bad != b_bad, np.inf, d)
    return np.where(a_bad & b_bad, 0.0, d)


def _bad(s: Stats, idx: Sequence[int], rows: Index) -> Mask:
    return (cells(s.nonfinite, rows, idx) > 0) | np.isinf(cells(s.values["norm"], rows, idx))


def output_differences(
    a: Stats, b: Stats, ia: Sequence[int], ib: Sequence[int], ra: Index, rb: Index
) -> Array:
    """Each output's relative difference (iterations × modules)."""
    va = {s: cells(a.values[s], ra, ia) for s in OUTPUT_STATS}
    vb = {s: cells(b.values[s], rb, ib) for s in OUTPUT_STATS}
    norm = np.maximum(np.abs(va["norm"]), np.abs(vb["norm"]))
    span = np.max([np.abs(va["max"]), np.abs(va["min"]), np.abs(vb["max"]), np.abs(vb["min"])], axis=0)
    parts = [relative(va["norm"], vb["norm"], norm)]
    parts += [relative(va[s], vb[s], span) for s in ("mean", "max", "min")]
    d = np.nan_to_num(np.max(parts, axis=0), nan=0.0, posinf=np.inf)
    return _mark(d, va["norm"], vb["norm"], _bad(a, ia, ra), _bad(b, ib, rb))


def norm_differences(a: Stats, b: Stats, ia: Sequence[int], ib: Sequence[int], ra: Index, rb: Index) -> Array:
    """Each parameter row's relative norm difference (iterations × parameters)."""
    na, nb = cells(a.values["norm"], ra, ia), cells(b.values["norm"], rb, ib)
    d = np.nan_to_num(relative(na, nb, np.maximum(np.abs(na), np.abs(nb))), nan=0.0, posinf=np.inf)
    return _mark(d, na, nb, _bad(a, ia, ra), _bad(b, ib, rb))


def previous_max(d: Array) -> Array:
    """Each row's largest difference over the :data:`HISTORY` steps before (0 at the first)."""
    out = np.zeros_like(d)
    for lag in range(1, HISTORY + 1):
        if lag < len(d):
            out[lag:] = np.maximum(out[lag:], d[:-lag])
    return out


def at_entry(params: Array) -> Array:
    """The parameters' differences at a step's entry: the ``param`` rows of the step before."""
    out = np.zeros_like(params)
    out[1:] = params[:-1]
    return out


def band_of(outputs: Array) -> Band:
    """The rounding band of a pair from its first steps' output differences."""
    early = outputs[:EARLY_STEPS]
    finite = early[np.isfinite(early)]
    seen = float(finite.max()) if finite.size else 0.0
    return Band(
        value=min(max(FLOOR, MARGIN * seen), CAP),
        floor=FLOOR,
        early=seen,
        early_steps=len(early),
        cap=CAP,
    )


def _excess(d: Array, allowed: Array) -> Array:
    """How far beyond what explains it each difference is (> 1: divergent); 0 where both are infinite."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.nan_to_num(d / allowed, nan=0.0, posinf=np.inf)


def earlier_max(d: Array) -> Array:
    """Each column's largest difference among the columns before it (row by row)."""
    out = np.zeros_like(d)
    if d.shape[1] > 1:
        out[:, 1:] = np.maximum.accumulate(d[:, :-1], axis=1)
    return out


def owner(param: str, modules: Sequence[str]) -> str:
    """The module a parameter belongs to: the longest module path it starts with ("" the root)."""
    best = ""
    for m in modules:
        if m and (param == m or param.startswith(m + ".")) and len(m) > len(best):
            best = m
    return best


def common_prefix(a: str, b: str) -> str:
    """The innermost module holding both paths ("" the root)."""
    parts = []
    for x, y in zip(a.split("."), b.split("."), strict=False):
        if x != y:
            break
        parts.append(x)
    return ".".join(parts)


def _columns(a: Stats, b: Stats) -> tuple[tuple[str, ...], list[int], list[int]]:
    """The names both sides record, in the NPU side's order, and their columns on each side."""
    ib = b.index()
    names = tuple(n for n in a.names if n in ib)
    ia = a.index()
    return names, [ia[n] for n in names], [ib[n] for n in names]


class PairRule:
    """The rule applied to one rank's pair of runs (aligned on ``iteration``)."""

    def __init__(self, rank: int, npu: RunRows, bench: RunRows, data_differs: bool | None) -> None:
        self.rank, self.npu, self.bench = rank, npu, bench
        self.iterations, ra, rb = np.intersect1d(npu.iterations, bench.iterations, return_indices=True)
        self.ra, self.rb = ra, rb
        self.modules, mi, mb = _columns(npu.outputs, bench.outputs)
        self.params = tuple(
            n
            for n in _columns(npu.grads, bench.grads)[0]
            if all(n in s.names for s in (npu.updates, bench.updates, npu.params, bench.params))
        )
        pi, pb = _columns_of(npu.grads, bench.grads, self.params)
        self.out_diff = output_differences(npu.outputs, bench.outputs, mi, mb, ra, rb)
        self.grad_diff = norm_differences(npu.grads, bench.grads, pi, pb, ra, rb)
        up, ub = _columns_of(npu.updates, bench.updates, self.params)
        self.update_diff = norm_differences(npu.updates, bench.updates, up, ub, ra, rb)
        qp, qb = _columns_of(npu.params, bench.params, self.params)
        self.param_diff = at_entry(norm_differences(npu.params, bench.params, qp, qb, ra, rb))
        self.band = band_of(self.out_diff)
        self.data_differs = data_differs
        self.owners = [owner(p, self.modules) for p in self.params]
        position = {m: i for i, m in enumerate(self.modules)}
        # backward order: the modules in reverse forward order, a module's parameters last-first
        self.backward = sorted(
            range(len(self.params)), key=lambda i: (position.get(self.owners[i], -1), i), reverse=True
        )
        self._mi, self._mb = mi, mb

    def _module_params(self) -> Array:
        """Each module's parameters' largest difference at entry (iterations × modules)."""
        out = np.zeros_like(self.out_diff)
        for m, name in enumerate(self.modules):
            cols = [i for i, p in enumerate(self.params) if not name or p.startswith(name + ".")]
            if cols:
                out[:, m] = self.param_diff[:, cols].max(axis=1)
        return out

    def divergence(self) -> Divergence | None:
        """The first divergent step and row (None: every difference is explained)."""
        band = self.band.value
        d = self.out_diff
        inputs, params = earlier_max(d), self._module_params()
        f_allowed = band + GROWTH * (inputs + params + previous_max(d))
        forward = _excess(d, f_allowed) > 1

        g = self.grad_diff[:, self.backward]
        forward_max = d.max(axis=1, initial=0.0)[:, None]
        g_inputs = np.maximum(earlier_max(g), forward_max)
        g_params = self.param_diff[:, self.backward]
        g_allowed = band + GROWTH * (g_inputs + g_params + previous_max(g))
        backward = _excess(g, g_allowed) > 1

        hyper = self._hyper_differences()

        # an adaptive optimizer (Adam) normalises each element's step: an element whose gradient is
        # rounding noise moves by ±lr whatever its size, so a gradient that differs at all can change
        # the update's norm by its whole size. An update is judged only while its parameter's
        # gradients, and the parameter, agree to float32's floor at this step and every step before.
        u = self.update_diff
        agreed = np.maximum.accumulate(np.maximum(self.grad_diff, self.param_diff), axis=0) <= FLOOR
        u_allowed = np.where(agreed, band + GROWTH * previous_max(u), np.inf)
        optimizer = _excess(u, u_allowed) > 1

        if self._data_first(params):
            return self._forward(0, 0, d, inputs, params, f_allowed)
        for i in range(len(self.iterations)):
            if forward[i].any():
                m = int(np.argmax(forward[i]))
                return self._forward(i, m, d, inputs, params, f_allowed)
            if backward[i].any():
                k = int(np.argmax(backward[i]))
                p = self.backward[k]
                after = self.owners[self.backward[k - 1]] if k else self.owners[p]
                module = common_prefix(self.owners[p], after)
                return self._param_row(
                    i,
                    Phase.BACKWARD,
                    module,
                    p,
                    self.npu.grads,
                    self.bench.grads,
                    g[i, k],
                    g_inputs[i, k],
                    previous_max(g)[i, k],
                    g_params[i, k],
                    g_allowed[i, k],
                )
            if hyper[i] is not None:
                return hyper[i]
            if optimizer[i].any():
                p = int(np.argmax(optimizer[i]))
                return self._param_row(
                    i,
                    Phase.OPTIMIZER,
                    self.owners[p],
                    p,
                    self.npu.updates,
                    self.bench.updates,
                    u[i, p],
                    self.grad_diff[i, p],
                    previous_max(u)[i, p],
                    self.param_diff[i, p],
                    u_allowed[i, p],
                )
        return None

    def _data_first(self, params: Array) -> bool:
        """Whether the input side's first module differs at step 0 beyond float32's rounding, with its
        parameters equal, where the manifests say the batches differ or there is none to say: the
        data differ (judged before the band, which those differences would widen)."""
        return (
            len(self.iterations) > 0
            and self.iterations[0] == 0
            and len(self.modules) > 0
            and self.out_diff[0, 0] > FLOOR
            and params[0, 0] == 0
            and self.data_differs is not False
        )

    def _step(self, i: int) -> tuple[int, int]:
        return int(self.iterations[i]), int(self.npu.steps[self.ra[i]])

    def _forward(self, i: int, m: int, d: Array, inputs: Array, params: Array, allowed: Array) -> Divergence:
        iteration, step = self._step(i)
        a, b = self.npu.outputs, self.bench.outputs
        ra, rb, ca, cb = self.ra[i], self.rb[i], self._mi[m], self._mb[m]
        stat = max(
            OUTPUT_STATS,
            key=lambda s: np.nan_to_num(abs(a.values[s][ra, ca] - b.values[s][rb, cb]), nan=np.inf),
        )
        # the input side: no module ran before it, its parameters agree at entry, and the data differ
        # (the manifests' batches), or no manifest says they do not
        data = i == 0 and m == 0 and self._data_first(params)
        return Divergence(
            rank=self.rank,
            iteration=iteration,
            step=step,
            phase=Phase.DATA if data else Phase.FORWARD,
            module=self.modules[m],
            name=self.modules[m],
            statistic=stat,
            npu=float(a.values[stat][ra, ca]),
            bench=float(b.values[stat][rb, cb]),
            difference=float(d[i, m]),
            inputs=float(inputs[i, m]),
            previous=float(previous_max(d)[i, m]),
            parameters=float(params[i, m]),
            band=self.band.value,
            allowed=float(allowed[i, m]),
        )

    def _param_row(
        self, i: int, phase: Phase, module: str, p: int, a: Stats, b: Stats,
        diff: float, inputs: float, previous: float, params: float, allowed: float,
    ) -> Divergence:  # fmt: skip
        iteration, step = self._step(i)
        name = self.params[p]
        return Divergence(
            rank=self.rank,
            iteration=iteration,
            step=step,
            phase=phase,
            module=module,
            name=name,
            statistic="norm",
            npu=float(a.values["norm"][self.ra[i], a.index()[name]]),
            bench=float(b.values["norm"][self.rb[i], b.index()[name]]),
            difference=float(diff),
            inputs=float(inputs),
            previous=float(previous),
            parameters=float(params),
            band=self.band.value,
            allowed=float(allowed),
        )

    def _hyper_differences(self) -> list[Divergence | None]:
        """Per aligned iteration, the first param group whose lr differs (or the loss scale)."""
        found: list[Divergence | None] = [None] * len(self.iterations)
        groups = [g for g in self.npu.groups if g in self.bench.groups]
        ga, gb = list(self.npu.groups), list(self.bench.groups)
        rows = [(f"lr group {g}", self.npu.lr[:, ga.index(g)], self.bench.lr[:, gb.index(g)]) for g in groups]
        rows.append(("loss_scale", self.npu.loss_scale, self.bench.loss_scale))
        for name, a_all, b_all in rows:
            a, b = a_all[self.ra], b_all[self.rb]
            d = np.nan_to_num(relative(a, b, np.maximum(np.abs(a), np.abs(b))), nan=0.0)
            d = np.where(np.isnan(a) != np.isnan(b), np.inf, d)
            for i in np.flatnonzero(d > HYPER_TOLERANCE):
                if found[i] is None:
                    iteration, step = self._step(int(i))
                    found[i] = Divergence(
                        rank=self.rank,
                        iteration=iteration,
                        step=step,
                        phase=Phase.HYPERPARAMETER,
                        module="",
                        name=name,
                        statistic="value",
                        npu=float(a[i]),
                        bench=float(b[i]),
                        difference=float(d[i]),
                        inputs=0.0,
                        previous=0.0,
                        parameters=0.0,
                        band=HYPER_TOLERANCE,
                        allowed=HYPER_TOLERANCE,
                    )
        return found


def _columns_of(a: Stats, b: Stats, names: Sequence[str]) -> tuple[list[int], list[int]]:
    """The columns of ``names`` (recorded on both sides) on each side."""
    ia, ib = a.index(), b.index()
    return [ia[n] for n in names], [ib[n] for n in names]
