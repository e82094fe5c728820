"""Pairing NPU entries with bench entries, in three modes, reporting what is left on either side.

- ``exact``: by full entry name (the k-th occurrence of a duplicated name pairs with the k-th).
- ``fuzzy``: call index dropped: the k-th call of an api/direction pairs with the k-th call of the
  same api/direction on the other side, entries within by argument path.
- ``auto`` (the default): exact, unless that leaves calls unpaired on both sides or pairs entries of
  different shapes (one side called a fused op, the other its decomposition: every later index
  shifts); then ``align``, when it pairs better.
- ``align``: sequence alignment of the per-direction call order by an index-free signature
  (api, direction, argument paths, shapes), so one extra or missing call does not shift every
  later pairing; leftover calls between aligned ones pair by api (a shape change stays visible).

Unlike the original (spec §5.3), unmatched entries of both sides become rows.

**Mixed pairs** (``mixed=True``: each side written by another tool — msprobe, the original
ptdbg_ascend, this project's dumper) pair by :attr:`~ptdbg_tui.formats.naming.EntryName.key`,
which both grammars share, and only entries of equal shapes pair: the tools record different
tensors under the same argument path (the original and msprobe take a backward's gradients in
its autograd node's order, ours by forward argument, so linear's bias gradient is ``output.0``
there and ``output.2`` here, batch_norm's weight/bias ``.1/.2`` against ``.3/.4``; an LSTM's
inner node against the whole op). Entries of two paired calls left over then pair by kind and
shape, in order.

The original's own ``Tensor_detach`` calls are marked :attr:`~ptdbg_tui.compare.model.Row.noise`:
its hooks detach every tensor they record, and its max, min, mean and norm, through the wrapped
``Tensor.detach``, which it records as a forward call wherever no wrapped call is running: in the
backward, between the backward calls. In a mixed pair every unpaired detach is one; in any pair,
every detach recorded in the backward (paired too, when both sides are the
original's: it holds a gradient or a statistic of one, and :func:`model_rows` leaves it out of the
diagnosis, where it would read as a forward call that error enters).
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections import Counter, defaultdict, deque
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from ptdbg_tui.compare.model import Row
from ptdbg_tui.formats.naming import BACKWARD, FORWARD, INPUT, OUTPUT, STYLE_MSPROBE
from ptdbg_tui.formats.reader import is_detach
from ptdbg_tui.formats.records import StackRecord, TensorRecord

MODES = ("auto", "exact", "fuzzy", "align")
#: Work budget (snake steps) of one Myers diff: at most this, and this many per element, before
#: the segment is split at unique anchors instead (or paired by occurrence).
MYERS_BUDGET = 1_000_000
MYERS_STEPS_PER_ELEMENT = 64

Pairs = dict[int, int]  # npu index -> bench index


def _keyed_pairs(npu_keys: Sequence[Hashable], bench_keys: Sequence[Hashable]) -> Pairs:
    """Pair equal keys, the k-th occurrence on one side with the k-th on the other (O(n))."""
    first: dict[Hashable, int] = {}
    later: dict[Hashable, deque[int]] = {}
    for j, k in enumerate(bench_keys):
        if k in first:
            later.setdefault(k, deque()).append(j)
        else:
            first[k] = j
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


def _shape(rec: TensorRecord) -> Hashable:
    shape = rec.shape_raw
    return tuple(shape) if isinstance(shape, list) else shape


def _call_of(rec: TensorRecord) -> Hashable:
    """A call's identity in both grammars: (prefix, op, index, direction)."""
    return rec.entry.key[:4] if rec.entry is not None else ("?", rec.name)


def _kind_of(rec: TensorRecord) -> str:
    return rec.entry.kind if rec.entry is not None else ""


def _gradients(records: Sequence[TensorRecord]) -> dict[Hashable, list[int]]:
    """Per backward call, its recorded gradients (top-level ``output`` entries with a value), in order."""
    return {call: [i for i in ix if not records[i].is_none]
            for call, ix in _top_entries(records, BACKWARD, OUTPUT).items()}


