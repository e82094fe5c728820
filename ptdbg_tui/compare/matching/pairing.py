"""Pairing NPU entries with bench entries, in three modes, reporting what is left on either side.

- ``exact``: by full entry name (the k-th occurrence of a duplicated name pairs with the k-th).
- ``fuzzy``: call index dropped: the k-th call of an api/direction pairs with the k-th call of the
  same api/direction on the other side, entries within by argument path.
- ``auto`` (the default): exact, unless that leaves calls unpaired on both sides or pairs entries of
  different shapes (one side called a fused op, the other its decomposition: every later index
  shifts); then ``align``, when it pairs better.
- ``align``: sequence alignment (:mod:`~ptdbg_tui.compare.matching.align`) of the per-direction call
  order by an index-free signature (api, direction, argument paths, shapes), so one extra or missing
  call does not shift every later pairing; leftover calls between aligned ones pair by api (a shape
  change stays visible).

Unlike the original (docs/compare.md#matching), unmatched entries of both sides become rows.

Where both sides' stacks are known, two calls made at different code sites do not pair, whatever
their names (:func:`_at_one_site`): an NPU-only ``h.mul_(1.01)`` in the model's forward took the name
``Tensor_mul__0`` of the bench's momentum ``buf.mul_(0.9)`` in its optimizer, and the diagnosis
compared the two calls' arguments.

Each side's :class:`~ptdbg_tui.formats.dialects.Dialect` says how its tool records: when the two
differ, the pair is mixed (:mod:`~ptdbg_tui.compare.matching.mixed`). A dump tool's own calls
(:func:`~ptdbg_tui.formats.dialects.tool_noise`) are marked :attr:`~ptdbg_tui.compare.model.Row.noise`:
in a mixed pair every unpaired one, in any pair those recorded in the backward, where
:func:`model_rows` leaves them out of the diagnosis. So are, in a mixed pair, the unpaired calls a
side's tool recorded inside the backward (:func:`~ptdbg_tui.formats.dialects.inside_backward`),
which ours never records.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass

from ptdbg_tui.compare.matching.align import align
from ptdbg_tui.compare.matching.mixed import Pairs, permuted_gradients, same_tensors
from ptdbg_tui.compare.model import Row, same_shape
from ptdbg_tui.formats.dialects import DIALECTS, OURS, Dialect, inside_backward, is_detach, tool_noise
from ptdbg_tui.formats.naming import BACKWARD, OUTPUT
from ptdbg_tui.formats.records import Frame, StackRecord, TensorRecord
from ptdbg_tui.formats.sites import stack_site

#: Two sides written by this project's dumper.
SAME_TOOL = (DIALECTS[OURS], DIALECTS[OURS])

MODES = ("auto", "exact", "fuzzy", "align")

#: Each side's stacks by call name (``<call>_stack_info`` lines): where its calls were made.
Stacks = tuple[Mapping[str, StackRecord], Mapping[str, StackRecord]]


def _keyed_pairs(npu_keys: Sequence[Hashable], bench_keys: Sequence[Hashable]) -> Pairs:
    """Pair equal keys, the k-th occurrence on one side with the k-th on the other (O(n))."""
    first: dict[Hashable, int] = {}
    later: dict[Hashable, deque[int]] = {}
    for at, k in enumerate(bench_keys):
        if k in first:
            later.setdefault(k, deque()).append(at)
        else:
            first[k] = at
    pairs: Pairs = {}
    for i, k in enumerate(npu_keys):
        j = first.pop(k, None)
        if j is None:
            continue
        pairs[i] = j
        queue = later.get(k)
        if queue:
            first[k] = queue.popleft()
    return pairs


def _fuzzy_keys(records: Sequence[TensorRecord]) -> list[Hashable]:
    """``(prefix, op, direction, k, kind, path)`` with k the ordinal of the call among its
    api/direction calls (the normalised key without the call index)."""
    ordinal: dict[Hashable, int] = {}
    per_api: Counter[Hashable] = Counter()
    keys: list[Hashable] = []
    for r in records:
        e = r.entry
        if e is None:
            keys.append(r.name)
            continue
        prefix, op, index, direction, kind, path = e.key
        call = (prefix, op, index, direction)
        k = ordinal.get(call)
        if k is None:
            k = ordinal[call] = per_api[(prefix, op, direction)]
            per_api[(prefix, op, direction)] += 1
        keys.append((prefix, op, direction, k, kind, path))
    return keys


def model_rows(rows: Sequence[Row]) -> list[Row]:
    """The rows of the model's own calls: without a dump tool's (:attr:`Row.noise`)."""
    return [r for r in rows if not r.noise]


class _Calls:
    """One side's records grouped into calls, per direction, in order of first appearance."""

    def __init__(self, records: Sequence[TensorRecord]) -> None:
        self.members: dict[Hashable, list[int]] = {}
        self.args: dict[Hashable, list[tuple[Hashable, Hashable]]] = {}  # (argument path, shape)
        self.order: dict[str, list[Hashable]] = defaultdict(list)
        self.api: dict[Hashable, Hashable] = {}
        for i, r in enumerate(records):
            e = r.entry
            call: Hashable
            arg: Hashable
            api: Hashable
            if e is None:
                call, arg, api, direction = ("?", r.name), r.name, r.name, ""
            else:
                key = e.key
                call, arg, api, direction = key[:4], key[4:], key[:2], e.direction
            members = self.members.get(call)
            if members is None:
                members = self.members[call] = []
                self.args[call] = []
                self.order[direction].append(call)
                self.api[call] = api
            members.append(i)
            shape = r.shape_raw
            self.args[call].append((arg, tuple(shape) if isinstance(shape, list) else shape))

    def signature(self, call: Hashable) -> Hashable:
        return (self.api[call], tuple(self.args[call]))


