"""A dump's files are untrusted: links out of the dump are never followed, sizes are checked against
the budget before anything is loaded, and a sidecar's skipped lines are said, with their line and why."""

from __future__ import annotations

import struct
import time
import tracemalloc

import numpy as np
import pytest

from ptdbg_tui.compare.report.line_words import unreadable_text
from ptdbg_tui.formats import budget
from ptdbg_tui.formats.calls import CallFollower, CallSpec, TensorArg, encode_call_line
from ptdbg_tui.formats.files import OUTSIDE
from ptdbg_tui.formats.layout import RankDump
from ptdbg_tui.formats.modules import ModuleFollower, encode_module_line
from ptdbg_tui.formats.npy import MAX_HEADER
from ptdbg_tui.formats.pkl import read_pkl
from ptdbg_tui.formats.reader import PklReader
from ptdbg_tui.formats.synthetic import write_array
from ptdbg_tui.formats.tensorfile import FILE_ERRORS, load_tensor, read_tensor
from ptdbg_tui.formats.unreadable import Malformed, NotJson
from ptdbg_tui.formats.writer import RankWriter

#: What reading a hostile file may allocate at most (it is refused before its data is read).
SMALL = 64 << 20


def _rank(tmp_path):
    """A rank folder with one tensor, and a secret beside the dump (outside it)."""
    rank = tmp_path / "dump" / "rank0"
    w = RankWriter(rank)
    write_array(w, "Torch_add_0_forward_output.0", np.arange(6, dtype=np.float32))
    w.close()
    secret = tmp_path / "secret.npy"
    np.save(secret, np.full(6, 42.0, np.float32))
    return rank, secret


def test_a_tensor_file_linked_out_of_the_dump_is_refused_never_read(tmp_path):
    rank, secret = _rank(tmp_path)
    target = rank / "api_stack_dump" / "Torch_add_0_forward_output.0.npy"
    target.unlink()
    target.symlink_to(secret)
    for read in (read_tensor, load_tensor):
        with pytest.raises(FILE_ERRORS) as e:
            read(target)
        assert OUTSIDE in str(e.value) and "Torch_add_0_forward_output.0.npy" in str(e.value)


def test_links_inside_the_dump_are_followed(tmp_path):
    """A link to another file of the same rank folder (or its data folder) stays allowed."""
    rank, _ = _rank(tmp_path)
    data = rank / "api_stack_dump"
    np.save(rank / "kept.npy", np.ones(6, np.float32))
    (data / "b.npy").symlink_to("Torch_add_0_forward_output.0.npy")
    (data / "c.npy").symlink_to(rank / "kept.npy")
    np.testing.assert_array_equal(load_tensor(data / "b.npy"), np.arange(6, dtype=np.float32))
    np.testing.assert_array_equal(load_tensor(data / "c.npy"), np.ones(6, np.float32))


def test_a_linked_rank_folder_is_its_own_dump(tmp_path):
    """A rank folder that is itself a link (a multi-rank layout of links) is read where it points."""
    rank, _ = _rank(tmp_path)
    link = tmp_path / "elsewhere" / "rank0"
    link.parent.mkdir()
    link.symlink_to(rank, target_is_directory=True)
    assert read_tensor(link / "api_stack_dump" / "Torch_add_0_forward_output.0.npy")[0].shape == (6,)
    assert len(read_pkl(link / "api_stack_dump.pkl").tensors) == 1


def test_a_pkl_and_a_sidecar_linked_out_of_the_rank_folder_are_refused(tmp_path):
    rank, _ = _rank(tmp_path)
    outside = tmp_path / "other.pkl"
    outside.write_bytes((rank / "api_stack_dump.pkl").read_bytes())
    (rank / "api_stack_dump.pkl").unlink()
    (rank / "api_stack_dump.pkl").symlink_to(outside)
    with pytest.raises(OSError, match="outside the dump"):
        read_pkl(rank / "api_stack_dump.pkl")
    (tmp_path / "calls.jsonl").write_text("{}\n")
    (rank / "api_stack_dump.calls.jsonl").symlink_to(tmp_path / "calls.jsonl")
    with pytest.raises(OSError, match="outside the dump"):
        CallFollower(rank / "api_stack_dump.calls.jsonl").read(final=True)


def _allocated(read) -> tuple[int, float, BaseException | None]:
    """Peak bytes numpy and Python allocated while ``read()`` ran, its seconds, what it raised."""
    tracemalloc.start()
    start = time.perf_counter()
    raised = None
    try:
        read()
    except Exception as e:
        raised = e
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak, time.perf_counter() - start, raised


