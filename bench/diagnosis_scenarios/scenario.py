"""A scenario, its two runs, and how each run is dumped."""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import torch

from diagnosis_scenarios.models import Workload, nudge
from dumper import PrecisionDebugger

#: Relative noise of the NPU run: far below every pass threshold.
NOISE = 1e-6
#: Seed of the model weights and inputs, the same on both sides.
MODEL_SEED = 0
NPU, BENCH = "npu", "bench"


@dataclass(frozen=True)
class Scenario:
    """One fault scenario (or a no-fault one: empty ``truth``)."""

    name: str
    what: str  # one line: the fault, or what makes the no-fault run hard
    build: Callable[[str], Workload]  # build(side): side is NPU or BENCH
    truth: frozenset[str] = field(default_factory=frozenset)
    fault: Callable[[], AbstractContextManager[Any]] | None = None  # installed on the NPU run only
    npu_dtype: torch.dtype | None = None  # the whole NPU run in this dtype (bench stays fp32)

    @property
    def faulty(self) -> bool:
        return bool(self.truth)

    def with_fault(
        self, name: str, what: str, truth: frozenset[str], fault: Callable[[], AbstractContextManager[Any]]
    ) -> Scenario:
        """The same model and run with a fault."""
        return replace(self, name=name, what=what, truth=truth, fault=fault)

    def switched_off(self, what: str) -> Scenario:
        """The same model and run with no fault (and no ground truth)."""
        return replace(self, name=f"{self.name}_off", what=what, truth=frozenset(), fault=None)


def truth(*calls: str) -> frozenset[str]:
    """The ground truth: the calls (as the NPU dump names them) where the error starts."""
    return frozenset(calls)


def _nudge(w: Workload, seed: int) -> None:
    nudge([*w.inputs, *w.model.parameters()], seed, NOISE)


def _cast(w: Workload, dtype: torch.dtype) -> Workload:
    inputs = tuple(t.to(dtype) if t.is_floating_point() else t for t in w.inputs)
    return Workload(w.model.to(dtype), inputs, w.step)


def dump_side(scenario: Scenario, path: Path, side: str, seed: int = 0) -> Path:
    """Dump one training step of one side into ``path``; returns ``path``."""
    torch.manual_seed(MODEL_SEED)
    w = scenario.build(side)
    npu = side == NPU
    if npu:
        _nudge(w, zlib.crc32(scenario.name.encode()) + seed)
        if scenario.npu_dtype is not None:
            w = _cast(w, scenario.npu_dtype)
    debugger = PrecisionDebugger(dump_path=str(path), hook_name="dump", rank=0, step=[0], model=w.model)
    debugger.configure_hook(mode="api_stack")
    fault = scenario.fault() if npu and scenario.fault is not None else contextlib.nullcontext()
    with fault:
        debugger.start()
        try:
            w.step(w.model, *w.inputs)
        finally:
            debugger.stop()
            debugger.step()
    return path


S = TypeVar("S")


def both_sides(
    dump: Callable[[S, Path, str, int], Path], scenario: S, root: Path, seed: int = 0
) -> tuple[Path, Path]:
    """``root/npu`` and ``root/bench``, each dumped by ``dump(scenario, path, side, seed)``."""
    root = Path(root)
    return dump(scenario, root / NPU, NPU, seed), dump(scenario, root / BENCH, BENCH, seed)


def dump_pair(scenario: Scenario, root: Path, seed: int = 0) -> tuple[Path, Path]:
    """``root/npu`` and ``root/bench`` dumps of the scenario."""
    return both_sides(dump_side, scenario, root, seed)
