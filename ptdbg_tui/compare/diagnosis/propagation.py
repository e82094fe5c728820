"""Does one call introduce error? Its outputs' error against what its inputs carry, what the op may
amplify, and the dtype's rounding floor — local error, not cumulative.

For one output ``y`` of a call, with inputs ``x_i`` (relative errors ``e_i``, unit roundoffs ``u_i``):

* errors that scale with the data pass through an honest op at about their relative size, times what
  the op may amplify (``κ``: 1 for most ops; the magnitude of the argument for exp and softmax, the
  exponent for pow …), and the op itself may round its output (``ROUNDINGS · u_y``) and accumulate in
  another order in fp32 (``ACCUMULATION · u_fp32``, or fp64's for fp64 data):
  ``κ · max e_i`` and ``ROUNDINGS · u_y + ACCUMULATION · min(u_y, u_fp32)``; a reduction along an
  axis (sum, mean, cumsum) accumulates in fp32 and rounds each result once, however long the axis,
  so it may round ``ONE_ROUNDING · u_y`` only: a kernel that keeps its running sum in fp16 is not
  rounding;
* an op whose output is small against inputs of the same kind (terms that cancel: a difference of
  near-equal values, a normalisation, a sum over values of both signs, a gradient that is zero in
  theory) turns the inputs' *absolute* error, and the rounding at the inputs' scale, into a large
  relative error of its output: ``(e_i + u_i) · ‖x_i‖``, the input's size spread over the output's
  elements when it is broadcast. For a backward call the inputs of the same kind are the incoming
  gradients; its saved forward tensors count in ``max e_i`` only.
* an op whose result jumps where an argument crosses a threshold (a ReLU's gradient mask, a sign, a
  ``where``) flips about a fraction ``e`` of its elements for an argument error ``e`` — or, measured,
  the fraction whose sign differs, when values sit exactly at 0: ``√(2e)``. A threshold op whose
  forward result does not jump (relu, clamp, max: they move no more than their arguments) flips
  nothing that its inputs' absolute error does not already cover.

The call introduces error when an output's error exceeds ``MARGIN`` times that allowance. Errors are
measured over positions finite on both sides; a jumping op's output with the robust variant (a
handful of elements flipped at a ReLU mask or a sign is no fault), any other op's whole (a continuous
op cannot flip, so a few wrong elements there are a fault: a mishandled last tile, a bound ignored).
A call whose outputs gain NaN/Inf from finite inputs is the NaN origin, whatever the magnitudes; one
whose bench outputs do (the NPU's finite) is the bench's NaN origin: from there on the bench is no
reference, and a call whose bench inputs hold NaN/Inf where the NPU's are finite is not judged.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from operator import attrgetter
from typing import NamedTuple

from ptdbg_tui.compare.diagnosis.kinds import Kind
from ptdbg_tui.compare.model import ErrorMeasures
from ptdbg_tui.compare.ops import op_name
from ptdbg_tui.formats.frozen import quick_frozen
from ptdbg_tui.formats.records import TensorRecord

#: An output may carry this many times the error its inputs and its own rounding explain.
MARGIN = 4.0
#: Statistics-only dumps: the error estimated from one max or min element (a single draw of the noise)
#: or from a mean or norm (which average it away) scatters by this factor either way.
STATS_SCATTER = 2.0
#: Roundings of its output's dtype an op may add on its own: one to store its result, one more for a
#: composite op or another libm. (A rounding leaves a relative RMS error of about u/√3.)
ROUNDINGS = 2.0
#: Roundings of fp32 an op may add by accumulating in another order (a reduction over k terms in fp32
#: accumulators differs by about √k of them: k up to 4,096 here).
ACCUMULATION = 64.0
U_FP32 = 2.0**-24
#: The relative RMS error one rounding leaves (u/√3; a single element's, at most u, stays within
#: ``MARGIN`` of it).
ONE_ROUNDING = 1 / math.sqrt(3)
#: Reductions along an axis (by :func:`op_name`), in either direction (their gradients expand, scale or
#: sum in reverse): an honest kernel accumulates in fp32 (fp64's for fp64 data) and rounds each result
#: once, whatever the axis' length, so their own rounding is one, not ``ROUNDINGS``. A kernel that keeps
#: its running sum in fp16 leaves an error growing with the axis: a 1024-long fp16 cumsum's was 5 u_fp16
#: (3.6e-3), within the 8 u that ``MARGIN · ROUNDINGS`` allowed, and a later call was blamed for it.
REDUCTIONS = frozenset({"sum", "nansum", "mean", "nanmean", "cumsum"})
#: Ops whose outputs are some of their input's elements (a split's chunks, a slice, a gather): they round
#: nothing, yet a part may carry more error than the whole, against its own size (the key bias's noise in
#: a qkv split's key chunk). What they pass on is any error dumped before them.
SELECTIONS = frozenset(
    {
        "split",
        "chunk",
        "tensor_split",
        "split_with_sizes",
        "unbind",
        "narrow",
        "select",
        "getitem",
        "index_select",
        "gather",
        "take",
        "take_along_dim",
        "masked_select",
        "diagonal",
    }
)

GROWTH = Kind.GROWTH
NAN_ORIGIN = Kind.NAN_ORIGIN
BENCH_NAN = Kind.BENCH_NAN
ZEROS = Kind.ZEROS
ENTERS = Kind.ENTERS
LEAN = Kind.LEAN
SUMS = Kind.SUMS
#: An activation that carries this many times more error than every tensor dumped before it (and its
#: dtype's rounding) got it outside the dumped calls. Larger than ``MARGIN``: what an undumped honest
#: step may do there (slice out the part where the error sits, subtract near-equal values) is not
#: measured.
ENTRY_MARGIN = MARGIN * MARGIN


@quick_frozen
class Operand:
    """One tensor of a call as the rule sees it."""

    errors: ErrorMeasures
    same_kind: bool = True  # may add to the output (an input of a forward call, an incoming gradient)
    bench: TensorRecord | None = None  # its bench record (statistics), when there is one
    npu: TensorRecord | None = None  # its NPU record

    @property
    def path(self) -> tuple[int | str, ...]:
        """Its argument path (``(1,)`` for the second argument)."""
        entry = self.bench.entry if self.bench is not None else None
        return entry.path if entry is not None else ()

    @property
    def offset_lean(self) -> float:
        """How far the NPU tensor's mean sits from the bench's, relative to the bench's RMS (0 unknown)."""
        e = self.errors
        if self.npu is None or self.bench is None or e.numel <= 0 or e.bench_norm <= 0:
            return 0.0
        m_n, m_b = self.npu.stat(2), self.bench.stat(2)
        if m_n is None or m_b is None or not (math.isfinite(m_n) and math.isfinite(m_b)):
            return 0.0
        return (m_n - m_b) / (e.bench_norm / math.sqrt(e.numel))

    @property
    def magnitude(self) -> float | None:
        """The largest |value| of the bench tensor, when recorded."""
        if self.bench is None:
            return None
        values = (self.bench.stat(0), self.bench.stat(1))
        return max((abs(v) for v in values if v is not None and math.isfinite(v)), default=None)


