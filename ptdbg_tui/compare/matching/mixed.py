"""Mixed pairs: two sides written by different tools, which record some tensors differently.

Names pair by :attr:`~ptdbg_tui.formats.naming.EntryName.key`, which both grammars share, and only
entries of equal shapes pair: the tools record different tensors under the same argument path
(:mod:`ptdbg_tui.formats.dialects`: gradients in autograd-node order or by argument, an op's inner
node, in-place inputs after the write). Entries of two paired calls left over then pair by kind and
shape, in order.
"""

from __future__ import annotations

import math
from collections import defaultdict, deque
from collections.abc import Hashable, Iterable, Mapping, Sequence

from ptdbg_tui.compare.ops import in_place
from ptdbg_tui.formats.dialects import INNER_NODE_BACKWARD, INPLACE_CAPABLE, LINEAR_NODE_GRADIENTS, Dialect
from ptdbg_tui.formats.naming import BACKWARD, FORWARD, INPUT, OUTPUT
from ptdbg_tui.formats.records import TensorRecord

Pairs = dict[int, int]  # npu index -> bench index
#: linear's pairs, its gradient entries on two sides, the entries compared transposed
LinearPairs = tuple[Pairs, set[int], set[int], set[int]]


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
    return {
        call: [i for i in ix if not records[i].is_none]
        for call, ix in _top_entries(records, BACKWARD, OUTPUT).items()
    }


def _gradient_ordinals(
    npu: Sequence[TensorRecord],
    bench: Sequence[TensorRecord],
    call_pair: Mapping[Hashable, Hashable],
    skip: tuple[set[int], set[int]] = (set(), set()),
) -> Pairs:
    """Mixed pairs: the gradients of two paired backward calls, k-th present with k-th present, where
    their shapes agree. msprobe and the original number a backward's gradients in its autograd
    node's order, ours by forward argument position, and for most ops both orders list the
    differentiable arguments alike: layer_norm's weight/bias gradients are ``.1/.2`` there and
    ``.2/.3`` here (``normalized_shape`` is an argument, not a gradient), so pairing by path would
    put the bias against the weight (both ``[C]``)."""
    npu_grads, bench_grads = _gradients(npu), _gradients(bench)
    pairs: Pairs = {}
    for nc, bc in call_pair.items():
        for i, j in zip(
            [i for i in npu_grads.get(nc, ()) if i not in skip[0]],
            [j for j in bench_grads.get(bc, ()) if j not in skip[1]],
            strict=False,
        ):
            if _shape(npu[i]) == _shape(bench[j]):
                pairs[i] = j
    return pairs


def _inner_node_gradient(rec: TensorRecord) -> bool:
    e = rec.entry
    return e is not None and e.direction == BACKWARD and e.kind == OUTPUT and e.op in INNER_NODE_BACKWARD


def _top_entries(records: Sequence[TensorRecord], direction: str, kind: str) -> dict[Hashable, list[int]]:
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


def _reversed_shape(rec: TensorRecord) -> Hashable:
    shape = rec.shape_raw
    return tuple(reversed(shape)) if isinstance(shape, list) and len(shape) == 2 else None


def _linear_gradients(
    theirs: Sequence[TensorRecord],
    ours: Sequence[TensorRecord],
    call_pair: Iterable[tuple[Hashable, Hashable]],
) -> LinearPairs:
    """Of paired ``linear`` backward calls, a side in autograd order (``theirs``) against ours: the
    gradient pairs by :data:`LINEAR_NODE_GRADIENTS` (equal shapes, or for the weight's transposed
    ones), every gradient entry of those calls on either side, which pair no other way (by position
    or shape, a batch of 64 rows would put the input's gradient against a 64x64 weight's), and
    their entries that hold ours transposed. A linear of a 3-D input ends in a view node (one
    gradient): :func:`_inner_nodes`."""
    their_grads, our_grads = _top_entries(theirs, BACKWARD, OUTPUT), _top_entries(ours, BACKWARD, OUTPUT)
    pairs: Pairs = {}
    skip_theirs: set[int] = set()
    skip_ours: set[int] = set()
    transposed: set[int] = set()
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
            position, flipped = mapping[_position(theirs[i])]
            j = ours_at.get(position)
            if j is None:
                continue
            if (_reversed_shape(theirs[i]) if flipped else _shape(theirs[i])) == _shape(ours[j]):
                pairs[i] = j
                if flipped:
                    transposed.add(i)
        skip_theirs.update(t)
        skip_ours.update(o)
    return pairs, skip_theirs, skip_ours, transposed


