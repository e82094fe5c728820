"""The error-growth rule on small hand-made calls: one test per failure mode of the original's verdict."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ptdbg_tui.compare.diagnosis.diagnose import diagnose
from ptdbg_tui.compare.diagnosis.findings import RANDOM
from ptdbg_tui.compare.diagnosis.propagation import ENTERS, GROWTH, NAN_ORIGIN, ZEROS
from ptdbg_tui.compare.metrics.accumulator import compare_arrays
from ptdbg_tui.compare.metrics.cells import NO, YES
from ptdbg_tui.compare.metrics.errors import floor_of, stats_errors, trim_count, unit_roundoff
from ptdbg_tui.compare.report.words import evidence_text, note_texts, verdict_text

RNG = np.random.default_rng(0)
NOISE = 1e-6


def _noisy(a: np.ndarray, rel: float = NOISE) -> np.ndarray:
    return (a * (1 + rel * RNG.standard_normal(a.shape))).astype(a.dtype)


def _silu_grad(x: np.ndarray, g: np.ndarray, drop_term: bool = False) -> np.ndarray:
    s = 1 / (1 + np.exp(-x))
    return (g * s if drop_term else g * s * (1 + x * (1 - s))).astype(np.float32)


def test_small_magnitude_backward_fault_is_named_though_the_original_passes_it(calls):
    x = RNG.standard_normal(4096).astype(np.float32)
    xn = _noisy(x)
    y = (x / (1 + np.exp(-x))).astype(np.float32)
    g = (1e-4 * RNG.standard_normal(4096)).astype(np.float32)
    gn = _noisy(g)
    calls.call("Functional_silu", 0, "forward", [(xn, x)], [(_noisy(y), y)])
    wrong = _silu_grad(xn, gn, drop_term=True)
    calls.call("Functional_silu", 0, "backward", [(gn, g)], [(wrong, _silu_grad(x, g))])
    assert calls.suspects() == [("Functional_silu_0_backward", GROWTH)]
    assert calls.row("Functional_silu_0_backward_output.0").result.accuracy == YES  # MaxAbsErr < 0.001


@pytest.mark.parametrize("factor", [2.0, 1.01])
def test_pure_scale_error_is_named_though_its_cosine_is_one(calls, factor):
    x = RNG.standard_normal(1000).astype(np.float32)
    xn = _noisy(x)
    calls.call("Torch_mul", 0, "forward", [(xn, x)], [((xn * 3 * factor).astype(np.float32), x * 3)])
    assert calls.suspects() == [("Torch_mul_0_forward", GROWTH)]
    assert calls.row("Torch_mul_0_forward_output.0").result.cells[0] == "1.0"


def test_fp16_rounding_is_no_fault_and_an_overflow_is_the_nan_origin(calls):
    x = (500 * RNG.standard_normal((64, 128))).astype(np.float32)
    w = (RNG.standard_normal((128, 128))).astype(np.float32)
    y = x @ w
    x16, w16 = x.astype(np.float16), w.astype(np.float16)
    y16 = (x16.astype(np.float32) @ w16.astype(np.float32)).astype(np.float16)
    kw = {"npu_dtype": "torch.float16"}
    calls.call("Functional_linear", 0, "forward", [(x16, x), (w16, w)], [(y16, y)], **kw)
    assert calls.row("Functional_linear_0_forward_output.0").result.accuracy == NO  # MaxAbsErr > 1
    with np.errstate(over="ignore", invalid="ignore"):
        p16 = (y16.astype(np.float32) ** 2).astype(np.float16)
        calls.call("Tensor_pow", 0, "forward", [(y16, y)], [(p16, y * y)], **kw)
        sq = y * y
        calls.call("Torch_sub", 0, "forward", [(p16, sq), (p16, sq)], [(p16 - p16, sq - sq)], **kw)
    assert calls.suspects() == [("Tensor_pow_0_forward", NAN_ORIGIN)]


def test_noise_grown_through_a_deep_net_is_no_fault(calls):
    x = RNG.standard_normal((32, 64)).astype(np.float32)
    xn = _noisy(x)
    for i in range(64):
        w = (1.2 * RNG.standard_normal((64, 64)) / 8).astype(np.float32)
        y, yn = np.tanh(x @ w) * 1.5 if i % 2 else x @ w, np.tanh(xn @ w) * 1.5 if i % 2 else xn @ w
        x, xn, x_in, xn_in = y.astype(np.float32), yn.astype(np.float32), x, xn
        calls.call("Functional_linear", i, "forward", [(xn_in, x_in), (w, w)], [(xn, x)])
    assert np.abs(x).max() > 1 and calls.suspects() == []


def test_a_theoretically_zero_gradient_is_no_fault(calls):
    g = (1e-2 * RNG.standard_normal((8, 16, 6, 6))).astype(np.float32)
    gn = _noisy(g)
    w = RNG.standard_normal((16, 4, 3, 3)).astype(np.float32)
    gw = RNG.standard_normal((16, 4, 3, 3)).astype(np.float32)
    bias_bench, bias_npu = (1e-9 * RNG.standard_normal((2, 16))).astype(np.float32)
    calls.call(
        "Functional_conv2d",
        0,
        "backward",
        [(gn, g)],
        [(_noisy(w), w), (_noisy(gw), gw), (bias_npu, bias_bench)],
    )
    assert calls.row("Functional_conv2d_0_backward_output.2").result.accuracy == NO  # a random cosine
    assert calls.suspects() == []


def test_an_all_zero_output_is_named_and_its_consumer_is_not(calls):
    x = RNG.standard_normal(512).astype(np.float32)
    y = np.maximum(x, 0)
    zeros = np.zeros_like(y)
    calls.call("Torch_relu", 0, "forward", [(_noisy(x), x)], [(zeros, y)])
    calls.call("Torch_mul", 0, "forward", [(zeros, y)], [(zeros, 2 * y)])
    assert calls.row("Torch_relu_0_forward_output.0").result.cells[0] == "Nan"  # the original: a warning
    assert calls.suspects() == [("Torch_relu_0_forward", ZEROS)]


def test_a_backward_is_judged_with_its_saved_forward_tensors(calls):
    x = RNG.standard_normal(512).astype(np.float32) + 3
    y, yn = np.exp(x), 1.5 * np.exp(_noisy(x))  # a forward fault
    g = RNG.standard_normal(512).astype(np.float32)
    calls.call("Torch_exp", 0, "forward", [(_noisy(x), x)], [(yn, y)])
    calls.call("Torch_exp", 0, "backward", [(_noisy(g), g)], [(g * yn, g * y)])  # autograd uses the saved y
    assert calls.suspects() == [("Torch_exp_0_forward", GROWTH)]


def test_a_handful_of_flips_at_a_relu_boundary_is_no_fault(calls):
    x = RNG.standard_normal(20000).astype(np.float32)
    xn = x.copy()
    flips = np.argsort(np.abs(x))[:3]  # the elements closest to zero change sign on the NPU
    xn[flips] = -xn[flips]
    g = RNG.standard_normal(20000).astype(np.float32)
    calls.call("Torch_relu", 0, "forward", [(xn, x)], [(np.maximum(xn, 0), np.maximum(x, 0))])
    calls.call("Torch_relu", 0, "backward", [(g, g)], [(g * (xn > 0), g * (x > 0))])
    out = calls.row("Torch_relu_0_backward_output.0").result.errors
    assert out.rel > 1e-2 and out.robust < 1e-6
    assert calls.suspects() == []


def test_statistics_only_dumps_are_judged_from_their_statistics(calls):
    x = RNG.standard_normal(1000).astype(np.float32)
    calls.call("Torch_mul", 0, "forward", [(_noisy(x), x)], [(2.02 * x, 2 * x)], summary=True)
    calls.call("Torch_add", 0, "forward", [(2.02 * x, 2 * x)], [(2.02 * x + 1, 2 * x + 1)], summary=True)
    assert calls.suspects() == [("Torch_mul_0_forward", GROWTH)]
    assert calls.row("Torch_mul_0_forward_output.0").result.errors.from_stats


def test_random_draws_that_differ_are_their_own_finding_and_modules_around_calls_are_not_suspects(calls):
    x = RNG.standard_normal(100).astype(np.float32)
    calls.call("Torch_randn", 0, "forward", [], [(RNG.standard_normal(100).astype(np.float32), x)])
    calls.call("Module_block", 0, "forward", [(x, x)], [(3 * x, x)])
    calls.call("Torch_mul", 0, "forward", [(x, x)], [(3 * x, x)])
    assert calls.suspects() == [("Torch_randn_0_forward", RANDOM), ("Torch_mul_0_forward", GROWTH)]


def test_error_measures_of_the_metric_pass():
    b = np.linspace(-1, 1, 1000, dtype=np.float32)
    n = b.copy()
    n[10], n[20] = np.nan, np.inf  # NPU only
    b16 = b.copy()
    b16[30] = np.nan  # bench only
    n[30] = 0.5
    e = compare_arrays(n, b16, "torch.float16", "torch.float32").errors
    assert (e.new_nonfinite, e.lost_nonfinite) == (2, 1) and e.floor == 2.0**-11
    rest = np.delete(b.astype(np.float64), [10, 20, 30])  # the positions finite on both sides
    assert e.rel == 0  # nothing differs there
    n[40] += 0.25
    e = compare_arrays(n, b16, "torch.float16", "torch.float32").errors
    assert e.rel == pytest.approx(0.25 / math.sqrt(float(np.sum(rest**2))), rel=1e-6)
    z = compare_arrays(np.zeros(8, np.float32), np.ones(8, np.float32), "torch.float32", "torch.float32")
    z = z.errors
    assert z.npu_zero and z.rel == 1
    ints = compare_arrays(np.array([1, 2, 3]), np.array([1, 2, 4]), "torch.int64", "torch.int64").errors
    assert ints.exact and ints.floor == 0 and ints.rel > 0


def test_dtype_floors_and_trim_counts():
    assert unit_roundoff("torch.bfloat16") == 2.0**-8 and unit_roundoff("torch.float16") == 2.0**-11
    assert unit_roundoff("torch.float32") == 2.0**-24 and unit_roundoff("torch.int32") == 0
    assert floor_of("torch.bfloat16", "torch.float32") == 2.0**-8
    # float8 read as float32's 2**-24 ("float8_e4m3fn" starts with "float"): one float8 rounding was
    # a fault 2**20 times over
    assert unit_roundoff("torch.float8_e4m3fn") == unit_roundoff("torch.float8_e4m3fnuz") == 2.0**-4
    assert unit_roundoff("torch.float8_e5m2") == unit_roundoff("torch.float8_e5m2fnuz") == 2.0**-3
    assert unit_roundoff("torch.float8_e8m0fnu") == 2.0**-1 and unit_roundoff("torch.uint16") == 0
    assert trim_count(8) == 0 and trim_count(64) == 4 and trim_count(1 << 20) == 8 + 1024


def test_a_few_wrong_elements_of_a_continuous_op_are_a_fault(calls):
    x = RNG.standard_normal(4096).astype(np.float32)
    y = np.tanh(x)
    bad = y.copy()
    bad[-5:] = 0  # the last partial tile left unwritten
    calls.call("Torch_tanh", 0, "forward", [(_noisy(x), x)], [(bad, y)])
    assert calls.row("Torch_tanh_0_forward_output.0").result.errors.robust < 1e-6  # trimming would hide it
    assert calls.suspects() == [("Torch_tanh_0_forward", GROWTH)]


def test_a_product_whose_terms_cancel_may_amplify_its_inputs_error(calls):
    # w nearly orthogonal to every row of a: each output sums 64 terms that cancel to ~1e-3 of their size
    a = RNG.standard_normal((16, 64))
    w = RNG.standard_normal((64, 8))
    w = (w - a.T @ np.linalg.solve(a @ a.T, a @ w) + 1e-3 * w).astype(np.float32)
    a = a.astype(np.float32)
    an = _noisy(a)
    y, yn = a @ w, an @ w
    calls.call("Torch_matmul", 0, "forward", [(an, a), (w, w)], [(yn, y)])
    growth = calls.row("Torch_matmul_0_forward_output.0").result.errors.rel / 1e-6
    assert growth > 100 and calls.suspects() == []  # the noise grew a hundredfold, honestly
    calls.call("Torch_matmul", 1, "forward", [(an, a), (w, w)], [(yn * 1.05, y)])
    assert calls.suspects() == [("Torch_matmul_1_forward", GROWTH)]


def test_a_relu_or_clamp_that_leaves_a_few_elements_wrong_is_a_fault(calls):
    """relu and clamp move no more than their input: a few wrong elements are no flip, whatever the
    robust error (which leaves them out) says."""
    x = RNG.standard_normal(1040).astype(np.float32)
    xn = _noisy(x)
    y = np.maximum(xn, 0)
    y[-6:] = xn[-6:]  # the last partial tile never processed
    calls.call("Functional_relu", 0, "forward", [(xn, x)], [(y, np.maximum(x, 0))])
    assert calls.row("Functional_relu_0_forward_output.0").result.errors.robust < 1e-5
    z = (3 * RNG.standard_normal(320)).astype(np.float32)
    z[:2] = [-6.5, -7.0]
    zn = _noisy(z)
    # the NPU clamp ignores its lower bound
    calls.call("Torch_clamp", 0, "forward", [(zn, z)], [(np.minimum(zn, 5), np.clip(z, -5, 5))])
    assert calls.suspects() == [("Functional_relu_0_forward", GROWTH), ("Torch_clamp_0_forward", GROWTH)]


def test_values_sitting_exactly_at_a_relu_threshold_may_flip_by_half(calls):
    """Centred features that are constant over the batch are exactly 0 on the bench and ±1e-7 on the
    NPU: half of them flip the ReLU's gradient mask, whatever the input's relative error."""
    x = RNG.standard_normal((64, 32)).astype(np.float32)
    x[:, :4] = 0.0
    xn = _noisy(x)
    xn[:, :4] = (1e-7 * RNG.standard_normal((64, 4))).astype(np.float32)
    g = RNG.standard_normal((64, 32)).astype(np.float32)
    calls.call("Functional_relu", 0, "forward", [(xn, x)], [(np.maximum(xn, 0), np.maximum(x, 0))])
    calls.call("Functional_relu", 0, "backward", [(g, g)], [(g * (xn > 0), g * (x > 0))])
    out = calls.row("Functional_relu_0_backward_output.0").result.errors
    assert out.robust > 0.1  # too many flips for the robust error to set aside
    assert calls.row("Functional_relu_0_forward_input.0").result.errors.sign_flips > 64
    assert calls.suspects() == []


def test_from_statistics_a_mask_that_flips_at_the_threshold_moves_mean_and_norm_not_extremes(calls):
    """The same flips seen through statistics alone, whose flip count is unknown: the gradient's mean
    and norm move by ~2% (elements switch between the incoming gradient and 0), its max and min do
    not; a gradient routed wrongly moves its extremes too and is named."""
    x = RNG.standard_normal((64, 32)).astype(np.float32)
    x[:, :4] = 0.0
    xn = _noisy(x)
    xn[:, :4] = (1e-7 * RNG.standard_normal((64, 4))).astype(np.float32)
    g = RNG.standard_normal((64, 32)).astype(np.float32)
    g[:, :4] *= 0.5  # the flipped elements' gradient is not the largest
    relu = [(np.maximum(xn, 0), np.maximum(x, 0))]
    calls.call("Functional_relu", 0, "forward", [(xn, x)], relu, summary=True)
    calls.call("Functional_relu", 0, "backward", [(g, g)], [(g * (xn > 0), g * (x > 0))], summary=True)
    out = calls.row("Functional_relu_0_backward_output.0").result.errors
    assert out.from_stats and out.rel > 0.01 and out.robust < 1e-6
    assert calls.suspects() == []
    wrong = np.roll(g * (x > 0), 1, axis=0) * 1.5  # a fault: other elements, scaled
    calls.call("Functional_relu", 1, "forward", [(xn, x)], relu, summary=True)
    calls.call("Functional_relu", 1, "backward", [(g, g)], [(wrong, g * (x > 0))], summary=True)
    assert calls.suspects() == [("Functional_relu_1_backward", GROWTH)]


def test_error_that_enters_between_dumped_calls_is_named_at_the_call_it_reaches(calls):
    """A module-level dump, or a fault in code no hook sees: the activation a call takes carries far
    more error than anything dumped before it. A few times more (what undumped honest steps do) is
    not a fault."""
    x = RNG.standard_normal(4096).astype(np.float32)
    y = np.tanh(x)
    yn = _noisy(y)
    calls.call("Module_conv", 0, "forward", [(_noisy(x), x)], [(yn, y)])
    grown = _noisy(y, rel=5e-6)  # undumped steps made the noise grow fivefold
    calls.call("Module_norm", 0, "forward", [(grown, y)], [(np.tanh(grown), np.tanh(y))])
    assert calls.suspects() == []
    wrong = (1.01 * y).astype(np.float32)  # a 1% fault between the dumped calls
    calls.call("Module_head", 0, "forward", [(wrong, y)], [(np.tanh(wrong), np.tanh(y))])
    (suspect,) = diagnose(calls.rows).suspects
    assert (suspect.call, suspect.kind) == ("Module_head_0_forward", ENTERS)
    assert "after Module_norm_0_forward" in evidence_text(suspect.evidence)


def test_statistics_see_a_new_inf_though_the_bench_mean_overflows(record):
    """Masked scores filled with finfo.min: the bench's mean and norm overflow, its max and min do not;
    the NPU's -inf minimum is a new non-finite value all the same."""
    big = float(np.finfo(np.float32).min)
    name = "Tensor_masked_fill_0_forward_output"
    bench = record(name, shape=[4, 148], stats=[0.89, big, -math.inf, math.inf])
    npu = record(name, shape=[4, 148], stats=[0.89, -math.inf, -math.inf, math.inf])
    assert stats_errors(npu, bench).new_nonfinite == 1
    assert stats_errors(bench, bench).new_nonfinite == 0