@quick_frozen
class Judgement:
    """The rule's answer for one call."""

    input_error: float  # the largest relative error among the inputs
    output_error: float  # the relative error of the output judged (the worst one)
    allowed: float  # the relative error that output may carry (the margin included)
    score: float  # output error / allowed (> 1: the call introduces error)
    kind: Kind | None  # GROWTH, NAN_ORIGIN, ZEROS … when the call introduces error; BENCH_NAN for the bench
    output: str  # name of the output judged
    partial: bool = False  # some inputs were not compared
    #: why ``input_error`` is infinite: "nan" (NaN/Inf came in), "bench_nan" (NaN/Inf came in on the bench
    #: only), "zeros" (bench of zeros)
    input_why: str = ""
    lean: float = 0.0  # a one-sided output: how far its norm leans beyond its input's (LEAN kind)
    #: an output's shapes (NPU, bench), where they differ (the shape kind)
    shapes: tuple[tuple[int, ...], tuple[int, ...]] | None = None
    #: the share of ``allowed`` that an update's quotient may carry (:func:`quotient_error`: an adaptive
    #: optimizer's steps made of gradient elements that are rounding noise on both sides), where the call
    #: is within its allowance; 0 otherwise
    amplified: float = 0.0


class _Worst(NamedTuple):
    """The output a judgement rests on: the one furthest beyond what it may carry."""

    score: float
    error: float
    allowed: float  # the margin included
    output: str
    errors: ErrorMeasures
    amplified: float = 0.0  # the quotient's share of ``allowed``


#: Ops that add a quotient of two arguments to their first, by their positions: ``addcdiv(p, a, b,
#: value=c)`` is ``p + c·a/b``, the update of every adaptive optimizer (Adam's and AdamW's ``m/(√v+ε)``,
#: Adagrad's, RMSprop's, Adamax's).
QUOTIENTS = {"addcdiv": ((1,), (2,))}


