"""msprobe (mindstudio-probe) dumps: a rank folder's dump.json, stack.json and construct.json.

msprobe rewrites each file whole at every flush point (``json.dump`` under ``flock(LOCK_EX)``), so
it is read whole: :class:`MsprobeFollower` re-reads a file when it changed, skips a read that
finds it half written (it is retried at the next poll), and diffs the entries by name so that a
flush that only appends yields only the new records, the old ones unchanged.

Rows are msprobe's own (its compare names them the same): an entry's values flattened in the order
inputs (args, kwargs, or a backward's incoming gradients), parameters, outputs; a list index or dict
key per level; the row named by its ``data_name`` without the extension where there is one.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ptdbg_tui.formats.modules import ModuleChain
from ptdbg_tui.formats.naming import (
    BACKWARD,
    INPUT,
    OUTPUT,
    PARAMETERS,
    PARAMS_GRAD,
    STYLE_MSPROBE,
    EntryName,
)
from ptdbg_tui.formats.pkl import PklBatch
from ptdbg_tui.formats.records import NONE_DTYPE, BadLine, Frame, StackRecord, TensorRecord

DUMP_JSON = "dump.json"
STACK_JSON = "stack.json"
CONSTRUCT_JSON = "construct.json"
DATA_DIR = "dump_tensor_data"

#: The keys of an entry that hold values, in row order, with the kind their rows get.
_SECTIONS = (("input_args", INPUT), ("input_kwargs", INPUT), ("input", INPUT), ("parameters", PARAMETERS),
             ("output", OUTPUT))
#: Non-tensor types whose "shape" is a description of the value rather than ``[]``.
_STAT_KEYS = ("Max", "Min", "Mean", "Norm")
_MODULE_RE = re.compile(r"^(Module\..+)\.(forward|backward)\.(\d+)$")
_PARAMS_GRAD_RE = re.compile(r"^(Module\..+)\.parameters_grad(?:\.(\d+))?$")
_API_RE = re.compile(r"^(.+)\.(\d+)\.(forward|backward)$")
_FRAME_RE = re.compile(r"^File (.*), line (\d+), in (.*?), \n ?(.*)$", re.DOTALL)
#: Nesting deeper than this is refused (msprobe itself stops at 400 levels).
MAX_DEPTH = 400


def parse_entry(name: str) -> tuple[str, int, str, bool] | None:
    """``(api, index, direction, parameter gradients)`` of a dump.json entry name; ``None`` if odd."""
    m = _PARAMS_GRAD_RE.match(name)
    if m:
        return m.group(1), int(m.group(2) or 0), BACKWARD, True
    m = _MODULE_RE.match(name)
    if m:
        return m.group(1), int(m.group(3)), m.group(2), False
    m = _API_RE.match(name)
    if m:
        return m.group(1), int(m.group(2)), m.group(3), False
    return None


def _stats(leaf: dict[str, Any]) -> list[Any]:
    return [leaf.get(k) for k in _STAT_KEYS]


def _value_record(name: str, leaf: dict[str, Any], entry: EntryName | None) -> TensorRecord:
    """A non-tensor leaf (``{"type": "int", "value": 2}`` …), described as msprobe's compare does."""
    kind = leaf.get("type")
    value = leaf.get("value")
    stats: list[Any] = [value] * 4
    if kind == "torch.Size":
        dtype, shape, stats = kind, str(value), [None] * 4
    elif kind == "slice":
        dtype, shape, stats = kind, f"({len(value)},)" if isinstance(value, list) else "()", [None] * 4
    elif kind == "ellipsis":
        dtype, shape = kind, "[]"
    elif kind == "torch.ProcessGroup":
        value = leaf.get("group_ranks")
        dtype, shape, stats = kind, "[]", [str(value)] * 4
    else:
        dtype, shape = str(type(value)), "[]"
    return TensorRecord(name, 0, dtype, shape, stats, entry, data_name="",
                        md5=f"{zlib.crc32(str(value if value is not None else '').encode()):08x}")


def _tensor_record(name: str, leaf: dict[str, Any], entry: EntryName | None) -> TensorRecord:
    shape = leaf.get("shape")
    if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
        shape = None
    data_name = leaf.get("data_name")
    grad = leaf.get("requires_grad")
    return TensorRecord(name, 0, str(leaf.get("dtype")), shape, _stats(leaf), entry,
                        data_name=data_name if isinstance(data_name, str) else "",
                        requires_grad=grad if isinstance(grad, bool) else None,
                        md5=str(leaf["md5"]) if leaf.get("md5") is not None else None)


def _none_record(name: str, entry: EntryName | None) -> TensorRecord:
    return TensorRecord(name, 0, NONE_DTYPE, None, [None] * 4, entry, data_name="")


def _row_name(leaf: dict[str, Any], built: str) -> str:
    """msprobe's compare names a row after its data file where there is one."""
    data_name = leaf.get("data_name")
    if isinstance(data_name, str) and data_name:
        return data_name.rsplit(".", 1)[0]
    return built


