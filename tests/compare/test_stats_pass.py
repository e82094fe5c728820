"""The statistics rows settled over a whole pair (:mod:`ptdbg_tui.compare.metrics.stats_pass`) equal
the one-by-one results, on real dumps of msprobe and of the original ptdbg, and on the project's own
dumper's (tests/dumper/test_stats_pass_dump.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptdbg_tui.compare.matching.pairing import choose_match
from ptdbg_tui.compare.metrics import stats_pass
from ptdbg_tui.compare.metrics.settled import settled_result
from ptdbg_tui.compare.model import Row, Status
from ptdbg_tui.formats.dialects import dialect_of, producer
from ptdbg_tui.formats.layout import RankDump, discover, pair_dumps
from ptdbg_tui.formats.naming import parse_name
from ptdbg_tui.formats.reader import read_dump
from ptdbg_tui.formats.records import TensorRecord

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def matched_rows(npu: RankDump, bench: RankDump) -> list[Row]:
    n, b = read_dump(npu), read_dump(bench)
    dialects = (
        dialect_of(producer(npu.format, n.stacks, n.tensors)),
        dialect_of(producer(bench.format, b.stacks, b.tensors)),
    )
    return choose_match(n.tensors, b.tensors, "auto", dialects).rows


def check_same(rows: list[Row], monkeypatch: pytest.MonkeyPatch) -> int:
    """The batch results against the plain ones, field by field; how many rows the fast way settled."""
    monkeypatch.setattr(stats_pass, "MIN_ROWS", 1)  # the fixtures are small
    fast = stats_pass.settled_results(rows, summary=True)
    plain = [settled_result(row, summary=True) for row in rows]
    assert [repr(r) for r in fast] == [repr(r) for r in plain]  # repr: NaN fields compare equal
    return sum(
        stats_pass._plain_statistics(row) and r.status is Status.PASS
        for row, r in zip(rows, plain, strict=True)
    )


@pytest.mark.parametrize(
    "sides",
    [("msprobe/statistics/npu", "msprobe/statistics/bench"), ("mixed/npu", "mixed/bench")],
)
def test_batch_equals_one_by_one_on_real_dumps(
    sides: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pairs = pair_dumps(discover(FIXTURES / sides[0]), discover(FIXTURES / sides[1]))
    assert pairs
    fast = 0
    for npu, bench in pairs:
        rows = matched_rows(npu, bench)
        fast += check_same(rows, monkeypatch)
        assert any(r.status is not Status.PASS for r in stats_pass.settled_results(rows, summary=True))
    assert fast > 0  # the fast way did take rows


def test_rows_that_fail_or_differ_take_the_plain_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failing statistic, a NaN, an integer statistic, a dtype mismatch: each result as one by one."""
    (npu, bench), *_ = pair_dumps(
        discover(FIXTURES / "msprobe/statistics/npu"), discover(FIXTURES / "msprobe/statistics/bench")
    )
    rows = [r for r in matched_rows(npu, bench) if stats_pass._plain_statistics(r)][:8]
    assert len(rows) == 8
    r0, r1, r2, r3 = rows[:4]
    assert r0.npu and r1.npu and r2.npu and r3.npu
    r0.npu.stats = [r0.npu.stats[0] * 2 + 1.0, *r0.npu.stats[1:]]  # max differs: fails
    r1.npu.stats = [*r1.npu.stats[:2], float("nan"), r1.npu.stats[3]]  # a NaN mean
    r2.npu.stats = [int(v) for v in r2.npu.stats]  # integers print otherwise
    r3.npu.dtype = "torch.float16"  # a caveat
    check_same(rows, monkeypatch)
    statuses = [r.status for r in stats_pass.settled_results(rows, summary=True)]
    assert statuses[0] is Status.FAIL and statuses[1] is Status.FAIL and statuses[3] is Status.WARN


def test_integer_statistics_and_python_values(monkeypatch: pytest.MonkeyPatch) -> None:
    """Integer statistics (an int64 tensor's, a Python int's) and Python floats take the fast way when
    they agree, with their differences printed as Python subtracts them (``0``, not ``0.0``); a bool, an
    integer beyond a float's exact range and a disagreeing one take the plain way, with the same result."""

    def row(dtype: str, shape: object, npu: list[object], bench: list[object]) -> Row:
        records = [
            TensorRecord(
                "Torch_mul_0_forward_input.1",
                0,
                dtype,
                shape,
                stats,
                parse_name("Torch_mul_0_forward_input.1"),
            )
            for stats in (npu, bench)
        ]
        return Row(*records)

    big = (1 << 53) + 1
    rows = [
        row("<class 'int'>", "[]", [2, 2, 2, 2], [2, 2, 2, 2]),
        row("<class 'float'>", "[]", [0.5, 0.5, 0.5, 0.5], [0.5, 0.5, 0.5, 0.5]),
        row("torch.int64", [3], [7, -1, 2.5, 9.1], [7, -1, 2.5, 9.1]),
        row("torch.float32", [3], [1, 0.0, 0.25, 1.5], [1.0, 0.0, 0.25, 1.5]),  # an int against a float
        row("torch.bool", [3], [True, False, 0.5, 1.0], [True, False, 0.5, 1.0]),
        row("torch.int64", [1], [big, big, big, big], [big, big, big, big]),
        row("torch.int64", [3], [7, -1, 2.5, 9.1], [8, -1, 2.5, 9.1]),  # fails
    ]
    assert check_same(rows, monkeypatch) == 4
    assert [stats_pass._plain_statistics(r) for r in rows] == [True] * 4 + [False, False, True]
    results = stats_pass.settled_results(rows, summary=True)
    assert results[0] is not None and results[0].cells == ("0", "0", "0", "0")
    assert results[3] is not None and results[3].cells == ("0.0", "0.0", "0.0", "0.0")
    assert results[6] is not None and results[6].status is Status.FAIL