def _smallest_magnitude(o: Operand) -> float | None:
    """The smallest |value| of a tensor of one sign on both sides (its records' max and min); ``None``
    where a side's changes sign, holds a zero or has no statistics."""
    least = math.inf
    for rec in (o.npu, o.bench):
        top, bottom = (rec.stat(0), rec.stat(1)) if rec is not None else (None, None)
        if top is None or bottom is None or not (math.isfinite(top) and math.isfinite(bottom)):
            return None
        if bottom <= 0 <= top:
            return None
        least = min(least, abs(bottom) if bottom > 0 else abs(top))
    return least


def quotient_error(op: str, inputs: Sequence[Operand], value: float | None) -> float:
    """The absolute error the quotient ``c·a/b`` of a :data:`QUOTIENTS` op may carry from its arguments:
    ``2·|c|·‖Δa‖ / min|b|``. Elementwise, ``Δ(a/b) = Δa/b − (a/b)·Δb/b``: the numerator's absolute error
    divided by the denominator, however small the numerator's relative error is over the whole tensor.
    Where ``b`` is the root of ``a``'s running square (Adam's ``√v``), an element of ``a`` that is rounding
    noise on both sides (a gradient exactly zero in exact arithmetic, like an attention key's bias: softmax
    is shift-invariant per query) becomes a step of full size with a random sign, and ``b``'s error
    follows ``a``'s: the factor 2. 0 where ``c`` is unknown, or ``b`` is not of one sign on both sides."""
    at = QUOTIENTS.get(op_name(op))
    if at is None or value is None or not math.isfinite(value):
        return 0.0
    args = {o.path: o for o in inputs}
    a, b = args.get(at[0]), args.get(at[1])
    if a is None or b is None or a.errors.exact or not math.isfinite(a.errors.abs_err):
        return 0.0
    least = _smallest_magnitude(b)
    return 2 * abs(value) * a.errors.abs_err / least if least else 0.0


#: Ops whose output carries the absolute error of their argument as relative error (exp(x + δ) =
#: exp(x)·(1 + δ)), and whose gradient evaluates the exponential again from the saved *input*: κ is
#: the argument's magnitude, in both directions.
EXPONENTIAL_BACKWARD = frozenset(
    {
        "cross_entropy",
        "binary_cross_entropy_with_logits",
        "logsumexp",
        "logsigmoid",
        "softplus",
        "pow",
        "float_power",
        "elu",
        "selu",
        "celu",
        "cosh",
        "sinh",
        "tan",
        "erfinv",
    }
)
#: Every op whose output amplifies so: those, and the ones whose gradients use their saved output,
#: whose error was measured (softmax: y·(g − Σg·y)), so their backward amplifies nothing more.
EXPONENTIAL = EXPONENTIAL_BACKWARD | {"exp", "exp2", "expm1", "softmax", "softmin", "log_softmax", "sigmoid"}


#: Ops that take the larger or smaller of values, or a bound.
_BOUNDS = ("max", "min", "amax", "amin", "maximum", "minimum", "clamp", "clip", "clamp_min", "clamp_max")
_MAX_POOLS = (
    "max_pool1d",
    "max_pool2d",
    "max_pool3d",
    "adaptive_max_pool1d",
    "adaptive_max_pool2d",
    "adaptive_max_pool3d",
    "max_pool1d_with_indices",
    "max_pool2d_with_indices",
    "max_pool3d_with_indices",
    "fractional_max_pool2d",
)
#: Ops whose result jumps where an argument crosses a threshold (a ReLU's gradient mask, the element a max
#: picks, a rounding step): an error ``e`` in that argument flips a fraction of about ``e`` of the elements,
#: each by its whole size, so the output may carry a relative error of about ``√(2e)`` — more than any
#: margin on ``e`` — with no fault at all.
DISCONTINUOUS = frozenset(
    {
        "relu",
        "relu6",
        "leaky_relu",
        "rrelu",
        "prelu",
        "hardtanh",
        "threshold",
        "hardsigmoid",
        "hardswish",
        "elu",
        *_MAX_POOLS,
        *_BOUNDS,
        "where",
        "masked_fill",
        "abs",
        "sign",
        "sgn",
        "floor",
        "ceil",
        "round",
        "trunc",
        "frac",
        "sort",
        "topk",
        "kthvalue",
        "median",
        "nanmedian",
        "mode",
        "cummax",
        "cummin",
        "heaviside",
        "gt",
        "lt",
        "ge",
        "le",
        "eq",
        "ne",
        "greater",
        "less",
        "greater_equal",
        "less_equal",
    }
)


