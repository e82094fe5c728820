"""A call run again with torch alone: its arguments rebuilt, the call (in place into a copy), its results
by path, and for a backward call the gradients of the recorded arguments from the recorded incoming
gradients (the forward rebuilt under autograd).

:mod:`~.run` replays with it, and every repro script (:mod:`~.repro`) carries a copy of this file's
code: ``python repro.py`` needs torch and nothing of this project. So this module imports nothing but
torch and the standard library.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

ArgPath = tuple[Any, ...]  # where a value sits in the arguments: (2, 0) the third one's first element


class Refused(Exception):
    """The call cannot be replayed as recorded (the message says why)."""


@dataclass
class Call:
    """A call ready to run: the function, its arguments with the tensors in place, and what it writes into."""

    fn: Callable[..., Any]
    args: list[Any]
    kwargs: dict[str, Any]
    inplace: int | None = None  # the argument the call writes into
    method: bool = False  # a ``torch.Tensor`` method: an in-place one returns its target
    floats: dict[ArgPath, torch.Tensor] = field(default_factory=dict)  # its floating tensors, by path

    def __post_init__(self) -> None:
        if not self.floats:
            self.floats = dict(floating(self.args, self.kwargs))


def leaves(
    args: Sequence[Any], kwargs: Mapping[str, Any], keep: Callable[[Any], bool]
) -> Iterator[tuple[ArgPath, Any]]:
    """The values among the arguments (nested in lists, tuples and dicts) that ``keep`` keeps, by path."""

    def walk(x: Any, path: ArgPath) -> Iterator[tuple[ArgPath, Any]]:
        if keep(x):
            yield path, x
        elif isinstance(x, (list, tuple)):
            for i, y in enumerate(x):
                yield from walk(y, (*path, i))
        elif isinstance(x, dict):
            for k, y in x.items():
                yield from walk(y, (*path, k))

    for i, a in enumerate(args):
        yield from walk(a, (i,))
    for k, v in kwargs.items():
        yield from walk(v, (k,))


def floating(args: Sequence[Any], kwargs: Mapping[str, Any]) -> Iterator[tuple[ArgPath, torch.Tensor]]:
    """The floating tensors among the arguments, by path."""
    return leaves(args, kwargs, lambda x: isinstance(x, torch.Tensor) and x.is_floating_point())


def put(tree: Any, path: ArgPath, value: Any) -> Any:
    """``tree`` with the element at ``path`` replaced (tuples rebuilt)."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(tree, tuple):
        items = list(tree)
        items[head] = put(items[head], rest, value)
        return type(tree)(items)
    tree[head] = put(tree[head], rest, value)
    return tree


def flatten(value: Any, path: ArgPath = ()) -> Iterator[tuple[ArgPath, torch.Tensor]]:
    """The tensors of a call's result, by path (``()`` for a lone tensor)."""
    if isinstance(value, torch.Tensor):
        yield path, value
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from flatten(v, (*path, i))


def matching(paths: dict[ArgPath, Any], path: ArgPath) -> Any:
    """The entry at ``path``, the ptdbg and msprobe ways of naming a lone result alike."""
    for p in (path, (0,) if path == () else path, () if path == (0,) else path):
        if p in paths:
            return paths[p]
    return None


def invoke(c: Call) -> Any:
    """The call's result; an in-place call writes into a copy (the recorded input stays as read)."""
    args = c.args
    if c.inplace is not None and isinstance(args[c.inplace], torch.Tensor):
        args = list(args)
        args[c.inplace] = args[c.inplace].clone()
    out = c.fn(*args, **c.kwargs)
    if c.inplace is not None and (out is None or c.method):
        out = args[c.inplace]
    return out


def forward(c: Call) -> dict[ArgPath, torch.Tensor]:
    with torch.no_grad():
        return dict(flatten(invoke(c)))


def backward(
    c: Call, grads_of: list[ArgPath], incoming: dict[ArgPath, torch.Tensor]
) -> dict[ArgPath, torch.Tensor]:
    """The gradients of the arguments at ``grads_of`` given the incoming gradients of the results
    (``incoming``, by result path; a result without one gets zeros)."""
    leaves: dict[ArgPath, torch.Tensor] = {}
    for path in grads_of:
        t = matching(c.floats, path)
        if t is None:
            raise Refused(f"the gradient {path} has no floating argument to belong to")
        leaf = t.detach().requires_grad_(True)
        leaves[path] = leaf
        key = path if path in c.floats else next(p for p in c.floats if c.floats[p] is t)
        target = c.args if isinstance(key[0], int) else c.kwargs
        put(target, key, leaf.clone() if c.inplace is not None else leaf)
    with torch.enable_grad():
        outs = [(p, t) for p, t in flatten(invoke(c)) if t.requires_grad]
        if not outs:
            raise Refused("its result does not depend on the arguments whose gradients were recorded")
        grads_out = []
        for p, t in outs:
            g = matching(incoming, p)
            grads_out.append(torch.zeros_like(t) if g is None else g.to(t.dtype).reshape(t.shape))
        found = torch.autograd.grad([t for _, t in outs], list(leaves.values()), grads_out, allow_unused=True)
    return {p: torch.zeros_like(leaves[p]) if g is None else g for p, g in zip(leaves, found, strict=True)}


def compute(
    c: Call, direction: str, grads_of: list[ArgPath], incoming: dict[ArgPath, torch.Tensor]
) -> dict[ArgPath, torch.Tensor]:
    """A forward call's results, or a backward call's gradients (of the arguments at ``grads_of``)."""
    return forward(c) if direction == "forward" else backward(c, grads_of, incoming)


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    """‖a − b‖ / ‖b‖ over the elements finite in both."""
    a, b = a.detach().to(torch.float64).reshape(-1), b.detach().to(torch.float64).reshape(-1)
    if a.numel() != b.numel():
        return math.inf
    finite = torch.isfinite(a) & torch.isfinite(b)
    den = float(torch.linalg.vector_norm(b[finite]))
    num = float(torch.linalg.vector_norm((a - b)[finite]))
    return num / den if den > 0 else (0.0 if num == 0 else math.inf)
