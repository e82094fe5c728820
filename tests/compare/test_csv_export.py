"""The CSV file: exact headers, cells printed as the original prints them, no silent overwrite."""

from __future__ import annotations

import csv
import io
import math
import os
import random
import re

import numpy as np
import pytest

from ptdbg_tui.compare.metrics.accumulator import compare_arrays
from ptdbg_tui.compare.metrics.settled import summary_result, unmatched_result
from ptdbg_tui.compare.metrics.stats_pass import settled_results
from ptdbg_tui.compare.model import Row
from ptdbg_tui.compare.report.csv_ptdbg import header, write_csv, write_table
from ptdbg_tui.formats.pkl_line import decode_line
from ptdbg_tui.formats.records import StackRecord

NAMES = "NPU Name,Bench Name,NPU Tensor Dtype,Bench Tensor Dtype,NPU Tensor Shape,Bench Tensor Shape,"
STATS = "NPU max,NPU min,NPU mean,NPU l2norm,Bench max,Bench min,Bench mean,Bench l2norm"
FULL = (
    NAMES
    + "Cosine,MaxAbsErr,MaxRelativeErr,One Thousandth Err Ratio,Five Thousandths Err Ratio,"
    + STATS
    + ",Accuracy Reached or Not,Err_message"
)
SUMMARY = NAMES + "Max diff,Min diff,Mean diff,L2norm diff," + STATS


def test_headers():
    assert ",".join(header(False, False)) == FULL and len(header(False, False)) == 21
    assert ",".join(header(True, False)) == FULL + ",NPU_Stack_Info"
    assert ",".join(header(False, True)) == SUMMARY and len(header(False, True)) == 18
    assert ",".join(header(True, True)) == SUMMARY + ",NPU_Stack_Info"


def _rec(line: str):
    rec = decode_line(line)
    assert rec is not None
    return rec


def _lines(path):
    return path.read_text(encoding="utf-8").splitlines()


def test_full_mode_cells_match_the_originals_observed_rows(tmp_path):
    scalar = _rec('["Torch_add_0_forward_input.1", 0, [], "<class \'int\'>", "[]", [1, 1, 1, 1]]')
    relu_n = _rec('["Torch_relu_0_forward_output", 0, [], "torch.float32", [4], [0.0, 0.0, 0.0, 0.0]]')
    relu_b = _rec(
        '["Torch_relu_0_forward_output", 0, [], "torch.float32", [4], [4.0, 1.0, 2.5, 5.477225575051661]]'
    )
    empty = _rec('["Torch_empty_0_forward_output", 0, [], "torch.float32", [0, 3], [[], [], [], "Nan"]]')
    matmul = _rec(
        '["Torch_matmul_0_forward_output", 0, [], "torch.bfloat16", [3, 3], '
        "[0.93446, -0.58343, -0.01088, 1.28029]]"
    )
    rows = [Row(scalar, scalar), Row(relu_n, relu_b), Row(empty, empty), Row(matmul, None)]
    rows[0].result = compare_arrays(np.array(1), np.array(1), scalar.dtype, scalar.dtype)
    rows[1].result = compare_arrays(
        np.zeros(4, np.float32), np.array([4, 1, 2, 3], np.float32), relu_n.dtype, relu_b.dtype
    )
    rows[2].result = compare_arrays(
        np.zeros((0, 3), np.float32), np.zeros((0, 3), np.float32), empty.dtype, empty.dtype
    )
    rows[3].result = unmatched_result(rows[3])
    path = write_csv(rows, tmp_path)
    assert re.fullmatch(r"compare_result_\d{14}\.csv", path.name)
    assert oct(path.stat().st_mode & 0o777) == "0o640"
    lines = _lines(path)
    assert lines[0] == FULL
    assert lines[1] == (
        "Torch_add_0_forward_input.1,Torch_add_0_forward_input.1,<class 'int'>,<class 'int'>,"
        "[],[],unsupported,0.000000000000,0.000000000000,Nan,Nan,1,1,1,1,1,1,1,1,Nan,"
        '"This is type of scalar data, can not compare."'
    )
    assert lines[2] == (
        "Torch_relu_0_forward_output,Torch_relu_0_forward_output,torch.float32,torch.float32,"
        "[4],[4],Nan,4.000000000000,1.000000000000,0.000000000000,0.000000000000,0.0,0.0,0.0,0.0,4.0,1.0,2.5,"
        "5.477225575051661,Nan,"
        '"Cannot compare by Cosine Similarity, All the data is Zero in npu dump data."'
    )
    assert lines[3] == (
        "Torch_empty_0_forward_output,Torch_empty_0_forward_output,torch.float32,"
        'torch.float32,"[0, 3]","[0, 3]",unsupported,0,0,0,0,[],[],[],Nan,[],[],[],Nan,Nan,'
        '"This is empty data, can not compare."'
    )
    assert lines[4] == (
        'Torch_matmul_0_forward_output,Nan,torch.bfloat16,Nan,"[3, 3]",Nan,Nan,Nan,Nan,Nan,'
        "Nan,0.93446,-0.58343,-0.01088,1.28029,Nan,Nan,Nan,Nan,Nan,No bench data matched."
    )


