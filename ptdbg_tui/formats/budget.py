"""The memory one dump entry may take: checked before anything is allocated or loaded.

A dump's bytes are untrusted, and a few of them can ask for gigabytes: an npy header claiming a huge
shape, a .pt tensor expanded from one stored element by a stride of 0, a call sidecar's
``torch.ones(Size([20000, 20000]))``. Every reader that would hold a whole entry in memory asks
:func:`check` first; an entry over its allowance is refused by name, never loaded.

The allowance of one entry is the budget (:data:`DEFAULT_BYTES`, 2 GiB; the environment variable
:data:`ENV` sets another, in bytes or with a ``K``/``M``/``G`` suffix), or more where the dump's own
records justify it: a tensor recorded as ``[4096, 4096, 64]`` in the pkl may be read whole, as its
record says it is that large, once its file agrees with its record. See docs/security.md.
"""

from __future__ import annotations

import math
import os

from ptdbg_tui.formats.files import TensorFileError

#: The default budget of one entry, in bytes.
DEFAULT_BYTES = 2 << 30
#: The environment variable that sets another budget (``4G``, ``512M``, ``1073741824``).
ENV = "PTDBG_TUI_ENTRY_BUDGET"
_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


class OverBudget(TensorFileError):
    """An entry would take more memory than it may (the message names it and both sizes)."""


def budget() -> int:
    """The budget of one entry in bytes: :data:`ENV`'s when it holds a size, else the default."""
    text = os.environ.get(ENV, "").strip().upper().removesuffix("B")
    unit = _UNITS.get(text[-1:], 1)
    number = text[:-1] if unit > 1 else text
    try:
        value = float(number) * unit
    except ValueError:
        return DEFAULT_BYTES
    return int(value) if math.isfinite(value) and value > 0 else DEFAULT_BYTES


def size_text(nbytes: float) -> str:
    """Bytes in words: ``6.4 GB``, ``120 MB``, ``300 bytes``."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{int(nbytes)} bytes"


def allowance(justified: int = 0) -> int:
    """What one entry may take: the budget, or what its records justify when that is more."""
    return max(budget(), justified)


def check(nbytes: float, what: str, justified: int = 0) -> None:
    """Raise :class:`OverBudget` when ``what`` (an entry, a file, a call's result) would take more
    than :func:`allowance` of ``justified`` — before it is allocated."""
    limit = allowance(justified)
    if nbytes > limit:
        raise OverBudget(
            f"{what} would take {size_text(nbytes)} of memory, more than the {size_text(limit)} one dump "
            f"entry may take (set {ENV} to allow more); refused before loading it."
        )


def numel_bytes(shape: tuple[int, ...], itemsize: int) -> int:
    """The bytes of a tensor of ``shape`` and ``itemsize`` (exact: Python integers do not overflow)."""
    return math.prod(shape) * itemsize
