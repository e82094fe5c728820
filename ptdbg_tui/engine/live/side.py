"""One rank dump followed by the live engine: its records so far and how fresh they are."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from ptdbg_tui.compare.notices import ModulesUnreadable, ReaderFailed, RecordsUnreadable
from ptdbg_tui.compare.report.notice_words import side_fault_text
from ptdbg_tui.engine.pipeline import SideRecords
from ptdbg_tui.formats.calls import CallSpec
from ptdbg_tui.formats.dialects import dialect_of
from ptdbg_tui.formats.files import reason
from ptdbg_tui.formats.layout import RankDump
from ptdbg_tui.formats.modules import ModuleChain
from ptdbg_tui.formats.naming import EntryName
from ptdbg_tui.formats.reader import open_reader
from ptdbg_tui.formats.records import BadLine, RepeatedNames, StackRecord, TensorRecord, repeated_names

#: Bytes of records decoded per read. json decodes a chunk in one call that holds the GIL, so the
#: chunk bounds how long the UI thread can be kept waiting (1 MiB: a few tens of ms).
READ_CHUNK = 1 << 20

#: A records file's size and mtime (ns): a worker that reads it again checks it read the same.
FileMark = tuple[int, int]


class SideState:
    """One rank dump being followed (any format), with its stacks and module structure, and what
    keeps it from being read."""

    def __init__(self, dump: RankDump) -> None:
        self.dump = dump
        self.reader = open_reader(dump, READ_CHUNK)
        self.tensors: list[TensorRecord] = []
        self.stacks: dict[str, StackRecord] = {}
        self.bad: list[BadLine] = []
        self.reported_bad = 0
        self._sidecar_bad = 0  # the reader's skipped sidecar lines already in ``bad``
        self.version = 0
        self.changed_at = _monotonic_mtime(dump.records)
        self.resets = 0  # times the file was replaced or truncated: results of its old records are void
        self.error: RecordsUnreadable | ReaderFailed | None = None  # why the records cannot be read now
        self.modules_error: ModulesUnreadable | None = None  # why the module sidecar cannot be read now
        self._repeats: tuple[int, RepeatedNames | None] = (-1, None)  # (version, repeated_names of it)
        self.mark: FileMark | None = None  # the records file as the last poll read it (None: it changed)

    def poll(self, final: bool) -> None:
        """Read what was appended (``version`` counts the changes). A file that cannot be read
        leaves the records read so far and says why in ``error`` until a later poll succeeds."""
        changed = False
        before = file_mark(self.dump)
        try:
            while True:
                batch = self.reader.read(final)
                if batch.reset:
                    self.tensors, self.stacks, self.bad, self.reported_bad = [], {}, [], 0
                    self._sidecar_bad = 0
                    self.resets += 1
                if batch:
                    self.tensors += batch.tensors
                    self.stacks.update((s.call, s) for s in batch.stacks)
                    self.bad += batch.bad
                    changed = True
                if not batch.more:
                    break
            self.error = None
        except OSError as e:
            self.error = RecordsUnreadable(reason=reason(e))
        try:
            if self.reader.read_modules(final):
                changed = True
            self.modules_error = None
        except OSError as e:
            self.modules_error = ModulesUnreadable(reason=reason(e))
        self.sidecar_lines()
        self.mark = before if before == file_mark(self.dump) else None
        if changed:
            self.version += 1
            self.changed_at = _monotonic_mtime(self.dump.records)

    def sidecar_lines(self) -> None:
        """The sidecar lines the reader skipped since the last call join ``bad``."""
        skipped = self.reader.sidecar_bad()
        if len(skipped) < self._sidecar_bad:  # a sidecar started over
            self._sidecar_bad = 0
        self.bad += skipped[self._sidecar_bad :]
        self._sidecar_bad = len(skipped)

    @property
    def problems(self) -> list[str]:
        """What is wrong with this dump now, in words."""
        return [side_fault_text(p) for p in (self.error, self.modules_error) if p is not None]

    def repeats(self) -> RepeatedNames | None:
        """:func:`repeated_names` of the records so far (looked at once per change)."""
        if self._repeats[0] != self.version:
            self._repeats = (self.version, repeated_names(self.tensors))
        return self._repeats[1]

    def quiet(self, now: float, quiet_s: float) -> bool:
        return now - self.changed_at >= quiet_s

    def records(self) -> SideRecords:
        """The records so far, as matching needs them."""
        return SideRecords(self.tensors, self.stacks, dialect_of(self.reader.producer))

    def call_specs(self, final: bool) -> dict[str, CallSpec]:
        """The call sidecar so far (its new lines read first)."""
        self.reader.read_calls(final)
        return self.reader.call_specs()

    def module_chains(self) -> Callable[[EntryName], ModuleChain | None] | None:
        """The module chains so far (a poll reads them); None without a module structure."""
        return self.reader.module_chain if self.reader.has_modules else None

    @property
    def tail_call(self) -> str | None:
        return self.tensors[-1].call if self.tensors else None


def file_mark(dump: RankDump) -> FileMark | None:
    try:
        st = dump.records.stat()
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def _monotonic_mtime(path: Path) -> float:
    """The file's mtime on the monotonic clock (now for a missing file)."""
    try:
        age = max(0.0, time.time() - path.stat().st_mtime)
    except OSError:
        age = 0.0
    return time.monotonic() - age