def _inner_nodes(
    npu: Sequence[TensorRecord], bench: Sequence[TensorRecord], call_pair: Mapping[Hashable, Hashable]
) -> tuple[set[int], set[int]]:
    """The gradients a side records at an inner autograd node: of two paired backward calls, the one
    that records a single gradient where the other records two or more. msprobe and the original
    hook the node the op's output hangs from; for a composite op (``matmul`` of 3-D tensors,
    ``scaled_dot_product_attention`` on CPU) that is a view or reshape node with one input, and its
    gradient (the incoming one, reshaped) often has the shape of one of the op's own."""
    grads = (_top_entries(npu, BACKWARD, OUTPUT), _top_entries(bench, BACKWARD, OUTPUT))
    present = [
        {c: sum(not recs[i].is_none for i in ix) for c, ix in g.items()}
        for g, recs in zip(grads, (npu, bench), strict=True)
    ]
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
        return sum(
            abs(float(x) - float(y)) / (abs(float(y)) + 1e-30) for x, y in zip(a.stats, b.stats, strict=True)
        )
    except (TypeError, ValueError):
        return math.inf


def _written_inputs(
    npu: Sequence[TensorRecord],
    bench: Sequence[TensorRecord],
    call_pair: Mapping[Hashable, Hashable],
    dialects: tuple[Dialect, Dialect],
) -> tuple[set[int], set[int]]:
    """The first inputs of in-place calls that a side records after the call wrote them
    (:attr:`~ptdbg_tui.formats.dialects.Dialect.inputs_after_call`: the original records a forward's
    inputs when the call has returned, msprobe and ours before it runs), so
    ``relu(x, inplace=True)``'s ``input.0`` there is its output. Known by the statistics: there,
    ``input.0`` equals the output; it is nearer our output than our input, which differ. (A call
    that failed to write, the output its input, stays paired: there it is nearer our input.)"""
    sides = [
        (recs, _top_entries(recs, FORWARD, INPUT), _top_entries(recs, FORWARD, OUTPUT))
        for recs in (npu, bench)
    ]
    out: tuple[set[int], set[int]] = (set(), set())
    for s, o in ((0, 1), (1, 0)):
        recs, ins, outs = sides[s]
        if not dialects[s].inputs_after_call or dialects[o].inputs_after_call:
            continue
        other, other_ins, other_outs = sides[o]
        for nc, bc in call_pair.items():
            call, other_call = (nc, bc) if s == 0 else (bc, nc)
            i, x = ins.get(call), outs.get(call)
            oi, ox = other_ins.get(other_call), other_outs.get(other_call)
            if not (i and x and oi and ox):
                continue
            e = recs[i[0]].entry
            if e is None or not (in_place(e.op) or e.op in INPLACE_CAPABLE):
                continue
            mine, our_in, our_out = recs[i[0]], other[oi[0]], other[ox[0]]
            if (
                _stats_distance(mine, recs[x[0]]) == 0
                and _stats_distance(our_in, our_out) > 0
                and _stats_distance(mine, our_out) < _stats_distance(mine, our_in)
            ):
                out[s].add(i[0])
    return out


def _linear_pairs(
    npu: Sequence[TensorRecord],
    bench: Sequence[TensorRecord],
    call_pair: Mapping[Hashable, Hashable],
    dialects: tuple[Dialect, Dialect],
) -> LinearPairs:
    """:func:`_linear_gradients` of a side in autograd order against one that is not, whichever side
    that is: the pairs, the gradient entries of those calls on the NPU and bench sides, and the NPU
    entries of the pairs compared transposed."""
    ordered = dialects[0].gradients_in_node_order, dialects[1].gradients_in_node_order
    if ordered[0] and not ordered[1]:
        return _linear_gradients(npu, bench, call_pair.items())
    if ordered[1] and not ordered[0]:
        swapped = [(b, n) for n, b in call_pair.items()]
        flipped, linear_bench, linear_npu, transposed = _linear_gradients(bench, npu, swapped)
        pairs, npu_transposed = _from_bench(flipped, transposed)
        return pairs, linear_npu, linear_bench, npu_transposed
    return {}, set(), set(), set()


def _from_bench(pairs: Pairs, transposed: set[int]) -> tuple[Pairs, set[int]]:
    """Gradient pairs found with the bench as the first side (bench → NPU), turned NPU → bench, and the
    NPU entries of those compared transposed (``transposed`` names their bench entries)."""
    return {i: j for j, i in pairs.items()}, {pairs[j] for j in transposed}


