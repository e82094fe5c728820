"""Replay plans built from records and call sidecars (no torch): what is rebuilt, and the reason when a
call cannot be."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ptdbg_tui.compare.diagnosis.findings import Diagnosis
from ptdbg_tui.compare.model import Result, Row, Status
from ptdbg_tui.compare.ops import in_place
from ptdbg_tui.compare.replay.calls import arguments_differ, replay_order
from ptdbg_tui.compare.replay.plan import (
    NotReplayable,
    Plan,
    Recorded,
    Value,
    build_plan,
    function_of,
)
from ptdbg_tui.compare.replay.source_keywords import source_keywords
from ptdbg_tui.compare.report.replay_words import SIDECAR_DISAGREES, why_not_text
from ptdbg_tui.compare.report.words import arguments_text
from ptdbg_tui.formats.calls import CallSpec, Opaque, TensorArg
from ptdbg_tui.formats.naming import STYLE_MSPROBE, EntryName, parse_name
from ptdbg_tui.formats.records import Frame, StackRecord, TensorRecord


def _rows(record, names: list[str], scalars: dict[str, object] | None = None) -> list[Row]:
    rows = []
    for n in names:
        if scalars and n in scalars:
            rec = record(
                n, shape="[]", dtype=f"<class '{type(scalars[n]).__name__}'>", stats=[scalars[n]] * 4
            )
            rec.data_name = ""
        else:
            rec = record(n, shape=[4])
        rows.append(Row(rec, rec))
    return rows


def test_only_api_calls_of_torchs_namespaces_that_draw_no_random_numbers_are_replayed():
    assert function_of(parse_name("Functional_gelu_0_forward_output")) == "torch.nn.functional.gelu"
    assert function_of(parse_name("Tensor_add__0_forward_output")) == "torch.Tensor.add_"
    assert function_of(parse_name("VF_lstm_0_backward_output.0")) == "torch._VF.lstm"
    for name, why in (
        ("Distributed_all_reduce_0_forward_output.0", "collective"),
        ("Functional_dropout_0_forward_output", "random"),
        ("Tensor_uniform__0_forward_output", "random"),
    ):
        got = function_of(parse_name(name))
        assert isinstance(got, NotReplayable) and why in why_not_text(got.why), got


def test_a_plan_from_the_records_takes_positional_arguments_and_the_values(record):
    rows = _rows(
        record,
        ["Torch_add_0_forward_input.0", "Torch_add_0_forward_input.1", "Torch_add_0_forward_output"],
        scalars={"Torch_add_0_forward_input.1": 2.5},
    )
    plan = build_plan(
        rows, "npu", "Torch_add_0_forward", "/d", None, keywords_recorded=False, inputs_after_call=False
    )
    assert isinstance(plan, Plan) and plan.fn == "torch.add"
    assert isinstance(plan.args[0], Recorded) and plan.args[1] == Value("plain", 2.5)
    assert not plan.complete, "the original records no keyword arguments"
    assert list(plan.results) == [()]


def test_msprobes_keyword_arguments_are_rebuilt(record):
    rows = []
    for kind, path in (("input", (0,)), ("input", ("approximate",)), ("output", (0,))):
        name = f"Functional.gelu.0.forward.{kind}." + ".".join(map(str, path))
        entry = EntryName("Functional.gelu", 0, "forward", kind, path, STYLE_MSPROBE)
        if path == ("approximate",):  # msprobe's {"type": "str", "value": "tanh"}
            rec = TensorRecord(name, 0, "str", "[]", ["tanh"] * 4, entry, data_name="")
        else:
            rec = TensorRecord(name, 0, "torch.float32", [4], [1.0, 0.0, 0.5, 1.0], entry)
        rows.append(Row(rec, rec))
    plan = build_plan(
        rows, "npu", "Functional.gelu.0.forward", "/d", None, keywords_recorded=True, inputs_after_call=False
    )
    assert isinstance(plan, Plan) and plan.kwargs == {"approximate": Value("plain", "tanh")} and plan.complete


def test_the_sidecar_gives_every_argument(record):
    rows = _rows(record, ["Functional_gelu_0_forward_input.0", "Functional_gelu_0_forward_output"])
    spec = CallSpec(
        "Functional_gelu_0",
        "torch.nn.functional.gelu",
        [TensorArg("Functional_gelu_0_forward_input.0")],
        {"approximate": "tanh"},
    )
    plan = build_plan(rows, "bench", "Functional_gelu_0_forward", "/d", spec, False, False)
    assert isinstance(plan, Plan) and plan.kwargs == {"approximate": Value("plain", "tanh")} and plan.complete


def test_a_keyword_tensor_with_a_data_file_is_rebuilt_from_it(record):
    """The sidecar names the file the dumper wrote a keyword tensor's values to (the pkl has no line for
    it): the plan reads it from the tensor folder, with the sidecar's dtype and shape."""
    rows = _rows(
        record, ["Functional_layer_norm_0_forward_input.0", "Functional_layer_norm_0_forward_output"]
    )
    weight = TensorArg(None, "torch.float32", (4,), "Functional_layer_norm_0_forward_kwarg.weight.npy")
    spec = CallSpec(
        "Functional_layer_norm_0",
        "torch.nn.functional.layer_norm",
        [TensorArg("Functional_layer_norm_0_forward_input.0"), (4,)],
        {"weight": weight},
    )
    plan = build_plan(rows, "npu", "Functional_layer_norm_0_forward", "/d", spec, False, False)
    assert isinstance(plan, Plan) and plan.complete, plan
    assert plan.kwargs["weight"] == Recorded(
        "Functional_layer_norm_0_forward_kwarg.weight",
        "/d/Functional_layer_norm_0_forward_kwarg.weight.npy",
        "torch.float32",
        (4,),
        sidecar=True,  # no pkl record vouches for its size: the budget does
    )


