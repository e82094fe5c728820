"""Small real models for the diagnosis scenarios: each a few dozen calls, dumped in well under a second.

Every model is built after ``torch.manual_seed``, so both sides of a scenario start identical.
Layers go through the public ``nn``/``F``/``torch`` entry points the dumper wraps, so a call's
name in the dump (``Functional_linear_3``, ``Torch_matmul_1``, ``Tensor_pow_0``) follows from
the order of the calls in ``forward``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


def trained_affine(norm: nn.Module) -> None:
    """Norm weights away from their init (gamma 1, beta 0), as in a trained model."""
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
        norm.bias.uniform_(-0.2, 0.2)


class Mlp(nn.Module):
    """Linear layers with an activation between them; ``gain`` scales every weight (a deep net
    whose activations and gradients grow layer after layer)."""

    def __init__(self, widths: list[int], act: nn.Module, gain: float = 1.0) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(widths))
        self.act = act
        with torch.no_grad():
            for layer in self.layers:
                layer.weight.mul_(gain)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = self.act(x)
        return x


class ResMlp(nn.Module):
    """Residual blocks ``x + W2 relu(W1 x)`` with in-place ReLUs (ResNet-style MLP)."""

    def __init__(self, width: int, blocks: int) -> None:
        super().__init__()
        self.fc1 = nn.ModuleList(nn.Linear(width, width) for _ in range(blocks))
        self.fc2 = nn.ModuleList(nn.Linear(width, width) for _ in range(blocks))
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for fc1, fc2 in zip(self.fc1, self.fc2, strict=True):
            x = x + fc2(self.relu(fc1(x)))
        return x


class ConvBnNet(nn.Module):
    """conv-BN-ReLU-maxpool, conv-BN-ReLU, average pool, linear: a small classification CNN.

    ``bias_before_bn`` gives the second conv a bias although BatchNorm follows it: its gradient
    is zero in exact arithmetic (BN removes the channel mean), rounding noise (~1e-9) in practice.
    """

    def __init__(self, bias_before_bn: bool = False, classes: int = 5) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1, bias=bias_before_bn)
        self.bn2 = nn.BatchNorm2d(16)
        self.relu = nn.ReLU(inplace=True)
        self.fc = nn.Linear(16, classes)
        for bn in (self.bn1, self.bn2):
            trained_affine(bn)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.relu(self.bn1(self.conv1(x))))
        x = self.relu(self.bn2(self.conv2(x)))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class Upsampler(nn.Module):
    """conv, nearest upsampling, conv: the decoder of a dense-prediction head."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(4, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 2, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.tanh(self.conv1(x))
        return self.conv2(F.interpolate(x, scale_factor=2.0, mode="nearest"))


class Pooler(nn.Module):
    """Token features, attention-weighted sum pooling and mean pooling, a classifier."""

    def __init__(self, dim: int = 16) -> None:
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.score = nn.Linear(dim, 1)
        self.fc = nn.Linear(2 * dim, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.gelu(self.proj(x))  # (batch, tokens, dim)
        w = F.softmax(self.score(h), dim=1)
        pooled = torch.sum(w * h, dim=1)
        mean = torch.mean(h, dim=1)
        return self.fc(torch.cat([pooled, mean], dim=1))


class RmsNormNet(nn.Module):
    """Wide linears with large weights (outputs in the thousands), RMSNorm written as in many
    LLM codebases (``x.pow(2).mean(-1)``), a head."""

    def __init__(self, dim: int = 64, gains: tuple[float, float] = (800.0, 7.0)) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, 256)
        self.fc2 = nn.Linear(256, 256)
        self.gamma = nn.Parameter(torch.empty(256).uniform_(0.5, 1.5))
        self.head = nn.Linear(256, 8)
        with torch.no_grad():
            self.fc1.weight.mul_(gains[0])
            self.fc2.weight.mul_(gains[1])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc2(F.relu(self.fc1(x)))
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * self.gamma
        return self.head(h)


