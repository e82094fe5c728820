"""The APIs the dumper wraps, by namespace: the lists in ``support_wrap_ops.yaml`` and what a dump
and torch call each namespace. The dumper wraps them and a replay calls nothing else, so both read
them here; no torch (the dumper intersects the lists with the installed torch itself).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

YAML_PATH = Path(__file__).with_name("support_wrap_ops.yaml")


@dataclass(frozen=True, slots=True)
class Namespace:
    """One namespace whose APIs are wrapped."""

    key: str  # its list's key in the yaml
    prefix: str  # the dump's entry names start with it (``Functional_gelu_0_forward``)
    module: str  # where its APIs are called from (``torch.nn.functional``)


NAMESPACES = (
    Namespace("tensor", "Tensor", "torch.Tensor"),
    Namespace("torch", "Torch", "torch"),
    Namespace("functional", "Functional", "torch.nn.functional"),
    Namespace("_VF", "VF", "torch._VF"),
    Namespace("distributed", "Distributed", "torch.distributed"),
    Namespace("torch_npu", "NPU", "torch_npu"),
)
#: The module a prefix's APIs are called through, for the qualified name of each (``torch.Tensor.add_``).
QUALIFIED = {space.prefix: space.module for space in NAMESPACES}


def load_lists(path: Path = YAML_PATH) -> dict[str, list[str]]:
    """Each yaml key's API names, as written (the wrapped namespaces' and the silent and lifted ones)."""
    import yaml  # the ``dump`` extra's: only the dumper and a replay read the lists

    with open(path, encoding="utf-8") as f:
        data = yaml.safe_load(f)
    return {str(k): [str(n) for n in v] for k, v in data.items()}


@cache
def wrapped(module: str) -> frozenset[str]:
    """The API names listed for a namespace's module (``torch.nn.functional``); none for another."""
    key = next((space.key for space in NAMESPACES if space.module == module), None)
    return frozenset(load_lists().get(key, ())) if key is not None else frozenset()
