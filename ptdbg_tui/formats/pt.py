"""Tensors saved by ``torch.save`` (msprobe's ``.pt`` files), read without torch and without ever
unpickling anything but a tensor.

A torch.save file is a zip whose members are stored uncompressed (a small one's central directory is
read here directly; anything unusual goes through :mod:`zipfile`): ``<archive>/data.pkl`` describes
the object, ``<archive>/data/<key>`` holds each storage's raw bytes and ``<archive>/byteorder`` says
``little`` or ``big``. data.pkl is read by a restricted unpickler that knows only what one tensor
needs (``torch._utils._rebuild_tensor_v2``/``_v3``, ``_rebuild_parameter``, the storage type and
dtype names, ``collections.OrderedDict`` for the hooks), each mapped to a stand-in of ours: any
other global stops the load before anything is called, so a crafted file cannot run code. The
tensor's bytes are then read from the zip like an npy's: whole when small, else chunk by chunk.

Every failure is a :class:`PtError` whose message is meant for the user (it lands in Err_message).
"""

from __future__ import annotations

import io
import math
import os
import pickle
import struct
import zipfile
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO, NamedTuple

import numpy as np

from ptdbg_tui.formats import float8
from ptdbg_tui.formats.budget import check
from ptdbg_tui.formats.files import TENSOR_FILE, TensorFileError, describe, open_regular
from ptdbg_tui.formats.npy import NpyHeader, iter_chunks, open_error

#: Files up to this size are read with one read and unzipped in memory.
SMALL_FILE = 1 << 20
#: Storage type -> numpy dtype; ``bfloat16`` and the float8 formats (read as their bits) are widened to
#: float32. torch names no storage type after the dtypes it added later (uint16+, float8): it saves them
#: as an ``UntypedStorage`` and names the dtype, here given a storage name of the same pattern.
STORAGE_DTYPES = {
    "FloatStorage": "f4",
    "DoubleStorage": "f8",
    "HalfStorage": "f2",
    "BFloat16Storage": "bfloat16",
    "LongStorage": "i8",
    "IntStorage": "i4",
    "ShortStorage": "i2",
    "CharStorage": "i1",
    "ByteStorage": "u1",
    "BoolStorage": "?",
    "ComplexFloatStorage": "c8",
    "ComplexDoubleStorage": "c16",
    "UInt16Storage": "u2",
    "UInt32Storage": "u4",
    "UInt64Storage": "u8",
    **{f"{name.capitalize()}Storage": name for name in float8.FORMATS},
}
#: ``torch.<dtype>`` globals (``_rebuild_tensor_v3`` names the dtype) -> storage type.
TORCH_DTYPES = {
    "float32": "FloatStorage",
    "float": "FloatStorage",
    "float64": "DoubleStorage",
    "double": "DoubleStorage",
    "float16": "HalfStorage",
    "half": "HalfStorage",
    "bfloat16": "BFloat16Storage",
    "int64": "LongStorage",
    "long": "LongStorage",
    "int32": "IntStorage",
    "int": "IntStorage",
    "int16": "ShortStorage",
    "short": "ShortStorage",
    "int8": "CharStorage",
    "uint8": "ByteStorage",
    "bool": "BoolStorage",
    "complex64": "ComplexFloatStorage",
    "complex128": "ComplexDoubleStorage",
    "uint16": "UInt16Storage",
    "uint32": "UInt32Storage",
    "uint64": "UInt64Storage",
    **{name: f"{name.capitalize()}Storage" for name in float8.FORMATS},
}
_LOCAL_HEADER = struct.Struct("<4s22xHH")  # signature, ..., file name length, extra field length
_LOCAL_SIG = b"PK\x03\x04"
#: End of central directory: signature, disk, directory's disk, entries here, entries, size, offset,
#: comment length.
_EOCD = struct.Struct("<4s4H2LH")
_EOCD_SIG = b"PK\x05\x06"
#: Central directory header: signature, 6 shorts (versions, flags, method, time, date), crc, sizes,
#: 5 shorts (name, extra and comment lengths, disk, internal attributes), external attributes, offset.
_CENTRAL = struct.Struct("<4s6H3L5H2L")
_CENTRAL_SIG = b"PK\x01\x02"
_BF16 = "bfloat16"
#: The widened dtypes (their code in STORAGE_DTYPES) -> the bits a file holds of them.
_BITS = {_BF16: "<u2", **dict.fromkeys(float8.FORMATS, "u1")}
_UNTYPED = "UntypedStorage"


class PtError(TensorFileError):
    """A ``.pt`` file is missing, truncated, not a tensor, or unreadable."""


class _StorageType(NamedTuple):
    name: str


class _TorchDtype(NamedTuple):
    storage: str


