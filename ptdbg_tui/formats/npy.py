"""Lazy, checked access to ``.npy`` tensor files.

Every failure becomes an :class:`NpyError` whose message is meant for the user's eyes (it ends
up in the row's Err_message); nothing here raises anything else for bad files.

Dumps hold thousands of small files, so the common case is fast: the header ``np.save`` writes
is parsed with one regular expression (numpy's own parser, an ``ast`` evaluation, handles the
rest), and a small file is read with one open and one read.
"""

from __future__ import annotations

import io
import math
import os
import re
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
from numpy.lib import format as npformat

from ptdbg_tui.formats.files import TENSOR_FILE, TensorFileError, describe, open_regular

#: Files smaller than this are read into memory; larger ones are memory-mapped.
MMAP_THRESHOLD = 1 << 20
_MAGIC = b"\x93NUMPY"
_PREFIX = 256  # header bytes read first (np.save pads its headers to 128 bytes)
#: The longest header read (numpy's parser refuses more than 10,000 bytes unless told otherwise).
MAX_HEADER = 10_000
_ADDRESS = re.compile(r"<[^<>]* at 0x[0-9a-fA-F]+>")
_SAVED_HEADER = re.compile(
    rb"\{'descr': '([<>|=]?[A-Za-z]\d*)', 'fortran_order': (True|False), 'shape': \(([\d, ]*)\), \}\s*$"
)


class NpyError(TensorFileError):
    """An npy file is missing, truncated or unreadable."""


@dataclass(frozen=True, slots=True)
class NpyHeader:
    shape: tuple[int, ...]
    dtype: np.dtype
    fortran: bool
    data_offset: int

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


def npy_path(tensor_dir: str | os.PathLike[str], name: str) -> str:
    """``tensor_dir/name.npy`` (a str: pathlib would cost ~20 µs per entry on big dumps)."""
    return os.path.join(tensor_dir, f"{name}.npy")


def open_error(e: OSError, name: str) -> str:
    """Why a dump file could not be opened, for the user (tensor file readers share it)."""
    if isinstance(e, FileNotFoundError):
        return f"Dump file: {name} not found."
    if isinstance(e, IsADirectoryError):
        return f"Dump file: {name} is a directory."
    return f"Dump file {name} cannot be read ({describe(e)})."


def _name(path: str | os.PathLike[str]) -> str:
    return os.path.basename(os.fspath(path))


def _parse(
    head: bytes, read_more: Callable[[int], bytes]
) -> tuple[tuple[int, ...], bool, np.dtype, int, bytes]:
    """``(shape, fortran, dtype, data offset, bytes read)``; ValueError/EOFError when invalid."""
    if not head:
        raise ValueError("the file is empty: 0 bytes")
    if len(head) < 10 or not head.startswith(_MAGIC):
        raise ValueError("no npy magic string")
    major = head[6]
    if major == 1:
        start, length = 10, struct.unpack_from("<H", head, 8)[0]
    elif major in (2, 3):
        if len(head) < 12:
            raise EOFError("header is cut short")
        start, length = 12, struct.unpack_from("<I", head, 8)[0]
    else:
        raise ValueError(f"unsupported npy format version {major}")
    if length > MAX_HEADER:  # numpy's own parser refuses such a header too; never read it
        raise ValueError(f"its header claims {length} bytes, more than an npy header's {MAX_HEADER}")
    end = start + length
    if len(head) < end:
        head += read_more(end - len(head))
        if len(head) < end:
            raise EOFError("header is cut short")
    m = _SAVED_HEADER.match(head[start:end])
    if m:
        shape = tuple(int(d) for d in m.group(3).split(b",") if d.strip())
        return shape, m.group(2) == b"True", np.dtype(m.group(1).decode()), end, head
    stream = io.BytesIO(head[:end])
    version = npformat.read_magic(stream)
    reader = npformat.read_array_header_1_0 if version == (1, 0) else npformat.read_array_header_2_0
    shape, fortran, dtype = reader(stream)
    return tuple(shape), fortran, dtype, end, head


def read_npy(path: str | os.PathLike[str], data_limit: float = 0) -> tuple[NpyHeader, np.ndarray | None]:
    """The checked header, and the data too (read-only) when it is at most ``data_limit`` bytes."""
    try:
        fd, st = open_regular(path, TENSOR_FILE)
        try:
            return _read_fd(fd, st.st_size, path, data_limit)
        finally:
            os.close(fd)
    except OSError as e:
        raise NpyError(open_error(e, _name(path)), isinstance(e, FileNotFoundError)) from None


