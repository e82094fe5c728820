"""Two runs on the same device compared by checksums (``--summary-mode md5``, msprobe's md5 mode): a call
whose tensor inputs are bit-equal in both runs and whose output is not computes differently from the
same data — the op is not deterministic there. Its statistics may still agree (a rounding-sized
difference only warns), so the checksums themselves say it.
"""

from __future__ import annotations

from collections.abc import Iterable

from ptdbg_tui.compare.diagnosis.evidence import Checksums
from ptdbg_tui.compare.model import Row


def _equal(row: Row) -> bool | None:
    """Whether both runs' checksums of a tensor agree; None where a side has none (a Python value, a
    dump without checksums) or they cannot agree: a transposed pair (linear's weight gradient in a
    mixed pair) is the same data in another layout."""
    npu, bench = row.npu, row.bench
    if npu is None or bench is None or npu.is_scalar or not npu.md5 or not bench.md5 or row.transposed:
        return None
    return npu.md5 == bench.md5


def departure(outputs: Iterable[Row], tensors: Iterable[Row]) -> Row | None:
    """The first of a call's ``outputs`` whose checksum differs while every tensor it computes from
    (``tensors``, its Python values left out: a forward call's inputs; a backward call's incoming
    gradients and what its forward call saved, the forward's tensors) has an equal checksum; None
    otherwise, or where a tensor has no checksum. Read lazily: without checksums it stops at the first
    tensor."""
    some = False
    for r in tensors:
        if not _equal(r):
            return None
        some = True
    return next((r for r in outputs if _equal(r) is False), None) if some else None


def departure_evidence(row: Row) -> Checksums:
    """The checksums that differ (:func:`departure`'s row), and whether both sides recorded statistics,
    which the verdict found within rounding."""
    assert row.npu is not None and row.bench is not None
    statistics = row.npu.stat(0) is not None and row.bench.stat(0) is not None
    return Checksums(tensor=row.name, npu=str(row.npu.md5), bench=str(row.bench.md5), statistics=statistics)