def test_a_gradient_that_no_dumped_backward_explains_entered_between_them(calls):
    """An op no hook sees (msprobe does not hook _VF.lstm on CPU) gets its gradient wrong: the next
    dumped backward call's incoming gradient carries error no dumped gradient before it had."""
    x = RNG.standard_normal(2048).astype(np.float32)
    y = np.tanh(x)
    calls.call("Torch_tanh", 0, "forward", [(_noisy(x), x)], [(_noisy(y), y)])
    calls.call("Torch_exp", 0, "forward", [(_noisy(y), y)], [(_noisy(np.exp(y)), np.exp(y))])
    g = RNG.standard_normal(2048).astype(np.float32)
    gx = (g * np.exp(y)).astype(np.float32)
    calls.call("Torch_exp", 0, "backward", [(_noisy(g), g)], [(_noisy(gx), gx)])
    wrong = (1.3 * gx).astype(np.float32)  # the undumped op between them
    calls.call("Torch_tanh", 0, "backward", [(wrong, gx)], [(wrong * (1 - y**2), gx * (1 - y**2))])
    (suspect,) = diagnose(calls.rows).suspects
    assert (suspect.call, suspect.kind, suspect.direction) == ("Torch_tanh_0_backward", ENTERS, "backward")
    assert "after Torch_exp_0_backward" in evidence_text(suspect.evidence)


