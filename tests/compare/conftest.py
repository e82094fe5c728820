"""Fixtures of the compare tests: records built like pkl lines, rows with results."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ptdbg_tui.formats.pkl_line import decode_value
from ptdbg_tui.formats.records import TensorRecord


def _record(name: str, shape: list[int] | str = (3,), dtype: str = "torch.float32",
            stats: list | None = None, dump_step: int = 0) -> TensorRecord:
    rec = decode_value([name, dump_step, [], dtype, list(shape) if not isinstance(shape, str) else shape,
                        [1.0, 0.0, 0.5, 1.0] if stats is None else stats])
    assert isinstance(rec, TensorRecord)
    return rec


@pytest.fixture
def record() -> Callable[..., TensorRecord]:
    """``record(name, shape=(3,), dtype="torch.float32", stats=None, dump_step=0)``."""
    return _record


@pytest.fixture
def records() -> Callable[..., list[TensorRecord]]:
    """``records("Torch_add_0_forward_input.0", ...)``: one record per name, default shape/stats."""
    return lambda *names, **kw: [_record(n, **kw) for n in names]
