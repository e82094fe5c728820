"""Comparing two dumps' records, in four jobs, each a package:

- :mod:`~ptdbg_tui.compare.matching`: which NPU entry pairs with which bench entry;
- :mod:`~ptdbg_tui.compare.metrics`: the original's metrics and verdict per pair of tensors, and
  the error measures the diagnosis needs, computed from arrays fed to them (no file access);
- :mod:`~ptdbg_tui.compare.diagnosis`: which call introduced the error, on each rank and across ranks;
- :mod:`~ptdbg_tui.compare.report`: the files a comparison writes (the CSV dialects, the suspects,
  the advisor file).

:mod:`~ptdbg_tui.compare.model` is their shared vocabulary: rows, results, statuses.
"""
