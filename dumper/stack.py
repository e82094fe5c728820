"""Call-site stacks for ``<call>_stack_info`` lines, cheap enough to take on every API call.

Frames are walked with ``sys._getframe`` (no source reading per call, unlike ``inspect.stack``)
and frames of the dumper, of torch's own Python layers and of Python's frozen modules are dropped,
so the user's call site comes first. Source lines are read once per (file, line) through ``linecache``.
"""

from __future__ import annotations

import linecache
import os
import sys
from functools import cache
from types import CodeType, FrameType

import torch

#: The dumper's and torch's own frames, and Python's frozen bootstrap (runpy under ``ptdbg-dump run``).
_SKIPPED_DIRS = (*(os.path.dirname(p) + os.sep for p in (__file__, torch.__file__)), "<frozen ")
_frame_cache: dict[tuple[str, int, str], list[str | None]] = {}


@cache
def _skipped(filename: str) -> bool:
    return filename.startswith(_SKIPPED_DIRS)


def _frame(code: CodeType, lineno: int) -> list[str | None]:
    key = (code.co_filename, lineno, code.co_name)  # not the code object: equal code compares equal
    entry = _frame_cache.get(key)
    if entry is None:
        source = linecache.getline(code.co_filename, lineno).strip() or None
        entry = [code.co_filename, str(lineno), code.co_name, source]
        _frame_cache[key] = entry
    return entry


def call_site_frames(limit: int = 64) -> list[list[str | None]]:
    """The caller's stack, innermost first, without dumper/torch frames: ``[file, line, func, src]``."""
    frames: list[list[str | None]] = []
    f: FrameType | None = sys._getframe(1)
    while f is not None and len(frames) < limit:
        code = f.f_code
        if not _skipped(code.co_filename):
            frames.append(_frame(code, f.f_lineno))
        f = f.f_back
    return frames
