"""Where the runs start to differ when a call's inputs already do (issue 16): random draws, a call only the
NPU run makes, a non-tensor argument that differs, a parameter that differs on entry, the optimizer's
calls after the backward, a bench of zeros — on small hand-made calls."""

from __future__ import annotations

import numpy as np
import pytest

from ptdbg_tui.compare.diagnosis.diagnose import diagnose
from ptdbg_tui.compare.diagnosis.findings import ARGUMENTS, PARAMETERS, RANDOM, UNPAIRED
from ptdbg_tui.compare.diagnosis.propagation import ENTERS, GROWTH, LEAN, one_run_change
from ptdbg_tui.compare.diagnosis.ranks import RankView, cross_rank
from ptdbg_tui.compare.metrics.settled import overwritten_input, settled_result, summary_result
from ptdbg_tui.compare.model import ErrorMeasures, Row, Status
from ptdbg_tui.compare.report.words import (
    call_evidence_text,
    evidence_text,
    rank_headline,
    unexplained_text,
    verdict_text,
)
from ptdbg_tui.formats.naming import parse_name
from ptdbg_tui.formats.records import TensorRecord
from ptdbg_tui.formats.stats import array_stats

RNG = np.random.default_rng(1)


def _x(n: int = 256) -> np.ndarray:
    return RNG.standard_normal(n).astype(np.float32)


def _noisy(a: np.ndarray, rel: float = 1e-6) -> np.ndarray:
    return (a * (1 + rel * RNG.standard_normal(a.shape))).astype(a.dtype)


def test_a_dropout_that_draws_other_masks_is_where_the_runs_start_to_differ_and_nothing_after_it(calls):
    x = _x()
    mask_n, mask_b = RNG.random(x.shape) > 0.5, RNG.random(x.shape) > 0.5
    y_n, y_b = x * mask_n * 2, x * mask_b * 2
    calls.call("Functional_dropout", 0, "forward", [(x, x)], [(y_n, y_b)])
    calls.call("Torch_tanh", 0, "forward", [(y_n, y_b)], [(np.tanh(y_n), np.tanh(y_b))])
    d = diagnose(calls.rows)
    assert [(s.call, s.kind) for s in d.suspects] == [("Functional_dropout_0_forward", RANDOM)]
    assert "random numbers" in verdict_text(
        d
    ) and "align their seeds (or, for dropout, disable it)" in verdict_text(d)


def test_a_bf16_change_of_one_percent_by_a_call_only_the_npu_run_makes_is_named(calls):
    """``y + 0.01 * tanh(y)`` under bf16 autocast: 2.5 units of bf16's rounding, within the allowance of
    8 for what a call only one run makes did; the all-clear was given. Its norm leans +1%, and a rounding
    leans neither way."""
    bf16 = "torch.bfloat16"
    x = _bf16(_x(1024))
    y = _bf16(np.maximum(x, 0))
    calls.call("Torch_relu", 0, "forward", [(x, x)], [(y, y)], npu_dtype=bf16, bench_dtype=bf16)
    calls.npu_only("Tensor___mul___0_forward_input.0", y, bf16)
    changed = _bf16(y * 1.01)
    calls.npu_only("Tensor___mul___0_forward_output", changed, bf16)
    outs = [(_bf16(np.tanh(changed)), _bf16(np.tanh(y)))]
    calls.call("Torch_tanh", 0, "forward", [(changed, y)], outs, npu_dtype=bf16, bench_dtype=bf16)
    assert calls.suspects() == [("Tensor___mul___0_forward", UNPAIRED)]


def test_a_call_only_the_npu_run_makes_is_named_where_the_data_starts_to_differ(calls):
    x = _x()
    calls.call("Torch_relu", 0, "forward", [(x, x)], [(np.maximum(x, 0), np.maximum(x, 0))])
    y = np.maximum(x, 0)
    calls.npu_only("Tensor___mul___0_forward_input.0", y)
    calls.npu_only("Tensor___mul___0_forward_output", y * 1.001)
    calls.call("Torch_tanh", 0, "forward", [(y * 1.001, y)], [(np.tanh(y * 1.001), np.tanh(y))])
    assert calls.suspects() == [("Tensor___mul___0_forward", UNPAIRED)]