def test_json_nan_stat_is_an_empty_cell_and_inf_prints_inf(tmp_path):
    n = _rec('["Torch_div_0_forward_output", 0, [], "torch.float16", [2], [Infinity, NaN, 1.5, -Infinity]]')
    row = Row(n, n)
    row.result = summary_result(row)
    line = _lines(write_csv([row], tmp_path, summary=True))[1]
    assert line.endswith(",inf,,1.5,-inf,inf,,1.5,-inf")
    assert ",,,0.0,," in line  # diffs: inf-inf and nan-nan are NaN → empty, like the original


def test_bench_only_rows_and_stack_cells(tmp_path):
    a = _rec('["Torch_add_0_forward_input.0", 0, [], "torch.float32", [3], [3.0, 1.0, 2.0, 3.7]]')
    b = _rec('["Torch_mul_0_forward_output", 0, [], "torch.float32", [3], [3.0, 1.0, 2.0, 3.7]]')
    rows = [Row(a, a), Row(None, b)]
    frames = [("/home/user/train.py", "42", "forward", None)]
    rows[0].stack = StackRecord("Torch_add_0_forward_stack_info", frames)
    for r in rows:
        r.result = summary_result(r)
    path = write_csv(rows, tmp_path, stack_mode=True, summary=True)
    table = list(csv.reader(path.open()))
    assert table[0][-1] == "NPU_Stack_Info"
    assert table[1][-1] == "[['/home/user/train.py', '42', 'forward', None]]"
    assert table[2][:6] == ["Nan", "Torch_mul_0_forward_output", "Nan", "torch.float32", "Nan", "[3]"]
    assert table[2][6:14] == ["Nan"] * 8 and table[2][-1] == ""


def test_pending_rows_are_marked(tmp_path):
    a = _rec('["Torch_add_0_forward_input.0", 0, [], "torch.float32", [3], [3.0, 1.0, 2.0, 3.7]]')
    table = list(csv.reader(write_csv([Row(a, a)], tmp_path).open()))
    assert table[1][6:11] == [""] * 5 and table[1][-1] == "Not compared yet."


def test_same_second_never_overwrites(tmp_path):
    a = _rec('["Torch_add_0_forward_input.0", 0, [], "torch.float32", [3], [3.0, 1.0, 2.0, 3.7]]')
    row = Row(a, None)
    row.result = unmatched_result(row)
    paths = [write_csv([row], tmp_path, suffix="_rank0-rank0") for _ in range(3)]
    assert len(set(paths)) == 3 and all(p.is_file() for p in paths)
    assert all(p.name.startswith("compare_result_rank0-rank0_") for p in paths)
    assert not list(tmp_path.glob(".*"))  # no temporary left behind


def test_output_dir_is_created(tmp_path):
    assert write_csv([], tmp_path / "a" / "b").parent == tmp_path / "a" / "b"


