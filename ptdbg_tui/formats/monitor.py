"""The training monitor's files (``ptdbg-dump run --monitor DIR``): one Arrow IPC stream per rank,
``monitor_rank<R>.arrows``, one record batch per recorded step (docs/monitor.md).

The schema is defined here once, for the dumper that writes and for the readers. Its rows are long:
one row per (step, kind, name). A step's scalars are rows of their own (``loss``, ``lr`` per param
group, ``loss_scale``, ``skipped``) with ``value`` set; a module's forward output (``output``) and a
parameter's gradient (``grad``), update (``update``: after − before the optimizer step) and value
after the update (``param``) carry statistics. A column that does not apply to a kind is null.

A stream is read while it is written, and a file cut mid-batch (a killed run) gives back the steps
finished before the cut: :class:`MonitorStream` reads the whole record batches and says how many
bytes were left after the last one. Its bytes are untrusted: the schema must be this one, the file
within the entry budget (:mod:`ptdbg_tui.formats.budget`). pyarrow is an optional dependency (the
``dump`` and ``monitor`` extras): without it, :class:`MonitorUnavailable` says how to install it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

from ptdbg_tui.formats import budget

#: pyarrow's objects (pyarrow ships no type information): a ``pyarrow.Schema``, ``RecordBatch``, ``Table``.
Schema: TypeAlias = Any
Batch: TypeAlias = Any
Table: TypeAlias = Any

#: The file of one rank in a monitor folder.
FILE_PATTERN = "monitor_rank{rank}.arrows"
_FILE_RE = re.compile(r"^monitor_rank(\d+)\.arrows$")

#: Row kinds. Step scalars (``value``): the loss (the tensor ``backward()`` was called on, unscaled
#: when it came from a GradScaler; the mean over the step's backward calls), a param group's lr
#: (``name`` is the group's index), the GradScaler's scale, and ``skipped`` (1: a GradScaler found
#: non-finite gradients and the optimizer did not step).
LOSS, LR, LOSS_SCALE, SKIPPED = "loss", "lr", "loss_scale", "skipped"
#: Statistics rows: a module's forward output (``name``: the module path as the dump's module
#: sidecar names it), a parameter's gradient, update and value after the update (``name``: its
#: qualified name, or ``group<G>.<I>`` when no module seen holds it).
OUTPUT, GRAD, UPDATE, PARAM = "output", "grad", "update", "param"
KINDS = (LOSS, LR, LOSS_SCALE, SKIPPED, OUTPUT, GRAD, UPDATE, PARAM)

#: The columns, in order, with their Arrow type names. ``iteration`` counts the recorded step ends
#: (a step skipped by a GradScaler included); ``step`` is the number of ``optimizer.step()`` calls made
#: before, as ``ptdbg-dump run --step`` counts steps. ``calls``: how many forward calls (``output``)
#: or backward calls (``loss``) the row sums up. ``norm`` is the L2 norm; ``mean`` over all elements
#: of all calls; ``nan``/``inf``: element counts (for ``grad``/``update``/``param``: counted only when
#: the norm is not finite, else 0).
COLUMNS: tuple[tuple[str, str], ...] = (
    ("iteration", "int64"),
    ("step", "int64"),
    ("kind", "string"),
    ("name", "string"),
    ("value", "float64"),
    ("norm", "float64"),
    ("mean", "float64"),
    ("max", "float64"),
    ("min", "float64"),
    ("nan", "int64"),
    ("inf", "int64"),
    ("calls", "int64"),
)
#: Written into the schema's metadata; a reader refuses another.
SCHEMA_VERSION = "1"
_META_KEY = b"ptdbg_monitor"
#: What every message of an IPC stream starts with, and its end-of-stream marker (that and a zero length).
_CONTINUATION = b"\xff\xff\xff\xff"
_END = _CONTINUATION + b"\x00\x00\x00\x00"


class MonitorUnavailable(ImportError):
    """pyarrow is not installed: the monitor's files cannot be written or read."""


class MonitorFileError(Exception):
    """A file that is not a monitor stream of this schema (the message says what is wrong)."""


