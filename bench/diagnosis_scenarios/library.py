"""The scenarios: what each NPU run gets wrong, and which NPU call(s) introduce the error.

Ground truth is the call where the error *starts*. A forward fault is named by its forward call
only (the backward calls downstream of it see wrong activations but are not the cause); a
backward fault by its backward call. Where an op computes a wrong function in both directions
(``cross_entropy`` ignoring ``ignore_index``), either direction of that call names it.

Some traps are not injected but come with the models, as in real ones: a conv bias before
BatchNorm and the bias of an attention key projection get a gradient that is zero in exact
arithmetic (BN removes the channel mean; softmax ignores a per-query shift), so both sides hold
~1e-9 rounding noise whose cosine is random and fails the original thresholds.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from diagnosis_scenarios import faults
from diagnosis_scenarios.faults import backward, forward, install, on_argument, only, part
from diagnosis_scenarios.models import (
    VOCAB,
    AnchorPicker,
    BiasMlp,
    CausalMeanPool,
    ConvBnNet,
    GroupNormNet,
    GruTagger,
    Mlp,
    Pooler,
    ResConvNet,
    ResMlp,
    RmsNormNet,
    TinyLm,
    Upsampler,
    aux_regression,
    classify,
    language_model,
    regression,
    tagging,
)
from diagnosis_scenarios.scenario import BENCH, Scenario, Workload
from dumper.faults import faulty, perturbation
from ptdbg_tui import demo

LAST_TWO_CHANNELS = (slice(None), [14, 15])  # of 16


# --- training steps ------------------------------------------------------------------------------


def classify_smoothed(model: nn.Module, x: torch.Tensor, labels: torch.Tensor) -> None:
    F.cross_entropy(model(x), labels, label_smoothing=0.1).backward()


def classify_log_softmax_by_hand(model: nn.Module, x: torch.Tensor, labels: torch.Tensor) -> None:
    """``log(softmax(logits))`` written out, the loss scaled by a static 1024 (fp16 training)."""
    logp = torch.log(F.softmax(model(x), dim=-1))
    (1024.0 * F.nll_loss(logp, labels)).backward()


def picking(model: nn.Module, x: torch.Tensor, anchors: torch.Tensor, labels: torch.Tensor) -> None:
    F.cross_entropy(model(x, anchors), labels).backward()


def centernet_step(
    model: nn.Module, x: torch.Tensor, heat: torch.Tensor, size: torch.Tensor, track: torch.Tensor
) -> None:
    demo.train_step(torch, model, x, (heat, size, track))


# --- workloads -----------------------------------------------------------------------------------


def silu_mlp(side: str) -> Workload:
    return Workload(
        Mlp([32, 64, 64, 64, 8], nn.SiLU(), gain=1.7),
        (torch.randn(64, 32), torch.randn(64, 8)),
        aux_regression,
    )


def pooler(tokens: int) -> Workload:
    return Workload(Pooler(), (torch.randn(8, tokens, 16), torch.randint(0, 4, (8,))), classify)


def rmsnorm_net(side: str) -> Workload:
    return Workload(RmsNormNet(), (torch.randn(16, 64), torch.randn(16, 8)), regression)


def tiny_lm(side: str, batch: int = 4, **block: object) -> Workload:
    tokens = torch.randint(1, VOCAB, (batch, 13))
    tokens[:, -3:] = 0  # padded tail
    return Workload(TinyLm(VOCAB, **block), (tokens[:, :-1], tokens[:, 1:]), language_model)


def upsampler(side: str) -> Workload:
    return Workload(Upsampler(), (torch.randn(2, 4, 8, 8), torch.randn(2, 2, 16, 16)), regression)


def res_mlp(side: str) -> Workload:
    return Workload(ResMlp(32, blocks=4), (torch.randn(16, 32), torch.randn(16, 32)), regression)


def conv_net(bias_before_bn: bool, step: Callable[..., None] = classify) -> Workload:
    return Workload(ConvBnNet(bias_before_bn), (torch.randn(4, 3, 8, 8), torch.randint(0, 5, (4,))), step)


def centernet(side: str) -> Workload:
    model = demo.build_model(torch)
    x = torch.randn(2, 3, 8, 8)
    return Workload(
        model, (x, torch.rand(2, 2, 4, 4), torch.rand(2, 2, 4, 4), torch.randn(2, 16, 4)), centernet_step
    )


def bias_mlp(side: str) -> Workload:
    return Workload(BiasMlp(), (torch.randn(4, 6, 16), torch.randn(4, 6, 3)), regression)


def deep_mlp(side: str) -> Workload:
    return Workload(
        Mlp([32] * 65, nn.ReLU(), gain=3.0), (torch.randn(16, 32), torch.randn(16, 32)), regression
    )


def fused_npu_gelu(side: str) -> Workload:
    """Two blocks; the NPU side calls the fused ``F.gelu``, the bench side its erf decomposition."""
    return tiny_lm(side, depth=2, fused_gelu=side != BENCH)


def causal_pool(side: str) -> Workload:
    return Workload(CausalMeanPool(), (torch.randn(4, 40, 16), torch.randn(4, 40, 4)), regression)


def group_norm_net(side: str) -> Workload:
    return Workload(GroupNormNet(), (torch.randn(2, 3, 8, 8), torch.randint(0, 5, (2,))), classify)


def anchor_picker(side: str) -> Workload:
    return Workload(
        AnchorPicker(),
        (torch.randn(4, 12, 16), torch.tensor([0, 3, 7, 10]), torch.randint(0, 3, (4,))),
        picking,
    )


def res_conv_net(side: str) -> Workload:
    return Workload(ResConvNet(), (torch.randn(1, 3, 8, 8), torch.randint(0, 5, (1,))), classify)


def gru_tagger(side: str) -> Workload:
    tokens, tags = torch.randint(0, VOCAB, (2, 10)), torch.randint(0, 6, (2, 10))
    return Workload(GruTagger(VOCAB), (tokens, tags), tagging)


def confident_classifier(side: str) -> Workload:
    """Logits up to ~±10: the target class of a few samples has a probability of ~3e-4."""
    model = Mlp([32, 64, 10], nn.ReLU(), gain=3.0)
    return Workload(model, (torch.randn(16, 32), torch.randint(0, 10, (16,))), classify_log_softmax_by_hand)


def is_broadcast_bias(x: object, other: object) -> bool:
    """``x + b`` with a 1-d ``b`` broadcast over a batch of rows."""
    return isinstance(x, torch.Tensor) and isinstance(other, torch.Tensor) and other.dim() == 1 < x.dim()


def is_scaling(x: object, other: object) -> bool:
    """``tensor * number``: attention's score scaling."""
    return isinstance(x, torch.Tensor) and isinstance(other, float)


