"""Aligning two sequences of call signatures: which elements pair, in order, when one side has
calls the other lacks (a fused op against its decomposition, an extra call).

Myers' O(ND) diff finds a shortest edit script where the sequences differ in few places; past a work
budget a segment is split at patience anchors (elements unique on both sides), or paired by
occurrence, so that any size stays near linear.
"""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from collections.abc import Sequence

#: Work budget (snake steps) of one Myers diff: at most this, and this many per element, before
#: the segment is split at unique anchors instead (or paired by occurrence).
MYERS_BUDGET = 1_000_000


MYERS_STEPS_PER_ELEMENT = 64


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
