"""The cyclic GC's policy while dumps are compared.

Records, rows and results are many small long-lived objects without cycles: with the default
thresholds the collector rescans them again and again as 100k rows are built (a fifth of a
headless compare's time). Fewer young collections leave refcounting to free what it can and the
collector a rarer, cheaper look at the rest.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

#: Allocations between two young-generation collections (the default is 700).
GC_THRESHOLD = 50_000


@contextmanager
def fewer_collections() -> Iterator[None]:
    before = gc.get_threshold()
    frozen = gc.get_freeze_count()
    gc.set_threshold(GC_THRESHOLD, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
        if not frozen:  # what long_lived() set aside is the collector's again (not a caller's own)
            gc.unfreeze()


def long_lived() -> None:
    """Inside :func:`fewer_collections`: what was built so far (a pair's rows) stays, so the collector
    stops rescanning it. Without this each full collection scans every pair read before: reading a
    16-pair LLM job's rows (unpickled from a cluster's workers) took 34 s instead of 6."""
    gc.freeze()