def _pair_calls(npu: _Calls, bench: _Calls, nc: Hashable, bc: Hashable, pairs: Pairs, same: bool) -> None:
    """Pair the entries of two paired calls: in order when their signatures are equal, else by
    argument path (k-th duplicate with k-th)."""
    mn, mb = npu.members[nc], bench.members[bc]
    if same:
        pairs.update(zip(mn, mb, strict=True))
        return
    keyed = _keyed_pairs([a for a, _ in npu.args[nc]], [a for a, _ in bench.args[bc]])
    pairs.update((mn[i], mb[j]) for i, j in keyed.items())


def _aligned_pairs(npu_recs: Sequence[TensorRecord], bench_recs: Sequence[TensorRecord]) -> Pairs:
    npu, bench = _Calls(npu_recs), _Calls(bench_recs)
    ids: dict[Hashable, int] = {}
    pairs: Pairs = {}
    for direction in dict.fromkeys([*npu.order, *bench.order]):
        na, nb = npu.order.get(direction, []), bench.order.get(direction, [])
        sa = [ids.setdefault(npu.signature(c), len(ids)) for c in na]
        sb = [ids.setdefault(bench.signature(c), len(ids)) for c in nb]
        matched = align(sa, sb)
        bounds = [(-1, -1), *matched, (len(na), len(nb))]
        for (i0, j0), (i1, j1) in itertools.pairwise(bounds):
            if i1 < len(na):
                _pair_calls(npu, bench, na[i1], nb[j1], pairs, same=True)
            # calls left between two aligned ones: same api, k-th with k-th (shape changes stay visible)
            waiting: dict[Hashable, list[Hashable]] = defaultdict(list)
            for c in reversed(nb[j0 + 1 : j1]):
                waiting[bench.api[c]].append(c)
            for c in na[i0 + 1 : i1]:
                left = waiting.get(npu.api[c])
                if left:
                    _pair_calls(npu, bench, c, left.pop(), pairs, same=False)
    return pairs


def _with_bench_only(
    rows: list[Row], bench: Sequence[TensorRecord], row_of_bench: Mapping[int, int]
) -> list[Row]:
    """The NPU rows with each bench-only row right after the row of the bench entry preceding it."""
    after: dict[int, list[Row]] = defaultdict(list)
    anchor = -1
    for j, rec in enumerate(bench):
        if j in row_of_bench:
            anchor = row_of_bench[j]
        else:
            after[anchor].append(Row(None, rec))
    if not after:
        return rows
    out = list(after.get(-1, []))
    for i, row in enumerate(rows):
        out.append(row)
        out += after.get(i, [])
    return out


def _rows_in_step(npu: Sequence[TensorRecord], bench: Sequence[TensorRecord]) -> list[Row]:
    """:func:`_rows` of two sides of one tool whose entries pair one for one, in order (the same
    names): no bench-only row, no name that differs, nothing transposed."""
    rows = [Row(n, b, seq=seq) for seq, (n, b) in enumerate(zip(npu, bench, strict=True))]
    if own := tool_noise(npu) | tool_noise(bench):
        for row in rows:
            if id(row.npu) in own:
                row.noise = True
    return rows


