"""Does the diagnosis name where a divergence starts across steps, ranks and random ops? Multi-step
scenarios with ground truth per (step, rank), judged through the real CLI.

    python bench/divergence.py [--seeds 0 1 2] [--only NAME ...] [--list] [--check] [--keep DIR]
                               [--extra "--replay"] [--jobs N]

Each scenario (``bench/diagnosis_scenarios/{steps,ranks,scripts}.py``) trains a small real model
for three steps on CPU, dumped at every step by the project's dumper, twice: the bench run, and the
NPU run (1e-6 noise [+ bf16] + one fault, or a difference in the script). For every (step, rank)
it runs ``ptdbg-tui compare NPU BENCH --step S [--rank R] -o OUT [EXTRA...]`` as a user does (and,
for several ranks, once without ``--step`` for the ``first divergent rank`` line), parses the
report and judges it by the kind of the ground truth (:data:`KINDS`). It prints per scenario,
step and rank the truth, our answer (the Culprit line) and right/wrong; then totals: fault
judgements right, no-fault judgements with a false culprit, report lines that say NaN/Inf (no dump
here holds one), seconds. ``--check`` also prints each scenario's premise as read from its dumps
(a failed premise is a broken scenario). Exit status 0 always: a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch
from diagnosis_scenarios.checks import Fact, Pair, finite
from diagnosis_scenarios.ranks import RANKS
from diagnosis_scenarios.scripts import SCRIPTS, command
from diagnosis_scenarios.steps import ISSUE15, ISSUE16
from diagnosis_scenarios.training import (
    ARGUMENTS,
    KERNEL,
    NONE,
    PARAMETERS,
    RANDOM,
    RANK,
    RECEIVED,
    UNPAIRED,
    Training,
    Truth,
)

SUITE: dict[str, Training] = {s.name: s for s in ISSUE15 + ISSUE16 + RANKS + SCRIPTS}

CULPRIT = "Culprit: "
RANK_LINE = "first divergent rank: "
NAN_WORDS = re.compile(r"\bNaN\b|\bInf\b")


@dataclass(frozen=True)
class Kind:
    """How the report is judged for one kind of ground truth.

    ``line``: the report line judged (``culprit``: the first ``Culprit:`` line; ``rank``: the
    ``first divergent rank:`` line). ``words``: text it must contain (``{step}``/``{rank}`` filled
    from the truth). ``call``: ``is``: the line's CALL is one of the truth's calls; ``in``: one of
    them is named in the line. ``absent_ok``: no such line is right too; ``absent``: only no such
    line is right."""

    line: str
    words: str = ""
    call: str = ""
    absent_ok: bool = False
    absent: bool = False


#: The kinds of ground truth and the text each needs (the wording the lead may adjust).
KINDS: dict[str, Kind] = {
    KERNEL: Kind("culprit", call="is"),
    RANDOM: Kind("culprit", "random numbers", call="in"),
    ARGUMENTS: Kind("culprit", "different arguments", call="in"),
    PARAMETERS: Kind("culprit", "parameters differ on entry to step {step}", call="in"),
    # the NPU-only call is the Culprit's CALL: naming it in "it entered after CALL" says the opposite
    UNPAIRED: Kind("culprit", call="is"),
    RANK: Kind("rank", "first divergent rank: rank{rank} (step{step}): ", call="in"),
    # a rank that only receives another rank's error: no culprit, or the collective it came through
    RECEIVED: Kind("culprit", call="is", absent_ok=True),
    NONE: Kind("culprit", absent=True),
}


@dataclass(frozen=True)
class Report:
    """What one CLI run printed, as far as the benchmark judges it."""

    culprit: str | None  # the first Culprit line, without "Culprit: "
    rank_line: str | None  # the first divergent rank line
    nan_lines: int  # report lines that say NaN or Inf
    error: str = ""  # the CLI failed: its stderr's tail

    @property
    def call(self) -> str | None:
        """The Culprit line's CALL."""
        return self.culprit.split(" ", 1)[0] if self.culprit else None


def parse_report(stdout: str) -> tuple[str | None, str | None, int]:
    lines = [line.strip() for line in stdout.splitlines()]
    culprit = next((line[len(CULPRIT) :] for line in lines if line.startswith(CULPRIT)), None)
    rank = next((line for line in lines if line.startswith(RANK_LINE)), None)
    return culprit, rank, sum(bool(NAN_WORDS.search(line)) for line in lines)


def right(truth: Truth, report: Report) -> bool:
    if report.error:
        return False
    kind = KINDS[truth.kind]
    line = report.rank_line if kind.line == "rank" else report.culprit
    if kind.absent:
        # nothing named: no Culprit line, and a rank line (if any) that names no rank
        return report.culprit is None and (
            report.rank_line is None or report.rank_line.startswith(RANK_LINE + "none")
        )
    if line is None:
        return kind.absent_ok
    if kind.words and kind.words.format(step=truth.step, rank=truth.rank) not in line:
        return False
    if kind.call == "is":
        named = line.split(" ", 1)[0] if kind.line == "culprit" else None
        return named in truth.calls
    if kind.call == "in":
        return any(re.search(rf"\b{re.escape(c)}\b", line) for c in truth.calls)
    return True