def _decay_then_update(calls, bench_decays: bool, summary: bool = True) -> None:
    """AdamW's step on one parameter, as the NPU run makes it: ``p.mul_(0.9999)`` (a call the bench run
    does not make), an update of the optimizer's state on another tensor, then ``p.addcdiv_(…)``, which
    reads the decayed parameter; the bench's parameter is decayed too where ``bench_decays`` (elsewhere,
    by no dumped call), else not."""
    p, state = _x(), _x()
    decayed = p * np.float32(0.9999)
    calls.npu_only("Tensor_mul__0_forward_input.0", p)
    calls.npu_only("Tensor_mul__0_forward_output", decayed)
    calls.call("Tensor_lerp_", 0, "forward", [(state, state)], [(state * 0.5, state * 0.5)], summary=summary)
    bench_p = decayed if bench_decays else p
    calls.call(
        "Tensor_addcdiv_",
        0,
        "forward",
        [(decayed, bench_p), (state, state)],
        [(decayed, bench_p)],
        summary=summary,
    )


def test_an_in_place_call_only_the_npu_run_makes_is_named_where_the_tensor_it_wrote_is_read(calls):
    """The parameter it decays is read two calls later, 1e-4 apart: from statistics that was below the
    margin for error entering outside the dumped calls (an all-clear)."""
    _decay_then_update(calls, bench_decays=False)
    d = diagnose(calls.rows)
    assert [(s.call, s.kind) for s in d.suspects] == [("Tensor_mul__0_forward", UNPAIRED)], verdict_text(d)
    assert (
        "it changes Tensor_mul__0_forward_input.0 in place by 0.0001, allowed 3.1e-05: ×3.2; "
        "Tensor_addcdiv__0_forward_input.0, the tensor it wrote, carries 0.0001 against the bench's"
    ) in verdict_text(d)


def test_an_in_place_call_only_the_npu_run_makes_is_no_suspect_where_the_bench_tensor_agrees(calls):
    """The bench made the same change by other means (no dumped call, or calls of its own): the tensor the
    NPU-only call wrote agrees with the bench's where it is read."""
    _decay_then_update(calls, bench_decays=True)
    assert calls.suspects() == []


def test_a_scalar_argument_that_differs_is_where_the_scripts_differ(calls):
    x = _x()
    calls.add("Torch_mul_0_forward_input.0", x, x)
    calls.scalar("Torch_mul_0_forward_input.1", 0.0458, 0.044715)
    calls.add("Torch_mul_0_forward_output", x * np.float32(0.0458), x * np.float32(0.044715))
    d = diagnose(calls.rows)
    assert [(s.call, s.kind) for s in d.suspects] == [("Torch_mul_0_forward", ARGUMENTS)]
    assert "0.0458 against 0.044715" in verdict_text(d) and "different arguments" in verdict_text(d)


def test_the_device_an_argument_names_is_not_a_different_argument(calls):
    """The NPU run moves its tensors to npu:0 and the bench to cuda:0, by design (msprobe records a
    device and a string argument with their values)."""
    x = _x()
    calls.add("Tensor_to_0_forward_input.0", x, x)
    for name, dtype, npu, bench in (
        ("Tensor_to_0_forward_input.1", "<class 'str'>", "npu", "cuda"),
        ("Tensor_to_0_forward_input.2", "torch.device", "npu:0", "cuda:0"),
    ):
        n, b = (
            TensorRecord(name, 0, dtype, "[]", [v] * 4, parse_name(name), data_name="") for v in (npu, bench)
        )
        row = Row(n, b, seq=len(calls.rows))
        row.result = settled_result(row, summary=False)
        calls.rows.append(row)
    calls.add("Tensor_to_0_forward_output", x, x)
    assert diagnose(calls.rows).suspects == []


def test_a_data_derived_scalar_within_tolerance_is_not_a_different_argument(calls):
    x = _x()
    calls.add("Torch_mul_0_forward_input.0", x, x)
    calls.scalar("Torch_mul_0_forward_input.1", 0.5000001, 0.5)
    calls.add("Torch_mul_0_forward_output", x * np.float32(0.5000001), x * np.float32(0.5))
    assert calls.suspects() == []