class Block(nn.Module):
    """A pre-LN transformer block: attention (matmul, softmax, matmul) and a GELU MLP.

    ``fused_gelu=False`` writes GELU out as ``0.5 * x * (1 + erf(x / sqrt 2))`` (a decomposition
    the other side's fused kernel replaces); ``q_gain`` scales the query projection (large
    attention logits); ``naive_softmax`` writes the attention softmax out as ``exp(s) / sum exp(s)``
    without the max shift, as hand-written attention code does; ``fused_attention`` calls
    ``F.scaled_dot_product_attention`` instead (a flash-attention kernel on the NPU).
    """

    def __init__(
        self,
        dim: int = 16,
        fused_gelu: bool = True,
        q_gain: float = 1.0,
        naive_softmax: bool = False,
        fused_attention: bool = False,
    ) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.q, self.k, self.v = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.o = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, 2 * dim)
        self.down = nn.Linear(2 * dim, dim)
        self.fused_gelu = fused_gelu
        self.naive_softmax = naive_softmax
        self.fused_attention = fused_attention
        self.scale = 1 / math.sqrt(dim)
        for ln in (self.ln1, self.ln2):
            trained_affine(ln)
        with torch.no_grad():
            self.q.weight.mul_(q_gain)

    def gelu(self, x: torch.Tensor) -> torch.Tensor:
        if self.fused_gelu:
            return F.gelu(x)
        return 0.5 * x * (1 + torch.erf(x * (1 / math.sqrt(2))))

    def softmax(self, scores: torch.Tensor) -> torch.Tensor:
        if not self.naive_softmax:
            return F.softmax(scores, dim=-1)
        e = torch.exp(scores)
        return e / e.sum(-1, keepdim=True)

    def attention(self, h: torch.Tensor) -> torch.Tensor:
        if self.fused_attention:
            return F.scaled_dot_product_attention(self.q(h), self.k(h), self.v(h))
        scores = torch.matmul(self.q(h), self.k(h).transpose(-2, -1)) * self.scale
        return torch.matmul(self.softmax(scores), self.v(h))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.o(self.attention(self.ln1(x)))
        return x + self.down(self.gelu(self.up(self.ln2(x))))


class TinyLm(nn.Module):
    """Token embedding, ``depth`` transformer blocks, a vocabulary head."""

    def __init__(self, vocab: int = 40, dim: int = 16, depth: int = 1, **block: object) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim, **block) for _ in range(depth))  # type: ignore[arg-type]
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


class BiasMlp(nn.Module):
    """A linear without bias and a separate bias added by broadcasting (``x + b``), as code that
    shares one bias across heads or tokens does."""

    def __init__(self, dim: int = 16) -> None:
        super().__init__()
        self.fc = nn.Linear(dim, dim, bias=False)
        self.bias = nn.Parameter(torch.randn(dim) * 0.1)
        self.head = nn.Linear(dim, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.fc(x) + self.bias))


class CausalMeanPool(nn.Module):
    """Token features, their running mean over the sequence (``cumsum`` / position, as a causal or
    streaming encoder pools), a per-token head."""

    def __init__(self, dim: int = 16, out: int = 4) -> None:
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.head = nn.Linear(dim, out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.proj(x))  # (batch, tokens, dim)
        counts = torch.arange(1, h.shape[1] + 1, dtype=h.dtype).unsqueeze(-1)
        return self.head(torch.cumsum(h, dim=1) / counts)


class GroupNormNet(nn.Module):
    """Two conv-GroupNorm-SiLU stages (a diffusion U-Net's ResBlock), average pool, linear."""

    def __init__(self, classes: int = 5) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.gn1 = nn.GroupNorm(4, 16, eps=1e-6)
        self.conv2 = nn.Conv2d(16, 16, 3, padding=1)
        self.gn2 = nn.GroupNorm(4, 16, eps=1e-6)
        self.fc = nn.Linear(16, classes)
        for gn in (self.gn1, self.gn2):
            trained_affine(gn)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.silu(self.gn1(self.conv1(x)))
        x = F.silu(self.gn2(self.conv2(x)))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class AnchorPicker(nn.Module):
    """Token features, the features of chosen anchor tokens picked with ``index_select`` (a span
    or keypoint head), a classifier over the concatenated anchors."""

    def __init__(self, dim: int = 16, anchors: int = 4, classes: int = 3) -> None:
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.fc = nn.Linear(anchors * dim, classes)

    def forward(self, x: torch.Tensor, anchors: torch.Tensor) -> torch.Tensor:
        h = F.gelu(self.proj(x))  # (batch, tokens, dim)
        return self.fc(torch.index_select(h, 1, anchors).flatten(1))


