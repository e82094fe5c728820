"""How every file the project writes is written — dumps, reports, configs, repros: mode 0640 (the
original's for its CSV and dump files; folders 0750), whatever the umask, and a whole file or none
(a temporary name, then a rename)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

DIR_MODE = 0o750
FILE_MODE = 0o640


def write_whole(path: Path, write: Callable[[Path], object]) -> Path:
    """``write(tmp)`` into a temporary file beside ``path``, given :data:`FILE_MODE`, then renamed to
    ``path`` (replacing it): a reader never sees half of it."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return path


def write_text(path: Path, text: str) -> Path:
    """``text`` into ``path``, whole, with :data:`FILE_MODE`."""
    return write_whole(path, lambda tmp: tmp.write_text(text, encoding="utf-8", newline=""))
