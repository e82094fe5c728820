"""Multi-step scenarios: a real training loop dumped at several steps (and ranks), with ground truth
per (step, rank).

A :class:`Training` is one scenario: how each side trains (:class:`Loop`: a model, one batch per
step, the forward/loss/backward of ``models.py``, an optimizer), the fault the NPU run gets and at
which steps and ranks, and a :class:`Truth` for every (step, rank) dumped. Both sides build the
model and batches after ``torch.manual_seed(MODEL_SEED)``; the NPU run's weights and batches get
the 1e-6 noise of the single-step scenarios (seeded per noise draw and rank), and optionally the
whole run in fp16/bf16.

Each step is dumped as a user does (``start()``, zero_grad, forward, loss, backward, the gradient
sync of a data-parallel job, ``optimizer.step()`` when the optimizer is inside the dumped step,
``stop()``, ``step()``). The fault is installed after ``start()`` (under the dumper's wrapper) and
removed before ``stop()``, only at its steps and ranks.

Ground truth at (step, rank) is the injected fault when it runs there; otherwise where the
divergence enters that step (parameters that differ on entry, a random op, an argument, an
NPU-only call, another rank's collective); ``none`` where nothing does.
"""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import nn

from diagnosis_scenarios.checks import Check
from diagnosis_scenarios.models import nudge
from diagnosis_scenarios.scenario import MODEL_SEED, NOISE, NPU, both_sides
from dumper import PrecisionDebugger

STEPS = 3
#: torch's RNG during training (dropout masks); a scenario may seed the NPU run differently.
TRAIN_SEED = 1
ALL_STEPS = frozenset(range(STEPS))

# the kinds of ground truth (how the runner judges each: bench/divergence.py's KINDS)
KERNEL, RANDOM, ARGUMENTS, PARAMETERS, UNPAIRED, RANK, RECEIVED, NONE = (
    "kernel",
    "random",
    "arguments",
    "parameters",
    "unpaired",
    "rank",
    "received",
    "none",
)


@dataclass(frozen=True)
class Truth:
    """What the report must say at one (step, rank), or for the whole run (``rank``)."""

    kind: str
    calls: frozenset[str] = frozenset()  # NPU call names, e.g. ``Functional_gelu_0_forward``
    rank: int | None = None  # ``rank``/``received``: the culprit rank
    step: int | None = None  # ``rank``: the step the rank line names; ``parameters``: the step entered

    @property
    def faulty(self) -> bool:
        return self.kind != NONE

    def __str__(self) -> str:
        where = "" if self.rank is None else f" rank{self.rank}"
        where += "" if self.step is None else f" step{self.step}"
        return f"{self.kind}{where}" + (f": {' | '.join(sorted(self.calls))}" if self.calls else "")


def kernel(*calls: str) -> Truth:
    return Truth(KERNEL, frozenset(calls))


def random_op(call: str) -> Truth:
    return Truth(RANDOM, frozenset({call}))


def arguments(call: str) -> Truth:
    return Truth(ARGUMENTS, frozenset({call}))


def parameters(first_use: str, step: int) -> Truth:
    return Truth(PARAMETERS, frozenset({first_use}), step=step)


def unpaired(call: str) -> Truth:
    return Truth(UNPAIRED, frozenset({call}))


NO_FAULT = Truth(NONE)
Truths = Mapping[tuple[int, int], Truth]  # (step, rank) -> truth


def every_step(truth: Truth, ranks: Iterable[int] = (0,)) -> dict[tuple[int, int], Truth]:
    return {(s, r): truth for s in range(STEPS) for r in ranks}


def from_step(first: int, truth: Truth) -> dict[tuple[int, int], Truth]:
    """``none`` before step ``first``, ``truth`` from then on (rank 0)."""
    return {(s, 0): truth if s >= first else NO_FAULT for s in range(STEPS)}


class Optimizer(Protocol):
    def zero_grad(self, set_to_none: bool = True) -> None: ...

    def step(self) -> Any: ...


def sgd(lr: float = 0.1, momentum: float = 0.0) -> Callable[[nn.Module], Optimizer]:
    return lambda model: torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)


def adam(lr: float = 1e-3) -> Callable[[nn.Module], Optimizer]:
    return lambda model: torch.optim.Adam(model.parameters(), lr=lr)


@dataclass
class Loop:
    """One side's training run."""

    model: nn.Module
    batches: list[tuple[torch.Tensor, ...]]  # one per step
    step: Callable[..., Any]  # step(model, *batch): forward, loss, backward (models.py)
    optimizer: Callable[[nn.Module], Optimizer] = field(default_factory=sgd)
    sync: Callable[[nn.Module], None] | None = None  # after the backward (a data-parallel gradient sync)
    seed: int = TRAIN_SEED  # torch's RNG from the first step on


