"""ptdbg-tui: find the operator whose NPU result departs from the GPU/CPU benchmark."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def compare(input_param: dict[str, Any], output_path: str, stack_mode: bool = False,
            auto_analyze: bool = True, fuzzy_match: bool = False, **kwargs: Any) -> str:
    """The original's ``compare()`` call shape; returns the CSV path. See ``ptdbg_tui.engine.batch``."""
    from ptdbg_tui.engine.batch import compare as _compare

    return _compare(input_param, output_path, stack_mode=stack_mode, auto_analyze=auto_analyze,
                    fuzzy_match=fuzzy_match, **kwargs)
