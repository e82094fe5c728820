"""The next dump's configuration once a statistics dump has said where the runs diverge (issue 19:
statistics first, then tensors of one module only): this project's dumper options
(:mod:`~ptdbg_tui.formats.dump_options`) and, when msprobe wrote the dump, msprobe's config.json.

msprobe's config (``msprobe.core.dump.common_config``, ``msprobe.pytorch.dump.pt_config``): ``task``
``tensor``; ``step`` and ``rank`` lists (``[]``: all; a rank list stops a job that is not distributed
from dumping at all, so a rankless dump gets ``[]``); the task's ``list`` holds name parts matched
by substring: at level ``mix`` a part found in a module's name (``Module.track.lstm.LSTM.forward.0``)
dumps everything run inside that module, forward and backward; at level ``L1`` a part found in an
API call's name (``Functional.silu.0.forward``) dumps that call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ptdbg_tui.formats.dump_options import DumpOptions
from ptdbg_tui.formats.layout import RankDump
from ptdbg_tui.formats.naming import STYLE_MSPROBE, EntryName


@dataclass(frozen=True)
class Narrowed:
    """What the next dump covers: one module (its path as the module chains name it, ``track.lstm``)
    or, without one, calls (both directions); the steps and ranks (None: all of them)."""

    module: str = ""
    calls: tuple[EntryName, ...] = ()
    steps: tuple[int, ...] | None = None
    ranks: tuple[int, ...] | None = None

    @property
    def name(self) -> str:
        """A short name for files: the module path, else the first call."""
        return self.module or (self.calls[0].label if self.calls else "dump")


def narrowed_to_call(
    call: EntryName, steps: tuple[int, ...] | None = None, ranks: tuple[int, ...] | None = None
) -> Narrowed:
    """A call's target: the call itself; for one of msprobe's module entries (``Module.track.lstm.LSTM``),
    that module."""
    if call.style == STYLE_MSPROBE and call.prefix == "Module" and (path := call.op.rpartition(".")[0]):
        return Narrowed(module=path, steps=steps, ranks=ranks)
    return Narrowed(calls=(call,), steps=steps, ranks=ranks)


def _ptdbg_call(entry: EntryName) -> str:
    """The call as this project's dumper names it, ending in ``_`` so that ``Torch_add_1_`` does not
    also select ``Torch_add_10``: msprobe's ``Tensor.__mul__.1`` is ``Tensor___mul___1_``."""
    prefix, op = entry.prefix, entry.op
    api = entry.api if entry.style != STYLE_MSPROBE else f"{prefix}_{op}" if op else prefix
    return f"{api}_{entry.index}_"


def dumper_options(target: Narrowed) -> DumpOptions:
    """This project's dumper: tensors (npy, statistics), only the target's calls, forward and backward."""
    steps = list(target.steps) if target.steps is not None else None
    ranks = list(target.ranks) if target.ranks is not None else None
    if target.module:
        return DumpOptions(
            mode="api_stack",
            module=[target.module],
            step=steps,
            rank=ranks,
            summary_only=False,
            summary_mode="statistics",
        )
    return DumpOptions(
        mode="list",
        scope=[_ptdbg_call(c) for c in target.calls],
        step=steps,
        rank=ranks,
        summary_only=False,
        summary_mode="statistics",
    )


@dataclass(frozen=True)
class ToolConfig:
    """The config of the tool that wrote the NPU dump, for its next run (``tool`` names the tool)."""

    tool: str
    data: dict[str, Any]
    bench_path: str  # where the bench run dumps (the config names the NPU run's folder)


def tool_config(dump: RankDump, target: Narrowed, npu_path: str, bench_path: str) -> ToolConfig | None:
    """The config of the tool that wrote ``dump`` when that is not this project's dumper (whose
    options :func:`dumper_options` gives): msprobe's config.json; None for a ptdbg dump."""
    if dump.format != STYLE_MSPROBE:
        return None
    if target.module:
        level, names = "mix", [f"Module.{target.module}."]
    else:
        level, names = "L1", [f"{c.label}." for c in target.calls]
    data = {
        "task": "tensor",
        "dump_path": npu_path,
        "rank": list(target.ranks) if target.ranks is not None else [],
        "step": list(target.steps) if target.steps is not None else [],
        "level": level,
        "async_dump": False,
        "tensor": {"scope": [], "list": names, "data_mode": ["all"]},
    }
    return ToolConfig("msprobe", data, bench_path)
