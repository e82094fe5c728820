"""The wrong kernels of the diagnosis scenarios, each installed with ``dumper.faults.replaced``.

A *forward* fault changes the values an API returns and nothing else: its backward is the true
backward at the true inputs (an NPU forward kernel is a kernel of its own). A *backward* fault
keeps the forward exact and changes the gradients it produces. :func:`only` restricts a fault to
chosen calls (the k-th, or those whose arguments match), so a model that calls the API many
times is wrong in one call only.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import torch

from dumper.faults import GradFix, replaced, with_backward

Api = Callable[..., Any]
Make = Callable[[Api], Api]  # true function -> faulty function
Corrupt = Callable[[torch.Tensor], torch.Tensor]
Grads = Sequence[torch.Tensor | None]


def install(owner: Any, attr: str, make: Make) -> Callable[[], AbstractContextManager[Api]]:
    """A fault as the scenarios hold it: called, it installs the faulty API until the block ends."""
    return lambda: replaced(owner, attr, make)


def _showing(out: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """``out`` with the values of ``value`` and the gradients of ``out``."""
    with torch.no_grad():
        delta = value - out.detach()
    return out + delta


def forward(corrupt: Corrupt) -> Make:
    """The API's output replaced by ``corrupt(output)``; gradients stay those of the true op."""

    def make(fn: Api) -> Api:
        def wrong(*args: Any, **kwargs: Any) -> Any:
            out = fn(*args, **kwargs)
            with torch.no_grad():
                value = corrupt(out.detach())
            return _showing(out, value)

        return wrong

    return make


def recomputed(wrong: Callable[..., torch.Tensor]) -> Make:
    """The API's output replaced by ``wrong(fn, *args, **kwargs)`` (a wrong formula on the same
    arguments, ``fn`` the true API); gradients stay those of the true op."""

    def make(fn: Api) -> Api:
        def call(*args: Any, **kwargs: Any) -> Any:
            out = fn(*args, **kwargs)
            with torch.no_grad():
                value = wrong(fn, *args, **kwargs)
            return _showing(out, value)

        return call

    return make


def backward(fix: GradFix) -> Make:
    """The API's forward exact, the gradients it produces passed through ``fix``."""
    return lambda fn: with_backward(fn, fix)


def only(make: Make, nth: int | None = None, when: Callable[..., bool] | None = None) -> Make:
    """``make``'s fault on the ``nth`` call (0-based, counted while installed) and/or the calls
    whose arguments satisfy ``when``; every other call is the true one."""

    def restricted(fn: Api) -> Api:
        bad = make(fn)
        count = itertools.count()

        def pick(*args: Any, **kwargs: Any) -> Any:
            k = next(count)
            hit = (nth is None or k == nth) and (when is None or when(*args, **kwargs))
            return (bad if hit else fn)(*args, **kwargs)

        return pick

    return restricted


# --- wrong forwards ----------------------------------------------------------------------------


def scaled(factor: float) -> Make:
    return forward(lambda out: torch.mul(out, factor))  # not `*`: Tensor.__mul__ may be the API replaced


def zeros() -> Make:
    return forward(torch.zeros_like)


def jitter(scale: float, seed: int = 7) -> Corrupt:
    """Each element off by a factor ``1 + scale * u``, ``u`` uniform in [-1, 1]."""

    def corrupt(out: torch.Tensor) -> torch.Tensor:
        u = torch.rand(out.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float32)
        return out * (1 + scale * (2 * u - 1)).to(out.dtype)

    return corrupt


def noisy(scale: float, seed: int = 7) -> Make:
    return forward(jitter(scale, seed))


def part(corrupt: Corrupt, index: Any) -> Corrupt:
    """``corrupt`` on ``out[index]`` only (some channels, some positions); the rest exact."""

    def some(out: torch.Tensor) -> torch.Tensor:
        wrong = out.clone()
        wrong[index] = corrupt(out[index])
        return wrong

    return some


