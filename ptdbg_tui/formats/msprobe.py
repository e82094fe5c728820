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

import errno
import fcntl
import json
import math
import os
import re
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from ptdbg_tui.formats.calls import CallSpec
from ptdbg_tui.formats.files import holds_lone_surrogate, open_regular, reason, safe_name
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
from ptdbg_tui.formats.pkl import DEFAULT_CHUNK
from ptdbg_tui.formats.pkl_line import may_hold_surrogates, not_valid_json
from ptdbg_tui.formats.records import (
    MAX_DIMS,
    MAX_NUMEL,
    NONE_DTYPE,
    BadLine,
    Frame,
    RecordBatch,
    StackRecord,
    TensorRecord,
    shown,
    undecodable,
    valid_stat,
)
from ptdbg_tui.formats.stats import checksum
from ptdbg_tui.formats.unreadable import (
    CutShort,
    FileUnreadable,
    InEntry,
    Malformed,
    NotAnObject,
    NotReadableJson,
    Raised,
    Unreadable,
)
from ptdbg_tui.formats.untrusted import name_problem, one_line

DUMP_JSON = "dump.json"
STACK_JSON = "stack.json"
CONSTRUCT_JSON = "construct.json"
DATA_DIR = "dump_tensor_data"

#: The keys of an entry that hold values, in row order, with the kind their rows get.
_SECTIONS = (
    ("input_args", INPUT),
    ("input_kwargs", INPUT),
    ("input", INPUT),
    ("parameters", PARAMETERS),
    ("output", OUTPUT),
)
#: Non-tensor types whose "shape" is a description of the value rather than ``[]``.
_STAT_KEYS = ("Max", "Min", "Mean", "Norm")
_MODULE_RE = re.compile(r"^(Module\..+)\.(forward|backward)\.(\d+)$")
_PARAMS_GRAD_RE = re.compile(r"^(Module\..+)\.parameters_grad(?:\.(\d+))?$")
_API_RE = re.compile(r"^(.+)\.(\d+)\.(forward|backward)$")
_FRAME_RE = re.compile(r"^File (.*), line (\d+), in (.*?), \n ?(.*)$", re.DOTALL)
#: Nesting deeper than this is refused (msprobe itself stops at 400 levels).
MAX_DEPTH = 400
#: A json file larger than this is refused: it is read whole.
MAX_JSON_BYTES = 4 << 30


class ParsedEntry(NamedTuple):
    """What a dump.json entry's name says."""

    api: str
    call_index: int  # not ``index``: that is tuple's method
    direction: str
    parameter_gradients: bool  # ``{module}.parameters_grad``: a module's parameters' gradients


def parse_entry(name: str) -> ParsedEntry | None:
    """What a dump.json entry name says; ``None`` if odd."""
    m = _PARAMS_GRAD_RE.match(name)
    if m:
        return ParsedEntry(m.group(1), int(m.group(2) or 0), BACKWARD, True)
    m = _MODULE_RE.match(name)
    if m:
        return ParsedEntry(m.group(1), int(m.group(3)), m.group(2), False)
    m = _API_RE.match(name)
    if m:
        return ParsedEntry(m.group(1), int(m.group(2)), m.group(3), False)
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
    return TensorRecord(
        name,
        0,
        dtype,
        shape,
        stats,
        entry,
        data_name="",
        md5=checksum(str(value if value is not None else "").encode()),
    )


def _tensor_record(name: str, leaf: dict[str, Any], entry: EntryName | None) -> TensorRecord:
    shape = leaf.get("shape")
    if not isinstance(shape, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
    ):
        shape = None
    elif len(shape) > MAX_DIMS or math.prod(shape) > MAX_NUMEL:
        raise ValueError(f"{name}: shape {shape[:8]} is too large to be a tensor's")
    bad = next((v for v in _stats(leaf) if not valid_stat(v)), None)
    if bad is not None:
        raise ValueError(f"{name}: statistic {str(bad)[:40]!r} is not a number")
    data_name = leaf.get("data_name")
    if isinstance(data_name, str) and data_name and not safe_name(data_name):
        raise ValueError(f"{name}: data_name {data_name[:80]!r} would lie outside the dump folder")
    if isinstance(data_name, str) and holds_lone_surrogate(data_name):
        raise ValueError(f"{name}: data_name holds a lone UTF-16 surrogate, which no file name can hold")
    grad = leaf.get("requires_grad")
    return TensorRecord(
        name,
        0,
        str(leaf.get("dtype")),
        shape,
        _stats(leaf),
        entry,
        data_name=data_name if isinstance(data_name, str) else "",
        requires_grad=grad if isinstance(grad, bool) else None,
        md5=str(leaf["md5"]) if leaf.get("md5") is not None else None,
    )


