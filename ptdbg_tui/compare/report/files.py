"""How every file a report writes is written — the compare CSV, ``suspects_<ts>.csv``,
``advisor_<ts>.txt``, the app's export: mode 0640 (the original's for its CSV; the dump's own files
are 0640 too), whatever the umask, and whole or not at all (a temporary name, then a rename); and
how their figures are written."""

from __future__ import annotations

import math

from ptdbg_tui.formats.file_writes import FILE_MODE, write_text

__all__ = ["FILE_MODE", "figure", "write_text"]


def figure(value: float) -> str:
    """A measured figure in a report's CSV: six significant digits, ``inf`` as such."""
    return "inf" if math.isinf(value) else f"{value:.6g}"