def _gradient_ordinals(npu: Sequence[TensorRecord], bench: Sequence[TensorRecord],
                       call_pair: Mapping[Hashable, Hashable],
                       skip: tuple[set[int], set[int]] = (set(), set())) -> Pairs:
    """Mixed pairs: the gradients of two paired backward calls, k-th present with k-th present, where
    their shapes agree. msprobe and the original number a backward's gradients in its autograd
    node's order, ours by forward argument position, and for most ops both orders list the
    differentiable arguments alike: layer_norm's weight/bias gradients are ``.1/.2`` there and
    ``.2/.3`` here (``normalized_shape`` is an argument, not a gradient), so pairing by path would
    put the bias against the weight (both ``[C]``)."""
    npu_grads, bench_grads = _gradients(npu), _gradients(bench)
    pairs: Pairs = {}
    for nc, bc in call_pair.items():
        for i, j in zip([i for i in npu_grads.get(nc, ()) if i not in skip[0]],
                        [j for j in bench_grads.get(bc, ()) if j not in skip[1]], strict=False):
            if _shape(npu[i]) == _shape(bench[j]):
                pairs[i] = j
    return pairs


#: Ops whose backward msprobe and the original record at their last autograd node rather than the op's
#: own gradient: cross_entropy's ``output.0`` there is nll_loss's (the log-probabilities' gradient),
#: ours the logits'. Same shape, different tensors: a mixed pair leaves them unpaired.
INNER_NODE_BACKWARD = frozenset({"cross_entropy"})


def _inner_node_gradient(rec: TensorRecord) -> bool:
    e = rec.entry
    return e is not None and e.direction == BACKWARD and e.kind == OUTPUT and e.op in INNER_NODE_BACKWARD


#: Ops that may write their first argument (``relu(x, inplace=True)``, and any ``op_``).
INPLACE_CAPABLE = frozenset({"relu", "relu6", "elu", "selu", "celu", "leaky_relu", "rrelu", "hardtanh",
                             "silu", "hardswish", "hardsigmoid", "mish", "threshold", "dropout", "dropout1d",
                             "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout"})


def _top_entries(records: Sequence[TensorRecord], direction: str,
                 kind: str) -> dict[Hashable, list[int]]:
    """Per call of ``direction``, its top-level entries of ``kind`` (``None`` values included), in order."""
    out: dict[Hashable, list[int]] = defaultdict(list)
    for i, rec in enumerate(records):
        e = rec.entry
        if e is not None and e.direction == direction and e.kind == kind and len(e.path) <= 1:
            out[_call_of(rec)].append(i)
    return out


def _position(rec: TensorRecord) -> int:
    """A top-level entry's argument position (``output`` alone: 0)."""
    path = rec.entry.path if rec.entry is not None else ()
    return int(path[0]) if path and isinstance(path[0], int) else 0


#: ``linear``'s gradients as a dump in autograd order numbers them (its ``addmm`` node: bias, input,
#: transposed weight; ``mm`` without a bias: input, transposed weight), by the node's arity, each
#: mapped to our argument position (``None``: the transposed weight's, never ours, even when square).
LINEAR_NODE_GRADIENTS: dict[int, tuple[int | None, ...]] = {3: (2, 0, None), 2: (0, None)}


