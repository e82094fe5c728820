"""Which frames of a recorded stack are the user's: not a dump tool's, not the launcher's that
started the user's script, not the framework's.

A dumper's hook and torch's own modules sit between the user's line and the recorded call; the
culprit is shown at the user's line.
"""

from __future__ import annotations

from ptdbg_tui.formats.dialects import TOOL_PATH_MARKS
from ptdbg_tui.formats.records import Frame, StackRecord

#: Frames of what started the user's script, not of the script: the console scripts ``ptdbg-dump`` and
#: ``ptdbg-tui`` (the demo), this package's command line, Python's ``runpy`` (``python -m``), and
#: ``multiprocessing``'s frames above a spawned rank's function (``torch.multiprocessing.spawn``).
LAUNCHER_PATH_MARKS = (
    "/bin/ptdbg-dump",
    "/bin/ptdbg-tui",
    "/Scripts/ptdbg-dump",
    "/Scripts/ptdbg-tui",
    "/ptdbg_tui/cli.py",
    "/ptdbg_tui/__main__.py",
    "/runpy.py",
    "<frozen runpy>",
    "/multiprocessing/spawn.py",
    "/multiprocessing/process.py",
    "/multiprocessing/forkserver.py",
    "/multiprocessing/popen_fork.py",
    "/multiprocessing/pool.py",
)
#: Frames inside these belong to the framework; the user's call site is further out.
LIBRARY_PATH_MARKS = ("/site-packages/torch/", "/dist-packages/torch/", "/site-packages/torch_npu/")


def stack_site(stack: StackRecord | None) -> Frame | None:
    """The user's call site: the innermost frame outside the dumper (and, when there is one,
    outside the framework itself)."""
    if stack is None:
        return None
    own = [f for f in stack.frames if _useful(f, TOOL_PATH_MARKS + LAUNCHER_PATH_MARKS)]
    user = [f for f in own if _useful(f, LIBRARY_PATH_MARKS)]
    return next(iter(user or own), None)


def _useful(frame: Frame, marks: tuple[str, ...]) -> bool:
    path = frame.path.replace("\\", "/")
    return not any(m in path for m in marks)
