"""Two training runs' monitor streams compared (issue 30): the first divergent step and module, the
first NaN/Inf with finite inputs, the first divergent rank, as values; :func:`analyse` is the entry.
The words are :mod:`ptdbg_tui.compare.report.monitor_words`'s."""

from ptdbg_tui.compare.monitor.analysis import Follow, MonitorInputError, analyse
from ptdbg_tui.compare.monitor.findings import (
    Band,
    Curves,
    Divergence,
    FirstNonFinite,
    MonitorAnalysis,
    Phase,
    RankAnalysis,
)

__all__ = [
    "Band",
    "Curves",
    "Divergence",
    "FirstNonFinite",
    "Follow",
    "MonitorAnalysis",
    "MonitorInputError",
    "Phase",
    "RankAnalysis",
    "analyse",
]
