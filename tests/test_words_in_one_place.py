"""Findings are values, and one module says them (issue 31): no code outside the words modules reads a
finding's sentence back — ``startswith("confirmed")`` on a verdict, a score cut out of the evidence with
``replace``, ``"waiting for" in status.detail``. What it needs to know is a field of the value.

The check reads the package's source with ``ast``: a string method that reads content (``startswith``,
``replace``, ``split``, …) or an ``in`` test with a string literal, applied to something named like a
finding's text (``verdict``, ``evidence``, ``why_not``, ``reason``, ``detail``, ``*_text``, what
``finding(s)`` returns, …). ``formats`` is left out: it parses the dump files it reads, and writes no
prose.

And no code outside the report layer makes a sentence: a string literal or f-string of words (two words
with a space between them) in ``formats``, ``compare`` (but ``compare/report``) or ``engine`` is a
sentence built outside the words modules, unless it is a docstring, the message of an exception or an
assertion, a log line, an enum's value or a type annotation, or :data:`LEFT` names it with its reason
("Notes are findings too, so formats writes no prose"). The app and the CLI show words (their own labels
and help beside the report's): they are not checked here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import ptdbg_tui

PACKAGE = Path(ptdbg_tui.__file__).parent
#: Where the sentences are made, and may be taken apart again.
WORDS = {
    PACKAGE / "compare" / "report" / name
    for name in (
        "words.py",
        "monitor_words.py",
        "notice_words.py",
        "match_words.py",
        "metric_words.py",
        "replay_words.py",
        "line_words.py",
    )
}
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


#: Where findings become words: the report layer.
REPORT = PACKAGE / "compare" / "report"
#: The layers whose values the report layer says: they hold names, numbers and paths, no sentences.
VALUES = (PACKAGE / "formats", PACKAGE / "compare", PACKAGE / "engine")
#: Two words and the space between them.
_WORDS = re.compile(r"[A-Za-z]{2,} [A-Za-z]{2,}")
_LOGS = frozenset({"debug", "info", "warning", "error", "exception", "critical"})

#: Modules left to make their own sentences, and why.
LEFT_MODULES = {
    # a repro is a file of its own: Python source written by repro.py, its console run by repro_main.py
    "compare/replay/repro.py": "writes a repro's Python source (its code and docstring), not report words",
    "compare/replay/repro_main.py": "the console output of a repro file run on its own, not the report's",
    # a row's Err_message is a CSV cell (a string), the original's words byte for byte and ours beside them
    "compare/metrics/cells.py": "the Err_message cells: the CSV's vocabulary, made in this one module",
}
#: Single strings left, and why.
LEFT = {
    # formats: the dump files' own tokens and exception messages built in parts
    ("formats/calls.py", "nested too deeply"): "an opaque argument's marker, written into the call sidecar",
    ("formats/calls.py", "dict with keys that are not strings"): (
        "an opaque argument's marker, written into the call sidecar"
    ),
    ("formats/calls.py", "a named value"): "part of a sidecar parse error's message (_Bad)",
    ("formats/calls.py", "autocast device"): "part of a sidecar parse error's message (_Bad)",
    ("formats/calls.py", "autocast dtype"): "part of a sidecar parse error's message (_Bad)",
    ("formats/files.py", "a regular file"): "file_kind: part of OSError and DumpLayoutError messages",
    ("formats/files.py", "a named pipe (FIFO)"): "file_kind: part of OSError and DumpLayoutError messages",
    ("formats/files.py", "a character device"): "file_kind: part of OSError and DumpLayoutError messages",
    ("formats/files.py", "a block device"): "file_kind: part of OSError and DumpLayoutError messages",
    (
        "formats/files.py",
        "an unknown kind of file",
    ): "file_kind: part of OSError and DumpLayoutError messages",
    (
        "formats/files.py",
        "resolves outside the dump's folder (a symbolic link out of the dump is never followed)",
    ): ("an OSError's strerror"),
    ("formats/files.py", " (a symbolic link loop?)"): "describe: part of every layer's OSError messages",
    ("formats/manifest.py", "the manifest"): "part of ManifestError's message",
    ("formats/monitor.py", "monitor file {}"): "part of OverBudget's message (what would take it)",
    ("formats/npy.py", "Dump file: {} not found."): "open_error: NpyError's and PtError's message",
    ("formats/npy.py", "Dump file: {} is a directory."): "open_error: NpyError's and PtError's message",
    ("formats/npy.py", "Dump file {} cannot be read ({})."): "open_error: NpyError's and PtError's message",
    ("formats/npy.py", "an expression"): "part of NpyError's message",
    ("formats/pt.py", ", expanded from its storage by stride {}"): "part of OverBudget's message",
    ("formats/pt.py", "Dump file {} (a tensor of size {}{})"): "part of OverBudget's message",
    ("formats/records.py", "(nested too deeply to show)"): "a value's stand-in where it cannot be shown",
    ("formats/sites.py", "<frozen runpy>"): "a frame's file name, matched",
    ("compare/diagnosis/diagnose.py", "bench only: "): "a key's prefix, never shown",
    ("compare/monitor/rule.py", "lr group {}"): "a series' name, as the monitor's files name it",
    ("engine/callpath.py", "Other entries"): "a label of the app's tree",
    ("engine/callpath.py", "noise · the dump tool's own: its detach calls, calls inside the backward"): (
        "a label of the app's tree"
    ),
    ("engine/live/updates.py", "no dump"): "a side's state, a value",
    ("engine/workers/cluster.py", 'pip install "ptdbg-tui[cluster]"'): "a command, said in an exception",
    ("engine/narrow.py", " … ({} in all)"): "part of NarrowError's message",
    ("compare/replay/run.py", "a tensor of size {}"): "part of OverBudget's message (what would take it)",
    ("compare/replay/run.py", "the result {} of {}"): "part of OverBudget's message (what would take it)",
    ("engine/replay/replayer.py", " (did you mean {}?)"): "part of ReproInputError's message",
    ("engine/narrow.py", "no call introduces an error beyond rounding and no entry fails"): (
        "part of NothingToNarrow's message"
    ),
    ("engine/narrow.py", "see above"): "part of NothingToNarrow's message",
}


def _exempt(tree: ast.AST) -> set[int]:
    """The nodes whose strings are no report words: docstrings, exception, assertion and log messages,
    enum values, annotations, and the parts of an f-string (the f-string is looked at whole)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            and isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
        ):
            out.add(id(body[0].value))
        inside: ast.AST | None = None
        if (
            isinstance(node, ast.Raise | ast.Assert)
            or (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in _LOGS
            )
            or (isinstance(node, ast.ClassDef) and any(_name(b).endswith("Enum") for b in node.bases))
        ):
            inside = node
        elif isinstance(node, ast.arg | ast.AnnAssign) and node.annotation is not None:
            inside = node.annotation
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns is not None:
            inside = node.returns
        elif isinstance(node, ast.JoinedStr):
            out.update(id(v) for v in node.values)
        if inside is not None:
            out.update(id(n) for n in ast.walk(inside))
    return out


