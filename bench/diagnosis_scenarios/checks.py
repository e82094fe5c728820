"""The premises of the multi-step scenarios, read back from their dumps (``divergence.py --check``).

A scenario is only ground truth if its dumps show what it claims: the inputs of an every-step fault
already differ at step 2, only rank 2's collective departs, only the scalar differs, an expert gets
no gradient. Each check yields :class:`Fact` lines; a fact that fails is a bug in the scenario.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ptdbg_tui.formats.layout import RankDump, discover
from ptdbg_tui.formats.npy import load_npy, npy_path
from ptdbg_tui.formats.reader import read_dump

Value = np.ndarray | float | None


@dataclass(frozen=True)
class Fact:
    ok: bool
    text: str

    def __str__(self) -> str:
        return f"{'ok  ' if self.ok else 'FAIL'} {self.text}"


class Side:
    """One side's dump: every (step, rank)'s entries, read on demand."""

    def __init__(self, root: Path) -> None:
        self.dumps: dict[tuple[int, int], RankDump] = {(d.step or 0, d.rank or 0): d for d in discover(root)}
        self._records: dict[tuple[int, int], dict[str, tuple[str, object]]] = {}

    def records(self, step: int, rank: int) -> dict[str, tuple[str, object]]:
        """Entry name -> (dtype, the value of a Python scalar, else None)."""
        if (step, rank) not in self._records:
            tensors = read_dump(self.dumps[step, rank]).tensors
            self._records[step, rank] = {
                r.name: (r.dtype, r.stats[0] if r.is_scalar else None) for r in tensors
            }
        return self._records[step, rank]

    def names(self, step: int, rank: int, pattern: str) -> list[str]:
        return [n for n in self.records(step, rank) if fnmatch.fnmatchcase(n, pattern)]

    def value(self, step: int, rank: int, name: str) -> Value:
        dtype, scalar = self.records(step, rank)[name]
        if dtype.startswith("<class"):
            return None if scalar is None else float(scalar)  # type: ignore[arg-type]
        return load_npy(npy_path(self.dumps[step, rank].tensor_dir, name)).astype(np.float64)


def relative(a: Value, b: Value) -> float:
    """max |a - b| / max |b| (0 for two zeros, inf for a difference against zeros)."""
    if a is None or b is None:
        return math.nan
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.shape != y.shape:
        return math.inf
    diff = float(np.max(np.abs(x - y), initial=0.0))
    scale = float(np.max(np.abs(y), initial=0.0))
    return diff / scale if scale else (0.0 if diff == 0 else math.inf)


class Pair:
    """The two dumps of one scenario."""

    def __init__(self, npu: Path, bench: Path) -> None:
        self.npu, self.bench = Side(npu), Side(bench)

    def error(self, step: int, rank: int, pattern: str) -> float:
        """The largest relative error of the entries matching ``pattern`` (NaN if none is on both sides)."""
        names = [n for n in self.npu.names(step, rank, pattern) if n in self.bench.records(step, rank)]
        errors = [relative(self.npu.value(step, rank, n), self.bench.value(step, rank, n)) for n in names]
        return max(errors, default=math.nan)


Check = Callable[[Pair], Iterator[Fact]]


def _fmt(x: float) -> str:
    return f"{x:.2g}"


def error_between(
    step: int, pattern: str, low: float = 0.0, high: float = math.inf, rank: int = 0, why: str = ""
) -> Check:
    """The relative error of ``pattern`` at (step, rank) lies in [low, high)."""

    def check(pair: Pair) -> Iterator[Fact]:
        e = pair.error(step, rank, pattern)
        bounds = (
            f">= {_fmt(low)}"
            if math.isinf(high)
            else f"< {_fmt(high)}"
            if low == 0
            else f"in [{_fmt(low)}, {_fmt(high)})"
        )
        where = f"step{step}" + (f"/rank{rank}" if rank else "")
        because = f" ({why})" if why else ""
        yield Fact(low <= e < high, f"{where} {pattern}: error {_fmt(e)} {bounds}{because}")

    return check


def differs(step: int, pattern: str, low: float = 1e-4, rank: int = 0, why: str = "") -> Check:
    return error_between(step, pattern, low=low, rank=rank, why=why)


def agrees(step: int, pattern: str, high: float = 1e-5, rank: int = 0, why: str = "") -> Check:
    return error_between(step, pattern, high=high, rank=rank, why=why)


def finite(pair: Pair, skip: Sequence[str] = ()) -> Iterator[Fact]:
    """Neither dump holds a NaN or an Inf (so a report that says NaN/Inf is wrong); entries matching
    ``skip`` (uninitialised memory) are not read."""
    bad = []
    for side, name in ((pair.npu, "npu"), (pair.bench, "bench")):
        for step, rank in side.dumps:
            for n in side.records(step, rank):
                if any(fnmatch.fnmatchcase(n, p) for p in skip):
                    continue
                v = side.value(step, rank, n)
                if v is not None and not np.all(np.isfinite(v)):
                    bad.append(f"{name} step{step}/rank{rank} {n}")
    yield Fact(not bad, "no NaN/Inf in either dump" + (f": {', '.join(bad[:3])}" if bad else ""))


def only_npu(step: int, call: str, rank: int = 0) -> Check:
    """``call`` is in the NPU dump only."""

    def check(pair: Pair) -> Iterator[Fact]:
        npu = bool(pair.npu.names(step, rank, call + "_*"))
        bench = bool(pair.bench.names(step, rank, call + "_*"))
        yield Fact(npu and not bench, f"step{step} {call}: in the NPU dump {npu}, in the bench dump {bench}")

    return check


def scalar(step: int, entry: str, npu: float, bench: float | None = None) -> Check:
    """A Python scalar argument's value on each side (``bench`` None: an NPU-only call)."""

    def check(pair: Pair) -> Iterator[Fact]:
        got = pair.npu.value(step, 0, entry)
        theirs = pair.bench.value(step, 0, entry) if bench is not None else None
        ok = got == npu and (bench is None or theirs == bench)
        yield Fact(ok, f"step{step} {entry}: NPU {got}" + ("" if bench is None else f", bench {theirs}"))

    return check


