"""Entry-name grammar of ptdbg v4: ``{Prefix}_{op}_{idx}_{forward|backward}_{kind}{(.k)*}``.

Names are parsed from the right because op names contain ``_``, ``.`` and even the word
``forward`` (``multi_head_attention_forward``). The same module builds names for the dumper,
so both sides share one grammar.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FORWARD = "forward"
BACKWARD = "backward"
INPUT = "input"
OUTPUT = "output"
STACK_INFO = "stack_info"

#: Prefixes of the wrapped namespaces; anything else is a module_dump user name.
KNOWN_PREFIXES = ("Tensor", "Torch", "Functional", "VF", "NPU", "Distributed", "Aten", "Module")

_NAME_RE = re.compile(
    r"^(?P<api>.+)_(?P<idx>\d+)_(?P<dir>forward|backward)_"
    r"(?P<kind>input|output|stack_info)(?P<path>(?:\.\d+)*)$"
)


@dataclass(frozen=True, slots=True)
class EntryName:
    """One parsed entry name. ``api`` is ``prefix_op`` as written in the file."""

    api: str
    index: int
    direction: str
    kind: str
    path: tuple[int, ...] = ()

    @property
    def prefix(self) -> str:
        head, sep, _ = self.api.partition("_")
        return head if sep and head in KNOWN_PREFIXES else self.api

    @property
    def op(self) -> str:
        head, sep, rest = self.api.partition("_")
        return rest if sep and head in KNOWN_PREFIXES else ""

    @property
    def call(self) -> str:
        """The call this entry belongs to, e.g. ``Torch_add_0_forward``."""
        return f"{self.api}_{self.index}_{self.direction}"

    @property
    def arg(self) -> str:
        """The argument part after the call, e.g. ``input.0.1`` or ``output``."""
        return self.kind + "".join(f".{k}" for k in self.path)

    def __str__(self) -> str:
        return f"{self.call}_{self.arg}"


def parse_name(name: str) -> EntryName | None:
    """Parse an entry name; ``None`` when it does not follow the grammar."""
    m = _NAME_RE.match(name)
    if m is None:
        return None
    path = m.group("path")
    return EntryName(
        api=m.group("api"),
        index=int(m.group("idx")),
        direction=m.group("dir"),
        kind=m.group("kind"),
        path=tuple(int(p) for p in path[1:].split(".")) if path else (),
    )


def entry_name(api: str, index: int, direction: str, kind: str, path: tuple[int, ...] = ()) -> str:
    """Build an entry name; the inverse of :func:`parse_name`."""
    return str(EntryName(api, index, direction, kind, tuple(path)))


def stack_name(call: str) -> str:
    """Name of the stack line of a call (``Torch_add_0_forward`` -> ``..._stack_info``)."""
    return f"{call}_{STACK_INFO}"
