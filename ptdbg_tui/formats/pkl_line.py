"""The one definition of a ptdbg pkl line (docs/formats.md#pkl-lines): decoding for readers,
encoding for writers.

A pkl is UTF-8 text, one JSON array per line, with the non-standard tokens ``NaN`` and
``Infinity``. Tensor lines have 6 elements, stack lines 2.

A tensor line's third element is always ``[]`` in the original's dumps, and none of its readers
(compare, parse) looks at it; the project's dumper puts a tensor's checksum there in its md5 mode,
``["3f9a0c1e"]`` (a CRC-32 of the tensor's bytes, 8 lowercase hex digits, as msprobe's ``md5``),
where an older ptdbg kept its own checksum list.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any, Literal, TypeVar, overload

from ptdbg_tui.formats.files import holds_lone_surrogate, safe_name
from ptdbg_tui.formats.naming import parse_name
from ptdbg_tui.formats.records import (
    MAX_DIMS,
    MAX_NUMEL,
    BadLine,
    Frame,
    Record,
    StackRecord,
    TensorRecord,
    short,
    shown,
    valid_stat,
)
from ptdbg_tui.formats.unreadable import (
    BadStats,
    DumpStep,
    ElementCount,
    Malformed,
    NotJson,
    NotReadableJson,
    ShapeTooLarge,
    Unreadable,
)
from ptdbg_tui.formats.untrusted import name_problem, one_line

T = TypeVar("T")

_orjson_loads: Callable[[str], Any] | None
try:  # an optional speed-up of the usual lines (decode_usual)
    from orjson import loads as _orjson_loads
except ImportError:  # pragma: no cover - orjson is a dependency; json reads every line alike
    _orjson_loads = None

#: A checksum in a tensor line's third element: a CRC-32 as 8 hex digits.
_CRC_RE = re.compile(r"[0-9a-f]{8}")


#: A Frame from a list of its four fields (``Frame._make`` without its Python-level call and check).
_frame = tuple.__new__

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]|[\ud800-\udfff]")


def _dump_step(v: Any) -> int | None:
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    if isinstance(v, float) and v.is_integer():  # finite and whole (1e400 is inf: refused)
        return int(v)
    return None


def decode_value(value: Any, line: int = 0) -> Record:
    """Turn one decoded JSON line into a record (or a :class:`BadLine` saying why not); never raises."""
    if not isinstance(value, list):
        return BadLine(line, Malformed.NOT_ARRAY, short(value))
    if len(value) == 2 and isinstance(value[0], str) and isinstance(value[1], list):
        return _stack_record(value[0], value[1], line)
    if len(value) != 6:
        return BadLine(line, ElementCount(count=len(value)), short(value))
    name, dump_step, checksums, dtype, shape, stats = value
    problem = _name_problem(name, dtype, value) or _value_problem(name, shape, stats, value)
    if problem is not None:
        return BadLine(line, *problem)
    step = dump_step if type(dump_step) is int else _dump_step(dump_step)
    if step is None:
        return BadLine(line, DumpStep(got=short(dump_step, 40)), short(value))
    md5 = (
        checksums[0]
        if isinstance(checksums, list)
        and len(checksums) == 1
        and isinstance(checksums[0], str)
        and _CRC_RE.fullmatch(checksums[0])
        else None
    )
    return TensorRecord(name, step, dtype, shape, stats, parse_name(name), line, md5=md5)


def _stack_record(name: str, raw: list[Any], line: int) -> StackRecord | BadLine:
    written = _written_frames(raw)
    if written is not None:
        return StackRecord(name, written, line)
    frames = []
    for f in raw:
        if not isinstance(f, list) or len(f) < 3 or any(isinstance(x, (list, dict)) for x in f[:4]):
            return BadLine(line, Malformed.BAD_FRAME, short(f))
        src = f[3] if len(f) > 3 else None
        frames.append(Frame(str(f[0]), str(f[1]), str(f[2]), None if src is None else str(src)))
    return StackRecord(name, frames, line)


def _written_frames(raw: list[Any]) -> list[Frame] | None:
    """Frames as the tools write them (four strings, the source possibly null); ``None`` for others."""
    written = []
    for f in raw:
        if type(f) is not list or len(f) != 4:
            return None
        path, number, function, source = f
        if type(path) is not str or type(number) is not str or type(function) is not str:
            return None
        if source is not None and type(source) is not str:
            return None
        written.append(_frame(Frame, f))
    return written


def _name_problem(name: Any, dtype: Any, value: list[Any]) -> tuple[Unreadable, str] | None:
    """Why a tensor line's name or dtype cannot be taken, and what to show of it; ``None`` if fine."""
    if not isinstance(name, str) or not isinstance(dtype, str):
        return Malformed.NOT_STRINGS, short(value)
    if not safe_name(name):
        return Malformed.UNSAFE_NAME, short(name)
    if holds_lone_surrogate(name):
        return Malformed.SURROGATE_NAME, short(shown(name))
    if (problem := name_problem(name)) is not None:
        return problem, short(one_line(name))
    return None


