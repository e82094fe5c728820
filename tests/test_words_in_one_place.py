"""Findings are values, and one module says them (issue 31): no code outside the words modules reads a
finding's sentence back — ``startswith("confirmed")`` on a verdict, a score cut out of the evidence with
``replace``, ``"waiting for" in status.detail``. What it needs to know is a field of the value.

The check reads the package's source with ``ast``: a string method that reads content (``startswith``,
``replace``, ``split``, …) or an ``in`` test with a string literal, applied to something named like a
finding's text (``verdict``, ``evidence``, ``why_not``, ``reason``, ``detail``, ``*_text``, what
``finding(s)`` returns, …). ``formats`` is left out: it parses the dump files it reads, and writes no
prose.
"""

from __future__ import annotations

import ast
from pathlib import Path

import ptdbg_tui

PACKAGE = Path(ptdbg_tui.__file__).parent
#: Where the sentences are made, and may be taken apart again.
WORDS = {PACKAGE / "compare" / "report" / "words.py", PACKAGE / "compare" / "report" / "monitor_words.py"}
#: Readers of dump text, which is what they parse.
READERS = PACKAGE / "formats"
#: Methods that read a string's content (``strip``, ``lower`` only normalise it).
READS = frozenset(
    {
        "startswith",
        "endswith",
        "replace",
        "removeprefix",
        "removesuffix",
        "partition",
        "rpartition",
        "split",
        "rsplit",
        "find",
        "rfind",
        "index",
        "count",
    }
)
#: Names of a finding's words: a field, a variable or a function that holds or returns them.
TEXTS = frozenset(
    {
        "verdict",
        "evidence",
        "why_not",
        "finding",
        "findings",
        "reason",
        "message",
        "detail",
        "note",
        "notice",
        "said",
        "mark",
        "replay",
        "text",
        "texts",
    }
)
_NORMALISE = frozenset({"strip", "lstrip", "rstrip", "lower", "upper", "casefold"})


def _name(node: ast.expr) -> str:
    """The name a value is known by: ``d.replay.why_not`` → ``why_not``, ``finding(s)`` → ``finding``,
    ``texts[0].lower()`` → ``texts``."""
    while True:
        if isinstance(node, ast.Subscript):
            node = node.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _NORMALISE
        ):
            node = node.func.value
        else:
            break
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _is_text(node: ast.expr) -> bool:
    name = _name(node).lower()
    return name in TEXTS or name.endswith(("_text", "_texts", "_why", "_said")) or name.startswith("why_")


def parsed_sentences(source: str) -> list[str]:
    """Each place in ``source`` where a finding's words are read back (line: what)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in READS
            and _is_text(node.func.value)
        ):
            found.append((node.lineno, f"{_name(node.func.value)}.{node.func.attr}(…)"))
        elif (
            isinstance(node, ast.Compare)
            and isinstance(node.left, ast.Constant)
            and isinstance(node.left.value, str)
        ):
            for op, right in zip(node.ops, node.comparators, strict=True):
                if isinstance(op, ast.In | ast.NotIn) and _is_text(right):
                    found.append((node.lineno, f"{node.left.value!r} in {_name(right)}"))
    return [f"{line}: {what}" for line, what in sorted(found)]


def test_no_finding_is_read_back_outside_the_words() -> None:
    offenders = [
        f"{path.relative_to(PACKAGE.parent)}:{where}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path not in WORDS and READERS not in path.parents
        for where in parsed_sentences(path.read_text(encoding="utf-8"))
    ]
    assert not offenders, "a finding's words read back (make it a field of the value):\n" + "\n".join(
        offenders
    )


def test_the_check_sees_what_the_app_once_did() -> None:
    """What issue 31 found (``startswith("confirmed")`` in findings.py and detail.py, bars.py cutting the
    score out of the evidence), and the sides' ``"waiting for"``, are seen; reading a call's name is not."""
    source = """
if suspect_replay_text(s).startswith("confirmed"): pass
score = s.evidence.replace(head, "")
if status.detail.startswith("waiting for"): pass
if "budget" in run.why_not: pass
first, _, rest = finding(s).partition(": ")
if texts[0].lower().endswith("."): pass
confirmed = self.replay.startswith("confirmed")
if name.startswith("Torch"): pass
if entry.api.startswith("torch."): pass
if "forward" in call: pass
reason = reason.strip()
"""
    assert parsed_sentences(source) == [
        "2: suspect_replay_text.startswith(…)",
        "3: evidence.replace(…)",
        "4: detail.startswith(…)",
        "5: 'budget' in why_not",
        "6: finding.partition(…)",
        "7: texts.endswith(…)",
        "8: replay.startswith(…)",
    ]
