"""The words of why a line or an entry of a dump file cannot be read (:mod:`ptdbg_tui.formats.unreadable`):
the CLI's "unreadable line(s) … first: …", the live notices' "malformed line(s) skipped (…)", the app's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ptdbg_tui.formats.unreadable import (
    BadStats,
    CutShort,
    DumpStep,
    ElementCount,
    FileUnreadable,
    InEntry,
    InSidecar,
    LineTooLong,
    Malformed,
    NotACallLine,
    NotAModulePath,
    NotAnObject,
    NotJson,
    NotReadableJson,
    Raised,
    ShapeTooLarge,
    Unreadable,
)

_MALFORMED = {
    Malformed.NOT_ARRAY: "a pkl line must be a JSON array",
    Malformed.BAD_FRAME: "stack frame is not [file, line, function, source]",
    Malformed.NOT_STRINGS: "name and dtype must be strings",
    Malformed.UNSAFE_NAME: (
        "the name is empty or holds '/', '\\' or NUL, so its tensor file would lie outside the dump folder"
    ),
    Malformed.SURROGATE_NAME: "the name holds a lone UTF-16 surrogate, which no file name can hold",
    Malformed.CONTROL_IN_NAME: "the name holds a control character (a terminal escape or a line end)",
    Malformed.SHAPE_TYPES: 'shape must be a list or "[]" and stats a list',
    Malformed.SHAPE_NOT_INTS: "shape must hold non-negative integers",
    Malformed.DEEP_JSON: "JSON nested too deeply to read",
    Malformed.NOT_MODULE_LINE: "not a module line: expected [call, [[module, class], ...]]",
    Malformed.DEEP_CALL_LINE: "not a call line: nested too deeply to read",
}


def _stats(r: BadStats) -> str:
    what = f"holds {r.value}" if r.value is not None else f"has {r.count} values"
    return f'stats {what}; expected up to 4 numbers, "Nan" or []'


def _in_entry(r: InEntry) -> str:
    more = f" (+{r.more} more values)" if r.more else ""
    return f"entry {r.entry}: {unreadable_text(r.why)}{more}"


#: The words of each kind of parse error with values.
_SAYS: dict[type, Callable[[Any], str]] = {
    ElementCount: lambda r: f"expected 6 elements (tensor line) or 2 (stack line), got {r.count}",
    NotAnObject: lambda r: f"expected an object, got {r.got}",
    DumpStep: lambda r: f"dump_step must be an integer, got {r.got}",
    ShapeTooLarge: lambda r: f"shape {r.shape} is too large to be a tensor's",
    BadStats: _stats,
    NotJson: lambda r: f"not valid JSON ({r.message} at column {r.column})",
    NotReadableJson: lambda r: f"not readable JSON ({r.error})",
    NotACallLine: lambda r: f"not a call line: {r.error}",
    LineTooLong: lambda r: f"line longer than {r.limit} bytes, skipped",
    Raised: lambda r: r.error,
    FileUnreadable: lambda r: f"{r.file} cannot be read: {r.error}",
    CutShort: lambda r: f"{r.error}: cut short; its {r.entries} complete entries are read",
    InEntry: _in_entry,
    InSidecar: lambda r: f"{r.file} line {r.line}: {unreadable_text(r.why)}",
}


def module_path_text(why: NotAModulePath) -> str:
    """Why a dump's text is not taken as a module path, in words."""
    if why.path is not None:
        return f"{why.path!r} is not dotted names (letters, digits, _ - + :)"
    return f"it is {why.length:,} characters long" if why.length else "it is empty"


def unreadable_text(why: Unreadable) -> str:
    """Why a line or an entry was skipped, in words."""
    if isinstance(why, Malformed):
        return _MALFORMED[why]
    return _SAYS[type(why)](why)