Path_ = tuple[int | str, ...]


def _leaves(value: Any, path: Path_ = (), depth: int = 0, index_lists: bool = True,
            ) -> Iterator[tuple[Path_, dict[str, Any] | None]]:
    """``(path, leaf)`` of a value tree in order; a leaf is a ``{"type": ...}`` object or ``None``."""
    if depth > MAX_DEPTH:
        raise ValueError(f"values nested deeper than {MAX_DEPTH} levels")
    if value is None:
        yield path, None
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _leaves(item, (*path, i) if index_lists else path, depth + 1, index_lists)
    elif isinstance(value, dict):
        if value.get("class_type") == "torch.distributed.P2POp":
            value = value.get("tensor")
            yield path, value if isinstance(value, dict) else None
        elif isinstance(value.get("type"), str):
            yield path, value
        else:
            for key, item in value.items():
                yield from _leaves(item, (*path, key), depth + 1, index_lists)


def _record(built: str, leaf: dict[str, Any] | None, entry: EntryName | None) -> TensorRecord:
    if leaf is None:
        return _none_record(built, entry)
    name = _row_name(leaf, built)
    if "dtype" in leaf and "shape" in leaf:
        return _tensor_record(name, leaf, entry)
    return _value_record(name, leaf, entry)


def _suffix(path: Path_) -> str:
    return "".join(f".{p}" for p in path)


def decode_entry(name: str, value: Any) -> tuple[list[TensorRecord], BadLine | None]:
    """The records of one dump.json entry (and why not, for an entry that cannot be read)."""
    if not isinstance(value, dict):
        return [], BadLine(0, f"entry {name}: expected an object, got {type(value).__name__}")
    parsed = parse_entry(name)
    out: list[TensorRecord] = []
    try:
        if parsed is None:  # not a call: keep its values, unplaced
            out += [_record(name + _suffix(path), leaf, None) for path, leaf in _leaves(value)]
        elif parsed[3]:  # parameter gradients: {param: [tensor]}, the list not indexed
            api, index, direction, _ = parsed
            for path, leaf in _leaves(value, index_lists=False):
                entry = EntryName(api, index, direction, PARAMS_GRAD, path, STYLE_MSPROBE)
                out.append(_record(name + _suffix(path), leaf, entry))
        else:
            api, index, direction, _ = parsed
            for section, kind in _SECTIONS:
                for path, leaf in _leaves(value.get(section)) if section in value else ():
                    entry = EntryName(api, index, direction, kind, path, STYLE_MSPROBE)
                    out.append(_record(f"{name}.{kind}{_suffix(path)}", leaf, entry))
    except (ValueError, RecursionError) as e:
        return out, BadLine(0, f"entry {name}: {e}")
    return out, None


def parse_frame(text: Any) -> Frame:
    """``File <path>, line <n>, in <func>, \\n <source>`` as (file, line, function, source)."""
    text = str(text)
    m = _FRAME_RE.match(text)
    if m is None:
        return (text, "", "", None)
    return (m.group(1), m.group(2), m.group(3), m.group(4))


def decode_stacks(data: Any) -> list[StackRecord]:
    """stack.json, new form (``{"0": [[names], [frames]]}``) or old (``{name: [frames]}``)."""
    if not isinstance(data, dict):
        return []
    out: list[StackRecord] = []
    for key, value in data.items():
        if isinstance(value, list) and len(value) == 2 and all(isinstance(v, list) for v in value) \
                and key.isdigit():
            names, frames = value
        elif isinstance(value, list):
            names, frames = [key], value
        else:
            continue
        parsed = [parse_frame(f) for f in frames]
        out += [StackRecord(str(n), parsed) for n in names]
    return out


def _module_item(call: str) -> tuple[str, str]:
    """``Module.layer1.0.conv1.Conv2d.forward.0`` -> ("layer1.0.conv1", "Conv2d"); a pseudo-parent
    such as ``optimizer`` names itself."""
    m = _MODULE_RE.match(call)
    if m is None:
        return (call, "")
    path, _, cls = m.group(1).removeprefix("Module.").rpartition(".")
    return (path, cls)


def module_chains(construct: Any) -> dict[str, ModuleChain]:
    """construct.json's parent links as, per node, the chain of modules around it (outermost first).

    A module's own chain ends with itself. Parents may be ``null``, ``""`` or Megatron's
    ``[parent, micro step]``.
    """
    if not isinstance(construct, dict):
        return {}
    parent: dict[str, str | None] = {}
    for node, up in construct.items():
        if isinstance(up, list):
            up = up[0] if up else None
        parent[str(node)] = str(up) if up else None
    chains: dict[str, ModuleChain] = {}
    for node in parent:
        chain: list[tuple[str, str]] = []
        seen = {node}
        up = parent[node] if not node.startswith("Module.") else node
        while up is not None and len(chain) < MAX_DEPTH:
            chain.append(_module_item(up))
            up = parent.get(up)
            if up in seen:
                break
            if up is not None:
                seen.add(up)
        chains[node] = tuple(reversed(chain))
    return chains