def _none_record(name: str, entry: EntryName | None) -> TensorRecord:
    return TensorRecord(name, 0, NONE_DTYPE, None, [None] * 4, entry, data_name="")


def _row_name(leaf: dict[str, Any], built: str) -> str:
    """msprobe's compare names a row after its data file where there is one."""
    data_name = leaf.get("data_name")
    if isinstance(data_name, str) and data_name:
        return data_name.rsplit(".", 1)[0]
    return built


Path_ = tuple[int | str, ...]


def _leaves(
    value: Any,
    path: Path_ = (),
    depth: int = 0,
    index_lists: bool = True,
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
    """The records of one dump.json entry (and why not, for an entry or a value that cannot be read:
    a bad value costs only its own record)."""
    if (problem := name_problem(name)) is not None:
        return [], BadLine(0, InEntry(entry=one_line(name, 120), why=problem))
    if not isinstance(value, dict):
        return [], BadLine(0, InEntry(entry=name, why=NotAnObject(got=type(value).__name__)))
    parsed = parse_entry(name)
    out: list[TensorRecord] = []
    refused: list[str] = []

    def add(built: str, leaf: dict[str, Any] | None, entry: EntryName | None) -> None:
        try:
            out.append(_record(built, leaf, entry))
        except ValueError as e:
            refused.append(str(e))

    try:
        for built, leaf, entry in _entry_leaves(name, value, parsed):
            add(built, leaf, entry)
    except (ValueError, RecursionError) as e:
        refused.append(str(e))
    if refused:
        return out, BadLine(0, InEntry(entry=name, why=Raised(error=refused[0]), more=len(refused) - 1))
    return out, None


Leaf = tuple[str, dict[str, Any] | None, EntryName | None]  # record name, its value, its entry name


def _entry_leaves(name: str, value: dict[str, Any], parsed: ParsedEntry | None) -> Iterator[Leaf]:
    """Each value of an entry: its record name, its leaf, its entry name (``None``: not a call, its
    values kept unplaced). Raises ValueError/RecursionError for a value nested too deeply."""
    if parsed is None:
        for path, leaf in _leaves(value):
            yield name + _suffix(path), leaf, None
        return
    api, index, direction, params = parsed
    if params:  # parameter gradients: {param: [tensor]}, the list not indexed
        for path, leaf in _leaves(value, index_lists=False):
            entry = EntryName(api, index, direction, PARAMS_GRAD, path, STYLE_MSPROBE)
            yield name + _suffix(path), leaf, entry
        return
    for section, kind in _SECTIONS:
        for path, leaf in _leaves(value.get(section)) if section in value else ():
            entry = EntryName(api, index, direction, kind, path, STYLE_MSPROBE)
            yield f"{name}.{kind}{_suffix(path)}", leaf, entry


def parse_frame(text: Any) -> Frame:
    """``File <path>, line <n>, in <func>, \\n <source>`` as (file, line, function, source)."""
    text = str(text)
    m = _FRAME_RE.match(text)
    if m is None:
        return Frame(text, "", "", None)
    return Frame(m.group(1), m.group(2), m.group(3), m.group(4))


def decode_stacks(data: Any) -> list[StackRecord]:
    """stack.json, new form (``{"0": [[names], [frames]]}``) or old (``{name: [frames]}``)."""
    if not isinstance(data, dict):
        return []
    out: list[StackRecord] = []
    for key, value in data.items():
        if (
            isinstance(value, list)
            and len(value) == 2
            and all(isinstance(v, list) for v in value)
            and key.isdigit()
        ):
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


class ModuleTree:
    """construct.json's parent links, and per node, on demand, the chain of modules around it
    (outermost first). A module's own chain ends with itself. Parents may be ``null``, ``""`` or
    Megatron's ``[parent, micro step]``; any other value is no parent.

    Chains are computed when asked for, not for every node up front: a parent chain 100k deep (or a
    cycle) costs at most :data:`MAX_DEPTH` steps per node asked, never nodes × depth at load.
    """

    def __init__(self, construct: Any = None, name: Any = str) -> None:
        self.parent: dict[str, str | None] = {}
        if isinstance(construct, dict):
            for node, up in construct.items():
                if isinstance(up, list):
                    up = up[0] if up else None
                self.parent[name(str(node))] = name(str(up)) if isinstance(up, str) and up else None
        self._chains: dict[str, ModuleChain] = {}
        self._items: dict[str, tuple[str, str]] = {}

    def __bool__(self) -> bool:
        return bool(self.parent)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ModuleTree) and self.parent == other.parent

    __hash__ = None  # type: ignore[assignment]

    def _item(self, node: str) -> tuple[str, str]:
        item = self._items.get(node)
        if item is None:
            path, cls = _module_item(node)  # dump text, shown and printed: one line each
            item = self._items[node] = (one_line(path), one_line(cls))
        return item

    def get(self, node: str) -> ModuleChain | None:
        """The chain of modules around ``node``; ``None`` for a node construct.json does not hold."""
        chain = self._chains.get(node)
        if chain is not None or node not in self.parent:
            return chain
        items: list[tuple[str, str]] = []
        up = self.parent[node] if not node.startswith("Module.") else node
        seen = {node, up}  # each module once, in a cycle too
        while up is not None and len(items) < MAX_DEPTH:
            items.append(self._item(up))
            up = self.parent.get(up)
            if up in seen:
                break
            if up is not None:
                seen.add(up)
        chain = self._chains[node] = tuple(reversed(items))
        return chain


