"""Reading dumps whatever the tool that wrote them (ptdbg_ascend v4 and this project's dumper:
pkl + npy; msprobe: dump.json + pt), and writing ptdbg v4 ones: no UI, no torch.

A rank dump is a records file and a tensor folder (:class:`RankDump`); :func:`open_reader` follows
one and returns :class:`RecordBatch`es of the same record model for every format; tensor files are
read by :mod:`~ptdbg_tui.formats.tensorfile`. How the tools differ in what they record is
:mod:`~ptdbg_tui.formats.dialects`.
"""

from ptdbg_tui.formats.layout import (
    DumpLayoutError,
    RankDump,
    Scan,
    discover,
    pair_dumps,
    rank_dir_path,
    scan,
)
from ptdbg_tui.formats.naming import EntryName, entry_name, parse_name
from ptdbg_tui.formats.reader import DumpReader, open_reader, read_dump
from ptdbg_tui.formats.records import BadLine, Frame, RecordBatch, StackRecord, TensorRecord
from ptdbg_tui.formats.tensorfile import load_tensor, read_tensor
from ptdbg_tui.formats.writer import RankWriter

__all__ = [
    "BadLine",
    "DumpLayoutError",
    "DumpReader",
    "EntryName",
    "Frame",
    "RankDump",
    "RankWriter",
    "RecordBatch",
    "Scan",
    "StackRecord",
    "TensorRecord",
    "discover",
    "entry_name",
    "load_tensor",
    "open_reader",
    "pair_dumps",
    "parse_name",
    "rank_dir_path",
    "read_dump",
    "read_tensor",
    "scan",
]