def _truth(*calls: str) -> frozenset[str]:
    return frozenset(calls)


# --- the scenarios -------------------------------------------------------------------------------

_silu = Scenario(
    "silu_backward_dropped_term",
    "2nd SiLU's backward drops the x*s(x)*(1-s(x)) term; gradients ~1e-4 (an auxiliary loss), cosine ~0.98",
    silu_mlp,
    _truth("Functional_silu_1_backward"),
    install(F, "silu", only(backward(faults.silu_without_x_term), nth=1)),
)
_lstm = Scenario(
    "lstm_backward",
    "the seed guide's case: CenterNet-like conv+BN backbone, LSTM head whose backward is perturbed (50%)",
    centernet,
    _truth("VF_lstm_0_backward"),
    install(torch._VF, "lstm", lambda fn: faulty(fn, 0.5, 0)),
)
_conv_bias = Scenario(
    "conv_bias_before_bn_maxpool_backward",
    "conv bias before BatchNorm (gradient ~1e-9 on both sides) downstream of a max_pool2d whose backward "
    "is perturbed (50%)",
    lambda side: conv_net(True),
    _truth("Functional_max_pool2d_0_backward"),
    install(F, "max_pool2d", backward(perturbation(0.5, 1))),
)
_fused = Scenario(
    "fused_gelu_vs_erf_softmax_backward",
    "NPU calls F.gelu where the bench computes 0.5*x*(1+erf(x/sqrt2)) (later Tensor___mul__ indices shift); "
    "later, the 2nd softmax's backward is perturbed (100%)",
    fused_npu_gelu,
    _truth("Functional_softmax_1_backward"),
    install(F, "softmax", only(backward(perturbation(1.0, 2)), nth=1)),
)
_softmax_nan = Scenario(
    "softmax_nan_forward",
    "softmax without the max shift: rows with an attention logit > 88 overflow to inf/inf = NaN",
    lambda side: tiny_lm(side, q_gain=80.0),
    _truth("Functional_softmax_0_forward"),
    install(F, "softmax", faults.softmax_without_max_shift),
)

_fp16_softmax = Scenario(
    "fp16_softmax_backward_5pct",
    "whole NPU run in fp16; attention softmax's backward perturbed (5%)",
    tiny_lm,
    _truth("Functional_softmax_0_backward"),
    install(F, "softmax", backward(perturbation(0.05, 8))),
    npu_dtype=torch.float16,
)

