"""One way to read a rank dump whatever its format: what the engine and the batch compare use.

A :class:`DumpReader` follows one rank folder: :meth:`~DumpReader.read` returns the records added
since the last call (``reset`` when earlier ones are void), :meth:`~DumpReader.read_modules` picks
up the module structure (ptdbg-tui's sidecar, msprobe's construct.json), and
:meth:`~DumpReader.module_chain` says which ``nn.Module``s a call ran in.
"""

from __future__ import annotations

from typing import Protocol

from ptdbg_tui.formats.layout import RankDump
from ptdbg_tui.formats.modules import ModuleChain, ModuleFollower, sidecar_path
from ptdbg_tui.formats.msprobe import MsprobeFollower
from ptdbg_tui.formats.naming import STYLE_MSPROBE, EntryName
from ptdbg_tui.formats.pkl import DEFAULT_CHUNK, PklBatch, PklFollower


class DumpReader(Protocol):
    def read(self, final: bool = False) -> PklBatch: ...

    def read_modules(self, final: bool = False) -> bool: ...

    def module_chain(self, entry: EntryName) -> ModuleChain | None: ...

    @property
    def has_modules(self) -> bool: ...


class PklReader:
    """A ptdbg pkl and, when the project's dumper wrote one, its module sidecar."""

    def __init__(self, dump: RankDump, chunk: int = DEFAULT_CHUNK) -> None:
        self._pkl = PklFollower(dump.pkl, chunk)
        self._modules = ModuleFollower(sidecar_path(dump.pkl))

    def read(self, final: bool = False) -> PklBatch:
        batch = self._pkl.read(final)
        if batch.reset:  # a restarted dump: its sidecar starts over too
            self._modules = ModuleFollower(self._modules.path)
        return batch

    def read_modules(self, final: bool = False) -> bool:
        return bool(self._modules.read(final))

    def module_chain(self, entry: EntryName) -> ModuleChain | None:
        return self._modules.chains.get(entry.label)

    @property
    def has_modules(self) -> bool:
        return bool(self._modules.chains)


def open_reader(dump: RankDump, chunk: int = DEFAULT_CHUNK) -> DumpReader:
    """The reader for a rank dump's format (``chunk``: bytes per pkl read)."""
    return MsprobeFollower(dump.pkl) if dump.format == STYLE_MSPROBE else PklReader(dump, chunk)


def read_dump(dump: RankDump) -> PklBatch:
    """Every record of a finished rank dump."""
    if dump.format == STYLE_MSPROBE:
        return MsprobeFollower(dump.pkl).read(final=True)
    return PklFollower(dump.pkl).read_all()