def _value_problem(name: str, shape: Any, stats: Any, value: list[Any]) -> tuple[Unreadable, str] | None:
    """Why a tensor line's shape or statistics cannot be taken, and what to show; ``None`` if fine."""
    if not isinstance(shape, (list, str)) or not isinstance(stats, list):
        return Malformed.SHAPE_TYPES, short(value)
    if isinstance(shape, list):
        ints = not shape or (set(map(type, shape)) == {int} and min(shape) >= 0)  # not bool, not float
        if not ints:
            return Malformed.SHAPE_NOT_INTS, short(value)
        if len(shape) > MAX_DIMS or math.prod(shape) > MAX_NUMEL:
            return ShapeTooLarge(shape=short(shape, 60)), short(name)
    floats = set(map(type, stats)) <= {float}  # nearly every line: nothing to look at one by one
    bad_stat = (
        None if floats else next((v for v in stats if type(v) is not float and not valid_stat(v)), None)
    )
    if bad_stat is not None or len(stats) > 4:
        shown_stat = None if bad_stat is None else short(bad_stat, 40)
        return BadStats(value=shown_stat, count=len(stats)), short(value)
    return None


def not_valid_json(e: json.JSONDecodeError) -> NotJson:
    """Why a text is not JSON, at which column; json's own message may end in 'at' ('Unterminated
    string starting at'), which read 'starting at at column 2'."""
    return NotJson(message=e.msg.removesuffix(" at"), column=e.colno)


@overload
def decode_line(text: str, line: int = 0) -> Record | None: ...
@overload
def decode_line(
    text: str, line: int = 0, *, decode: Callable[[Any, int], T | BadLine]
) -> T | BadLine | None: ...
def decode_line(
    text: str, line: int = 0, decode: Callable[[Any, int], Any] = decode_value
) -> Record | Any | None:
    """Decode one text line (``decode``: what makes its JSON value a record, a pkl's by default; the
    sidecars give theirs); ``None`` for a blank line, a :class:`BadLine` saying why it is not JSON."""
    text = text.strip()
    if not text:
        return None
    try:
        value = json.loads(text)
    except RecursionError:
        return BadLine(line, Malformed.DEEP_JSON, short(text))
    except json.JSONDecodeError as e:
        return BadLine(line, not_valid_json(e), short(text))
    except ValueError as e:  # e.g. an integer of more digits than Python converts
        return BadLine(line, NotReadableJson(error=str(e)), short(text))
    return decode(value, line)


#: What :func:`decode_usual` learnt of a file's lines, by the text after a line's name: a stack
#: line's frames by the rest of its line, a tensor line's (step, dtype, shape) by its text up to its
#: statistics. Kept for one read (a chunk) only.
Seen = dict[str, Any]


def decode_usual(text: str, line: int = 0, seen: Seen | None = None) -> Record | None:
    """:func:`decode_line` of a line as the tools write nearly all of them, decoded with orjson (~2x
    faster than one json call per chunk); ``None`` for any other line, and where orjson is not
    installed: the caller decodes it with :func:`decode_line`, which judges every line.

    ``seen``: what earlier lines of the read taught (an LLM's layers repeat the same stacks, and its
    tensor lines a few hundred dtypes and shapes): a line whose text after its name is one already
    decoded takes what that decoded to, only its name (and a tensor's statistics) read anew."""
    if _orjson_loads is None:
        return None
    if seen is not None and (known := _like_one_seen(text, line, seen)) is not None:
        return known or None
    try:
        value = _orjson_loads(text)
    except ValueError:  # NaN or Infinity, a lone surrogate, bad JSON: json's own words say why
        return None
    if type(value) is not list:
        return None
    if len(value) == 2:
        record: StackRecord | TensorRecord | None = _usual_stack(value, line)
    else:
        record = _usual_tensor(value, line) if len(value) == 6 else None
    escaped = not (text.isascii() and "\\u" not in text)  # what may hold a control character
    if isinstance(record, TensorRecord) and escaped and name_problem(record.name) is not None:
        return None  # decode_line says why
    if seen is not None and record is not None and _as_written(text, name := record.name):
        if isinstance(record, StackRecord):
            seen[text[len(name) + 2 :]] = list(record.frames)
        else:  # the statistics hold numbers only, so the last "[" opens them
            seen[text[len(name) + 2 : text.rfind("[")]] = (record.dump_step, record.dtype, record.shape_raw)
    return record


