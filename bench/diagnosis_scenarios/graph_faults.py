"""Faults that keep the true op's autograd graph, for scenarios dumped with a real dump tool
(``bench/msprobe_scenarios.py``, ``bench/ptdbg_scenarios.py``; torch only, loaded by path).

A plain ``lambda x: 1.01 * F.gelu(x)`` would add a ``mul`` node, and a dump tool records the
backward of the node the output hangs from. Instead a forward fault runs the true op and
overwrites its output's values through ``.data`` (:func:`corrupted`: its backward is the true one
at the inputs the op saved); a backward fault runs the true op and hooks the op's autograd node
(:func:`hooked`), rewriting the gradients it produces, in the node's own order, before the tool's
hook, registered later on the same node, records them. :func:`faulty` (a
``torch.autograd.Function`` around the true op) changes the node: for an op the tool does not see.

Everything a fault computes, in a forward or a backward, uses the torch functions and
``Tensor`` methods as they were when this module was loaded, before the tool wraps them: a tool
records an API called outside any other API (a backward hook) as a forward call.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import torch

# the originals, before a dump tool wraps the module attributes
_mul, _add, _erf, _sigmoid, _rand, _zeros_like, _sub = (
    torch.mul,
    torch.add,
    torch.erf,
    torch.sigmoid,
    torch.rand,
    torch.zeros_like,
    torch.sub,
)
_detach, _requires_grad_, _gt, _to, _copy_ = (
    torch.Tensor.detach,
    torch.Tensor.requires_grad_,
    torch.gt,
    torch.Tensor.to,
    torch.Tensor.copy_,
)
_autograd_grad = torch.autograd.grad

Tensors = tuple[torch.Tensor, ...]
Grads = list[torch.Tensor | None]
FwdFix = Callable[[Tensors, list[torch.Tensor]], Tensors]  # (outputs, inputs) -> outputs
# (input gradients, inputs, output gradients) -> input gradients
BwdFix = Callable[[Grads, list[torch.Tensor], Tensors], Grads]


class _Slot:
    def __init__(self, index: int) -> None:
        self.index = index


def _flatten(obj: Any, out: list[torch.Tensor]) -> Any:
    if isinstance(obj, torch.Tensor):
        out.append(obj)
        return _Slot(len(out) - 1)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_flatten(o, out) for o in obj)
    if isinstance(obj, dict):
        return {k: _flatten(v, out) for k, v in obj.items()}
    return obj


def _fill(template: Any, tensors: list[torch.Tensor]) -> Any:
    if isinstance(template, _Slot):
        return tensors[template.index]
    if isinstance(template, (list, tuple)):
        return type(template)(_fill(t, tensors) for t in template)
    if isinstance(template, dict):
        return {k: _fill(v, tensors) for k, v in template.items()}
    return template


class _Faulty(torch.autograd.Function):
    """The true op run on detached copies of its inputs (its own graph kept for the backward); the
    forward value and the input gradients passed through the fixes."""

    @staticmethod
    def forward(ctx: Any, spec: tuple[Any, ...], *tensors: torch.Tensor) -> Any:
        fn, args, kwargs, fwd, bwd = spec
        with torch.enable_grad():
            leaves = [_requires_grad_(_detach(t)) if t.requires_grad else _detach(t) for t in tensors]
            out = fn(*_fill(args, leaves), **_fill(kwargs, leaves))
        single = isinstance(out, torch.Tensor)
        outs = (out,) if single else tuple(out)
        ctx.leaves, ctx.outs, ctx.bwd = leaves, outs, bwd
        values = tuple(_detach(o) for o in outs)
        if fwd is not None:
            with torch.no_grad():
                values = fwd(values, leaves)
        return values[0] if single else values

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> Any:
        need = [i for i, leaf in enumerate(ctx.leaves) if leaf.requires_grad]
        pairs = [(o, g) for o, g in zip(ctx.outs, grads, strict=True) if o.requires_grad and g is not None]
        result: Grads = [None] * len(ctx.leaves)
        if need and pairs:
            got = _autograd_grad(
                [o for o, _ in pairs], [ctx.leaves[i] for i in need], [g for _, g in pairs], allow_unused=True
            )
            for i, g in zip(need, got, strict=True):
                result[i] = g
        if ctx.bwd is not None:
            result = ctx.bwd(result, ctx.leaves, grads)
        return (None, *result)


def faulty(
    fn: Callable[..., Any], fwd: FwdFix | None = None, bwd: BwdFix | None = None, nth: int | None = None
) -> Callable[..., Any]:
    """``fn`` with a forward and/or backward fix, on its ``nth`` call only (0-based) or on all."""
    count = itertools.count()

    def call(*args: Any, **kwargs: Any) -> Any:
        k = next(count)
        if nth is not None and k != nth:
            return fn(*args, **kwargs)
        tensors: list[torch.Tensor] = []
        a, kw = _flatten(args, tensors), _flatten(kwargs, tensors)
        out = _Faulty.apply((fn, a, kw, fwd, bwd), *tensors)
        return out

    call.__name__ = getattr(fn, "__name__", "faulty")
    return call


class _ReluNotWritten(torch.autograd.Function):
    """An in-place ReLU whose result is never written: the input comes out unchanged (marked
    dirty as relu_ marks it); the backward is the true one (the gradient where x > 0)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(_gt(x, 0))
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        (mask,) = ctx.saved_tensors
        return _mul(g, mask)