def test_from_statistics_error_entering_between_calls_needs_a_far_larger_jump(calls):
    """Statistics may show one tensor's error and hide an earlier one's: only a jump far beyond
    the tensor margin names where the error entered."""
    x = RNG.standard_normal(4096).astype(np.float32)
    y = np.tanh(x)
    calls.call("Module_conv", 0, "forward", [(_noisy(x), x)], [(_noisy(y), y)], summary=True)
    shifted = (y + 3e-4).astype(np.float32)  # ~1e3 times the noise: enough for tensors, not statistics
    calls.call("Module_norm", 0, "forward", [(shifted, y)], [(np.tanh(shifted), np.tanh(y))], summary=True)
    assert calls.suspects() == []
    wrong = (1.3 * y).astype(np.float32)
    calls.call("Module_head", 0, "forward", [(wrong, y)], [(np.tanh(wrong), np.tanh(y))], summary=True)
    assert calls.suspects() == [("Module_head_0_forward", ENTERS)]


def _adam_update(calls, npu_grad: np.ndarray, bench_grad: np.ndarray, step: float, value: float = -1e-2):
    """Adam's first update ``p + value·m/(|g| + ε)`` (m = 0.1·g), each side from its own gradient; the
    NPU's step ``step`` times its own."""
    p = (0.1 * RNG.standard_normal(npu_grad.size)).astype(np.float32)  # a bias as nn.Linear starts it
    sides = []
    for g, k in ((npu_grad, step), (bench_grad, 1.0)):
        m, d = (0.1 * g).astype(np.float32), (np.abs(g) + 1e-8).astype(np.float32)
        sides.append((m, d, (p + k * value * m / d).astype(np.float32)))
    (mn, dn, on), (mb, db, ob) = sides
    calls.call("Tensor_addcdiv_", 0, "forward", [(p, p), (mn, mb), (dn, db)], [(on, ob)])
    calls.scalar("Tensor_addcdiv__0_forward_input.3", value, value)


