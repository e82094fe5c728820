"""Multi-step scenarios on one rank (issue 15: faults that run every step or start later, no-fault
runs with Adam and momentum; issue 16: random ops, parameters changed between steps, an NPU-only
call, a scalar argument that differs, experts that get no gradient).

Each trains three steps; the optimizer runs inside the dumped step unless said. Call names follow
from the order of the calls in ``models.py``'s ``forward`` methods.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from diagnosis_scenarios import faults
from diagnosis_scenarios.checks import (
    Fact,
    Pair,
    agrees,
    all_of,
    calls_more_on_npu,
    differs,
    error_between,
    has_call,
    scalar,
)
from diagnosis_scenarios.faults import backward, forward, install, on_argument, only
from diagnosis_scenarios.heldout import TopTwoMoe
from diagnosis_scenarios.models import (
    VOCAB,
    ConvBnNet,
    LstmTagger,
    Mlp,
    RmsNormNet,
    TinyLm,
    classify,
    language_model,
    regression,
    tagging,
)
from diagnosis_scenarios.scenario import NPU
from diagnosis_scenarios.training import (
    NO_FAULT,
    TRAIN_SEED,
    Loop,
    Optimizer,
    Training,
    adam,
    arguments,
    batches,
    every_step,
    from_step,
    kernel,
    parameters,
    random_op,
    sgd,
    unpaired,
)

# --- models and loops ------------------------------------------------------------------------------


def mlp(act: nn.Module, widths: list[int] | None = None, rows: int = 20, lr: float = 0.1) -> Loop:
    """An MLP regressing a batch of ``rows`` (not a multiple of 8: a partial last tile)."""
    widths = widths or [16, 32, 32, 4]
    data = batches(lambda: (torch.randn(rows, widths[0]), torch.randn(rows, widths[-1])))
    return Loop(Mlp(widths, act), data, regression, sgd(lr))


def lstm_tagger(side: str) -> Loop:
    """A 2-layer LSTM tagger trained with SGD and momentum (the momentum buffer's clone and
    multiply run after the backward, inside the dumped step)."""
    return Loop(
        LstmTagger(layers=2),
        batches(lambda: (torch.randint(0, VOCAB, (8, 10)), torch.randint(0, 6, (8, 10)))),
        tagging,
        sgd(0.5, momentum=0.9),
    )


def tiny_lm(side: str, lr: float = 0.1) -> Loop:
    def batch() -> tuple[torch.Tensor, ...]:
        tokens = torch.randint(1, VOCAB, (4, 13))
        tokens[:, -3:] = 0  # padded tail
        return tokens[:, :-1], tokens[:, 1:]

    return Loop(TinyLm(VOCAB), batches(batch), language_model, sgd(lr))


def conv_net(side: str) -> Loop:
    return Loop(ConvBnNet(), batches(lambda: (torch.randn(4, 3, 8, 8), torch.randint(0, 5, (4,)))), classify)


def dropout_mlp(side: str, npu_seed: int) -> Loop:
    """Linear, ReLU, dropout 0.1 (kept on), linear; the NPU run seeds torch's RNG with ``npu_seed``."""
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 4))
    loop = Loop(model, batches(lambda: (torch.randn(20, 16), torch.randn(20, 4))), regression)
    loop.seed = npu_seed if side == NPU else TRAIN_SEED
    return loop


class OverUpdate:
    """An optimizer whose ``at``-th update of one parameter is ``factor`` times too large."""

    def __init__(self, inner: torch.optim.Optimizer, param: nn.Parameter, factor: float, at: int) -> None:
        self.inner, self.param, self.factor, self.at = inner, param, factor, at
        self.count = 0

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.inner.zero_grad(set_to_none=set_to_none)

    def step(self) -> None:
        before = self.param.detach().clone()
        self.inner.step()
        if self.count == self.at:
            with torch.no_grad():
                self.param.copy_(before + self.factor * (self.param - before))
        self.count += 1


def over_updated(side: str) -> Loop:
    loop = mlp(nn.Tanh())
    if side == NPU:
        first = loop.model.layers[0].weight

        def make(model: nn.Module) -> Optimizer:
            return OverUpdate(torch.optim.SGD(model.parameters(), lr=0.1), first, factor=1.01, at=0)

        loop.optimizer = make
    return loop


def extra_mul(side: str) -> Loop:
    """The NPU script scales its inputs by 1.001 (``x * 1.001``) before the model; the bench does not.
    The model's wide linears have outputs in the thousands (MaxAbsErr > 1 fails their rows) and an
    RMSNorm that takes the scale out again."""
    loop = Loop(
        RmsNormNet(), batches(lambda: (torch.randn(16, 64), torch.randn(16, 8))), regression, sgd(1e-3)
    )
    if side == NPU:
        loop.step = lambda model, x, y: regression(model, x * 1.001, y)
    return loop