def module_chains(construct: Any) -> dict[str, ModuleChain]:
    """Every node's chain of modules (see :class:`ModuleTree`)."""
    tree = ModuleTree(construct)
    return {node: tree.get(node) or () for node in tree.parent}


# --- reading files that are rewritten whole ---------------------------------------------------


class HalfWritten(Exception):
    """The file is being written (locked, or not valid JSON yet): try again later."""


def _identity(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def read_text(
    path: Path,
    last: tuple[int, int, int, int] | None = None,
) -> tuple[str, tuple[int, int, int, int]] | None:
    """The file's text and identity, ``None`` if it has not changed since ``last`` (or is absent).

    Raises :class:`HalfWritten` while the writer holds its lock, OSError for a file that cannot be
    read (not a regular file, or larger than :data:`MAX_JSON_BYTES`).
    """
    try:
        fd, st = open_regular(path)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as f:
        ident = _identity(st)
        if ident == last:
            return None
        if st.st_size > MAX_JSON_BYTES:
            raise OSError(
                errno.EFBIG,
                f"is {st.st_size / 2**30:.1f} GiB, more than the {MAX_JSON_BYTES / 2**30:.0f} GiB read whole",
                str(path),
            )
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            raise HalfWritten(f"{path.name} is being written") from None
        except OSError:
            pass  # no locks on this filesystem: the completeness checks still catch a partial file
        try:
            data = f.read()
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)
    data = data.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 byte order mark (an editor's): not JSON's
    try:
        return data.decode("utf-8"), ident
    except UnicodeDecodeError:  # kept byte-exact as surrogate escapes; shown with U+FFFD (see undecodable)
        return data.decode("utf-8", errors="surrogateescape"), ident


def parse_json(text: str, name: str) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError(f"{name}: JSON nested too deeply to read") from None
    except ValueError as e:
        raise HalfWritten(f"{name} is not complete JSON ({e})") from None


_DATA = '\n "data": {'
_ENTRY = '\n  "'
_END = "\n }\n}"

Entries = list[tuple[str, str]]  # (entry name, its value as JSON text), in file order


def split_dump(text: str) -> tuple[dict[str, Any], Entries]:
    """dump.json's header and entries. The entries are cut at the boundaries ``json.dump(indent=1)``
    writes (msprobe's layout), without decoding them: a flush that appends then costs only the new
    entries' decoding, and decoding goes by chunks, never holding the GIL for a whole big file.
    Any other layout is decoded whole. Raises :class:`HalfWritten` for a text cut short."""
    head, sep, body = text.partition(_DATA)
    if sep and head.endswith(",") and (body == "}\n}" or body.endswith(_END)):
        try:
            header = json.loads(head[:-1] + "}")
            entries = _split_entries(body[: -len(_END)].split(_ENTRY)[1:] if body != "}\n}" else [])
            if isinstance(header, dict):
                return header, entries
        except (ValueError, RecursionError):
            pass
    data = parse_json(text, DUMP_JSON)
    if not isinstance(data, dict) or not isinstance(data.get("data"), dict):
        raise ValueError(f"{DUMP_JSON}: expected an object with a 'data' object")
    header = {k: v for k, v in data.items() if k != "data"}
    try:
        return header, [(name, json.dumps(value)) for name, value in (data.get("data") or {}).items()]
    except RecursionError:
        raise ValueError(f"{DUMP_JSON}: JSON nested too deeply to read") from None


def _split_entries(pieces: list[str]) -> Entries:
    entries: Entries = []
    for piece in pieces:
        raw, colon, value = piece.partition('": ')
        if not colon:
            raise ValueError("no entry name")
        name = json.loads(f'"{raw}"') if "\\" in raw else raw  # names rarely hold escapes
        entries.append((name, value[:-1] if value.endswith(",") else value))
    return entries


def complete_entries(text: str) -> tuple[dict[str, Any], Entries] | None:
    """The header and every complete entry of a dump.json in msprobe's layout that was cut short
    (its writer died, the disk filled), so that what was written is still compared; ``None`` when the
    layout is another or the header itself is cut."""
    head, sep, body = text.partition(_DATA)
    if not sep or not head.endswith(","):
        return None
    pieces = body.split(_ENTRY)[1:]
    try:
        header = json.loads(head[:-1] + "}")
        entries = _split_entries(pieces[:-1])  # each followed by the next one's name: complete
    except (ValueError, RecursionError):
        return None
    try:
        for name, value in _split_entries(pieces[-1:]):  # the entry the cut fell in, if it is whole
            entries.append((name, value[: json.JSONDecoder().raw_decode(value)[1]]))
    except (ValueError, RecursionError):
        pass
    return (header, entries) if isinstance(header, dict) else None


class MsprobeFollower:
    """Incremental reader of one msprobe rank folder (a :class:`~ptdbg_tui.formats.reader.DumpReader`);
    :meth:`read` has the PklFollower contract, ``chunk`` bounds the entry text decoded per call."""

    def __init__(self, dump_json: str | os.PathLike[str], chunk: float = DEFAULT_CHUNK) -> None:
        self.path = Path(dump_json)
        self.rank_dir = self.path.parent
        self.chunk = chunk
        self._entries: Entries = []  # every entry taken, decoded or pending
        self._pending: deque[tuple[str, str]] = deque()
        self._idents: dict[str, tuple[int, int, int, int] | None] = {}
        self._stacks: dict[str, StackRecord] = {}
        self.chains = ModuleTree()
        self.header: dict[str, Any] = {}
        self.tensor_count = 0
        self._errors: dict[str, FileUnreadable] = {}  # the last error of each file that could not be read
        self._modules_problem: Unreadable | None = None  # why construct.json cannot be read now

    def _changed(self, name: str, final: bool, bad: list[BadLine]) -> str | None:
        """The new text of one of the folder's files, or ``None`` if unchanged or not ready."""
        try:
            got = read_text(self.rank_dir / name, self._idents.get(name))
        except HalfWritten as e:
            if final:  # nobody will finish it now
                bad.append(BadLine(0, Raised(error=str(e))))
            return None
        except OSError as e:
            if name == DUMP_JSON:  # the dump itself: the caller says why it cannot be read
                raise
            why = FileUnreadable(file=name, error=reason(e))
            if self._errors.get(name) != why:  # said once, until it changes
                self._errors[name] = why
                bad.append(BadLine(0, why))
            return None
        self._errors.pop(name, None)
        if got is None:
            return None
        text, self._idents[name] = got
        return text

    def _json(self, name: str, final: bool, bad: list[BadLine]) -> Any:
        text = self._changed(name, final, bad)
        if text is None:
            return None
        try:
            return parse_json(text, name)
        except HalfWritten as e:
            self._idents[name] = None  # read it again next time
            if final:
                bad.append(BadLine(0, Raised(error=str(e))))
            return None
        except ValueError as e:  # nested too deeply: said, and read again only once it changes
            bad.append(BadLine(0, Raised(error=str(e))))
            return None

    def read(self, final: bool = False) -> RecordBatch:
        """What changed since the last call: new records (all of them again after a reset)."""
        batch = RecordBatch()
        if not self._pending:
            text = self._changed(DUMP_JSON, final, batch.bad)
            if text is not None:
                self._update(text, final, batch)
        self._decode(batch)
        batch.more = bool(self._pending)
        stacks = self._json(STACK_JSON, final, batch.bad)
        if stacks is not None:
            new = {s.name: s for s in map(undecodable, decode_stacks(stacks))}
            batch.stacks = [s for name, s in new.items() if self._stacks.get(name) != s]
            self._stacks = new
        return batch

    def read_modules(self, final: bool = False) -> bool:
        """Re-read construct.json if it changed; whether the chains changed. Raises OSError, with
        the reason, while construct.json is there but cannot be read (calls are then placed by
        their stacks)."""
        bad: list[BadLine] = []
        data = self._json(CONSTRUCT_JSON, final, bad)
        if bad:
            self._modules_problem = bad[-1].reason
        elif data is not None or not os.path.lexists(self.rank_dir / CONSTRUCT_JSON):
            self._modules_problem = None
        if isinstance(p := self._modules_problem, FileUnreadable):
            raise OSError(errno.EINVAL, f"{p.file} cannot be read: {p.error}")
        if isinstance(p, Raised):
            raise OSError(errno.EINVAL, p.error)
        if data is None:
            return False
        chains = ModuleTree(data, shown)
        changed = chains != self.chains
        self.chains = chains
        return changed

    def _update(self, text: str, final: bool, batch: RecordBatch) -> None:
        try:
            self.header, entries = split_dump(text)
        except HalfWritten as e:
            self._idents[DUMP_JSON] = None  # read it again next time
            if not final:
                return
            cut = complete_entries(text)
            if cut is None:
                batch.bad.append(BadLine(0, Raised(error=str(e))))
                return
            self.header, entries = cut
            batch.bad.append(BadLine(0, CutShort(error=str(e), entries=len(entries))))
        except ValueError as e:
            batch.bad.append(BadLine(0, Raised(error=str(e))))
            return
        kept = 0  # leading entries unchanged since the last read
        for new, old in zip(entries, self._entries, strict=False):
            if new != old:
                break
            kept += 1
        if kept < len(self._entries):  # something already read changed or went away: start over
            batch.reset = True
            self.tensor_count = kept = 0
        self._pending.extend(entries[kept:])
        self._entries = entries

    def _decode(self, batch: RecordBatch) -> None:
        """Decode pending entries, about ``chunk`` bytes of text, in one JSON call."""
        take: list[tuple[str, str]] = []
        size = 0
        while self._pending and (not take or size < self.chunk):
            take.append(self._pending.popleft())
            size += len(take[-1][1])
        if not take:
            return
        try:
            values = json.loads("[" + ",".join(text for _, text in take) + "]")
        except (ValueError, RecursionError):  # one is malformed: the others still count
            values = [_loads(name, text, batch.bad) for name, text in take]
        for (name, text), value in zip(take, values, strict=True):
            if value is _MALFORMED:
                continue
            records, bad = decode_entry(name, value)
            if may_hold_surrogates(name) or may_hold_surrogates(text):
                records = [undecodable(r) for r in records]
                bad = None if bad is None else undecodable(bad)
            for rec in records:
                rec.order = self.tensor_count
                self.tensor_count += 1
            batch.tensors += records
            if bad is not None:
                batch.bad.append(bad)

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

    def read_calls(self, final: bool = False) -> bool:
        """msprobe keeps a call's arguments in dump.json (``input_args``, ``input_kwargs``); they are
        not read as call specs yet."""
        return False

    def call_spec(self, call: str) -> CallSpec | None:
        return None

    def call_specs(self) -> dict[str, CallSpec]:
        """None: a replay rebuilds msprobe's calls from their records, keyword arguments included."""
        return {}

    def sidecar_bad(self) -> list[BadLine]:
        """None: construct.json's faults raise from :meth:`read_modules`, dump.json's are the records'."""
        return []


_MALFORMED = object()


def _loads(name: str, text: str, bad: list[BadLine]) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        bad.append(BadLine(0, InEntry(entry=name, why=Malformed.DEEP_JSON)))
    except json.JSONDecodeError as e:
        bad.append(BadLine(0, InEntry(entry=name, why=not_valid_json(e))))
    except ValueError as e:
        bad.append(BadLine(0, InEntry(entry=name, why=NotReadableJson(error=str(e)))))
    return _MALFORMED
