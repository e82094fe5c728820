"""What a recorder installed into torch while a script runs (hooks, and attributes it replaced), so
that one call takes all of it out again, in reverse order."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch.utils.hooks import RemovableHandle


class Installed:
    def __init__(self) -> None:
        self._handles: list[RemovableHandle] = []
        self._restore: list[Callable[[], None]] = []

    def hook(self, *handles: RemovableHandle) -> None:
        self._handles.extend(handles)

    def patch(self, owner: Any, name: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
        """``owner.name`` replaced by ``make(original)`` until :meth:`undo` (``owner``'s own attribute:
        an inherited one would be shadowed, not put back)."""
        original = owner.__dict__[name]
        setattr(owner, name, make(original))
        self._restore.append(lambda: setattr(owner, name, original))

    def undo(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []
        for restore in reversed(self._restore):
            restore()
        self._restore = []
