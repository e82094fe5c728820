"""The next dump's target from a monitor analysis: what ``ptdbg-tui monitor --narrow`` and the app's
Steps screen (``t``) write, the first divergence's module at its step and rank, or why there is none."""

from __future__ import annotations

from ptdbg_tui.compare.diagnosis.narrowing import SCRIPT, MonitorFirst
from ptdbg_tui.compare.monitor.findings import MonitorAnalysis
from ptdbg_tui.compare.report.monitor_words import narrow_refusal
from ptdbg_tui.engine.narrow import Narrowing, NothingToNarrow, monitor_narrowing


def first_narrowing(analysis: MonitorAnalysis, script: str | None = None) -> Narrowing:
    """The narrowing to the analysis's first divergence (``script``: the one the commands name, else
    the NPU run's, from its manifest, else ``SCRIPT``). Raises :class:`NothingToNarrow` where the runs
    agree or the divergence lies in no module, :class:`~ptdbg_tui.engine.narrow.NarrowError` where the
    module is no module path."""
    first = analysis.first
    refusal = narrow_refusal(first)
    if first is None or refusal is not None:
        raise NothingToNarrow(refusal)
    return monitor_narrowing(
        first.module,
        first.step,
        first.rank,
        MonitorFirst(first.phase, first.step, first.rank),
        script or analysis.script or SCRIPT,
        len(analysis.ranks) + len(analysis.only_npu_ranks),
    )
