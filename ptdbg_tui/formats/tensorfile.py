"""One way to read a dumped tensor file whatever its format: ``.npy`` (ptdbg) or ``.pt`` (msprobe).

Both give a header (``shape``, ``dtype`` of the values read, ``fortran``, ``nbytes``), the data
whole when small, and the elements chunk by chunk into reused buffers when large. Every failure is
one of :data:`FILE_ERRORS`, with a message for the user.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np

from ptdbg_tui.formats import float8, npy, pt
from ptdbg_tui.formats.files import TensorFileError
from ptdbg_tui.formats.records import TensorRecord

TensorHeader = npy.NpyHeader | pt.PtHeader
FILE_ERRORS = (TensorFileError,)


def _is_pt(path: str | os.PathLike[str]) -> bool:
    return os.fspath(path).endswith(".pt")


def data_path(data_dir: str | os.PathLike[str], record: TensorRecord) -> str | None:
    """Where a record's tensor file is (a str: pathlib costs ~20 µs per entry on big dumps)."""
    name = record.data_file
    return None if name is None else os.path.join(data_dir, name)


def read_tensor(
    path: str | os.PathLike[str], data_limit: float = 0
) -> tuple[TensorHeader, np.ndarray | None]:
    """The checked header, and the data too (read-only) when it is at most ``data_limit`` bytes."""
    return pt.read_pt(path, data_limit) if _is_pt(path) else npy.read_npy(path, data_limit)


def load_tensor(path: str | os.PathLike[str]) -> np.ndarray:
    """The whole array (an npy memory-mapped when large)."""
    return pt.load_pt(path) if _is_pt(path) else npy.load_npy(path)


def iter_chunks(
    path: str | os.PathLike[str],
    header: TensorHeader,
    chunk: int,
    buffer: np.ndarray | None = None,
    start: int = 0,
    stop: int | None = None,
) -> Iterator[np.ndarray]:
    """The elements ``[start, stop)`` in file order, ``chunk`` at a time, into one reused buffer."""
    if isinstance(header, pt.PtHeader):
        return pt.iter_pt_chunks(path, header, chunk, buffer, start, stop)
    return npy.iter_chunks(path, header, chunk, buffer, start, stop)


#: torch's other names of dtypes whose numpy name differs.
_TORCH_ALIASES = {
    "float": "float32",
    "half": "float16",
    "double": "float64",
    "long": "int64",
    "int": "int32",
    "short": "int16",
}


#: torch's floats that numpy has no type for, saved in an npy as float32 (which holds each of their
#: values exactly) under their true dtype in the pkl (docs/formats.md#npy-files); read from msprobe's
#: ``.pt`` files as float32 too.
WIDENED = ("bfloat16", *float8.FORMATS)


def stored_dtypes(recorded: str) -> tuple[str, ...] | None:
    """The numpy dtypes a tensor file read for a tensor recorded as ``recorded`` may yield
    (``None`` for a recorded dtype that says nothing about them, such as a Python scalar's): the
    same, except bfloat16 and float8, saved (ptdbg) or read (msprobe) as float32."""
    name = recorded.removeprefix("torch.")
    if name in WIDENED:
        return ("float32", "bfloat16") if name == "bfloat16" else ("float32",)
    if recorded.startswith("torch."):
        name = _TORCH_ALIASES.get(name, name)
    try:
        return (np.dtype(name).name,)
    except TypeError:
        return None
