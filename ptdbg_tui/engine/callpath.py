"""Where an API call sits in the call-stack tree: direction, then module frames or call sites.

The module sidecar, when the dumper wrote one, gives the cleanest path (the chain of
``nn.Module``s the call ran inside); otherwise the user frames of the stack line are used,
outermost first. Backward stacks only show the autograd thread, so a backward call is placed
where its forward call was.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import lru_cache
from typing import NamedTuple

from ptdbg_tui.formats.dialects import TOOL_PATH_MARKS
from ptdbg_tui.formats.modules import ModuleChain
from ptdbg_tui.formats.naming import BACKWARD, FORWARD, EntryName
from ptdbg_tui.formats.records import Frame, StackRecord
from ptdbg_tui.formats.sites import LAUNCHER_PATH_MARKS, LIBRARY_PATH_MARKS

OTHER = "other"
DIRECTION_LABELS = {FORWARD: "Forward", BACKWARD: "Backward", OTHER: "Other entries"}
NOISE_LABEL = "noise · the dump tool's own: its detach calls, calls inside the backward"

_FOREIGN = (*TOOL_PATH_MARKS, *LAUNCHER_PATH_MARKS, *LIBRARY_PATH_MARKS, "<frozen ")


class Seg(NamedTuple):
    """One level of the tree path: ``key`` is unique among siblings, ``label`` is shown."""

    kind: str  # "direction" | "module" | "frame" | "call"
    key: str
    label: str


def user_frames(frames: list[Frame]) -> list[Frame]:
    """The user's frames, outermost first (recorded frames are innermost first): not the dump tool's,
    not the launcher's that started the script, not the framework's."""
    outer_first = list(reversed(frames))
    launched = [i for i, f in enumerate(outer_first) if _marked(f, LAUNCHER_PATH_MARKS)]
    start = launched[-1] + 1 if launched else 0  # what ran before a launcher handed over is its too
    return [f for f in outer_first[start:] if not _marked(f, _FOREIGN)]


def _marked(frame: Frame, marks: tuple[str, ...]) -> bool:
    path = frame.path.replace("\\", "/")
    return any(part in path for part in marks)


def module_label(qual: str, cls: str) -> str:
    """A module as the tree and the report name it: ``track.lstm · LSTM``."""
    return f"{qual or '(model)'} · {cls}" if cls else qual


#: The qualified name of the model itself: a call in its own forward has the chain ``[["", "Net"]]``.
MODEL = ""


def of_the_model(key: str, label: str) -> bool:
    """Whether an outermost module node (its qualified name and label) is one of the model's
    submodules: the module sidecar leaves the model out of its submodules' chains, and names a module
    run outside the model by its class (dumper/module_chain.py), which is no submodule."""
    return key != MODEL and label != module_label(key, key)


def frame_site(frame: Frame) -> str:
    return f"{os.path.basename(frame.path)}:{frame.line}"


def placement_stack(entry: EntryName | None, stacks: Mapping[str, StackRecord]) -> StackRecord | None:
    """The stack that says where a call was made: the forward one for both directions."""
    if entry is None:
        return None
    return stacks.get(entry.forward_call) or stacks.get(entry.call)


def call_path(
    entry: EntryName | None,
    name: str,
    chain: ModuleChain | None,
    stack: StackRecord | None,
    noise: bool = False,
) -> tuple[Seg, ...]:
    """Path of the call of one entry, from its direction down to the call node itself; a noise
    call (the other tool's own, in a mixed pair) goes into one group of its direction."""
    direction = entry.direction if entry else OTHER
    segs = [Seg("direction", direction, DIRECTION_LABELS[direction])]
    if noise:
        segs.append(Seg("noise", "noise", NOISE_LABEL))
    elif chain:
        segs += _module_segs(chain)
    elif stack is not None:
        segs += _frame_segs(tuple(stack.frames))
    if entry is None:
        segs.append(Seg("call", name, name))
    else:
        segs.append(Seg("call", entry.call, entry.label))
    return tuple(segs)


@lru_cache(maxsize=4096)
def _module_segs(chain: ModuleChain) -> tuple[Seg, ...]:
    """A module chain's levels (the calls of one module share them: an LLM pair has ~50,000 calls)."""
    return tuple(Seg("module", qual, module_label(qual, cls)) for qual, cls in chain)


@lru_cache(maxsize=4096)
def _frame_segs(frames: tuple[Frame, ...]) -> tuple[Seg, ...]:
    """A stack's user frames as levels (a layer's calls repeat the same stacks)."""
    return tuple(
        Seg("frame", f"{f.path}:{f.line}:{f.function}", f"{f.function}  {frame_site(f)}")
        for f in user_frames(list(frames))
    )
