"""ptdbg-tui: find the operator whose NPU result departs from the GPU/CPU benchmark."""

from __future__ import annotations

import types
from typing import Any

__version__ = "0.1.0"


def _compare(input_param: dict[str, Any], output_path: str, stack_mode: bool = False,
             auto_analyze: bool = True, fuzzy_match: bool = False, **kwargs: Any) -> str:
    """The original's ``compare()`` call shape; returns the CSV path. See ``ptdbg_tui.engine.batch``."""
    from ptdbg_tui.engine.batch import compare as run

    return run(input_param, output_path, stack_mode=stack_mode, auto_analyze=auto_analyze,
               fuzzy_match=fuzzy_match, **kwargs)


class _CallablePackage(types.ModuleType):
    """``ptdbg_tui.compare`` is the compare package *and* the original's ``compare()`` function.

    Python binds a subpackage over a same-named attribute of its parent as soon as it is imported,
    so a plain function ``ptdbg_tui.compare`` would turn into a module under the user's feet; a
    callable package keeps ``from ptdbg_tui import compare; compare({...}, "./out")`` working.
    """

    def __call__(self, input_param: dict[str, Any], output_path: str, stack_mode: bool = False,
                 auto_analyze: bool = True, fuzzy_match: bool = False, **kwargs: Any) -> str:
        return _compare(input_param, output_path, stack_mode, auto_analyze, fuzzy_match, **kwargs)


from ptdbg_tui import compare  # noqa: E402  (the subpackage: cheap, no numpy)

compare.__class__ = _CallablePackage