class TanhGeluMlp(nn.Module):
    """Linear, the tanh approximation of GELU written out with ``torch.mul``/``torch.add`` and the
    cubic coefficient ``c`` (0.044715 in the formula), linear."""

    def __init__(self, c: float) -> None:
        super().__init__()
        self.fc1, self.fc2, self.c = nn.Linear(16, 32), nn.Linear(32, 4), c

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc1(x)
        inner = torch.add(h, torch.mul(torch.pow(h, 3), self.c))  # Torch_mul_0 takes c
        t = torch.tanh(torch.mul(inner, math.sqrt(2 / math.pi)))
        return self.fc2(torch.mul(torch.mul(h, 0.5), torch.add(t, 1.0)))


def tanh_gelu(side: str) -> Loop:
    model = TanhGeluMlp(0.0458 if side == NPU else 0.044715)
    return Loop(model, batches(lambda: (torch.randn(20, 16), torch.randn(20, 4))), regression)


MOE_TOKENS, MOE_EXPERTS = 6, 8
#: large steps (SGD lr 2): an every-step fault's weights are ~12% off on entry to step 2
BIG_LR = 2.0


def moe(side: str) -> Loop:
    """Eight linear experts, each token's top two chosen (6 tokens: some experts get no token, so
    their gradients are all zeros on both sides)."""
    data = batches(lambda: (torch.randn(MOE_TOKENS, 16), torch.randn(MOE_TOKENS, 16)))
    return Loop(TopTwoMoe(experts=MOE_EXPERTS), data, regression)


def adam_mlp(side: str) -> Loop:
    loop = mlp(nn.GELU())
    loop.optimizer = adam(1e-2)
    return loop


# --- faults --------------------------------------------------------------------------------------


def _linear(make: faults.Make, nth: int) -> Any:
    return install(F, "linear", only(make, nth=nth))


# expert 2 is chosen by a token at every step (checks.py verifies it from the dumps)
MOE_EXPERT = 2


def experts_unchosen(pair: Pair) -> Iterator[Fact]:
    """Some experts get no token (their bench weight gradient is all zeros) at every step, and the
    faulty expert is chosen."""
    for step in sorted({s for s, _ in pair.bench.dumps}):
        grads = {
            e: pair.bench.value(step, 0, f"Functional_linear_{e + 1}_backward_output.1")
            for e in range(MOE_EXPERTS)
        }
        idle = [e for e, g in grads.items() if g is not None and not np.any(g)]
        chosen = MOE_EXPERT not in idle
        yield Fact(
            bool(idle) and chosen,
            f"step{step}: experts with an all-zero bench weight gradient "
            f"{idle}; expert {MOE_EXPERT} chosen: {chosen}",
        )


# --- the scenarios --------------------------------------------------------------------------------

_linear_tail = Training(
    "linear_weight_grad_tail_tile",
    "fc2's weight gradient sums whole tiles of 8 rows only: the batch's last 4 of 20 rows dropped, every "
    "step (SGD lr 2: fc2's weight ~12% off on entry to step 2)",
    lambda side: mlp(nn.Tanh(), lr=BIG_LR),
    every_step(kernel("Functional_linear_1_backward")),
    _linear(backward(faults.weight_grad_tail_dropped(8)), 1),
    premise=all_of(
        differs(0, "Functional_linear_1_backward_output.1", 0.1, why="the fault"),
        agrees(0, "Functional_linear_1_forward_input.*"),
        differs(2, "Functional_linear_1_forward_input.1", 0.05, why="fc2's weight on entry"),
    ),
)

_gelu_tail = Training(
    "gelu_tail_tile_every_step",
    "2nd GELU returns 1.01x in its tail tile (last 64 elements), every step (SGD lr 2)",
    lambda side: mlp(nn.GELU(), [16, 64, 64, 4], lr=BIG_LR),
    every_step(kernel("Functional_gelu_1_forward")),
    install(F, "gelu", only(forward(faults.tail(lambda o: torch.mul(o, 1.01), 64)), nth=1)),
    premise=all_of(
        differs(0, "Functional_gelu_1_forward_output", 1e-3, why="the fault"),
        agrees(0, "Functional_gelu_1_forward_input.0"),
        differs(2, "Functional_gelu_1_forward_input.0", 1e-4, why="inherited on entry"),
    ),
)

