"""The module sidecar: for each API call, the chain of nn.Module names it ran inside.

It lives next to the pkl (``api_stack_dump.modules.jsonl``), never inside it, so the pkl stays
byte-compatible with the original. One JSON line per forward call:
``["Torch_add_0", [["head", "Head"], ["head.lstm", "LSTM"]]]`` — the call key is the entry
name's ``{api}_{index}``, shared by the call's forward and backward entries; the chain is
outermost first, each item ``[qualified name, class name]``. The model (the root) is in no chain but
that of a call in its own forward, which is the root alone: ``[["", "Net"]]``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ptdbg_tui.formats.pkl import KeyedFollower
from ptdbg_tui.formats.records import BadLine, short, shown
from ptdbg_tui.formats.unreadable import Malformed
from ptdbg_tui.formats.untrusted import is_one_line, one_line

SUFFIX = ".modules.jsonl"

ModuleChain = tuple[tuple[str, str], ...]


def within(name: str, path: str) -> bool:
    """Whether module ``name`` is module ``path`` or one of its submodules."""
    return name == path or name.startswith(path + ".")


def sidecar_path(pkl: str | os.PathLike[str]) -> Path:
    pkl = Path(pkl)
    return pkl.with_name(pkl.stem + SUFFIX)


def encode_module_line(call_key: str, chain: ModuleChain | list[tuple[str, str]]) -> str:
    return json.dumps([call_key, [list(item) for item in chain]])


def _from_value(value: Any, line: int) -> tuple[str, ModuleChain] | BadLine:
    try:
        key, chain = value
        if isinstance(key, str) and all(isinstance(x, str) for item in chain for x in item):
            if is_one_line("".join(x for item in chain for x in item)):
                return key, tuple((q, c) for q, c in chain)
            # module names and classes are shown and printed: one line each, control characters escaped
            return key, tuple((one_line(q), one_line(c)) for q, c in chain)
    except (TypeError, ValueError):
        pass
    return BadLine(line, Malformed.NOT_MODULE_LINE, short(value))


def _shown(item: tuple[str, ModuleChain]) -> tuple[str, ModuleChain]:
    return shown(item[0]), tuple((shown(q), shown(c)) for q, c in item[1])


class ModuleFollower(KeyedFollower[ModuleChain]):
    """Incremental reader of a module sidecar; malformed lines are kept in ``bad`` and skipped."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__(path, _from_value, _shown, by_tail=True)

    @property
    def chains(self) -> dict[str, ModuleChain]:
        return self.items
