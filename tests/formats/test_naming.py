"""The entry-name grammar, parsed from the right (op names hold ``_``, ``.`` and ``forward``)."""

from __future__ import annotations

import pytest

from ptdbg_tui.formats.naming import entry_name, parse_name, stack_name


@pytest.mark.parametrize(
    ("name", "prefix", "op", "index", "direction", "kind", "path"),
    [
        ("Torch_add_0_forward_input.0", "Torch", "add", 0, "forward", "input", (0,)),
        ("Tensor___getitem___0_forward_input.0", "Tensor", "__getitem__", 0, "forward", "input", (0,)),
        (
            "Aten_convolution.default_0_forward_input.0",
            "Aten",
            "convolution.default",
            0,
            "forward",
            "input",
            (0,),
        ),
        (
            "Aten__native_batch_norm_legit_functional.default_0_forward_output.1",
            "Aten",
            "_native_batch_norm_legit_functional.default",
            0,
            "forward",
            "output",
            (1,),
        ),
        (
            "Functional_multi_head_attention_forward_3_forward_output.0",
            "Functional",
            "multi_head_attention_forward",
            3,
            "forward",
            "output",
            (0,),
        ),
        (
            "Aten__cdist_forward_12_backward_output.0",
            "Aten",
            "_cdist_forward",
            12,
            "backward",
            "output",
            (0,),
        ),
        ("VF_lstm_0_forward_input.1.0", "VF", "lstm", 0, "forward", "input", (1, 0)),
        ("Functional_linear_10_forward_output", "Functional", "linear", 10, "forward", "output", ()),
        (
            "NPU_npu_fusion_attention_0_backward_input.2",
            "NPU",
            "npu_fusion_attention",
            0,
            "backward",
            "input",
            (2,),
        ),
        ("Torch_add_0_forward_stack_info", "Torch", "add", 0, "forward", "stack_info", ()),
        ("Module_Conv2d_1_backward_output.0", "Module", "Conv2d", 1, "backward", "output", (0,)),
    ],
)
def test_parse(name, prefix, op, index, direction, kind, path):
    e = parse_name(name)
    assert e is not None
    got = (e.prefix, e.op, e.index, e.direction, e.kind, e.path)
    assert got == (prefix, op, index, direction, kind, path)
    assert str(e) == name
    assert entry_name(e.api, e.index, e.direction, e.kind, e.path) == name


def test_module_dump_user_name_has_no_prefix():
    e = parse_name("MyModule_0_forward_input.0")
    assert e is not None and e.api == "MyModule" and e.prefix == "MyModule" and e.op == ""
    e = parse_name("my_block_2_backward_output")
    assert e is not None and e.api == "my_block" and e.prefix == "my_block" and e.op == ""


def test_call_and_arg():
    e = parse_name("Functional_multi_head_attention_forward_3_forward_input.1.2")
    assert e is not None
    assert e.call == "Functional_multi_head_attention_forward_3_forward"
    assert e.arg == "input.1.2"


@pytest.mark.parametrize(
    "name",
    [
        "",
        "Torch_add",
        "Torch_add_0_forward",
        "Torch_add_x_forward_input.0",
        "Torch_add_0_sideways_input.0",
        "Torch_add_0_forward_inputs.0",
        "Torch_add_0_forward_input.",
        "Torch_add_0_forward_input.a",
        "_0_forward_input.0",
        "Torch_add_0_forward_input.0 ",
    ],
)
def test_not_a_name(name):
    assert parse_name(name) is None


def test_stack_name():
    assert stack_name("Torch_add_0_forward") == "Torch_add_0_forward_stack_info"
