"""The words of the two-run monitor's report (``ptdbg-tui monitor``): the manifests' differences as
the compare says them, each rank's curves, the rounding band, the first divergent step and module
with its evidence, the first NaN/Inf, the first divergent rank. Names from the files (module and
parameter paths) are untrusted text: each passes through ``one_line``."""

from __future__ import annotations

import numpy as np

from ptdbg_tui.compare.monitor.findings import (
    Band,
    Divergence,
    FirstNonFinite,
    MonitorAnalysis,
    Phase,
    RankAnalysis,
)
from ptdbg_tui.compare.monitor.rule import GROWTH, HISTORY
from ptdbg_tui.compare.report.words import RUNS_DIFFER_FIRST, differences_notes, differences_text
from ptdbg_tui.formats.untrusted import one_line

#: The interface line's start (``First divergent step: S, module M: …``).
FIRST_STEP = "First divergent step"
#: The steps of the loss curve the summary shows, as fractions of the aligned steps.
LOSS_AT = (0.0, 0.25, 0.5, 0.75, 1.0)
_SIDE = {"npu": "NPU", "bench": "bench"}


def _g(x: float) -> str:
    return f"{x:.6g}"


def _rel(x: float) -> str:
    return "infinite (one side non-finite or absent)" if np.isinf(x) else f"{x:.2g}"


def band_text(b: Band) -> str:
    """``rounding band 3.8e-06 (float32's floor; the first 5 steps differ by at most 0)``."""
    if b.capped:
        why = f"bf16's rounding at most; the first {b.early_steps} steps differ by {b.early:.2g}, beyond it"
    elif b.value > b.floor:
        why = f"{b.value / max(b.early, 1e-300):.0f}x the first {b.early_steps} steps' largest, {b.early:.2g}"
    else:
        why = f"float32's floor; the first {b.early_steps} steps differ by at most {b.early:.2g}"
    return f"rounding band {b.value:.2g} ({why})"


def where_text(d: Divergence) -> str:
    """``module blocks.2.mlp.gelu``, ``optimizer param group 0``, ``loss scale``."""
    if d.phase is Phase.HYPERPARAMETER:
        return (
            "loss scale"
            if d.name == "loss_scale"
            else f"optimizer param {one_line(d.name.removeprefix('lr '), 80)}"
        )
    return f"module {one_line(d.module, 200) or '(the model)'}"


def evidence_text(d: Divergence) -> str:
    """Why the row is the first divergence, with its numbers."""
    name = one_line(d.name, 200)
    values = f"{_g(d.npu)} against {_g(d.bench)}, relative difference {_rel(d.difference)}"
    allowed = (
        f"where {GROWTH:g}x its inputs' difference ({d.inputs:.2g}), its parameters' at entry "
        f"({d.parameters:.2g}) and its own over the {HISTORY} steps before ({d.previous:.2g}), plus the "
        f"rounding band ({d.band:.2g}), allow {d.allowed:.2g}"
    )
    if d.phase is Phase.DATA:
        return (
            f"the data differ: {name}, the first module the input reaches, gives {d.statistic} {values} "
            f"with its parameters equal ({d.parameters:.2g}) (another data order, or other batches)"
        )
    if d.phase is Phase.FORWARD:
        return f"forward: its output's {d.statistic} {values}, {allowed}"
    if d.phase is Phase.BACKWARD:
        return (
            f"backward: the forward agrees; {name}'s gradient is the first in backward order to differ, "
            f"norm {values}, {allowed} (the fault lies between it and the gradients before it)"
        )
    if d.phase is Phase.HYPERPARAMETER:
        what = "loss scale" if d.name == "loss_scale" else "lr"
        return f"hyperparameter: {what} {_g(d.npu)} against {_g(d.bench)}"
    return f"optimizer: the gradient and lr agree; {name}'s update norm {values}, {allowed}"


def divergence_line(d: Divergence | None, aligned: int, band: Band) -> str:
    """The report's line: ``First divergent step: S, module M: evidence`` or the all-clear."""
    if d is None:
        return (
            f"{FIRST_STEP}: none: over {aligned} steps every difference is explained by its inputs, its "
            f"own growth and the {band_text(band)}"
        )
    return f"{FIRST_STEP}: {d.step}, {where_text(d)}: {evidence_text(d)}"


def nonfinite_text(f: FirstNonFinite) -> str:
    """``NaN/Inf: NPU run, step 120: module blocks.1.mlp.c_fc's output holds 4096 NaN/Inf with its
    inputs and parameters finite``."""
    name = one_line(f.name, 200)
    what = {
        "output": f"module {name}'s output holds {f.count} NaN/Inf with its inputs and parameters finite",
        "loss": "the loss is not finite while every module's output is",
        "grad": f"{name}'s gradient holds {f.count} NaN/Inf first in backward order, the forward finite",
        "update": f"{name}'s update holds {f.count} NaN/Inf, its gradient finite",
    }[f.kind]
    return f"NaN/Inf: {_SIDE[f.side]} run, step {f.step}: {what}"