#: Cell values of every kind the rows hold: JSON stats (numbers, "Nan", [], null, bools of Python
#: scalars), shapes, metric strings; integers past int64 and uint64; text that needs quoting.
_VALUES = {
    "int": [0, 1, -7, 123456789],
    "big int": [1 << 63, 1 << 64, 10**30],
    "float": [0.1, -0.0, 1e16, 5e-324, 1.7976931348623157e308, math.inf, -math.inf, 2.5],
    "missing": [None, math.nan],
    "bool": [True, False],
    "text": ["Nan", "", "a,b", 'say "x"', "line\nbreak", "unsupported", "0.000000000000"],
    "list": [[], [1, 8, 16], [0.5, "Nan"]],
}


def test_cells_print_as_pandas_prints_the_originals_frame(tmp_path):
    """Columns of every mix of kinds, against pandas' own to_csv of the DataFrame the original builds."""
    pd = pytest.importorskip("pandas")
    rng = random.Random(0)
    kinds = list(_VALUES)
    columns = []
    for _ in range(400):
        mix = rng.sample(kinds, rng.randint(1, 3))
        columns.append([rng.choice(_VALUES[rng.choice(mix)]) for _ in range(rng.randint(1, 5))])
    for k in range(0, len(columns), 8):
        group = columns[k : k + 8]
        height = min(len(c) for c in group)
        names = [f"c{i}" for i in range(len(group))]
        rows = [list(r) for r in zip(*(c[:height] for c in group), strict=True)]
        path = write_table(names, rows, tmp_path / str(k))
        expected = io.StringIO()
        pd.DataFrame(rows, columns=names).to_csv(expected, index=False)
        assert path.read_text(encoding="utf-8") == expected.getvalue(), group


def test_a_table_without_rows_is_its_header(tmp_path):
    assert write_table(["a", "b"], [], tmp_path).read_text() == "a,b" + os.linesep


def _row_by_row(row: Row, stack_mode: bool, summary: bool) -> list[object]:
    """The original's cells of one row, built one row at a time: the oracle of the columnar build."""

    def number(cell: str) -> object:
        if cell == "":
            return math.nan
        for kind in (int, float):
            try:
                return cell if cell == "Nan" else kind(cell)
            except ValueError:
                pass
        return cell

    def stats(rec):
        return (
            ["Nan"] * 4
            if rec is None or rec.dump_step > 100
            else [*rec.stats[:4], *["Nan"] * (4 - len(rec.stats))]
        )

    n, b, result = row.npu, row.bench, row.result
    cells = [getattr(r, f) if r else "Nan" for f in ("name", "dtype", "shape_raw") for r in (n, b)]
    width = 4 if summary else 5
    metrics = list(result.cells) if result else [""] * width
    cells += [number(c) for c in metrics] if summary and result else metrics
    cells += stats(n) + stats(b)
    if not summary:
        cells += [result.accuracy, result.message] if result else ["", "Not compared yet."]
    if stack_mode:
        cells.append(str([list(f) for f in row.stack.frames]) if row.stack else None)
    return cells


@pytest.mark.parametrize("summary", [True, False])
@pytest.mark.parametrize("pending", [True, False])
def test_columns_equal_the_rows_one_by_one(tmp_path, summary, pending):
    """Every kind of cell the columnar build meets: numbers and text in a diff column, a legacy
    three-statistic record, an overflow dump's, a bench-only row, a stack, a pending row."""
    lines = [
        '["Torch_add_0_forward_input.0", 0, [], "torch.float32", [3], [3.0, 1.0, 2.0, 3.7]]',
        '["Torch_add_0_forward_input.1", 0, [], "torch.int64", [3], [3, 1, 2.5, "Nan"]]',
        '["Torch_add_0_forward_output", 0, [], "torch.float16", [3], [1.5, -1.0, 0.25]]',
        '["Torch_mul_0_forward_output", 101, [], "torch.float16", [3], [1.5, -1.0, 0.25, 2.0]]',
        '["Torch_div_0_forward_output", 0, [], "torch.float16", [2], [Infinity, NaN, 1.5, -Infinity]]',
        '["Tensor_pow_0_forward_input.1", 0, [], "<class \'int\'>", "[]", [2, 2, 2, 2]]',
    ]
    records = [_rec(line) for line in lines]
    rows = [Row(r, r) for r in records] + [Row(None, records[0]), Row(records[2], records[3])]
    rows[0].stack = StackRecord("Torch_add_0_forward_stack_info", [("/a/t.py", "4", "f", 'x = "a, b"')])
    for r in rows:
        r.result = summary_result(r) if summary else unmatched_result(r)
    rows[1].result.cells = ("1.5", "a.b", "3", "Nan", "")[
        : 4 if summary else 5
    ]  # text with a '.' among numbers
    if pending:
        rows[2].result = None
    expected = write_table(
        header(True, summary), [_row_by_row(r, True, summary) for r in rows], tmp_path / "a"
    )
    got = write_csv(rows, tmp_path / "b", stack_mode=True, summary=summary)
    assert got.read_bytes() == expected.read_bytes()