def _gradient_misfit(npu: Sequence[TensorRecord], bench: Sequence[TensorRecord]) -> bool:
    """Some backward gradient's shapes differ between two sides whose names agree entry by entry: one
    side records that call's gradients in another order (:func:`permuted_gradients`)."""
    return any(
        n.shape_raw != b.shape_raw
        and n.entry is not None
        and n.entry.direction == BACKWARD
        and n.entry.kind == OUTPUT
        for n, b in zip(npu, bench, strict=True)
    )


def _rows(
    npu: Sequence[TensorRecord],
    bench: Sequence[TensorRecord],
    pairs: Pairs,
    dialects: tuple[Dialect, Dialect] | None = None,
    transposed: set[int] | None = None,
) -> list[Row]:
    """NPU order; each bench-only row right after the row of the bench entry preceding it
    (``dialects``: of a mixed pair; ``transposed``: the NPU entries that hold their bench tensor
    transposed)."""
    mixed = dialects is not None
    rows = [Row(rec, None, transposed=i in (transposed or ())) for i, rec in enumerate(npu)]
    row_of_bench: dict[int, int] = {}
    for i, j in pairs.items():
        row, other, rec = rows[i], bench[j], npu[i]
        row.bench = other
        if mixed:  # the names differ by grammar: what counts is whether they name the same tensor
            row.fuzzy = (other.entry.key if other.entry else other.name) != (
                rec.entry.key if rec.entry else rec.name
            )
        else:
            row.fuzzy = other.name != npu[i].name
        row_of_bench[j] = i
    out = _with_bench_only(rows, bench, row_of_bench)
    own = tool_noise(npu) | tool_noise(bench)
    alone: set[int] = set()  # what one tool of a mixed pair records inside the backward
    for recs, dialect in zip((npu, bench), dialects or (), strict=False):
        if dialect.records_inside_backward:
            alone |= inside_backward(recs)
    for seq, row in enumerate(out):
        row.seq = seq
        if id(row.record) in own or (
            mixed and not row.matched and (is_detach(row.record) or id(row.record) in alone)
        ):
            row.noise = True
    return out


def match_records(
    npu: Sequence[TensorRecord],
    bench: Sequence[TensorRecord],
    mode: str = "exact",
    dialects: tuple[Dialect, Dialect] = SAME_TOOL,
    stacks: Stacks | None = None,
) -> list[Row]:
    """Rows in output (execution) order with ``Row.seq`` set; see the module doc for the modes
    (``dialects``, ``stacks``: :func:`choose_match`)."""
    return choose_match(npu, bench, mode, dialects, stacks).rows


@dataclass(slots=True)
class Matching:
    """The rows of a matching, the mode that made them, and why ``auto`` chose it."""

    rows: list[Row]
    mode: str
    note: AutoAligned | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AutoAligned:
    """Why ``auto`` aligned the calls: exact names left entries of one side only (and pairs of
    different shapes), which the alignment pairs better."""

    npu_only: int
    bench_only: int
    shapes: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Misfits:
    """Why ``align`` may pair better: entries left unpaired, pairs of different shapes."""

    unpaired: int
    shapes: int


def match_advice(matching: Matching, waiting: Callable[[Row], bool] | None = None) -> Misfits | None:
    """Why ``align`` may pair better: entries left unpaired (one extra call shifts every later index
    by name, so the calls after it pair with the wrong ones) or paired entries of different shapes;
    ``None`` when neither, and when a side has no entries at all (no matching pairs what is not there).
    ``waiting``: whether an unpaired row may still find its counterpart (live: the other side has not
    written that far yet); those are not counted, since a tail not yet written is no bad pairing."""
    if matching.mode == "align":
        return None
    rows = [r for r in matching.rows if not r.noise]  # not a tool's own
    if not any(r.npu is not None for r in rows) or not any(r.bench is not None for r in rows):
        return None
    if waiting is not None:
        rows = [r for r in rows if r.matched or not waiting(r)]
    tail = one_sided_tail(rows)
    if tail is not None:  # no matching pairs what the other run never wrote
        rows = rows[: len(rows) - tail.entries]
    rows = _shiftable(rows)
    npu_only, bench_only, shapes = _misfits(rows)
    if not (npu_only or bench_only or shapes):
        return None
    return Misfits(unpaired=npu_only + bench_only, shapes=shapes)