def curves_text(r: RankAnalysis) -> str:
    """The loss at a few steps on both sides and its largest relative difference."""
    c = r.curves
    n = len(c.iterations)
    picks = sorted({round(f * (n - 1)) for f in LOSS_AT}) if n else []
    shown = "; ".join(f"step {c.steps[i]} {_g(c.loss_npu[i])} against {_g(c.loss_bench[i])}" for i in picks)
    scale = np.maximum(np.abs(c.loss_npu), np.abs(c.loss_bench))
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(c.loss_npu == c.loss_bench, 0.0, np.abs(c.loss_npu - c.loss_bench) / scale)
    rel = np.where(np.isnan(rel), np.inf, rel)
    worst = (
        f"; largest relative difference {_rel(float(rel.max()))} at step {c.steps[int(rel.argmax())]}"
        if n
        else ""
    )
    return f"loss: {shown}{worst}"


def rank_lines(r: RankAnalysis) -> list[str]:
    """One rank's summary: steps read, curves, band, its divergence and NaN origins, what one side lacks."""
    lines = [
        f"rank {r.rank}: NPU {r.npu_iterations} steps, bench {r.bench_iterations}, {r.aligned} aligned",
        f"  {curves_text(r)}",
        f"  {band_text(r.band)}",
    ]
    if r.skipped != (0, 0):
        lines.append(f"  steps a GradScaler skipped: NPU {r.skipped[0]}, bench {r.skipped[1]}")
    lines += [f"  {nonfinite_text(f)}" for f in r.nonfinite]
    for side, names in (("NPU", r.only_npu), ("bench", r.only_bench)):
        if names:
            shown = ", ".join(one_line(n, 80) for n in names[:5]) + (
                f" +{len(names) - 5} more" if len(names) > 5 else ""
            )
            lines.append(f"  note: only the {side} run records {shown}")
    for side, (cut, ended, path) in zip(
        ("NPU", "bench"), zip(r.cut, r.ended, (r.npu_file, r.bench_file), strict=True), strict=True
    ):
        if cut:
            lines.append(
                f"  note: the {side} stream {one_line(path.name, 120)} ends in {cut} bytes that are not a "
                "whole step (a step being written, or a run stopped)"
            )
        elif not ended:
            lines.append(
                f"  note: the {side} stream {one_line(path.name, 120)} is not closed: its run may still "
                "be training"
            )
    return lines


def monitor_lines(a: MonitorAnalysis) -> list[str]:
    """The report of ``ptdbg-tui monitor``: the manifests first, then each rank, then the verdict."""
    lines = [f"ptdbg-tui monitor: {one_line(str(a.npu), 300)} against {one_line(str(a.bench), 300)}"]
    if manifest := differences_text(a.manifest):
        lines.append(f"{RUNS_DIFFER_FIRST}: {manifest}")
    lines += [f"note: {n}" for n in differences_notes(a.manifest, a.manifest_unread)]
    for side, ranks in (("NPU", a.only_npu_ranks), ("bench", a.only_bench_ranks)):
        if ranks:
            lines.append(f"note: ranks monitored on the {side} side only: {', '.join(map(str, ranks))}")
    for r in a.ranks:
        lines += rank_lines(r)
        if len(a.ranks) > 1:
            lines.append(f"  rank {r.rank}: {divergence_line(r.divergence, r.aligned, r.band)}")
    first = a.first
    if first is None:
        r = a.ranks[0]
        lines.append(divergence_line(None, min(x.aligned for x in a.ranks), r.band))
    else:
        rank = next(r for r in a.ranks if r.rank == first.rank)
        lines.append(divergence_line(first, rank.aligned, rank.band))
    if a.first_rank is not None:
        lines.append(f"first divergent rank: {a.first_rank}")
    return lines


def narrow_refusal(d: Divergence | None) -> str | None:
    """Why a divergence has no module to dump (none found, the hyperparameters, the optimizer), or
    None."""
    if d is None:
        return "the runs agree: no divergence"
    if d.phase is Phase.HYPERPARAMETER:
        return "the runs' hyperparameters differ: no kernel to dump; make the runs' schedules alike first"
    if d.phase is Phase.OPTIMIZER:
        return (
            f"the optimizer's update differs at step {d.step}, outside any module: dump the whole step "
            f"on both sides (ptdbg-dump run SCRIPT --dump-path DIR --step {d.step})"
        )
    return None