# --- reading files that are rewritten whole ---------------------------------------------------


class HalfWritten(Exception):
    """The file is being written (locked, or not valid JSON yet): try again later."""


def _identity(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def read_json(path: Path, last: tuple[int, int, int, int] | None = None,
              ) -> tuple[Any, tuple[int, int, int, int]] | None:
    """The file's JSON and its identity, ``None`` if it has not changed since ``last`` (or is absent).

    Raises :class:`HalfWritten` while the writer holds its lock or the text is cut short, and
    OSError/ValueError for a file that cannot be read at all.
    """
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed by the with below; a missing file is no error
    except FileNotFoundError:
        return None
    with f:
        st = os.fstat(f.fileno())
        ident = _identity(st)
        if ident == last:
            return None
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            raise HalfWritten(f"{path.name} is being written") from None
        except OSError:
            pass  # no locks on this filesystem: the JSON check below still catches a partial file
        try:
            text = f.read()
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)
    try:
        return json.loads(text), ident
    except ValueError as e:
        raise HalfWritten(f"{path.name} is not complete JSON ({e})") from None


class MsprobeFollower:
    """Incremental reader of one msprobe rank folder (a :class:`~ptdbg_tui.formats.reader.DumpReader`);
    :meth:`read` has the PklFollower contract."""

    def __init__(self, dump_json: str | os.PathLike[str]) -> None:
        self.path = Path(dump_json)
        self.rank_dir = self.path.parent
        self._entries: dict[str, Any] = {}  # the raw value of every entry read, in order
        self._idents: dict[str, tuple[int, int, int, int] | None] = {}
        self._stacks: dict[str, StackRecord] = {}
        self.chains: dict[str, ModuleChain] = {}
        self.header: dict[str, Any] = {}
        self.tensor_count = 0

    def _changed(self, name: str, final: bool, bad: list[BadLine]) -> Any:
        """The new JSON of one of the folder's files, or ``None`` if unchanged or not ready."""
        try:
            got = read_json(self.rank_dir / name, self._idents.get(name))
        except HalfWritten as e:
            if final:  # nobody will finish it now
                bad.append(BadLine(0, str(e)))
                self._idents[name] = None
            return None
        except (OSError, ValueError) as e:
            bad.append(BadLine(0, f"{name} cannot be read: {e}"))
            return None
        if got is None:
            return None
        data, self._idents[name] = got
        return data

    def read(self, final: bool = False) -> PklBatch:
        """What changed since the last call: new records (all of them again after a reset)."""
        batch = PklBatch()
        data = self._changed(DUMP_JSON, final, batch.bad)
        if data is not None:
            self._update(data, batch)
        stacks = self._changed(STACK_JSON, final, batch.bad)
        if stacks is not None:
            new = {s.name: s for s in decode_stacks(stacks)}
            batch.stacks = [s for name, s in new.items() if self._stacks.get(name) != s]
            self._stacks = new
        return batch

    def read_modules(self, final: bool = False) -> bool:
        """Re-read construct.json if it changed; whether the chains changed."""
        data = self._changed(CONSTRUCT_JSON, final, [])
        if data is None:
            return False
        chains = module_chains(data)
        changed = chains != self.chains
        self.chains = chains
        return changed

    def _update(self, data: Any, batch: PklBatch) -> None:
        if not isinstance(data, dict) or not isinstance(data.get("data", {}), dict):
            batch.bad.append(BadLine(0, f"{DUMP_JSON}: expected an object with a 'data' object"))
            return
        self.header = {k: v for k, v in data.items() if k != "data"}
        entries: dict[str, Any] = data.get("data") or {}
        old = self._entries
        names = list(entries)
        kept = 0  # leading entries unchanged since the last read
        for name, old_name in zip(names, old, strict=False):
            if name != old_name or entries[name] != old[name]:
                break
            kept += 1
        if kept < len(old):  # something already read changed or went away: start over
            batch.reset = True
            self.tensor_count = 0
            kept = 0
            old = {}
        fresh = dict(list(old.items())[:kept])
        for name in names[kept:]:
            records, bad = decode_entry(name, entries[name])
            for rec in records:
                rec.order = self.tensor_count
                self.tensor_count += 1
            fresh[name] = entries[name]
            batch.tensors += records
            if bad is not None:
                batch.bad.append(bad)
        self._entries = fresh

    @property
    def has_modules(self) -> bool:
        return bool(self.chains)

    @property
    def producer(self) -> str:
        return STYLE_MSPROBE

    def module_chain(self, entry: EntryName) -> ModuleChain | None:
        """The modules a call ran in: its own chain, else its forward call's (backward parents are
        often missing)."""
        return self.chains.get(entry.call) or self.chains.get(entry.forward_call)