def batches(make: Callable[[], tuple[torch.Tensor, ...]]) -> list[tuple[torch.Tensor, ...]]:
    """One batch per step, drawn in order (the same on both sides: the RNG is seeded)."""
    return [make() for _ in range(STEPS)]


Fault = Callable[[], AbstractContextManager[Any]]
#: dumps both sides: (scenario, root, noise seed) -> (npu, bench) dump paths
Dumper = Callable[["Training", Path, int], tuple[Path, Path]]


@dataclass(frozen=True)
class Training:
    """A multi-step (and maybe multi-rank) scenario with its ground truth per (step, rank)."""

    name: str
    what: str  # one line: the fault, or what makes the no-fault run hard
    build: Callable[[str], Loop] | None  # build(side); None where ``dumper`` runs a script
    truths: Truths
    fault: Fault | None = None  # installed on the NPU run, at fault_steps and fault_ranks
    fault_steps: frozenset[int] = ALL_STEPS
    fault_ranks: frozenset[int] = frozenset({0})
    npu_dtype: torch.dtype | None = None  # the whole NPU run in this dtype (bench stays fp32)
    optimizer_dumped: bool = True  # optimizer.step() between start() and stop()
    keep_dropout: bool = False  # configure_hook(disable_dropout=False)
    overall: Truth | None = None  # the run over every step and rank: its first divergent rank line
    dumper: Dumper | None = None  # None: in this process (dump_pair)
    premise: Check | None = None  # facts the dumps must show (divergence.py --check)
    uninitialised: tuple[str, ...] = ()  # entries that hold uninitialised memory (no NaN/Inf check)

    @property
    def steps(self) -> list[int]:
        return sorted({s for s, _ in self.truths})

    @property
    def ranks(self) -> list[int]:
        return sorted({r for _, r in self.truths})

    def dump(self, root: Path, seed: int) -> tuple[Path, Path]:
        return (self.dumper or dump_pair)(self, root, seed)

    def variant(self, name: str, what: str, truths: Truths, **changes: Any) -> Training:
        """The same runs under another name, truth and settings (e.g. a no-fault twin)."""
        return replace(self, name=name, what=what, truths=truths, **changes)


def noise_seed(scenario: Training, seed: int, rank: int) -> int:
    return zlib.crc32(scenario.name.encode()) + 1000 * rank + seed


def prepared(scenario: Training, side: str, seed: int, rank: int = 0) -> Loop:
    """One side's loop, built as both sides build it; the NPU's with noise (and its dtype)."""
    assert scenario.build is not None
    torch.manual_seed(MODEL_SEED)
    loop = scenario.build(side)
    if side == NPU:
        tensors = [t for b in loop.batches for t in b]
        nudge([*tensors, *loop.model.parameters()], noise_seed(scenario, seed, rank), NOISE)
        if scenario.npu_dtype is not None:
            loop.model.to(scenario.npu_dtype)
            loop.batches = [
                tuple(t.to(scenario.npu_dtype) if t.is_floating_point() else t for t in b)
                for b in loop.batches
            ]
    return loop


def train(scenario: Training, path: Path, side: str, seed: int = 0, rank: int | None = None) -> Path:
    """Train one side for the scenario's steps, dumping each into ``path``; returns ``path``.
    ``rank`` is the process's rank in a distributed job (None: a single process, dumped as rank 0)."""
    loop = prepared(scenario, side, seed, rank or 0)
    optimizer = loop.optimizer(loop.model)
    debugger = PrecisionDebugger(
        dump_path=str(path),
        hook_name="dump",
        rank=None if rank is not None else 0,
        step=scenario.steps,
        model=loop.model,
    )
    debugger.configure_hook(mode="api_stack", disable_dropout=not scenario.keep_dropout)
    torch.manual_seed(loop.seed)
    for step, batch in enumerate(loop.batches):
        faulty = (
            side == NPU
            and scenario.fault is not None
            and step in scenario.fault_steps
            and (rank or 0) in scenario.fault_ranks
        )
        debugger.start()
        try:
            with scenario.fault() if faulty and scenario.fault else contextlib.nullcontext():
                optimizer.zero_grad(set_to_none=True)
                loop.step(loop.model, *batch)
                if loop.sync is not None:
                    loop.sync(loop.model)
                if scenario.optimizer_dumped:
                    optimizer.step()
        finally:
            debugger.stop()
        if not scenario.optimizer_dumped:
            optimizer.step()
        debugger.step()
    return path


def dump_pair(scenario: Training, root: Path, seed: int = 0) -> tuple[Path, Path]:
    """``root/npu`` and ``root/bench``, each trained in this process."""
    return both_sides(train, scenario, root, seed)