def _like_one_seen(text: str, line: int, seen: Seen) -> Record | Literal[False] | None:
    """The record of a line whose text after its name is one in ``seen``; ``False`` for such a
    line that is not usual after all, ``None`` for any other. Nearly every line of a large dump
    comes here: what it calls is written out in it (a call costs as much as a check)."""
    if not text.startswith('["'):
        return None
    end = text.find('"', 2)
    if end <= 2:
        return None
    name = text[2:end]
    if "\\" in name or not name.isprintable():  # not verbatim (see _verbatim)
        return None
    if text.startswith('", [', end):  # a stack line: a list of frames after the name
        frames = seen.get(text[end:])
        return None if frames is None else StackRecord.of_checked(name, frames, line)
    start = text.rfind("[")
    known = seen.get(text[end:start])
    if known is None:
        return None
    # a tensor line whose text up to its statistics is one decoded before: its statistics (the text
    # from the last "[", less the line's closing bracket) are all that is read
    rest = text[start:] if text.endswith("]") else text[start:].rstrip(_JSON_SPACE)
    if not rest.endswith("]"):
        return False
    assert _orjson_loads is not None  # only decode_usual, which needs orjson, reaches here
    try:
        stats = _orjson_loads(rest[:-1])
    except ValueError:
        return False
    # safe_name: the name is not empty, and holds no backslash nor NUL (it is verbatim, printable)
    if type(stats) is not list or (stats and not _usual_stats(stats)) or "/" in name or name in _DOTS:
        return False
    step, dtype, shape = known
    return TensorRecord(name, step, dtype, shape, stats, parse_name(name), line)


def _verbatim(text: str) -> bool:
    """Whether a JSON string's text is its value: no escape, no control character (nor a quote,
    which ends it). ``isprintable`` also refuses a few other characters: those take the long way."""
    return "\\" not in text and text.isprintable()


def _as_written(text: str, name: str) -> bool:
    """Whether a line begins with its name as it reads (what :func:`decode_usual` looks up by)."""
    return _verbatim(name) and text.startswith(f'["{name}"')


#: The names :func:`~ptdbg_tui.formats.files.safe_name` refuses besides those with a separator.
_DOTS = frozenset({".", ".."})
#: What JSON counts as whitespace (``str.strip`` would take more).
_JSON_SPACE = " \t\r\n"


def _usual_stack(value: list[Any], line: int) -> StackRecord | None:
    name, raw = value
    if type(name) is not str or type(raw) is not list:
        return None
    frames = _written_frames(raw)  # strings only: nothing orjson reads otherwise than json
    return None if frames is None else StackRecord(name, frames, line)


def _usual_tensor(value: list[Any], line: int) -> TensorRecord | None:
    """A tensor line with an integer step, no checksum, a shape of integers (or a Python value's
    string) and up to four numbers."""
    name, dump_step, checksums, dtype, shape, stats = value
    if type(name) is not str or type(dtype) is not str or type(dump_step) is not int or checksums != []:
        return None
    if type(stats) is not list or not _usual_stats(stats):
        return None
    if type(shape) is not str and not (type(shape) is list and _usual_shape(shape)):
        return None
    if not safe_name(name):  # orjson reads no lone surrogate: holds_lone_surrogate() is False
        return None
    return TensorRecord(name, dump_step, dtype, shape, stats, parse_name(name), line)


def _usual_stats(stats: list[Any]) -> bool:
    """Up to four floats or integers, none of them what orjson reads of an integer beyond 64 bits."""
    if not stats:
        return True
    if len(stats) == 4:  # nearly every line: four floats, judged without a set (3x faster)
        a, b, c, d = stats
        if type(a) is float is type(b) is type(c) is type(d):
            big = _INT_AS_FLOAT
            return -big < a < big and -big < b < big and -big < c < big and -big < d < big
    return (
        len(stats) <= 4
        and set(map(type, stats)) <= _NUMBER
        and -_INT_AS_FLOAT < min(stats) <= max(stats) < _INT_AS_FLOAT
    )


def _usual_shape(shape: list[Any]) -> bool:
    return not shape or (
        len(shape) <= MAX_DIMS
        and set(map(type, shape)) <= _INT
        and min(shape) >= 0
        and math.prod(shape) <= MAX_NUMEL
    )


_NUMBER = {float, int}
_INT = {int}
#: orjson reads an integer beyond 64 bits as a float (json: an int); no float statistic from here on
#: is taken from it.
_INT_AS_FLOAT = float(1 << 63)


def may_hold_surrogates(text: str) -> bool:
    """Whether JSON text, once decoded, may hold surrogates (then see :func:`undecodable`)."""
    # the usual pkl: neither can be there (fast to tell: a search for one character is ~20x faster)
    if text.isascii() and ("\\" not in text or "\\u" not in text):
        return False
    return _SURROGATE_ESCAPE.search(text) is not None


def encode_tensor_line(
    name: str, dump_step: int, dtype: str, shape: Any, stats: list[Any], md5: str | None = None
) -> str:
    """One tensor line, byte-compatible with the original's ``json.dumps`` output (a checksum, when
    given, in the element the original leaves empty)."""
    return json.dumps([name, dump_step, [] if md5 is None else [md5], dtype, shape, stats])


def encode_stack_line(name: str, frames: list[Frame] | list[list[Any]]) -> str:
    return json.dumps([name, [list(f) for f in frames]])
