"""Checked npy access: every bad file is an NpyError with a message for the user, never a crash."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.lib import format as npformat

from ptdbg_tui.formats.npy import MMAP_THRESHOLD, NpyError, iter_chunks, load_npy, read_header, read_npy


def test_small_file_is_read_and_large_file_is_mapped(tmp_path):
    small, large = tmp_path / "s.npy", tmp_path / "l.npy"
    np.save(small, np.arange(10, dtype=np.float16))
    np.save(large, np.ones(MMAP_THRESHOLD // 4 + 1, dtype=np.float32))
    a = load_npy(small)
    assert not isinstance(a, np.memmap) and a.dtype == np.float16 and a[9] == 9
    b = load_npy(large)
    assert isinstance(b, np.memmap) and not b.flags.writeable and b.sum() == b.size


def test_zero_d_and_empty_arrays(tmp_path):
    np.save(tmp_path / "z.npy", np.array(2.5))
    np.save(tmp_path / "e.npy", np.zeros((0, 3), np.float32))
    assert load_npy(tmp_path / "z.npy").shape == ()
    assert load_npy(tmp_path / "e.npy", mmap=True).shape == (0, 3)


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda p: None, "not found"),
        (lambda p: p.write_bytes(b"this is not an npy file at all"), "not a valid npy"),
        (lambda p: p.write_bytes(b""), "not a valid npy"),
        (lambda p: p.mkdir(), "is a directory"),
        (lambda p: np.save(p, np.array([{"a": 1}], dtype=object), allow_pickle=True), "Python objects"),
    ],
)
def test_bad_files(tmp_path, make, words):
    path = tmp_path / "t.npy"
    make(path)
    with pytest.raises(NpyError) as e:
        load_npy(path)
    assert words in str(e.value) and "t.npy" in str(e.value)


def test_truncated_file(tmp_path):
    path = tmp_path / "t.npy"
    np.save(path, np.arange(1000, dtype=np.float32))
    data = path.read_bytes()
    path.write_bytes(data[:-100])
    with pytest.raises(NpyError, match="truncated: 3900 of 4000"):
        read_header(path)
    path.write_bytes(data[:40])  # inside the header
    with pytest.raises(NpyError, match="not a valid npy"):
        load_npy(path)


def test_header(tmp_path):
    path = tmp_path / "t.npy"
    np.save(path, np.zeros((2, 3), dtype=">f4"))
    h = read_header(path)
    assert h.shape == (2, 3) and h.dtype == np.dtype(">f4") and not h.fortran and h.nbytes == 24


@pytest.mark.parametrize("dtype", ["<f4", ">f4", "<f2", "?", "<i8"])
def test_iter_chunks_reads_everything_in_order(tmp_path, dtype):
    a = (np.arange(10_001) % 7).astype(dtype)
    path = tmp_path / "a.npy"
    np.save(path, a)
    chunks = [c.copy() for c in iter_chunks(path, read_header(path), 4096)]
    assert [c.size for c in chunks] == [4096, 4096, 1809]
    assert np.array_equal(np.concatenate(chunks), a)


def test_iter_chunks_reports_a_file_that_shrinks_while_read(tmp_path):
    path = tmp_path / "a.npy"
    np.save(path, np.arange(10_000, dtype=np.float32))
    header = read_header(path)
    chunks = iter_chunks(path, header, 1000)
    next(chunks)
    with open(path, "r+b") as f:
        f.truncate(header.data_offset + 2000)
    with pytest.raises(NpyError, match="shrank"):
        list(chunks)


def test_other_header_versions_and_long_headers(tmp_path):
    a = np.arange(6, dtype="<f8").reshape(2, 3)
    with open(tmp_path / "v2.npy", "wb") as f:
        npformat.write_array(f, a, version=(2, 0))
    assert np.array_equal(load_npy(tmp_path / "v2.npy"), a)
    wide = np.zeros(3, dtype=[(f"field_{k}", "<f4") for k in range(40)])  # a list descr, > 256 bytes
    np.save(tmp_path / "wide.npy", wide)
    header = read_header(tmp_path / "wide.npy")
    assert header.data_offset > 256 and header.shape == (3,) and len(header.dtype.names) == 40
    assert load_npy(tmp_path / "wide.npy").shape == (3,)


def test_fortran_order_and_read_npy_limit(tmp_path):
    a = np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4))
    np.save(tmp_path / "f.npy", a)
    header, data = read_npy(tmp_path / "f.npy", data_limit=1 << 20)
    assert header.fortran and np.array_equal(data, a)
    assert read_npy(tmp_path / "f.npy", data_limit=10)[1] is None  # too big to read whole
