"""``ptdbg-tui check``: one dump alone, its first non-finite value named at the call that made it, and
that call replayed in float64 to tell an overflow from a kernel wrong on its inputs.

The records are read through the format's reader (ptdbg-tui's, the original's and msprobe's dumps
alike); tensor files are read only where a record's statistics are not finite, or absent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import groupby

import numpy as np

from ptdbg_tui.compare.diagnosis.nonfinite import NonFiniteOrigin, OriginKind, OriginReplay, find_origin
from ptdbg_tui.compare.diagnosis.replay_reasons import CannotRead, Failed, Fixed, WhyNot
from ptdbg_tui.compare.matching.pairing import attach_stacks
from ptdbg_tui.compare.model import Row
from ptdbg_tui.compare.replay.calls import call_rows
from ptdbg_tui.compare.replay.nonfinite import replay_origin
from ptdbg_tui.compare.report.line_words import unreadable_text
from ptdbg_tui.engine.callpath import module_label
from ptdbg_tui.engine.replay.replayer import (
    Replayer,
    ReproInputError,
    dumps_of,
    one_dump,
    side_source,
    torch_importable,
)
from ptdbg_tui.formats.budget import OverBudget, check
from ptdbg_tui.formats.dialects import dialect_of
from ptdbg_tui.formats.files import reason
from ptdbg_tui.formats.layout import RankDump
from ptdbg_tui.formats.reader import DumpReader, open_reader, report_bad
from ptdbg_tui.formats.records import BadLine, StackRecord, TensorRecord
from ptdbg_tui.formats.tensorfile import FILE_ERRORS, data_path, load_tensor, read_tensor


class CheckInputError(ReproInputError):
    """The dump cannot be checked (the message says why)."""


@dataclass
class Checked:
    """One dump's check: its first non-finite value's origin (None: it holds none)."""

    origin: NonFiniteOrigin | None
    bad: list[BadLine] = field(default_factory=list)  # lines of the dump skipped


def count_nonfinite(tensor_dir: str | None, rec: TensorRecord) -> tuple[int, int] | None:
    """The NaN and Inf elements of ``rec``'s tensor file; None where there is no file it can read within
    the memory budget (the statistics decide then)."""
    path = data_path(tensor_dir, rec) if tensor_dir is not None else None
    if path is None:
        return None
    try:
        header, _ = read_tensor(path)
        check(header.nbytes, f"{rec.name}")
        data = np.asarray(load_tensor(path))
    except (*FILE_ERRORS, OSError, OverBudget, ValueError):
        return None
    if not np.issubdtype(data.dtype, np.floating):
        return 0, 0
    return int(np.count_nonzero(np.isnan(data))), int(np.count_nonzero(np.isinf(data)))


@dataclass
class Walk:
    """The dumps at or below a path walked step by step: those of the first step where one holds a
    non-finite value (``found``: each rank dump of that step that does), or none; how many dumps and
    steps were read to get there."""

    found: list[tuple[RankDump, Checked]]
    dumps: int
    steps: int


def check_walk(
    path: str, step: int | None = None, rank: int | None = None, replay: bool = True, background: bool = False
) -> Walk:
    """Check every rank dump at or below ``path`` of that step and rank, in step order, and stop at the
    first step where one holds a non-finite value: a NaN that appears at step 4,000 is found without a
    guess of the step (only the origins found are replayed). Raises :class:`CheckInputError` (or
    :class:`ReproInputError`) where the path holds no dump, or a dump cannot be read."""
    dumps = dumps_of(path, step, rank)  # in (step, rank) order
    read = steps = 0
    for _, of_step in groupby(dumps, key=lambda d: d.step):
        steps += 1
        looked = [_read(d) for d in of_step]
        read += len(looked)
        hit = [r for r in looked if r.checked.origin is not None] or (looked if len(dumps) == 1 else [])
        if hit:
            return Walk([(r.dump, r.replayed(replay, background)) for r in hit], read, steps)
    return Walk([], read, steps)


def check_dump(
    path: str, step: int | None = None, rank: int | None = None, replay: bool = True, background: bool = False
) -> Checked:
    """Check the one rank dump at or below ``path`` of that step and rank (:func:`one_dump`); raises
    :class:`CheckInputError` (or :class:`ReproInputError`) where it cannot be read. ``background``: the
    replay worker's as :class:`Replayer`'s (under the app)."""
    return _read(one_dump(path, step, rank)).replayed(replay, background)


@dataclass
class _Read:
    """A dump read and its origin found, what its replay needs kept until it is asked for."""

    dump: RankDump
    reader: DumpReader
    tensors: list[TensorRecord]
    stacks: dict[str, StackRecord]
    tensor_dir: str | None
    checked: Checked

    def replayed(self, replay: bool, background: bool) -> Checked:
        """The check, with its origin replayed where it is a kernel's (``replay``: else why not)."""
        origin = self.checked.origin
        if origin is not None and origin.kind == OriginKind.KERNEL:
            origin.not_replayed = _replay(
                origin, self.tensors, self.stacks, self.reader, self.tensor_dir, replay, background
            )
        return self.checked


