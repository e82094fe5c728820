"""Whole-file and incremental pkl reading: partial lines, resume offsets, replaced files, bad lines."""

from __future__ import annotations

import json
import os

from ptdbg_tui.compare.report.line_words import unreadable_text
from ptdbg_tui.formats.pkl import PklFollower, read_pkl
from ptdbg_tui.formats.records import StackRecord, TensorRecord


def _write(path, lines, end="\n"):
    path.write_text("\n".join(lines) + end, encoding="utf-8")
    return path


def test_read_all_variants_with_blank_lines(tmp_path, v4_lines):
    lines = [v4_lines[0], "", v4_lines[1], "   ", *v4_lines[2:], ""]
    batch = read_pkl(_write(tmp_path / "dump.pkl", lines))
    assert not batch.bad
    assert len(batch.stacks) == 1 and isinstance(batch.stacks[0], StackRecord)
    assert [t.name for t in batch.tensors] == [json.loads(x)[0] for x in v4_lines if "stack" not in x]
    assert [t.order for t in batch.tensors] == list(range(len(batch.tensors)))
    assert batch.tensors[1].line == 3  # line numbers count the blank lines


def test_legacy_fixture_parses(legacy_pkl):
    batch = read_pkl(legacy_pkl)
    assert not batch.bad and not batch.stacks
    assert len(batch.tensors) == 8
    assert all(len(t.stats) == 3 and t.dump_step == 1 for t in batch.tensors)
    assert [t.entry.call for t in batch.tensors if t.entry][:4] == ["Functional_linear_0_forward"] * 4
    assert batch.tensors[2].shape == (3,)


def test_bad_lines_are_reported_and_the_rest_is_read(tmp_path, v4_lines):
    lines = [v4_lines[0], '["broken", 0, [], ', v4_lines[2], '["x", 0, [], "torch.float32"]', v4_lines[4]]
    batch = read_pkl(_write(tmp_path / "dump.pkl", lines))
    assert [t.name for t in batch.tensors] == [
        "Torch_add_0_forward_input.0",
        "Torch_add_0_forward_output",
        "Tensor_eq_0_forward_output",
    ]
    assert [(b.line, "JSON" in unreadable_text(b.reason)) for b in batch.bad] == [(2, True), (4, False)]


def test_partial_last_line_waits_and_resumes_from_offset(tmp_path, v4_lines):
    path = tmp_path / "dump.pkl"
    first = v4_lines[0] + "\n"
    half = v4_lines[2][:20]
    path.write_text(first + half, encoding="utf-8")
    follower = PklFollower(path)
    batch = follower.read()
    assert [t.name for t in batch.tensors] == ["Torch_add_0_forward_input.0"] and not batch.bad
    assert follower.offset == len(first.encode())
    assert not follower.read()  # nothing complete yet
    with open(path, "a", encoding="utf-8") as f:
        f.write(v4_lines[2][20:] + "\n" + v4_lines[3] + "\n")
    batch = follower.read()
    assert [t.name for t in batch.tensors] == ["Torch_add_0_forward_output"]
    assert [s.call for s in batch.stacks] == ["Torch_add_0_forward"]
    assert batch.tensors[0].line == 2 and batch.tensors[0].order == 1
    assert follower.offset == path.stat().st_size


def test_final_read_takes_an_unterminated_last_line(tmp_path, v4_lines):
    path = _write(tmp_path / "dump.pkl", v4_lines[:2], end="")
    follower = PklFollower(path)
    assert len(follower.read().tensors) == 1
    assert [t.name for t in follower.read(final=True).tensors] == ["Torch_add_0_forward_input.1"]


def test_truncated_file_resets(tmp_path, v4_lines):
    path = _write(tmp_path / "dump.pkl", v4_lines[:3])
    follower = PklFollower(path)
    assert len(follower.read().tensors) == 3
    _write(path, v4_lines[:1])  # the original deletes the pkl when a dump restarts
    batch = follower.read()
    assert batch.reset and [t.name for t in batch.tensors] == ["Torch_add_0_forward_input.0"]
    assert batch.tensors[0].order == 0


def test_replaced_file_resets_even_when_longer(tmp_path, v4_lines):
    path = _write(tmp_path / "dump.pkl", v4_lines[:1])
    follower = PklFollower(path)
    follower.read()
    replacement = _write(tmp_path / "new.pkl", v4_lines[4:7])
    os.replace(replacement, path)
    batch = follower.read()
    assert batch.reset and len(batch.tensors) == 3


def test_missing_file_is_empty_until_it_appears(tmp_path, v4_lines):
    path = tmp_path / "later.pkl"
    follower = PklFollower(path)
    assert not follower.read()
    _write(path, v4_lines[:1])
    assert len(follower.read().tensors) == 1


