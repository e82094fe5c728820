"""Which nn.Modules an API call ran inside, for the module sidecar (``*.modules.jsonl``).

Global module forward hooks keep a stack of the modules being run on the dumping thread. Names
are the qualified names of ``model.named_modules()`` when a model is given; otherwise the first
top-level module called is taken as the model and the others are named by their path in the
module running around them (``layers.17`` through a ModuleList that is never called itself), or
by class name when none runs around them. The model itself is the root and is
not part of a chain, so ``head.lstm`` reads ``[["head", "Head"], ["head.lstm", "LSTM"]]``; a call in
the root's own forward, in no submodule, has the root alone, ``[["", "Net"]]`` (a call outside every
module has no chain).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from typing import Any

from torch import nn
from torch.nn.modules import module as nn_module
from torch.utils.hooks import RemovableHandle

from dumper.patching import is_compiling
from ptdbg_tui.formats.modules import ModuleChain, within


class ModuleTracker:
    """The module stack of one thread while installed; ``scope`` lists the module paths whose calls
    are dumped (a path also covers its submodules; empty: every call)."""

    def __init__(self, model: nn.Module | None = None, scope: Sequence[str] = ()) -> None:
        self._model = model
        self.scope = tuple(scope)
        self._verdict: tuple[ModuleChain | None, bool] = (None, False)  # the last chain judged
        self._names: weakref.WeakKeyDictionary[nn.Module, str] = weakref.WeakKeyDictionary()
        if model is not None:
            for name, module in model.named_modules():
                self._names.setdefault(module, name)
        self._stack: list[tuple[nn.Module, str, str]] = []
        self._chain: ModuleChain = ()  # the named modules running
        self._root: ModuleChain = ()  # the root, while it runs: ``(("", class name),)``
        self._thread = 0
        self._handles: list[RemovableHandle] = []

    @property
    def chain(self) -> ModuleChain:
        """The modules running, outermost first; the root alone in the root's own forward."""
        return self._chain or self._root

    def install(self) -> None:
        self._thread = threading.get_ident()
        self._stack.clear()
        self._chain = self._root = ()
        self._handles = [
            nn_module.register_module_forward_pre_hook(self._enter),
            nn_module.register_module_forward_hook(self._leave, always_call=True),
        ]

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []
        self._stack.clear()
        self._chain = self._root = ()

    @property
    def in_scope(self) -> bool:
        """Whether the running modules include one of :attr:`scope` (judged once per chain)."""
        chain = self.chain
        if self._verdict[0] is not chain:
            inside = any(within(name, p) for name, _ in chain for p in self.scope)
            self._verdict = (chain, inside)
        return self._verdict[1]

    def names(self) -> list[str]:
        """The module paths seen so far."""
        return sorted({n for n in self._names.values() if n})

    @property
    def training(self) -> bool | None:
        """The innermost running module's training flag; None outside modules."""
        return self._stack[-1][0].training if self._stack else None

    def _name(self, module: nn.Module) -> str:
        name = self._names.get(module)
        if name is not None:
            return name
        if self._stack:
            parent, parent_name, _ = self._stack[-1]
            # a container that is never called itself (ModuleList, ModuleDict) sits between them
            path = next((k for k, m in parent.named_modules() if k and m is module), type(module).__name__)
            name = f"{parent_name}.{path}" if parent_name else path
        elif self._model is None:
            self._model, name = module, ""
        else:
            name = type(module).__name__
        self._names[module] = name
        return name

    def _enter(self, module: nn.Module, args: Any) -> None:
        if is_compiling() or threading.get_ident() != self._thread:
            return
        name, cls = self._name(module), type(module).__name__
        self._stack.append((module, name, cls))
        if name:
            self._chain = (*self._chain, (name, cls))
        else:
            self._root = (("", cls),)

    def _leave(self, module: nn.Module, args: Any, output: Any) -> None:
        if (
            is_compiling()
            or threading.get_ident() != self._thread
            or not any(m is module for m, _, _ in self._stack)
        ):
            return
        while self._stack:  # also unwinds modules left by an exception
            top, name, _ = self._stack.pop()
            if name:
                self._chain = self._chain[:-1]
            else:
                self._root = ()
            if top is module:
                break
