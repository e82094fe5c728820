"""Scratch buffers reused from one tensor to the next, per thread.

A worker compares thousands of tensors; fresh multi-megabyte buffers for each would be fresh
pages from the kernel each time (page faults and zeroing cost as much as the metrics on 1M-element
tensors). Buffers are borrowed and given back; one never given back is simply collected.
"""

from __future__ import annotations

import threading

import numpy as np

#: Buffers kept per thread between uses.
KEEP = 8

_local = threading.local()


def _free() -> list[np.ndarray]:
    free = getattr(_local, "free", None)
    if free is None:
        free = _local.free = []
    return free


def borrow(nbytes: int) -> np.ndarray:
    """A uint8 buffer of at least ``nbytes`` (view slices of it with ``.view(dtype)``)."""
    free = _free()
    for i, buf in enumerate(free):
        if buf.size >= nbytes:
            return free.pop(i)
    return np.empty(max(nbytes, 1), dtype=np.uint8)


def give_back(*buffers: np.ndarray) -> None:
    free = _free()
    free.extend(buffers)
    del free[:-KEEP]
