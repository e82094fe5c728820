"""How every file a report writes is written — the compare CSV, ``suspects_<ts>.csv``,
``advisor_<ts>.txt``, the app's export: mode 0640 (the original's for its CSV; the dump's own files
are 0640 too), whatever the umask, and whole or not at all (a temporary name, then a rename); and
how their figures are written."""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path

FILE_MODE = 0o640


def write_text(path: Path, text: str) -> Path:
    """``text`` into ``path`` (replacing it) with :data:`FILE_MODE`; a reader never sees half of it."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return path


def figure(value: float) -> str:
    """A measured figure in a report's CSV: six significant digits, ``inf`` as such."""
    return "inf" if math.isinf(value) else f"{value:.6g}"
