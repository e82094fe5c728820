"""Tasks on real npy files (never raising), statistics-mode results and unmatched rows."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from ptdbg_tui.compare.metrics.accumulator import compare_arrays
from ptdbg_tui.compare.metrics.cells import MSG_FUZZY, MSG_NO_BENCH, MSG_NO_NPU, MSG_TRANSPOSED
from ptdbg_tui.compare.metrics.settled import summary_result, unmatched_result
from ptdbg_tui.compare.model import Row, Status
from ptdbg_tui.compare.reasons import StatDiffers
from ptdbg_tui.compare.report.metric_words import reason_text
from ptdbg_tui.engine.workers.tasks import READ_CHUNK, run_task, task_for

NAME = "Torch_add_0_forward_output"


@pytest.fixture
def dirs(tmp_path):
    npu, bench = tmp_path / "npu", tmp_path / "bench"
    npu.mkdir()
    bench.mkdir()
    return npu, bench


def _row(record, n: np.ndarray, b: np.ndarray, dirs, name=NAME, bench_name=None):
    np.save(dirs[0] / f"{name}.npy", n)
    np.save(dirs[1] / f"{bench_name or name}.npy", b)
    return Row(
        record(name, list(n.shape)), record(bench_name or name, list(b.shape)), fuzzy=bench_name is not None
    )


def test_task_is_picklable_and_matches_compare_arrays(record, dirs):
    rng = np.random.default_rng(0)
    b = rng.standard_normal((3, READ_CHUNK // 2 + 5)).astype(np.float32)  # several file reads
    n = b + np.float32(1e-3)
    task = task_for(_row(record, n, b, dirs), *dirs)
    assert pickle.loads(pickle.dumps(task)) == task
    assert task.nbytes == 2 * n.size * 4
    got = run_task(task)
    want = compare_arrays(n, b, "torch.float32", "torch.float32")
    assert got.cells == want.cells and got.worst_index == want.worst_index and got.status is want.status
    assert got.histogram == want.histogram


@pytest.mark.parametrize("shape", [(3, 5), (4, 4)])
def test_a_transposed_pair_is_compared_transposed(record, dirs, shape):
    """linear's weight gradient as the other tools record it (W^T) against ours (W), square included:
    the NPU data are transposed before any metric, in tensor and statistics mode."""
    rng = np.random.default_rng(1)
    b = rng.standard_normal(shape).astype(np.float32)
    n = (b * (1 + 1e-6 * rng.standard_normal(shape))).astype(np.float32)
    row = _row(record, np.ascontiguousarray(n.T), b, dirs)
    row.transposed = True
    assert row.shapes_agree
    got = run_task(task_for(row, *dirs))
    want = compare_arrays(n, b, "torch.float32", "torch.float32")
    assert got.cells == want.cells and got.status is Status.PASS and got.worst_index == want.worst_index
    assert MSG_TRANSPOSED in got.message
    row.transposed = False  # the same files read as they lie: a square one compares W^T against W
    plain = run_task(task_for(row, *dirs))
    assert plain.status is Status.FAIL
    stats = lambda a: [float(a.max()), float(a.min()), float(a.mean()), float(np.linalg.norm(a))]  # noqa: E731
    row = Row(
        record(NAME, list(shape[::-1]), stats=stats(n)),
        record(NAME, list(shape), stats=stats(b)),
        transposed=True,
    )
    summary = summary_result(row)
    assert summary.status is Status.PASS and summary.errors is not None and MSG_TRANSPOSED in summary.message


def test_missing_npy_is_an_error_row(record, dirs):
    row = _row(record, np.ones(3, np.float32), np.ones(3, np.float32), dirs)
    (dirs[1] / f"{NAME}.npy").unlink()
    r = run_task(task_for(row, *dirs))
    assert r.status is Status.ERROR and r.accuracy == "Nan" and r.cells == ("Nan",) * 5
    assert r.message == f"Dump file: {NAME}.npy not found."


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        (lambda p: p.write_bytes(p.read_bytes()[:-8]), "truncated"),
        (lambda p: p.write_bytes(b"\x00garbage" * 20), "not a valid npy"),
        (lambda p: np.save(p, np.ones(4, np.float32)), "holds shape [4] but the dump records [3]"),
    ],
)
def test_bad_npy_is_an_error_row(record, dirs, damage, words):
    row = _row(record, np.ones(3, np.float32), np.ones(3, np.float32), dirs)
    damage(dirs[0] / f"{NAME}.npy")
    r = run_task(task_for(row, *dirs))
    assert r.status is Status.ERROR and words in r.message


def test_no_npy_dir_is_an_error(record, dirs):
    row = _row(record, np.ones(3, np.float32), np.ones(3, np.float32), dirs)
    r = run_task(task_for(row, dirs[0], None))
    assert r.status is Status.ERROR and "No tensor data directory" in r.message


def test_big_chunked_file_with_nan_mismatch(record, dirs):
    n = np.ones(READ_CHUNK * 2 + 3, np.float32)
    b = n.copy()
    b[-1] = np.nan
    r = run_task(task_for(_row(record, n, b, dirs), *dirs))
    assert r.cells == ("N/A",) * 5 and r.status is Status.FAIL


def test_scalar_files(record, dirs):
    np.save(dirs[0] / "Torch_add_0_forward_input.1.npy", np.array(1))
    np.save(dirs[1] / "Torch_add_0_forward_input.1.npy", np.array(1))
    row = Row(
        record("Torch_add_0_forward_input.1", "[]", "<class 'int'>", [1, 1, 1, 1]),
        record("Torch_add_0_forward_input.1", "[]", "<class 'int'>", [1, 1, 1, 1]),
    )
    r = run_task(task_for(row, *dirs))
    assert r.cells == ("unsupported", "0.000000000000", "0.000000000000", "Nan", "Nan")


def test_fuzzy_row_gets_the_original_message_and_warns(record, dirs):
    row = _row(
        record,
        np.ones(3, np.float32),
        np.ones(3, np.float32),
        dirs,
        name="Torch_add_1_forward_output",
        bench_name="Torch_add_0_forward_output",
    )
    r = run_task(task_for(row, *dirs))
    assert r.accuracy == "Yes" and r.message == MSG_FUZZY and r.status is Status.WARN


def test_task_for_an_unmatched_row_is_refused(record):
    with pytest.raises(ValueError, match="not matched"):
        task_for(Row(record(NAME), None), None, None)


def test_summary_cells_are_signed_diffs_as_pandas_prints_them(record):
    n = record(NAME, [3], stats=[2.0, -1.0, 0.5, float("nan")])
    b = record(NAME, [3], stats=[1.5, -1.0, 0.25, 3.0])
    r = summary_result(Row(n, b))
    assert r.cells == ("0.5", "0.0", "0.25", "")  # a NaN diff is an empty cell
    assert r.accuracy == "" and r.status is Status.FAIL and isinstance(r.reason, StatDiffers)
    assert reason_text(r.reason).startswith("max differs by 0.5 > 1e-06 + 0.001 × ")


def test_summary_of_legacy_ints_and_non_numbers(record):
    legacy = record(NAME, [3], stats=[2.0, -1.0, 0.5], dump_step=1)
    assert summary_result(Row(legacy, legacy)).cells == ("0.0", "0.0", "0.0", "Nan")
    ints = record(NAME, [3], "torch.int64", [3, 0, 1.5, "Nan"])
    assert summary_result(Row(ints, ints)).cells == ("0", "0", "0.0", "Nan")
    empty = record(NAME, [0], stats=[[], [], [], "Nan"])
    r = summary_result(Row(empty, empty))
    assert r.cells == ("Nan",) * 4 and r.status is Status.PASS
    overflow = record(NAME, [3], stats=[1.0, 0.0, 0.5, 1.0], dump_step=101)
    assert summary_result(Row(overflow, overflow)).cells == ("Nan",) * 4


def test_summary_of_a_fuzzy_row_and_of_an_unmatched_row(record):
    a = record("Torch_add_1_forward_output")
    b = record("Torch_add_0_forward_output")
    r = summary_result(Row(a, b, fuzzy=True))
    assert r.status is Status.WARN and MSG_FUZZY in r.message
    assert summary_result(Row(a, None)).cells == ("Nan",) * 4


def test_unmatched_results(record):
    npu_only = unmatched_result(Row(record(NAME), None))
    assert npu_only.cells == ("Nan",) * 5 and npu_only.accuracy == "Nan" and npu_only.message == MSG_NO_BENCH
    assert npu_only.status is Status.UNMATCHED
    bench_only = unmatched_result(Row(None, record(NAME)), summary=True)
    assert bench_only.cells == ("Nan",) * 4 and bench_only.accuracy == "" and bench_only.message == MSG_NO_NPU


def test_fortran_ordered_file_against_c_ordered(record, dirs):
    b = np.arange(12, dtype=np.float32).reshape(3, 4)
    n = b.copy()
    n[2, 1] += 1
    row = _row(record, np.asfortranarray(n), b, dirs)
    r = run_task(task_for(row, *dirs))
    assert r.max_abs == 1.0 and r.worst_index == (2, 1)


def _in_parts(task, part_bytes: int):
    from ptdbg_tui.engine.workers.tasks import finish_parts, part_bounds, run_part

    bounds = part_bounds(task, part_bytes)
    return len(bounds), finish_parts(task, [run_part(task, a, z) for a, z in bounds])


def test_a_tensor_split_into_parts_gives_the_whole_result(record, dirs):
    """Parts merge in order into the very floats of one pass: cells, errors, worst element, histogram."""
    rng = np.random.default_rng(5)
    b = rng.standard_normal((9, READ_CHUNK // 3 + 7)).astype(np.float16)
    n = (b * (1 + 1e-2 * rng.standard_normal(b.shape))).astype(np.float16)
    n[7, 11], b[7, 11] = np.inf, np.inf
    n[8, 3] = 9.0
    task = task_for(_row(record, n, b, dirs, bench_name="Torch_add_1_forward_output"), *dirs)
    count, got = _in_parts(task, READ_CHUNK * 4)
    want = run_task(task)
    assert count == 4  # 3 full parts of READ_CHUNK elements and a short one
    for field in ("cells", "message", "status", "errors", "worst_index", "histogram", "euc_dist"):
        assert getattr(got, field) == getattr(want, field), field
    assert got.worst_index == (8, 3) and "fuzzy" in got.message.lower()


def test_a_part_that_cannot_be_read_settles_the_task(record, dirs):
    n = np.arange(3 * READ_CHUNK, dtype=np.float32)
    row = _row(record, n, n.copy(), dirs)
    task = task_for(row, *dirs)
    path = dirs[1] / f"{NAME}.npy"
    path.write_bytes(path.read_bytes()[:-100])  # truncated
    count, got = _in_parts(task, READ_CHUNK * 8)
    assert count == 3 and got.status is Status.ERROR and "truncated" in got.message
    assert got.cells == run_task(task).cells