def test_a_weight_that_differs_on_entry_is_parameters_differ_on_entry_to_the_step(calls):
    x, w = _x(64).reshape(4, 16), _x(128).reshape(8, 16)
    w_n = w * np.float32(1.001)
    calls.call("Functional_linear", 0, "forward", [(_noisy(x), x), (w_n, w)], [(x @ w_n.T, x @ w.T)])
    d = diagnose(calls.rows, step=1)
    assert [(s.call, s.kind) for s in d.suspects] == [("Functional_linear_0_forward", PARAMETERS)]
    assert "parameters differ on entry to step 1" in verdict_text(d)
    assert "weight of Functional_linear_0" in verdict_text(d)


def test_an_optimizer_call_after_the_backward_takes_the_backwards_error_as_inherited(calls):
    x, g = _x(), _x()
    g_n = g * np.float32(1.3)  # a faulty backward: its gradient 30% off
    calls.call("Torch_tanh", 0, "forward", [(x, x)], [(np.tanh(x), np.tanh(x))])
    slope = 1 - np.tanh(x) ** 2
    calls.call("Torch_tanh", 0, "backward", [(g, g)], [(g_n * slope, g * slope)])
    # the optimizer reads .grad, which autograd accumulated outside any dumped call
    grad_n, grad_b = g_n * (1 - np.tanh(x) ** 2), g * (1 - np.tanh(x) ** 2)
    calls.call("Tensor_clone", 0, "forward", [(grad_n, grad_b)], [(grad_n, grad_b)])
    assert calls.suspects() == [("Torch_tanh_0_backward", GROWTH)]


def test_error_entering_through_code_no_hook_saw_is_still_named(calls):
    x = _x()
    calls.call("Torch_tanh", 0, "forward", [(x, x)], [(np.tanh(x), np.tanh(x))])
    y = np.tanh(x)
    calls.call("Torch_exp", 0, "forward", [(y * 1.01, y)], [(np.exp(y * 1.01), np.exp(y))])
    assert calls.suspects() == [("Torch_exp_0_forward", ENTERS)]


def test_error_entering_after_calls_only_the_bench_run_makes_names_them_though_a_call_came_between(calls):
    """One rank's script skips ``grad.div_(world)`` after two all-reduces; Adam's step counter runs between
    the last division and the first call that reads the gradient. The evidence said only 'it entered
    after Tensor___iadd___0_forward' (the counter): the calls only the bench run makes were not named
    because one call came after them."""
    g, m = _x(), _x()
    calls.call("Distributed_all_reduce", 0, "forward", [(g, g)], [(g, g)])
    calls.bench_only("Tensor_div__0_forward_input.0", g)
    calls.bench_only("Tensor_div__0_forward_output", g / 4)
    step = np.ones(1, np.float32)
    calls.call("Tensor___iadd__", 0, "forward", [(step, step)], [(step + 1, step + 1)])
    calls.call("Tensor_lerp_", 0, "forward", [(m, m), (g, g / 4)], [(m + (g - m) / 10, m + (g / 4 - m) / 10)])
    d = diagnose(calls.rows)
    assert [(s.call, s.kind) for s in d.suspects] == [("Tensor_lerp__0_forward", ENTERS)]
    # the gradient the lerp_ takes is the one the division wrote in place: what it did is said
    assert evidence_text(d.suspects[0].evidence) == (
        "before it the bench run makes Tensor_div__0_forward, which the NPU run does not: it changes "
        "Tensor_div__0_forward_input.0 in place by 0.75, allowed 3.1e-05: ×23,831; "
        "Tensor_lerp__0_forward_input.1 carries 3 against the tensor it wrote"
    ), evidence_text(d.suspects[0].evidence)
    # the rank whose script lacks them makes its own error: it is the first divergent rank, where error
    # entering outside the dumped calls counts as received (another rank's, through a collective no hook saw)
    ranks = cross_rank([RankView("step1/rank1", 1, 1, calls.rows, d)])
    assert ranks.first is not None and ranks.first.view.rank == 1, rank_headline(ranks)


def test_a_bench_of_zeros_is_said_so_not_nan(calls):
    x = _x()
    z = np.zeros_like(x)
    calls.call("Torch_mul", 0, "backward", [(x, x)], [(x * 1e-3, z)])
    d = diagnose(calls.rows)
    text = (
        " ".join(evidence_text(s.evidence) for s in d.suspects)
        + verdict_text(d)
        + " ".join(call_evidence_text(e) for e in d.calls.values())
    )
    assert "NaN" not in text and "Inf" not in text
    assert "all zeros on the bench" in text