def test_what_cannot_be_rebuilt_says_why(record):
    rows = _rows(record, ["Functional_gelu_0_forward_input.0", "Functional_gelu_0_forward_output"])
    call = "Functional_gelu_0_forward"
    cases = [
        (None, None, "statistics only"),
        (
            "/d",
            CallSpec(
                "Functional_gelu_0", "torch.nn.functional.gelu", [TensorArg(None, "torch.float32", (4,))]
            ),
            "was not recorded",
        ),
        (
            "/d",
            CallSpec(
                "Functional_gelu_0",
                "torch.nn.functional.gelu",
                [TensorArg("Functional_gelu_0_forward_input.0"), Opaque("torch._C.Generator")],
            ),
            "cannot be rebuilt",
        ),
        (  # a keyword tensor (the pkl records positional ones only) is named as the code spells it
            "/d",
            CallSpec(
                "Functional_gelu_0",
                "torch.nn.functional.gelu",
                [TensorArg("Functional_gelu_0_forward_input.0")],
                {"attn_mask": TensorArg(None, "torch.bool", (6, 6))},
            ),
            "the keyword argument attn_mask (a torch.bool tensor of shape [6, 6]) was not recorded",
        ),
    ]
    for folder, spec, why in cases:
        got = build_plan(rows, "npu", call, folder, spec, False, False)
        assert isinstance(got, NotReplayable) and why in why_not_text(got.why), got
    missing = build_plan(rows, "npu", "Torch_exp_0_forward", "/d", None, False, False)
    assert isinstance(missing, NotReplayable) and "does not hold it" in why_not_text(missing.why)


def test_an_in_place_call_recorded_after_it_wrote_its_input_is_not_replayed(record):
    rows = _rows(
        record,
        ["Tensor_add__0_forward_input.0", "Tensor_add__0_forward_input.1", "Tensor_add__0_forward_output"],
    )
    got = build_plan(rows, "npu", "Tensor_add__0_forward", "/d", None, False, inputs_after_call=True)
    assert isinstance(got, NotReplayable) and "after it wrote" in why_not_text(got.why)


def _with_site(rows: list[Row], call: str, source: str) -> list[Row]:
    """The NPU stack of ``call`` on its first row, as the pairing puts it, with ``source`` as its line."""
    rows[0].stack = StackRecord(
        f"{call}_stack_info",
        [Frame("/home/u/model.py", "12", "forward", source), Frame("/home/u/train.py", "3", "main", "")],
    )
    return rows


def test_the_originals_missing_keyword_arguments_are_read_from_the_calls_source_line(record):
    call = "Functional_softmax_0_forward"
    names = [f"{call}_input.0", f"{call}_output"]
    rows = _with_site(_rows(record, names), call, "        return F.softmax(scores / 8, dim=-1)  # note")
    plan = build_plan(rows, "npu", call, "/d", None, keywords_recorded=False, inputs_after_call=False)
    assert isinstance(plan, Plan) and plan.kwargs == {"dim": Value("plain", -1)}
    assert plan.from_source == ("dim",) and not plan.complete, "still counts only when the bench agrees"
    # the backward rebuilds the same forward: the keywords come from the forward's line
    back = [
        *rows,
        *_rows(record, ["Functional_softmax_0_backward_input.0", "Functional_softmax_0_backward_output.0"]),
    ]
    plan = build_plan(back, "npu", "Functional_softmax_0_backward", "/d", None, False, False)
    assert isinstance(plan, Plan) and plan.kwargs == {"dim": Value("plain", -1)}
    # recorded keywords (msprobe) and a sidecar win: the line is not read
    assert build_plan(rows, "npu", call, "/d", None, True, False).kwargs == {}  # type: ignore[union-attr]


