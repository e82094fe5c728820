"""The one definition of a pkl line (spec §3): decoding for readers, encoding for writers.

A pkl is UTF-8 text, one JSON array per line, with the non-standard tokens ``NaN`` and
``Infinity``. Tensor lines have 6 elements, stack lines 2. Raw JSON values are kept as read
so the CSV export can print them exactly as the original does.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ptdbg_tui.formats.files import holds_lone_surrogate, safe_name
from ptdbg_tui.formats.naming import STACK_INFO, EntryName, parse_name

#: dtype of a record that holds no value (msprobe's ``null``).
NONE_DTYPE = "None"

#: One stack frame: file, line number (a string, as the original writes it), function, source.
Frame = tuple[str, str, str, "str | None"]


@dataclass(slots=True)
class TensorRecord:
    """One tensor or Python-scalar line."""

    name: str
    dump_step: int
    dtype: str
    shape_raw: Any  # JSON list for tensors; a string for Python values ("[]"); None for no value
    stats: list[Any]  # raw JSON values, 3 (legacy) or 4 elements
    entry: EntryName | None
    line: int = 0  # 1-based line number in its pkl
    order: int = 0  # position among the tensor records of its file
    #: The tensor file's name in the dump's data folder: ``None`` for ptdbg's ``name + ".npy"``,
    #: ``""`` when there is none (msprobe records Python values, and statistics only, without one).
    data_name: str | None = None
    requires_grad: bool | None = None  # msprobe records it; ptdbg does not
    md5: str | None = None  # msprobe's checksum of the data (CRC-32, or xor in its xor mode)

    @property
    def is_scalar(self) -> bool:
        return not isinstance(self.shape_raw, list) or self.dtype.startswith("<class")

    @property
    def shape(self) -> tuple[int, ...]:
        if isinstance(self.shape_raw, list):
            return tuple(int(d) for d in self.shape_raw)
        return ()

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def has_stats(self) -> bool:
        """Stats are meaningful only for dump_step <= 100 (overflow dumps use 101)."""
        return self.dump_step <= 100

    def stat(self, i: int) -> float | None:
        """Numeric view of stat ``i`` (max, min, mean, l2norm); ``None`` when absent."""
        if not self.has_stats or i >= len(self.stats):
            return None
        return stat_value(self.stats[i])

    @property
    def call(self) -> str:
        return self.entry.call if self.entry else self.name

    @property
    def data_file(self) -> str | None:
        """File name of the tensor data in the dump's data folder; ``None`` when there is none."""
        if self.data_name is None:
            return f"{self.name}.npy"
        return self.data_name or None

    @property
    def is_none(self) -> bool:
        """A ``null`` where a value could be (msprobe: a backward input that takes no gradient)."""
        return self.dtype == NONE_DTYPE


@dataclass(slots=True)
class StackRecord:
    """One ``<call>_stack_info`` line; frames innermost first, as written."""

    name: str
    frames: list[Frame]
    line: int = 0

    @property
    def call(self) -> str:
        return self.name[: -len(STACK_INFO) - 1] if self.name.endswith(STACK_INFO) else self.name


@dataclass(slots=True)
class BadLine:
    """A line that could not be decoded, kept so the user learns which line and why."""

    line: int
    reason: str
    text: str = field(default="")


Record = TensorRecord | StackRecord | BadLine


def stat_value(v: Any) -> float | None:
    """A raw stat as a float: ``None`` for the ``"Nan"`` sentinel and the empty-list stats."""
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        try:
            return float(v)
        except OverflowError:  # an integer beyond float's range
            return math.copysign(math.inf, v)
    return None


#: Largest element count (and dimension) a shape may announce: what an int64 holds.
MAX_NUMEL = (1 << 63) - 1
#: Most dimensions a shape may have (torch allows 64).
MAX_DIMS = 64


#: Strings a statistic may be: the original's ``"Nan"`` sentinel, non-finite values as msprobe spells them.
_STAT_WORDS = frozenset({"nan", "inf", "-inf", "infinity", "-infinity"})
#: Surrogates in decoded text: undecodable bytes (surrogate escapes) or JSON's ``\udcff`` escapes,
#: which is how Python's json writes a file name that is not UTF-8.
_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]|[\ud800-\udfff]")


def valid_stat(v: Any) -> bool:
    """The stat values dumps hold (spec §3.4): numbers, ``"Nan"`` (and msprobe's non-finite words),
    ``[]`` (empty or bool tensors); ``null`` where a dumper had none. A number must also fit a float."""
    if v is None or v == [] or isinstance(v, (bool, float)):
        return True
    if isinstance(v, str):
        return v.lower() in _STAT_WORDS
    return isinstance(v, int) and abs(v) <= 1.7976931348623157e308


def _dump_step(v: Any) -> int | None:
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    if isinstance(v, float) and v.is_integer():  # finite and whole (1e400 is inf: refused)
        return int(v)
    return None


