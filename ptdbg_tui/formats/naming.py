"""Entry names: the grammar of ptdbg v4 and msprobe's, behind one :class:`EntryName`.

ptdbg v4: ``{Prefix}_{op}_{idx}_{forward|backward}_{kind}{(.k)*}``. Names are parsed from the
right because op names contain ``_``, ``.`` and even the word ``forward``
(``multi_head_attention_forward``). The same module builds names for the dumper, so both sides
share one grammar.

msprobe (``STYLE_MSPROBE``): ``{Prefix}.{op}.{idx}.{forward|backward}.{kind}.{path}`` for APIs,
``Module.{path}.{Class}.{forward|backward}.{idx}.{kind}.{path}`` for modules and
``Module.{path}.{Class}.parameters_grad.{idx}.{param}`` for parameter gradients. Its reader builds
the EntryName from dump.json's structure, so these names are only ever printed, never parsed.
A parameter gradient belongs to its module's backward call.

:attr:`EntryName.key` is the same on both grammars for the same tensor, so mixed pairs (one tool
per side) pair by it.
"""

from __future__ import annotations

import re
from dataclasses import field
from functools import lru_cache

from ptdbg_tui.formats.frozen import quick_frozen, quick_pickle

FORWARD = "forward"
BACKWARD = "backward"
INPUT = "input"
OUTPUT = "output"
STACK_INFO = "stack_info"
#: The kind in the name of a keyword tensor's data file (never an entry's kind: no pkl line has it).
KWARG = "kwarg"
PARAMETERS = "parameters"  # msprobe: a module's parameters, recorded with its forward call
PARAMS_GRAD = "parameters_grad"  # msprobe: a parameter's gradient, part of its module's backward call
#: Kinds a call produces (the rest are what it consumes).
OUTPUT_KINDS = (OUTPUT, PARAMS_GRAD)

STYLE_PTDBG = "ptdbg"
STYLE_MSPROBE = "msprobe"

#: Prefixes of the wrapped namespaces; anything else is a module_dump user name.
KNOWN_PREFIXES = ("Tensor", "Torch", "Functional", "VF", "NPU", "Distributed", "Aten", "Module")

_NAME_RE = re.compile(
    r"^(?P<api>.+)_(?P<idx>\d+)_(?P<dir>forward|backward)_"
    r"(?P<kind>input|output|stack_info)(?P<path>(?:\.\d+)*)$"
)


@quick_pickle
@quick_frozen
class EntryName:
    """One entry name. ``api`` is ``prefix_op`` (msprobe: ``Prefix.op``, ``Module.path.Class``) as
    written in the file; ``path`` holds list indices and, in msprobe, dict keys (kwargs, parameters)."""

    api: str
    index: int
    direction: str
    kind: str
    path: tuple[int | str, ...] = ()
    style: str = STYLE_PTDBG
    #: Worked out once (an entry is immutable, and shared by every rank and step that names it):
    #: ``prefix`` and ``op`` split ``api`` (a ptdbg module_dump name is all prefix); ``call`` is the
    #: call this entry belongs to, e.g. ``Torch_add_0_forward``, ``Torch.add.0.forward``.
    prefix: str = field(init=False, repr=False, compare=False)
    op: str = field(init=False, repr=False, compare=False)
    call: str = field(init=False, repr=False, compare=False)
    #: The argument part after the call, e.g. ``input.0.1`` or ``output``.
    arg: str = field(init=False, repr=False, compare=False)
    #: The call without its direction, e.g. ``Torch_add_0`` (the module sidecar's key).
    label: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        head, sep, rest = self.api.partition(self._sep)
        split = (
            (head, rest)
            if sep and (head in KNOWN_PREFIXES or self.style == STYLE_MSPROBE)
            else (self.api, "")
        )
        object.__setattr__(self, "prefix", split[0])
        object.__setattr__(self, "op", split[1])
        object.__setattr__(self, "call", self._call(self.direction))
        object.__setattr__(self, "arg", self.kind + "".join(f".{k}" for k in self.path))
        object.__setattr__(self, "label", f"{self.api}{self._sep}{self.index}")

    @property
    def _sep(self) -> str:
        return "." if self.style == STYLE_MSPROBE else "_"

    def _call(self, direction: str) -> str:
        if self.style != STYLE_MSPROBE:
            return f"{self.api}_{self.index}_{direction}"
        if self.api.startswith("Module."):
            return f"{self.api}.{direction}.{self.index}"
        return f"{self.api}.{self.index}.{direction}"

    @property
    def forward_call(self) -> str:
        """The forward call of the same index (for a backward entry: the call it differentiates)."""
        return self._call(FORWARD)

    @property
    def key(self) -> tuple[object, ...]:
        """What names the same tensor in both grammars: (prefix, op, index, direction, kind, path).

        ptdbg names a single forward output ``output``, msprobe ``output.0``.
        """
        path = self.path
        if not path and self.kind == OUTPUT and self.style != STYLE_MSPROBE:
            path = (0,)
        return (self.prefix, self.op, self.index, self.direction, self.kind, path)

    def __str__(self) -> str:
        if self.style != STYLE_MSPROBE:
            return f"{self.call}_{self.arg}"
        if self.kind == PARAMS_GRAD:
            return f"{self.api}.{PARAMS_GRAD}.{self.index}" + "".join(f".{k}" for k in self.path)
        return f"{self.call}.{self.arg}"


@lru_cache(maxsize=1 << 16)
def parse_name(name: str) -> EntryName | None:
    """Parse an entry name; ``None`` when it does not follow the grammar.

    Cached: every rank and step of a job, and both sides of a pair, repeat the same names (an LLM
    job's 16 pairs parse each name 32 times), and an EntryName is immutable."""
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


def call_key(call: str) -> str:
    """The key a call's forward and backward share (``Functional_gelu_0``), as the sidecars have it."""
    return call.rsplit("_", 1)[0]


def stack_name(call: str) -> str:
    """Name of the stack line of a call (``Torch_add_0_forward`` -> ``..._stack_info``)."""
    return f"{call}_{STACK_INFO}"


def keyword_file_name(api: str, index: int, key: str) -> str | None:
    """The npy file (without ``.npy``) that holds the data of a tensor passed by keyword, e.g.
    ``Functional_scaled_dot_product_attention_0_forward_kwarg.attn_mask``: named by the call sidecar
    only, since the pkl (the original's format) records positional tensors only. Its kind ``kwarg`` is
    none of an entry's, so it can never be a pkl entry name nor collide with one. None for a key that
    is not a Python identifier (only ``**{...}`` passes one), which could not name a file safely."""
    if not key.isidentifier():
        return None
    return f"{api}_{index}_{FORWARD}_{KWARG}.{key}"