_deep = Scenario(
    "deep_mlp_64_noise",
    "64-layer ReLU MLP, weights 3x nn.Linear's default: activations grow to ~2e4, weight gradients to "
    "~1e6 (MaxAbsErr > 1 from noise alone); noise only",
    deep_mlp,
)

FAULTS = [
    _silu,
    Scenario(
        "sum_pool_doubled",
        "torch.sum pooling returns exactly 2x (two cores both add their partial sums): cosine 1.0",
        lambda side: pooler(10),
        _truth("Torch_sum_0_forward"),
        install(torch, "sum", faults.scaled(2.0)),
    ),
    Scenario(
        "mean_pool_off_by_one",
        "torch.mean over 100 tokens divides by 99: every element 1.0101x, cosine 1.0",
        lambda side: pooler(100),
        _truth("Torch_mean_0_forward"),
        install(torch, "mean", faults.mean_over_n_minus_1),
    ),
    Scenario(
        "fp16_rmsnorm_pow_overflow",
        "whole NPU run in fp16; big linears (rounding alone: MaxAbsErr > 1), then RMSNorm's x.pow(2) "
        "overflows to inf: the NaN/Inf origin",
        rmsnorm_net,
        _truth("Tensor_pow_0_forward"),
        npu_dtype=torch.float16,
    ),
    _softmax_nan,
    Scenario(
        "interpolate_zeros",
        "F.interpolate returns all zeros (an upsampling kernel that never ran)",
        upsampler,
        _truth("Functional_interpolate_0_forward"),
        install(F, "interpolate", faults.zeros()),
    ),
    Scenario(
        "linear_6th_call_forward",
        "only the 6th of 8 F.linear calls is wrong (each element off by up to 30%)",
        res_mlp,
        _truth("Functional_linear_5_forward"),
        install(F, "linear", only(faults.noisy(0.3), nth=5)),
    ),
    Scenario(
        "relu_inplace_not_written",
        "2nd in-place ReLU of a residual MLP never writes its result: its input comes out unchanged",
        res_mlp,
        _truth("Functional_relu_1_forward"),
        install(F, "relu", only(faults.inplace_not_written, nth=1)),
    ),
    Scenario(
        "conv_weight_grad_only",
        "2nd conv's weight gradient perturbed (50%); its input and bias gradients exact",
        lambda side: conv_net(False),
        _truth("Functional_conv2d_1_backward"),
        install(F, "conv2d", only(backward(on_argument(1, perturbation(0.5, 3))), nth=1)),
    ),
    Scenario(
        "layer_norm_affine_dropped",
        "2nd layer_norm's forward ignores its (trained) weight and bias; its backward is exact",
        tiny_lm,
        _truth("Functional_layer_norm_1_forward"),
        install(F, "layer_norm", only(faults.affine_dropped, nth=1)),
    ),
    _lstm,
    _fused,
    _conv_bias,
    Scenario(
        "attention_matmul_backward",
        "backward of attention's probs @ V matmul: the gradient for V is perturbed (30%), the one for "
        "the probabilities exact",
        tiny_lm,
        _truth("Torch_matmul_1_backward"),
        install(torch, "matmul", only(backward(on_argument(1, perturbation(0.3, 4))), nth=1)),
    ),
    Scenario(
        "layer_norm_weight_grad_zero",
        "1st layer_norm's backward returns a zero weight gradient (never accumulated)",
        tiny_lm,
        _truth("Functional_layer_norm_0_backward"),
        install(F, "layer_norm", only(backward(on_argument(1, faults.zero_grad)), nth=0)),
    ),
    Scenario(
        "embedding_grad_not_accumulated",
        "embedding backward writes instead of adding: a token used several times keeps one token's gradient",
        tiny_lm,
        _truth("Functional_embedding_0_backward"),
        install(F, "embedding", backward(faults.embedding_last_write_wins)),
    ),
    Scenario(
        "cross_entropy_ignores_padding",
        "cross_entropy ignores ignore_index: padding counts in the loss (a 0-d output, off by "
        "< 0.1%) and gets gradients",
        tiny_lm,
        _truth("Functional_cross_entropy_0_forward", "Functional_cross_entropy_0_backward"),
        install(F, "cross_entropy", faults.ignore_index_ignored),
    ),
    Scenario(
        "bias_add_backward_mean",
        "backward of a broadcast bias add (x + b) averages over the 24 rows instead of summing",
        bias_mlp,
        _truth("Tensor___add___0_backward"),
        install(
            torch.Tensor,
            "__add__",
            only(backward(on_argument(1, faults.divided(24.0))), when=is_broadcast_bias),
        ),
    ),
    _deep.with_fault(
        "deep_mlp_64_linear_backward",
        "the 64-layer MLP whose values grow (noise alone fails MaxAbsErr > 1), and the 41st linear's "
        "backward perturbed (10%)",
        _truth("Functional_linear_40_backward"),
        install(F, "linear", only(backward(perturbation(0.1, 5)), nth=40)),
    ),
    Scenario(
        "fp16_layer_norm_backward",
        "whole NPU run in fp16; the 2nd layer_norm's backward perturbs its input gradient (10%)",
        tiny_lm,
        _truth("Functional_layer_norm_1_backward"),
        install(F, "layer_norm", only(backward(on_argument(0, perturbation(0.1, 6))), nth=1)),
        npu_dtype=torch.float16,
    ),
    Scenario(
        "bf16_gelu_backward_dropped_term",
        "whole NPU run in bf16; GELU's backward drops the x*phi(x) term",
        tiny_lm,
        _truth("Functional_gelu_0_backward"),
        install(F, "gelu", backward(faults.gelu_without_x_term)),
        npu_dtype=torch.bfloat16,
    ),
    # approximate, partial and subtle kernels
    Scenario(
        "gelu_tanh_approximation",
        "F.gelu computed with the tanh approximation (a fast-GELU kernel) where the bench uses erf: "
        "forward and backward off by up to 4.7e-4 (absolute), ~2e-4 relative to the tensor",
        tiny_lm,
        _truth("Functional_gelu_0_forward", "Functional_gelu_0_backward"),
        install(F, "gelu", faults.tanh_approximation),
    ),
    Scenario(
        "conv_two_channels_off",
        "2nd conv's forward: 2 of its 16 output channels 5% too large (a per-channel scale wrong for "
        "the last channel block); the BatchNorm after it cancels the error downstream",
        lambda side: conv_net(False),
        _truth("Functional_conv2d_1_forward"),
        install(F, "conv2d", only(forward(part(lambda out: out * 1.05, LAST_TWO_CHANNELS)), nth=1)),
    ),
    Scenario(
        "embedding_zero_token",
        "embedding forward returns zeros for token id 10 (a vocabulary shard's range check drops its "
        "first id): 1 of the 48 tokens hit",
        tiny_lm,
        _truth("Functional_embedding_0_forward"),
        install(F, "embedding", faults.zero_row(10)),
    ),
    Scenario(
        "cumsum_last_tile",
        "cumsum over 40 tokens in tiles of 16: the last 8 positions miss the carry of the first 32",
        causal_pool,
        _truth("Torch_cumsum_0_forward"),
        install(torch, "cumsum", faults.carry_dropped(16)),
    ),
    Scenario(
        "batch_norm_unbiased_variance",
        "2nd BatchNorm's training forward normalises by the unbiased variance of n = 64 values: every "
        "normalised output ~0.8% small",
        lambda side: conv_net(False),
        _truth("Functional_batch_norm_1_forward"),
        install(F, "batch_norm", only(faults.unbiased_variance, nth=1)),
    ),
    Scenario(
        "group_norm_interleaved_groups",
        "2nd group_norm gathers its 4 groups with the wrong channel stride (c, c+4, c+8, c+12 "
        "instead of 4 neighbours)",
        group_norm_net,
        _truth("Functional_group_norm_1_forward"),
        install(F, "group_norm", only(faults.interleaved_groups, nth=1)),
    ),
    Scenario(
        "attention_scale_by_d",
        "attention scores multiplied by 1/d instead of 1/sqrt(d) (d = 16) in the one tensor * float "
        "call: exactly 0.25x, cosine 1.0",
        tiny_lm,
        _truth("Tensor___mul___0_forward"),
        install(torch.Tensor, "__mul__", only(faults.scaled(0.25), when=is_scaling)),
    ),
    Scenario(
        "interpolate_backward_not_accumulated",
        "backward of a 2x nearest F.interpolate writes instead of adding: each input pixel keeps one "
        "of its four output gradients",
        upsampler,
        _truth("Functional_interpolate_0_backward"),
        install(F, "interpolate", backward(faults.nearest_not_accumulated)),
    ),
    Scenario(
        "index_select_one_wrong_index",
        "index_select of 4 anchor tokens reads token 11 for the last anchor (10): the integer index "
        "is identical on both sides, a quarter of the output wrong",
        anchor_picker,
        _truth("Torch_index_select_0_forward"),
        install(torch, "index_select", faults.last_index_off_by_one),
    ),
    Scenario(
        "sdpa_backward_key_grad",
        "fused attention (F.scaled_dot_product_attention, flash attention on the NPU): its backward "
        "perturbs the key gradient (10%), the query and value gradients exact",
        lambda side: tiny_lm(side, fused_attention=True),
        _truth("Functional_scaled_dot_product_attention_0_backward"),
        install(F, "scaled_dot_product_attention", backward(on_argument(1, perturbation(0.1, 9)))),
    ),
    # the first and the last calls
    Scenario(
        "first_call_linear_forward",
        "the model's first call (F.linear on the input) off by up to 1% per element; its inputs "
        "carry only the noise",
        res_mlp,
        _truth("Functional_linear_0_forward"),
        install(F, "linear", only(faults.noisy(0.01), nth=0)),
    ),
    Scenario(
        "mse_loss_backward_doubled",
        "mse_loss's backward (the first backward call) returns 2x the gradient; its forward exact",
        res_mlp,
        _truth("Functional_mse_loss_0_backward"),
        install(F, "mse_loss", backward(faults.divided(0.5))),
    ),
    Scenario(
        "cross_entropy_label_smoothing_ignored",
        "the loss, the forward's last call, drops label_smoothing=0.1: loss and gradient both wrong",
        lambda side: conv_net(False, classify_smoothed),
        _truth("Functional_cross_entropy_0_forward", "Functional_cross_entropy_0_backward"),
        install(F, "cross_entropy", faults.label_smoothing_ignored),
    ),
    # whole-run fp16 / bf16
    Scenario(
        "fp16_attention_exp_overflow",
        "whole NPU run in fp16; hand-written attention softmax exp(s) / sum exp(s): logits up to ~26 "
        "overflow exp in fp16 (above 11.1): the Inf origin",
        lambda side: tiny_lm(side, naive_softmax=True, q_gain=20.0),
        _truth("Torch_exp_0_forward"),
        npu_dtype=torch.float16,
    ),
    Scenario(
        "fp16_log_backward_overflow",
        "whole NPU run in fp16, loss scaled by 1024, log(softmax) by hand: log's backward g/p "
        "overflows where a target's p is ~3e-4 (the forward finite): the Inf origin is in backward",
        confident_classifier,
        _truth("Torch_log_0_backward"),
        npu_dtype=torch.float16,
    ),
    Scenario(
        "bf16_linear_forward_20pct",
        "whole NPU run of two transformer blocks in bf16; the 2nd block's output projection (10th "
        "F.linear) off by up to 20% per element",
        lambda side: tiny_lm(side, depth=2),
        _truth("Functional_linear_9_forward"),
        install(F, "linear", only(faults.noisy(0.2), nth=9)),
        npu_dtype=torch.bfloat16,
    ),
    _fp16_softmax,
]

