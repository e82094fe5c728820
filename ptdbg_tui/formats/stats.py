"""The statistics array of a pkl line (docs/formats.md#statistics), shared by the dumper and the numpy writer.

The shape of the array depends only on the value's kind; the numbers come from whoever
computes them (torch on the device in the dumper, numpy here).
"""

from __future__ import annotations

import enum
import zlib
from typing import Any

import numpy as np

NAN_SENTINEL = "Nan"


def checksum(data: bytes | np.ndarray) -> str:
    """A value's checksum as msprobe writes it (its ``md5``): the CRC-32 of the bytes, 8 hex digits."""
    return f"{zlib.crc32(data if isinstance(data, bytes) else data.data):08x}"


class StatKind(enum.Enum):
    FLOAT = "float"  # float tensor, ndim >= 1, numel > 0: [max, min, mean, l2norm]
    INT = "int"  # int tensor, ndim >= 1, numel > 0: [max, min, mean, "Nan"]
    ZERO_D = "zero_d"  # any 0-d tensor: [v, v, v, "Nan"]
    EMPTY = "empty"  # empty or bool tensor: [[], [], [], "Nan"]
    SCALAR = "scalar"  # Python int/float/bool: [v, v, v, v]


def classify(dtype: str, shape: tuple[int, ...] | None) -> StatKind:
    """Kind of a value from its pkl dtype string and shape (``None`` for Python scalars)."""
    if dtype.startswith("<class") or shape is None:
        return StatKind.SCALAR
    if dtype == "torch.bool" or any(d == 0 for d in shape):
        return StatKind.EMPTY
    if not shape:
        return StatKind.ZERO_D
    return StatKind.FLOAT if is_float_dtype(dtype) else StatKind.INT


def is_float_dtype(dtype: str) -> bool:
    name = dtype.rsplit(".", 1)[-1]
    return name.startswith(("float", "bfloat", "half", "double")) or name == "<class 'float'>"


def _json_number(v: Any) -> Any:
    """Python number for JSON; numpy scalars are unwrapped."""
    return v.item() if isinstance(v, np.generic) else v


def build_stats(
    kind: StatKind, mx: Any = None, mn: Any = None, mean: Any = None, norm: Any = None
) -> list[Any]:
    """The stats array for a value of ``kind`` from its computed reductions."""
    if kind is StatKind.EMPTY:
        return [[], [], [], NAN_SENTINEL]
    if kind is StatKind.SCALAR:
        v = _json_number(mx)
        return [v, v, v, v]
    if kind is StatKind.ZERO_D:
        v = _json_number(mx)
        return [v, v, v, NAN_SENTINEL]
    last = NAN_SENTINEL if kind is StatKind.INT else float(norm)
    return [_json_number(mx), _json_number(mn), float(mean), last]


def array_stats(a: np.ndarray | int | float | bool, dtype: str) -> list[Any]:
    """Stats of a numpy array (or Python scalar) recorded with pkl dtype ``dtype``.

    Reductions run in float64 so an fp16 l2norm cannot overflow (the original's bug).
    """
    if not isinstance(a, np.ndarray):
        return build_stats(StatKind.SCALAR, a)
    kind = classify(dtype, tuple(a.shape))
    if kind is StatKind.EMPTY:
        return build_stats(kind)
    if kind is StatKind.ZERO_D:
        return build_stats(kind, a.item())
    if kind is StatKind.INT:
        return build_stats(kind, a.max().item(), a.min().item(), float(a.mean(dtype=np.float64)))
    x = a.astype(np.float64, copy=False)
    return build_stats(
        kind, float(x.max()), float(x.min()), float(x.mean()), float(np.sqrt(np.dot(x.ravel(), x.ravel())))
    )
