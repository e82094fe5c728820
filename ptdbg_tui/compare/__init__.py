"""Pure comparison functions over records and arrays: metrics, verdicts, matching, CSV rows.

The package is also callable: ``from ptdbg_tui import compare; compare(input_param, "./out")`` is
the original tool's API (see ``ptdbg_tui/__init__.py``).
"""
