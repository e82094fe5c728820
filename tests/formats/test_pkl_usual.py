"""The usual lines' faster decoding (:func:`pkl_line.decode_usual`, orjson) gives what the one
definition (:func:`pkl_line.decode_line`, json) gives, on real pkls of the original ptdbg, of
msprobe's neighbours and of the project's dumper, and on every kind of altered or malformed line;
whatever it leaves, the plain way reads, with the same messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ptdbg_tui.formats import pkl_line
from ptdbg_tui.formats.pkl import read_pkl
from ptdbg_tui.formats.pkl_line import decode_line, decode_usual
from ptdbg_tui.formats.records import BadLine, StackRecord, TensorRecord

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REAL = [
    "ptdbg_legacy/npu_test.pkl",  # the original's, three statistics
    "mixed/npu/ptdbg_dump_v4.0.T2/step0/rank10267/api_stack_dump.pkl",  # the original ptdbg_ascend
    "mixed/bench/ptdbg_dump_v4.0/step0/rank0/api_stack_dump.pkl",  # the project's dumper
    "msprobe/mixed_layer_norm/bench/ptdbg_dump_v4.0/step0/rank0/api_stack_dump.pkl",
]

TENSOR = '["Torch_add_0_forward_input.0", 0, [], "torch.float32", [3, 2], [3.5, -1.0, 0.25, 2.0]]'
STACK = (
    '["Torch_add_0_forward_stack_info", [["/a/m.py", "12", "forward", "y = x + 1"], '
    '["/a/t.py", "3", "<module>", null]]]'
)
#: In a tensor line, what replaces a part of it: each a line the usual way must leave to the plain one
#: (or read as the plain one does).
TENSOR_CHANGES = {
    # tokens json takes and orjson does not; integers orjson reads as floats; other statistics
    "3.5": [
        "NaN",
        "Infinity",
        "1e400",
        "18446744073709551616",
        "-9223372036854775809",
        "9.3e18",
        "3",
        '"Nan"',
        "true",
    ],
    "3.5, ": [""],  # three statistics
    "0.25": ["0.25, 1.0"],  # five
    "[3.5, -1.0, 0.25, 2.0]": ["[]"],
    "[3, 2]": [
        "[3, -2]",
        "[3, 2.0]",
        "[3, true]",
        "[18446744073709551616]",
        '"[]"',
        "[]",
        "[4294967296, 4294967296, 4294967296]",
        "[" + ", ".join(["1"] * 65) + "]",
    ],
    ", 0, [],": [
        ", 1.0, [],",
        ", true, [],",
        ", 18446744073709551616, [],",
        ", 0, {},",
        ', 0, ["3f9a0c1e"],',
        ', 0, ["nothex!!"],',
    ],
    "Torch_add": ["../Torch_add", "Torch\\u0000add", "Torch\\ud800add", "Torch_\\u00e9add"],
    '"Torch_add_0_forward_input.0"': ["7"],
    '"torch.float32"': ["null"],
    "]]": ["]"],  # truncated
}
STACK_CHANGES = {
    '"12"': ["12", "18446744073709551616"],  # a number as the line
    ", null]]]": ["]]]"],  # three fields
    "null": ["7", "[1]"],
    '[["/a/m.py"': ['["/a/m.py", ["/a/m.py"'],
    "forward": ["for\\ud800ward"],
    "/a/m.py": ["NaN"],
}
ALTERED = [
    *(TENSOR.replace(old, new) for old, news in TENSOR_CHANGES.items() for new in news),
    *(STACK.replace(old, new) for old, news in STACK_CHANGES.items() for new in news),
    TENSOR[:40],
    TENSOR + " [1]",  # two values on a line
    TENSOR.replace("[", "[[", 1) + "]",
    "[" * 5000 + "]" * 5000,  # nested too deeply
    '{"name": 1}',
    "[]",
    "7",
    '["Torch_add_0_forward_stack_info", []]',
    '["Torch_add_0_forward_stack_info", {}]',
    '[7, [["/a/m.py", "12", "forward", "y"]]]',
]


#: Lines whose text after the name may be one read before (see :func:`seen_before`).
LIKE_ONE_READ = [
    TENSOR + " ",
    TENSOR + "\x0c",
    TENSOR + "]",
    TENSOR[:-1] + " ]",
    TENSOR[:-1] + "}",
    TENSOR[:-2] + "] ]",
    TENSOR.replace("2.0]]", "2.0], 5]"),
    TENSOR.replace("[3.5", "[[], 3.5"),
    TENSOR.replace("[3.5", "3.5").replace("2.0]]", "2.0]"),
    TENSOR.replace("Torch_add", "Torch add"),
    TENSOR.replace("Torch_add", "Torch\u00a0add"),
    TENSOR.replace("Torch_add", 'Torch\\"add'),
    TENSOR.replace("Torch_add", "Torch\\u0041dd"),
    TENSOR.replace("Torch_add", "Torch/add"),
    TENSOR.replace('"Torch_add_0_forward_input.0"', '".."'),
    TENSOR.replace('"Torch_add_0_forward_input.0"', '""'),
    STACK + " ",
    STACK + "]",
    STACK[:-1],
    STACK.replace("Torch_add", "Torch\\u0041dd"),
    STACK.replace("Torch_add", "Torch\tadd"),
]


def seen_before() -> pkl_line.Seen:
    """What decoding a tensor line and a stack line like :data:`TENSOR` and :data:`STACK` (other
    names, the same text after them) teaches."""
    seen: pkl_line.Seen = {}
    for text in (TENSOR.replace("input.0", "input.1"), STACK.replace("add_0", "add_1")):
        assert same(decode_usual(text, 1, seen), decode_line(text, 1))
    assert len(seen) == 2
    return seen


def same(a: object, b: object) -> bool:
    return repr(a) == repr(b)  # repr: the dataclasses' fields, NaN included


@pytest.mark.parametrize("path", REAL)
def test_real_pkls_read_as_line_by_line(path: str) -> None:
    lines = (FIXTURES / path).read_text(encoding="utf-8").splitlines()
    usual = [decode_usual(text, n) for n, text in enumerate(lines, 1)]
    plain = [decode_line(text, n) for n, text in enumerate(lines, 1)]
    assert all(u is None or same(u, p) for u, p in zip(usual, plain, strict=True))
    assert sum(u is not None for u in usual) > len(lines) // 2  # the usual way did take lines
    assert any(isinstance(u, StackRecord) for u in usual) == any(isinstance(p, StackRecord) for p in plain)


@pytest.mark.parametrize("text", ALTERED)
def test_altered_lines_read_as_the_plain_way_reads_them(text: str) -> None:
    got = decode_usual(text, 3)
    assert got is None or same(got, decode_line(text, 3))


@pytest.mark.parametrize("text", [*ALTERED, *LIKE_ONE_READ])
def test_altered_lines_like_one_read_before_read_as_the_plain_way_reads_them(text: str) -> None:
    got = decode_usual(text, 3, seen_before())
    assert got is None or same(got, decode_line(text, 3))


@pytest.mark.parametrize("path", REAL)
def test_real_pkls_read_with_what_earlier_lines_taught_as_line_by_line(path: str) -> None:
    lines = (FIXTURES / path).read_text(encoding="utf-8").splitlines()
    seen: pkl_line.Seen = {}
    usual = [decode_usual(text, n, seen) for n, text in enumerate(lines, 1)]
    plain = [decode_line(text, n) for n, text in enumerate(lines, 1)]
    assert all(u is None or same(u, p) for u, p in zip(usual, plain, strict=True))
    assert seen


def test_a_line_like_one_read_before_takes_what_that_one_decoded_to() -> None:
    """Only the name (and a tensor's statistics) is read anew: the shape and the frames are the
    earlier line's."""
    seen = seen_before()
    first = decode_usual(TENSOR.replace("input.0", "input.1"), 1, seen)
    stack = decode_usual(STACK.replace("add_0", "add_1"), 2, seen)
    tensor = decode_usual(TENSOR.replace("3.5", "4.5"), 3, seen)
    assert isinstance(first, TensorRecord) and isinstance(tensor, TensorRecord)
    assert tensor.shape_raw is first.shape_raw and tensor.stats == [4.5, -1.0, 0.25, 2.0]
    again = decode_usual(STACK, 4, seen)
    assert isinstance(stack, StackRecord) and isinstance(again, StackRecord)
    assert again.frames[0] is stack.frames[0] and again.name == "Torch_add_0_forward_stack_info"
    assert same(tensor, decode_line(TENSOR.replace("3.5", "4.5"), 3)) and same(again, decode_line(STACK, 4))


def test_the_usual_lines_take_the_usual_way() -> None:
    for text in (
        TENSOR,
        STACK,
        TENSOR.replace("[3, 2]", "[]"),
        TENSOR.replace("[3.5, -1.0, 0.25, 2.0]", "[]"),
    ):
        assert same(decode_usual(text, 3), decode_line(text, 3))
    assert isinstance(decode_usual(TENSOR, 3), TensorRecord)


def test_a_file_of_altered_lines_reads_as_without_orjson(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole file: records, bad lines and their messages, line numbers, with and without orjson."""
    real = (FIXTURES / REAL[2]).read_text(encoding="utf-8").splitlines()
    lines = (
        [x for pair in zip(real, ALTERED, strict=False) for x in pair]
        + real[len(ALTERED) :]
        + ["", "   ", TENSOR]
    )
    path = tmp_path / "api_stack_dump.pkl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    fast = read_pkl(path)
    monkeypatch.setattr(pkl_line, "_orjson_loads", None)
    plain = read_pkl(path)
    assert same(fast, plain)
    assert len(fast.bad) > 20 and all(isinstance(b, BadLine) for b in fast.bad)
    assert json.loads(lines[0]) and fast.tensors[0].line == 1


#: Stack lines whose text after the name is STACK's: read after STACK, the frames it decoded are taken
#: as they are (a model's layers repeat their stacks); each must read as the plain way reads it.
SAME_FRAMES = [
    STACK.replace("Torch_add_0", name)
    for name in (
        "Torch_add_1",
        "Functional_linear_17",
        "Torch_\u00e9add_0",  # UTF-8 as it is
        "Torch_\\u00e9add_0",  # an escape: decoded, not taken as it is
        'Torch_\\"add_0',
        "Torch_\\\\add_0",
        "Torch_\tadd_0",  # a control character: invalid JSON
        "Torch_\\nadd_0",
        "",
        'x", "stack_info',
        'Torch_add_0_forward_stack_info", [], "Torch_add_0',
    )
] + [
    STACK.replace('["Torch', '[ "Torch'),
    STACK.replace('["Torch', '["Torch', 1).replace('"Torch_add_0_forward_stack_info"', '"a_stack_info" '),
    STACK.replace("_stack_info", "_stack_inf"),
    STACK + " ",
    STACK.replace('["Torch', "[7, "),
]


@pytest.mark.parametrize("text", SAME_FRAMES)
def test_a_repeated_stack_reads_as_the_plain_way(text: str) -> None:
    seen: pkl_line.Seen = {}
    assert isinstance(decode_usual(STACK, 1, seen), StackRecord) and seen  # its frames are now known
    got = decode_usual(text, 3, seen)
    assert got is None or same(got, decode_line(text, 3))


def test_repeated_frames_that_hold_a_control_character_stay_shown_as_one_line() -> None:
    """A stack whose source holds a terminal escape: its frames are made one line when first read, and
    a later line of the same frames takes them as they were made (not looked at again), as the plain
    way shows them."""
    text = STACK.replace("y = x + 1", "y = x + 1\\u001b[2J\\nforged")
    seen: pkl_line.Seen = {}
    first = decode_usual(text, 1, seen)
    again = decode_usual(text.replace("add_0", "add_1"), 2, seen)
    assert isinstance(first, StackRecord) and isinstance(again, StackRecord)
    assert again.frames == first.frames and again.frames is not first.frames
    assert "\x1b" not in str(again.frames) and "\n" not in again.frames[0].source
    assert same(again, decode_line(text.replace("add_0", "add_1"), 2))


MODULE_TAIL = '", [["model.layers.0", "LlamaDecoderLayer"], ["model.layers.0.mlp", "LlamaMLP"]]]'


@pytest.mark.parametrize(
    "key",
    ["Functional_silu_1", "Torch_add_\\u00e9_0", "Torch_add\t_0", "Torch_add\x1b_0", "", "Tensor_\u00e9_2"],
)
def test_module_lines_of_a_seen_tail_read_as_json_reads_them(tmp_path: Path, key: str) -> None:
    """A module sidecar line whose text after its key was read before takes that chain
    (:func:`pkl.keyed_usual`); any key json reads otherwise (an escape, a control character, which
    json refuses) takes json's way, with its words."""
    from ptdbg_tui.formats.modules import ModuleFollower, _from_value

    lines = ['["Functional_silu_0' + MODULE_TAIL, '["' + key + MODULE_TAIL, '["Torch_mul_3' + MODULE_TAIL]
    path = tmp_path / "api_stack_dump.modules.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    follower = ModuleFollower(path)
    items = follower.read(final=True)
    expected = [decode_line(t, i, decode=_from_value) for i, t in enumerate(lines, 1)]
    assert items == {e[0]: e[1] for e in expected if not isinstance(e, BadLine)}
    assert [(b.line, b.reason) for b in follower.bad] == [
        (e.line, e.reason) for e in expected if isinstance(e, BadLine)
    ]
    assert len(items) + len(follower.bad) == 3
