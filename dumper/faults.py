"""Deliberately wrong APIs, to show (and test) that a compare finds the op at fault.

    with faulty_backward(torch._VF, "lstm", scale=1.0):
        ...  # LSTM forward is exact, the gradients it produces for its inputs are perturbed

Each produced gradient ``g`` becomes ``g * (1 + scale * u)`` with ``u`` uniform in [-1, 1] from a
generator seeded with ``seed`` (deterministic; ``scale=1.0`` drops the cosine well below 0.99).
Other wrong gradients: :func:`with_backward` takes any :data:`GradFix`; any other replacement of
an API: :func:`replaced`. Installed before or after ``PrecisionDebugger.start()``, the faulty
version runs *under* the dumper's wrapper, so the dump still names the call ``VF_lstm_0`` /
``Torch_tanh_0``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import torch

from dumper.backward import replace_leaves
from dumper.capture import tensor_leaves
from dumper.patching import slot_of

#: ``fix(position, true_grad, tensors, incoming)``: the gradient the call produces for its
#: ``position``-th tensor argument, given the true one, the call's tensor arguments and the
#: gradients flowing into its outputs (None for an output that got none); all detached.
GradFix = Callable[[int, torch.Tensor, Sequence[torch.Tensor], Sequence[torch.Tensor | None]], torch.Tensor]


def perturbation(scale: float, seed: int) -> GradFix:
    """``g * (1 + scale * u)``, ``u`` uniform in [-1, 1], the same ``u`` for the same shape."""

    def fix(
        position: int,
        g: torch.Tensor,
        tensors: Sequence[torch.Tensor],
        incoming: Sequence[torch.Tensor | None],
    ) -> torch.Tensor:
        gen = torch.Generator().manual_seed(seed)
        u = torch.rand(g.shape, generator=gen, dtype=torch.float32).mul_(2).sub_(1)
        return g * (1 + scale * u.to(device=g.device, dtype=g.dtype))

    return fix


class _FixedBackward(torch.autograd.Function):
    """Runs ``fn`` exactly; its backward is the true one with the produced gradients fixed up."""

    @staticmethod
    def forward(
        ctx: Any,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        box: list[Any],
        fix: GradFix,
        *tensors: torch.Tensor,
    ) -> tuple[torch.Tensor, ...]:
        paths = [p for p, _ in tensor_leaves(args)]
        inner = [t.detach().requires_grad_(t.requires_grad) for t in tensors]
        with torch.enable_grad():
            out = fn(*replace_leaves(args, dict(zip(paths, inner, strict=True))), **kwargs)
        out_leaves = list(tensor_leaves(out))
        box.append((out, [p for p, _ in out_leaves]))
        ctx.inner, ctx.outs, ctx.fix = inner, [t for _, t in out_leaves], fix
        return tuple(t.detach() for _, t in out_leaves)

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor | None) -> tuple[Any, ...]:
        pairs = [(o, g) for o, g in zip(ctx.outs, grads, strict=True) if g is not None and o.requires_grad]
        wanted = [t for t in ctx.inner if t.requires_grad]
        produced = iter(
            torch.autograd.grad([o for o, _ in pairs], wanted, [g for _, g in pairs], allow_unused=True)
            if pairs and wanted
            else ()
        )
        detached = [t.detach() for t in ctx.inner]
        result = []
        for position, t in enumerate(ctx.inner):
            g = next(produced) if t.requires_grad else None
            result.append(None if g is None else ctx.fix(position, g, detached, grads))
        return (None,) * 5 + tuple(result)


def with_backward(fn: Callable[..., Any], fix: GradFix) -> Callable[..., Any]:
    """``fn`` with an exact forward and the gradients it produces passed through ``fix``."""

    def wrong_backward(*args: Any, **kwargs: Any) -> Any:
        box: list[Any] = []
        tensors = [t for _, t in tensor_leaves(args)]
        results = _FixedBackward.apply(fn, args, kwargs, box, fix, *tensors)
        out, paths = box[0]
        return replace_leaves(out, dict(zip(paths, results, strict=True)))

    wrong_backward.__name__ = getattr(fn, "__name__", "faulty")
    return wrong_backward


def faulty(fn: Callable[..., Any], scale: float = 1.0, seed: int = 0) -> Callable[..., Any]:
    """``fn`` with an exact forward and a perturbed backward (see the module docstring)."""
    return with_backward(fn, perturbation(scale, seed))


@contextmanager
def replaced(
    owner: Any, attr: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]
) -> Iterator[Callable[..., Any]]:
    """Replace ``owner.attr`` by ``make(true function)``, under the dumper's wrapper when it is
    installed; restore it on the way out."""
    current = getattr(owner, attr)
    slot = slot_of(current)
    true_fn = slot.original if slot is not None else current
    own_attr = attr in vars(owner)
    bad = make(true_fn)
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


def faulty_backward(
    owner: Any, attr: str, scale: float = 1.0, seed: int = 0
) -> AbstractContextManager[Callable[..., Any]]:
    """Replace ``owner.attr`` (e.g. ``torch._VF``, ``"lstm"``) by :func:`faulty` of it, then restore."""
    return replaced(owner, attr, lambda fn: faulty(fn, scale, seed))