def _read(dump: RankDump) -> _Read:
    reader = open_reader(dump)
    tensors: list[TensorRecord] = []
    stacks: dict[str, StackRecord] = {}
    bad: list[BadLine] = []
    tensor_dir = str(dump.tensor_dir) if dump.has_tensors else None
    try:
        while True:
            batch = reader.read(final=True)
            tensors += batch.tensors
            bad += batch.bad
            stacks.update((s.call, s) for s in batch.stacks)
            if not batch.more:
                break
        if not tensors:
            first = f" (line {bad[0].line}: {unreadable_text(bad[0].reason)})" if bad else ""
            raise CheckInputError(f"{dump.records}: no record could be read{first}")
        after = dialect_of(reader.producer).inputs_after_call
        origin = find_origin(tensors, stacks, lambda rec: count_nonfinite(tensor_dir, rec), after)
    except OSError as e:
        raise CheckInputError(f"cannot read {reason(e)}") from None
    if origin is not None:
        origin.module = _module(reader, tensors, origin.call)
        report_bad(reader, bad)
    return _Read(dump, reader, tensors, stacks, tensor_dir, Checked(origin, bad))


def _module(reader: DumpReader, tensors: list[TensorRecord], call: str) -> str:
    """The innermost module ``call`` ran in; "" without a module structure, or where it cannot be read
    (the origin is named all the same)."""
    entry = next(r.entry for r in tensors if r.call == call and r.entry is not None)
    try:
        reader.read_modules(final=True)
    except OSError:
        return ""
    chain = reader.module_chain(entry)
    return module_label(*chain[-1]) if chain else ""


def _replay(
    origin: NonFiniteOrigin,
    tensors: list[TensorRecord],
    stacks: dict[str, StackRecord],
    reader: DumpReader,
    tensor_dir: str | None,
    replay: bool,
    background: bool,
) -> WhyNot | None:
    """Replay the origin in a worker process (torch there only), its word set on ``origin``; why it was
    not replayed, else (None when it was)."""
    if not replay:
        return Fixed.NOT_ASKED
    if tensor_dir is None:
        return Fixed.STATISTICS_ONLY
    if not torch_importable():
        return Fixed.NO_TORCH
    rows = [Row(rec, None, seq=i) for i, rec in enumerate(tensors)]
    attach_stacks(rows, stacks)  # the call's source line, for a tool that records no keyword arguments
    try:
        source = side_source(reader, tensor_dir)
    except OSError as e:
        return CannotRead(error=reason(e))
    with Replayer(background) as worker:
        try:
            got = worker.run(
                replay_origin, call_rows(rows, origin.call), origin.call, source.only(origin.call)
            )
            done = got.result()
        except Exception as e:  # a worker that died: the origin is still named
            return Failed(error=type(e).__name__, message=str(e), worker=True)
    if not isinstance(done, OriginReplay):
        return done
    origin.replay = done
    return None
