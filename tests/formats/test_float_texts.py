"""The CSV's floats: orjson's digits in repr's form, over every exponent (repr is the format)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ptdbg_tui.formats.float_texts import float_reprs


def _values(rng: np.random.Generator) -> list[float]:
    """Every decimal exponent's neighbourhood: round numbers, their float neighbours, and values as the
    float16, bfloat16-sized float32 and float64 statistics hold them."""
    out: list[np.ndarray] = []
    for k in range(-323, 309):
        base = float(f"1e{k}")
        noise = rng.standard_normal(40) * base
        out += [
            base * np.array([1.0, -1.0, 0.5, 2.0, 9.999999999999999, 3.3333333333333335]),
            np.nextafter(base, [0.0, math.inf]),
            noise,
            noise.astype(np.float32).astype(np.float64),
        ]
        if 1e-7 < base < 6e4:
            out.append(noise.astype(np.float16).astype(np.float64))
    bits = rng.integers(0, 2**64 - 1, 50_000, dtype=np.uint64)
    out.append(bits.view(np.float64))
    values = np.concatenate(out).tolist()
    return [*values, math.nan, math.inf, -math.inf, 0.0, -0.0, 5e-324, 1.7976931348623157e308]


def test_every_exponent_is_written_as_repr_writes_it() -> None:
    with np.errstate(over="ignore"):  # near the top of the range: infinities, which are wanted too
        values = _values(np.random.default_rng(0))
    texts = float_reprs(values)
    wrong = [(t, repr(v)) for t, v in zip(texts, values, strict=True) if t != repr(v)]
    assert wrong == []
    assert len(texts) == len(values) > 100_000


@pytest.mark.parametrize(
    ("value", "text"), [(9.99e-05, "9.99e-05"), (1e-05, "1e-05"), (3e-07, "3e-07"), (-2.5e-09, "-2.5e-09")]
)
def test_the_range_orjson_writes_otherwise(value: float, text: str) -> None:
    """orjson writes these ``0.0000999``, ``0.00001``, ``3e-7``: the CSV must not."""
    assert float_reprs([1.0, value, 2.0]) == ["1.0", text, "2.0"]


def test_empty() -> None:
    assert float_reprs([]) == []
