"""The hostile-text corpus: strings an attacker puts in a dump's names, module paths, stack text,
dtype texts and keyword names (issue 29). Each is fed into every text slot of what the tool writes
or shows; the tests assert the safe outcome (nothing runs, nothing escapes the output folder, the
text is shown literally)."""

from __future__ import annotations

import re
from pathlib import Path

#: Each kind of attack once (a name holding it must come out harmless everywhere).
HOSTILE = [
    'float16"""',  # ends a docstring: a repro.py that does not compile
    '"""; __import__("os").system("touch PWNED"); """',
    "''' + __import__('os').system('touch PWNED') + '''",
    '")+__import__("os").system("touch PWNED")+("',  # ends a printed Python string
    "\\",
    'a\\"""',
    "\x1b]0;pwned title\x07",  # OSC 0: the terminal's title
    "\x1b]52;c;cHduZWQ=\x07",  # OSC 52: the clipboard
    "\x1b[2J\x1b[31mred",  # CSI: clear the screen, colour
    "\x9b31m\x9d0;c1\x9c",  # C1 controls: CSI, OSC, ST in one byte each
    "\u202eevil\u202c\u2066x\u2069",  # bidi override and isolate
    "a\nCulprit: fake (forward): forged line",  # a forged report line
    "a\r\nb\x00c",
    "[@click=app.screenshot('X.svg','..')]click[/]",  # Textual markup: an action link
    "[/x]",  # a closing tag with no opening: MarkupError
    "[bold red]loud",
    "a/../../../X",  # path traversal
    "/etc/passwd",
    "..",
    "~/x",
    "C:\\x\\..\\y",
    "=cmd|' /C calc'!A0",  # spreadsheet formulas
    "+1+1",
    "-2+3",
    "@SUM(A1:A9)",
    "\tTAB",
    "x" * 5000,  # long
    "\ud800lone",  # a lone surrogate (undecodable bytes)
]

#: What the terminal must never receive from a dump: ESC, C1 controls, bidi controls, BEL, NUL.
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def outside(folder: Path, paths: list[Path]) -> list[Path]:
    """The paths that resolve outside ``folder`` (empty: every one stays inside)."""
    root = folder.resolve()
    return [p for p in paths if not p.resolve().is_relative_to(root)]


def files_under(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*") if p.is_file()}
