"""Why a line or an entry of a dump file cannot be read (:attr:`~ptdbg_tui.formats.records.BadLine.reason`),
as values: the parse error met and the names and numbers it is about. Formats writes no prose (issue 31):
:func:`ptdbg_tui.compare.report.line_words.unreadable_text` says them."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, auto


class Malformed(Enum):
    """A parse error that holds no value of its own."""

    NOT_ARRAY = auto()  # a pkl line that is not a JSON array
    BAD_FRAME = auto()  # a stack frame that is not [file, line, function, source]
    NOT_STRINGS = auto()  # a tensor line's name or dtype not a string
    UNSAFE_NAME = auto()  # a name empty or holding a separator or NUL
    SURROGATE_NAME = auto()  # a name holding a lone UTF-16 surrogate
    CONTROL_IN_NAME = auto()  # a name holding a control character
    SHAPE_TYPES = auto()  # shape not a list or "[]", or stats not a list
    SHAPE_NOT_INTS = auto()  # a shape of other than non-negative integers
    DEEP_JSON = auto()  # JSON nested too deeply to read
    NOT_MODULE_LINE = auto()  # a module sidecar line of another form
    DEEP_CALL_LINE = auto()  # a call sidecar line nested too deeply


@dataclass(frozen=True, slots=True, kw_only=True)
class ElementCount:
    """A pkl line of neither 6 elements (a tensor's) nor 2 (a stack's)."""

    count: int


@dataclass(frozen=True, slots=True, kw_only=True)
class NotAnObject:
    """A dump.json entry that is no JSON object (``got``: the type it is)."""

    got: str


@dataclass(frozen=True, slots=True, kw_only=True)
class DumpStep:
    """A dump_step that is no integer (``got``: it, shortened)."""

    got: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ShapeTooLarge:
    """A shape no tensor has (``shape``: it, shortened)."""

    shape: str


@dataclass(frozen=True, slots=True, kw_only=True)
class BadStats:
    """Statistics that are not up to 4 numbers: ``value`` the first unreadable one (shortened), or
    ``None`` where they are ``count``, too many."""

    value: str | None
    count: int


@dataclass(frozen=True, slots=True, kw_only=True)
class NotJson:
    """A text that is not JSON: json's ``message`` (without a trailing 'at') and the ``column``."""

    message: str
    column: int


@dataclass(frozen=True, slots=True, kw_only=True)
class NotReadableJson:
    """JSON that Python cannot convert (``error``: the ValueError's message)."""

    error: str


@dataclass(frozen=True, slots=True, kw_only=True)
class NotACallLine:
    """A call sidecar line that is no call (``error``: what the call decoder refused)."""

    error: str


@dataclass(frozen=True, slots=True, kw_only=True)
class LineTooLong:
    """A line longer than ``limit`` bytes, skipped."""

    limit: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Raised:
    """An error whose exception says it (``error``: its message, as it is)."""

    error: str


@dataclass(frozen=True, slots=True, kw_only=True)
class FileUnreadable:
    """A file of a dump folder that cannot be read (``error``: the OS's reason)."""

    file: str
    error: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CutShort:
    """A dump.json cut short (``error``: why, the exception's message), of which ``entries`` are read."""

    error: str
    entries: int


@dataclass(frozen=True, slots=True, kw_only=True)
class InEntry:
    """Why an entry of dump.json (``entry``: its name) cannot be read, and ``more`` values of it not."""

    entry: str
    why: Unreadable
    more: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class InSidecar:
    """Why a line of a sidecar (``file``: its name, ``line``: its number there) cannot be read."""

    file: str
    line: int
    why: Unreadable


@dataclass(frozen=True, slots=True, kw_only=True)
class NotAModulePath:
    """Why a dump's text is no module path: empty or too long (``length``), or ``path`` (it, on one line,
    shortened) is not dotted names."""

    length: int
    path: str | None = None


Unreadable = (
    Malformed
    | ElementCount
    | NotAnObject
    | DumpStep
    | ShapeTooLarge
    | BadStats
    | NotJson
    | NotReadableJson
    | NotACallLine
    | LineTooLong
    | Raised
    | FileUnreadable
    | CutShort
    | InEntry
    | InSidecar
)
