"""How an error is written as a number, in one place (the findings, the replay's figures and the words
all quote errors alike)."""

from __future__ import annotations

import math


def fmt_error(value: float) -> str:
    """A relative error in two significant digits."""
    if math.isinf(value):
        return "inf"
    if value == 0:
        return "0"
    return f"{value:.2g}"