_lstm = Training(
    "lstm_backward_skips_t0_momentum",
    "LSTM backward stops before t=0 (input gradient at t=0 zero, weights miss t=0), every step; SGD "
    "momentum inside the dumped step (its clone/mul run after the backward)",
    lstm_tagger,
    every_step(kernel("VF_lstm_0_backward")),
    install(torch._VF, "lstm", faults.lstm_backward_skips_first_step),
    premise=all_of(
        differs(0, "VF_lstm_0_backward_output.*", 0.1, why="the fault"),
        agrees(0, "VF_lstm_0_forward_input.*"),
        differs(2, "VF_lstm_0_forward_input.2.*", 1e-3, why="its weights differ on entry"),
        has_call(1, "Tensor_mul__0_forward_output", why="momentum after the backward"),
    ),
)

_bf16_gelu = Training(
    "bf16_gelu_one_unit_bias",
    "whole NPU run in bf16; GELU returns x*1.005 (a one-sided error of one bf16 unit), every step",
    lambda side: mlp(nn.GELU(), [16, 64, 64, 4]),
    every_step(kernel("Functional_gelu_0_forward")),
    install(F, "gelu", only(faults.scaled(1.005), nth=0)),
    npu_dtype=torch.bfloat16,
    premise=all_of(
        error_between(0, "Functional_gelu_0_forward_input.0", high=4e-3, why="bf16 rounding only"),
        differs(2, "Functional_gelu_0_forward_input.0", 4e-3, why="bf16 weights drift"),
        differs(0, "Functional_gelu_0_forward_output", 6e-3, why="rounding plus the bias"),
    ),
)

_silu_later = Training(
    "silu_backward_from_step1",
    "2nd SiLU's backward drops its x*s(x)*(1-s(x)) term from step 1 on (step 0 exact)",
    lambda side: mlp(nn.SiLU(), [32, 64, 64, 8]),
    from_step(1, kernel("Functional_silu_1_backward")),
    install(F, "silu", only(backward(faults.silu_without_x_term), nth=1)),
    fault_steps=frozenset({1, 2}),
    premise=all_of(
        agrees(0, "Functional_silu_1_backward_output.0"),
        differs(1, "Functional_silu_1_backward_output.0", 1e-2, why="the fault"),
    ),
)

_layer_norm_later = Training(
    "layer_norm_affine_dropped_from_step2",
    "transformer block's 2nd layer_norm ignores its weight and bias at step 2 only (steps 0, 1 exact)",
    tiny_lm,
    from_step(2, kernel("Functional_layer_norm_1_forward")),
    install(F, "layer_norm", only(faults.affine_dropped, nth=1)),
    fault_steps=frozenset({2}),
    premise=all_of(
        agrees(1, "Functional_layer_norm_1_forward_output", 1e-4),
        differs(2, "Functional_layer_norm_1_forward_output", 0.1, why="the fault"),
    ),
)

_attention = Training(
    "attention_matmul_forward",
    "transformer block's attention-times-values matmul 2% off (jitter), every step (SGD lr 2)",
    lambda side: tiny_lm(side, BIG_LR),
    every_step(kernel("Torch_matmul_1_forward")),
    install(torch, "matmul", only(faults.noisy(0.02), nth=1)),
    premise=all_of(
        differs(0, "Torch_matmul_1_forward_output", 1e-3, why="the fault"),
        agrees(0, "Torch_matmul_1_forward_input.*"),
        differs(2, "Torch_matmul_1_forward_input.*", 1e-4, why="inherited on entry"),
    ),
)

_conv = Training(
    "conv_weight_grad_every_step",
    "2nd conv's weight gradient 1/1.1 of the true one (BatchNorm after it), every step",
    conv_net,
    every_step(kernel("Functional_conv2d_1_backward")),
    install(F, "conv2d", only(backward(on_argument(1, faults.divided(1.1))), nth=1)),
    premise=all_of(
        differs(0, "Functional_conv2d_1_backward_output.1", 0.05, why="the fault"),
        differs(2, "Functional_conv2d_1_forward_input.1", 1e-4, why="its weight on entry"),
    ),
)

_adam = has_call(1, "Tensor_addcdiv__0_forward_output", why="Adam inside the dumped step")