def same_tensors(
    npu: Sequence[TensorRecord],
    bench: Sequence[TensorRecord],
    pairs: Pairs,
    dialects: tuple[Dialect, Dialect],
) -> tuple[Pairs, set[int]]:
    """Mixed pairs, and the NPU entries among them that hold the bench tensor transposed: keep the
    pairs of equal shapes; then, within calls that were paired, pair the entries left over by kind
    and shape, k-th with k-th. linear's gradients pair by its autograd node's order, its weight's
    transposed (:func:`_linear_gradients`). Entries the tools record differently stay unpaired:
    gradients at different autograd nodes (:data:`INNER_NODE_BACKWARD`, :func:`_inner_nodes`), an
    in-place call's input recorded after the write (:func:`_written_inputs`)."""
    call_pair = _call_pairs(npu, bench, pairs)
    skip_npu, skip_bench = _inner_nodes(npu, bench, call_pair)
    written = _written_inputs(npu, bench, call_pair, dialects)
    linear, linear_npu, linear_bench, transposed = _linear_pairs(npu, bench, call_pair, dialects)
    skip_npu |= written[0] | linear_npu
    skip_bench |= written[1] | linear_bench
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
    return {i: j for i, j in kept.items() if not _inner_node_gradient(npu[i])}, transposed


def permuted_gradients(
    npu: Sequence[TensorRecord], bench: Sequence[TensorRecord], pairs: Pairs
) -> tuple[Pairs, set[int]]:
    """Pairs of one tool on both sides, and the NPU entries that hold the bench tensor transposed: a
    backward call whose gradients pair by name with different shapes is recorded in another order on
    one side — a tool that takes the autograd node's order (msprobe, the original) records a custom
    autograd Function's gradients in the order it returns them, by argument (``linear``'s input,
    weight, bias), and the op's own in its node's (bias, input, transposed weight). Those gradients
    pair as a mixed pair's do: ``linear``'s by :data:`LINEAR_NODE_GRADIENTS` whichever side keeps its
    node's order, any other op's k-th of each shape with k-th."""
    grads = _top_entries(npu, BACKWARD, OUTPUT), _top_entries(bench, BACKWARD, OUTPUT)
    out, transposed = dict(pairs), set()
    for nc, bc in _call_pairs(npu, bench, pairs).items():
        n, b = grads[0].get(nc, []), grads[1].get(bc, [])
        if all(_shape(npu[i]) == _shape(bench[out[i]]) for i in n if i in out):
            continue
        found, flipped = _reordered(npu, bench, (nc, bc), n, b)
        present = max(sum(not npu[i].is_none for i in n), sum(not bench[j].is_none for j in b))
        if len(found) < present:  # no other order pairs them all: a shape that differs stays a finding
            continue
        used = set(found.values())
        for i in n:  # what no value pairs (a gradient recorded as None) keeps its pair by name
            if i in found or out.get(i) in used:
                out.pop(i, None)
        out.update(found)
        transposed |= flipped
    return out, transposed


def _call_pairs(
    npu: Sequence[TensorRecord], bench: Sequence[TensorRecord], pairs: Pairs
) -> dict[Hashable, Hashable]:
    """Each NPU call's bench call, by the first of its entries that pairs."""
    call_pair: dict[Hashable, Hashable] = {}
    for i, j in pairs.items():
        call_pair.setdefault(_call_of(npu[i]), _call_of(bench[j]))
    return call_pair


def _reordered(
    npu: Sequence[TensorRecord],
    bench: Sequence[TensorRecord],
    calls: tuple[Hashable, Hashable],
    n: Sequence[int],
    b: Sequence[int],
) -> tuple[Pairs, set[int]]:
    """The gradients ``n`` and ``b`` of the paired backward calls ``calls``, in different orders, paired
    (:func:`permuted_gradients`), with the NPU entries compared transposed."""
    nc, bc = calls
    npu_ordered = _linear_gradients(npu, bench, [(nc, bc)])
    bench_ordered = _linear_gradients(bench, npu, [(bc, nc)])
    if npu_ordered[0] and len(npu_ordered[0]) >= len(bench_ordered[0]):
        return npu_ordered[0], npu_ordered[3]
    if bench_ordered[0]:
        return _from_bench(bench_ordered[0], bench_ordered[3])
    waiting: dict[Hashable, deque[int]] = defaultdict(deque)
    for j in b:
        waiting[_shape(bench[j])].append(j)
    return {i: waiting[_shape(npu[i])].popleft() for i in n if waiting.get(_shape(npu[i]))}, set()