def relu_not_written(fn: Callable[..., Any], nth: int) -> Callable[..., Any]:
    count = itertools.count()

    def relu(x: torch.Tensor, inplace: bool = False) -> torch.Tensor:
        if next(count) == nth and inplace:
            return _ReluNotWritten.apply(x)
        return fn(x, inplace=inplace)

    return relu


def corrupted(fn: Callable[..., Any], fix: FwdFix, nth: int | None = None) -> Callable[..., Any]:
    """A forward fault that keeps the true op's autograd node: the true op runs, then its (first)
    output's values are overwritten through ``.data`` (no version bump: the true backward runs
    on what the op saved)."""
    count = itertools.count()

    def call(*args: Any, **kwargs: Any) -> Any:
        out = fn(*args, **kwargs)
        if nth is None or next(count) == nth:
            first = out if isinstance(out, torch.Tensor) else out[0]
            with torch.no_grad():
                _copy_(first.data, fix((_detach(first),), [])[0])
        return out

    return call


# (gradients the node produces, gradients it got, the API call's arguments) -> the first
NodeFix = Callable[[list[Any], tuple[torch.Tensor, ...], tuple[Any, ...]], list[Any]]


def hooked(fn: Callable[..., Any], fix: NodeFix, nth: int | None = None) -> Callable[..., Any]:
    """A backward fault that keeps the true op's autograd node: the true op runs, and a hook on
    its output's node rewrites the gradients the node produces (``fix(grad_inputs, grad_outputs,
    args)``, in the node's order) before msprobe's hook, registered later on the same node, sees
    them."""
    count = itertools.count()

    def call(*args: Any, **kwargs: Any) -> Any:
        out = fn(*args, **kwargs)
        if nth is None or next(count) == nth:
            first = out if isinstance(out, torch.Tensor) else out[0]
            first.grad_fn.register_hook(lambda gi, go: tuple(fix(list(gi), go, args)))
        return out

    return call


def _position(grads: list[torch.Tensor | None], like: torch.Tensor) -> int:
    """The node output holding the gradient of ``like`` (an argument): the one of its shape, or of
    its transpose (``addmm``'s gradient for ``weight.t()``)."""
    shapes = [None if g is None else tuple(g.shape) for g in grads]
    for shape in (tuple(like.shape), tuple(like.shape)[::-1]):
        if shapes.count(shape) == 1:
            return shapes.index(shape)
    raise ValueError(f"no unique gradient of shape {tuple(like.shape)} in {shapes}")