class _Storage(NamedTuple):
    type: str
    key: str
    numel: int


class _Tensor(NamedTuple):
    storage: _Storage
    offset: int
    size: tuple[int, ...]
    stride: tuple[int, ...]


def _rebuild_tensor(storage: Any, storage_offset: Any, size: Any, stride: Any, *_: Any) -> _Tensor:
    if not isinstance(storage, _Storage):
        raise pickle.UnpicklingError("a tensor without a storage")
    try:
        return _Tensor(
            storage, int(storage_offset), tuple(int(d) for d in size), tuple(int(s) for s in stride)
        )
    except (TypeError, ValueError):
        raise pickle.UnpicklingError("a tensor with a malformed size or stride") from None


def _rebuild_tensor_v3(
    storage: Any,
    storage_offset: Any,
    size: Any,
    stride: Any,
    requires_grad: Any,
    hooks: Any,
    dtype: Any,
    *_: Any,
) -> _Tensor:
    if isinstance(dtype, _TorchDtype) and isinstance(storage, _Storage):
        code = STORAGE_DTYPES[dtype.storage]
        # an untyped storage counts bytes
        numel = storage.numel // _raw(code).itemsize if storage.type == _UNTYPED else storage.numel
        storage = _Storage(dtype.storage, storage.key, numel)
    return _rebuild_tensor(storage, storage_offset, size, stride)


def _raw(code: str) -> np.dtype:
    """What a file holds of a storage of ``code`` (its bits for a widened dtype)."""
    return np.dtype(_BITS.get(code, code))


def _rebuild_parameter(data: Any, *_: Any) -> Any:
    return data


_CALLABLES: dict[tuple[str, str], Any] = {
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_tensor_v3"): _rebuild_tensor_v3,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("collections", "OrderedDict"): OrderedDict,
}


class _TensorUnpickler(pickle.Unpickler):
    """Knows the names a saved tensor uses and nothing else."""

    def find_class(self, module: str, name: str) -> Any:
        found = _CALLABLES.get((module, name))
        if found is not None:
            return found
        if (module == "torch" and name in STORAGE_DTYPES) or (module, name) == ("torch.storage", _UNTYPED):
            return _StorageType(name)
        if module == "torch" and name in TORCH_DTYPES:
            return _TorchDtype(TORCH_DTYPES[name])
        raise pickle.UnpicklingError(f"it refers to {module}.{name}, which is not part of a tensor")

    def persistent_load(self, pid: Any) -> _Storage:
        if isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage":
            _, kind, key, _location, numel = pid
            if isinstance(kind, _StorageType) and isinstance(numel, int):
                return _Storage(kind.name, str(key), numel)
        raise pickle.UnpicklingError("it holds a storage reference that is not a tensor storage")


@dataclass(frozen=True, slots=True)
class PtHeader:
    """Where a saved tensor's elements are. ``dtype`` is what reading yields (float32 for bf16 and
    float8), ``raw`` what the file holds; ``data_offset`` is -1 when the elements are not one contiguous
    run."""

    shape: tuple[int, ...]
    dtype: np.dtype
    raw: np.dtype
    data_offset: int
    fortran: bool = False
    widened: str = ""  # the dtype read as its bits and widened (``bfloat16``, ``float8_e4m3fn``)

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.raw.itemsize


@dataclass(frozen=True, slots=True)
class _Parsed:
    header: PtHeader
    tensor: _Tensor
    data_start: int  # file offset of the storage's first byte
    storage_bytes: int


def _name(path: str | os.PathLike[str]) -> str:
    return os.path.basename(os.fspath(path))


def _c_contiguous(size: tuple[int, ...], stride: tuple[int, ...]) -> bool:
    expected = 1
    for d, s in zip(reversed(size), reversed(stride), strict=True):
        if d != 1 and s != expected:
            return False
        expected *= d
    return True


class _Member(NamedTuple):
    offset: int  # of its local header
    size: int
    stored: bool


def _central(blob: bytes) -> dict[str, _Member] | None:
    """The members of an in-memory zip from its central directory; ``None`` for anything but the
    plain layout torch.save writes (zipfile then reads it: it costs ~0.2 ms a file, and a dump holds
    thousands of small ones)."""
    end = len(blob) - _EOCD.size
    if end < 0 or blob[end : end + 4] != _EOCD_SIG:
        return None
    _, disk, cd_disk, here, total, cd_size, cd_offset, _ = _EOCD.unpack_from(blob, end)
    if disk or cd_disk or here != total or cd_offset + cd_size > end:
        return None
    members: dict[str, _Member] = {}
    pos = cd_offset
    for _ in range(total):
        if blob[pos : pos + 4] != _CENTRAL_SIG:
            return None
        f = _CENTRAL.unpack_from(blob, pos)
        method, size, n_name, n_extra, n_comment, offset = f[4], f[8], f[10], f[11], f[12], f[16]
        if size == 0xFFFFFFFF or offset == 0xFFFFFFFF:  # zip64 fields
            return None
        name = blob[pos + _CENTRAL.size : pos + _CENTRAL.size + n_name].decode("utf-8", "replace")
        members[name.partition("/")[2]] = _Member(offset, size, method == zipfile.ZIP_STORED)
        pos += _CENTRAL.size + n_name + n_extra + n_comment
    return members