#: Of those, the ops whose forward result moves at most ``L`` times as far as their arguments do
#: (|relu(a) − relu(b)| ≤ |a − b|; a max or a sort picks another element only where the two are within
#: the error of each other): their forward output's absolute error is bounded by their inputs', flips
#: included, so it is judged whole — a few wrong elements there are a fault (a tile left out, a bound
#: ignored), not rounding. ``L``: √2 where two arguments compete elementwise (maximum, a clamp by a
#: tensor); 3 for a max pool, whose overlapping windows (3×3, stride 1) may pick the same element;
#: hardswish's steepest slope 1.5. Their gradients do jump: a backward call keeps the flip allowance.
LIPSCHITZ = {
    **dict.fromkeys(
        (
            "relu",
            "relu6",
            "leaky_relu",
            "hardtanh",
            "hardsigmoid",
            "elu",
            "abs",
            "sort",
            "topk",
            "kthvalue",
            "median",
            "nanmedian",
        ),
        1.0,
    ),
    **dict.fromkeys((*_BOUNDS, "hardswish"), 1.5),
    **dict.fromkeys(_MAX_POOLS, 3.0),
}


def flip_allowance(op: str, flipped: float) -> float:
    """The relative error a threshold op may show when a fraction ``flipped`` of its elements flip (0 for
    other ops, and a tiny positive value for a threshold op with exact inputs: its output is then judged
    robustly)."""
    return math.sqrt(2 * flipped) or math.ulp(0) if op_name(op) in DISCONTINUOUS else 0.0


def flip_fraction(e_in: float, inputs: Sequence[Operand], backward: bool) -> float:
    """The fraction of elements a threshold may flip: its arguments' largest relative error ``e_in``
    (values spread smoothly around a threshold: about that fraction lie within the error of it), or
    the measured fraction of elements positive on one side only, whichever is larger (values that sit
    exactly at a threshold of 0 — a ReLU after a cancellation to exact zeros — flip by half whatever
    ``e_in``). For a backward call the threshold is applied to its saved forward tensors, not to the
    incoming gradients."""
    out = e_in
    for o in inputs:
        e = o.errors
        if e.numel > 0 and not (backward and o.same_kind):
            out = max(out, e.sign_flips / e.numel)
    return out


def amplification(op: str, inputs: Sequence[Operand], backward: bool = False) -> float:
    """κ: how much the op (``softmax``, ``exp_`` …) may amplify its inputs' relative error (1 for most)."""
    if op_name(op) not in (EXPONENTIAL_BACKWARD if backward else EXPONENTIAL):
        return 1.0
    sizes = [o.magnitude for o in inputs if o.magnitude is not None and math.isfinite(o.magnitude)]
    return max([1.0, *sizes])


def _scale(x: ErrorMeasures, y: ErrorMeasures) -> float:
    """The size of input ``x`` as seen by output ``y``: its norm, or spread over ``y``'s elements when
    ``y`` is larger (a broadcast bias adds its error to every element it reaches)."""
    if x.numel <= 0:
        return x.bench_norm
    return max(x.bench_norm, x.bench_norm / math.sqrt(x.numel) * math.sqrt(max(y.numel, 1)))


def own_rounding(y: ErrorMeasures, op: str = "") -> float:
    """The relative error an honest op may leave in ``y`` on its own: ``ROUNDINGS`` of its dtype (one
    for a :data:`REDUCTIONS` op), and ``ACCUMULATION`` of fp32 (fp64's for fp64 data) from another order
    of summation."""
    roundings = ONE_ROUNDING if op and _rules(op).reduction else ROUNDINGS
    return roundings * y.floor + ACCUMULATION * min(y.floor, U_FP32)


def judge_output(
    y: ErrorMeasures, e_in: float, additive: float, kappa: float, flips: float = 0.0, op: str = ""
) -> tuple[float, float]:
    """``(output error, allowed relative error)`` of one output, from the inputs' largest relative error,
    their absolute error as it may add to this output (``additive``), κ and :func:`flip_allowance`."""
    relative = max(kappa * e_in, own_rounding(y, op), flips)
    if y.bench_norm > 0:
        return (y.robust if flips else y.rel), relative + additive / y.bench_norm
    # a bench of zeros: judge the NPU's size against what the inputs could have left
    return (math.inf if y.npu_norm > 0 else 0.0), (math.inf if additive > 0 else 0.0)


