"""A diagnosis' notes as values (:data:`Note`): a check that could not be done and why, what the scripts
chose; :func:`ptdbg_tui.compare.report.words.note_text` says each.

:class:`SaidNote` holds the notes whose words are still made where they are found (what other steps
say of this one, an update that amplified rounding noise); they move here one by one.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Sidecar(str, Enum):
    """A file beside a dump that a check reads."""

    CALLS = "call sidecar"  # the calls' keyword arguments
    MODULES = "module sidecar"  # the culprit's module
    STRUCTURE = "module structure"  # the runs' models


@dataclass(frozen=True, slots=True, kw_only=True)
class Unread:
    """A sidecar that is there but could not be read (``reason``): its check was not done."""

    sidecar: Sidecar
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Autocast:
    """The NPU run makes ``calls`` calls under another autocast than the bench run (a dtype, or None
    for none), the first of them ``first``: a precision the scripts chose."""

    calls: int
    npu: str | None
    bench: str | None
    first: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SaidNote:
    """A note still found in words (see the module's docstring)."""

    text: str


Note = Unread | Autocast | SaidNote