@dataclass(frozen=True)
class Judged:
    step: int | None  # None: the run over every step (and rank)
    rank: int | None  # None: a single-rank scenario, or the run over every rank
    truth: Truth
    report: Report

    @property
    def right(self) -> bool:
        return right(self.truth, self.report)

    @property
    def answer(self) -> str:
        if self.report.error:
            return f"(compare failed: {self.report.error})"
        line = self.report.rank_line if KINDS[self.truth.kind].line == "rank" else self.report.culprit
        return line or "-"


@dataclass
class Outcome:
    """One scenario with one noise seed."""

    name: str
    seed: int
    judged: list[Judged] = field(default_factory=list)
    facts: list[Fact] = field(default_factory=list)
    dump_s: float = 0.0
    compare_s: float = 0.0
    problem: str = ""  # the scenario could not be dumped


def compare(
    npu: Path, bench: Path, out: Path, step: int | None, rank: int | None, extra: Sequence[str]
) -> Report:
    """``ptdbg-tui compare`` as a user runs it."""
    cmd = [
        *command("ptdbg-tui", "ptdbg_tui"),
        "compare",
        str(npu),
        str(bench),
        "-o",
        str(out),
        "--no-progress",
    ]
    cmd += ["--step", str(step)] if step is not None else []
    cmd += ["--rank", str(rank)] if rank is not None else []
    done = subprocess.run([*cmd, *extra], capture_output=True, text=True)
    culprit, rank_line, nans = parse_report(done.stdout)
    lines = [f"exit {done.returncode}", *done.stderr.strip().splitlines()]
    error = "" if done.returncode == 0 else lines[-1]
    return Report(culprit, rank_line, nans, error)


#: Written beside a scenario's dumps once both are complete (``--reuse`` takes them as they are).
DUMPED = "dumped"


def run_scenario(
    name: str, seed: int, root: Path, extra: Sequence[str], check: bool, reuse: bool = False
) -> Outcome:
    """Dump one scenario (``reuse``: unless its dumps are complete under ``root``) and judge every
    (step, rank) of it."""
    torch.set_num_threads(1)
    scenario = SUITE[name]
    outcome = Outcome(name, seed)
    start = time.perf_counter()
    if reuse and (root / DUMPED).is_file():
        npu, bench = root / "npu", root / "bench"
    else:
        try:
            npu, bench = scenario.dump(root, seed)
        except Exception as e:  # a broken scenario is reported, the others still run
            outcome.problem = f"dump failed: {type(e).__name__}: {e}"
            return outcome
        (root / DUMPED).write_text(f"{npu}\n{bench}\n")
    outcome.dump_s = time.perf_counter() - start
    start = time.perf_counter()
    multi = len(scenario.ranks) > 1
    reports = root / "reports"
    for (step, rank), truth in sorted(scenario.truths.items()):
        report = compare(npu, bench, reports, step, rank if multi else None, extra)
        outcome.judged.append(Judged(step, rank if multi else None, truth, report))
    if scenario.overall is not None:
        report = compare(npu, bench, reports, None, None, extra)
        outcome.judged.append(Judged(None, None, scenario.overall, report))
    outcome.compare_s = time.perf_counter() - start
    if check:
        outcome.facts = premise(scenario, Pair(npu, bench))
    return outcome


def premise(scenario: Training, pair: Pair) -> list[Fact]:
    """The scenario's premise and that no dump holds a NaN/Inf; a check that fails to run is a
    failed fact."""
    try:
        return [*(scenario.premise(pair) if scenario.premise else ()), *finite(pair, scenario.uninitialised)]
    except Exception as e:
        return [Fact(False, f"the check failed: {type(e).__name__}: {e}")]


# --- printing ------------------------------------------------------------------------------------


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _where(j: Judged) -> str:
    if j.step is None:
        return "all"
    return f"{j.step}" + ("" if j.rank is None else f"/r{j.rank}")


def print_outcome(o: Outcome) -> None:
    print(f"\n{o.name} (seed {o.seed}): {SUITE[o.name].what}")
    if o.problem:
        print(f"    BROKEN SCENARIO: {o.problem}")
        return
    for j in o.judged:
        mark = "right" if j.right else "WRONG"
        nan = f"  NaN/Inf words: {j.report.nan_lines}" if j.report.nan_lines else ""
        print(f"  {_where(j):>5s}  {_short(str(j.truth), 52):52s}  {_short(j.answer, 70):70s} {mark}{nan}")
        if not j.right and len(j.answer) > 70:
            print(f"         ours: {_short(j.answer, 400)}")
    for fact in o.facts:
        print(f"    premise {fact}")
    print(f"    dump {o.dump_s:.1f}s, compare {o.compare_s:.1f}s ({len(o.judged)} runs)")


