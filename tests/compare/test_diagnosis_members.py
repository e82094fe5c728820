"""The facts the diagnosis works out once per row (:class:`_Member`) against their definitions, asked of
each row as the walk once asked them: on a real compared dump, and on rows altered to be empty, Python
values, overwritten or malformed."""

from __future__ import annotations

import dataclasses

import pytest

from ptdbg_tui.compare.diagnosis.diagnose import _Calls, _op, diagnose, parameter_name
from ptdbg_tui.compare.metrics.settled import overwritten_input
from ptdbg_tui.compare.model import Row
from ptdbg_tui.compare.ops import op_name
from ptdbg_tui.formats.dialects import RUNNING_STATE
from ptdbg_tui.formats.naming import INPUT, OUTPUT_KINDS

from .test_diagnosis import _compared_seed


def _left_out(row: Row) -> bool:
    rec = row.record
    return rec.is_scalar or rec.numel == 0 or overwritten_input(rec.entry)


def _running(row: Row) -> bool:
    entry = row.record.entry
    return entry.path[:1] != () and entry.path[0] in RUNNING_STATE.get(op_name(_op(entry)), ())


def _check(rows: list[Row]) -> int:
    """Every member's facts equal their definitions; the number of members checked."""
    checked = 0
    for call in _Calls(rows).calls.values():
        assert call.rows == [m.row for m in call.members]
        assert call.paired == any(r.bench is not None for r in call.rows)
        assert call.op == op_name(_op(call.entry))
        for m in call.members:
            row, entry = m.row, m.row.record.entry
            assert m.errors is (row.result.errors if row.result is not None else None)
            assert m.scalar == row.record.is_scalar
            assert m.left_out == _left_out(row), row.name
            assert m.overwritten == overwritten_input(entry)
            assert m.input == (entry.kind == INPUT)
            assert (m in call.outs) == (entry.kind in OUTPUT_KINDS) != (m in call.ins)
            if m.input:
                assert m.running == _running(row)
                assert m.parameter == parameter_name(entry)
            checked += 1
    return checked


def _altered(rows: list[Row]) -> list[Row]:
    """The rows with every third record emptied (same rank, a 0 dimension: shapes that share a length
    with non-empty ones), every fifth one a Python value, and one an in-place initialiser's input."""
    out = []
    for i, row in enumerate(rows):
        rec = row.record
        if i % 3 == 0 and isinstance(rec.shape_raw, list) and rec.shape_raw:
            rec = dataclasses.replace(rec, shape_raw=[0, *rec.shape_raw[1:]])
        elif i % 5 == 0:
            rec = dataclasses.replace(rec, shape_raw="[]", dtype="<class 'float'>")
        out.append(dataclasses.replace(row, npu=rec if row.npu is not None else None, bench=row.bench or rec))
    entry = next(r.record.entry for r in out if r.record.entry and r.record.entry.kind == INPUT)
    init = dataclasses.replace(entry, api="Torch_zero_", path=(0,), direction="forward")
    first = out[0]
    out.append(dataclasses.replace(first, npu=dataclasses.replace(first.record, entry=init), seq=len(out)))
    return out


def test_member_facts_match_their_definitions_on_a_real_dump(tmp_path):
    rows = _compared_seed(tmp_path)
    assert _check(rows) == len([r for r in rows if r.record.entry is not None])
    altered = _altered(rows)
    assert _check(altered) == len(altered)
    assert any(_left_out(r) and not r.record.is_scalar for r in altered)  # empty tensors were made
    assert diagnose(altered).judged > 0


def test_a_malformed_shape_fails_only_where_it_is_asked(tmp_path):
    rows = _compared_seed(tmp_path)
    bad = rows[1]
    broken = dataclasses.replace(bad.record, shape_raw=["x", 3])
    rows[1] = dataclasses.replace(bad, npu=broken)
    members = [m for c in _Calls(rows).calls.values() for m in c.members if m.row is rows[1]]
    with pytest.raises(ValueError):  # as the record's own numel fails
        assert members[0].left_out is not None
    unhashable = dataclasses.replace(bad.record, shape_raw=[[0], 3])
    rows[1] = dataclasses.replace(bad, npu=unhashable)
    (member,) = [m for c in _Calls(rows).calls.values() for m in c.members if m.row is rows[1]]
    with pytest.raises(TypeError):
        assert member.left_out is not None