@dataclass(frozen=True, slots=True)
class Tail:
    """The entries after the last paired one that only one side has: that run went on after the
    other's dump ends (the other crashed, was stopped, or made fewer steps)."""

    side: str  # "NPU" or "bench": the side that has them
    entries: int  # rows from the end of the matching, the tool's own unpaired ones among them
    first: str  # the first such entry's name
    calls: int


#: Fewest calls in a one-sided tail that read as one run ending early: a single trailing call only
#: one side has is as likely an extra call whose name shifted the others (the last optimizer add_).
TAIL_CALLS = 2


def one_sided_tail(rows: Sequence[Row]) -> Tail | None:
    """The trailing rows (execution order) of one side only, after at least one paired row, spanning
    :data:`TAIL_CALLS` calls or more; None when the tail mixes both sides or there is none."""
    side, k, first, calls = "", len(rows), "", set()
    while k > 0:
        r = rows[k - 1]
        if r.matched:
            break
        k -= 1
        if r.noise:  # a tool's own entry: neither ends nor makes a tail
            continue
        this = "bench" if r.npu is None else "NPU"
        if side and this != side:
            return None
        side, first = this, r.name
        calls.add(r.record.call)
    if k == 0 or not side or len(calls) < TAIL_CALLS:
        return None
    return Tail(side, len(rows) - k, first, len(calls))


def ended_early(rows: Sequence[Row]) -> Tail | None:
    """The one-sided tail of a run that stopped before the other: None when that side also lacks
    entries before it, as a dump narrowed to a module or scope does (its tail is the optimizer's
    calls, which it never records, not a run cut short)."""
    tail = one_sided_tail(rows)
    if tail is None:
        return None
    has: Callable[[Row], bool] = (
        (lambda r: r.npu is None) if tail.side == "bench" else (lambda r: r.bench is None)
    )
    before = rows[: len(rows) - tail.entries]
    return None if any(has(r) and not r.noise for r in before) else tail


def _op_of(rec: TensorRecord) -> tuple[str, str] | None:
    entry = rec.entry
    return (entry.prefix, entry.op) if entry is not None else None


def _shiftable(rows: list[Row]) -> list[Row]:
    """The rows, less the unpaired ones whose op the other side never calls: no name shifted by an
    extra call left them unpaired, and no alignment pairs them (msprobe, started later, never saw
    the bench's model initialisation: uniform_, fill_); less a one-sided ``null`` too (msprobe: a
    gradient slot one run's autograd node has and the other's lacks), which holds no tensor to pair."""
    if all(r.npu is not None and r.bench is not None for r in rows):  # nothing unpaired: no op to look up
        return rows
    calls = ({_op_of(r.npu) for r in rows if r.npu}, {_op_of(r.bench) for r in rows if r.bench})

    def shiftable(r: Row) -> bool:
        if r.npu is not None and r.bench is not None:
            return True
        side, rec = (1, r.npu) if r.npu is not None else (0, r.bench)
        if rec is not None and rec.is_none:
            return False
        op = _op_of(rec) if rec is not None else None
        return op is None or op in calls[side]

    return [r for r in rows if shiftable(r)]


def _misfits(rows: Sequence[Row]) -> tuple[int, int, int]:
    """(NPU-only rows, bench-only rows, matched rows whose shapes differ)."""
    npu_only = bench_only = shapes = 0
    for r in rows:  # one pass: an LLM pair has ~10,000 rows
        n, b = r.npu, r.bench
        if n is None or b is None:
            npu_only += b is None
            bench_only += n is None
        elif not same_shape(n, b, r.transposed):
            shapes += 1
    return npu_only, bench_only, shapes


def choose_match(
    npu: Sequence[TensorRecord],
    bench: Sequence[TensorRecord],
    mode: str = "auto",
    dialects: tuple[Dialect, Dialect] = SAME_TOOL,
    stacks: Stacks | None = None,
) -> Matching:
    """Match in ``mode`` (``dialects``: how each side's tool records; two tools make a mixed pair;
    ``stacks``: each side's stacks, which keep calls made at different code sites apart);
    ``auto`` picks exact or align as the module doc says."""
    if mode != "auto":
        return Matching(_match(npu, bench, mode, dialects, stacks), mode)
    rows = _match(npu, bench, "exact", dialects, stacks)
    npu_only, bench_only, shapes = _misfits(rows)
    if not ((npu_only and bench_only) or shapes):
        return Matching(rows, "exact")
    aligned = _match(npu, bench, "align", dialects, stacks)
    if sum(_misfits(aligned)) >= npu_only + bench_only + shapes:
        return Matching(rows, "exact")
    return Matching(aligned, "align", AutoAligned(npu_only=npu_only, bench_only=bench_only, shapes=shapes))