def _listed(f: BinaryIO) -> dict[str, _Member]:
    with zipfile.ZipFile(f) as zf:
        return {
            i.filename.partition("/")[2]: _Member(
                i.header_offset, i.compress_size, i.compress_type == zipfile.ZIP_STORED
            )
            for i in zf.infolist()
        }


def _start(f: BinaryIO, m: _Member, name: str) -> int:
    """File offset of a stored member's data."""
    if not m.stored:
        raise PtError(f"Dump file {name} holds compressed members (torch.save never does): not supported.")
    f.seek(m.offset)
    sig, n_name, n_extra = _LOCAL_HEADER.unpack(f.read(_LOCAL_HEADER.size))
    if sig != _LOCAL_SIG:
        raise PtError(f"Dump file {name} is not a valid zip file (bad local header).")
    return m.offset + _LOCAL_HEADER.size + int(n_name) + int(n_extra)


def _read(f: BinaryIO, m: _Member, name: str) -> bytes:
    f.seek(_start(f, m, name))
    data = f.read(m.size)
    if len(data) < m.size:
        raise PtError(f"Dump file {name} is truncated.")
    return data


def _parse(f: BinaryIO, members: dict[str, _Member], name: str) -> _Parsed:
    pkl = members.get("data.pkl")
    if pkl is None:
        raise PtError(f"Dump file {name} is not a torch.save file (no data.pkl in it).")
    try:
        obj = _TensorUnpickler(io.BytesIO(_read(f, pkl, name))).load()
    except pickle.UnpicklingError as e:
        raise PtError(f"Dump file {name} does not hold a tensor ({e}); refusing to unpickle it.") from None
    except (EOFError, ValueError, TypeError, AttributeError, IndexError, KeyError, struct.error) as e:
        raise PtError(f"Dump file {name} has a malformed data.pkl ({type(e).__name__}: {e}).") from None
    if not isinstance(obj, _Tensor):
        raise PtError(f"Dump file {name} holds a {type(obj).__name__}, not a tensor.")
    code = STORAGE_DTYPES.get(obj.storage.type)
    if code is None:
        raise PtError(f"Dump file {name}: tensors of {obj.storage.type} cannot be read.")
    order = members.get("byteorder")
    big = order is not None and _read(f, order, name).strip() == b"big"
    raw = _raw(code).newbyteorder(">" if big else "<")
    widened = code if code in _BITS else ""
    dtype = np.dtype(np.float32) if widened else raw
    data = members.get(f"data/{obj.storage.key}")
    if data is None:
        raise PtError(f"Dump file {name} lacks the data of its storage {obj.storage.key}.")
    if (
        len(obj.size) != len(obj.stride)
        or any(d < 0 for d in obj.size)
        or obj.offset < 0
        or any(s < 0 for s in obj.stride)
    ):
        raise PtError(
            f"Dump file {name} describes an impossible tensor (size {list(obj.size)}, "
            f"stride {list(obj.stride)})."
        )
    numel = math.prod(obj.size)
    span = 1 + sum((d - 1) * s for d, s in zip(obj.size, obj.stride, strict=True)) if numel else 0
    extent = obj.offset + span
    if extent > obj.storage.numel or data.size < extent * raw.itemsize:
        raise PtError(
            f"Dump file {name} is truncated: its storage holds {data.size // raw.itemsize} "
            f"elements, the tensor needs {extent}."
        )
    start = _start(f, data, name)
    end = f.seek(0, os.SEEK_END)
    if start + data.size > end:  # a size the zip declares but the file does not hold
        raise PtError(
            f"Dump file {name} is truncated: its storage's data should be {data.size} bytes, "
            f"the file holds {max(0, end - start)} of them."
        )
    offset = start + obj.offset * raw.itemsize if _c_contiguous(obj.size, obj.stride) else -1
    return _Parsed(PtHeader(obj.size, dtype, raw, offset, widened=widened), obj, start, data.size)