#: Products whose output element sums ``k`` products of their two arguments (input 0 and 1), by how ``k``
#: follows from the shapes: ``last`` (linear, matmul: the first argument's last dimension), ``kernel``
#: (conv: the weight's elements per output channel), ``one`` (an elementwise product). Only their bias
#: (input 2) adds to the output.
CONTRACTIONS = {
    "linear": "last",
    "matmul": "last",
    "mm": "last",
    "bmm": "last",
    "conv1d": "kernel",
    "conv2d": "kernel",
    "conv3d": "kernel",
    "mul": "one",
    "multiply": "one",
}
_BIAS = (2,)


def _rms(e: ErrorMeasures) -> float:
    return e.bench_norm / math.sqrt(e.numel) if e.numel > 0 else 0.0


def contraction_kappa(kind: str, inputs: Sequence[Operand], y: ErrorMeasures) -> float | None:
    """κ of a product from the data: ``rms(a)·rms(b)·√k / rms(y)`` — 1 when the ``k`` terms of an output
    element add up like independent ones, more when they cancel. ``None`` when the arguments are not
    both there."""
    args = {o.path: o for o in inputs if o.path in ((0,), (1,))}
    a, b = args.get((0,)), args.get((1,))
    rms_y = _rms(y)
    if a is None or b is None or rms_y <= 0:
        return None
    k = 1
    if kind == "last" and a.bench is not None and a.bench.shape:
        k = a.bench.shape[-1]
    elif kind == "kernel" and b.bench is not None:
        k = math.prod(b.bench.shape[1:])
    return _rms(a.errors) * _rms(b.errors) * math.sqrt(k) / rms_y


def _additive(inputs: Sequence[Operand], y: ErrorMeasures) -> float:
    """The absolute error the same-kind inputs may add to ``y``, rounding at their scale included."""
    out = 0.0
    for o in inputs:
        if o.same_kind:
            x = o.errors
            out = max(out, (x.rel + x.floor) * _scale(x, y))
    return out


#: Smooth elementwise ops whose honest kernel rounds each result once, without bias: a low-precision
#: result whose norm leans one way beyond its input's is a one-sided kernel error (a unit of rounding in
#: size, but not random). Threshold ops (relu …) are not here: their masks move norms without a fault.
ELEMENTWISE = frozenset(
    {
        "gelu",
        "silu",
        "swish",
        "sigmoid",
        "tanh",
        "exp",
        "softplus",
        "mish",
        "selu",
        "celu",
        "logsigmoid",
        "erf",
        "sqrt",
        "rsqrt",
        "reciprocal",
    }
)
#: The lean test is for half precision (fp16, bf16), where one unit of rounding is large enough to matter.
LEAN_DTYPE_FLOOR = 2.0**-11
#: What rounding leaves of a result's norm lean, as a fraction of one element's rounding (it averages
#: out over the elements; kernels of one precision may still share a small lean).
LEAN_FLOOR = 1 / 16


def _rounding_lean(e: ErrorMeasures) -> float:
    """The most that unbiased rounding leans a tensor's norm or mean (relative), over its elements."""
    return MARGIN * own_rounding(e) * max(1 / math.sqrt(max(e.numel, 1)), LEAN_FLOOR)


def _stats_lean(y: ErrorMeasures, npu: float, bench: float) -> float:
    """What a lean of ``npu`` (a norm or mean of ``y``'s NPU tensor) against ``bench`` may be without a
    fault: :func:`_rounding_lean`, and from statistics ``STATS_SCATTER`` times that, plus two roundings of
    ``y``'s dtype where both figures lie on its grid (a dumper that reduces a bf16 tensor in bf16 records
    its norm to 0.4%, and ours in float64 never lands on bf16's grid by chance)."""
    if not y.from_stats:
        return _rounding_lean(y)
    recorded = 2 * y.floor if _on_grid(npu, y.floor) and _on_grid(bench, y.floor) else 0.0
    return STATS_SCATTER * _rounding_lean(y) + recorded


def _on_grid(v: float, unit: float) -> bool:
    """``v`` is a finite number of the floating-point type whose unit roundoff is ``unit`` (its
    significand holds no more bits than that type's). A dump's NaN or Inf norm is on no grid."""
    if not math.isfinite(v):
        return False
    significand = math.frexp(v)[0] / unit
    return significand == int(significand)


def _norm_lean(e: ErrorMeasures) -> float:
    """How far the NPU tensor's norm leans from the bench's (relative)."""
    return e.npu_norm / e.bench_norm - 1 if e.bench_norm > 0 and math.isfinite(e.npu_norm) else 0.0


