"""Two runs on the same device compared by checksums (``--summary-mode md5``, msprobe's md5 mode): a call
whose tensor inputs are bit-equal in both runs and whose output is not computes differently from the
same data — the op is not deterministic there. Its statistics may still agree (a rounding-sized
difference only warns), so the checksums themselves say it.
"""

from __future__ import annotations

from collections.abc import Iterable

from ptdbg_tui.compare.model import Row

#: What a checksum cannot tell, said wherever one alone names a call.
BITS_NOT_HOW_FAR = "a checksum tells that the bits differ, not by how much"


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


def departure_text(row: Row) -> str:
    """The checksums that differ, and what they cannot tell: a checksum says the bits differ, not by
    how much — where both sides recorded statistics that the verdict found within rounding, said so."""
    assert row.npu is not None and row.bench is not None
    text = f"{row.name}: checksum {row.npu.md5} against {row.bench.md5}; every input's checksum is equal"
    if row.npu.stat(0) is None or row.bench.stat(0) is None:
        return text
    return f"{text}; its statistics agree within rounding: {BITS_NOT_HOW_FAR}"
