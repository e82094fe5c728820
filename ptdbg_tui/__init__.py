"""ptdbg-tui: find the operator whose NPU result departs from the GPU/CPU benchmark.

Layers, arrows pointing one way: :mod:`~ptdbg_tui.formats` (reading and writing dumps) →
:mod:`~ptdbg_tui.compare` (matching, metrics, diagnosis, reports) → :mod:`~ptdbg_tui.engine`
(scheduling: batch, live, pools, cluster) → :mod:`~ptdbg_tui.app` (Textual); :mod:`~ptdbg_tui.cli`
on top. The original's ``compare()`` API is :func:`ptdbg_tui.legacy.compare`.
"""

__version__ = "0.1.0"
