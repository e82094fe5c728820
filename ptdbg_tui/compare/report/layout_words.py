"""The words of what a dump path's scan met (:mod:`ptdbg_tui.formats.layout`): the folders and files
that could not be read, and a path that holds no dump."""

from __future__ import annotations

import os
from collections.abc import Sequence

from ptdbg_tui.formats.files import file_kind
from ptdbg_tui.formats.layout import (
    DUMP_TAG,
    CannotScan,
    DumpLayoutError,
    LayoutProblem,
    NoDumpFound,
    NotADumpFile,
    RankWithoutDump,
    SeveralDumpFiles,
)
from ptdbg_tui.formats.msprobe import DUMP_JSON

#: What a dump path is expected to hold, for messages.
EXPECTED = f"{DUMP_TAG}_v*/[stepN/]rankR/*dump.pkl, or msprobe's [stepN/]rankR|proc<pid>/{DUMP_JSON},"


def layout_problem_text(p: LayoutProblem) -> str:
    """What could not be read while a path's dumps were looked for."""
    if isinstance(p, SeveralDumpFiles):
        return f"{p.folder}: holds several dump files; {p.read} is read, not {', '.join(p.others)}"
    if isinstance(p, NotADumpFile):
        return f"{p.path}: is {file_kind(p.mode)}, not a dump file"
    if isinstance(p, RankWithoutDump):
        return f"{p.folder}: a rank folder without a dump file (*dump.pkl or {DUMP_JSON})"
    if isinstance(p, CannotScan):
        return p.error
    return p.message


def no_dump_text(root: str | os.PathLike[str], problems: Sequence[LayoutProblem]) -> str:
    """A path that holds no dump: what was expected below it, and the first thing that could not be
    read there."""
    why = f"; {len(problems)} unreadable: {layout_problem_text(problems[0])}" if problems else ""
    return f"{root}: no dump found (expected {EXPECTED} below it){why}"


def layout_error_text(e: DumpLayoutError) -> str:
    """Why a path is no dump: :class:`NoDumpFound` in words, another's message."""
    return no_dump_text(e.root, e.problems) if isinstance(e, NoDumpFound) else str(e)
