"""How a report's CSVs write a measured figure (suspects, replays)."""

from __future__ import annotations

import math


def figure(value: float) -> str:
    """A measured figure in a report's CSV: six significant digits, ``inf`` as such."""
    return "inf" if math.isinf(value) else f"{value:.6g}"