class BasicBlock(nn.Module):
    """ResNet's basic block: conv-BN-ReLU-conv-BN plus the identity, then ReLU."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(width, width, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        for bn in (self.bn1, self.bn2):
            trained_affine(bn)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.bn1(self.conv1(x)))
        return F.relu(x + self.bn2(self.conv2(h)))


class ResConvNet(nn.Module):
    """A small ResNet: conv-BN-ReLU stem, a basic block, a strided conv-BN down to half the
    resolution, another basic block, average pool, linear."""

    def __init__(self, width: int = 8, classes: int = 5) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, width, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(width)
        self.block1 = BasicBlock(width)
        self.down = nn.Conv2d(width, 2 * width, 3, stride=2, padding=1, bias=False)
        self.bn_down = nn.BatchNorm2d(2 * width)
        self.block2 = BasicBlock(2 * width)
        self.fc = nn.Linear(2 * width, classes)
        for bn in (self.bn, self.bn_down):
            trained_affine(bn)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.block1(F.relu(self.bn(self.stem(x))))
        x = self.block2(F.relu(self.bn_down(self.down(x))))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class GruTagger(nn.Module):
    """Token embedding, a GRU, a per-token classifier (a sequence tagger)."""

    def __init__(self, vocab: int = 40, dim: int = 16, hidden: int = 32, tags: int = 6) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.gru = nn.GRU(dim, hidden, batch_first=True)
        self.head = nn.Linear(hidden, tags)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        out, _ = self.gru(self.embed(tokens))
        return self.head(out)


#: Token ids of the language and tagging models.
VOCAB = 40


@dataclass
class Workload:
    """A model, its inputs and one training step (forward, loss, backward)."""

    model: nn.Module
    inputs: tuple[torch.Tensor, ...]
    step: Callable[..., Any]  # step(model, *inputs)


def nudge(tensors: Iterable[torch.Tensor], seed: int, noise: float) -> None:
    """The NPU run's inputs and weights: each float tensor times ``1 + noise * randn`` (seeded)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for t in tensors:
            if t.is_floating_point():
                t.mul_(1 + noise * torch.randn(t.shape, generator=gen, dtype=torch.float32).to(t.dtype))


class LstmTagger(nn.Module):
    """Token embedding, an LSTM of ``layers`` layers, a per-token classifier."""

    def __init__(
        self, vocab: int = VOCAB, dim: int = 16, hidden: int = 32, tags: int = 6, layers: int = 2
    ) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.lstm = nn.LSTM(dim, hidden, num_layers=layers, batch_first=True)
        self.head = nn.Linear(hidden, tags)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(self.embed(tokens))
        return self.head(out)


class PositiveHead(nn.Module):
    """Features, a softplus (a positive rate, as in a Poisson or variance head), its log."""

    def __init__(self, dim: int = 16) -> None:
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.head = nn.Linear(dim, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rate = F.softplus(self.fc(x))
        return self.head(torch.log(rate))


# --- training steps -------------------------------------------------------------------------------


def regression(model: nn.Module, x: torch.Tensor, target: torch.Tensor) -> None:
    F.mse_loss(model(x), target).backward()


def aux_regression(model: nn.Module, x: torch.Tensor, target: torch.Tensor) -> None:
    """An auxiliary loss weighted 0.03: every gradient of the model is small (~1e-4)."""
    (0.03 * F.mse_loss(model(x), target)).backward()


def classify(model: nn.Module, x: torch.Tensor, labels: torch.Tensor) -> None:
    F.cross_entropy(model(x), labels).backward()


def tagging(model: nn.Module, tokens: torch.Tensor, tags: torch.Tensor) -> None:
    F.cross_entropy(model(tokens).flatten(0, 1), tags.flatten()).backward()


def language_model(model: nn.Module, tokens: torch.Tensor, targets: torch.Tensor) -> None:
    """Next-token loss; target 0 is padding and is ignored."""
    logits = model(tokens)
    F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=0).backward()
