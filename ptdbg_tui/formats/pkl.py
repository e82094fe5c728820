"""Reading pkl files whole or incrementally (following a file that is still being written).

Only complete lines (ending in ``\\n``) are consumed while following; the byte offset of the
first unconsumed byte is kept so the next read resumes there. A file that shrinks or is replaced
(the original deletes the pkl when a dump restarts) is read again from the start.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Generic, TypeVar

import orjson

from ptdbg_tui.formats.files import open_regular
from ptdbg_tui.formats.pkl_line import decode_line, decode_usual, decode_value, may_hold_surrogates
from ptdbg_tui.formats.records import BadLine, RecordBatch, StackRecord, TensorRecord, undecodable
from ptdbg_tui.formats.unreadable import LineTooLong

T = TypeVar("T")
V = TypeVar("V")

#: Bytes read per call while following, so one huge file cannot stall a watcher.
DEFAULT_CHUNK = 8 << 20
#: Bytes before the offset compared at each read (see :meth:`LineFollower._rewritten`).
TAIL = 64


@dataclass
class Chunk:
    """Complete lines read by a :class:`LineFollower` and what happened to the file."""

    data: bytes = b""
    first_line: int = 1  # 1-based number of the first line in ``data``
    reset: bool = False  # the file was truncated or replaced: earlier lines are void
    more: bool = False  # complete lines remain unread (chunk limit reached)
    too_long: bool = False  # a line longer than the chunk size was skipped


class LineFollower:
    """Byte-offset tail of a text file that grows by whole lines."""

    def __init__(self, path: str | os.PathLike[str], chunk: int = DEFAULT_CHUNK) -> None:
        self.path = Path(path)
        self.chunk = chunk
        self.offset = 0
        self.lines = 0
        self._identity: tuple[int, int] | None = None
        self._skipping = False  # inside a line longer than the chunk
        self._tail = b""  # the last bytes consumed, to tell a replaced file from a grown one
        self._mtime_ns = 0

    def _rewritten(self, fd: int, st: os.stat_result) -> bool:
        """Whether the same inode holds another file: one that reused the inode number an earlier
        replacement freed, or a rewrite in place. The bytes before the offset differ, or the file
        was modified without growing."""
        if st.st_size == self.offset and st.st_mtime_ns != self._mtime_ns:
            return True
        return bool(self._tail) and os.pread(fd, len(self._tail), self.offset - len(self._tail)) != self._tail

    def read_chunk(self, final: bool = False) -> Chunk:
        """Complete lines added since the last call (``final``: also a last unterminated line).

        A missing file gives an empty chunk: the writer may not have created it yet. Anything
        else that cannot be read (a directory, a pipe, no permission) raises OSError.
        """
        out = Chunk(first_line=self.lines + 1)
        try:
            fd, st = open_regular(self.path)
        except FileNotFoundError:
            return out
        try:
            identity = (st.st_dev, st.st_ino)
            if self._identity is not None and (
                identity != self._identity or st.st_size < self.offset or self._rewritten(fd, st)
            ):
                out.reset = True
                self.offset = self.lines = 0
                self._skipping, self._tail = False, b""
                out.first_line = 1
            self._identity, self._mtime_ns = identity, st.st_mtime_ns
            data = os.pread(fd, self.chunk, self.offset)
        finally:
            os.close(fd)
        at_eof = self.offset + len(data) >= st.st_size
        if self._skipping:  # the rest of a line too long to read: drop it, up to its newline
            cut = data.find(b"\n") + 1
            self._tail = b""  # what is skipped is not kept
            if cut == 0:
                self.offset += len(data)
                out.more = not at_eof
                return out
            self._skipping = False
            self.offset += cut
            data = data[cut:]
            out.first_line = self.lines + 1
        end = data.rfind(b"\n") + 1
        if final and at_eof:
            end = len(data)
        if end == 0:
            if len(data) == self.chunk:  # one line fills the whole chunk: skip all of it
                self.offset += len(data)
                self._tail = b""
                self.lines += 1
                self._skipping = out.too_long = out.more = True
            else:  # after a skipped line's end: the next read starts at a line
                out.more = not at_eof
            return out
        self.offset += end
        out.data = data[:end]
        self._tail = data[max(0, end - TAIL) : end]
        out.more = not at_eof
        self.lines += out.data.count(b"\n") + (0 if out.data.endswith(b"\n") else 1)
        return out


def too_long(chunk: Chunk, limit: int) -> BadLine:
    """The line a chunk skipped, too long to read."""
    return BadLine(chunk.first_line, LineTooLong(limit=limit))


def decode_lines(
    data: bytes,
    first: int,
    from_value: Callable[[Any, int], T],
    from_text: Callable[[str, int], T | None],
    repair: Callable[[T], T] | None = None,
    usual: Callable[[str, int], T | None] | None = None,
) -> list[T | None]:
    """Decode complete JSON lines; ``first`` is the 1-based number of the first line.

    Bytes that are not UTF-8 are kept as surrogate escapes (as are JSON's escapes of them), and
    ``repair`` then makes each result safe to show while what names files keeps the exact bytes
    (see :func:`records.undecodable`). ``usual`` decodes a line the way ``from_text`` would, or
    gives ``None`` for those it leaves to it, blank lines among them (a faster way for the lines
    most files are made of)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("utf-8", errors="surrogateescape" if repair else "replace")
    else:
        if not may_hold_surrogates(text):
            repair = None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if usual is not None and repair is None:
        out, rest, left = _usual_lines(lines, first, usual)
    else:
        left = [(first + i, ln) for i, ln in enumerate(lines) if ln and not ln.isspace()]  # not blank
        out, rest = [None] * len(left), list(range(len(left)))
    try:
        # One json call for the whole chunk is ~3x faster than one per line; a count mismatch
        # (a line holding two values, or a value split over lines) falls back to line by line.
        values = json.loads("[" + ",".join(ln for _, ln in left) + "]")
        decoded: list[T | None] = [from_value(v, n) for v, (n, _) in zip(values, left, strict=True)]
    except (ValueError, RecursionError):  # RecursionError: nested too deep for json
        decoded = [from_text(ln, n) for n, ln in left]
    for k, got in zip(rest, decoded, strict=True):
        out[k] = got
    return out if repair is None else [None if r is None else repair(r) for r in out]


def _usual_lines(
    lines: list[str], first: int, usual: Callable[[str, int], T | None]
) -> tuple[list[T | None], list[int], list[tuple[int, str]]]:
    """What ``usual`` decodes of the lines, a place for each other line that is not blank, where those
    places are, and those lines (number, text): one pass over the lines (a chunk holds ~10,000)."""
    out: list[T | None] = []
    rest: list[int] = []
    left: list[tuple[int, str]] = []
    for n, ln in enumerate(lines, first):
        result = usual(ln, n)  # None for a blank line, which is no record: looked for only then
        if result is None:
            if not ln or ln.isspace():
                continue
            rest.append(len(out))
            left.append((n, ln))
        out.append(result)
    return out, rest, left


Keyed = tuple[str, V] | BadLine


def keyed_usual(
    text: str, line: int, seen: dict[str, V], from_value: Callable[[Any, int], Keyed[V]]
) -> tuple[str, V] | None:
    """:func:`decode_line` of a keyed sidecar line as the tools write it (``["KEY", …]``, the key
    verbatim) whose value depends on the text after its key alone: a tail decoded before (``seen``)
    gives that value, only the key read anew; ``None`` for any other line (the caller decodes it)."""
    if not text.startswith('["'):
        return None
    end = text.find('"', 2)
    if end <= 2:
        return None
    key = text[2:end]
    if "\\" in key or not key.isprintable():  # not verbatim: JSON reads it otherwise
        return None
    known = seen.get(text[end:])
    if known is not None:
        return key, known
    try:
        value = orjson.loads(text)
    except ValueError:  # NaN, a lone surrogate, bad JSON: json's own words say why
        return None
    item = from_value(value, line)
    if isinstance(item, BadLine) or item[0] != key:
        return None
    seen[text[end:]] = item[1]
    return item


class KeyedFollower(Generic[V]):
    """Incremental reader of a JSON-lines sidecar whose lines are items keyed by call (the module
    and call sidecars): complete lines only, the last line of a key wins, malformed lines (and lines
    longer than a chunk) are kept in :attr:`bad` as the pkl reader keeps its own, and skipped; a
    replaced file is read again. ``from_value`` gives an item or a :class:`BadLine` saying why not."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        from_value: Callable[[Any, int], Keyed[V]],
        repair: Callable[[tuple[str, V]], tuple[str, V]],
        by_tail: bool = False,
    ) -> None:
        """``by_tail``: an item's value depends on its line's text after the key alone (a module chain:
        the calls of one module share theirs), so a line whose tail was decoded before takes that value
        (:func:`keyed_usual`)."""
        self.path = Path(path)
        self._by_tail = by_tail
        self.items: dict[str, V] = {}
        self.bad: list[BadLine] = []
        self._decode = (
            from_value,
            partial(decode_line, decode=from_value),
            lambda item: item if isinstance(item, BadLine) else repair(item),
        )
        self._lines = LineFollower(self.path, DEFAULT_CHUNK)

    @property
    def bad_lines(self) -> int:
        return len(self.bad)

    def read(self, final: bool = False) -> dict[str, V]:
        """New items since the last call (all of them again after a reset)."""
        new: dict[str, V] = {}
        while True:
            chunk = self._lines.read_chunk(final)
            if chunk.reset:
                self.items.clear()
                new.clear()
                self.bad.clear()
            if chunk.too_long:
                self.bad.append(too_long(chunk, self._lines.chunk))
            usual = partial(keyed_usual, seen={}, from_value=self._decode[0]) if self._by_tail else None
            for item in decode_lines(chunk.data, chunk.first_line, *self._decode, usual):
                if isinstance(item, BadLine):
                    self.bad.append(item)
                elif item is not None:
                    new[item[0]] = item[1]
            if not chunk.more:
                break
        self.items.update(new)
        return new


class PklFollower:
    """Incremental reader of one pkl file."""

    def __init__(self, path: str | os.PathLike[str], chunk: int = DEFAULT_CHUNK) -> None:
        self._lines = LineFollower(path, chunk)
        self.tensor_count = 0

    @property
    def path(self) -> Path:
        return self._lines.path

    @property
    def offset(self) -> int:
        return self._lines.offset

    def read(self, final: bool = False) -> RecordBatch:
        """Records of the complete lines added since the last call."""
        chunk = self._lines.read_chunk(final)
        batch = RecordBatch(reset=chunk.reset, more=chunk.more)
        if chunk.reset:
            self.tensor_count = 0
        if chunk.too_long:
            batch.bad.append(too_long(chunk, self._lines.chunk))
        usual = partial(decode_usual, seen={})  # a chunk's repeated stacks and shapes decoded once
        for rec in decode_lines(chunk.data, chunk.first_line, decode_value, decode_line, undecodable, usual):
            if isinstance(rec, TensorRecord):
                rec.order = self.tensor_count
                self.tensor_count += 1
                batch.tensors.append(rec)
            elif isinstance(rec, StackRecord):
                batch.stacks.append(rec)
            elif rec is not None:
                batch.bad.append(rec)
        return batch

    def read_all(self) -> RecordBatch:
        """Everything up to the end of the file (a finished dump)."""
        total = RecordBatch()
        while True:
            batch = self.read(final=True)
            if batch.reset:
                total = RecordBatch(reset=True)
            total.tensors += batch.tensors
            total.stacks += batch.stacks
            total.bad += batch.bad
            if not batch.more:
                return total


def read_pkl(path: str | os.PathLike[str]) -> RecordBatch:
    """All records of a finished pkl file."""
    return PklFollower(path).read_all()