ISSUE15 = [
    _linear_tail,
    _gelu_tail,
    _lstm,
    _bf16_gelu,
    _silu_later,
    _layer_norm_later,
    _attention,
    _conv,
    Training(
        "adam_fp32_off",
        "no fault: Adam inside the dumped step, fp32 on both sides",
        adam_mlp,
        every_step(NO_FAULT),
        premise=_adam,
    ),
    Training(
        "adam_bf16_off",
        "no fault: Adam inside the dumped step, the whole NPU run in bf16",
        adam_mlp,
        every_step(NO_FAULT),
        npu_dtype=torch.bfloat16,
        premise=all_of(_adam, differs(2, "Functional_linear_*_forward_input.1", 4e-3, why="bf16 Adam")),
    ),
    _lstm.variant(
        "sgd_momentum_off",
        "no fault: the LSTM tagger with SGD momentum inside the dumped step",
        every_step(NO_FAULT),
        fault=None,
        premise=has_call(1, "Tensor_mul__0_forward_output"),
    ),
]

_DROPOUT_P = scalar(0, "Functional_dropout_0_forward_input.1", 0.1, 0.1)  # kept on

_dropout = Training(
    "dropout_rng_differs",
    "dropout kept on (disable_dropout=False); the NPU run seeds torch's RNG differently: other masks",
    lambda side: dropout_mlp(side, TRAIN_SEED + 1),
    every_step(random_op("Functional_dropout_0_forward")),
    keep_dropout=True,
    premise=all_of(
        _DROPOUT_P,
        agrees(0, "Functional_dropout_0_forward_input.0"),
        differs(0, "Functional_dropout_0_forward_output", 0.1, why="other masks"),
    ),
)

_over_updated = Training(
    "param_over_updated_between_steps",
    "the NPU optimizer over-updates fc1's weight by 1% at step 0; the optimizer runs outside the dumped "
    "calls (between stop() and step())",
    over_updated,
    {(0, 0): NO_FAULT, **{(s, 0): parameters("Functional_linear_0_forward", s) for s in (1, 2)}},
    optimizer_dumped=False,
    premise=all_of(
        agrees(0, "Functional_linear_*_forward_input.*"),
        differs(1, "Functional_linear_0_forward_input.1", 5e-5, why="over-updated on entry"),
        agrees(1, "Functional_linear_[12]_forward_input.1", why="the other weights"),
        agrees(1, "Functional_linear_0_forward_input.0", why="the batch"),
    ),
)

_extra_mul = Training(
    "npu_extra_mul",
    "the NPU script scales its inputs (x * 1.001) where the bench does not (the model's own Tensor.__mul__ "
    "calls shift by one on the NPU); wide linears: their rows fail",
    extra_mul,
    every_step(unpaired("Tensor___mul___0_forward")),
    premise=all_of(
        calls_more_on_npu(0, "Tensor___mul___*_forward_output", 1),
        scalar(0, "Tensor___mul___0_forward_input.1", 1.001),
        differs(0, "Functional_linear_0_forward_output", 5e-4, why="a row that fails"),
    ),
)

_moe = Training(
    "moe_expert_linear_forward",
    f"top-2 of {MOE_EXPERTS} experts over {MOE_TOKENS} tokens (unchosen experts: all-zero gradients); "
    f"chosen expert {MOE_EXPERT}'s linear 5% off, every step",
    moe,
    every_step(kernel(f"Functional_linear_{MOE_EXPERT + 1}_forward")),
    _linear(faults.noisy(0.05), MOE_EXPERT + 1),
    premise=all_of(experts_unchosen, differs(0, f"Functional_linear_{MOE_EXPERT + 1}_forward_output", 1e-2)),
)

_C = math.sqrt(2 / math.pi)

_scalar = Training(
    "tanh_gelu_scalar_differs",
    "hand-written tanh GELU: the NPU passes 0.0458 to torch.mul where the bench passes 0.044715",
    tanh_gelu,
    every_step(arguments("Torch_mul_0_forward")),
    premise=all_of(
        scalar(0, "Torch_mul_0_forward_input.1", 0.0458, 0.044715),
        agrees(0, "Torch_mul_0_forward_input.0", why="only the scalar differs"),
        scalar(0, "Torch_mul_1_forward_input.1", _C, _C),
        differs(0, "Torch_mul_0_forward_output", 1e-3),
    ),
)

ISSUE16 = [
    _dropout,
    _dropout.variant(
        "dropout_rng_aligned_off",
        "no fault: dropout kept on, both runs seeded alike",
        every_step(NO_FAULT),
        build=lambda side: dropout_mlp(side, TRAIN_SEED),
        premise=all_of(_DROPOUT_P, agrees(0, "Functional_dropout_0_forward_output")),
    ),
    _over_updated,
    _extra_mul,
    _moe,
    _moe.variant(
        "moe_off",
        "no fault: the same mixture of experts",
        every_step(NO_FAULT),
        fault=None,
        premise=experts_unchosen,
    ),
    _scalar,
]