def _open(path: str | os.PathLike[str]) -> tuple[BinaryIO, dict[str, _Member]]:
    """The file (in memory when small) and its members by name below the archive folder."""
    name = _name(path)
    try:
        fd, st = open_regular(path, TENSOR_FILE)
        size = st.st_size
        f: BinaryIO = os.fdopen(fd, "rb")  # the caller closes it
    except OSError as e:
        raise PtError(open_error(e, name), isinstance(e, FileNotFoundError)) from None
    try:
        members = None
        if size <= SMALL_FILE:
            data = f.read()
            f.close()
            f = io.BytesIO(data)
            members = _central(data)
        return f, members if members is not None else _listed(f)
    except zipfile.BadZipFile:
        f.seek(0)
        magic = f.read(1)
        f.close()
        if magic == b"\x80":
            raise PtError(f"Dump file {name} is an old (non-zip) torch.save file: not supported.") from None
        raise PtError(f"Dump file {name} is not a torch.save zip file (truncated or corrupt).") from None
    except OSError as e:
        f.close()
        raise PtError(f"Dump file {name} cannot be read ({describe(e)}).") from None


def _widen(raw: np.ndarray, widened: str, out: np.ndarray | None = None) -> np.ndarray:
    """The bits of a widened dtype as float32: float8 by its table; bfloat16's (uint16) are the high
    half of the float32."""
    if widened != _BF16:
        return float8.decode(raw, widened, out)
    if out is None:
        wide = np.empty(raw.shape, np.uint32)
    else:
        wide = out.view(np.uint32)[: raw.size].reshape(raw.shape)
    np.copyto(wide, raw, casting="unsafe")
    np.left_shift(wide, 16, out=wide)
    return wide.view(np.float32)


def _values(f: BinaryIO, p: _Parsed, name: str) -> np.ndarray:
    """The whole tensor, in memory, once the memory it takes is within the budget: a stride of 0
    expands a few stored bytes into as many elements as the size claims."""
    t, raw = p.tensor, p.header.raw
    expanded = (
        "" if _c_contiguous(t.size, t.stride) else f", expanded from its storage by stride {list(t.stride)}"
    )
    check(
        p.storage_bytes + math.prod(t.size) * p.header.dtype.itemsize,
        f"Dump file {name} (a tensor of size {list(t.size)}{expanded})",
    )
    f.seek(p.data_start)
    blob = f.read(p.storage_bytes)
    if len(blob) < p.storage_bytes:
        raise PtError(f"Dump file {name} is truncated: it shrank while being read.")
    storage = np.frombuffer(blob, dtype=raw, count=p.storage_bytes // raw.itemsize)
    if _c_contiguous(t.size, t.stride):
        array = storage[t.offset : t.offset + math.prod(t.size)].reshape(t.size)
    else:
        strides = tuple(s * raw.itemsize for s in t.stride)
        array = np.lib.stride_tricks.as_strided(storage[t.offset :], t.size, strides).copy()
    return _widen(array, p.header.widened) if p.header.widened else array


def read_pt(path: str | os.PathLike[str], data_limit: float = 0) -> tuple[PtHeader, np.ndarray | None]:
    """The header, and the data too (read-only) when it is at most ``data_limit`` bytes."""
    name = _name(path)
    f, members = _open(path)
    try:
        p = _parse(f, members, name)
        if p.header.nbytes > data_limit and p.header.data_offset >= 0:
            return p.header, None
        return p.header, _values(f, p, name)
    except OSError as e:
        raise PtError(f"Dump file {name} cannot be read ({e}).") from None
    finally:
        f.close()


def load_pt(path: str | os.PathLike[str]) -> np.ndarray:
    """The whole tensor in memory (bfloat16 widened to float32)."""
    _, array = read_pt(path, math.inf)
    assert array is not None
    return array


def iter_pt_chunks(
    path: str | os.PathLike[str],
    header: PtHeader,
    chunk: int,
    buffer: np.ndarray | None = None,
    start: int = 0,
    stop: int | None = None,
) -> Iterator[np.ndarray]:
    """The elements ``[start, stop)`` in order, ``chunk`` at a time, each yield overwriting the previous
    one, read as an npy's (:func:`ptdbg_tui.formats.npy.iter_chunks`); ``buffer``: uint8 scratch of
    ``chunk`` yielded elements."""
    raw = NpyHeader(header.shape, header.raw, False, header.data_offset)
    if not header.widened:
        yield from iter_chunks(path, raw, chunk, buffer, start, stop)
        return
    n = max(1, min(chunk, math.prod(header.shape)))
    if buffer is None:
        buffer = np.empty(n * header.dtype.itemsize, np.uint8)
    out = buffer[: n * header.dtype.itemsize].view(header.dtype)
    for part in iter_chunks(path, raw, chunk, None, start, stop):
        yield _widen(part, header.widened, out)