def _linear_gradients(theirs: Sequence[TensorRecord], ours: Sequence[TensorRecord],
                      call_pair: Iterable[tuple[Hashable, Hashable]]) -> tuple[Pairs, set[int], set[int]]:
    """Of paired ``linear`` backward calls, a side in autograd order (``theirs``) against ours: the
    gradient pairs by :data:`LINEAR_NODE_GRADIENTS` (equal shapes only), and every gradient entry
    of those calls on either side, which pair no other way (by position or shape, a batch of 64
    rows would put the input's gradient against a 64x64 weight's). A linear of a 3-D input ends in
    a view node (one gradient): :func:`_inner_nodes`."""
    their_grads, our_grads = _top_entries(theirs, BACKWARD, OUTPUT), _top_entries(ours, BACKWARD, OUTPUT)
    pairs: Pairs = {}
    skip_theirs: set[int] = set()
    skip_ours: set[int] = set()
    for tc, oc in call_pair:
        t, o = their_grads.get(tc, []), our_grads.get(oc, [])
        e = theirs[t[0]].entry if t else None
        if e is None or e.op != "linear" or not o:
            continue
        mapping = LINEAR_NODE_GRADIENTS.get(max(_position(theirs[i]) for i in t) + 1)
        if mapping is None:
            continue
        ours_at = {_position(ours[j]): j for j in o}
        for i in t:
            k = _position(theirs[i])
            j = ours_at.get(mapping[k]) if mapping[k] is not None else None  # type: ignore[arg-type]
            if j is not None and _shape(theirs[i]) == _shape(ours[j]):
                pairs[i] = j
        skip_theirs.update(t)
        skip_ours.update(o)
    return pairs, skip_theirs, skip_ours


def _inner_nodes(npu: Sequence[TensorRecord], bench: Sequence[TensorRecord],
                 call_pair: Mapping[Hashable, Hashable]) -> tuple[set[int], set[int]]:
    """The gradients a side records at an inner autograd node: of two paired backward calls, the one
    that records a single gradient where the other records two or more. msprobe and the original
    hook the node the op's output hangs from; for a composite op (``matmul`` of 3-D tensors,
    ``scaled_dot_product_attention`` on CPU) that is a view or reshape node with one input, and its
    gradient (the incoming one, reshaped) often has the shape of one of the op's own."""
    grads = (_top_entries(npu, BACKWARD, OUTPUT), _top_entries(bench, BACKWARD, OUTPUT))
    present = [{c: sum(not recs[i].is_none for i in ix) for c, ix in g.items()} for g, recs in
               zip(grads, (npu, bench), strict=True)]
    inner: tuple[set[int], set[int]] = (set(), set())
    for nc, bc in call_pair.items():
        n, b = grads[0].get(nc, []), grads[1].get(bc, [])
        if len(n) == 1 and present[1].get(bc, 0) >= 2:
            inner[0].update(n)
        elif len(b) == 1 and present[0].get(nc, 0) >= 2:
            inner[1].update(b)
    return inner


def _stats_distance(a: TensorRecord, b: TensorRecord) -> float:
    """How far two records' statistics are apart (relative, summed; inf when either has none)."""
    if not a.stats or not b.stats or len(a.stats) != len(b.stats):
        return math.inf
    try:
        return sum(abs(float(x) - float(y)) / (abs(float(y)) + 1e-30)
                   for x, y in zip(a.stats, b.stats, strict=True))
    except (TypeError, ValueError):
        return math.inf


def _written_inputs(npu: Sequence[TensorRecord], bench: Sequence[TensorRecord],
                    call_pair: Mapping[Hashable, Hashable],
                    ordered: tuple[bool, bool]) -> tuple[set[int], set[int]]:
    """The first inputs of in-place calls that the original records after the call wrote them: it
    records a forward's inputs when the call has returned (msprobe and ours before it runs), so
    ``relu(x, inplace=True)``'s ``input.0`` there is its output. Known by the statistics: there,
    ``input.0`` equals the output; it is nearer our output than our input, which differ. (A call
    that failed to write, the output its input, stays paired: there it is nearer our input.)"""
    sides = [(recs, _top_entries(recs, FORWARD, INPUT), _top_entries(recs, FORWARD, OUTPUT))
             for recs in (npu, bench)]
    out: tuple[set[int], set[int]] = (set(), set())
    for s, o in ((0, 1), (1, 0)):
        recs, ins, outs = sides[s]
        if not ordered[s] or ordered[o] or any(r.entry is not None and r.entry.style == STYLE_MSPROBE
                                               for r in recs[:1]):
            continue
        other, other_ins, other_outs = sides[o]
        for nc, bc in call_pair.items():
            call, other_call = (nc, bc) if s == 0 else (bc, nc)
            i, x = ins.get(call), outs.get(call)
            oi, ox = other_ins.get(other_call), other_outs.get(other_call)
            if not (i and x and oi and ox):
                continue
            e = recs[i[0]].entry
            if e is None or not (e.op.endswith("_") or e.op in INPLACE_CAPABLE):
                continue
            mine, our_in, our_out = recs[i[0]], other[oi[0]], other[ox[0]]
            if _stats_distance(mine, recs[x[0]]) == 0 and _stats_distance(our_in, our_out) > 0 \
                    and _stats_distance(mine, our_out) < _stats_distance(mine, our_in):
                out[s].add(i[0])
    return out