def test_shape_cells_as_str_prints_them(tmp_path):
    """Shapes are printed once per distinct shape: the same cells as ``str()`` of each, quoted; a
    Python value's ``"[]"`` and a list that no tool writes (a list inside) too."""
    a = _rec('["Torch_add_0_forward_input.0", 0, [], "torch.float32", [2, 3], [1.0, 0.0, 0.5, 2.0]]')
    b = _rec('["Torch_add_0_forward_input.1", 0, [], "<class \'int\'>", "[]", [1, 1, 1, 1]]')
    c = _rec('["Torch_add_0_forward_output", 0, [], "torch.float32", [2, 3], [1.0, 0.0, 0.5, 2.0]]')
    odd = _rec('["Torch_add_1_forward_output", 0, [], "torch.float32", [2, 3], [1.0, 0.0, 0.5, 2.0]]')
    rows = [Row(r, r, result=summary_result(Row(r, r))) for r in (a, b, c, odd)]
    odd.shape_raw = [[2], 3]
    lines = _lines(write_csv(rows, tmp_path, summary=True))
    shapes = [next(csv.reader([line]))[4:6] for line in lines[1:]]
    assert shapes == [["[2, 3]"] * 2, ["[]"] * 2, ["[2, 3]"] * 2, ["[[2], 3]"] * 2]
    assert lines[1].split(",", 4)[4].startswith('"[2, 3]","[2, 3]",')


@pytest.mark.parametrize("seed", range(4))
def test_agreeing_rows_print_their_cells_among_any_other(tmp_path, seed):
    """The rows whose statistics agree (settled together, their diff cells floats' reprs) print their
    cells as they are; among integers, NaN, ``Nan`` and text the columns print as row by row."""
    rng = random.Random(seed)
    rows = []
    for i in range(80):
        values = [rng.uniform(-1, 1) * 10 ** rng.randint(-9, 3) for _ in range(4)]
        if i % 9 == 0:  # an integer tensor's statistics
            values = [rng.randint(-5, 5) for _ in range(4)]
        bench = [v if type(v) is int or rng.random() < 0.5 else v * (1 + 1e-9) for v in values]
        rows.append(
            Row(
                _rec(f'["Torch_add_{i}_forward_input.0", 0, [], "torch.float32", [3], {json_list(values)}]'),
                _rec(f'["Torch_add_{i}_forward_input.0", 0, [], "torch.float32", [3], {json_list(bench)}]'),
            )
        )
    if seed % 2:  # else the other rows' cells are integers alone
        rows.append(Row(None, rows[0].bench))  # bench only: "Nan" cells
    for row, result in zip(rows, settled_results(rows, summary=True), strict=True):
        row.result = result
    if seed % 2:
        odd = rng.sample(range(80), 2)
        rows[odd[0]].result.cells = ("", "3", "-a.b", "1e+400")  # NaN, an integer, text, infinity
        rows[odd[1]].result.cells = ("inf", "-inf", "0", "1.5")
    expected = write_table(header(False, True), [_row_by_row(r, False, True) for r in rows], tmp_path / "a")
    got = write_csv(rows, tmp_path / "b", summary=True)
    assert got.read_bytes() == expected.read_bytes()


def json_list(values: list[float | int]) -> str:
    return "[" + ", ".join(map(repr, values)) + "]"