def test_chunked_reads_report_more(tmp_path, v4_lines):
    path = _write(tmp_path / "dump.pkl", v4_lines * 20)
    follower = PklFollower(path, chunk=512)
    first = follower.read()
    assert first.more and 0 < len(first.tensors) < 180
    assert len(read_pkl(path).tensors) == 180
    total = len(first.tensors)
    while True:
        batch = follower.read()
        total += len(batch.tensors)
        if not batch.more:
            break
    assert total == 180


def test_line_longer_than_chunk_is_skipped_with_a_bad_line(tmp_path, v4_lines):
    long_line = '["Torch_add_0_forward_output", 0, [], "torch.float32", [3], [' + "1.0, " * 200 + "1.0]]"
    path = _write(tmp_path / "dump.pkl", [long_line, v4_lines[0]])
    follower = PklFollower(path, chunk=256)
    batches = [follower.read() for _ in range(6)]
    bad = [b for batch in batches for b in batch.bad]
    names = [t.name for batch in batches for t in batch.tensors]
    assert bad and "longer than 256 bytes" in unreadable_text(bad[0].reason)
    assert "Torch_add_0_forward_input.0" in names


def test_two_values_on_one_line_fall_back_to_per_line_decoding(tmp_path, v4_lines):
    path = _write(tmp_path / "dump.pkl", [v4_lines[0] + " " + v4_lines[2], v4_lines[4]])
    batch = read_pkl(path)
    assert [t.name for t in batch.tensors] == ["Tensor_eq_0_forward_output"]
    assert len(batch.bad) == 1 and batch.bad[0].line == 1
    assert all(isinstance(t, TensorRecord) for t in batch.tensors)


def test_a_file_rewritten_in_place_to_the_same_size_is_read_again(tmp_path, v4_lines):
    """Same inode, same size (or an inode number reused after a replacement): the bytes before the
    offset tell that it is another file."""
    path = _write(tmp_path / "dump.pkl", v4_lines[:2])
    follower = PklFollower(path)
    assert len(follower.read().tensors) == 2
    other = [v4_lines[0], v4_lines[1].replace("add", "sub", 1)]
    before = path.stat().st_mtime_ns
    with open(path, "r+", encoding="utf-8") as f:  # in place: the inode stays
        f.write("\n".join(other) + "\n")
    os.utime(path, ns=(before + 10**9, before + 10**9))  # a later write (mtime ticks are coarse)
    batch = follower.read()
    assert batch.reset and [t.name for t in batch.tensors] == [json.loads(x)[0] for x in other]


def test_non_regular_files_and_odd_lines_are_reported_not_raised(tmp_path, v4_lines):
    os.mkfifo(tmp_path / "pipe.pkl")
    try:
        PklFollower(tmp_path / "pipe.pkl").read()
    except OSError as e:
        assert "named pipe" in e.strerror
    else:
        raise AssertionError("a pipe was read")
    lines = [
        v4_lines[0],
        "[" * 50_000,
        '["x", Infinity, [], "torch.float32", [1], [1, 1, 1, 1]]',
        '["../x", 0, [], "torch.float32", [1], [1, 1, 1, 1]]',
        '["y", 0, [], "torch.float32", [1], ["a"]]',
    ]
    batch = read_pkl(_write(tmp_path / "dump.pkl", lines))
    assert len(batch.tensors) == 1
    assert [unreadable_text(b.reason)[:24] for b in batch.bad] == [
        "JSON nested too deeply t",
        "dump_step must be an int",
        "the name is empty or hol",
        "stats holds a; expected ",
    ]


def test_names_escaped_by_json_keep_their_bytes_and_show_replaced(tmp_path):
    """Python's json writes a file name that is not UTF-8 as ``\\udcff``: its data file is the
    exact bytes; a surrogate no byte decodes to names no file and makes a bad line."""
    lines = [
        json.dumps(["Torch_x_0_forward_output.\udcff", 0, [], "torch.float\ud800", [1], [1, 1, 1, 1]]),
        json.dumps(["Torch_x_0_forward_output.\ud800", 0, [], "torch.float32", [1], [1, 1, 1, 1]]),
    ]
    assert "\\udcff" in lines[0]  # escaped: the file itself is UTF-8
    batch = read_pkl(_write(tmp_path / "dump.pkl", lines))
    (rec,) = batch.tensors
    assert rec.name == "Torch_x_0_forward_output.\ufffd" and rec.dtype == "torch.float\ufffd"
    assert os.fsencode(rec.data_name) == b"Torch_x_0_forward_output.\xff.npy"
    (bad,) = batch.bad
    assert "lone UTF-16 surrogate" in unreadable_text(bad.reason) and bad.text.encode("utf-8")  # printable