def test_an_npy_header_claiming_gigabytes_is_never_read(tmp_path):
    """A v2 header whose length field says 4 GB, in a sparse file that holds them: read whole, it took
    4.4 GB of memory in the app's engine."""
    path = tmp_path / "x.npy"
    text = b"{'descr': '<f4', 'fortran_order': False, 'shape': (4, 6), }"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x02\x00" + struct.pack("<I", 0xF0000000) + text)
        f.truncate(0xF0000000 + 200)
    peak, seconds, raised = _allocated(lambda: read_tensor(path))
    assert isinstance(raised, FILE_ERRORS) and f"more than an npy header's {MAX_HEADER}" in str(raised)
    assert "x.npy" in str(raised) and peak < SMALL and seconds < 5


torch = pytest.importorskip("torch")


def test_a_pt_tensor_expanded_by_stride_0_is_refused_before_it_is_allocated(tmp_path):
    """1.8 KB on disk, 8 GB when expanded: it took 8.3 GB and 85 s before it was refused."""
    path = tmp_path / "Functional.relu.0.forward.output.0.pt"
    torch.save(torch.ones(1).expand(2_000_000_000), path)
    assert path.stat().st_size < 4096
    peak, seconds, raised = _allocated(lambda: load_tensor(path))
    assert isinstance(raised, budget.OverBudget), raised
    text = str(raised)
    assert (
        "Functional.relu.0.forward.output.0.pt" in text and "expanded from its storage by stride [0]" in text
    )
    assert "8 GB of memory" in text and budget.ENV in text
    assert peak < SMALL and seconds < 5


def test_an_expansion_within_the_budget_is_read(tmp_path, monkeypatch):
    path = tmp_path / "t.pt"
    torch.save(torch.arange(3.0).expand(4, 3), path)
    np.testing.assert_array_equal(load_tensor(path), np.tile(np.arange(3.0, dtype=np.float32), (4, 1)))
    monkeypatch.setenv(budget.ENV, "40")  # bytes: less than its 48 and its storage's 12
    with pytest.raises(budget.OverBudget, match="60 bytes of memory, more than the 40 bytes"):
        load_tensor(path)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", budget.DEFAULT_BYTES),
        ("4G", 4 << 30),
        ("512m", 512 << 20),
        ("1000", 1000),
        ("x", budget.DEFAULT_BYTES),
    ],
)
def test_the_budget_is_set_by_its_variable(monkeypatch, text, expected):
    monkeypatch.setenv(budget.ENV, text)
    assert budget.budget() == expected
    assert budget.allowance(expected + 1) == expected + 1  # what the records justify


def _calls(tmp_path, *extra: str):
    good = encode_call_line(
        CallSpec("Torch_add_0", "torch.add", [TensorArg("Torch_add_0_forward_input.0")], {})
    )
    path = tmp_path / "api_stack_dump.calls.jsonl"
    path.write_text("\n".join([good, *extra]) + "\n")
    return path


def test_a_cut_or_junk_call_line_is_kept_with_its_line_and_why(tmp_path):
    """They were counted and never reported: the reader now says which line and why."""
    path = _calls(tmp_path, '{"call": "Torch_mul_0", "fn": "torch.mul", "args": [{"ten', '{"call": 3}')
    follower = CallFollower(path)
    follower.read(final=True)
    assert set(follower.specs) == {"Torch_add_0"}
    (cut, junk) = follower.bad
    assert (cut.line, junk.line) == (2, 3)
    assert (
        unreadable_text(cut.reason).startswith("not valid JSON")
        and unreadable_text(junk.reason) == "not a call line: call must be a non-empty string"
    )


def test_a_junk_module_line_is_kept_with_its_line_and_why(tmp_path):
    path = tmp_path / "api_stack_dump.modules.jsonl"
    path.write_text(encode_module_line("Torch_add_0", [("net", "Net")]) + '\n["Torch_mul_0", 7]\n[[[\n')
    follower = ModuleFollower(path)
    follower.read(final=True)
    assert list(follower.chains) == ["Torch_add_0"]
    (junk, cut) = follower.bad
    assert (junk.line, cut.line) == (2, 3)
    assert junk.reason is Malformed.NOT_MODULE_LINE and isinstance(cut.reason, NotJson)
    assert unreadable_text(junk.reason).startswith("not a module line")


def test_the_reader_names_each_sidecar_with_its_skipped_lines(tmp_path):
    rank, _ = _rank(tmp_path)
    _calls(rank, "junk")
    (rank / "api_stack_dump.modules.jsonl").write_text("{}\n")
    reader = PklReader(RankDump(rank / "api_stack_dump.pkl", None, 0))
    reader.read(final=True)
    reader.read_modules(final=True)
    reader.read_calls(final=True)
    assert [unreadable_text(b.reason) for b in reader.sidecar_bad()] == [
        "api_stack_dump.modules.jsonl line 1: not a module line: expected [call, [[module, class], ...]]",
        "api_stack_dump.calls.jsonl line 2: not valid JSON (Expecting value at column 1)",
    ]