def test_an_input_whose_bench_holds_nan_is_no_reference_not_where_error_enters(calls):
    """NaN on the bench only, come in through code no hook saw: what the NPU's input carries beside it is
    not measured against a bench that is no reference there, so no error 'enters before' the call."""
    x = _x()
    x_b = x.copy()
    x_b[:8] = np.nan
    x_n = x * np.float32(1.05)
    calls.call("Torch_tanh", 0, "forward", [(x_n, x_b)], [(np.tanh(x_n), np.tanh(x_b))])
    d = diagnose(calls.rows)
    assert d.suspects == []
    assert call_evidence_text(d.calls["Torch_tanh_0_forward"]) == (
        "its inputs hold NaN/Inf on the bench where the NPU's are finite: the bench is no reference here"
    )


def test_an_output_shape_that_the_inputs_values_or_arguments_decide_is_no_shape_finding(calls):
    """nonzero's output shape follows which elements are zero: an input element 1e-7 on one side and 0 on
    the other changes it with no fault; an interpolation by another scale is the arguments' finding alone."""
    x = _x()
    x[:8] = 0
    x_n = x.copy()
    x_n[0] = np.float32(1e-7)
    calls.call("Torch_nonzero", 0, "forward", [(x_n, x)], [(np.argwhere(x_n), np.argwhere(x))])
    calls.add("Functional_interpolate_0_forward_input.0", x, x)
    calls.scalar("Functional_interpolate_0_forward_input.1", 2.0, 3.0)
    calls.add("Functional_interpolate_0_forward_output", np.repeat(x, 2), np.repeat(x, 3))
    assert calls.suspects() == [("Functional_interpolate_0_forward", ARGUMENTS)]


def test_failing_rows_without_a_suspect_say_where_the_first_is_and_why(calls):
    x = _x()
    x_n = x * np.float32(1.05)  # the error is there before any dumped call, and everything carries it
    calls.call("Torch_tanh", 0, "forward", [(x_n, x)], [(np.tanh(x_n), np.tanh(x))])
    for r in calls.rows:  # a bench run with no earlier call to explain it: nothing enters, rows fail
        r.result.status = Status.FAIL
    d = diagnose(calls.rows)
    d.suspects = []
    from ptdbg_tui.compare.diagnosis.diagnose import explain_failures

    unexplained = explain_failures(calls.rows, d)
    assert unexplained is not None and unexplained.row == "Torch_tanh_0_forward_input.0"
    assert unexplained_text(unexplained).startswith(
        "the first failing row is Torch_tanh_0_forward_input.0 — "
    )


def test_inputs_that_an_in_place_initialiser_overwrites_are_not_data():
    assert overwritten_input(parse_name("Tensor_uniform__0_forward_input.0"))
    assert overwritten_input(parse_name("Tensor_zero__3_forward_input.0"))
    assert not overwritten_input(parse_name("Tensor_uniform__0_forward_input.1"))  # the bound a
    assert not overwritten_input(parse_name("Tensor_add__0_forward_input.0"))  # add_ reads what it writes
    # a collective's output buffers (torch.empty_like): all_gather's list, reduce_scatter's tensor
    assert overwritten_input(parse_name("Distributed_all_gather_0_forward_input.0.2"))
    assert overwritten_input(parse_name("Distributed_reduce_scatter_tensor_1_forward_input.0"))
    assert not overwritten_input(parse_name("Distributed_all_gather_0_forward_input.1"))  # what it sends
    assert not overwritten_input(parse_name("Distributed_all_reduce_0_forward_input.0"))  # reduced in place


def test_uninitialised_memory_under_an_initialiser_never_fails_nor_names_a_suspect(calls):
    garbage_n = np.array([7.9e34, -3e20, 1.0, 0.0], dtype=np.float32)
    garbage_b = np.array([1e-30, 5.0, -2.0, 9e18], dtype=np.float32)
    zeros = np.zeros(4, dtype=np.float32)
    row = calls.add("Tensor_zero__0_forward_input.0", garbage_n, garbage_b)
    from ptdbg_tui.compare.metrics.settled import settled_result

    row.result = settled_result(row, summary=False)
    calls.add("Tensor_zero__0_forward_output", zeros, zeros)
    assert row.status is Status.PASS and "overwrites this tensor" in row.result.message
    assert calls.suspects() == []


