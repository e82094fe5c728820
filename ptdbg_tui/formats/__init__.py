"""Reading ptdbg v4 and msprobe dumps, writing ptdbg v4 ones: no UI, no torch."""

from ptdbg_tui.formats.layout import DumpLayoutError, RankDump, discover, pair_dumps, rank_dir_path
from ptdbg_tui.formats.naming import EntryName, entry_name, parse_name
from ptdbg_tui.formats.npy import NpyError, load_npy, read_header
from ptdbg_tui.formats.pkl import PklBatch, PklFollower, read_pkl
from ptdbg_tui.formats.records import BadLine, StackRecord, TensorRecord
from ptdbg_tui.formats.writer import RankWriter

__all__ = [
    "BadLine", "DumpLayoutError", "EntryName", "NpyError", "PklBatch", "PklFollower", "RankDump",
    "RankWriter", "StackRecord", "TensorRecord", "discover", "entry_name", "load_npy", "pair_dumps",
    "parse_name", "rank_dir_path", "read_header", "read_pkl",
]