def pyarrow() -> Any:
    """The pyarrow module, or :class:`MonitorUnavailable` with the way to install it."""
    try:
        import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
        import pyarrow.ipc  # type: ignore[import-untyped,unused-ignore]  # not loaded by ``import pyarrow``
    except ImportError as e:
        raise MonitorUnavailable(
            "the training monitor's files need pyarrow: pip install 'ptdbg-tui[monitor]' "
            f"(or pip install pyarrow) ({e})"
        ) from None
    return pa


def schema() -> Schema:
    """The Arrow schema of :data:`COLUMNS`."""
    pa = pyarrow()
    return pa.schema(
        [pa.field(name, getattr(pa, kind)()) for name, kind in COLUMNS],
        metadata={_META_KEY: SCHEMA_VERSION.encode()},
    )


def file_name(rank: int) -> str:
    return FILE_PATTERN.format(rank=rank)


def rank_files(folder: Path) -> dict[int, Path]:
    """The monitor files of a folder by rank."""
    found = {}
    for path in folder.iterdir() if folder.is_dir() else ():
        m = _FILE_RE.match(path.name)
        if m and path.is_file():
            found[int(m.group(1))] = path
    return dict(sorted(found.items()))


@dataclass
class MonitorStream:
    """One rank's stream, read as far as it is written: :meth:`poll` reads the record batches that
    are whole since the last poll. ``cut`` is the number of bytes after the last whole batch (a step
    being written, or the end of a killed run); ``ended``: the writer closed the stream."""

    path: Path
    batches: list[Batch] = field(default_factory=list)
    cut: int = 0
    ended: bool = False
    _schema_bytes: bytes = b""
    _offset: int = 0  # the file offset after the last whole batch

    def poll(self) -> list[Batch]:
        """The batches written whole since the last poll (also appended to :attr:`batches`)."""
        pa = pyarrow()
        with self.path.open("rb") as f:
            size = f.seek(0, 2)
            budget.check(size, f"monitor file {self.path.name}")
            f.seek(self._offset)
            tail = f.read(size - self._offset)
        data = self._schema_bytes + tail
        if len(data) >= len(_CONTINUATION) and not data.startswith(_CONTINUATION):
            raise MonitorFileError(f"{self.path.name} is not an Arrow IPC stream")
        source = pa.BufferReader(data)
        try:
            messages = pa.ipc.MessageReader.open_stream(source)
            schema_read = self._read_schema(pa, messages)
        except (pa.ArrowInvalid, OSError, StopIteration):
            self.cut = len(data)  # not even the schema is whole yet
            return []
        if not self._schema_bytes:
            self._schema_bytes = data[: source.tell()]
            self._offset = source.tell()
        start, new = source.tell(), []
        while True:
            try:
                message = messages.read_next_message()
            except StopIteration:  # the end-of-stream marker, or no more bytes
                break
            except (pa.ArrowInvalid, OSError):  # a batch cut short: not whole yet
                break
            try:
                batch = pa.ipc.read_record_batch(message, schema_read)
            except (pa.ArrowInvalid, OSError) as e:
                raise MonitorFileError(f"{self.path.name}: a record batch is not readable ({e})") from None
            new.append(batch)
            self._offset += source.tell() - start
            start = source.tell()
        self.ended = data[start : start + len(_END)] == _END
        self.cut = 0 if self.ended else len(data) - start
        self.batches += new
        return new

    def _read_schema(self, pa: Any, messages: Any) -> Schema:
        got = pa.ipc.read_schema(messages.read_next_message())
        meta = got.metadata or {}
        if meta.get(_META_KEY) != SCHEMA_VERSION.encode() or not got.equals(schema(), check_metadata=False):
            raise MonitorFileError(
                f"{self.path.name} is not a monitor stream of schema version {SCHEMA_VERSION} "
                f"(its columns: {', '.join(got.names)[:300]})"
            )
        return got

    def table(self) -> Table:
        """Every batch read so far as one table."""
        return pyarrow().Table.from_batches(self.batches, schema=schema())


def read_monitor(path: Path) -> MonitorStream:
    """A monitor file read as far as it is whole now."""
    stream = MonitorStream(path)
    stream.poll()
    return stream