def judge_lean(outputs: Sequence[tuple[str, ErrorMeasures]], inputs: Sequence[Operand]) -> Judgement | None:
    """An elementwise forward call whose results lean one way beyond the lean its input brings and
    beyond what unbiased rounding allows (:data:`ELEMENTWISE`); ``None`` when none does."""
    if any(abs(o.offset_lean) > _rounding_lean(o.errors) for o in inputs if not o.errors.exact):
        return None  # an input already leans (a kernel before it): its lean is inherited, not judged here
    same = [o for o in inputs if o.same_kind and not o.errors.exact]
    lean_in = max((_norm_lean(o.errors) for o in same), key=abs, default=0.0)
    worst: Judgement | None = None
    for name, y in outputs:
        if y.exact or y.numel < 64 or y.floor < LEAN_DTYPE_FLOOR:
            continue
        lean = _norm_lean(y)
        # an input's lean passes through about as it came (more or less, by the op's curvature)
        allowed = _stats_lean(y, y.npu_norm, y.bench_norm) + MARGIN * abs(lean_in) / 2
        score = _score(abs(lean - lean_in), allowed)
        if score > 1 and (worst is None or score > worst.score):
            worst = Judgement(abs(lean_in), y.rel, allowed, score, LEAN, name, lean=lean)
    return worst


#: Ops whose output rows each sum to one whatever their input: an honest kernel's output mean is
#: 1/(the size of its dim) up to unbiased rounding, so a mean that departs from the bench's beyond that is
#: the kernel's own error, however much error its inputs carry (a 1% bf16 softmax fault is within a bf16
#: call's allowance of 8 units of rounding; its mean, which statistics record too, shows it).
NORMALISED = frozenset({"softmax", "softmin"})


def judge_sums(
    outputs: Sequence[tuple[str, ErrorMeasures]], means: Mapping[str, tuple[float, float]]
) -> Judgement | None:
    """A :data:`NORMALISED` forward call whose half-precision outputs' mean (``means``: NPU's, bench's, by
    output) leans beyond what unbiased rounding allows; ``None`` when none does."""
    worst: Judgement | None = None
    for name, y in outputs:
        n, b = means.get(name, (math.nan, math.nan))
        if y.exact or y.floor < LEAN_DTYPE_FLOOR or not (math.isfinite(n) and b > 0 and math.isfinite(b)):
            continue
        lean = n / b - 1
        allowed = _stats_lean(y, n, b)
        score = _score(abs(lean), allowed)
        if score > 1 and (worst is None or score > worst.score):
            worst = Judgement(0.0, y.rel, allowed, score, SUMS, name, lean=lean)
    return worst


#: The NaN/Inf an output holds that its inputs did not, by kind: the NPU's, then the bench's.
_NONFINITE_ORIGINS = ((NAN_ORIGIN, attrgetter("new_nonfinite")), (BENCH_NAN, attrgetter("lost_nonfinite")))


def inherited_error(inputs: Sequence[Operand], inherited: float) -> float:
    """The least error an input estimated from statistics carries when it differs at all: one rounding of
    the coarsest dtype any differing tensor dumped before it holds (``inherited``). Its rounding reaches
    every tensor after it, whatever their dtype, and statistics show it too small: under bf16 autocast an
    fp32 gradient that a bf16 linear made carried 0.0021 (0.55 of bf16's unit), its statistics 6.3e-05,
    and the layer_norm backward that summed it into its bias' gradient was named in a run with no fault."""
    differs = any(o.errors.from_stats and o.errors.rel > 0 and not o.errors.exact for o in inputs)
    return ONE_ROUNDING * inherited if differs else 0.0


