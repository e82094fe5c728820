"""The record model every reader returns, whatever the format: tensor records (their name, dtype,
shape, statistics and where their data is), stack records, lines that could not be read, and the
batches a read produces. Raw JSON values are kept as read so the CSV export can print them exactly
as the original does. Formats: :mod:`~ptdbg_tui.formats.pkl_line` (ptdbg),
:mod:`~ptdbg_tui.formats.msprobe`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, NamedTuple, TypeVar

from ptdbg_tui.formats.frozen import quick_pickle
from ptdbg_tui.formats.naming import STACK_INFO, EntryName, parse_name
from ptdbg_tui.formats.unreadable import Malformed, Unreadable
from ptdbg_tui.formats.untrusted import is_one_line, one_line

#: dtype of a record that holds no value (msprobe's ``null``).
NONE_DTYPE = "None"


class Frame(NamedTuple):
    """One stack frame, as the dumps write it."""

    path: str
    line: str  # a string, as the original writes it
    function: str
    source: str | None


@quick_pickle
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
    md5: str | None = None  # a checksum of the data (CRC-32; msprobe's xor mode: xor)

    @property
    def is_scalar(self) -> bool:
        return not isinstance(self.shape_raw, list) or self.dtype.startswith("<class")

    @property
    def shape(self) -> tuple[int, ...]:
        if isinstance(self.shape_raw, list):
            return tuple(map(int, self.shape_raw))
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

    def stat_values(self) -> list[float | None]:
        """The four statistics as numbers (see :meth:`stat`), read once for a verdict."""
        if not self.has_stats:
            return [None] * 4
        values = [stat_value(v) for v in self.stats[:4]]
        return values + [None] * (4 - len(values)) if len(values) < 4 else values

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

    def __post_init__(self) -> None:
        if set(map(type, self.frames)) <= {Frame}:  # a reader's: already frames
            self.frames = list(self.frames)
        else:
            self.frames = [f if isinstance(f, Frame) else Frame(*f) for f in self.frames]
        # dump text that is shown, printed and written: one line per field, no control character (a
        # terminal escape, a newline that forges a report line); one search where (always) none is
        if not is_one_line("".join(x for f in self.frames for x in f if x)):
            self.frames = [
                Frame(
                    one_line(f.path),
                    one_line(f.line),
                    one_line(f.function),
                    None if f.source is None else one_line(f.source),
                )
                for f in self.frames
            ]

    def __reduce__(self) -> tuple[Any, tuple[str, list[Frame], int]]:
        """Pickled as its fields, read back as checked (see :func:`~.frozen.quick_pickle`)."""
        return StackRecord.of_checked, (self.name, self.frames, self.line)

    @classmethod
    def of_checked(cls, name: str, frames: Sequence[Frame], line: int = 0) -> StackRecord:
        """A record of the frames another record holds (checked by it already): an LLM's layers
        repeat the same stacks, and looking at them again cost a third of reading its pkl."""
        record = cls.__new__(cls)
        record.name, record.frames, record.line = name, list(frames), line
        return record

    @property
    def call(self) -> str:
        return self.name[: -len(STACK_INFO) - 1] if self.name.endswith(STACK_INFO) else self.name


@dataclass(slots=True)
class BadLine:
    """A line that could not be decoded, kept so the user learns which line and why."""

    line: int
    reason: Unreadable
    text: str = field(default="")


Record = TensorRecord | StackRecord | BadLine
#: A record of one kind or another, kept by a function that changes a record in place (:func:`undecodable`).
R = TypeVar("R", bound=Record)


@dataclass
class RecordBatch:
    """What one read of a rank dump's records produced, whatever its format."""

    tensors: list[TensorRecord] = field(default_factory=list)
    stacks: list[StackRecord] = field(default_factory=list)
    bad: list[BadLine] = field(default_factory=list)
    reset: bool = False  # the file was truncated or replaced: earlier records are void
    more: bool = False  # complete lines remain unread

    def __bool__(self) -> bool:
        return bool(self.tensors or self.stacks or self.bad or self.reset)


def stat_value(v: Any) -> float | None:
    """A raw stat as a float: ``None`` for the ``"Nan"`` sentinel and the empty-list stats."""
    if type(v) is float:  # nearly every one
        return v
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


def valid_stat(v: Any) -> bool:
    """Stat values in dumps (docs/formats.md#statistics): numbers, ``"Nan"`` (and msprobe's non-finite words),
    ``[]`` (empty or bool tensors); ``null`` where a dumper had none. A number must also fit a float."""
    if v is None or v == [] or isinstance(v, (bool, float)):
        return True
    if isinstance(v, str):
        return v.lower() in _STAT_WORDS
    return isinstance(v, int) and abs(v) <= 1.7976931348623157e308


@dataclass(frozen=True, slots=True, kw_only=True)
class RepeatedNames:
    """Entry names that occur more than once in one dump (a line written twice, or two runs into one
    file): how many occurrences repeat one before (``count``), the first such name, and where its two
    occurrences are (``lines``: their line numbers where both have one; ``entries``: their positions,
    from 1)."""

    count: int
    name: str
    lines: tuple[int, int] | None
    entries: tuple[int, int]


def repeated_names(tensors: Sequence[TensorRecord]) -> RepeatedNames | None:
    """Entry names that occur more than once in one dump; ``None`` when every name is unique. Each
    occurrence stays a row of its own."""
    first: dict[str, TensorRecord] = {}
    again: list[tuple[TensorRecord, TensorRecord]] = []
    for rec in tensors:
        seen = first.setdefault(rec.name, rec)
        if seen is not rec:
            again.append((seen, rec))
    if not again:
        return None
    a, b = again[0]
    return RepeatedNames(
        count=len(again),
        name=a.name,
        lines=(a.line, b.line) if a.line and b.line else None,
        entries=(a.order + 1, b.order + 1),
    )


def shown(text: str) -> str:
    """A text that may hold surrogates as it can be shown and written: each as U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


def undecodable(record: R) -> R:
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
        record.frames = [
            Frame(shown(f), shown(n), shown(fn), None if src is None else shown(src))
            for f, n, fn, src in record.frames
        ]
    else:
        record.reason, record.text = _shown_why(record.reason), shown(record.text)
    return record


def _shown_why(why: Unreadable) -> Unreadable:
    """Why a line is unreadable, each text it holds as it can be shown (the words around them hold no
    surrogate, so the sentence reads as :func:`shown` of it did)."""
    if isinstance(why, Malformed):
        return why
    held: dict[str, Any] = {f.name: getattr(why, f.name) for f in fields(why)}
    for k, v in held.items():
        held[k] = shown(v) if isinstance(v, str) else _shown_why(v) if isinstance(v, Unreadable) else v
    return replace(why, **held)


def short(value: Any, limit: int = 120) -> str:
    try:
        text = value if isinstance(value, str) else repr(value)
    except RecursionError:
        text = "(nested too deeply to show)"
    return text if len(text) <= limit else text[: limit - 1] + "…"
