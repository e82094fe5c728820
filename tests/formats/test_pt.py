"""``.pt`` files as torch.save writes them, read without torch: every dtype and layout msprobe saves,
chunked reading, and a file that holds anything but a tensor refused before any of it runs."""

from __future__ import annotations

import io
import os
import pickle
import zipfile
from collections import OrderedDict

import numpy as np
import pytest

from ptdbg_tui.formats import float8
from ptdbg_tui.formats.pt import PtError
from ptdbg_tui.formats.tensorfile import FILE_ERRORS, WIDENED, iter_chunks, load_tensor, read_tensor

torch = pytest.importorskip("torch")


def _save(tmp_path, name, value):
    path = tmp_path / f"{name}.pt"
    torch.save(value, path)
    return path


@pytest.mark.parametrize(
    ("name", "make"),
    [
        ("f32", lambda: torch.randn(3, 4)),
        ("f16", lambda: torch.randn(5).half()),
        ("f64", lambda: torch.randn(2, 2).double()),
        ("bf16", lambda: torch.randn(4, 3).bfloat16()),
        ("i64", lambda: torch.arange(7)),
        ("i8", lambda: torch.arange(-3, 3, dtype=torch.int8)),
        ("bool", lambda: torch.tensor([True, False, True])),
        ("zero_d", lambda: torch.tensor(2.5)),
        ("empty", lambda: torch.zeros(0, 3)),
        ("view", lambda: torch.arange(20.0)[5:15]),  # saved with its whole storage and an offset
        ("strided", lambda: torch.randn(4, 6)[:, ::2]),  # not contiguous: read whole
        ("param", lambda: torch.nn.Parameter(torch.randn(3))),
        ("grad", lambda: torch.randn(3, requires_grad=True) * 2),
        # torch saves these as an untyped storage (its size in bytes) and the dtype, which was refused
        # ("it refers to torch.storage.UntypedStorage, which is not part of a tensor")
        ("u16", lambda: torch.arange(60_000, 60_010, dtype=torch.int32).to(torch.uint16)),
        ("u32", lambda: torch.arange(5, dtype=torch.int64).to(torch.uint32)),
        ("u64", lambda: torch.arange(5).to(torch.uint64)),
        *(
            (name, lambda name=name: (torch.randn(6, 4) * 3)[1:5].to(getattr(torch, name)))
            for name in float8.FORMATS
        ),
    ],
)
def test_values_equal_torch_load(tmp_path, name, make):
    value = make()
    path = _save(tmp_path, name, value)
    header, array = read_tensor(path, float("inf"))
    widened = str(value.dtype).removeprefix("torch.") in WIDENED
    expected = value.detach().float().numpy() if widened else value.detach().numpy()
    assert header.shape == tuple(value.shape) and array.dtype == expected.dtype
    np.testing.assert_array_equal(array, expected)
    np.testing.assert_array_equal(load_tensor(path), expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float8_e5m2])
def test_large_tensors_are_read_in_chunks_into_one_buffer(tmp_path, dtype):
    value = torch.randn(300_003).to(dtype)  # fp32: over SMALL_FILE, listed by zipfile; the others in memory
    path = _save(tmp_path, "big", value)
    header, array = read_tensor(path, 0)
    assert array is None and header.data_offset > 0
    chunks = [c.copy() for c in iter_chunks(path, header, 4096)]
    assert len(chunks) == 74
    np.testing.assert_array_equal(np.concatenate(chunks), value.float().numpy().astype(header.dtype))


@pytest.mark.parametrize("name", float8.FORMATS)
def test_each_float8_byte_decodes_as_torch_reads_it(name):
    values = torch.arange(256, dtype=torch.uint8).view(getattr(torch, name)).float().numpy()
    np.testing.assert_array_equal(float8.table(name), values)  # NaN where torch's, signed zeros alike
    np.testing.assert_array_equal(
        np.signbit(float8.table(name)[values == 0]), np.signbit(values[values == 0])
    )


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda p: None, "not found"),
        (lambda p: p.write_bytes(b"PK\x03\x04 not really a zip"), "not a torch.save zip file"),
        (lambda p: torch.save({"a": torch.ones(2)}, p), "holds a dict, not a tensor"),
        (lambda p: torch.save([1, 2], p), "holds a list, not a tensor"),
        (lambda p: torch.save(np.arange(3), p), "refusing to unpickle it"),  # msprobe's ndarray leaves
        (lambda p: torch.save(torch.ones(2), p, _use_new_zipfile_serialization=False), "old (non-zip)"),
        (lambda p: p.write_bytes(_truncated(torch.ones(1000))), "not a torch.save zip file"),
    ],
)
def test_bad_files_are_errors_for_the_user(tmp_path, make, words):
    path = tmp_path / "t.pt"
    make(path)
    with pytest.raises(FILE_ERRORS) as e:
        read_tensor(path, float("inf"))
    assert words in str(e.value) and "t.pt" in str(e.value)


def _truncated(value) -> bytes:
    buf = io.BytesIO()
    torch.save(value, buf)
    return buf.getvalue()[:2000]


class _Payload:
    """Pickles as a call of os.mkdir: whoever unpickles it creates the marker directory."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


def _torch_save_layout(path, payload: bytes) -> None:
    """A zip laid out as torch.save lays it out, with our own data.pkl."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("t/data.pkl", payload)
        z.writestr("t/byteorder", "little")
        z.writestr("t/data/0", b"\0" * 16)
        z.writestr("t/version", "3\n")


def test_a_pickled_object_that_runs_code_is_refused_and_never_runs(tmp_path):
    armed = tmp_path / "proof_the_payload_is_live"
    pickle.loads(pickle.dumps(_Payload(str(armed)), protocol=2))
    assert armed.is_dir(), "a plain unpickler runs it"
    marker = tmp_path / "payload_ran"
    path = tmp_path / "evil.pt"
    _torch_save_layout(path, pickle.dumps(_Payload(str(marker)), protocol=2))
    with pytest.raises(PtError, match=r"refers to posix\.mkdir, which is not part of a tensor"):
        read_tensor(path, float("inf"))
    assert not marker.exists()


def test_a_payload_behind_allowed_names_never_runs(tmp_path):
    """Names a tensor uses first (the hooks' OrderedDict), then the payload."""
    marker = tmp_path / "payload_ran"
    path = tmp_path / "evil.pt"
    _torch_save_layout(path, pickle.dumps((OrderedDict(), _Payload(str(marker))), protocol=2))
    with pytest.raises(PtError, match="refusing to unpickle"):
        read_tensor(path, float("inf"))
    assert not marker.exists()


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_chunks_of_an_element_range(tmp_path, dtype):
    """A part of a tensor (cluster tasks split big ones) reads exactly its elements, bf16 widened."""
    t = torch.randn(3, 1000).to(getattr(torch, dtype))
    path = _save(tmp_path, dtype, t)
    header, _ = read_tensor(path)
    want = t.float().numpy().reshape(-1)
    got = np.concatenate([c.copy() for c in iter_chunks(path, header, 256, None, 512, 2100)])
    assert np.array_equal(got, want[512:2100])