def _bf16(a: np.ndarray) -> np.ndarray:
    bits = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32)


def _gelu(x: np.ndarray) -> np.ndarray:
    return (0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x**3)))).astype(np.float32)


def test_an_elementwise_result_that_leans_one_bf16_unit_is_a_one_sided_error(calls):
    x = _x(4096)
    xn = _bf16(x)
    calls.call(
        "Functional_gelu",
        0,
        "forward",
        [(xn, x)],
        [(_bf16(_gelu(xn) * 1.005), _gelu(x))],
        npu_dtype="torch.bfloat16",
    )
    d = diagnose(calls.rows)
    assert [(s.call, s.kind) for s in d.suspects] == [("Functional_gelu_0_forward", LEAN)]
    assert "one-sided" in verdict_text(d)


def test_bf16_rounding_of_an_elementwise_result_does_not_lean(calls):
    x = _x(4096)
    xn = _bf16(x)
    calls.call(
        "Functional_gelu", 0, "forward", [(xn, x)], [(_bf16(_gelu(xn)), _gelu(x))], npu_dtype="torch.bfloat16"
    )
    assert calls.suspects() == []


def _gelu_grad(x: np.ndarray) -> np.ndarray:
    t = np.tanh(0.7978845608 * (x + 0.044715 * x**3))
    return (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * 0.7978845608 * (1 + 3 * 0.044715 * x**2)).astype(
        np.float32
    )


@pytest.mark.parametrize(("scale", "named"), [(1.0, False), (1.02, True)])
def test_an_elementwise_backward_whose_gradient_leans_is_a_one_sided_error(calls, scale, named):
    """A bf16 GELU backward 2% off under autocast: 5 units of bf16's rounding, within a call's allowance
    of 8, every row passed and the run read as an all-clear; its gradient's norm leans +2.03% where the
    incoming gradient's leans 0."""
    x, g = _x(4096), _x(4096)
    xn, gn = _bf16(x), _bf16(g)
    bf16 = {"npu_dtype": "torch.bfloat16"}
    calls.call("Functional_gelu", 0, "forward", [(xn, x)], [(_bf16(_gelu(xn)), _gelu(x))], **bf16)
    grad = (_bf16(gn * _gelu_grad(xn) * scale), g * _gelu_grad(x))
    calls.call("Functional_gelu", 0, "backward", [(gn, g)], [grad], **bf16)
    d = diagnose(calls.rows)
    assert [(s.call, s.kind) for s in d.suspects] == ([("Functional_gelu_0_backward", LEAN)] if named else [])


@pytest.mark.parametrize(("scale", "named"), [(1.0, False), (1.01, True)])
def test_an_elementwise_lean_shows_in_statistics_too(calls, scale, named):
    """A bf16 GELU 1% off under autocast: 2.5 units of bf16's rounding, within a call's allowance of 8,
    and its inputs agree; from statistics, whose norms and means show the lean as tensors do, 118 rows
    failed and no call was named."""
    x = _x(4096)
    xn = _bf16(x)
    out = (_bf16(_gelu(xn) * scale), _gelu(x))
    calls.call("Functional_gelu", 0, "forward", [(xn, x)], [out], npu_dtype="torch.bfloat16", summary=True)
    d = diagnose(calls.rows)
    assert [(s.call, s.kind) for s in d.suspects] == ([("Functional_gelu_0_forward", LEAN)] if named else [])


@pytest.mark.parametrize(("grid", "named"), [(False, True), (True, False)])
def test_a_lean_within_the_rounding_of_norms_a_dumper_recorded_in_bf16_is_no_fault(
    calls, record, grid, named
):
    """A dumper that reduces a bf16 tensor in bf16 records its norm and mean to 0.4%: a 0.6% lean is
    then within what the figures can tell; recorded off bf16's grid (ours reduces in float64), it shows."""
    x = _x(4096)
    xn = _bf16(x)
    calls.call("Functional_gelu", 0, "forward", [(xn, x)], [], npu_dtype="torch.bfloat16", summary=True)
    npu, bench = _bf16(_gelu(xn) * 1.006), _gelu(x)
    name = "Functional_gelu_0_forward_output.0"

    def stats(a: np.ndarray) -> list:
        figures = array_stats(a, "torch.bfloat16")
        return [float(_bf16(np.array([v]))[0]) for v in figures] if grid else figures

    rn, rb = (record(name, shape=[4096], dtype="torch.bfloat16", stats=stats(a)) for a in (npu, bench))
    row = Row(rn, rb, seq=len(calls.rows))
    row.result = summary_result(row)
    calls.rows.append(row)
    d = diagnose(calls.rows)
    assert [(s.call, s.kind) for s in d.suspects] == ([("Functional_gelu_0_forward", LEAN)] if named else [])


