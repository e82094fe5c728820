"""Tensor metrics: the original's formulas and every edge case (docs/compare.md#metrics), on real arrays."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ptdbg_tui.compare.metrics import cells
from ptdbg_tui.compare.metrics.accumulator import CHUNK, HISTOGRAM_EDGES, compare_arrays
from ptdbg_tui.compare.model import Status
from ptdbg_tui.compare.reasons import Close, TensorShapes
from ptdbg_tui.compare.report.metric_words import reason_text

F32 = "torch.float32"


def _reference(n: np.ndarray, b: np.ndarray) -> tuple[float, float, float, float, float]:
    """Naive float64 formulas, each in its own pass."""
    x, y = n.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    eps = np.finfo(b.dtype).eps if b.dtype.kind == "f" else np.finfo(np.float64).eps
    cos = float(np.dot(x, y) / (np.linalg.norm(x) * np.linalg.norm(y)))
    d = np.abs(x - y)
    rel = d / np.where(y == 0, eps, np.abs(y))
    return cos, float(d.max()), float(rel.max()), float(np.mean(rel < 0.001)), float(np.mean(rel < 0.005))


def test_known_values_and_cells():
    n = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    b = np.array([1.0, 2.0, 3.0, 5.0], np.float32)
    r = compare_arrays(n, b, F32, F32)
    cos = 34 / math.sqrt(30 * 39)
    assert r.cells == (f"{cos:.12f}", "1.000000000000", "0.200000000000", "0.750000000000", "0.750000000000")
    assert r.accuracy == "Yes" and r.status is Status.PASS  # cos 0.994 >= 0.99, MaxAbsErr 1 is not > 1
    assert r.cosine == pytest.approx(cos, abs=1e-15)
    assert (r.worst_index, r.worst_npu, r.worst_bench) == ((3,), 4.0, 5.0)
    assert r.message == ""


@pytest.mark.parametrize(
    ("size", "noise", "zeros"),
    [
        (7, 2e-3, True),
        (CHUNK - 1, 2e-3, True),
        (CHUNK, 2e-3, True),
        (CHUNK + 1, 2e-3, True),
        (3 * CHUNK + 17, 2e-3, True),
        (2 * CHUNK, 5e-4, False),  # every relative error < 0.005, some >= 0.001
        (2 * CHUNK, 1e-5, False),  # every relative error < 0.001
    ],
)
def test_chunked_matches_the_naive_float64_formulas(size, noise, zeros):
    rng = np.random.default_rng(size)
    b = rng.standard_normal(size).astype(np.float32)
    n = (b * (1 + noise * rng.standard_normal(size))).astype(np.float32)
    if zeros:
        b[::97] = 0  # bench zeros: the eps denominator
    r = compare_arrays(n, b, F32, F32)
    cos, mae, rel, r1, r5 = _reference(n, b)
    assert r.cosine == pytest.approx(cos, rel=1e-13)
    assert (r.max_abs, r.max_rel) == (mae, pytest.approx(rel, rel=1e-15))
    assert (r.ratio_1e3, r.ratio_5e3) == (pytest.approx(r1), pytest.approx(r5))
    assert r.cells[1:] == (f"{mae:.12f}", f"{rel:.12f}", f"{r1:.12f}", f"{r5:.12f}")
    worst = int(np.argmax(np.abs(n.astype(np.float64) - b)))
    assert r.worst_index == (worst,)
    assert sum(r.histogram) == size and len(r.histogram) == len(HISTOGRAM_EDGES) - 1


def test_worst_index_is_unravelled_in_a_later_chunk():
    b = np.zeros((3, CHUNK), np.float32)
    n = b.copy()
    n[2, 5] = 7.0
    r = compare_arrays(n, b, F32, F32)
    assert r.worst_index == (2, 5) and (r.worst_npu, r.worst_bench) == (7.0, 0.0)


def test_histogram_bins():
    b = np.zeros(5, np.float64)
    n = np.array([0.0, 1e-12, 1e-3, 1.5, 1000.0])
    r = compare_arrays(n, b, "torch.float64", "torch.float64")
    edges = r.histogram_edges
    for value in n:
        k = next(i for i in range(len(edges) - 1) if edges[i] <= value < edges[i + 1])
        assert r.histogram[k] >= 1
    assert r.histogram[0] == 2 and r.histogram[-1] == 1 and sum(r.histogram) == 5
    assert compare_arrays(n, b, "torch.float64", "torch.float64", histogram=False).histogram == ()


def test_inputs_are_never_mutated_and_memmaps_are_fine(tmp_path):
    b = np.array([0.0, 1.0, np.nan, 2.0], np.float32)
    n = np.array([0.5, 1.0, np.nan, 2.0], np.float32)
    np.save(tmp_path / "b.npy", b)
    mb = np.load(tmp_path / "b.npy", mmap_mode="r")
    before = (n.copy(), b.copy())
    compare_arrays(n, mb, F32, F32)
    assert np.array_equal(n, before[0], equal_nan=True) and np.array_equal(mb, before[1], equal_nan=True)


def test_bench_zero_uses_the_bench_dtype_eps():
    for dtype, eps in ((np.float16, 9.765625e-4), (np.float32, 1.1920928955078125e-07)):
        n = np.array([1e-3, 1.0], dtype)
        b = np.array([0.0, 1.0], dtype)
        r = compare_arrays(n, b, "torch.x", "torch.x")
        assert r.max_rel == pytest.approx(float(n[0]) / eps)
    r = compare_arrays(np.array([2, 1]), np.array([0, 1]), "torch.int64", "torch.int64")
    assert r.max_rel == pytest.approx(2 / np.finfo(np.float64).eps)


def test_scalars():
    r = compare_arrays(np.array(1), np.array(1), "<class 'int'>", "<class 'int'>")
    assert r.cells == ("unsupported", "0.000000000000", "0.000000000000", "Nan", "Nan")
    assert r.accuracy == "Nan" and r.message == cells.MSG_SCALAR
    assert r.status is Status.PASS and isinstance(r.reason, Close)  # the original says Nan
    r = compare_arrays(np.array(2.5), np.array(2.0), "<class 'float'>", "<class 'float'>")
    assert r.cells[1:3] == ("0.500000000000", "0.250000000000") and r.status is Status.WARN
    loss = compare_arrays(np.array(0.5001, np.float32), np.array(0.5, np.float32), F32, F32)
    assert loss.accuracy == "Nan" and loss.status is Status.PASS  # a 0-d loss within 0.1 %
    r = compare_arrays(np.array(True), np.array(False), "<class 'bool'>", "<class 'bool'>")
    assert r.cells[1] == "1.000000000000"
    r = compare_arrays(np.array(3.0, np.float32), np.array(0.0, np.float32), F32, F32)  # 0-d tensor
    assert r.max_rel == pytest.approx(3.0 / np.finfo(np.float32).eps)


def test_scalar_nan():
    same = compare_arrays(np.array(np.nan), np.array(np.nan), "<class 'float'>", "<class 'float'>")
    assert same.cells[1] == "0.000000000000" and "same 1 position" in same.message
    diff = compare_arrays(np.array(np.nan), np.array(1.0), "<class 'float'>", "<class 'float'>")
    assert diff.cells == ("N/A",) * 5 and diff.accuracy == "No" and cells.MSG_INF_NAN in diff.message


def test_one_element_tensor_has_no_cosine():
    r = compare_arrays(np.array([2.0], np.float32), np.array([2.0], np.float32), F32, F32)
    assert r.cells == ("unsupported", "0.000000000000", "0.000000000000", "1.000000000000", "1.000000000000")
    assert r.accuracy == "Nan" and r.message == cells.MSG_COS_ONE and r.status is Status.PASS
    r = compare_arrays(np.array([2.0], np.float32), np.array([3.0], np.float32), F32, F32)
    assert r.status is Status.WARN and r.accuracy == "Nan"


def test_empty_tensors():
    e = np.zeros((0, 3), np.float32)
    r = compare_arrays(e, e, F32, F32)
    assert (
        r.cells == ("unsupported", "0", "0", "0", "0")
        and r.accuracy == "Nan"
        and r.message == cells.MSG_EMPTY
    )
    assert r.status is Status.PASS


def test_zero_tensors():
    z, v = np.zeros(4, np.float32), np.array([4.0, 1.0, 2.0, 3.0], np.float32)
    both = compare_arrays(z, z, F32, F32)
    assert both.cells[0] == "1.0" and both.accuracy == "Yes" and both.status is Status.PASS
    npu = compare_arrays(z, v, F32, F32)  # the spec's observed Torch_relu row
    assert npu.cells == ("Nan", "4.000000000000", "1.000000000000", "0.000000000000", "0.000000000000")
    assert npu.accuracy == "Nan" and npu.message == cells.MSG_COS_NPU_ZERO and npu.status is Status.WARN
    bench = compare_arrays(v, z, F32, F32)
    assert bench.cells[0] == "Nan" and bench.message == cells.MSG_COS_BENCH_ZERO


def test_nan_and_inf_at_the_same_positions_are_zeroed_for_every_metric():
    n = np.array([1.0, np.nan, np.inf, -np.inf, 2.0], np.float32)
    b = np.array([1.0, np.nan, np.inf, -np.inf, 2.0], np.float32)
    r = compare_arrays(n, b, F32, F32)
    assert r.cells == ("1.0", "0.000000000000", "0.000000000000", "1.000000000000", "1.000000000000")
    assert "same 3 position(s)" in r.message and r.accuracy == "Yes" and r.status is Status.WARN


@pytest.mark.parametrize(
    ("n", "b"),
    [
        ([1.0, np.nan, 2.0], [1.0, 1.0, 2.0]),
        ([1.0, np.nan, 2.0], [1.0, 2.0, np.nan]),
        ([1.0, np.inf, 2.0], [1.0, np.nan, 2.0]),
        ([1.0, np.inf, 2.0], [1.0, -np.inf, 2.0]),  # the original would call these equal
    ],
)
def test_nan_or_inf_at_different_positions(n, b):
    r = compare_arrays(np.array(n, np.float32), np.array(b, np.float32), F32, F32)
    assert r.cells == ("N/A",) * 5 and r.accuracy == "No" and r.status is Status.FAIL
    assert r.message == cells.MSG_INF_NAN


def test_nan_mismatch_in_a_later_chunk_settles_the_result():
    n = np.ones(3 * CHUNK, np.float32)
    b = n.copy()
    b[2 * CHUNK + 3] = np.nan
    assert compare_arrays(n, b, F32, F32).cells == ("N/A",) * 5


def test_shape_mismatch_is_reported_not_crashed():
    r = compare_arrays(np.ones((2, 3), np.float32), np.ones((3, 2), np.float32), F32, F32)
    assert r.cells == ("shape unmatched",) * 5 and r.accuracy == "Unmatched" and r.message == cells.MSG_SHAPE
    assert r.status is Status.FAIL and r.reason == TensorShapes(npu=(2, 3), bench=(3, 2))
    assert reason_text(r.reason) == "shapes differ: NPU [2, 3] vs bench [3, 2]"


def test_dtype_mismatch_is_kept_in_the_message_and_warns():
    n = np.linspace(0, 1, 10).astype(np.float16)
    b = np.linspace(0, 1, 10).astype(np.float32)
    r = compare_arrays(n, b, "torch.float16", F32)
    assert r.accuracy == "Yes" and cells.MSG_DTYPE in r.message and r.status is Status.WARN


def test_bf16_stored_as_fp32_against_fp32_is_compared_and_flagged():
    b = np.linspace(1, 2, 100).astype(np.float32)
    n = (b.view(np.uint32) & 0xFFFF0000).view(np.float32)  # bf16 rounding, stored as fp32
    r = compare_arrays(n, b, "torch.bfloat16", F32)
    assert r.cells[0] == "1.0" and r.accuracy == "Yes" and cells.MSG_DTYPE in r.message
    assert 0 < r.max_abs < 0.01


def test_bool_and_int_tensors():
    r = compare_arrays(
        np.array([True, False, True]), np.array([True, True, True]), "torch.bool", "torch.bool"
    )
    assert r.max_abs == 1.0 and r.accuracy == "No"
    r = compare_arrays(np.arange(5), np.arange(5), "torch.int64", "torch.int64")
    assert r.cells[0] == "1.0" and r.status is Status.PASS


def test_cosine_above_0_99999_prints_as_one():
    b = np.ones(1000, np.float64)
    n = b.copy()
    n[0] = 1.2  # cos ≈ 0.99998 → stays; tiny change → "1.0"
    r = compare_arrays(n, b, "torch.float64", "torch.float64")
    assert r.cells[0] == f"{r.cosine:.12f}" and r.cosine < 0.99999
    n[0] = 1.01
    assert compare_arrays(n, b, "torch.float64", "torch.float64").cells[0] == "1.0"


@pytest.mark.parametrize(
    ("cos_scale", "shift", "accuracy", "words"),
    [
        (1.0, 0.0005, "Yes", "not (Cosine"),
        (1.0, 2.0, "No", "MaxAbsErr 2 > 1"),
    ],
)
def test_accuracy_from_the_metrics(cos_scale, shift, accuracy, words):
    b = np.linspace(1, 2, 50)
    r = compare_arrays(b * cos_scale + shift, b, "torch.float64", "torch.float64")
    assert r.accuracy == accuracy and words in reason_text(r.reason)


def test_uncomparable_dtype_is_an_error():
    r = compare_arrays(np.array(["a", "b"]), np.array(["a", "b"]), "str", "str")
    assert r.status is Status.ERROR and "npy dtype" in r.message
    c = np.array([1 + 1j, 2j])
    assert compare_arrays(c, c, "torch.complex128", "torch.complex128").status is Status.ERROR


def test_large_magnitudes_do_not_overflow():
    b = np.full(10, 3e38, np.float32)
    r = compare_arrays(b, b, F32, F32)
    assert r.cells[0] == "1.0" and r.max_abs == 0.0


@pytest.mark.parametrize("size", [1, 8191, 8192, 3 * 8192 + 77, 1 << 18])
def test_sums_of_squares_are_the_sliced_dot_products_added_in_order(size):
    """The stacked matmul gives the very floats of one np.dot per slice: the cells do not move."""
    from ptdbg_tui.compare.metrics.accumulator import DOT_SLICE, _sum_squares

    rng = np.random.default_rng(size)
    a = rng.standard_normal(size) * 10.0 ** rng.uniform(-6, 6, size)
    want = float(sum(np.dot(s, s) for s in (a[i : i + DOT_SLICE] for i in range(0, a.size, DOT_SLICE))))
    assert _sum_squares(a) == want
