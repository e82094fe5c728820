"""One way to read a rank dump whatever its format: what the engine and the batch compare use.

A :class:`DumpReader` follows one rank folder: :meth:`~DumpReader.read` returns the records added
since the last call (``reset`` when earlier ones are void), :meth:`~DumpReader.read_modules` picks
up the module structure (ptdbg-tui's sidecar, msprobe's construct.json),
:meth:`~DumpReader.module_chain` says which ``nn.Module``s a call ran in,
:meth:`~DumpReader.read_calls` and :meth:`~DumpReader.call_spec` give what a replay of a call needs
(ptdbg-tui's call sidecar), and
:attr:`~DumpReader.producer` which tool wrote the dump, as far as it shows (two tools record some
tensors differently: see :mod:`ptdbg_tui.formats.dialects`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol

from ptdbg_tui.formats.calls import CallFollower, CallSpec, calls_path
from ptdbg_tui.formats.dialects import ORIGINAL_PTDBG, original_detach, producer
from ptdbg_tui.formats.layout import RankDump
from ptdbg_tui.formats.modules import ModuleChain, ModuleFollower, sidecar_path
from ptdbg_tui.formats.msprobe import MsprobeFollower
from ptdbg_tui.formats.naming import STYLE_MSPROBE, STYLE_PTDBG, EntryName
from ptdbg_tui.formats.pkl import DEFAULT_CHUNK, PklFollower
from ptdbg_tui.formats.records import BadLine, RecordBatch
from ptdbg_tui.formats.unreadable import InSidecar


class DumpReader(Protocol):
    def read(self, final: bool = False) -> RecordBatch: ...

    def read_modules(self, final: bool = False) -> bool: ...

    def module_chain(self, entry: EntryName) -> ModuleChain | None: ...

    def read_calls(self, final: bool = False) -> bool: ...

    def call_spec(self, call: str) -> CallSpec | None: ...

    def call_specs(self) -> dict[str, CallSpec]: ...

    def sidecar_bad(self) -> list[BadLine]: ...

    @property
    def has_modules(self) -> bool: ...

    @property
    def producer(self) -> str | None: ...


class PklReader:
    """A ptdbg pkl and, when the project's dumper wrote them, its module and call sidecars."""

    def __init__(self, dump: RankDump, chunk: int = DEFAULT_CHUNK) -> None:
        self._pkl = PklFollower(dump.records, chunk)
        self._modules = ModuleFollower(sidecar_path(dump.records))
        self._calls = CallFollower(calls_path(dump.records))
        self.producer: str | None = None
        self._backward = False  # a backward record was read (while no stack line says the tool)

    def read(self, final: bool = False) -> RecordBatch:
        batch = self._pkl.read(final)
        if batch.reset:  # a restarted dump: its sidecar starts over too
            self._modules = ModuleFollower(self._modules.path)
            self._calls = CallFollower(self._calls.path)
            self.producer = None
            self._backward = False
        if self.producer is None:
            self.producer = producer(STYLE_PTDBG, batch.stacks)
        if self.producer is None:
            original, self._backward = original_detach(batch.tensors, self._backward)
            self.producer = ORIGINAL_PTDBG if original else None
        return batch

    def read_modules(self, final: bool = False) -> bool:
        return bool(self._modules.read(final))

    def module_chain(self, entry: EntryName) -> ModuleChain | None:
        return self._modules.chains.get(entry.label)

    @property
    def has_modules(self) -> bool:
        return bool(self._modules.chains)

    def read_calls(self, final: bool = False) -> bool:
        """Read the call sidecar's new lines; whether there were any."""
        return bool(self._calls.read(final))

    def call_spec(self, call: str) -> CallSpec | None:
        """The replay spec of a call by its key (``Functional_gelu_0``: :attr:`EntryName.label`)."""
        return self._calls.specs.get(call)

    def call_specs(self) -> dict[str, CallSpec]:
        """Every replay spec read so far, by call key."""
        return dict(self._calls.specs)

    def sidecar_bad(self) -> list[BadLine]:
        """The lines of the module and call sidecars read so far that were skipped, as the pkl's bad
        lines are reported, each naming its file (a sidecar's line numbers are not the pkl's)."""
        return [
            BadLine(0, InSidecar(file=f.path.name, line=b.line, why=b.reason), b.text)
            for f in (self._modules, self._calls)
            for b in f.bad
        ]


def open_reader(dump: RankDump, chunk: int = DEFAULT_CHUNK) -> DumpReader:
    """The reader for a rank dump's format (``chunk``: bytes a read decodes at most, about)."""
    return MsprobeFollower(dump.records, chunk) if dump.format == STYLE_MSPROBE else PklReader(dump, chunk)


def read_dump(dump: RankDump) -> RecordBatch:
    """Every record of a finished rank dump."""
    if dump.format == STYLE_MSPROBE:
        return MsprobeFollower(dump.records, math.inf).read(final=True)
    return PklFollower(dump.records).read_all()


def report_bad(reader: DumpReader, bad: list[BadLine] | None) -> None:
    """Add the reader's skipped sidecar lines to ``bad`` (a side's bad lines, as reported), once."""
    if bad is not None:
        bad += [b for b in reader.sidecar_bad() if b not in bad]


def call_specs_of(dump: RankDump, bad: list[BadLine] | None = None) -> dict[str, CallSpec]:
    """The call sidecar of a finished dump, by call key (empty where its tool writes none); its lines
    skipped go to ``bad``. Raises OSError when it is there but cannot be read."""
    reader = open_reader(dump)  # sidecars only: the chunk bounds tensor records' reads
    reader.read_calls(final=True)
    report_bad(reader, bad)
    return reader.call_specs()


def module_chains_of(
    dump: RankDump, bad: list[BadLine] | None = None
) -> Callable[[EntryName], ModuleChain | None] | None:
    """The modules each call of a finished dump ran in, as a function of the call's entry; None when
    the dump has no module structure; the sidecar's lines skipped go to ``bad``. Raises OSError when
    that structure is there but cannot be read."""
    reader = open_reader(dump)
    reader.read_modules(final=True)
    report_bad(reader, bad)
    return reader.module_chain if reader.has_modules else None


def module_chain_of(dump: RankDump, entry: EntryName, bad: list[BadLine] | None = None) -> ModuleChain | None:
    """The modules one call of a finished dump ran in; None when the dump has no module structure
    for it; the sidecar's lines skipped go to ``bad``. Raises OSError when that structure is there
    but cannot be read."""
    reader = open_reader(dump)
    reader.read_modules(final=True)
    report_bad(reader, bad)
    return reader.module_chain(entry)
