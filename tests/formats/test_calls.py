"""The call sidecar: every ARG kind round-trips, malformed lines are counted and skipped, a follower
takes complete lines only and starts over when the file is replaced."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ptdbg_tui.formats.calls import (
    MAX_DEPTH,
    Autocast,
    CallFollower,
    CallSpec,
    CallState,
    Device,
    Dtype,
    Opaque,
    Size,
    TensorArg,
    TorchConst,
    calls_path,
    decode_call,
    encode_arg,
    encode_call_line,
)
from ptdbg_tui.formats.layout import RankDump
from ptdbg_tui.formats.reader import PklReader
from ptdbg_tui.formats.writer import RankWriter

ARGS = [
    TensorArg("Functional_gelu_0_forward_input.0"),
    TensorArg(None, "torch.float16", (2, 0, 3)),
    None,
    True,
    False,
    0,
    -7,
    1 << 70,
    1.0,
    -2.5e-300,
    "tanh",
    "",
    math.inf,
    -math.inf,
    complex(1.5, -2.0),
    complex(math.inf, 0.0),
    slice(None, 5, 2),
    slice(1, None, None),
    Ellipsis,
    Dtype("torch.bfloat16"),
    Size((2, 3)),
    Size(()),
    Device("cuda:1"),
    TorchConst("torch.channels_last"),
    Opaque("torch._C.Generator"),
    [1, [2, 3], (4, None)],
    (),
    [],
    {"a": TensorArg("Torch_cat_0_forward_input.0.1"), "b": [1.0]},
]


def _spec(**kw) -> CallSpec:
    base = dict(
        call="Functional_gelu_0",
        fn="torch.nn.functional.gelu",
        args=list(ARGS),
        kwargs={"approximate": "tanh", "dim": -1, "dtype": Dtype("torch.float32")},
        inplace=1,
        state=CallState(
            grad=False,
            training=True,
            autocast=Autocast("cpu", "torch.bfloat16"),
            tf32_matmul=True,
            tf32_cudnn=False,
            deterministic=True,
            default_dtype="torch.float64",
        ),
    )
    return CallSpec(**{**base, **kw})


def test_every_argument_kind_round_trips() -> None:
    spec = _spec()
    line = encode_call_line(spec)
    assert "\n" not in line and "NaN" not in line and "Infinity" not in line  # strict JSON
    back = decode_call(json.loads(line))
    assert back == spec
    assert type(back.args[8]) is float and '{"value": 1.0}' in line  # a float stays a float
    assert type(back.args[25][2]) is tuple and type(back.args[25][1]) is list


def test_a_keyword_tensor_names_its_data_file_and_an_old_line_reads_as_before() -> None:
    """A tensor passed by keyword is not in the pkl; its data file, named by the sidecar alone, is what
    lets a replay rebuild the call (``attn_mask=``). A line without ``data`` is an unrecorded tensor."""
    mask = TensorArg(None, "torch.bool", (6, 6), "Functional_sdpa_0_forward_kwarg.attn_mask.npy")
    spec = _spec(
        args=[TensorArg("Functional_sdpa_0_forward_input.0")], kwargs={"attn_mask": mask}, inplace=None
    )
    line = encode_call_line(spec)
    assert json.loads(line)["kwargs"]["attn_mask"] == {
        "tensor": None,
        "dtype": "torch.bool",
        "shape": [6, 6],
        "data": "Functional_sdpa_0_forward_kwarg.attn_mask.npy",
    }
    assert decode_call(json.loads(line)).kwargs["attn_mask"] == mask
    old = {"tensor": None, "dtype": "torch.bool", "shape": [6, 6]}
    assert "data" not in encode_arg(TensorArg(None, "torch.bool", (6, 6)))
    got = decode_call({"call": "Torch_add_0", "fn": "torch.add", "kwargs": {"other": old}}).kwargs["other"]
    assert got == TensorArg(None, "torch.bool", (6, 6)) and got.data is None


def test_nan_and_plain_subclasses_encode_as_their_plain_value() -> None:
    assert encode_arg(math.nan) == {"float": "nan"}
    assert math.isnan(decode_call(json.loads(encode_call_line(_spec(args=[math.nan], inplace=None)))).args[0])

    class Flag(int):
        pass

    class Pair(tuple):
        pass

    assert encode_arg(Flag(3)) == {"value": 3}
    assert encode_arg(Pair((1, 2))) == {"tuple": [{"value": 1}, {"value": 2}]}
    assert encode_arg({1: 2}) == {"opaque": "dict with keys that are not strings"}
    assert encode_arg(object()) == {"opaque": "builtins.object"}
    assert encode_arg(slice(0.5, 1)) == {"opaque": "slice"}


def test_convert_names_what_only_the_writer_knows() -> None:
    class Weird:
        pass

    def convert(v):
        return Dtype("torch.int8") if isinstance(v, Weird) else None

    assert encode_arg([Weird(), len], convert) == {
        "list": [{"dtype": "torch.int8"}, {"opaque": "builtins.builtin_function_or_method"}]
    }


def test_state_defaults_fill_what_a_line_leaves_out() -> None:
    spec = decode_call({"call": "Torch_add_0", "fn": "torch.add"})
    assert spec.args == [] and spec.kwargs == {} and spec.inplace is None and spec.state == CallState()


def test_a_call_s_step_round_trips_and_is_left_out_where_unknown() -> None:
    spec = decode_call({"call": "Torch_add_0", "fn": "torch.add", "state": {"step": 2}})
    assert spec.state.step == 2
    assert decode_call(json.loads(encode_call_line(spec))).state.step == 2
    assert '"step"' not in encode_call_line(decode_call({"call": "Torch_add_0", "fn": "torch.add"}))


BAD = [
    "not json",
    "[1, 2]",
    '{"fn": "torch.add"}',
    '{"call": "Torch_add_0", "fn": "os.system(1)"}',
    '{"call": "Torch_add_0", "fn": "torch.add", "args": [{"bogus": 1}]}',
    '{"call": "Torch_add_0", "fn": "torch.add", "args": [1]}',
    '{"call": "Torch_add_0", "fn": "torch.add", "args": [{"tensor": "../../etc/passwd"}]}',
    '{"call": "Torch_add_0", "fn": "torch.add", "args": [{"tensor": null, "shape": [-1]}]}',
    # a keyword tensor's data file: a name inside the tensor folder, an npy, with its dtype and shape
    '{"call": "Torch_add_0", "fn": "torch.add", "kwargs": {"other": '
    + '{"tensor": null, "dtype": "torch.float32", "shape": [2], "data": "../../x.npy"}}}',
    '{"call": "Torch_add_0", "fn": "torch.add", "kwargs": {"other": '
    + '{"tensor": null, "dtype": "torch.float32", "shape": [2], "data": "x.pkl"}}}',
    '{"call": "Torch_add_0", "fn": "torch.add", "kwargs": {"other": '
    + '{"tensor": null, "dtype": "torch.float32", "shape": [2], "data": 7}}}',
    '{"call": "Torch_add_0", "fn": "torch.add", "kwargs": {"other": '
    + '{"tensor": null, "dtype": "torch.float32", "data": "x.npy"}}}',
    '{"call": "Torch_add_0", "fn": "torch.add", "kwargs": {"other": '
    + '{"tensor": null, "dtype": "torch.float32", "shape": [2], "data": "\\ud800.npy"}}}',
    '{"call": "Torch_add_0", "fn": "torch.add", "args": [{"value": [1]}]}',
    '{"call": "Torch_add_0", "fn": "torch.add", "args": [{"float": "big"}]}',
    '{"call": "Torch_add_0", "fn": "torch.add", "args": [{"slice": [0.5, 1, null]}]}',
    '{"call": "Torch_add_0", "fn": "torch.add", "args": [{"size": [1, 2.5]}]}',
    '{"call": "Torch_add_0", "fn": "torch.add", "args": [], "inplace": 0}',
    '{"call": "Torch_add_0", "fn": "torch.add", "state": {"grad": "yes"}}',
    '{"call": "Torch_add_0", "fn": "torch.add", "state": {"autocast": {"device": "cpu"}}}',
    '{"call": "Torch_add_0", "fn": "torch.add", "state": {"step": -1}}',
    '{"call": "Torch_add_0", "fn": "torch.add", "state": {"step": 1.5}}',
    '{"call": "Torch_add_0", "fn": "torch.add", "state": {"step": true}}',
    '{"call": "Torch_add_0", "fn": "torch.add", "args": '
    + '{"list": [' * (MAX_DEPTH + 2)
    + "]}" * (MAX_DEPTH + 2)
    + "}",
    '{"call": "Torch_add_0", "fn": "torch.add", "args": ' + "[" * 100_000 + "]" * 100_000 + "}",
]


@pytest.mark.parametrize("text", BAD)
def test_a_malformed_line_is_refused(text: str) -> None:
    with pytest.raises((ValueError, RecursionError)):
        decode_call(json.loads(text))


def test_malformed_lines_are_counted_and_skipped(tmp_path: Path) -> None:
    path = tmp_path / "api_stack_dump.calls.jsonl"
    good = [
        encode_call_line(_spec(call=f"Torch_add_{i}", fn="torch.add", args=[1], inplace=None))
        for i in range(3)
    ]
    path.write_text("\n".join([good[0], *BAD, good[1], "", good[2]]) + "\n")
    follower = CallFollower(path)
    follower.read(final=True)
    assert list(follower.specs) == ["Torch_add_0", "Torch_add_1", "Torch_add_2"]
    assert follower.bad_lines == len(BAD)
    assert follower.specs["Torch_add_2"].line == len(BAD) + 4


def test_the_follower_takes_complete_lines_and_starts_over_on_a_new_file(tmp_path: Path) -> None:
    writer = RankWriter(tmp_path / "rank0")
    reader = PklReader(RankDump(writer.pkl, None, 0))
    writer.write_call(_spec(call="Torch_add_0", fn="torch.add", args=[1, 2], inplace=None))
    line = encode_call_line(_spec(call="Torch_add_1", fn="torch.add", args=[3], inplace=None))
    with open(calls_path(writer.pkl), "a") as f:
        f.write(line[:40])  # a writer killed mid-line, or not done yet
    assert reader.read_calls()
    assert reader.call_spec("Torch_add_0").args == [1, 2] and reader.call_spec("Torch_add_1") is None
    with open(calls_path(writer.pkl), "a") as f:
        f.write(line[40:] + "\n")
    assert reader.read_calls() and reader.call_spec("Torch_add_1").args == [3]
    writer.close()

    writer = RankWriter(tmp_path / "rank0")  # a new dump replaces the old one, sidecars included
    assert not calls_path(writer.pkl).exists()
    writer.write_tensor("Torch_mul_0_forward_output", 0, "<class 'int'>", "[]", [1, 1, 1, 1])
    writer.write_call(_spec(call="Torch_mul_0", fn="torch.mul", args=[], inplace=None))
    writer.close()
    reader.read()
    assert reader.read_calls()
    assert reader.call_spec("Torch_add_0") is None and reader.call_spec("Torch_mul_0").fn == "torch.mul"
