"""torch's float8 formats decoded without torch: each byte's value as float32, which holds every one of
them exactly (a ``.pt`` file of msprobe holds a float8 tensor as its bytes; numpy has no float8).

A format is its exponent and mantissa widths, its bias, and where it puts NaN and infinity:
``fn`` formats have no infinity and NaN where every bit but the sign is set, ``fnuz`` ones NaN at
0x80 only (no negative zero), e5m2 follows IEEE (all-ones exponent: infinity or NaN), and e8m0 is an
unsigned power of two, NaN at 0xFF.
"""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np


class Float8(NamedTuple):
    exponent: int  # bits
    mantissa: int  # bits
    bias: int
    nan: str  # "fn", "fnuz", "ieee" or "unsigned"


#: By torch's dtype name.
FORMATS = {
    "float8_e4m3fn": Float8(4, 3, 7, "fn"),
    "float8_e4m3fnuz": Float8(4, 3, 8, "fnuz"),
    "float8_e5m2": Float8(5, 2, 15, "ieee"),
    "float8_e5m2fnuz": Float8(5, 2, 16, "fnuz"),
    "float8_e8m0fnu": Float8(8, 0, 127, "unsigned"),
}


@cache
def table(name: str) -> np.ndarray:
    """The 256 values of float8 format ``name`` by byte, as float32."""
    f = FORMATS[name]
    b = np.arange(256)
    signed = f.nan != "unsigned"
    e = (b >> f.mantissa) & ((1 << f.exponent) - 1)
    m = b & ((1 << f.mantissa) - 1)
    scale = float(1 << f.mantissa)
    normal = np.ldexp(1 + m / scale, e - f.bias)
    subnormal = np.ldexp(m / scale, 1 - f.bias)
    values = np.where((e == 0) & signed, subnormal, normal)
    if signed:
        values = np.where(b >> 7, -values, values)
    top = (1 << f.exponent) - 1
    if f.nan == "fn":
        nan = (e == top) & (m == (1 << f.mantissa) - 1)
    elif f.nan == "ieee":
        values = np.where((e == top) & (m == 0), np.copysign(np.inf, values), values)
        nan = (e == top) & (m != 0)
    else:  # fnuz: the negative zero's byte; unsigned: all ones
        nan = b == (0x80 if f.nan == "fnuz" else 0xFF)
    out = np.where(nan, np.nan, values).astype(np.float32)
    out.flags.writeable = False
    return out


def decode(raw: np.ndarray, name: str, out: np.ndarray | None = None) -> np.ndarray:
    """Bytes of a float8 tensor (uint8) as float32, into ``out`` when given."""
    return np.take(table(name), raw, out=None if out is None else out[: raw.size].reshape(raw.shape))
