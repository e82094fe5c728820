"""The call tree as plain Python objects, kept outside the Tree widget.

The widget materialises only what the user expands; this model holds everything (100k+
leaves), keeps per-status leaf counts on every inner node so that "worst state under it", fail
counts and filter visibility are O(1), and records which nodes changed so the widget refreshes
just those.

A lazy model (the app's) places a pair's rows in the tree only once something needs its leaves
(it is opened or shown, searched, walked by n/N, or its diagnosis names calls): until then its rows
wait, counted per state on the pair's node and the root. Placing 150,000 rows took the UI thread
~0.9 s while the engine, on the same GIL, compared the pairs.
"""

from __future__ import annotations

import bisect
import itertools
from collections import Counter, deque
from collections.abc import Iterator
from typing import NamedTuple

from ptdbg_tui.compare.diagnosis.findings import CallEvidence, Diagnosis, Suspect
from ptdbg_tui.compare.diagnosis.replay_outcome import CallReplay
from ptdbg_tui.compare.model import Row, Status
from ptdbg_tui.compare.report.csv_msprobe import checksummed
from ptdbg_tui.compare.report.match_words import misfits_text
from ptdbg_tui.engine.callpath import MODEL, Seg, of_the_model
from ptdbg_tui.engine.live.updates import EngineUpdate, MatchNote, PairDelta, PairInfo, Placed, Progress
from ptdbg_tui.formats.records import StackRecord

STATUSES = list(Status)
#: Inner nodes that search looks at (besides the entries): by key (path, call name) and label.
SEARCHED = frozenset({"module", "frame", "call", "noise"})
_INDEX = {s: i for i, s in enumerate(STATUSES)}

#: What n/N walk and "failures + named" shows, besides what the diagnosis names: an entry that fails or
#: could not be compared (the diagnosis bar counts them alike: "1 entry could not be compared (n: next
#: failure)").
FAILING = frozenset({Status.FAIL, Status.ERROR})
_FAILING_AT = frozenset(_INDEX[s] for s in FAILING)
#: The mark of what the diagnosis names: the header's count (``● 2 named``), the tree's named calls,
#: their entries and the branches down to them.
NAMED = "●"


class Filter(NamedTuple):
    """A view the ``f`` key cycles to: the entries of these states (None: all), and with ``named`` the
    calls the diagnosis names with their entries too (a 2% kernel error passes the original's
    thresholds: its rows are ✔, and a view of failures alone would hide the culprit)."""

    name: str
    statuses: frozenset[Status] | None
    named: bool = False


FILTERS: tuple[Filter, ...] = (
    Filter("all", None),
    Filter("failures + named", FAILING, named=True),
    Filter("unmatched only", frozenset({Status.UNMATCHED})),
)


def shown_status(row: Row) -> Status:
    """A row's state in the UI: pending until the engine has given it a result."""
    return row.result.status if row.result is not None else Status.PENDING


class Node:
    """One node of the model. Inner nodes count their leaves per status."""

    __slots__ = (
        "_by_key",
        "alive",
        "children",
        "counts",
        "id",
        "key",
        "kind",
        "label",
        "order",
        "pair",
        "parent",
        "row",
        "site",
        "status",
    )

    _ids = itertools.count()

    def __init__(
        self, kind: str, key: str, label: str, parent: Node | None, order: int, pair: str = ""
    ) -> None:
        self.id = next(Node._ids)
        self.kind = kind
        self.key = key
        self.label = label
        self.parent = parent
        self.order = order
        self.pair = pair
        leaf = kind == "leaf"  # leaves are most nodes: no containers for them
        self.children: list[Node] = _NO_CHILDREN if leaf else []
        self._by_key: dict[str, Node] = _NO_KEYS if leaf else {}
        self.counts = _NO_COUNTS if leaf else [0] * len(STATUSES)
        self.row: Row | None = None
        self.site: StackRecord | None = None  # that placed a call node
        self.status = Status.PENDING  # leaves only
        self.alive = True

    def __repr__(self) -> str:
        return f"Node({self.kind}, {self.key!r})"

    @property
    def is_leaf(self) -> bool:
        return self.kind == "leaf"

    @property
    def worst(self) -> Status:
        if self.is_leaf:
            return self.status
        for i in range(len(STATUSES) - 1, -1, -1):
            if self.counts[i]:
                return STATUSES[i]
        return Status.PASS

    def count(self, status: Status) -> int:
        if self.is_leaf:
            return int(self.status is status)
        return self.counts[_INDEX[status]]

    @property
    def total(self) -> int:
        return 1 if self.is_leaf else sum(self.counts)

    def child(self, key: str) -> Node | None:
        return self._by_key.get(key)

    def leaves(self) -> Iterator[Node]:
        if self.is_leaf:
            yield self
            return
        for c in self.children:
            yield from c.leaves()

    def ancestors(self) -> Iterator[Node]:
        n = self.parent
        while n is not None:
            yield n
            n = n.parent

    def _add(self, node: Node) -> None:
        self._by_key[node.key] = node
        if not self.children or self.children[-1].order <= node.order:
            self.children.append(node)
        else:
            bisect.insort(self.children, node, key=_order)

    def _drop(self, node: Node) -> None:
        del self._by_key[node.key]
        self.children.remove(node)


