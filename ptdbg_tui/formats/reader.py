"""One way to read a rank dump whatever its format: what the engine and the batch compare use.

A :class:`DumpReader` follows one rank folder: :meth:`~DumpReader.read` returns the records added
since the last call (``reset`` when earlier ones are void), :meth:`~DumpReader.read_modules` picks
up the module structure (ptdbg-tui's sidecar, msprobe's construct.json),
:meth:`~DumpReader.module_chain` says which ``nn.Module``s a call ran in,
:meth:`~DumpReader.read_calls` and :meth:`~DumpReader.call_spec` give what a replay of a call needs
(ptdbg-tui's call sidecar), and
:attr:`~DumpReader.producer` which tool wrote the dump, as far as it shows (two tools record some
tensors differently: see :mod:`ptdbg_tui.compare.matching`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Protocol

from ptdbg_tui.formats.calls import CallFollower, CallSpec, calls_path
from ptdbg_tui.formats.layout import RankDump
from ptdbg_tui.formats.modules import ModuleChain, ModuleFollower, sidecar_path
from ptdbg_tui.formats.msprobe import MsprobeFollower
from ptdbg_tui.formats.naming import BACKWARD, STYLE_MSPROBE, STYLE_PTDBG, EntryName
from ptdbg_tui.formats.pkl import DEFAULT_CHUNK, PklBatch, PklFollower
from ptdbg_tui.formats.records import StackRecord, TensorRecord

#: The original ptdbg_ascend: its stack lines start in its own hook module.
ORIGINAL_PTDBG = "ptdbg_ascend"
_ORIGINAL_FRAME = "/ptdbg_ascend/hook_module/"


def producer(fmt: str, stacks: Iterable[StackRecord], tensors: Iterable[TensorRecord] = ()) -> str | None:
    """The tool that wrote a dump of format ``fmt`` with these stacks and records: ``msprobe``,
    ``ptdbg_ascend``, ``ptdbg`` (this project's dumper), or ``None`` while nothing says (a pkl
    without stack lines so far)."""
    if fmt == STYLE_MSPROBE:
        return STYLE_MSPROBE
    for stack in stacks:
        if stack.frames:
            return ORIGINAL_PTDBG if _ORIGINAL_FRAME in stack.frames[0][0].replace("\\", "/") else STYLE_PTDBG
    return ORIGINAL_PTDBG if original_detach(tensors)[0] else None


def original_detach(tensors: Iterable[TensorRecord], backward: bool = False) -> tuple[bool, bool]:
    """Whether the records show the original's mark where it writes no stack lines (its mode
    ``all``): its backward hooks detach each tensor they record through the wrapped
    ``Tensor.detach``, which it records as a forward call after a backward one. Also whether a
    backward record was seen (``backward``: one was, in earlier records)."""
    for rec in tensors:
        entry = rec.entry
        if entry is None:
            continue
        if entry.direction == BACKWARD:
            backward = True
        elif backward and is_detach(rec):
            return True, backward
    return False, backward


def is_detach(rec: TensorRecord) -> bool:
    """A ``Tensor_detach`` call: the original's hooks record their own (see :func:`original_detach`)."""
    return rec.entry is not None and rec.entry.key[:2] == ("Tensor", "detach")


class DumpReader(Protocol):
    def read(self, final: bool = False) -> PklBatch: ...

    def read_modules(self, final: bool = False) -> bool: ...

    def module_chain(self, entry: EntryName) -> ModuleChain | None: ...

    def read_calls(self, final: bool = False) -> bool: ...

    def call_spec(self, call: str) -> CallSpec | None: ...

    @property
    def has_modules(self) -> bool: ...

    @property
    def producer(self) -> str | None: ...


class PklReader:
    """A ptdbg pkl and, when the project's dumper wrote them, its module and call sidecars."""

    def __init__(self, dump: RankDump, chunk: int = DEFAULT_CHUNK) -> None:
        self._pkl = PklFollower(dump.pkl, chunk)
        self._modules = ModuleFollower(sidecar_path(dump.pkl))
        self._calls = CallFollower(calls_path(dump.pkl))
        self.producer: str | None = None
        self._backward = False  # a backward record was read (while no stack line says the tool)

    def read(self, final: bool = False) -> PklBatch:
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


def open_reader(dump: RankDump, chunk: int = DEFAULT_CHUNK) -> DumpReader:
    """The reader for a rank dump's format (``chunk``: bytes a read decodes at most, about)."""
    return MsprobeFollower(dump.pkl, chunk) if dump.format == STYLE_MSPROBE else PklReader(dump, chunk)


def read_dump(dump: RankDump) -> PklBatch:
    """Every record of a finished rank dump."""
    if dump.format == STYLE_MSPROBE:
        return MsprobeFollower(dump.pkl, math.inf).read(final=True)
    return PklFollower(dump.pkl).read_all()


def mixed_pair(npu: str | None, bench: str | None) -> bool:
    """Whether two dumps' producers differ (a pkl whose stacks do not say counts as ptdbg's)."""
    return (npu or STYLE_PTDBG) != (bench or STYLE_PTDBG)


def autograd_order(npu: str | None, bench: str | None) -> tuple[bool, bool]:
    """Per side, whether its producer records a backward's gradients in autograd-node order
    (msprobe, the original) rather than by forward argument (ours)."""
    return npu in (STYLE_MSPROBE, ORIGINAL_PTDBG), bench in (STYLE_MSPROBE, ORIGINAL_PTDBG)