def built_sentences(source: str) -> list[tuple[int, str]]:
    """Each string of words ``source`` makes outside :func:`_exempt`: (line, text, ``{}`` for each value
    an f-string puts in)."""
    tree = ast.parse(source)
    exempt = _exempt(tree)
    found = []
    for node in ast.walk(tree):
        if id(node) in exempt:
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        elif isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
        else:
            continue
        if _WORDS.search(text):
            found.append((node.lineno, str(text)))
    return sorted(found)


def test_no_sentence_is_built_outside_the_report_layer() -> None:
    offenders = []
    for path in sorted(p for root in VALUES for p in root.rglob("*.py")):
        where = path.relative_to(PACKAGE).as_posix()
        if REPORT in path.parents or where in LEFT_MODULES:
            continue
        offenders += [
            f"{where}:{line}: {text!r}"
            for line, text in built_sentences(path.read_text(encoding="utf-8"))
            if (where, text) not in LEFT
        ]
    assert not offenders, (
        "sentences built outside the words (make them values, and the words in compare/report):\n"
        + "\n".join(offenders)
    )


def test_what_is_left_is_still_there() -> None:
    """Each exception on the lists still exists: one fixed is taken off them."""
    for where in LEFT_MODULES:
        assert built_sentences((PACKAGE / where).read_text(encoding="utf-8")), where
    for where, text in LEFT:
        assert text in {t for _, t in built_sentences((PACKAGE / where).read_text(encoding="utf-8"))}, where


def test_the_sentence_check_sees_prose_and_lets_values_be() -> None:
    source = """
\"\"\"A module's docstring, in words.\"\"\"
import logging
from enum import Enum
log = logging.getLogger(__name__)
class Why(Enum):
    NO_BUDGET = "no budget"
def f(e: "Error | None", name: str) -> "tuple[str, str]":
    \"\"\"A docstring.\"\"\"
    error = f"cannot read {name}"
    notice = "The comparison engine stopped."
    key = f"{name} vs {name}"
    log.warning("reading %s failed", name)
    assert name, "a name is needed"
    if not name:
        raise ValueError(f"no such name {name}")
    return f"input.{name}", "loss_scale"
"""
    assert built_sentences(source) == [(10, "cannot read {}"), (11, "The comparison engine stopped.")]