def test_a_source_line_is_used_only_when_it_calls_the_op_once_with_literal_keywords():
    assert source_keywords(
        'x = self.conv(F.interpolate(x, scale_factor=2.0, mode="nearest"))', "interpolate"
    ) == {
        "scale_factor": 2.0,
        "mode": "nearest",
    }
    assert source_keywords("y = x.softmax(dim=self.dim, dtype=None)", "softmax") == {"dtype": None}
    assert source_keywords("if torch.sum(x, dim=(0, 1)) > 0:", "sum") == {"dim": (0, 1)}
    for line, op in (
        ("y = F.softmax(a, dim=1) + F.softmax(b, dim=0)", "softmax"),  # twice: which one?
        ("y = self.fc(x)", "linear"),  # the op is called inside a library
        ("y = F.interpolate(x, scale_factor=2,", "interpolate"),  # a call that spans lines
        ("y = F.softmax(x, **options)", "softmax"),
        ("", "softmax"),
    ):
        assert source_keywords(line, op) == {}, line
    assert (
        source_keywords("y = F.softmax(x, dim=__import__('os').getpid())", "softmax") == {}
    )  # never evaluated


def test_an_in_place_keyword_recorded_after_the_call_is_not_replayed(record):
    call = "Functional_relu_0_forward"
    rows = _with_site(
        _rows(record, [f"{call}_input.0", f"{call}_output"]), call, "x = F.relu(x, inplace=True)"
    )
    got = build_plan(rows, "npu", call, "/d", None, False, inputs_after_call=True)
    assert isinstance(got, NotReplayable) and "after it wrote" in why_not_text(got.why)


def test_in_place_ops_by_name():
    assert in_place("add_") and in_place("__iadd__") and in_place("__imatmul__")
    assert not in_place("__add__") and not in_place("add") and not in_place("__getitem__")


def test_a_position_the_original_skips_is_none_and_the_rebuild_lacks_arguments(record):
    """The original records no None: conv2d without a bias has input.0, input.1, input.3.0 …"""
    call = "Functional_conv2d_0_forward"
    rows = _rows(
        record,
        [f"{call}_input.0", f"{call}_input.1", f"{call}_input.3.0", f"{call}_input.3.1", f"{call}_output"],
        scalars={f"{call}_input.3.0": 1, f"{call}_input.3.1": 2},
    )
    plan = build_plan(rows, "npu", call, "/d", None, keywords_recorded=True, inputs_after_call=False)
    assert isinstance(plan, Plan)
    assert plan.args[2] == Value("plain", None) and plan.args[3] == [Value("plain", 1), Value("plain", 2)]
    assert not plan.complete, "a skipped position may have held something else than None"


def test_a_backward_recorded_at_an_inner_autograd_node_is_not_replayed(record):
    names = [
        "Functional_cross_entropy_0_forward_input.0",
        "Functional_cross_entropy_0_forward_input.1",
        "Functional_cross_entropy_0_forward_output",
        "Functional_cross_entropy_0_backward_input.0",
        "Functional_cross_entropy_0_backward_output.0",
    ]
    rows = _rows(record, names)
    call = "Functional_cross_entropy_0_backward"
    got = build_plan(rows, "npu", call, "/d", None, False, False, node_order=True)
    assert isinstance(got, NotReplayable) and "inner autograd node" in why_not_text(got.why)
    assert isinstance(build_plan(rows, "npu", call, "/d", None, False, False), Plan)  # ours: by argument


