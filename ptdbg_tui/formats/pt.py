"""Tensors saved by ``torch.save`` (msprobe's ``.pt`` files), read without torch and without ever
unpickling anything but a tensor.

A torch.save file is a zip whose members are stored uncompressed: ``<archive>/data.pkl`` describes
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

#: Files up to this size are read with one read and unzipped in memory.
SMALL_FILE = 1 << 20
#: Storage type -> numpy dtype; ``bfloat16`` is read as uint16 and widened to float32.
STORAGE_DTYPES = {
    "FloatStorage": "f4", "DoubleStorage": "f8", "HalfStorage": "f2", "BFloat16Storage": "bfloat16",
    "LongStorage": "i8", "IntStorage": "i4", "ShortStorage": "i2", "CharStorage": "i1", "ByteStorage": "u1",
    "BoolStorage": "?", "ComplexFloatStorage": "c8", "ComplexDoubleStorage": "c16",
}
#: ``torch.<dtype>`` globals (``_rebuild_tensor_v3`` names the dtype) -> storage type.
TORCH_DTYPES = {
    "float32": "FloatStorage", "float": "FloatStorage", "float64": "DoubleStorage", "double": "DoubleStorage",
    "float16": "HalfStorage", "half": "HalfStorage", "bfloat16": "BFloat16Storage", "int64": "LongStorage",
    "long": "LongStorage", "int32": "IntStorage", "int": "IntStorage", "int16": "ShortStorage",
    "short": "ShortStorage", "int8": "CharStorage", "uint8": "ByteStorage", "bool": "BoolStorage",
    "complex64": "ComplexFloatStorage", "complex128": "ComplexDoubleStorage",
}
_LOCAL_HEADER = struct.Struct("<4s22xHH")  # signature, ..., file name length, extra field length
_LOCAL_SIG = b"PK\x03\x04"
_BF16 = "bfloat16"


class PtError(Exception):
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
        return _Tensor(storage, int(storage_offset), tuple(int(d) for d in size),
                       tuple(int(s) for s in stride))
    except (TypeError, ValueError):
        raise pickle.UnpicklingError("a tensor with a malformed size or stride") from None


def _rebuild_tensor_v3(storage: Any, storage_offset: Any, size: Any, stride: Any, requires_grad: Any,
                       hooks: Any, dtype: Any, *_: Any) -> _Tensor:
    if isinstance(dtype, _TorchDtype) and isinstance(storage, _Storage):
        storage = storage._replace(type=dtype.storage)
    return _rebuild_tensor(storage, storage_offset, size, stride)


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
        if module == "torch" and name in STORAGE_DTYPES:
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
    """Where a saved tensor's elements are. ``dtype`` is what reading yields (float32 for bf16),
    ``raw`` what the file holds; ``data_offset`` is -1 when the elements are not one contiguous run."""

    shape: tuple[int, ...]
    dtype: np.dtype
    raw: np.dtype
    data_offset: int
    fortran: bool = False

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.raw.itemsize


@dataclass(frozen=True, slots=True)
class _Parsed:
    header: PtHeader
    tensor: _Tensor
    data_start: int  # file offset of the storage's first byte
    storage_bytes: int
    stored: bool  # the storage member is not compressed


def _name(path: str | os.PathLike[str]) -> str:
    return os.path.basename(os.fspath(path))


def _c_contiguous(size: tuple[int, ...], stride: tuple[int, ...]) -> bool:
    expected = 1
    for d, s in zip(reversed(size), reversed(stride), strict=True):
        if d != 1 and s != expected:
            return False
        expected *= d
    return True


def _member(zf: zipfile.ZipFile, suffix: str) -> zipfile.ZipInfo | None:
    """The member ``<archive>/<suffix>`` (the archive folder is named after the file)."""
    for info in zf.infolist():
        _, sep, tail = info.filename.partition("/")
        if sep and tail == suffix:
            return info
    return None


def _parse(f: BinaryIO, zf: zipfile.ZipFile, name: str) -> _Parsed:
    pkl = _member(zf, "data.pkl")
    if pkl is None:
        raise PtError(f"Dump file {name} is not a torch.save file (no data.pkl in it).")
    try:
        obj = _TensorUnpickler(io.BytesIO(zf.read(pkl))).load()
    except pickle.UnpicklingError as e:
        raise PtError(f"Dump file {name} does not hold a tensor ({e}); refusing to unpickle it.") from None
    except (EOFError, ValueError, TypeError, AttributeError, IndexError, KeyError, struct.error) as e:
        raise PtError(f"Dump file {name} has a malformed data.pkl ({type(e).__name__}: {e}).") from None
    if not isinstance(obj, _Tensor):
        raise PtError(f"Dump file {name} holds a {type(obj).__name__}, not a tensor.")
    code = STORAGE_DTYPES.get(obj.storage.type)
    if code is None:
        raise PtError(f"Dump file {name}: tensors of {obj.storage.type} cannot be read.")
    order = _member(zf, "byteorder")
    big = order is not None and zf.read(order).strip() == b"big"
    raw = np.dtype("<u2" if code == _BF16 else code).newbyteorder(">" if big else "<")
    dtype = np.dtype(np.float32) if code == _BF16 else raw
    data = _member(zf, f"data/{obj.storage.key}")
    if data is None:
        raise PtError(f"Dump file {name} lacks the data of its storage {obj.storage.key}.")
    if len(obj.size) != len(obj.stride) or any(d < 0 for d in obj.size) or obj.offset < 0:
        raise PtError(f"Dump file {name} describes an impossible tensor (size {list(obj.size)}, "
                      f"stride {list(obj.stride)}).")
    numel = math.prod(obj.size)
    span = 1 + sum((d - 1) * s for d, s in zip(obj.size, obj.stride, strict=True)) if numel else 0
    extent = obj.offset + span
    if any(s < 0 for s in obj.stride) or extent > obj.storage.numel or data.file_size < extent * raw.itemsize:
        raise PtError(f"Dump file {name} is truncated: its storage holds {data.file_size // raw.itemsize} "
                      f"elements, the tensor needs {extent}.")
    f.seek(data.header_offset)
    sig, n_name, n_extra = _LOCAL_HEADER.unpack(f.read(_LOCAL_HEADER.size))
    if sig != _LOCAL_SIG:
        raise PtError(f"Dump file {name} is not a valid zip file (bad local header).")
    start = data.header_offset + _LOCAL_HEADER.size + n_name + n_extra
    stored = data.compress_type == zipfile.ZIP_STORED
    contiguous = stored and _c_contiguous(obj.size, obj.stride)
    offset = start + obj.offset * raw.itemsize if contiguous else -1
    return _Parsed(PtHeader(obj.size, dtype, raw, offset), obj, start, data.file_size, stored)


def _open(path: str | os.PathLike[str]) -> tuple[BinaryIO, zipfile.ZipFile]:
    name = _name(path)
    try:
        size = os.path.getsize(path)
        f: BinaryIO = open(path, "rb")  # noqa: SIM115 - the caller closes it
    except FileNotFoundError:
        raise PtError(f"Dump file: {name} not found.") from None
    except IsADirectoryError:
        raise PtError(f"Dump file: {name} is a directory.") from None
    except OSError as e:
        raise PtError(f"Dump file {name} cannot be read ({e.strerror}).") from None
    try:
        if size <= SMALL_FILE:
            data = f.read()
            f.close()
            f = io.BytesIO(data)
        return f, zipfile.ZipFile(f)
    except zipfile.BadZipFile:
        f.close()
        with open(path, "rb") as g:
            magic = g.read(2)
        if magic[:1] == b"\x80":
            raise PtError(f"Dump file {name} is an old (non-zip) torch.save file: not supported.") from None
        raise PtError(f"Dump file {name} is not a torch.save zip file (truncated or corrupt).") from None
    except OSError as e:
        f.close()
        raise PtError(f"Dump file {name} cannot be read ({e.strerror or e}).") from None


def _widen(raw: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """bfloat16 bits (uint16) as float32: the bits are the high half of the float32."""
    if out is None:
        wide = np.empty(raw.shape, np.uint32)
    else:
        wide = out.view(np.uint32)[:raw.size].reshape(raw.shape)
    np.copyto(wide, raw, casting="unsafe")
    np.left_shift(wide, 16, out=wide)
    return wide.view(np.float32)


def _values(f: BinaryIO, p: _Parsed, zf: zipfile.ZipFile, name: str) -> np.ndarray:
    """The whole tensor, in memory."""
    t, raw = p.tensor, p.header.raw
    if p.stored:
        f.seek(p.data_start)
        blob = f.read(p.storage_bytes)
    else:
        blob = zf.read(_member(zf, f"data/{t.storage.key}"))
    if len(blob) < p.storage_bytes:
        raise PtError(f"Dump file {name} is truncated: it shrank while being read.")
    storage = np.frombuffer(blob, dtype=raw, count=p.storage_bytes // raw.itemsize)
    if _c_contiguous(t.size, t.stride):
        array = storage[t.offset:t.offset + math.prod(t.size)].reshape(t.size)
    else:
        strides = tuple(s * raw.itemsize for s in t.stride)
        array = np.lib.stride_tricks.as_strided(storage[t.offset:], t.size, strides).copy()
    return _widen(array) if p.header.dtype != raw else array


def read_pt(path: str | os.PathLike[str], data_limit: float = 0) -> tuple[PtHeader, np.ndarray | None]:
    """The header, and the data too (read-only) when it is at most ``data_limit`` bytes."""
    name = _name(path)
    f, zf = _open(path)
    try:
        with zf:
            p = _parse(f, zf, name)
            if p.header.nbytes > data_limit and p.header.data_offset >= 0:
                return p.header, None
            return p.header, _values(f, p, zf, name)
    except (OSError, zipfile.BadZipFile) as e:
        raise PtError(f"Dump file {name} cannot be read ({e}).") from None
    finally:
        f.close()


def load_pt(path: str | os.PathLike[str]) -> np.ndarray:
    """The whole tensor in memory (bfloat16 widened to float32)."""
    _, array = read_pt(path, math.inf)
    assert array is not None
    return array


def iter_pt_chunks(path: str | os.PathLike[str], header: PtHeader, chunk: int,
                   buffer: np.ndarray | None = None) -> Iterator[np.ndarray]:
    """The elements in order, ``chunk`` at a time, each yield overwriting the previous one (as
    :func:`ptdbg_tui.formats.npy.iter_chunks`); ``buffer``: uint8 scratch of ``chunk`` yielded elements."""
    total = math.prod(header.shape)
    n = max(1, min(chunk, total))
    if buffer is None:
        out = np.empty(n, header.dtype)
    else:
        out = buffer[:n * header.dtype.itemsize].view(header.dtype)
    widen = header.dtype != header.raw
    raw = np.empty(n, header.raw) if widen else out
    name = _name(path)
    try:
        with open(path, "rb", buffering=0) as f:
            f.seek(header.data_offset)
            for start in range(0, total, n):
                k = min(n, total - start)
                view = memoryview(raw[:k].view(np.uint8).reshape(-1))
                got = 0
                while got < view.nbytes:
                    m = f.readinto(view[got:])
                    if not m:
                        raise PtError(f"Dump file {name} is truncated: it shrank while being read.")
                    got += m
                yield _widen(raw[:k], out) if widen else out[:k]
    except OSError as e:
        raise PtError(f"Dump file {name} cannot be read ({e.strerror or e}).") from None
