"""Decoding and encoding of single pkl lines: every variant and every kind of bad line."""

from __future__ import annotations

import json
import math

import pytest

from ptdbg_tui.compare.report.line_words import unreadable_text
from ptdbg_tui.formats.pkl_line import decode_line, encode_stack_line, encode_tensor_line
from ptdbg_tui.formats.records import BadLine, StackRecord, TensorRecord, stat_value
from ptdbg_tui.formats.unreadable import NotJson


def test_four_stat_tensor_line(v4_lines):
    rec = decode_line(v4_lines[0], 7)
    assert isinstance(rec, TensorRecord)
    assert (rec.name, rec.dump_step, rec.dtype, rec.shape, rec.line) == (
        "Torch_add_0_forward_input.0",
        0,
        "torch.float32",
        (3,),
        7,
    )
    assert rec.stats == [3.0, 1.0, 2.0, 3.7416574954986572]
    assert [rec.stat(i) for i in range(4)] == [3.0, 1.0, 2.0, 3.7416574954986572]
    assert rec.entry is not None and rec.entry.call == "Torch_add_0_forward"
    assert not rec.is_scalar and rec.numel == 3


def test_legacy_three_stat_line_has_no_norm():
    rec = decode_line(
        '["Functional_linear_0_forward_input.0", 1, [], "torch.float32", [3, 2], '
        "[1.948258399963379, -1.0052297115325928, -0.2003595232963562]]"
    )
    assert isinstance(rec, TensorRecord)
    assert rec.dump_step == 1 and len(rec.stats) == 3
    assert rec.stat(0) == 1.948258399963379 and rec.stat(3) is None


@pytest.mark.parametrize(
    ("index", "dtype", "stats"),
    [
        (1, "<class 'int'>", [1, 1, 1, 1]),
        (8, "<class 'float'>", [2.5] * 4),
        (9, "<class 'bool'>", [True] * 4),
    ],
)
def test_scalar_lines(v4_lines, index, dtype, stats):
    rec = decode_line(v4_lines[index])
    assert isinstance(rec, TensorRecord)
    assert rec.is_scalar and rec.shape_raw == "[]" and rec.shape == () and rec.numel == 1
    assert rec.dtype == dtype and rec.stats == stats
    assert rec.stat(0) == float(stats[0])


def test_empty_or_bool_stats_are_lists_and_sentinel(v4_lines):
    rec = decode_line(v4_lines[4])
    assert isinstance(rec, TensorRecord)
    assert rec.stats == [[], [], [], "Nan"]
    assert [rec.stat(i) for i in range(4)] == [None] * 4


def test_zero_d_tensor_line(v4_lines):
    rec = decode_line(v4_lines[5])
    assert isinstance(rec, TensorRecord)
    assert rec.shape_raw == [] and rec.shape == () and not rec.is_scalar
    assert rec.stats[3] == "Nan" and rec.stat(0) == 6.0


def test_nan_and_infinity_tokens(v4_lines):
    nan = decode_line(v4_lines[6])
    inf = decode_line(v4_lines[7])
    assert isinstance(nan, TensorRecord) and isinstance(inf, TensorRecord)
    assert all(math.isnan(v) for v in nan.stats)
    assert inf.stat(0) == math.inf and inf.stat(1) == -math.inf and math.isnan(inf.stat(2))


def test_stack_line_frames_innermost_first_with_null_source(v4_lines):
    rec = decode_line(v4_lines[3], 4)
    assert isinstance(rec, StackRecord)
    assert rec.call == "Torch_add_0_forward" and rec.line == 4
    assert rec.frames[0][2] == "__call__"
    assert rec.frames[1] == ("/home/user/train.py", "42", "forward", None)


def test_blank_line_is_none():
    assert decode_line("") is None
    assert decode_line("   \t ") is None


def test_a_line_cut_inside_a_string_says_so_in_one_phrase():
    """A pkl cut short mid-name: json's 'Unterminated string starting at' read 'starting at at column 2'."""
    rec = decode_line('["Functional_l', 131)
    assert isinstance(rec, BadLine)
    assert rec.reason == NotJson(message="Unterminated string starting", column=2)
    assert unreadable_text(rec.reason) == "not valid JSON (Unterminated string starting at column 2)"


def test_overflow_dump_step_hides_stats():
    rec = decode_line('["Torch_add_0_forward_output", 101, [], "torch.float16", [2], [1.0, 0.0, 0.5, 1.0]]')
    assert isinstance(rec, TensorRecord)
    assert not rec.has_stats and rec.stat(0) is None


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ('["Torch_add_0_forward_output", 0, [], "torch.float32", [3], [1, 2', "not valid JSON"),
        ('{"name": "x"}', "must be a JSON array"),
        ('["Torch_add_0_forward_output", 0, [], "torch.float32", [3]]', "got 5"),
        ('["a", 0, [], "torch.float32", [3], [1, 2, 3, 4], "extra"]', "got 7"),
        ('[1, 0, [], "torch.float32", [3], [1, 2, 3, 4]]', "must be strings"),
        ('["a", 0, [], "torch.float32", 3, [1, 2, 3, 4]]', "shape must be a list"),
        ('["a", 0, [], "torch.float32", [-1], [1, 2, 3, 4]]', "non-negative"),
        ('["a", 0, [], "torch.float32", [2.5], [1, 2, 3, 4]]', "non-negative"),
        ('["a", "zero", [], "torch.float32", [3], [1, 2, 3, 4]]', "dump_step"),
        ('["a", 0, [], "torch.float32", [3], "stats"]', "stats a list"),
        ('["a_stack_info", [["file.py", "1"]]]', "stack frame"),
    ],
)
def test_bad_lines_say_why(line, why):
    rec = decode_line(line, 12)
    assert isinstance(rec, BadLine)
    assert rec.line == 12 and why in unreadable_text(rec.reason) and rec.text


def test_unparsable_name_is_kept_without_entry():
    rec = decode_line('["not_a_ptdbg_name", 0, [], "torch.float32", [1], [1.0, 1.0, 1.0, 1.0]]')
    assert isinstance(rec, TensorRecord) and rec.entry is None and rec.call == "not_a_ptdbg_name"


def test_encode_is_byte_compatible_with_json_dumps(v4_lines):
    for line in v4_lines:
        value = json.loads(line)
        if len(value) == 6:
            assert encode_tensor_line(value[0], value[1], value[3], value[4], value[5]) == line
        else:
            assert encode_stack_line(value[0], value[1]) == line


def test_stat_value():
    assert stat_value(True) == 1.0 and stat_value(3) == 3.0
    assert stat_value("Nan") is None and stat_value([]) is None and stat_value(None) is None


def test_a_checksum_rides_in_the_element_the_original_leaves_empty(v4_lines):
    line = encode_tensor_line(
        "Torch_add_0_forward_output", 0, "torch.float32", [3], [1.0, 1.0, 1.0, 1.0], md5="3f9a0c1e"
    )
    assert line.startswith('["Torch_add_0_forward_output", 0, ["3f9a0c1e"], ')
    assert decode_line(line).md5 == "3f9a0c1e"
    assert decode_line(v4_lines[0]).md5 is None
    for other in ('["x"]', '["3F9A0C1E"]', '["3f9a0c1e", "00000000"]', "[1]", "{}"):
        rec = decode_line(line.replace('["3f9a0c1e"]', other))
        assert isinstance(rec, TensorRecord) and rec.md5 is None  # not a checksum: ignored, as before