_NO_CHILDREN: list[Node] = []  # shared by all leaves, never modified
_NO_KEYS: dict[str, Node] = {}
_NO_COUNTS: list[int] = []


def _order(n: Node) -> int:
    return n.order


class _Waiting:
    """A pair's rows not placed yet: the engine's operations in their order (a key and its row, or
    None for a removal), replayed when the pair is placed so that its tree is the one placing them
    as they came makes; and each row's state, which the pair's node and the root count meanwhile."""

    __slots__ = ("failing", "ops", "states")

    def __init__(self) -> None:
        self.ops: list[tuple[str, Placed | None]] = []
        self.states: dict[str, int] = {}  # key -> index in STATUSES of its row's state
        self.failing: dict[str, int] = {}  # key -> seq of the rows in a FAILING state


def _model_node(direction: Node) -> Node | None:
    """The model's own module node under a direction, when a call of its own forward made one."""
    node = direction.child(MODEL)
    return node if node is not None and node.kind == "module" else None


class TreeModel:
    """All pairs' rows arranged as direction → modules/call sites → calls → entries."""

    def __init__(self, lazy: bool = False) -> None:
        """``lazy``: a pair's rows wait until something needs them (the module's docstring)."""
        self.lazy = lazy
        self.root = Node("root", "", "", None, 0)
        self.infos: dict[str, PairInfo] = {}
        self.leaves: dict[tuple[str, str], Node] = {}
        self.calls: dict[tuple[str, str], Node] = {}  # (pair, call name) -> call node
        self.flat: dict[str, list[Node]] = {}  # per pair: calls in execution order
        self.diagnoses: dict[str, Diagnosis] = {}
        self.matches: dict[str, MatchNote] = {}
        self.failing: set[Node] = set()  # leaves in a FAILING state: what n/N walk
        self.progress = Progress()
        self.ranks: tuple[str, ...] = ()  # the verdict across ranks, as the report words it
        self.checksums: set[str] = set()  # pairs of statistics with checksums on both sides
        self.filter: Filter | None = None  # None: all
        self.changed: set[Node] = set()  # display changed (label, status, counts)
        self.moved: set[Node] = set()  # appeared, vanished or flipped visibility
        self._ordered: list[Node] | None = None
        # the last path placed and the node of each of its levels (None: a node went or moved since)
        self._last_path: tuple[Seg, ...] | None = None
        self._last_nodes: list[Node] = []
        self._queue: deque[Iterator[None]] = deque()  # updates being applied
        self.version = 0  # counts changes of the tree's shape and contents (search caches by it)
        self._hits: tuple[tuple[str, int], list[Node]] | None = None
        self._ranks: tuple[dict[int, int], set[int]] | None = None  # see _suspect_ranks (None: stale)
        self._waiting: dict[str, _Waiting] = {}  # the pairs not placed yet

    # -- applying engine updates ---------------------------------------------------------------
    def load(self, update: EngineUpdate) -> None:
        """Queue an update; :meth:`apply` works through the queue in slices (the update's operations
        are generated as they are applied: spelling out 100k of them at once took ~0.15 s)."""
        self._queue.append(self._operations(update))

    def _operations(self, update: EngineUpdate) -> Iterator[None]:
        """Applies the update, pausing after each operation."""
        for key in update.dropped:
            self._drop_pair(key)
            yield
        for delta in update.pairs.values():
            pair_key = delta.info.key
            self._pair(delta.info)
            yield
            yield from self._rows(pair_key, delta)
            if delta.diagnosis is not None:
                if delta.diagnosis.suspects:  # the header, the bars and the overview show its calls
                    self.place(pair_key)
                self._mark_suspects()  # their tags in the tree change: before and after
                self.diagnoses[pair_key] = delta.diagnosis
                self._ranks = None
                self._mark_suspects()
            if delta.match is not None:
                self.matches[pair_key] = delta.match
        if update.progress is not None:
            self.progress = update.progress
        if update.ranks is not None:
            self.ranks = update.ranks

    def _rows(self, pair_key: str, delta: PairDelta) -> Iterator[None]:
        """A delta's removals and rows, one at a time; a waiting pair's rows at once where no filter
        hides anything (there is no node to show or hide)."""
        for key in delta.removes:
            self._remove(pair_key, key)
            yield
        waiting = self._waiting.get(pair_key)
        if waiting is not None and not self.filtering:
            self._wait_all(pair_key, waiting, delta.upserts)
            yield
            return
        for key, placed in delta.upserts.items():
            self._put(pair_key, key, placed)
            yield

    @property
    def loading(self) -> bool:
        return bool(self._queue)

    def apply(self, limit: int | None = None) -> bool:
        """Apply queued operations (at most ``limit``); returns whether some remain."""
        ops = self._queue
        done = 0
        while ops and (limit is None or done < limit):
            step = ops[0]
            for _ in step if limit is None else itertools.islice(step, limit - done):
                done += 1
            if limit is None or done < limit:  # the update is spent
                ops.popleft()
        return bool(ops)

    def take_changes(self) -> tuple[set[Node], set[Node]]:
        changed, moved = self.changed, self.moved
        self.changed, self.moved = set(), set()
        return changed, moved

    def _pair(self, info: PairInfo) -> Node:
        self.infos[info.key] = info
        node = self.root.child(info.key)
        if node is None:
            node = Node("pair", info.key, info.label, self.root, len(self.root.children), info.key)
            self.root._add(node)
            self.flat[info.key] = []
            self.moved.add(node)
            if self.lazy:
                self._waiting[info.key] = _Waiting()
        elif node.label != info.label:
            node.label = info.label
            self.changed.add(node)
        return node

    def _drop_pair(self, key: str) -> None:
        node = self.root.child(key)
        if node is None:
            return
        waiting = self._waiting.pop(key, None)
        if waiting is not None:
            for i in waiting.states.values():
                self.root.counts[i] -= 1
            self.changed.add(self.root)
        for leaf in list(node.leaves()):
            self._remove_leaf(key, leaf.key)
        if node.alive:
            self._unlink(node)
        self.infos.pop(key, None)
        self.flat.pop(key, None)
        self.diagnoses.pop(key, None)
        self._ranks = None
        self.matches.pop(key, None)
        self.checksums.discard(key)

    # -- rows that wait: counted, placed when needed -------------------------------------------------
    def _put(self, pair_key: str, key: str, placed: Placed) -> None:
        waiting = self._waiting.get(pair_key)
        if waiting is None:
            self._upsert(pair_key, key, placed)
        else:
            self._wait(pair_key, waiting, key, placed)

    def _remove(self, pair_key: str, key: str) -> None:
        waiting = self._waiting.get(pair_key)
        if waiting is None:
            self._remove_leaf(pair_key, key)
            return
        i = waiting.states.pop(key, None)
        if i is None:
            return
        waiting.ops.append((key, None))
        waiting.failing.pop(key, None)
        self._ordered = None
        self.version += 1
        self._recount(pair_key, i, -1)

    def _wait(self, pair_key: str, waiting: _Waiting, key: str, placed: Placed) -> None:
        """One row that waits, checked against the filter as a leaf is: one that changes state may show
        or hide its pair (and the root)."""
        pair = self.root.child(pair_key)
        nodes = (pair, self.root) if pair is not None and self.filtering and key in waiting.states else ()
        before = [(n, self.visible(n)) for n in nodes]
        self._wait_all(pair_key, waiting, {key: placed})
        for node, seen in before:
            if self.visible(node) != seen:
                self.moved.add(node)

    def _wait_all(self, pair_key: str, waiting: _Waiting, upserts: dict[str, Placed]) -> None:
        """What :meth:`_upsert` does to the counts, the failures, the checksums and the changes, for rows
        that wait (a delta's at once where no filter hides anything: one by one, a pair's 10,000 rows
        took the UI thread ~2 µs each)."""
        if not upserts:
            return
        rows = upserts.values()
        if (
            pair_key not in self.checksums
            and self.infos[pair_key].summary
            and any(checksummed(p.row) for p in rows)
        ):
            self.checksums.add(pair_key)
        waiting.ops.extend(upserts.items())
        self._ordered = None
        self.version += 1
        states, failing, index = waiting.states, waiting.failing, STATUSES.index
        counts = [0] * len(STATUSES)
        pending = index(Status.PENDING)
        for key, placed in upserts.items():
            row = placed.row
            result = row.result
            i = pending if result is None else index(result.status)
            was = states.get(key)
            states[key] = i
            counts[i] += 1
            if was is not None:
                counts[was] -= 1
            if i in _FAILING_AT:
                failing[key] = row.seq
            elif was is not None:
                failing.pop(key, None)
        for i, n in enumerate(counts):
            if n:
                self._recount(pair_key, i, n)

    def _recount(self, pair_key: str, i: int, delta: int) -> None:
        """Count waiting rows of state ``i`` on their pair's node and the root."""
        pair = self.root.child(pair_key)
        assert pair is not None
        pair.counts[i] += delta
        self.root.counts[i] += delta
        self.changed.add(pair)
        self.changed.add(self.root)

    def place(self, pair_key: str) -> None:
        """Place the pair's waiting rows in the tree (nothing when it has none): from then on its rows
        are placed as they come."""
        waiting = self._waiting.pop(pair_key, None) if self._waiting else None
        if waiting is None:
            return
        for i, n in Counter(waiting.states.values()).items():  # their leaves count them from here
            self._recount(pair_key, i, -n)
        for key, placed in waiting.ops:
            if placed is None:
                self._remove_leaf(pair_key, key)
            else:
                self._upsert(pair_key, key, placed)

    def place_all(self) -> None:
        """Place every pair's waiting rows (what looks at every leaf: the search, the call names)."""
        for key in list(self._waiting):
            self.place(key)

    def _upsert(self, pair_key: str, key: str, placed: Placed) -> None:
        pair = self.root.child(pair_key)
        assert pair is not None
        row = placed.row
        status = shown_status(row)
        if pair.key not in self.checksums and self.infos[pair.key].summary and checksummed(row):
            self.checksums.add(pair.key)
        leaf = self.leaves.get((pair.key, key))
        self._ordered = None
        self.version += 1
        if leaf is not None:
            leaf.row = row
            self.changed.add(leaf)
            if leaf.status is not status:
                self._restatus(leaf, status)
            return
        parent = self._call_node(pair, placed.path, row.seq)
        if parent.site is None:
            parent.site = placed.site
        entry = row.record.entry
        leaf = Node("leaf", key, entry.arg if entry else row.name, parent, row.seq, pair.key)
        leaf.row = row
        leaf.status = status
        parent._add(leaf)
        self.leaves[(pair.key, key)] = leaf
        self._count(leaf, status, +1)
        self.moved.add(leaf)

    def _call_node(self, pair: Node, path: tuple[Seg, ...], order: int) -> Node:
        """The call node at ``path`` under ``pair``, made where missing. The levels the last path shared
        with this one are taken as they were found (a layer's calls share their module levels: walking
        each call's path from its direction was a third of placing 150,000 rows)."""
        last, nodes = self._last_path, self._last_nodes
        shared = 0
        if last is not None and nodes and nodes[0].parent is pair:
            if path is last:  # the next entry of the same call (the engine shares its path)
                return nodes[-1]
            most = min(len(path), len(last))
            while shared < most and path[shared] == last[shared]:
                shared += 1
        nodes = nodes[:shared] if shared else []
        parent = nodes[-1] if nodes else pair
        for seg in path[shared:]:
            parent = self._inner(parent, seg, order)
            nodes.append(parent)
        self._last_path, self._last_nodes = path, nodes
        return parent

    def _inner(self, parent: Node, seg: Seg, order: int) -> Node:
        if seg.kind == "module" and parent.kind == "direction" and of_the_model(seg.key, seg.label):
            parent = _model_node(parent) or parent  # the model's node holds its submodules'
        node = parent.child(seg.key)
        if node is None:
            node = Node(seg.kind, seg.key, seg.label, parent, order, parent.pair)
            parent._add(node)
            self.moved.add(node)
            if seg.kind == "module" and seg.key == MODEL and parent.kind == "direction":
                self._adopt(parent, node)
            if seg.kind == "call":
                self.calls[(parent.pair, seg.key)] = node
                self._ranks = None
                calls = self.flat[parent.pair]
                if not calls or calls[-1].order <= order:
                    calls.append(node)
                else:
                    bisect.insort(calls, node, key=_order)
        return node

    def _adopt(self, direction: Node, model: Node) -> None:
        """Move the submodules' nodes made before the model's own node (live: its first call of its
        own came after theirs) under it, and the model's node to the place of the first of them."""
        subs = [c for c in direction.children if c.kind == "module" and of_the_model(c.key, c.label)]
        if not subs:
            return
        self._last_path = None
        for sub in subs:
            direction._drop(sub)
            sub.parent = model
            model._add(sub)
            model.counts = [a + b for a, b in zip(model.counts, sub.counts, strict=True)]
            self.moved.add(sub)
        direction._drop(model)
        model.order = min(model.order, subs[0].order)
        direction._add(model)

    def _remove_leaf(self, pair_key: str, key: str) -> None:
        leaf = self.leaves.pop((pair_key, key), None)
        if leaf is None:
            return
        self._ordered = None
        self.version += 1
        self._count(leaf, leaf.status, -1)
        self.failing.discard(leaf)
        node = leaf
        while node.parent is not None and node.kind != "pair":
            parent = node.parent
            self._unlink(node)
            if parent.children:
                break
            node = parent

    def _unlink(self, node: Node) -> None:
        assert node.parent is not None
        node.parent._drop(node)
        node.alive = False
        self._last_path = None
        self.moved.add(node)
        if node.kind == "call":
            self.calls.pop((node.pair, node.key), None)
            self._ranks = None
            calls = self.flat.get(node.pair)
            if calls is not None:
                calls.remove(node)

    def _restatus(self, leaf: Node, status: Status) -> None:
        before = self._visible_chain(leaf)
        self._count(leaf, leaf.status, -1)
        leaf.status = status
        self._count(leaf, status, +1)
        for node, was in before:
            if self.visible(node) != was:
                self.moved.add(node)

    def _visible_chain(self, leaf: Node) -> list[tuple[Node, bool]]:
        if not self.filtering:
            return []
        return [(n, self.visible(n)) for n in (leaf, *leaf.ancestors())]

    def _count(self, leaf: Node, status: Status, delta: int) -> None:
        i = STATUSES.index(status)  # not _INDEX: an Enum's hash is Python code, and every leaf comes here
        changed = self.changed
        changed.add(leaf)
        n = leaf.parent  # the ancestors, walked inline: every leaf of a 150,000-row load comes here
        while n is not None:
            n.counts[i] += delta
            changed.add(n)
            n = n.parent
        if i in _FAILING_AT:
            if delta > 0:
                self.failing.add(leaf)
            else:
                self.failing.discard(leaf)

    # -- views ---------------------------------------------------------------------------------
    @property
    def filtering(self) -> bool:
        """Whether the filter hides anything (it is not "all")."""
        return self.filter is not None and self.filter.statuses is not None

    def visible(self, node: Node) -> bool:
        f = self.filter
        if f is None or f.statuses is None:
            return True
        if node.is_leaf and node.status in f.statuses:
            return True
        if not node.is_leaf and any(node.counts[_INDEX[s]] for s in f.statuses):
            return True
        return f.named and self.named(node)

    def status_counts(self) -> dict[Status, int]:
        return {s: self.root.counts[i] for i, s in enumerate(STATUSES)}

    def ordered_leaves(self) -> list[Node]:
        """Every leaf in execution order (pairs in their order, then row sequence)."""
        self.place_all()
        if self._ordered is None:
            pair_order = {n.key: n.order for n in self.root.children}
            self._ordered = sorted(self.leaves.values(), key=lambda n: (pair_order[n.pair], _seq(n)))
        return self._ordered

    def position(self, node: Node) -> tuple[int, int]:
        """Execution-order key of any node (an inner node sorts with its first leaf)."""
        self.place(node.pair)
        pair = self.root.child(node.pair)
        while not node.is_leaf and node.children:
            node = node.children[0]
        return (pair.order if pair else 0, _seq(node) if node.is_leaf else node.order)

    def next_failure(self, after: tuple[int, int] | None, backward: bool = False) -> Node | None:
        """The next (or previous) leaf that fails or that the diagnosis names (an entry of a named
        call, which may pass the original's thresholds) in execution order, wrapping around."""
        for key in [key for key, waiting in self._waiting.items() if waiting.failing]:
            self.place(key)
        walked = self.failing.union(self.named_entries())
        if not walked:
            return None
        pair_order = {n.key: n.order for n in self.root.children}
        fails = sorted(walked, key=lambda n: (pair_order[n.pair], _seq(n)))
        keys = [(pair_order[n.pair], _seq(n)) for n in fails]
        if after is None:
            return fails[-1] if backward else fails[0]
        if backward:
            i = bisect.bisect_left(keys, after) - 1
            return fails[i]  # -1 wraps to the last
        i = bisect.bisect_right(keys, after)
        return fails[i % len(fails)]

    def search(self, text: str) -> list[Node]:
        """Every node whose name contains ``text`` (case-insensitive) in execution order: entries (NPU
        and bench names), calls, and modules or call sites (path and class); an inner node comes
        before what it holds."""
        needle = text.lower()
        self.place_all()
        if self._hits is not None and self._hits[0] == (needle, self.version):
            return self._hits[1]
        found: list[tuple[tuple[int, int], int, Node]] = []
        stack = [(n, 0) for n in self.root.children]
        while stack:
            n, depth = stack.pop()
            if n.is_leaf:
                if n.row is not None and needle in _names(n.row):
                    found.append((self.position(n), depth, n))
                continue
            if n.kind in SEARCHED and (needle in n.key.lower() or needle in n.label.lower()):
                found.append((self.position(n), depth, n))
            stack.extend((c, depth + 1) for c in n.children)
        found.sort(key=lambda t: (t[0], t[1]))
        hits = [n for _, _, n in found]
        self._hits = ((needle, self.version), hits)
        return hits

    def next_hit(self, hits: list[Node], after: Node | None, backward: bool = False) -> int:
        """Index of the hit after (or before) ``after`` in execution order, wrapping around."""
        if after is None or not after.alive:
            return len(hits) - 1 if backward else 0
        if after in hits:
            i = hits.index(after)
            return (i + (-1 if backward else 1)) % len(hits)
        key = self.position(after)
        keys = [self.position(n) for n in hits]
        i = bisect.bisect_left(keys, key) - 1 if backward else bisect.bisect_right(keys, key)
        return i % len(hits)

    def first_failures(self) -> dict[str, int]:
        """Each pair's first entry in a FAILING state (its seq), placed or waiting; pairs without one
        are left out."""
        fails: dict[str, int] = {}
        for leaf in self.failing:
            if leaf.row is not None:
                fails[leaf.pair] = min(fails.get(leaf.pair, leaf.row.seq), leaf.row.seq)
        for key, waiting in self._waiting.items():
            if waiting.failing:
                fails[key] = min(waiting.failing.values())
        return fails

    def call_names(self) -> list[str]:
        """Every call's name, in every pair."""
        self.place_all()
        return [call for _, call in self.calls]

    def compared_from(self) -> str:
        """What the pairs were compared from where not every one from tensors, in the report's words
        (``statistics only``, ``checksums``): a ✔ from statistics is not a ✔ from the tensors."""
        paired = [key for key, info in self.infos.items() if info.bench is not None]  # the others: ∅
        summary = [key for key in paired if self.infos[key].summary]
        if not summary:
            return ""
        md5 = sum(key in self.checksums for key in summary)
        mode = (
            "checksums" if md5 == len(summary) else "statistics only" if not md5 else "statistics, checksums"
        )
        return mode if len(summary) == len(paired) else f"{mode}: {len(summary)}/{len(paired)} pairs"

    def suspects(self) -> list[tuple[Suspect, Node | None]]:
        """Every pair's ranked suspects, with their call nodes; pairs by first divergence (the
        earliest step, then the earliest first suspect in execution, then tree order), so that the
        culprit is the pair the overview lists first, not the first rank folder that has a suspect; at
        one step, a pair whose first suspect only receives another rank's error after those that do not."""
        ranked = [
            (pair, self.diagnoses[pair.key].suspects)
            for pair in self.root.children
            if pair.key in self.diagnoses and self.diagnoses[pair.key].suspects
        ]
        ranked.sort(
            key=lambda p: (
                self.step_of(p[0].key),
                bool(self.diagnoses[p[0].key].received),
                p[1][0].seq,
                p[0].order,
            )
        )
        return [(s, self.calls.get((pair.key, s.call))) for pair, found in ranked for s in found]

    def step_of(self, key: str) -> int:
        """The pair's NPU step (-1 without one)."""
        info = self.infos.get(key)
        return -1 if info is None or info.npu.step is None else info.npu.step

    def _suspect_chains(self) -> Iterator[Node]:
        """Every suspect's call node and its ancestors."""
        for _, node in self.suspects():
            if node is not None:
                yield node
                yield from node.ancestors()

    def _mark_suspects(self) -> None:
        """Their lines change (tag, ●); under a filter that shows what is named, they and their entries
        may appear or go."""
        self.changed.update(self._suspect_chains())
        if self.filter is not None and self.filter.named:
            self.moved.update(self._suspect_chains())
            self.moved.update(self.named_entries())

    def named_entries(self) -> Iterator[Node]:
        """The entries of every call the diagnosis names (the tree marks them ●; n/N walks them)."""
        for _, node in self.suspects():
            if node is not None:
                yield from (c for c in node.children if c.is_leaf)

    def named_calls(self) -> int:
        """How many calls the diagnoses name (the header's ``● N named``), each once."""
        return len(self._suspect_ranks()[0])

    def suspect_rank(self, call: Node) -> int | None:
        """Where a call node stands among all suspects (0: the culprit), as c/C walks them; else None."""
        return self._suspect_ranks()[0].get(call.id)

    def named(self, node: Node) -> bool:
        """Whether the diagnosis names this call, or it is an entry of such a call, or holds one below it
        (the tree's ●)."""
        if node.is_leaf:
            return node.parent is not None and node.parent.id in self._suspect_ranks()[0]
        return node.id in self._suspect_ranks()[1]

    def _suspect_ranks(self) -> tuple[dict[int, int], set[int]]:
        """Suspects' ranks by node id, and the ids of their nodes and ancestors (worked out once per
        change of the diagnoses or of the calls)."""
        if self._ranks is None:
            ranks: dict[int, int] = {}
            for i, (_, node) in enumerate(self.suspects()):
                if node is not None:  # a call named by several suspects keeps its best rank
                    ranks.setdefault(node.id, i)
            holders = {n.id for n in self._suspect_chains()}
            self._ranks = (ranks, holders)
        return self._ranks

    def first_culprit(self) -> tuple[Suspect, Node | None] | None:
        found = self.suspects()
        return found[0] if found else None

    def evidence(self, call: Node) -> CallEvidence | None:
        """The diagnosis' verdict on a call node."""
        diagnosis = self.diagnoses.get(call.pair)
        if diagnosis is None or not call.children or call.children[0].row is None:
            return None
        return diagnosis.calls.get(call.children[0].row.record.call)

    def call_of(self, node: Node | None) -> Node | None:
        """The call node ``node`` is, or whose entry it is."""
        if node is not None and node.is_leaf:
            node = node.parent
        return node if node is not None and node.kind == "call" else None

    def replay_of(self, call: Node) -> CallReplay | None:
        """What the replay of a call node found (None when it was not replayed)."""
        diagnosis = self.diagnoses.get(call.pair)
        return diagnosis.replays.get(call.key) if diagnosis is not None else None

    def match_modes(self) -> str:
        """The matching in use, e.g. ``align (auto)``; pairs matched differently are all named."""
        used = {m.used if m.asked == m.used else f"{m.used} ({m.asked})" for m in self.matches.values()}
        return ", ".join(sorted(used))

    def match_hint(self) -> str:
        """A suggestion to switch the matching when the current one pairs badly (first pair that does)."""
        for m in self.matches.values():
            if m.advice is not None:
                return f"m → align? ({misfits_text(m.advice)})"
        return ""

    def call_rows(self, call: Node) -> list[Row]:
        return [n.row for n in call.children if n.row is not None]


def _seq(n: Node) -> int:
    return n.row.seq if n.row is not None else n.order


def _names(row: Row) -> str:
    names = row.npu.name if row.npu else ""
    if row.bench is not None and row.bench.name != names:
        names += " " + row.bench.name
    return names.lower()