def test_an_adaptive_update_of_gradient_noise_is_no_fault(calls):
    """A third of the gradient is zero in exact arithmetic (an attention key's bias): each run holds
    its own rounding noise there, ~5e-11 with random signs, which Adam's m/(|g| + ε) turns into steps
    ~5e-3·lr apart, beyond the 1.6e-5 of the parameter that its rounding allows (a culprit before the
    rule)."""
    g = (1e-4 * RNG.standard_normal(96)).astype(np.float32)
    gn, gb = _noisy(g, 1e-7), g.copy()
    gn[32:64], gb[32:64] = (5e-11 * RNG.standard_normal((2, 32))).astype(np.float32)
    _adam_update(calls, gn, gb, 1.0)
    d = diagnose(calls.rows)
    assert d.suspects == [], verdict_text(d)
    assert note_texts(d) and note_texts(d)[0].startswith("Tensor_addcdiv__0_forward: its update leaves"), (
        note_texts(d)
    )
    assert "elements change sign" in note_texts(d)[0] and "no kernel is at fault" in note_texts(d)[0]


def test_an_adaptive_update_two_percent_off_is_named(calls):
    """Without noise in its gradient, an update whose step is 2% too large is still the culprit."""
    g = (1e-4 * RNG.standard_normal(3072)).astype(np.float32)
    _adam_update(calls, _noisy(g, 1e-7), g, 1.02)
    assert calls.suspects() == [("Tensor_addcdiv__0_forward", GROWTH)]
