"""Seeing the gradients of one API call, whatever autograd nodes it is made of.

The original hooks the last autograd node of the first output (``register_backward_hook``), so
composite APIs (linear without bias, LSTM on CPU) report some inner node's gradients. Here:

- inputs that require grad go through :class:`InputTap`, an identity Function, before the real
  op; its backward sees exactly the gradients this op produced for them (``backward_output``);
- a hook on the outputs sees the gradients flowing in (``backward_input``), the loss's seed
  gradient included (:func:`hook_outputs`).

The tap returns detached aliases rather than views, so the op's outputs stay ordinary tensors
that user code may modify in place (``nn.ReLU(inplace=True)`` after a dumped conv).
"""

from __future__ import annotations

import threading
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


def tap_inputs(
    args: tuple[Any, ...], tensors: dict[tuple[int, ...], torch.Tensor], sink: Sink
) -> tuple[tuple[Any, ...], tuple[torch.Tensor, ...]]:
    """The args with ``tensors`` (path -> tensor) routed through one :class:`InputTap`, and the
    tap's outputs."""
    tapped = InputTap.apply(sink, *tensors.values())
    return replace_leaves(args, dict(zip(tensors, tapped, strict=True))), tapped


def aliases_tap(out: Any, tapped: tuple[torch.Tensor, ...]) -> bool:
    """Whether the call returned one of the tap's outputs or a view of one (``x[0:2]``,
    ``x.view(...)``, ``x.float()`` of a float ``x``, dropout at p=0): autograd takes such a tensor
    for the tap's, not the input's, so an in-place op on it would never reach the input's graph."""
    if isinstance(out, torch.Tensor):
        return any(out is t or out._base is t for t in tapped)
    if isinstance(out, (list, tuple)):
        return any(aliases_tap(o, tapped) for o in out)
    return False


def hook_outputs(tensors: list[torch.Tensor], sink: Sink) -> None:
    """Call ``sink`` once a backward pass has brought the gradients of all ``tensors`` (``None`` for
    those that got none).

    As ``torch.autograd.graph.register_multi_grad_hook`` (mode ``all``), a tensor hook each, waiting
    for the tensors whose node the engine will run; but a tensor that is the pass's root (the loss
    of ``loss.backward()``) counts too: its node is not among those, so torch's hook never fires
    there, and the loss's seed gradient (1.0), which the original records, would be lost."""
    nodes = [t.grad_fn for t in tensors]
    count = len(tensors)  # the hooks must not hold the tensors: each tensor holds its hook
    lock = threading.Lock()
    passes: dict[int, tuple[list[torch.Tensor | None], set[int]]] = {}  # graph task -> (grads, hooks run)

    def hook_of(i: int) -> Callable[[torch.Tensor], None]:
        def hook(grad: torch.Tensor) -> None:
            task = torch._C._current_graph_task_id()
            with lock:
                grads, ran = passes.setdefault(task, ([None] * count, set()))
                grads[i] = grad
                ran.add(i)
                expected = {
                    k
                    for k, node in enumerate(nodes)
                    if node is not None and torch._C._will_engine_execute_node(node)
                }
                if not ran >= expected:
                    return
                del passes[task]
            sink(grads)

        return hook

    for i, t in enumerate(tensors):
        t.register_hook(hook_of(i))