def _read_fd(
    fd: int, size: int, path: str | os.PathLike[str], data_limit: float
) -> tuple[NpyHeader, np.ndarray | None]:
    head = os.read(fd, size if size <= _PREFIX + data_limit else _PREFIX)  # one read for a small file
    try:
        shape, fortran, dtype, offset, head = _parse(head, lambda n: os.read(fd, n))
    except OSError:
        raise
    except Exception as e:  # numpy's header parser raises many kinds (tokenize's TokenError too)
        detail = _ADDRESS.sub("an expression", str(e))  # ast's repr of a node is no help to anyone
        raise NpyError(f"Dump file {_name(path)} is not a valid npy file ({detail}).") from None
    header = NpyHeader(shape, dtype, fortran, offset)
    if dtype.hasobject:
        raise NpyError(f"Dump file {_name(path)} holds Python objects; refusing to unpickle it.")
    nbytes = header.nbytes
    if size - offset < nbytes:
        raise NpyError(
            f"Dump file {_name(path)} is truncated: {size - offset} of {nbytes} data bytes present."
        )
    if nbytes > data_limit:
        return header, None
    data = head[offset : offset + nbytes]
    if len(data) < nbytes:
        data += os.pread(fd, nbytes - len(data), offset + len(data))
    try:
        array = np.frombuffer(data, dtype=dtype, count=math.prod(shape))
    except ValueError as e:
        raise NpyError(f"Dump file {_name(path)} cannot be loaded ({e}).") from None
    return header, array.reshape(shape, order="F" if fortran else "C")


def read_header(path: str | os.PathLike[str]) -> NpyHeader:
    """Parse the header and check the file holds all the data it announces."""
    return read_npy(path)[0]


def load_npy(path: str | os.PathLike[str], mmap: bool | None = None) -> np.ndarray:
    """Load an array, memory-mapped when large (or when ``mmap`` says so)."""
    header, array = read_npy(path, MMAP_THRESHOLD - 1 if mmap is None else (0 if mmap else math.inf))
    if array is not None:
        return array
    if header.nbytes == 0:
        return np.empty(header.shape, header.dtype)
    try:  # mapped from the file opened and checked, not from its path looked up again
        with os.fdopen(open_regular(path, TENSOR_FILE)[0], "rb") as f:
            return np.memmap(
                f,
                header.dtype,
                "r",
                header.data_offset,
                header.shape,
                "F" if header.fortran else "C",
            )
    except (ValueError, OSError, EOFError) as e:
        raise NpyError(f"Dump file {_name(path)} cannot be loaded ({e}).") from None


def iter_chunks(
    path: str | os.PathLike[str],
    header: NpyHeader,
    chunk: int,
    buffer: np.ndarray | None = None,
    start: int = 0,
    stop: int | None = None,
) -> Iterator[np.ndarray]:
    """The data in file order, ``chunk`` elements at a time, read into one reused buffer.

    Each yielded array is overwritten by the next one. Reading a file instead of mapping it keeps
    the resident memory at one buffer however large the tensor (a map's touched pages count).
    ``buffer``: a uint8 array of at least ``chunk`` elements' bytes to read into (else a new one).
    ``start``/``stop``: the elements ``[start, stop)`` only (a part of a tensor split into tasks).
    """
    total = math.prod(header.shape) if stop is None else min(stop, math.prod(header.shape))
    n = max(1, min(chunk, total - start))
    if buffer is None:
        buf = np.empty(n, dtype=header.dtype)
    else:
        buf = buffer[: n * header.dtype.itemsize].view(header.dtype)
    try:
        with os.fdopen(open_regular(path, TENSOR_FILE)[0], "rb", buffering=0) as f:
            if hasattr(os, "posix_fadvise"):
                os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_SEQUENTIAL)
            f.seek(header.data_offset + start * header.dtype.itemsize)
            for at in range(start, total, buf.size):
                view = buf[: min(buf.size, total - at)]
                raw = view.view(np.uint8).reshape(-1).data
                got = 0
                while got < raw.nbytes:
                    n = f.readinto(raw[got:])
                    if not n:
                        raise NpyError(f"Dump file {_name(path)} is truncated: it shrank while being read.")
                    got += n
                yield view
    except OSError as e:
        raise NpyError(f"Dump file {_name(path)} cannot be read ({e.strerror or e}).") from None
