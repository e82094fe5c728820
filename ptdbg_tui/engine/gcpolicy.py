"""The cyclic GC's policy while dumps are compared.

Records, rows and results are many small long-lived objects without cycles: with the default
thresholds the collector rescans them again and again as 100k rows are built (a fifth of a
headless compare's time). A batch compare leaves refcounting to free what it can and collects
nothing until it is done; the app, which runs for long, only collects less often
(:data:`GC_THRESHOLD`).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

#: Allocations between two young-generation collections (the default is 700).
GC_THRESHOLD = 50_000


@contextmanager
def fewer_collections() -> Iterator[None]:
    """No collection at all inside: even at :data:`GC_THRESHOLD` the young collections cost an LLM
    job's 150,000 rows half a second (of 8), traversing each object built once or twice before
    :func:`long_lived` sets it aside. What is built holds no cycles; the collector resumes on the
    way out."""
    enabled = gc.isenabled()
    frozen = gc.get_freeze_count()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
        if not frozen:  # what long_lived() set aside is the collector's again (not a caller's own)
            gc.unfreeze()


def long_lived() -> None:
    """Inside :func:`fewer_collections`: what was built so far (a pair's rows) stays, so the collector
    stops rescanning it. Without this each full collection scans every pair read before: reading a
    16-pair LLM job's rows (unpickled from a cluster's workers) took 34 s instead of 6."""
    gc.freeze()