@recomputed
def softmax_without_max_shift(
    fn: Api, x: torch.Tensor, dim: int | None = None, *args: Any, **kwargs: Any
) -> torch.Tensor:
    """``exp(x) / sum(exp(x))`` without subtracting the row maximum first: a row holding a logit
    above ~88 overflows to inf/inf = NaN in float32."""
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)


def mean_over_n_minus_1(fn: Api) -> Api:
    """``torch.mean`` that divides the sum by n - 1 (an off-by-one in the element count)."""

    def wrong(x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        out = fn(x, *args, **kwargs)
        n = x.numel() // max(out.numel(), 1)
        with torch.no_grad():
            delta = out.detach() / (n - 1)
        return out + delta

    return wrong


def inplace_not_written(fn: Api) -> Api:
    """An in-place activation whose result is never written back: the input comes out unchanged."""

    def lost(x: torch.Tensor, *args: Any, inplace: bool = False, **kwargs: Any) -> torch.Tensor:
        return x if inplace else fn(x, *args, inplace=inplace, **kwargs)

    return lost


@recomputed
def affine_dropped(
    fn: Api, x: torch.Tensor, shape: Any, weight: Any = None, bias: Any = None, eps: float = 1e-5
) -> torch.Tensor:
    """``layer_norm`` that ignores its weight and bias (a fused kernel dropping the affine step)."""
    return fn(x, shape, None, None, eps)


def ignore_index_ignored(fn: Api) -> Api:
    """``cross_entropy`` that averages over every target, padding included (forward and backward
    follow this wrong function)."""

    def wrong(*args: Any, **kwargs: Any) -> torch.Tensor:
        kwargs.pop("ignore_index", None)
        return fn(*args, **kwargs)

    return wrong


def tanh_approximation(fn: Api) -> Api:
    """``gelu`` computed with the tanh approximation whatever ``approximate`` asks for (a fast-GELU
    kernel standing in for the erf one): forward and backward follow the approximation, off by
    up to 4.7e-4 (absolute) in the forward."""

    def fast(x: torch.Tensor, approximate: str = "none") -> torch.Tensor:
        return fn(x, approximate="tanh")

    return fast


def zero_row(token: int) -> Make:
    """``embedding`` returning zeros for one token id (a range check that drops the first id of a
    vocabulary shard)."""
    return recomputed(
        lambda fn, tokens, weight, *args, **kwargs: (
            fn(tokens, weight, *args, **kwargs) * (tokens != token).unsqueeze(-1)
        )
    )


def carry_dropped(tile: int) -> Make:
    """``cumsum`` whose last, partial tile does not add the carry of the tiles before it: the
    last ``n % tile`` elements along ``dim`` hold the running sum of their own tile only."""

    def wrong(fn: Api, x: torch.Tensor, dim: int, **kwargs: Any) -> torch.Tensor:
        n = x.shape[dim]
        start = n - n % tile
        out = fn(x, dim, **kwargs)
        out.narrow(dim, start, n - start).copy_(fn(x.narrow(dim, start, n - start), dim, **kwargs))
        return out

    return recomputed(wrong)


@recomputed
def running_sum_in_own_dtype(fn: Api, x: torch.Tensor, dim: int, **kwargs: Any) -> torch.Tensor:
    """``cumsum`` that keeps its running sum in the input's dtype: in fp16 each partial sum is rounded
    before the next term is added, an error that grows with the axis, where torch's kernel accumulates
    in fp32 and rounds each result once."""
    total = torch.zeros_like(x.select(dim, 0))
    sums = []
    for i in range(x.shape[dim]):
        total = total + x.select(dim, i)
        sums.append(total)
    return torch.stack(sums, dim)


def _per_channel_affine(out: torch.Tensor, weight: Any, bias: Any) -> torch.Tensor:
    """A norm's affine step on dimension 1 (channels)."""
    shape = [1, -1] + [1] * (out.dim() - 2)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


@recomputed
def unbiased_variance(
    fn: Api,
    x: torch.Tensor,
    running_mean: Any,
    running_var: Any,
    weight: Any = None,
    bias: Any = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> torch.Tensor:
    """Training-mode ``batch_norm`` normalising by the unbiased batch variance (n - 1) instead of
    the biased one: every output (before the affine step) smaller by about 1/(2n)."""
    dims = [d for d in range(x.dim()) if d != 1]
    mean = x.mean(dims, keepdim=True)
    var = x.var(dims, unbiased=True, keepdim=True)
    return _per_channel_affine((x - mean) / torch.sqrt(var + eps), weight, bias)


@recomputed
def interleaved_groups(
    fn: Api, x: torch.Tensor, groups: int, weight: Any = None, bias: Any = None, eps: float = 1e-5
) -> torch.Tensor:
    """``group_norm`` whose groups take every ``groups``-th channel (c, c + G, c + 2G, ...) instead
    of contiguous channels: a channel-blocked layout (Ascend's NC1HWC0) read with the wrong stride."""
    channels = x.shape[1]
    order = torch.arange(channels).reshape(-1, groups).t().flatten()
    normed = fn(x[:, order], groups, None, None, eps)[:, torch.argsort(order)]
    return _per_channel_affine(normed, weight, bias)


@recomputed
def last_index_off_by_one(fn: Api, x: torch.Tensor, dim: int, index: torch.Tensor) -> torch.Tensor:
    """``index_select`` reading the row after the one its last index names (a tail off by one)."""
    shifted = index.clone()
    shifted[-1] = (shifted[-1] + 1) % x.shape[dim]
    return fn(x, dim, shifted)


def label_smoothing_ignored(fn: Api) -> Api:
    """``cross_entropy`` that drops ``label_smoothing`` (forward and backward follow this wrong
    function)."""

    def wrong(*args: Any, **kwargs: Any) -> torch.Tensor:
        kwargs.pop("label_smoothing", None)
        return fn(*args, **kwargs)

    return wrong


# --- wrong backwards ---------------------------------------------------------------------------


def silu_without_x_term(
    position: int, g: torch.Tensor, tensors: Sequence[torch.Tensor], incoming: Grads
) -> torch.Tensor:
    """d silu/dx = s(x) (1 + x (1 - s(x))); this kernel keeps s(x) only."""
    (g_out,) = incoming
    assert g_out is not None
    return g_out * torch.sigmoid(tensors[0])


def gelu_without_x_term(
    position: int, g: torch.Tensor, tensors: Sequence[torch.Tensor], incoming: Grads
) -> torch.Tensor:
    """d gelu/dx = Phi(x) + x phi(x); this kernel keeps Phi(x) only."""
    (g_out,) = incoming
    assert g_out is not None
    x = tensors[0].float()
    return (g_out.float() * 0.5 * (1 + torch.erf(x / math.sqrt(2)))).to(g.dtype)


def on_argument(position: int, fix: GradFix) -> GradFix:
    """``fix`` for the gradient of one argument only (e.g. a weight), the others exact."""

    def one(p: int, g: torch.Tensor, tensors: Sequence[torch.Tensor], incoming: Grads) -> torch.Tensor:
        return fix(p, g, tensors, incoming) if p == position else g

    return one


def divided(by: float) -> GradFix:
    return lambda p, g, tensors, incoming: g / by


def zero_grad(p: int, g: torch.Tensor, tensors: Sequence[torch.Tensor], incoming: Grads) -> torch.Tensor:
    return torch.zeros_like(g)


def embedding_last_write_wins(
    position: int, g: torch.Tensor, tensors: Sequence[torch.Tensor], incoming: Grads
) -> torch.Tensor:
    """Weight gradient written, not accumulated, per token: a row used by several tokens keeps one
    token's gradient instead of their sum (a scatter without atomic add)."""
    if position != 1:
        return g
    (g_out,) = incoming
    assert g_out is not None
    tokens = tensors[0].reshape(-1)
    wrong = torch.zeros_like(g)
    wrong[tokens] = g_out.reshape(len(tokens), -1)
    return wrong


def nearest_not_accumulated(
    position: int, g: torch.Tensor, tensors: Sequence[torch.Tensor], incoming: Grads
) -> torch.Tensor:
    """Backward of a 2x nearest upsampling that writes instead of adding: each input pixel keeps
    the gradient of the top-left of its four output pixels instead of their sum."""
    (g_out,) = incoming
    assert g_out is not None
    return g_out[..., ::2, ::2].contiguous()


# --- faults of the multi-step and multi-rank scenarios (training.py) ---------------------------


def tail(corrupt: Corrupt, n: int) -> Corrupt:
    """``corrupt`` on the last ``n`` elements (the tail tile of the flattened output); the rest exact."""

    def last(out: torch.Tensor) -> torch.Tensor:
        wrong = out.clone()
        flat = wrong.view(-1)
        flat[-n:] = corrupt(flat[-n:])
        return wrong

    return last


def weight_grad_tail_dropped(tile: int) -> GradFix:
    """A linear's weight gradient summed over whole tiles of ``tile`` rows only: the last, partial
    tile of a batch that is not a multiple of ``tile`` is dropped."""

    def fix(position: int, g: torch.Tensor, tensors: Sequence[torch.Tensor], incoming: Grads) -> torch.Tensor:
        (g_out,) = incoming
        assert g_out is not None
        x = tensors[0].reshape(-1, tensors[0].shape[-1])
        rows = g_out.reshape(-1, g_out.shape[-1])
        keep = len(rows) - len(rows) % tile
        return (rows[:keep].t() @ x[:keep]).to(g.dtype)

    return on_argument(1, fix)


def lstm_backward_skips_first_step(fn: Api) -> Api:
    """``_VF.lstm`` on a batch-first input whose backward stops before t = 0: the forward exact; the
    gradients are those of the steps t >= 1 run from the (constant) state after t = 0, so the input's
    gradient at t = 0 is zero and the weights miss t = 0's share."""

    def call(x: torch.Tensor, hx: Sequence[torch.Tensor], params: Sequence[torch.Tensor], *rest: Any) -> Any:
        truncated: list[Grads] = []

        def fix(
            position: int, g: torch.Tensor, tensors: Sequence[torch.Tensor], incoming: Grads
        ) -> torch.Tensor:
            if not truncated:
                truncated.append(_truncated_grads(fn, tensors, incoming, len(hx), rest))
            got = truncated[0][position]
            return torch.zeros_like(g) if got is None else got

        return with_backward(fn, fix)(x, hx, params, *rest)

    return call


def _truncated_grads(
    fn: Api, tensors: Sequence[torch.Tensor], incoming: Grads, states: int, rest: tuple[Any, ...]
) -> Grads:
    x, hx, params = tensors[0], list(tensors[1 : 1 + states]), list(tensors[1 + states :])
    (g_out, *_) = incoming
    assert g_out is not None
    with torch.enable_grad():
        leaves = [t.detach().requires_grad_() for t in (x, *params)]
        first = fn(leaves[0][:, :1].detach(), hx, leaves[1:], *rest)
        later = [s.detach() for s in first[1:]]
        out = fn(leaves[0][:, 1:], later, leaves[1:], *rest)[0]
        grads = torch.autograd.grad(out, leaves, g_out[:, 1:], allow_unused=True)
    gx = torch.zeros_like(x)
    gx[:, 1:] = grads[0][:, 1:]
    return [gx, *([None] * states), *grads[1:]]


def collective_tail_scaled(factor: float, n: int) -> Make:
    """An in-place collective (``all_reduce``) whose result's last ``n`` elements come out times
    ``factor`` on this rank (a reduction kernel that scales its last tile twice)."""

    def make(fn: Api) -> Api:
        def wrong(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            work = fn(tensor, *args, **kwargs)
            with torch.no_grad():
                tensor.view(-1)[-n:].mul_(factor)
            return work

        return wrong

    return make