NO_FAULTS = [
    _deep,
    Scenario(
        "bf16_transformer",
        "whole NPU run of two transformer blocks in bf16, no fault",
        lambda side: tiny_lm(side, depth=2),
        npu_dtype=torch.bfloat16,
    ),
    Scenario(
        "fp16_convnet",
        "whole NPU run in fp16, no fault",
        lambda side: conv_net(False),
        npu_dtype=torch.float16,
    ),
    _conv_bias.switched_off("conv bias before BatchNorm, noise only"),
    _silu.switched_off("the small-gradient SiLU MLP, noise only"),
    _lstm.switched_off("the CenterNet-like model (its convs have biases before BatchNorm), noise only"),
    _fused.switched_off("fused F.gelu against its decomposition, no real fault"),
    _softmax_nan.switched_off("attention logits up to ~100 (a saturated softmax), noise only"),
    Scenario(
        "bf16_transformer_3_layers",
        "whole NPU run of three transformer blocks, batch 2, in bf16, no fault",
        lambda side: tiny_lm(side, batch=2, depth=3),
        npu_dtype=torch.bfloat16,
    ),
    Scenario(
        "resnet_batch1",
        "a small ResNet with batch 1 (its BatchNorms over 64 and 16 values), fp32, noise only",
        res_conv_net,
    ),
    _fp16_softmax.switched_off("whole NPU run of a transformer block in fp16, no fault"),
    Scenario(
        "fp16_gru",
        "whole NPU run of an embedding-GRU tagger in fp16, no fault",
        gru_tagger,
        npu_dtype=torch.float16,
    ),
]

#: Every scenario by name, faults first.
SCENARIOS: dict[str, Scenario] = {s.name: s for s in FAULTS + NO_FAULTS}