def node_perturb(arg: int, scale: float, seed: int) -> NodeFix:
    """The gradient for argument ``arg`` times ``1 + scale * u``, ``u`` uniform in [-1, 1]."""

    def fix(gi: list[torch.Tensor | None], go: tuple[torch.Tensor, ...], args: tuple[Any, ...]) -> list[Any]:
        i = _position(gi, args[arg])
        g = gi[i]
        assert g is not None
        gi[i] = _mul(g, _add(_mul(_to(_uniform(g.shape, seed), g.dtype), scale), 1))
        return gi

    return fix


def node_scale(arg: int, factor: float) -> NodeFix:
    def fix(gi: list[torch.Tensor | None], go: tuple[torch.Tensor, ...], args: tuple[Any, ...]) -> list[Any]:
        i = _position(gi, args[arg])
        gi[i] = _mul(gi[i], factor)
        return gi

    return fix


def node_silu_without_x_term(gi: list[Any], go: tuple[torch.Tensor, ...], args: tuple[Any, ...]) -> list[Any]:
    """d silu/dx = s(x) (1 + x (1 - s(x))); this kernel keeps s(x) only."""
    return [_mul(go[0], _sigmoid(args[0]))]


def node_gelu_without_x_term(gi: list[Any], go: tuple[torch.Tensor, ...], args: tuple[Any, ...]) -> list[Any]:
    """d gelu/dx = Phi(x) + x phi(x); this kernel keeps Phi(x) only."""
    return [_mul(go[0], _mul(_add(_erf(_mul(args[0], 1 / math.sqrt(2))), 1), 0.5))]


def nth_call(fn: Callable[..., Any], bad: Callable[..., Any], nth: int) -> Callable[..., Any]:
    """``bad`` on the ``nth`` call (0-based), ``fn`` on the others."""
    count = itertools.count()

    def call(*args: Any, **kwargs: Any) -> Any:
        return (bad if next(count) == nth else fn)(*args, **kwargs)

    return call


def eps_of(fn: Callable[..., Any], eps: float) -> Callable[..., Any]:
    """``layer_norm`` with a wrong ``eps``."""
    return lambda x, shape, weight=None, bias=None, eps_=1e-5: fn(x, shape, weight, bias, eps)


def _uniform(shape: torch.Size, seed: int) -> torch.Tensor:
    return _sub(_mul(_rand(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float32), 2), 1)


def scale_out(factor: float) -> FwdFix:
    return lambda outs, ins: (_mul(outs[0], factor), *outs[1:])


def jitter_out(scale: float, seed: int = 7) -> FwdFix:
    def fix(outs: Tensors, ins: list[torch.Tensor]) -> Tensors:
        factor = _to(_add(_mul(_uniform(outs[0].shape, seed), scale), 1), outs[0].dtype)
        return (_mul(outs[0], factor), *outs[1:])

    return fix


def zero_out(outs: Tensors, ins: list[torch.Tensor]) -> Tensors:
    return (_zeros_like(outs[0]), *outs[1:])


def shift_out(delta: float) -> FwdFix:
    return lambda outs, ins: (_add(outs[0], delta), *outs[1:])


def perturb_grad(position: int, scale: float, seed: int) -> BwdFix:
    """The gradient of input ``position`` times ``1 + scale * u``, ``u`` uniform in [-1, 1]."""

    def fix(grads: Grads, ins: list[torch.Tensor], gouts: Tensors) -> Grads:
        g = grads[position]
        if g is not None:
            u = _to(_uniform(g.shape, seed), g.dtype)
            grads = [*grads[:position], _mul(g, _add(_mul(u, scale), 1)), *grads[position + 1 :]]
        return grads

    return fix
