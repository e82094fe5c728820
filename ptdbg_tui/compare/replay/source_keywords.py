"""Keyword arguments read back from a call's source line, for dumps whose tool records none.

The original ptdbg_ascend records a call's positional arguments only, but its stack holds the line of
code that made the call (``return F.softmax(scores, dim=-1)``). Where that line calls the op exactly
once, its keyword arguments with literal values are what the call took. A rebuild from them stays
*incomplete* (a keyword spelled with a variable is still unknown), so it counts only when the other
side's replay of the same call shows it right.
"""

from __future__ import annotations

import ast
from typing import Any

#: Types a literal keyword value may have (nested in tuples and lists).
_LITERALS = (int, float, bool, str, type(None))


def _literal(node: ast.expr) -> tuple[bool, Any]:
    """Whether ``node`` is a plain literal, and its value."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None
    return _plain(value), value


def _plain(value: Any) -> bool:
    if isinstance(value, (tuple, list)):
        return all(_plain(v) for v in value)
    return isinstance(value, _LITERALS)


def _parsed(line: str) -> ast.Module | None:
    """The source line as code, or None (a line of a call that spans several lines, a clause head)."""
    text = line.strip()
    if not text or len(text) > 2000:
        return None
    for candidate in (text, f"{text}\n    pass"):  # ``if f(x, dim=1):`` parses with a body
        try:
            return ast.parse(candidate)
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            continue
    return None


def source_keywords(line: str | None, op: str) -> dict[str, Any]:
    """The keyword arguments with literal values of the one call of ``op`` (by its attribute or name:
    ``F.softmax``, ``x.softmax``, ``softmax``) on ``line``; empty when the line does not call it exactly
    once or cannot be parsed."""
    tree = _parsed(line) if line else None
    if tree is None:
        return {}
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (
            (isinstance(node.func, ast.Attribute) and node.func.attr == op)
            or (isinstance(node.func, ast.Name) and node.func.id == op)
        )
    ]
    if len(calls) != 1:
        return {}
    found: dict[str, Any] = {}
    for kw in calls[0].keywords:
        if kw.arg is None:  # ``**options``: unknown
            continue
        ok, value = _literal(kw.value)
        if ok:
            found[kw.arg] = value
    return found
