"""The APIs to wrap: the lists of :mod:`ptdbg_tui.formats.wrapped_apis` intersected with what this torch
actually has."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import logging
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import torch

from ptdbg_tui.formats.wrapped_apis import NAMESPACES, QUALIFIED, YAML_PATH, load_lists

log = logging.getLogger("dumper")

#: In-place collectives: their args are dumped before (input) and again after (output) the call.
INPLACE_COMM = frozenset(
    {
        "broadcast",
        "all_reduce",
        "reduce",
        "all_gather",
        "gather",
        "scatter",
        "reduce_scatter",
        "_reduce_scatter_base",
        "_all_gather_base",
        "reduce_scatter_tensor",
        "all_gather_into_tensor",
        "all_to_all",
        "all_to_all_single",
    }
)
#: Dropout APIs whose probability argument is (index, keyword).
DROPOUT_P = {
    **{
        ("Functional", n): (1, "p")
        for n in ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout")
    },
    **{
        ("Torch", n): (1, "p")
        for n in (
            "dropout",
            "dropout_",
            "alpha_dropout",
            "alpha_dropout_",
            "feature_dropout",
            "feature_dropout_",
            "feature_alpha_dropout",
            "feature_alpha_dropout_",
        )
    },
}
#: Recurrent kernels whose inter-layer dropout argument is forced to 0 with dropout.
RNN_KERNELS = frozenset({"lstm", "gru", "rnn_tanh", "rnn_relu"})


@dataclass(frozen=True, slots=True)
class ApiTarget:
    """One API to patch: where it lives, what the dump calls it, how it treats its arguments."""

    owners: tuple[Any, ...]  # objects whose attribute ``attr`` is replaced (the same original)
    attr: str
    api: str  # entry-name api part, e.g. ``Torch_add`` or ``Tensor___getitem__``
    prefix: str
    mutates_first: bool = False  # in-place on args[0]: it must not be swapped for a tap
    inplace_arg: int | None = None  # position of an ``inplace`` flag (functional activations)
    comm: bool = False  # in-place collective
    silent: bool = False  # wrapped only to hide the ops it runs inside
    lifted: bool = False  # runs with every wrapper lifted (TorchScript compiles the true APIs)

    @property
    def original(self) -> Any:
        return getattr(self.owners[0], self.attr)

    @property
    def qualname(self) -> str:
        """The qualified name a replay calls, e.g. ``torch.nn.functional.gelu``."""
        return f"{QUALIFIED[self.prefix]}.{self.attr}"


def _mutates_first(prefix: str, attr: str) -> bool:
    if attr.startswith("__"):
        return attr == "__setitem__" or (attr.startswith("__i") and attr not in ("__invert__", "__index__"))
    return attr.endswith("_") and not attr.startswith("_") and prefix in ("Tensor", "Torch", "Functional")


def _inplace_position(fn: Any) -> int | None:
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return None
    return params.index("inplace") if "inplace" in params else None


def _namespaces() -> list[tuple[str, str, tuple[Any, ...]]]:
    """(yaml key, prefix, owners) for the namespaces importable here."""
    spaces: list[tuple[str, str, tuple[Any, ...]]] = []
    for space in NAMESPACES:
        owners = _owners(space.module)
        if owners:
            spaces.append((space.key, space.prefix, owners))
    return spaces


def _owners(module: str) -> tuple[Any, ...]:
    """The objects whose attributes are a namespace's APIs; none where it is not importable."""
    if module == "torch.distributed":
        if not torch.distributed.is_available():
            return ()
        from torch.distributed import distributed_c10d

        return (torch.distributed, distributed_c10d)
    if module == "torch_npu":
        npu = _torch_npu()
        return () if npu is None else (npu,)
    owner: Any = torch
    for part in module.split(".")[1:]:
        owner = getattr(owner, part)
    return (owner,)


@cache
def _torch_npu() -> Any:
    if importlib.util.find_spec("torch_npu") is None:
        log.info("dumper: torch_npu is not installed; its fused operators (NPU_*) are not wrapped")
        return None
    try:
        return importlib.import_module("torch_npu")
    except Exception as e:  # a broken CANN install must not stop a CPU/GPU run
        log.warning("dumper: torch_npu failed to import (%s); NPU_* operators are not wrapped", e)
        return None


@cache
def targets(path: Path = YAML_PATH) -> tuple[ApiTarget, ...]:
    """Every wrappable API of the lists that exists in the installed packages (read once)."""
    lists = load_lists(path)
    found: list[ApiTarget] = []
    for key, prefix, owners in _namespaces():
        for attr in dict.fromkeys(lists.get(key, ())):
            fn = getattr(owners[0], attr, None)
            if not callable(fn):
                continue
            found.append(
                ApiTarget(
                    tuple(o for o in owners if getattr(o, attr, None) is fn),
                    attr,
                    f"{prefix}_{attr}",
                    prefix,
                    mutates_first=_mutates_first(prefix, attr)
                    or (key == "distributed" and attr in INPLACE_COMM),
                    inplace_arg=_inplace_position(fn) if prefix == "Functional" else None,
                    comm=key == "distributed" and attr in INPLACE_COMM,
                )
            )
    for key, owner in (
        ("silent_tensor", torch.Tensor),
        ("silent_autograd", torch.autograd),
        ("lifted_jit", torch.jit),
    ):
        lifted = key.startswith("lifted")
        found += [
            ApiTarget((owner,), attr, attr, "", silent=not lifted, lifted=lifted)
            for attr in lists.get(key, ())
            if callable(getattr(owner, attr, None))
        ]
    return tuple(found)


def dropout_position(target: ApiTarget) -> tuple[int, str | None] | None:
    """Where a dropout API takes its probability: (position, keyword), or None if it has none."""
    if (target.prefix, target.attr) in DROPOUT_P:
        return DROPOUT_P[target.prefix, target.attr]
    if target.prefix == "VF" and target.attr in RNN_KERNELS:
        return (-1, None)  # depends on the overload, see without_dropout
    return None


def without_dropout(
    position: tuple[int, str | None], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any], bool]:
    """The arguments with the dropout probability forced to 0 (and whether anything changed)."""
    index, keyword = position
    if index < 0:  # RNN kernels: (input, hx, params, has_biases, ..., dropout) or the packed form
        index = 5 if len(args) > 3 and isinstance(args[3], bool) else 6
    if keyword is not None and keyword in kwargs:
        changed = kwargs[keyword] != 0
        return args, {**kwargs, keyword: 0.0}, changed
    if len(args) > index:
        changed = args[index] != 0
        return (*args[:index], 0.0, *args[index + 1 :]), kwargs, changed
    if keyword is not None:  # probability left at its default (0.5 for F.dropout)
        return args, {**kwargs, keyword: 0.0}, True
    return args, kwargs, False