def test_plans_that_pass_different_values_say_which(record):
    call = "Functional_gelu_0_forward"
    rows = _rows(record, [f"{call}_input.0", f"{call}_output"])
    spec = CallSpec(
        "Functional_gelu_0",
        "torch.nn.functional.gelu",
        [TensorArg(f"{call}_input.0")],
        {"approximate": "tanh"},
    )
    npu = build_plan(rows, "npu", call, "/d", spec, False, False)
    bench = build_plan(rows, "bench", call, "/d", replace(spec, kwargs={"approximate": "none"}), False, False)
    assert isinstance(npu, Plan) and isinstance(bench, Plan)
    assert arguments_text(arguments_differ(npu, bench)) == "approximate: 'tanh' against 'none'"
    assert arguments_differ(npu, npu) == ()
    npu.kwargs["device"], bench.kwargs["device"] = Value("device", "npu:0"), Value("device", "cuda:0")
    assert arguments_text(arguments_differ(npu, bench)) == "approximate: 'tanh' against 'none'", (
        "the devices differ by design"
    )
    npu.kwargs["device"], bench.kwargs["device"] = (
        Value("plain", "npu"),
        Value("plain", "cuda"),
    )  # x.to("npu")
    assert arguments_text(arguments_differ(npu, bench)) == "approximate: 'tanh' against 'none'"


def test_every_call_is_replayed_in_the_end_those_after_the_first_failure_too(record):
    """An every-step fault at step 1 whose results pass (its inherited error hides its own), after a loss
    that warns: it is still in the order, after the failing calls."""
    names = ["Functional_linear_0_forward_output", "Functional_mse_loss_0_forward_output"]
    names += ["Functional_layer_norm_0_backward_output.0"]
    rows = _rows(record, names)
    rows[1].result = Result(("1",), "No", "", Status.WARN)
    assert replay_order(rows, Diagnosis(), top=10) == [
        "Functional_linear_0_forward",
        "Functional_mse_loss_0_forward",
        "Functional_layer_norm_0_backward",
    ]


def test_node_order_gradients_with_a_null_for_an_argument_that_needs_none(record):
    """msprobe records mse_loss's backward as [the input's gradient, null for the target]."""
    call = "Functional_mse_loss_0"
    names = [f"{call}_forward_input.0", f"{call}_forward_input.1", f"{call}_forward_output"]
    names += [f"{call}_backward_input.0", f"{call}_backward_output.0", f"{call}_backward_output.1"]
    rows = _rows(record, names, scalars={f"{call}_backward_output.1": 0.0})
    rows[1].npu.requires_grad = False
    plan = build_plan(rows, "npu", f"{call}_backward", "/d", None, True, False, node_order=True)
    assert isinstance(plan, Plan) and list(plan.results) == [(0,)], plan


_MSE = ["Functional_mse_loss_0_forward_input.0", "Functional_mse_loss_0_forward_input.1"]


def _mse_plan(record, args: list[object], fn: str = "torch.nn.functional.mse_loss"):
    rows = _rows(record, [*_MSE, "Functional_mse_loss_0_forward_output"])
    spec = CallSpec("Functional_mse_loss_0", fn, args, {})
    return build_plan(rows, "npu", "Functional_mse_loss_0_forward", "/d", spec, False, False)


@pytest.mark.parametrize(
    ("fn", "args", "why"),
    [
        (  # a bit-identical pair was "confirmed by replay": l1_loss's result is not the recorded mse_loss's
            "torch.nn.functional.l1_loss",
            [TensorArg(_MSE[0]), TensorArg(_MSE[1])],
            "it calls torch.nn.functional.l1_loss, the dump records Functional_mse_loss "
            "(torch.nn.functional.mse_loss)",
        ),
        (  # the call's own output as its input: the true culprit was refuted into "inherited"
            "torch.nn.functional.mse_loss",
            [TensorArg("Functional_mse_loss_0_forward_output"), TensorArg(_MSE[1])],
            "it passes Functional_mse_loss_0_forward_output as argument 0, which the dump records as no "
            "input there",
        ),
        (  # the inputs swapped
            "torch.nn.functional.mse_loss",
            [TensorArg(_MSE[1]), TensorArg(_MSE[0])],
            f"it passes {_MSE[1]} as argument 0",
        ),
        (  # a recorded tensor input replaced by a value
            "torch.nn.functional.mse_loss",
            [TensorArg(_MSE[0]), 0.0],
            f"it does not pass the recorded tensor input {_MSE[1]}",
        ),
    ],
)
def test_a_sidecar_line_that_disagrees_with_the_records_is_not_replayed(record, fn, args, why):
    plan = _mse_plan(record, args, fn)
    assert isinstance(plan, NotReplayable), plan
    assert why_not_text(plan.why).startswith(SIDECAR_DISAGREES + why), why_not_text(plan.why)


def test_a_sidecar_line_that_agrees_with_the_records_is_replayed(record):
    plan = _mse_plan(record, [TensorArg(_MSE[0]), TensorArg(_MSE[1])])
    assert isinstance(plan, Plan) and plan.fn == "torch.nn.functional.mse_loss"
    assert [a.name for a in plan.args] == _MSE