def decode_value(value: Any, line: int = 0) -> Record:
    """Turn one decoded JSON line into a record (or a :class:`BadLine` saying why not); never raises."""
    if not isinstance(value, list):
        return BadLine(line, "a pkl line must be a JSON array", _short(value))
    if len(value) == 2 and isinstance(value[0], str) and isinstance(value[1], list):
        if all(type(f) is list and len(f) == 4 and type(f[0]) is str and type(f[1]) is str  # as written
               and type(f[2]) is str and (f[3] is None or type(f[3]) is str) for f in value[1]):
            return StackRecord(value[0], [tuple(f) for f in value[1]], line)
        frames = []
        for f in value[1]:
            if not isinstance(f, list) or len(f) < 3 or any(isinstance(x, (list, dict)) for x in f[:4]):
                return BadLine(line, "stack frame is not [file, line, function, source]", _short(f))
            src = f[3] if len(f) > 3 else None
            frames.append((str(f[0]), str(f[1]), str(f[2]), None if src is None else str(src)))
        return StackRecord(value[0], frames, line)
    if len(value) != 6:
        return BadLine(line, f"expected 6 elements (tensor line) or 2 (stack line), got {len(value)}",
                       _short(value))
    name, dump_step, _, dtype, shape, stats = value
    if not isinstance(name, str) or not isinstance(dtype, str):
        return BadLine(line, "name and dtype must be strings", _short(value))
    if not safe_name(name):
        return BadLine(line, "the name is empty or holds '/', '\\' or NUL, so its tensor file would lie "
                       "outside the dump folder", _short(name))
    if holds_lone_surrogate(name):
        return BadLine(line, "the name holds a lone UTF-16 surrogate, which no file name can hold",
                       _short(shown(name)))
    if not isinstance(shape, (list, str)) or not isinstance(stats, list):
        return BadLine(line, "shape must be a list or \"[]\" and stats a list", _short(value))
    if isinstance(shape, list):
        if not all(type(d) is int and d >= 0 for d in shape):  # not bool, not float
            return BadLine(line, "shape must hold non-negative integers", _short(value))
        if len(shape) > MAX_DIMS or math.prod(shape) > MAX_NUMEL:
            return BadLine(line, f"shape {_short(shape, 60)} is too large to be a tensor's", _short(name))
    bad_stat = next((v for v in stats if type(v) is not float and not valid_stat(v)), None)
    if bad_stat is not None or len(stats) > 4:
        what = f"holds {_short(bad_stat, 40)}" if bad_stat is not None else f"has {len(stats)} values"
        return BadLine(line, f"stats {what}; expected up to 4 numbers, \"Nan\" or []", _short(value))
    step = dump_step if type(dump_step) is int else _dump_step(dump_step)
    if step is None:
        return BadLine(line, f"dump_step must be an integer, got {_short(dump_step, 40)}", _short(value))
    return TensorRecord(name, step, dtype, shape, stats, parse_name(name), line)


def repeated_names(tensors: Sequence[TensorRecord]) -> str | None:
    """Entry names that occur more than once in one dump, in words (a line written twice, or two runs
    into one file); ``None`` when every name is unique. Each occurrence stays a row of its own."""
    first: dict[str, TensorRecord] = {}
    again: list[tuple[TensorRecord, TensorRecord]] = []
    for rec in tensors:
        seen = first.setdefault(rec.name, rec)
        if seen is not rec:
            again.append((seen, rec))
    if not again:
        return None
    a, b = again[0]
    where = (f"lines {a.line} and {b.line}" if a.line and b.line
             else f"entries {a.order + 1} and {b.order + 1}")
    more = f" (+{len(again) - 1} more)" if len(again) > 1 else ""
    return (f"{len(again)} duplicate entry name(s): {_short(a.name, 80)} at {where}{more}; each is a row "
            "of its own")


def decode_line(text: str, line: int = 0) -> Record | None:
    """Decode one text line; ``None`` for a blank line."""
    text = text.strip()
    if not text:
        return None
    try:
        value = json.loads(text)
    except RecursionError:
        return BadLine(line, "JSON nested too deeply to read", _short(text))
    except json.JSONDecodeError as e:
        return BadLine(line, f"not valid JSON ({e.msg} at column {e.colno})", _short(text))
    except ValueError as e:  # e.g. an integer of more digits than Python converts
        return BadLine(line, f"not readable JSON ({e})", _short(text))
    return decode_value(value, line)


def may_hold_surrogates(text: str) -> bool:
    """Whether JSON text, once decoded, may hold surrogates (then see :func:`undecodable`)."""
    return _SURROGATE_ESCAPE.search(text) is not None


def shown(text: str) -> str:
    """A text that may hold surrogates as it can be shown and written: each as U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


def undecodable(record: Record) -> Record:
    """A record from bytes that are not UTF-8 (read with surrogate escapes): every text as it can be
    shown, while a tensor's data file keeps the exact bytes of the name it was saved under."""
    if isinstance(record, TensorRecord):
        name = shown(record.name)
        if name != record.name:
            if record.data_name is None:
                record.data_name = f"{record.name}.npy"
            record.name, record.entry = name, parse_name(name)
        record.dtype = shown(record.dtype)
        if isinstance(record.shape_raw, str):
            record.shape_raw = shown(record.shape_raw)
        record.stats = [shown(v) if isinstance(v, str) else v for v in record.stats]
    elif isinstance(record, StackRecord):
        record.name = shown(record.name)
        record.frames = [(shown(f), shown(n), shown(fn), None if src is None else shown(src))
                         for f, n, fn, src in record.frames]
    else:
        record.reason, record.text = shown(record.reason), shown(record.text)
    return record


def encode_tensor_line(name: str, dump_step: int, dtype: str, shape: Any, stats: list[Any]) -> str:
    """One tensor line, byte-compatible with the original's ``json.dumps`` output."""
    return json.dumps([name, dump_step, [], dtype, shape, stats])


def encode_stack_line(name: str, frames: list[Frame] | list[list[Any]]) -> str:
    return json.dumps([name, [list(f) for f in frames]])


def _short(value: Any, limit: int = 120) -> str:
    try:
        text = value if isinstance(value, str) else repr(value)
    except RecursionError:
        text = "(nested too deeply to show)"
    return text if len(text) <= limit else text[: limit - 1] + "…"
