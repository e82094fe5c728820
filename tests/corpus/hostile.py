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


def write_hostile_pair(
    root: Path,
    module: str,
    function: str,
    source: str,
    ranks: tuple[int, ...] = (0,),
    culprit: str = "Functional_relu",
    dtype: str | None = None,
) -> tuple[Path, Path]:
    """A ptdbg pair (``root/npu``, ``root/bench``) whose NPU relu is 50% off, so that it is the culprit:
    its module chain ends in ``module``, its stack frame's function is ``function`` and its source line
    ``source`` (dump text the tool shows, prints and names files after); ``culprit``: the relu's API
    name in its entry names, ``dtype`` the dtype text its entries record."""
    import numpy as np

    from ptdbg_tui.formats.layout import rank_dir_path
    from ptdbg_tui.formats.naming import entry_name, stack_name
    from ptdbg_tui.formats.synthetic import write_array
    from ptdbg_tui.formats.writer import RankWriter

    x = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
    calls = [
        ("Functional_linear", x, x * 2),
        (culprit, x * 2, np.maximum(x * 2, 0)),
        ("Torch_sum", x, x),
    ]
    for side, rank in ((side, rank) for side in ("npu", "bench") for rank in ranks):
        w = RankWriter(rank_dir_path(root / side, rank, 0))
        try:
            for api, inp, out in calls:
                if side == "npu" and api == culprit:
                    out = out * 1.5
                text = dtype if api == culprit else None
                write_array(w, entry_name(api, 0, "forward", "input", (0,)), inp, text)
                write_array(w, entry_name(api, 0, "forward", "output", (0,)), out, text)
                frames = [["/home/u/model.py", "10", function, source]]
                w.write_stack(stack_name(f"{api}_0_forward"), frames)
                w.write_modules(f"{api}_0", [("net", "Net"), (module, "Layer")])
        finally:
            w.close()
    return root / "npu", root / "bench"