def _match(
    npu: Sequence[TensorRecord],
    bench: Sequence[TensorRecord],
    mode: str,
    dialects: tuple[Dialect, Dialect],
    stacks: Stacks | None = None,
) -> list[Row]:
    mixed = dialects[0].tool != dialects[1].tool
    if mode == "exact" and mixed:
        pairs = _keyed_pairs(
            [r.entry.key if r.entry else r.name for r in npu],
            [r.entry.key if r.entry else r.name for r in bench],
        )
    elif mode == "exact":
        names = [r.name for r in npu]
        bench_names = [r.name for r in bench]
        # the usual pair: the k-th entry of each side pairs with the other's
        if names == bench_names and not _gradient_misfit(npu, bench):
            return _rows_in_step(npu, bench)
        pairs = _keyed_pairs(names, bench_names)
    elif mode == "fuzzy":
        pairs = _keyed_pairs(_fuzzy_keys(npu), _fuzzy_keys(bench))
    elif mode == "align":
        pairs = _aligned_pairs(npu, bench)
    else:
        raise ValueError(f"unknown match mode {mode!r} (expected one of {', '.join(MODES)})")
    if stacks is not None:
        pairs = _at_one_site(npu, bench, pairs, stacks)
    if not mixed:
        pairs, transposed = permuted_gradients(npu, bench, pairs)
        return _rows(npu, bench, pairs, transposed=transposed)
    pairs, transposed = same_tensors(npu, bench, pairs, dialects)
    return _rows(npu, bench, pairs, dialects, transposed)


def _at_one_site(
    npu: Sequence[TensorRecord], bench: Sequence[TensorRecord], pairs: Pairs, stacks: Stacks
) -> Pairs:
    """``pairs`` less those of two calls made at different code sites (a backward call: by its forward
    call's site), which a name only shares by its counter."""
    sites: dict[tuple[str, str], tuple[Frame | None, Frame | None]] = {}
    for i, j in pairs.items():
        calls = _forward_calls(npu[i], bench[j])
        if calls is not None and calls not in sites:
            sites[calls] = (stack_site(stacks[0].get(calls[0])), stack_site(stacks[1].get(calls[1])))
    shifts = {shift for a, b in sites.values() if (shift := _shift(a, b, same_code=True)) is not None}
    known = shifts | {None}
    apart = {calls for calls, (a, b) in sites.items() if _shift(a, b, same_code=False) not in known}
    return {i: j for i, j in pairs.items() if _forward_calls(npu[i], bench[j]) not in apart}


def _forward_calls(npu: TensorRecord, bench: TensorRecord) -> tuple[str, str] | None:
    if npu.entry is None or bench.entry is None:
        return None
    return npu.entry.forward_call, bench.entry.forward_call


def _shift(npu: Frame | None, bench: Frame | None, same_code: bool) -> tuple[str, str, int] | None:
    """Where two paired calls' user sites lie relative to each other, ``(NPU file, bench file, NPU line -
    bench line)``, when both are recorded and their source lines are (``same_code``) or are not one line
    of code; ``None`` otherwise.

    A port moves its script (another folder, every line shifted by ``import torch_npu``) and edits some
    lines (``x.to("npu")``): calls on one line of code show the shifts between the scripts, and a call on
    another line of code at one of those shifts is made at the same place. Two calls on other lines of
    code at no such shift are made at different sites: the NPU's ``h.mul_(1.01)`` in its model, the
    bench's momentum ``buf.mul_(0.9)`` from ``opt.step()``."""
    if npu is None or bench is None or npu.source is None or bench.source is None:
        return None
    if (_code(npu.source) == _code(bench.source)) != same_code or not (
        npu.line.isdigit() and bench.line.isdigit()
    ):
        return None
    return _file(npu.path), _file(bench.path), int(npu.line) - int(bench.line)


def _code(source: str) -> str:
    """A source line without its comment and spacing."""
    return "".join(source.split("#", 1)[0].split())


def _file(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]


def attach_stacks(rows: Sequence[Row], npu_stacks: Mapping[str, StackRecord]) -> None:
    """Put each NPU call's stack on the first row of that call (the original: first input row)."""
    seen: set[str] = set()
    for row in rows:
        row.stack = None
        if row.npu is None:
            continue
        call = row.npu.call
        if call not in seen:
            seen.add(call)
            row.stack = npu_stacks.get(call)