def judge(
    outputs: Sequence[tuple[str, ErrorMeasures]],
    inputs: Sequence[Operand],
    op: str = "",
    partial: bool = False,
    backward: bool = False,
    gains: Mapping[str, float] | None = None,
    value: float | None = None,
    means: Mapping[str, tuple[float, float]] | None = None,
    inherited: float = 0.0,
) -> Judgement | None:
    """The verdict on one call from its compared outputs and inputs (``None`` without outputs).

    ``gains``: for a backward call, per output, the factor the op multiplies the incoming gradients by
    (softmax: its probabilities), at which their absolute error is weighed. ``value``: the factor of a
    :data:`QUOTIENTS` op's quotient (``addcdiv``'s ``value``), where it is known. ``means``: for a
    :data:`NORMALISED` op, its outputs' means (NPU's, bench's) by name. ``inherited``: the coarsest
    rounding (a dtype's floor) of any differing tensor dumped before (:func:`inherited_error`)."""
    if not outputs:
        return None
    e_in = 0.0
    nonfinite_in = bench_nonfinite_in = False
    for o in inputs:
        e_in = max(e_in, o.errors.rel)
        nonfinite_in = nonfinite_in or o.errors.new_nonfinite > 0
        bench_nonfinite_in = bench_nonfinite_in or o.errors.lost_nonfinite > 0
    if nonfinite_in or bench_nonfinite_in:  # NaN/Inf already came in: any output is explained (and its
        # error unmeasurable; a bench that holds NaN/Inf where the NPU does not is no reference)
        name, y = outputs[0]
        why = "nan" if nonfinite_in else BENCH_NAN
        return Judgement(math.inf, y.rel, math.inf, 0.0, None, name, partial, why)
    kind: str | None  # the finding's kind; None: none
    if any(y.new_nonfinite or y.lost_nonfinite for _, y in outputs):  # looked at only then: most calls
        for kind, count in _NONFINITE_ORIGINS:
            origin = [(name, y) for name, y in outputs if count(y)]
            if origin:  # the NPU's NaN origin, else the bench's
                name, y = max(origin, key=lambda item: count(item[1]))
                return Judgement(e_in, y.rel, 0.0, math.inf, kind, name, partial)
    e_in = max(e_in, inherited_error(inputs, inherited))
    quotient = 0.0 if backward else quotient_error(op, inputs, value)
    best = _worst_output(outputs, inputs, op, e_in, backward, gains, quotient)
    kind = (ZEROS if best.errors.npu_zero else GROWTH) if best.score > 1 else None
    why = "zeros" if math.isinf(e_in) else ""
    one_sided = None if kind is not None else _one_sided(outputs, inputs, op, means)
    if one_sided is not None:
        return one_sided
    amplified = best.amplified if kind is None else 0.0
    return Judgement(
        e_in, best.error, best.allowed, best.score, kind, best.output, partial, why, amplified=amplified
    )


def _one_sided(
    outputs: Sequence[tuple[str, ErrorMeasures]],
    inputs: Sequence[Operand],
    op: str,
    means: Mapping[str, tuple[float, float]] | None,
) -> Judgement | None:
    """A forward call within its allowance whose error is one-sided all the same: an elementwise op's
    lean, a softmax's rows off one."""
    if _rules(op).elementwise:
        return judge_lean(outputs, inputs)
    return judge_sums(outputs, means) if means else None


class _Rules(NamedTuple):
    """What the rules know of one op, looked up once per op name."""

    amplifies: tuple[bool, bool]  # (forward, backward): :func:`amplification` may exceed 1
    lipschitz: float | None  # :data:`LIPSCHITZ`
    jumps: bool  # :data:`DISCONTINUOUS`: :func:`flip_allowance` may exceed 0
    product: str | None  # :data:`CONTRACTIONS`
    elementwise: bool  # :data:`ELEMENTWISE`
    reduction: bool  # :data:`REDUCTIONS`


@functools.lru_cache(maxsize=4096)
def _rules(op: str) -> _Rules:
    name = op_name(op)
    return _Rules(
        (name in EXPONENTIAL, name in EXPONENTIAL_BACKWARD),
        LIPSCHITZ.get(name),
        name in DISCONTINUOUS,
        CONTRACTIONS.get(name),
        name in ELEMENTWISE,
        name in REDUCTIONS,
    )


def _worst_output(
    outputs: Sequence[tuple[str, ErrorMeasures]],
    inputs: Sequence[Operand],
    op: str,
    e_in: float,
    backward: bool,
    gains: Mapping[str, float] | None,
    quotient: float = 0.0,
) -> _Worst:
    """The output furthest beyond the error the op may leave in it, given its inputs' (``e_in``);
    ``quotient``: the absolute error a :data:`QUOTIENTS` op's quotient may add (:func:`quotient_error`)."""
    rules = _rules(op)
    kappa = amplification(op, inputs, backward) if rules.amplifies[backward] else 1.0
    lipschitz = None if backward else rules.lipschitz
    flips = 0.0 if lipschitz or not rules.jumps else flip_allowance(op, flip_fraction(e_in, inputs, backward))
    product = None if backward else rules.product
    best = _Worst(-1.0, 0.0, 0.0, outputs[0][0], outputs[0][1])
    for name, y in outputs:
        if y.exact:
            err, allowed = y.rel, (math.inf if e_in > 0 else 0.0)
        else:
            gain = gains.get(name, 1.0) if gains else 1.0
            k, adders = kappa, inputs
            cancel = contraction_kappa(product, inputs, y) if product else None
            if cancel is not None:  # a product: its arguments' errors pass scaled by κ; only the bias adds
                k, adders = max(kappa, cancel), [o for o in inputs if o.path == _BIAS]
            err, allowed = judge_output(
                y, e_in, _additive(adders, y) * gain * (lipschitz or 1.0), k, flips, op
            )
        scatter = STATS_SCATTER if y.from_stats else 1.0
        share = quotient / y.bench_norm * scatter * MARGIN if quotient and y.bench_norm > 0 else 0.0
        allowed *= scatter * MARGIN
        score = _score(err, allowed + share)
        if score > best.score:
            best = _Worst(score, err, allowed + share, name, y, share)
    return best