@pytest.mark.parametrize("norm", [float("inf"), float("nan")])
def test_a_dump_s_nonfinite_norm_is_on_no_grid(norm):
    """A dump is someone else's file: a bf16 tensor's recorded norm of Inf or NaN ended the compare
    (``int(inf)``: OverflowError) where the lean of what one run changed was weighed."""
    x = ErrorMeasures(
        rel=0.01, robust=0.01, npu_norm=norm, bench_norm=1.0, numel=1024, floor=2**-8, from_stats=True
    )
    change, allowed, _ = one_run_change(x)
    assert change == 0.01 and allowed > 0


def test_a_bench_only_call_whose_name_an_npu_call_bears_stays_a_call_of_its_own(calls, record):
    """Aligned calls: the NPU script skips a micro-batch, whose batch-norm counter ``Tensor_add__1`` only
    the bench run makes; the NPU's optimizer ``Tensor_add__1`` pairs with the bench's ``Tensor_add__2``.
    The two ``Tensor_add__1`` were one call, judged where the counter was made: error entered 'after
    Functional_conv1d_1_forward, a call only the bench run makes', the call before the counter."""
    g, buf = _x(), _x()
    calls.bench_only("Functional_conv1d_1_forward_output", g)
    calls.bench_only("Tensor_add__1_forward_input.0", np.zeros(1, np.float32))
    calls.bench_only("Tensor_add__1_forward_output", np.ones(1, np.float32))
    calls.bench_only("Tensor___truediv___1_forward_output", g)
    calls.call("Tensor_mul_", 0, "forward", [(buf, buf)], [(buf, buf)])  # the momentum buffer's
    for arg, (n, b) in {
        "input.0": (buf, buf),
        "input.1": (g, 2 * g),
        "output": (buf + g, buf + 2 * g),
    }.items():
        rn, rb = (record(f"Tensor_add__{k}_forward_{arg}", shape=[256]) for k in (1, 2))
        compared = calls.add("scratch", n, b)  # the metrics of a row named alike on both sides
        calls.rows[-1] = Row(rn, rb, fuzzy=True, result=compared.result, seq=compared.seq)
    d = diagnose(calls.rows)
    assert [(s.call, s.kind, s.after_bench_only) for s in d.suspects] == [
        ("Tensor_add__1_forward", ENTERS, True)
    ]
    assert evidence_text(d.suspects[0].evidence).endswith(
        "it entered after Tensor_mul__0_forward; before it the bench run makes Functional_conv1d_1_forward, "
        "Tensor_add__1_forward, Tensor___truediv___1_forward, which the NPU run does not"
    ), evidence_text(d.suspects[0].evidence)
    assert d.suspects[0].seq == calls.rows[-3].seq  # judged where the NPU made it


def test_a_call_only_the_npu_run_makes_stays_its_own_where_a_bench_only_call_bears_its_name(calls):
    """The matching keeps apart two calls made at different code sites (the NPU's ``h.mul_(1.01)``, the
    bench's momentum ``buf.mul_(0.9)``), both ``Tensor_mul__0``: merged into one call by that name, the
    NPU's counted as paired, and the error it made entered 'after Tensor_mul__0_forward' instead."""
    x, buf = _x(), _x()
    calls.call("Torch_tanh", 0, "forward", [(x, x)], [(np.tanh(x), np.tanh(x))])
    calls.npu_only("Tensor_mul__0_forward_input.0", np.tanh(x))
    calls.npu_only("Tensor_mul__0_forward_output", np.tanh(x) * 1.01)
    calls.call("Torch_exp", 0, "forward", [(np.tanh(x) * 1.01, np.tanh(x))], [(np.exp(x), np.exp(x))])
    calls.bench_only("Tensor_mul__0_forward_input.0", buf)
    calls.bench_only("Tensor_mul__0_forward_output", buf * 0.9)
    assert calls.suspects() == [("Tensor_mul__0_forward", UNPAIRED)]
