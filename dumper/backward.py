"""Seeing the gradients of one API call, whatever autograd nodes it is made of.

The original hooks the last autograd node of the first output (``register_backward_hook``), so
composite APIs (linear without bias, LSTM on CPU) report some inner node's gradients. Here:

- inputs that require grad go through :class:`InputTap`, an identity Function, before the real
  op; its backward sees exactly the gradients this op produced for them (``backward_output``);
- a multi-grad hook on the outputs sees the gradients flowing in (``backward_input``).

The tap returns detached aliases rather than views, so the op's outputs stay ordinary tensors
that user code may modify in place (``nn.ReLU(inplace=True)`` after a dumped conv).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

Sink = Callable[[Sequence[torch.Tensor | None]], None]


class InputTap(torch.autograd.Function):
    """Identity on the way forward; hands the incoming gradients to a sink on the way back."""

    @staticmethod
    def forward(ctx: Any, sink: Sink, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        ctx.sink = sink
        ctx.set_materialize_grads(False)  # a gradient that never came stays None (skipped)
        return tuple(t.detach() for t in tensors)

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor | None) -> tuple[torch.Tensor | None, ...]:
        ctx.sink(grads)
        return (None, *grads)


def replace_leaves(value: Any, new: dict[tuple[int, ...], torch.Tensor], path: tuple[int, ...] = ()) -> Any:
    """``value`` with the tensors at the given paths swapped (lists and tuples rebuilt)."""
    if path in new:
        return new[path]
    if isinstance(value, (list, tuple)) and any(p[: len(path)] == path and len(p) > len(path) for p in new):
        items = [replace_leaves(v, new, (*path, i)) for i, v in enumerate(value)]
        if isinstance(value, list):
            return items
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    return value


def tap_inputs(args: tuple[Any, ...], tensors: dict[tuple[int, ...], torch.Tensor],
               sink: Sink) -> tuple[Any, ...]:
    """The args with ``tensors`` (path -> tensor) routed through one :class:`InputTap`."""
    tapped = InputTap.apply(sink, *tensors.values())
    return replace_leaves(args, dict(zip(tensors, tapped, strict=True)))


def hook_outputs(tensors: list[torch.Tensor], sink: Sink) -> None:
    """Call ``sink`` once with the gradients of all ``tensors`` (None for those that got none)."""
    torch.autograd.graph.register_multi_grad_hook(tensors, sink, mode="all")