def selected(j: Judgement, before: float, from_stats: bool) -> Judgement:
    """A :data:`SELECTIONS` op's forward judgement, its outputs held to the largest error dumped before it
    (``before``) where that is more than its inputs' own allow: a part of a tensor may show error that
    the whole's measures dilute (from statistics, a qkv split's key chunk at ×1.0 of the rounding of a
    split, which rounds nothing, in a run with no fault). A wrong selection still stands out: its
    elements are other elements."""
    if j.kind != GROWTH:
        return j
    allowed = max(j.allowed, MARGIN * (STATS_SCATTER if from_stats else 1.0) * before)
    score = _score(j.output_error, allowed)
    return replace(j, allowed=allowed, score=score, kind=GROWTH if score > 1 else None)


def judge_entry(name: str, x: ErrorMeasures, before: float, after_unpaired: bool = False) -> Judgement | None:
    """Error that enters between dumped calls: ``x`` (an activation a forward call takes, an
    incoming gradient) against ``before``, the largest relative error of every tensor dumped before
    it in this direction. ``None`` unless it introduces error (the undumped code before the call — a
    dump at module level, a dump of a few APIs, a fault in code no hook sees). From statistics the
    margin is squared again: they may show one tensor's error and hide an earlier one's (an error
    spread over small elements moves no max, min or norm: seen 57× too low).

    ``after_unpaired``: calls only one run makes came just before, so where the error may enter is
    known and dumped: those calls, which the other run does without. They are held to a call's
    ``MARGIN``, not to the larger margin for code no hook sees (at a later step, the drift that
    earlier steps left in every activation hid an NPU-only ``x * 1.001`` under ``ENTRY_MARGIN``)."""
    if x.exact or x.new_nonfinite or x.lost_nonfinite or not math.isfinite(x.rel):
        return None
    margin = MARGIN if after_unpaired else ENTRY_MARGIN
    margin *= ENTRY_MARGIN if x.from_stats else 1.0
    allowed = margin * (before + own_rounding(x))
    score = _score(x.rel, allowed)
    return Judgement(before, x.rel, allowed, score, ENTERS, name) if score > 1 else None


def beyond_rounding(x: ErrorMeasures) -> tuple[float, float]:
    """``(allowed, score)`` of an error that only a call's own rounding may explain: ``MARGIN`` times
    :func:`own_rounding` (and ``STATS_SCATTER`` from statistics). A call only one run makes is held to
    it: the other run's tensor is as if an identity had left it."""
    allowed = MARGIN * own_rounding(x) * (STATS_SCATTER if x.from_stats else 1.0)
    return allowed, _score(x.rel, allowed)


def one_run_change(x: ErrorMeasures) -> tuple[float, float, float]:
    """``(change, allowed, score)`` of what calls only one run made did to a tensor the other run passes
    on unchanged (``x``: after against before, or against the other run's): :func:`beyond_rounding`, or
    in half precision its norm's lean, where that scores more: a rounding leans neither way, and a
    change of 1% that one run made (``y + 0.01 * tanh(y)``) is within bf16's allowance of 8 units."""
    allowed, score = beyond_rounding(x)
    if x.exact or x.floor < LEAN_DTYPE_FLOOR or x.numel < 64:
        return x.rel, allowed, score
    lean = abs(_norm_lean(x))
    lean_allowed = _stats_lean(x, x.npu_norm, x.bench_norm)
    lean_score = _score(lean, lean_allowed)
    return (lean, lean_allowed, lean_score) if lean_score > score else (x.rel, allowed, score)


def _score(err: float, allowed: float) -> float:
    """How many times the error exceeds what is allowed."""
    if err == 0 or math.isnan(err) or math.isinf(allowed):
        return 0.0
    if allowed == 0 or math.isinf(err):
        return math.inf
    return err / allowed
