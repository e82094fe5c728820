"""Deliberately wrong backward passes, to show (and test) that a compare finds the op at fault.

    with faulty_backward(torch._VF, "lstm", scale=1.0):
        ...  # LSTM forward is exact, the gradients it produces for its inputs are perturbed

Each produced gradient ``g`` becomes ``g * (1 + scale * u)`` with ``u`` uniform in [-1, 1] from a
generator seeded with ``seed`` (deterministic; ``scale=1.0`` drops the cosine well below 0.99).
Installed before or after ``PrecisionDebugger.start()``, the faulty version runs *under* the
dumper's wrapper, so the dump still names the call ``VF_lstm_0`` / ``Torch_tanh_0``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from dumper.backward import replace_leaves
from dumper.capture import tensor_leaves
from dumper.patching import slot_of


def _perturb(g: torch.Tensor, scale: float, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    u = torch.rand(g.shape, generator=gen, dtype=torch.float32).mul_(2).sub_(1)
    return g * (1 + scale * u.to(device=g.device, dtype=g.dtype))


class _FaultyBackward(torch.autograd.Function):
    """Runs ``fn`` exactly; its backward is the true one with the produced gradients perturbed."""

    @staticmethod
    def forward(ctx: Any, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                box: list[Any], scale: float, seed: int, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        paths = [p for p, _ in tensor_leaves(args)]
        inner = [t.detach().requires_grad_(t.requires_grad) for t in tensors]
        with torch.enable_grad():
            out = fn(*replace_leaves(args, dict(zip(paths, inner, strict=True))), **kwargs)
        out_leaves = list(tensor_leaves(out))
        box.append((out, [p for p, _ in out_leaves]))
        ctx.inner, ctx.outs, ctx.scale, ctx.seed = inner, [t for _, t in out_leaves], scale, seed
        return tuple(t.detach() for _, t in out_leaves)

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor | None) -> tuple[Any, ...]:
        pairs = [(o, g) for o, g in zip(ctx.outs, grads, strict=True) if g is not None and o.requires_grad]
        wanted = [t for t in ctx.inner if t.requires_grad]
        produced = iter(torch.autograd.grad([o for o, _ in pairs], wanted, [g for _, g in pairs],
                                            allow_unused=True) if pairs and wanted else ())
        result = []
        for t in ctx.inner:
            g = next(produced) if t.requires_grad else None
            result.append(None if g is None else _perturb(g, ctx.scale, ctx.seed))
        return (None,) * 6 + tuple(result)


def faulty(fn: Callable[..., Any], scale: float = 1.0, seed: int = 0) -> Callable[..., Any]:
    """``fn`` with an exact forward and a perturbed backward (see the module docstring)."""

    def wrong_backward(*args: Any, **kwargs: Any) -> Any:
        box: list[Any] = []
        tensors = [t for _, t in tensor_leaves(args)]
        results = _FaultyBackward.apply(fn, args, kwargs, box, scale, seed, *tensors)
        out, paths = box[0]
        return replace_leaves(out, dict(zip(paths, results, strict=True)))

    wrong_backward.__name__ = getattr(fn, "__name__", "faulty")
    return wrong_backward


@contextmanager
def faulty_backward(owner: Any, attr: str, scale: float = 1.0, seed: int = 0) -> Iterator[Callable[..., Any]]:
    """Replace ``owner.attr`` (e.g. ``torch._VF``, ``"lstm"``) by :func:`faulty` of it, then restore."""
    current = getattr(owner, attr)
    slot = slot_of(current)
    true_fn = slot.original if slot is not None else current
    own_attr = attr in vars(owner)
    bad = faulty(true_fn, scale, seed)
    if slot is not None:
        slot.original = bad
    else:
        setattr(owner, attr, bad)
    try:
        yield bad
    finally:
        current = getattr(owner, attr)
        slot = slot_of(current)
        if slot is not None and slot.original is bad:
            slot.original = true_fn
        elif current is bad:
            if own_attr:
                setattr(owner, attr, true_fn)
            else:
                delattr(owner, attr)
