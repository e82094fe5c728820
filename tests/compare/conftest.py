"""Fixtures of the compare tests: records built like pkl lines, rows with results."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from ptdbg_tui.compare.diagnosis.diagnose import diagnose
from ptdbg_tui.compare.metrics.accumulator import compare_arrays
from ptdbg_tui.compare.metrics.settled import settled_result, summary_result
from ptdbg_tui.compare.model import Row
from ptdbg_tui.formats.pkl_line import decode_value
from ptdbg_tui.formats.records import TensorRecord
from ptdbg_tui.formats.stats import array_stats


def _record(
    name: str,
    shape: list[int] | str = (3,),
    dtype: str = "torch.float32",
    stats: list | None = None,
    dump_step: int = 0,
) -> TensorRecord:
    rec = decode_value(
        [
            name,
            dump_step,
            [],
            dtype,
            list(shape) if not isinstance(shape, str) else shape,
            [1.0, 0.0, 0.5, 1.0] if stats is None else stats,
        ]
    )
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


class Calls:
    """Rows of hand-made calls, compared as the engine compares them."""

    def __init__(self, record) -> None:
        self.record = record
        self.rows: list[Row] = []

    def add(
        self,
        name: str,
        npu,
        bench,
        npu_dtype: str = "torch.float32",
        bench_dtype: str = "torch.float32",
        summary: bool = False,
    ) -> Row:
        n, b = np.asarray(npu), np.asarray(bench)
        rn = self.record(name, shape=list(n.shape), dtype=npu_dtype, stats=array_stats(n, npu_dtype))
        rb = self.record(name, shape=list(b.shape), dtype=bench_dtype, stats=array_stats(b, bench_dtype))
        row = Row(rn, rb, seq=len(self.rows))
        row.result = summary_result(row) if summary else compare_arrays(n, b, npu_dtype, bench_dtype)
        self.rows.append(row)
        return row

    def call(self, api: str, index: int, direction: str, ins: list, outs: list, **kw) -> None:
        """``ins``/``outs``: (npu, bench) array pairs."""
        call = f"{api}_{index}_{direction}"
        for k, (n, b) in enumerate(ins):
            self.add(f"{call}_input.{k}", n, b, **kw)
        for k, (n, b) in enumerate(outs):
            self.add(f"{call}_output.{k}", n, b, **kw)

    def scalar(self, name: str, npu: object, bench: object) -> Row:
        """A non-tensor argument (a Python number) as the pkl records it."""
        dtype = f"<class '{type(npu).__name__}'>"
        rn, rb = (self.record(name, shape="[]", dtype=dtype, stats=[v] * 4) for v in (npu, bench))
        rn.data_name = rb.data_name = ""  # no tensor file: the value is in the record
        row = Row(rn, rb, seq=len(self.rows))
        row.result = settled_result(row, summary=False)
        self.rows.append(row)
        return row

    def npu_only(self, name: str, npu, dtype: str = "torch.float32") -> Row:
        """An entry only the NPU run recorded (a call the bench run does not make)."""
        n = np.asarray(npu)
        row = Row(
            self.record(name, shape=list(n.shape), dtype=dtype, stats=array_stats(n, dtype)),
            None,
            seq=len(self.rows),
        )
        row.result = settled_result(row, summary=False)
        self.rows.append(row)
        return row

    def bench_only(self, name: str, bench) -> Row:
        """An entry only the bench run recorded (a call the NPU run does not make)."""
        b = np.asarray(bench)
        row = Row(
            None,
            self.record(name, shape=list(b.shape), stats=array_stats(b, "torch.float32")),
            seq=len(self.rows),
        )
        row.result = settled_result(row, summary=False)
        self.rows.append(row)
        return row

    def suspects(self) -> list[tuple[str, str]]:
        return [(s.call, s.kind) for s in diagnose(self.rows).suspects]

    def row(self, name: str) -> Row:
        return next(r for r in self.rows if r.name == name)


@pytest.fixture
def calls(record) -> Calls:
    return Calls(record)


@pytest.fixture
def calls_factory(record) -> Callable[[], Calls]:
    """Fresh :class:`Calls` for each step of a test."""
    return lambda: Calls(record)