def all_of(*checks: Check) -> Check:
    def check(pair: Pair) -> Iterator[Fact]:
        for c in checks:
            yield from c(pair)

    return check


def has_call(step: int, pattern: str, rank: int = 0, side: str = "npu", why: str = "") -> Check:
    """The ``side`` dump holds an entry matching ``pattern`` at (step, rank)."""

    def check(pair: Pair) -> Iterator[Fact]:
        found = (pair.npu if side == "npu" else pair.bench).names(step, rank, pattern)
        yield Fact(
            bool(found),
            f"step{step} {side} dump has {pattern}: {len(found)} entries" + (f" ({why})" if why else ""),
        )

    return check


def calls_more_on_npu(step: int, pattern: str, more: int) -> Check:
    """The NPU dump holds ``more`` calls matching ``pattern`` than the bench dump (NPU-only calls)."""

    def check(pair: Pair) -> Iterator[Fact]:
        n, b = (len(side.names(step, 0, pattern)) for side in (pair.npu, pair.bench))
        yield Fact(n - b == more, f"step{step} {pattern}: {n} on the NPU, {b} on the bench")

    return check


def departs_from_peers(
    step: int, entry: str, ranks: Sequence[int], departing: Sequence[int], high: float = 1e-6
) -> Check:
    """Within the NPU run, ``entry`` (a collective's output, equal on every rank) is the same on
    every rank but ``departing``, which differ from the first other rank by more than ``high``."""

    def check(pair: Pair) -> Iterator[Fact]:
        base = next(r for r in ranks if r not in departing)
        theirs = pair.npu.value(step, base, entry)
        errors = {r: relative(pair.npu.value(step, r, entry), theirs) for r in ranks}
        ok = all((e > high) == (r in departing) for r, e in errors.items())
        shown = ", ".join(f"rank{r} {_fmt(e)}" for r, e in errors.items())
        yield Fact(
            ok,
            f"step{step} NPU {entry} against rank{base}'s: {shown} (only "
            f"{', '.join(f'rank{r}' for r in departing) or 'none'} above {_fmt(high)})",
        )

    return check
