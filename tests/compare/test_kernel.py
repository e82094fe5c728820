"""The fused metric pass (numba) and the numpy pass against numpy's element-wise operations: the very
same floats, so a CSV does not depend on which pass ran."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ptdbg_tui.compare.metrics import accumulator
from ptdbg_tui.compare.metrics.accumulator import FIVE_THOUSANDTHS, THOUSANDTH, compare_arrays
from ptdbg_tui.compare.metrics.kernel import fused_pass
from ptdbg_tui.compare.metrics.numpy_pass import numpy_pass

EPS = 1.1920928955078125e-07


def _pair(dtype_n, dtype_b, size=70_001, seed=0):
    rng = np.random.default_rng(seed)
    b = rng.standard_normal(size) * 10.0 ** rng.integers(-3, 4, size)
    n = b * (1 + 4e-3 * rng.standard_normal(size))  # relative errors on both sides of 1e-3 and 5e-3
    b[::97] = 0.0  # bench zeros: the eps denominator
    n[::89] = b[::89]
    return n.astype(dtype_n), b.astype(dtype_b)


def _as_read(a):
    return a.view(np.uint16) if a.dtype == np.float16 else a


def _fused(n, b, x, y, d):
    return fused_pass(_as_read(n), _as_read(b), x, y, d, EPS, THOUSANDTH, FIVE_THOUSANDTHS)


def _numpy(n, b, x, y, d):
    with np.errstate(invalid="ignore", over="ignore"):  # as the accumulator calls it
        return numpy_pass(
            n, b, x, y, d, np.empty(n.size), np.empty(n.size, bool), EPS, THOUSANDTH, FIVE_THOUSANDTHS
        )


PASSES = pytest.mark.parametrize("element_pass", [_fused, _numpy], ids=["fused", "numpy"])


def _run(n, b, element_pass=_fused):
    x, y, d = (np.empty(n.size) for _ in range(3))
    return element_pass(n, b, x, y, d), x, y, d


@PASSES
@pytest.mark.parametrize(
    ("dn", "db"),
    [(np.float32, np.float32), (np.float16, np.float16), (np.float64, np.float64), (np.float16, np.float32)],
)
def test_the_pass_gives_numpys_values(dn, db, element_pass):
    n, b = _pair(dn, db)
    (bad, top, rel_top, low, high, flips, zero_top), x, y, d = _run(n, b, element_pass)
    wx, wy = n.astype(np.float64), b.astype(np.float64)
    wd = np.abs(wx - wy)
    denominator = np.abs(wy)
    denominator[denominator == 0] = EPS
    rel = wd / denominator
    assert not bad
    for got, want in ((x, wx), (y, wy), (d, wd)):
        assert np.array_equal(got.view(np.int64), want.view(np.int64))
    assert (top, rel_top) == (wd.max(), rel.max())
    assert (low, high) == (np.count_nonzero(rel < THOUSANDTH), np.count_nonzero(rel < FIVE_THOUSANDTHS))
    assert 0 < low < high < n.size
    assert flips == np.count_nonzero((wx > 0) != (wy > 0))
    assert zero_top == wd[wy == 0].max() > 0  # where another eps would rescale the ratio (msprobe's CSV)


@PASSES
def test_every_float16_widens_exactly(element_pass):
    """All 65,536 float16 bit patterns: zeros, subnormals, normals, infinities and NaN payloads."""
    h = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    (bad, *_), x, _, _ = _run(h, h, element_pass)
    assert bad
    assert np.array_equal(x.view(np.int64), h.astype(np.float64).view(np.int64))


@PASSES
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("side", [0, 1])
def test_any_nan_or_inf_is_found(dtype, value, side, element_pass):
    arrays = [np.linspace(-1, 1, 1001).astype(dtype) for _ in range(2)]
    assert not _run(*arrays, element_pass)[0][0]
    arrays[side][517] = value
    assert _run(*arrays, element_pass)[0][0]


def test_a_difference_too_large_for_a_float_is_no_nan_or_inf():
    """Finite float64 data whose |x − y| overflows: not void in either pass, and the same values."""
    n, b = np.array([1.5e308, 1.0, -2.0]), np.array([-1.5e308, 1.0, 2.0])
    fused, numpy = _run(n, b, _fused)[0], _run(n, b, _numpy)[0]
    assert not fused[0] and fused == numpy


@pytest.mark.parametrize("histogram", [False, True])
def test_a_tensor_compares_the_same_with_either_pass(monkeypatch, histogram):
    """The whole Result (cells, error measures, worst element, histogram), NaN/Inf set aside included."""
    n, b = _pair(np.float32, np.float32, size=300_000, seed=2)
    n[[5, 200_000]] = b[[5, 200_000]] = np.inf
    n[7] = np.nan

    def compared():
        return compare_arrays(n, b, "torch.float32", "torch.float32", histogram=histogram)

    monkeypatch.setattr(accumulator, "_fused", None)  # put back as it was after the test
    accumulator.warm_up()
    fused = compared()
    accumulator._fused = None
    numpy = compared()
    assert (fused.cells, fused.message, fused.errors, fused.worst_index, fused.histogram) == (
        numpy.cells,
        numpy.message,
        numpy.errors,
        numpy.worst_index,
        numpy.histogram,
    )


def _outliers(n, b):
    """A few far-off elements: the robust error sets them aside (the chunk's |x − y| made whole)."""
    n[[70_000, 150_000, 290_000]] += 1e3


def _late_worst(n, b):
    """The largest |x − y| twice, in later blocks of the first chunk: the first of them is the worst."""
    b[[100_000, 200_000]] = 0.0
    n[[100_000, 200_000]] = 1e3


@pytest.mark.parametrize("histogram", [False, True])
@pytest.mark.parametrize("change", [None, _outliers, _late_worst], ids=["plain", "outliers", "late-worst"])
def test_the_numpy_pass_block_by_block_gives_one_passs_values(monkeypatch, histogram, change):
    """Without NaN/Inf the numpy pass runs block by block (sums of whole slices, the worst element, the
    histogram and the robust error's trimmed share gathered over blocks): the fused pass's Result, over
    more than a chunk (a tail shorter than a block, and one shorter than a sum's slice)."""
    rng = np.random.default_rng(3)
    b = rng.standard_normal(300_001).astype(np.float32)
    n = (b * (1 + 4e-3 * rng.standard_normal(b.size))).astype(np.float32)
    b[::97], n[::97] = 0.0, 1e-3  # bench zeros, and |x − y| no larger than elsewhere
    if change is not None:
        change(n, b)

    def compared():
        return compare_arrays(n, b, "torch.float32", "torch.float32", histogram=histogram)

    monkeypatch.setattr(accumulator, "_fused", None)
    numpy = compared()
    accumulator.warm_up()
    fused = compared()
    assert numpy == fused


@pytest.mark.parametrize(
    "make",
    [
        lambda a: a.astype(np.int32),
        lambda a: a.astype(">f4"),  # big-endian
        lambda a: np.repeat(a, 2)[::2],  # strided
        lambda a: a > 0,
    ],
)
def test_other_dtypes_and_layouts_are_cast_first(make):
    n, b = _pair(np.float64, np.float64, size=5_000, seed=1)
    n, b = make(n * 100), make(b * 100)
    got = compare_arrays(n, b, "torch.float32", "torch.float32", histogram=False)
    want = compare_arrays(_direct(n), _direct(b), "torch.float32", "torch.float32", histogram=False)
    assert (got.cells, got.errors, got.worst_index) == (want.cells, want.errors, want.worst_index)


def _direct(a):
    """The same values as the pass reads them directly: contiguous, native floats (same eps)."""
    if a.dtype.kind == "f":
        return np.ascontiguousarray(a, a.dtype.newbyteorder("="))
    return a.astype(np.float64)


def test_nan_and_inf_at_the_same_places_are_set_aside_as_before():
    n, b = _pair(np.float32, np.float32, size=10_000)
    n[[3, 50]] = b[[3, 50]] = np.nan
    n[7] = b[7] = np.inf
    clean_n, clean_b = n.copy(), b.copy()
    clean_n[[3, 7, 50]] = clean_b[[3, 7, 50]] = 0
    got = compare_arrays(n, b, "torch.float32", "torch.float32", histogram=False)
    want = compare_arrays(clean_n, clean_b, "torch.float32", "torch.float32", histogram=False)
    assert got.cells == want.cells and "NaN/Inf at the same 3 position(s)" in got.message


def test_without_a_writable_cache_folder_the_pass_is_compiled_per_process():
    """No cache locator applies (as a read-only install without a writable home): still compiled."""
    probe = (
        "import numpy as np; from ptdbg_tui.compare.metrics.kernel import fused_pass; "
        "from ptdbg_tui.compare.metrics.accumulator import compare_arrays; "
        "a = np.arange(5, dtype=np.float32); r = compare_arrays(a, a + 1, 'f', 'f'); "
        "print(type(fused_pass._cache).__name__, r.cells[1])"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(sys.path),
        "NUMBA_CACHE_LOCATOR_CLASSES": "numba.core.caching.IPythonCacheLocator",
    }
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["NullCache", "1.000000000000"]


@pytest.mark.parametrize("own", [False, True], ids=["xdg", "numba-cache-dir"])
def test_the_compiled_pass_is_cached_in_the_users_cache_folder(own, tmp_path):
    """Not in the package's ``__pycache__`` (a checkout, site-packages): in ``$XDG_CACHE_HOME``'s
    ptdbg-tui/numba, unless the user set ``NUMBA_CACHE_DIR``, which wins."""
    probe = "from ptdbg_tui.compare.metrics.kernel import fused_pass; print(fused_pass._cache._cache_path)"
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    env.update(PYTHONPATH=os.pathsep.join(sys.path), XDG_CACHE_HOME=str(tmp_path / "xdg"))
    if own:
        env["NUMBA_CACHE_DIR"] = str(tmp_path / "own")
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    folder = Path(out.stdout.strip())
    root = tmp_path / "own" if own else tmp_path / "xdg" / "ptdbg-tui" / "numba"
    assert folder.is_relative_to(root) and folder.is_dir()


@PASSES
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_elements_positive_on_one_side_only_are_counted(dtype, element_pass):
    """Where a ReLU's mask differs: a sign flip, or 0 against a positive value (0 against a negative
    one does not flip a ReLU)."""
    b = np.array([1.0, -1.0, 0.0, 0.0, 0.0, 2.0, -3.0, 1e-3], dtype)
    n = np.array([1.0, 1.0, 1e-3, -1e-3, 0.0, -2.0, -3.0, 0.0], dtype)
    assert _run(n, b, element_pass)[0][5] == 4
