"""A compared pair's records, rows and results come back whole from a pickle (a cluster worker's, a
forked child's), each made by its class as the reader made it: :func:`~ptdbg_tui.formats.frozen.quick_pickle`
and the stack record's own ``__reduce__``."""

from __future__ import annotations

import pickle
from dataclasses import fields
from pathlib import Path

from ptdbg_tui.compare.model import ErrorMeasures, Result, Row
from ptdbg_tui.engine.batch import compare_dumps
from ptdbg_tui.formats.naming import EntryName
from ptdbg_tui.formats.records import StackRecord, TensorRecord

ORIGINAL = Path(__file__).parents[1] / "fixtures" / "original" / "interpolate_zeros"


def _slots(obj: object) -> dict[str, object]:
    """Every field, those its class derives in ``__post_init__`` included."""
    return {f.name: getattr(obj, f.name) for f in fields(obj)}  # type: ignore[arg-type]


def test_rows_records_results_and_entries_come_back_with_every_field():
    outcome = compare_dumps(ORIGINAL / "npu", ORIGINAL / "bench", jobs=1)[0]
    rows = outcome.rows
    assert any(r.stack for r in rows) and any(r.result and r.result.errors for r in rows)
    back = pickle.loads(pickle.dumps(rows, protocol=pickle.HIGHEST_PROTOCOL))
    assert len(back) == len(rows)
    kinds: set[type] = set()
    for row, again in zip(rows, back, strict=True):
        assert type(again) is Row and _slots(again).keys() == _slots(row).keys()
        for name, value in _slots(row).items():
            other = getattr(again, name)
            assert type(other) is type(value), name
            if isinstance(value, TensorRecord | Result | StackRecord):
                kinds.add(type(value))
                assert _slots(other) == _slots(value), (row.name, name)
            else:
                assert other == value, (row.name, name)
        for record, record_back in ((row.npu, again.npu), (row.bench, again.bench)):
            if record is not None and record.entry is not None:
                assert record_back is not None and type(record_back.entry) is EntryName
                assert _slots(record_back.entry) == _slots(record.entry)  # prefix, op, call, arg, label
                kinds.add(EntryName)
        if row.result is not None and row.result.errors is not None:
            assert type(again.result.errors) is ErrorMeasures  # type: ignore[union-attr]
            kinds.add(ErrorMeasures)
    assert kinds == {TensorRecord, Result, StackRecord, EntryName, ErrorMeasures}
