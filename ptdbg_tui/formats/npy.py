"""Lazy, checked access to ``.npy`` tensor files.

Every failure becomes an :class:`NpyError` whose message is meant for the user's eyes (it ends
up in the row's Err_message); nothing here raises anything else for bad files.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.lib import format as npformat

#: Files smaller than this are read into memory; larger ones are memory-mapped.
MMAP_THRESHOLD = 1 << 20


class NpyError(Exception):
    """A tensor file is missing, truncated or unreadable."""


@dataclass(frozen=True, slots=True)
class NpyHeader:
    shape: tuple[int, ...]
    dtype: np.dtype
    fortran: bool
    data_offset: int

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


def npy_path(npy_dir: str | os.PathLike[str], name: str) -> Path:
    return Path(npy_dir) / f"{name}.npy"


def read_header(path: str | os.PathLike[str]) -> NpyHeader:
    """Parse the header and check the file holds all the data it announces."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            try:
                version = npformat.read_magic(f)
                reader = npformat.read_array_header_1_0 if version == (1, 0) else npformat.read_array_header_2_0
                shape, fortran, dtype = reader(f)
            except (ValueError, EOFError, SyntaxError) as e:
                raise NpyError(f"Dump file {path.name} is not a valid npy file ({e}).") from None
            offset = f.tell()
            size = os.fstat(f.fileno()).st_size
    except FileNotFoundError:
        raise NpyError(f"Dump file: {path.name} not found.") from None
    except IsADirectoryError:
        raise NpyError(f"Dump file: {path.name} is a directory.") from None
    except OSError as e:
        raise NpyError(f"Dump file {path.name} cannot be read ({e.strerror}).") from None
    if dtype.hasobject:
        raise NpyError(f"Dump file {path.name} holds Python objects; refusing to unpickle it.")
    header = NpyHeader(tuple(shape), dtype, fortran, offset)
    if size - offset < header.nbytes:
        raise NpyError(
            f"Dump file {path.name} is truncated: {size - offset} of {header.nbytes} data bytes present."
        )
    return header


def load_npy(path: str | os.PathLike[str], mmap: bool | None = None) -> np.ndarray:
    """Load an array, memory-mapped when large (or when ``mmap`` says so)."""
    header = read_header(path)
    use_mmap = header.nbytes >= MMAP_THRESHOLD if mmap is None else mmap
    try:
        if use_mmap and header.nbytes > 0:
            return np.lib.format.open_memmap(path, mode="r")
        return np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        raise NpyError(f"Dump file {Path(path).name} cannot be loaded ({e}).") from None
