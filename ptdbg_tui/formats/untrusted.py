"""Dump text made safe to show, print, name a file, fill a CSV cell or sit in generated Python.

Every byte of a dump is untrusted (docs/security.md): a name, a module path or a stack line may hold
terminal escapes (an OSC 52 that sets the clipboard), bidi overrides that reorder what is read, a
newline that forges a report line, ``../`` that leaves the output folder, or quotes that end a
string in a generated script. Whatever a dump holds passes through here on its way out: control
characters escaped, lengths bounded, file names reduced to one plain component, module paths checked,
docstring text escaped, CSV formula cells neutralised. Nothing here changes a text a real run
produces (plain names, paths, source lines): the damage is only ever to hostile text.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence

from ptdbg_tui.formats.unreadable import Malformed, NotAModulePath

#: Characters never shown as they are: C0 controls (ESC starts every terminal escape) and DEL, C1
#: controls (a one-byte CSI or OSC), bidi embeddings, overrides and isolates, the Arabic letter mark,
#: line and paragraph separators, and lone surrogates (undecodable bytes). Tab and newline are kept
#: where a text may span lines (:func:`printable`).
_CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
_CONTROL_OR_LINE = re.compile(_CONTROL.pattern[:-1] + "\t\n]")
#: What an entry name may not hold: any of those, tab and newline too, but surrogates (a name of
#: undecodable bytes is kept byte-exact for its file and shown with U+FFFD, records.undecodable).
_NOT_IN_NAME = re.compile(_CONTROL_OR_LINE.pattern.replace("\ud800-\udfff", ""))
#: A CSV cell a spreadsheet takes for a formula (or, with a tab or CR, pastes into the next cell).
_FORMULA = re.compile("[=+\\-@\t\r]")
#: What a formula starts with, and the ASCII control characters :func:`csv_cell` escapes (the C0
#: controls but tab and newline, and DEL): a column's quick check.
_FORMULA_FIRST = frozenset("=+-@\t\r")
_ASCII_CONTROL = bytes([*range(0x09), *range(0x0B, 0x20), 0x7F])
#: One part of a module path (``layers``, ``0``, ``q_proj``): letters, digits and ``_ - + :``.
_MODULE_PART = re.compile(r"[\w+:-]+")
#: What a file name component made of dump text keeps (the rest becomes ``_``).
_FILE_CHARS = re.compile(r"[^A-Za-z0-9_.+-]")
#: A file name component's length at most (file systems allow 255 bytes: room for a suffix such as
#: ``.msprobe.json``).
NAME_LIMIT = 200
#: A text shown on one line at most this long (a longer one is cut, with ``…``).
TEXT_LIMIT = 2000


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, lines: bool = True, limit: int | None = None) -> str:
    """``text`` as it can be printed or shown: every control character as its escape (``\\x1b``,
    ``\\u202e``); ``lines``: newlines and tabs kept, else escaped too (a name cannot start a line of
    its own); cut to ``limit`` characters with ``…``."""
    text = (_CONTROL if lines else _CONTROL_OR_LINE).sub(_escape, text)
    return bounded(text, limit) if limit is not None else text


def one_line(text: str, limit: int = TEXT_LIMIT) -> str:
    """A dump text for one line of a report: :func:`printable` with newlines escaped, bounded."""
    return printable(text, lines=False, limit=limit)


def replaced(text: str) -> str:
    """``text`` with each control character (tab and newline kept) as U+FFFD: one cell wide, for a
    screen that has already laid the text out."""
    return _CONTROL.sub("\ufffd", text)


def has_control(text: str) -> bool:
    return _CONTROL.search(text) is not None


def is_one_line(text: str) -> bool:
    """Whether ``text`` is already as :func:`one_line` shows it (below its length bound)."""
    return _CONTROL_OR_LINE.search(text) is None


def bounded(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def name_problem(name: str) -> Malformed | None:
    """Why ``name`` (an entry's, a call's) cannot be taken as a name, or None: it holds a control
    character, which no tool writes (a terminal escape, a line end that would forge a report line)."""
    if _NOT_IN_NAME.search(name) is None:
        return None
    return Malformed.CONTROL_IN_NAME


def module_path_problem(path: str) -> NotAModulePath | None:
    """Why ``path`` is not a module path as ``nn.Module.named_modules`` spells one (``layers.0.attn``:
    parts of letters, digits and ``_ - + :`` joined by dots, so never absolute, never ``..``, no
    separator), or None."""
    if not path or len(path) > TEXT_LIMIT:
        return NotAModulePath(length=len(path))
    if not all(_MODULE_PART.fullmatch(part) for part in path.split(".")):
        return NotAModulePath(length=len(path), path=one_line(path, 120))
    return None


def file_component(text: str, limit: int = NAME_LIMIT) -> str:
    """A file name made of dump text: one component only (no separator, never ``.`` or ``..``, no
    leading dot), of ``A-Z a-z 0-9 _ . + -`` (the rest as ``_``), at most ``limit`` characters (a
    longer one is cut and ends in a checksum of the whole, so two long names stay apart)."""
    name = _FILE_CHARS.sub("_", text).lstrip(".") or "_"
    if len(name) > limit:
        tail = f"-{zlib.crc32(text.encode('utf-8', 'surrogatepass')):08x}"
        name = name[: limit - len(tail)] + tail
    return name


def docstring_text(text: str, lines: bool = False) -> str:
    """Dump text for a generated script's docstring: :func:`printable` (``lines``: newlines kept), then
    every backslash and double quote escaped, so that no quote from the dump can end the docstring."""
    return printable(text, lines).replace("\\", "\\\\").replace('"', '\\"')


def _number(text: str) -> bool:
    try:
        float(text.removesuffix("%"))  # msprobe's relative errors: ``12.5%``
    except ValueError:
        return False
    return True


def csv_cell(value: object) -> object:
    """A CSV cell that no spreadsheet runs: a text starting with ``= + - @``, a tab or CR gets a
    leading ``'`` unless it is a number (``-0.5``, ``-inf`` stay numbers); control characters (a line
    end kept) escaped. Anything but a text is returned as it is."""
    if type(value) is not str:
        return value
    text = printable(value.replace("\r\n", "\n"), lines=True) if has_control(value) else value
    if value[:1] and _FORMULA.match(value) and not _number(value):
        return "'" + text
    return text


def csv_column(column: Sequence[object]) -> Sequence[object]:
    """:func:`csv_cell` of each cell, at the cost of a few C-speed passes over the column's texts when
    (as in every real dump) none needs it."""
    kinds = set(map(type, column))
    if str not in kinds:
        return column
    texts = column if kinds == {str} else [v for v in column if type(v) is str]
    joined = "".join(texts)  # type: ignore[arg-type]
    if joined.isascii():  # the usual column: a byte-wise pass, not the regex's
        raw = joined.encode("ascii")
        control = len(raw.translate(None, _ASCII_CONTROL)) != len(raw)
    else:
        control = _CONTROL.search(joined) is not None
    if not control and not {t[:1] for t in texts} & _FORMULA_FIRST:  # type: ignore[index]
        return column
    changed = {t: c for t in set(texts) if (c := csv_cell(t)) != t}
    return [changed.get(v, v) if type(v) is str else v for v in column] if changed else column