def totals(outcomes: Sequence[Outcome], label: str) -> str:
    judged = [j for o in outcomes for j in o.judged]
    faults = [j for j in judged if j.truth.faulty]
    clean = [j for j in judged if not j.truth.faulty and not j.report.error]
    kinds = sorted({j.truth.kind for j in faults})
    per_kind = ", ".join(
        f"{k} {sum(j.right for j in faults if j.truth.kind == k)}/{sum(j.truth.kind == k for j in faults)}"
        for k in kinds
    )
    failed = sum(bool(j.report.error) for j in judged)
    broken = [o.name for o in outcomes if o.problem or any(not f.ok for f in o.facts)]
    return (
        f"{label}: faults right {sum(j.right for j in faults)}/{len(faults)} ({per_kind}); "
        f"no-fault false culprits {sum(not j.right for j in clean)}/{len(clean)}; "
        f"report lines with NaN/Inf {sum(j.report.nan_lines for j in judged)}; "
        f"seconds {sum(o.dump_s + o.compare_s for o in outcomes):.0f}"
        + (f"; compare runs that failed {failed}" if failed else "")
        + (f"; BROKEN: {', '.join(broken)}" if broken else "")
    )


def list_scenarios(scenarios: Sequence[Training]) -> None:
    for s in scenarios:
        print(f"{s.name}\n    {s.what}")
        by_truth: dict[str, list[str]] = {}
        for (step, rank), truth in sorted(s.truths.items()):
            by_truth.setdefault(str(truth), []).append(f"{step}" + (f"/r{rank}" if len(s.ranks) > 1 else ""))
        for truth, where in by_truth.items():
            print(f"    step {','.join(where)}: {truth}")
        if s.overall is not None:
            print(f"    all steps and ranks: {s.overall}")


# --- main ----------------------------------------------------------------------------------------


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0], help="noise seeds (default: 0)")
    p.add_argument("--only", nargs="+", metavar="NAME", help="run these scenarios only")
    p.add_argument("--list", action="store_true", help="list the scenarios and their ground truth, then exit")
    p.add_argument(
        "--check", action="store_true", help="print each scenario's premise as read from its dumps"
    )
    p.add_argument("--keep", type=Path, metavar="DIR", help="keep the dumps under DIR/seedS/NAME/{npu,bench}")
    p.add_argument(
        "--extra",
        default="",
        metavar="ARGS",
        help='more arguments for every ptdbg-tui compare, e.g. --extra "--replay"',
    )
    p.add_argument("--jobs", type=int, default=1, help="scenarios in parallel processes (default: 1)")
    p.add_argument(
        "--reuse",
        action="store_true",
        help="with --keep: judge the dumps kept there by an earlier run instead of dumping again",
    )
    return p.parse_args(_extra_joined(sys.argv[1:] if argv is None else list(argv)))


def _extra_joined(argv: list[str]) -> list[str]:
    """``--extra "--replay"`` as ``--extra=--replay`` (argparse takes a value that starts with ``-``
    for an option)."""
    out = []
    items = iter(argv)
    for a in items:
        out.append(f"--extra={next(items, '')}" if a == "--extra" else a)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    unknown = [n for n in args.only or () if n not in SUITE]
    if unknown:
        print(f"unknown scenario(s): {', '.join(unknown)}; --list shows them", file=sys.stderr)
        return 0
    names = args.only or list(SUITE)
    if args.list:
        list_scenarios([SUITE[n] for n in names])
        return 0
    extra = shlex.split(args.extra)
    print(
        f"{len(names)} scenario(s), seeds {args.seeds}, jobs {args.jobs}"
        + (f", compare {' '.join(extra)}" if extra else "")
    )
    start = time.perf_counter()
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="ptdbg_div_") as tmp:
        base = args.keep or Path(tmp)
        for seed in args.seeds:
            runs = []
            for outcome in outcomes_in_order(
                names,
                seed,
                base / f"seed{seed}",
                extra,
                args.check,
                args.jobs,
                args.reuse and args.keep is not None,
            ):
                print_outcome(outcome)
                runs.append(outcome)
            print(totals(runs, f"\nseed {seed}"))
            outcomes += runs
    if len(args.seeds) > 1:
        print(totals(outcomes, f"\nall seeds ({len(args.seeds)})"))
    print(f"total {time.perf_counter() - start:.1f}s")
    if args.keep:
        print(
            f"dumps kept: ptdbg-tui compare {args.keep}/seedS/NAME/npu {args.keep}/seedS/NAME/bench --step S"
        )
    return 0


def outcomes_in_order(
    names: Sequence[str],
    seed: int,
    base: Path,
    extra: Sequence[str],
    check: bool,
    jobs: int,
    reuse: bool = False,
) -> Iterator[Outcome]:
    """Each scenario's outcome, in the order given; ``jobs`` > 1 runs them in spawned processes."""
    if jobs <= 1:
        for n in names:
            yield run_scenario(n, seed, base / n, extra, check, reuse)
        return
    with ProcessPoolExecutor(jobs, mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(run_scenario, n, seed, base / n, extra, check, reuse) for n in names]
        for f in futures:
            yield f.result()


if __name__ == "__main__":
    sys.exit(main())