def _same_shapes(npu: Sequence[TensorRecord], bench: Sequence[TensorRecord], pairs: Pairs,
                 ordered: tuple[bool, bool] = (True, False)) -> Pairs:
    """Mixed pairs: keep the pairs of equal shapes; then, within calls that were paired, pair the
    entries left over by kind and shape, k-th with k-th. Entries the tools record differently stay
    unpaired: gradients at different autograd nodes (:data:`INNER_NODE_BACKWARD`,
    :func:`_inner_nodes`), linear's transposed weight gradient of a side in autograd order
    (``ordered``: per side, whether its tool records a backward's gradients in autograd-node order)
    against one that is not (:func:`_linear_gradients`), an in-place call's input
    recorded after the write (:func:`_written_inputs`)."""
    call_pair: dict[Hashable, Hashable] = {}
    for i, j in pairs.items():
        call_pair.setdefault(_call_of(npu[i]), _call_of(bench[j]))
    skip_npu, skip_bench = _inner_nodes(npu, bench, call_pair)
    written = _written_inputs(npu, bench, call_pair, ordered)
    skip_npu |= written[0]
    skip_bench |= written[1]
    linear: Pairs = {}
    if ordered[0] and not ordered[1]:
        linear, linear_npu, linear_bench = _linear_gradients(npu, bench, call_pair.items())
        skip_npu |= linear_npu
        skip_bench |= linear_bench
    elif ordered[1] and not ordered[0]:
        swapped = [(b, n) for n, b in call_pair.items()]
        flipped, linear_bench, linear_npu = _linear_gradients(bench, npu, swapped)
        linear = {i: j for j, i in flipped.items()}
        skip_npu |= linear_npu
        skip_bench |= linear_bench
    pairs = {i: j for i, j in pairs.items() if i not in skip_npu and j not in skip_bench}
    kept = _gradient_ordinals(npu, bench, call_pair, (skip_npu, skip_bench))
    used = set(kept.values())
    for i, j in pairs.items():
        if i not in kept and j not in used and _shape(npu[i]) == _shape(bench[j]):
            kept[i] = j
            used.add(j)
    waiting: dict[Hashable, deque[int]] = defaultdict(deque)
    for j, rec in enumerate(bench):
        if j not in used and j not in skip_bench:
            waiting[(_call_of(rec), _kind_of(rec), _shape(rec))].append(j)
    for i, rec in enumerate(npu):
        if i in kept or i in skip_npu:
            continue
        other = call_pair.get(_call_of(rec))
        queue = waiting.get((other, _kind_of(rec), _shape(rec))) if other is not None else None
        if queue:
            kept[i] = queue.popleft()
    kept.update(linear)
    return {i: j for i, j in kept.items() if not _inner_node_gradient(npu[i])}


def _tool_detaches(recs: Sequence[TensorRecord]) -> set[int]:
    """The ids of the original's own ``detach`` records: the ``Tensor_detach`` calls recorded once
    the backward has begun (its forward hooks run inside the wrapped call, where nothing is
    recorded; its backward hooks outside any, where their detaches of each tensor they record and
    of its statistics are), those of the first backward tensor just before its record included."""
    backward = (i for i, rec in enumerate(recs) if rec.entry is not None and rec.entry.direction == BACKWARD)
    start = next(backward, len(recs))
    while start > 0 and is_detach(recs[start - 1]):
        start -= 1
    return {id(rec) for rec in recs[start:] if is_detach(rec)}


def model_rows(rows: Sequence[Row]) -> list[Row]:
    """The rows of the model's own calls: without a dump tool's (:attr:`Row.noise`)."""
    return [r for r in rows if not r.noise]


# --- alignment ------------------------------------------------------------------------------


def _lis(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Longest chain of pairs increasing in both coordinates (pairs sorted by the first)."""
    tails: list[int] = []  # tails[k]: smallest j ending a chain of length k+1
    tail_idx: list[int] = []
    prev = [-1] * len(pairs)
    for n, (_, j) in enumerate(pairs):
        k = bisect.bisect_left(tails, j)
        if k == len(tails):
            tails.append(j)
            tail_idx.append(n)
        else:
            tails[k] = j
            tail_idx[k] = n
        prev[n] = tail_idx[k - 1] if k else -1
    out = []
    n = tail_idx[-1] if tail_idx else -1
    while n >= 0:
        out.append(pairs[n])
        n = prev[n]
    return out[::-1]


def _myers(a: Sequence[int], b: Sequence[int], budget: int) -> list[tuple[int, int]] | None:
    """Matched positions of a shortest edit script (Myers 1986); ``None`` past ``budget`` steps."""
    n, m = len(a), len(b)
    v = {1: 0}
    trace = []
    work = 0
    for d in range(n + m + 1):
        trace.append(v.copy())
        for k in range(-d, d + 1, 2):
            x = v[k + 1] if k == -d or (k != d and v[k - 1] < v[k + 1]) else v[k - 1] + 1
            y = x - k
            start = x
            while x < n and y < m and a[x] == b[y]:
                x += 1
                y += 1
            work += x - start + 1
            v[k] = x
            if x >= n and y >= m:
                return _backtrack(trace, n, m)
        if work > budget:
            return None
    return None


def _backtrack(trace: list[dict[int, int]], x: int, y: int) -> list[tuple[int, int]]:
    """Walk the edit graph back from (x, y); ``trace[d]`` is V as it was before step d."""
    out = []
    for d in range(len(trace) - 1, 0, -1):
        v = trace[d]
        k = x - y
        down = k == -d or (k != d and v[k - 1] < v[k + 1])
        px = v[k + 1] if down else v[k - 1]
        py = px - (k + 1 if down else k - 1)
        mx, my = (px, py + 1) if down else (px + 1, py)
        while x > mx and y > my:  # the snake after this step's edit
            x, y = x - 1, y - 1
            out.append((x, y))
        x, y = px, py
    while x > 0 and y > 0:  # d == 0: the common prefix
        x, y = x - 1, y - 1
        out.append((x, y))
    return out[::-1]


def _occurrence_chain(a: Sequence[int], b: Sequence[int]) -> list[tuple[int, int]]:
    """Fallback: k-th occurrence pairs, kept where they do not cross."""
    waiting: dict[int, list[int]] = defaultdict(list)
    for j in range(len(b) - 1, -1, -1):
        waiting[b[j]].append(j)
    pairs = [(i, waiting[x].pop()) for i, x in enumerate(a) if waiting.get(x)]
    return _lis(pairs)


def _unique_anchors(a: Sequence[int], b: Sequence[int]) -> list[tuple[int, int]]:
    """Patience anchors: elements occurring once on each side, longest non-crossing chain."""
    ca, cb = Counter(a), Counter(b)
    where_b = {x: j for j, x in enumerate(b) if cb[x] == 1}
    return _lis([(i, where_b[x]) for i, x in enumerate(a) if ca[x] == 1 and x in where_b])


def align(a: Sequence[int], b: Sequence[int]) -> list[tuple[int, int]]:
    """Matched index pairs of two sequences, increasing in both (Myers, split at patience anchors)."""
    out: list[tuple[int, int]] = []
    todo = [(0, len(a), 0, len(b))]
    while todo:
        alo, ahi, blo, bhi = todo.pop()
        while alo < ahi and blo < bhi and a[alo] == b[blo]:
            out.append((alo, blo))
            alo, blo = alo + 1, blo + 1
        while alo < ahi and blo < bhi and a[ahi - 1] == b[bhi - 1]:
            ahi, bhi = ahi - 1, bhi - 1
            out.append((ahi, bhi))
        if alo == ahi or blo == bhi:
            continue
        sa, sb = a[alo:ahi], b[blo:bhi]
        # Optimal when the segment differs in few places; otherwise split it at unique anchors.
        found = _myers(sa, sb, min(MYERS_BUDGET, MYERS_STEPS_PER_ELEMENT * (len(sa) + len(sb))))
        if found is not None:
            out += [(alo + i, blo + j) for i, j in found]
            continue
        anchors = _unique_anchors(sa, sb)
        if not anchors:
            out += [(alo + i, blo + j) for i, j in _occurrence_chain(sa, sb)]
            continue
        pi, pj = 0, 0
        for i, j in anchors:
            todo.append((alo + pi, alo + i, blo + pj, blo + j))
            out.append((alo + i, blo + j))
            pi, pj = i + 1, j + 1
        todo.append((alo + pi, ahi, blo + pj, bhi))
    return sorted(out)


class _Calls:
    """One side's records grouped into calls, per direction, in order of first appearance."""

    def __init__(self, records: Sequence[TensorRecord]) -> None:
        self.members: dict[Hashable, list[int]] = {}
        self.args: dict[Hashable, list[tuple[Hashable, Hashable]]] = {}  # (argument path, shape)
        self.order: dict[str, list[Hashable]] = defaultdict(list)
        self.api: dict[Hashable, Hashable] = {}
        for i, r in enumerate(records):
            e = r.entry
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
            for c in reversed(nb[j0 + 1:j1]):
                waiting[bench.api[c]].append(c)
            for c in na[i0 + 1:i1]:
                left = waiting.get(npu.api[c])
                if left:
                    _pair_calls(npu, bench, c, left.pop(), pairs, same=False)
    return pairs


# --- rows -----------------------------------------------------------------------------------


def _rows(npu: Sequence[TensorRecord], bench: Sequence[TensorRecord], pairs: Pairs,
          mixed: bool = False) -> list[Row]:
    """NPU order; each bench-only row right after the row of the bench entry preceding it."""
    rows = [Row(rec, None) for rec in npu]
    row_of_bench: dict[int, int] = {}
    for i, j in pairs.items():
        row, other = rows[i], bench[j]
        row.bench = other
        if mixed:  # the names differ by grammar: what counts is whether they name the same tensor
            row.fuzzy = (other.entry.key if other.entry else other.name) != (
                npu[i].entry.key if npu[i].entry else npu[i].name)
        else:
            row.fuzzy = other.name != npu[i].name
        row_of_bench[j] = i
    after: dict[int, list[Row]] = defaultdict(list)
    anchor = -1
    for j, rec in enumerate(bench):
        if j in row_of_bench:
            anchor = row_of_bench[j]
        else:
            after[anchor].append(Row(None, rec))
    if not after:
        out = rows
    else:
        out = list(after.get(-1, []))
        for i, row in enumerate(rows):
            out.append(row)
            out += after.get(i, [])
    own = _tool_detaches(npu) | _tool_detaches(bench)
    for seq, row in enumerate(out):
        row.seq = seq
        if id(row.record) in own or (mixed and not row.matched and is_detach(row.record)):
            row.noise = True
    return out


def match_records(npu: Sequence[TensorRecord], bench: Sequence[TensorRecord],
                  mode: str = "exact", mixed: bool = False,
                  ordered: tuple[bool, bool] = (True, False)) -> list[Row]:
    """Rows in output (execution) order with ``Row.seq`` set; see the module doc for the modes
    (``ordered``: :func:`choose_match`)."""
    return choose_match(npu, bench, mode, mixed, ordered).rows


@dataclass(slots=True)
class Matching:
    """The rows of a matching, the mode that made them, and why ``auto`` chose it."""

    rows: list[Row]
    mode: str
    note: str = ""


def match_advice(matching: Matching) -> str:
    """Why ``align`` may pair better: entries left unpaired (one extra call shifts every later index
    by name, so the calls after it pair with the wrong ones) or paired entries of different shapes;
    "" when neither, and when a side has no entries at all (no matching pairs what is not there)."""
    if matching.mode == "align":
        return ""
    rows = [r for r in matching.rows if not r.noise]  # not a tool's own
    if not any(r.npu is not None for r in rows) or not any(r.bench is not None for r in rows):
        return ""
    npu_only, bench_only, shapes = _misfits(rows)
    parts = [f"{npu_only + bench_only:,} unpaired"] if npu_only or bench_only else []
    if shapes:
        parts.append(f"{shapes:,} shapes differ")
    return ", ".join(parts)


def _misfits(rows: Sequence[Row]) -> tuple[int, int, int]:
    """(NPU-only rows, bench-only rows, matched rows whose shapes differ)."""
    npu_only = sum(1 for r in rows if r.bench is None)
    bench_only = sum(1 for r in rows if r.npu is None)
    shapes = sum(1 for r in rows if r.matched and r.npu.shape_raw != r.bench.shape_raw)
    return npu_only, bench_only, shapes


def choose_match(npu: Sequence[TensorRecord], bench: Sequence[TensorRecord], mode: str = "auto",
                 mixed: bool = False, ordered: tuple[bool, bool] = (True, False)) -> Matching:
    """Match in ``mode`` (``mixed``: the sides come from different tools; ``ordered``: per side,
    whether its tool records a backward's gradients in autograd-node order, as msprobe and the
    original do, :func:`ptdbg_tui.formats.reader.autograd_order`); ``auto`` picks exact or align
    as the module doc says."""
    if mode != "auto":
        return Matching(_match(npu, bench, mode, mixed, ordered), mode)
    rows = _match(npu, bench, "exact", mixed, ordered)
    npu_only, bench_only, shapes = _misfits(rows)
    if not ((npu_only and bench_only) or shapes):
        return Matching(rows, "exact")
    aligned = _match(npu, bench, "align", mixed, ordered)
    if sum(_misfits(aligned)) >= npu_only + bench_only + shapes:
        return Matching(rows, "exact")
    why = (f"exact names left {npu_only} NPU-only and {bench_only} bench-only entries"
           + (f" and {shapes} shape mismatches" if shapes else ""))
    return Matching(aligned, "align", f"calls aligned automatically ({why})")


def _match(npu: Sequence[TensorRecord], bench: Sequence[TensorRecord], mode: str, mixed: bool,
           ordered: tuple[bool, bool] = (True, False)) -> list[Row]:
    if mode == "exact" and mixed:
        pairs = _keyed_pairs([r.entry.key if r.entry else r.name for r in npu],
                             [r.entry.key if r.entry else r.name for r in bench])
    elif mode == "exact":
        pairs = _keyed_pairs([r.name for r in npu], [r.name for r in bench])
    elif mode == "fuzzy":
        pairs = _keyed_pairs(_fuzzy_keys(npu), _fuzzy_keys(bench))
    elif mode == "align":
        pairs = _aligned_pairs(npu, bench)
    else:
        raise ValueError(f"unknown match mode {mode!r} (expected one of {', '.join(MODES)})")
    if mixed:
        pairs = _same_shapes(npu, bench, pairs, ordered)
    return _rows(npu, bench, pairs, mixed)


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
