"""How often does the diagnosis name the faulty call? Fault scenarios with ground truth.

    python bench/diagnosis.py [--seeds 0 1 2] [--heldout | --heldout2] [--only NAME ...] [--keep DIR] [--list]

Builds every scenario of ``bench/diagnosis_scenarios`` (a real torch model dumped twice on CPU
with the project's dumper: bench, and NPU = bench + 1e-6 noise [+ fp16/bf16] + one injected
fault), compares each pair with ``compare_dumps`` (default match mode) and prints, per scenario,
the ground truth, our first suspect and the original advisor's pick (the call of the first row
whose ``Accuracy Reached or Not`` is ``No``), each right or wrong. A fault scenario is right when
the first suspect is a ground-truth call; a no-fault scenario when nothing is named. For wrong
ones the top three suspects are printed with their evidence; for a no-fault one, the call that came
closest to being named (the highest score of any call judged: 1 names it). ``--seeds`` repeats everything with
other noise seeds; ``--keep DIR`` keeps the dumps (``ptdbg-tui DIR/seedS/NAME/npu DIR/seedS/NAME/bench``).
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch
from diagnosis_scenarios import SCENARIOS, Scenario, dump_pair
from diagnosis_scenarios.heldout import HELDOUT
from diagnosis_scenarios.heldout2 import HELDOUT2

from ptdbg_tui.compare.diagnosis.findings import CallEvidence
from ptdbg_tui.compare.metrics.cells import NO
from ptdbg_tui.compare.model import Row
from ptdbg_tui.compare.report.words import call_evidence_text, evidence_text
from ptdbg_tui.engine.batch import PairOutcome, compare_dumps

TOP = 3  # suspects shown for a wrong answer
NONE = "-"


@dataclass(frozen=True)
class Named:
    """One suspect as this benchmark reports it."""

    call: str
    score: float
    evidence: str


@dataclass
class Verdict:
    """One scenario run with one seed."""

    scenario: Scenario
    seed: int
    suspects: list[Named]
    closest: Named | None  # the call judged with the highest score, named or not
    truth: list[Named]  # the verdicts on the ground-truth calls
    advisor: str | None
    seconds: float
    problem: str = ""  # the scenario itself is broken (its ground truth is not in the dump)

    @property
    def ours(self) -> str | None:
        return self.suspects[0].call if self.suspects else None

    def right(self, pick: str | None) -> bool:
        if not self.scenario.faulty:
            return pick is None
        return pick in self.scenario.truth

    @property
    def ours_right(self) -> bool:
        return self.right(self.ours)

    @property
    def advisor_right(self) -> bool:
        return self.right(self.advisor)


def suspects_of(outcome: PairOutcome) -> list[Named]:
    return [
        Named(s.call, s.score, f"[{s.kind}] {evidence_text(s.evidence)}") for s in outcome.diagnosis.suspects
    ]


def _named(evidence: CallEvidence) -> Named:
    return Named(
        evidence.call,
        evidence.judgement.score if evidence.judgement else math.nan,
        call_evidence_text(evidence),
    )


def closest_of(outcome: PairOutcome) -> Named | None:
    """The call whose score is highest (a no-fault run's margin: how near the rule came to naming it)."""
    scored = [
        _named(e)
        for e in outcome.diagnosis.calls.values()
        if e.judgement is not None and not math.isnan(e.judgement.score)
    ]
    return max(scored, key=lambda n: n.score, default=None)


def truth_of(outcome: PairOutcome, scenario: Scenario) -> list[Named]:
    calls = outcome.diagnosis.calls
    return [_named(calls[c]) for c in sorted(scenario.truth) if c in calls]


def advisor_pick(rows: Sequence[Row]) -> str | None:
    """The original advisor (docs/compare.md#the-advisor): the call of the first row, in CSV order, whose
    ``Accuracy Reached or Not`` is ``No``."""
    return next((r.record.call for r in rows if r.result is not None and r.result.accuracy == NO), None)


def run_one(scenario: Scenario, seed: int, root: Path, summary: bool = False) -> Verdict:
    start = time.perf_counter()
    npu, bench = dump_pair(scenario, root, seed)
    (outcome,) = compare_dumps(npu, bench, jobs=1, summary=summary)
    calls = {row.npu.call for row in outcome.rows if row.npu is not None}
    missing = sorted(c for c in scenario.truth if c not in calls)
    problem = f"ground truth {', '.join(missing)} not in the NPU dump" if missing else ""
    return Verdict(
        scenario,
        seed,
        suspects_of(outcome),
        closest_of(outcome),
        truth_of(outcome, scenario),
        advisor_pick(outcome.rows),
        time.perf_counter() - start,
        problem,
    )


def _mark(ok: bool) -> str:
    return "right" if ok else "WRONG"


def _short(call: str | None, width: int) -> str:
    text = call or NONE
    return text if len(text) <= width else text[: width - 1] + "…"


def _fmt(score: float) -> str:
    return "inf" if math.isinf(score) else f"{score:.3g}"


def _score(v: Verdict) -> str:
    """The first suspect's score (the margin: times the allowed error) and how many more there are;
    with none named, the highest score of any call in parentheses."""
    if not v.suspects:
        return f"({_fmt(v.closest.score)})" if v.closest else ""
    return _fmt(v.suspects[0].score) + (f" +{len(v.suspects) - 1}" if len(v.suspects) > 1 else "")


def print_verdict(v: Verdict) -> None:
    truth = " | ".join(sorted(v.scenario.truth)) or "(no fault)"
    print(
        f"{v.scenario.name:40s} {_short(truth, 36):36s} {_short(v.ours, 36):36s} {_score(v):>11s} "
        f"{_mark(v.ours_right)}  {_short(v.advisor, 36):36s} {_mark(v.advisor_right)}  {v.seconds:4.1f}s"
    )
    if v.problem:
        print(f"    BROKEN SCENARIO: {v.problem}")
    if not v.ours_right:
        for i, s in enumerate(v.suspects[:TOP], 1):
            print(f"    {i}. {s.call} (score {s.score:.3g}): {s.evidence}")
        if len(v.suspects) > TOP:
            print(f"    ... {len(v.suspects) - TOP} more suspect(s)")
    if not v.ours_right:
        for t in v.truth:
            print(f"    truth {t.call} (score {t.score:.3g}): {t.evidence}")
    if not v.scenario.faulty and v.closest is not None:
        closest = v.closest
        print(f"    closest: {closest.call} (score {closest.score:.3g}): {closest.evidence}")


def header() -> None:
    print(
        f"{'scenario':40s} {'ground truth':36s} {'ours (first suspect)':36s} {'score +more':>11s} "
        f"{'':5s}  {'advisor (first No row)':36s}"
    )


def summary(verdicts: Sequence[Verdict], label: str) -> str:
    faults = [v for v in verdicts if v.scenario.faulty]
    clean = [v for v in verdicts if not v.scenario.faulty]
    ours = sum(v.ours_right for v in faults)
    adv = sum(v.advisor_right for v in faults)
    ours_false = sum(not v.ours_right for v in clean)
    adv_false = sum(not v.advisor_right for v in clean)
    return (
        f"{label}: faults named right: ours {ours}/{len(faults)}, advisor {adv}/{len(faults)}; "
        f"no-fault runs with a false suspect: ours {ours_false}/{len(clean)}, "
        f"advisor {adv_false}/{len(clean)}"
    )


def closest_table(verdicts: Sequence[Verdict], seeds: Sequence[int]) -> None:
    """Per no-fault scenario, the highest score of any call for each seed (1 names it)."""
    clean = [v for v in verdicts if not v.scenario.faulty]
    if not clean:
        return
    print(f"\n{'no-fault: highest call score per seed':40s} " + " ".join(f"{f'seed {s}':>8s}" for s in seeds))
    by_name: dict[str, dict[int, Verdict]] = {}
    for v in clean:
        by_name.setdefault(v.scenario.name, {})[v.seed] = v
    for name, runs in by_name.items():
        cells = (_fmt(c.score) if (c := runs[s].closest) else NONE for s in seeds)
        print(f"{name:40s} " + " ".join(f"{c:>8s}" for c in cells))


def matrix(verdicts: Sequence[Verdict], seeds: Sequence[int]) -> None:
    """Per scenario, right (+) or wrong (.) for each seed: ours | advisor."""
    print(f"\n{'per seed (+ right, . wrong)':40s} {'ours':>{len(seeds) + 2}s}   advisor")
    by_name: dict[str, dict[int, Verdict]] = {}
    for v in verdicts:
        by_name.setdefault(v.scenario.name, {})[v.seed] = v
    for name, runs in by_name.items():
        ours = "".join("+" if runs[s].ours_right else "." for s in seeds)
        adv = "".join("+" if runs[s].advisor_right else "." for s in seeds)
        print(f"{name:40s} {ours:>{len(seeds) + 2}s}   {adv}")


def list_scenarios(scenarios: Sequence[Scenario]) -> None:
    for s in scenarios:
        truth = ", ".join(sorted(s.truth)) or "no fault: nothing to name"
        print(f"{s.name}\n    truth: {truth}\n    {s.what}")


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0], help="noise seeds (default: 0)")
    p.add_argument("--only", nargs="+", metavar="NAME", help="run these scenarios only")
    p.add_argument("--keep", type=Path, metavar="DIR", help="keep the dumps under DIR/seedS/NAME/{npu,bench}")
    p.add_argument(
        "--heldout",
        action="store_true",
        help="the held-out scenarios (diagnosis_scenarios/heldout.py) instead of the library",
    )
    p.add_argument(
        "--heldout2",
        action="store_true",
        help="the second held-out set (diagnosis_scenarios/heldout2.py) instead of the library",
    )
    p.add_argument("--list", action="store_true", help="list the scenarios and their ground truth, then exit")
    p.add_argument(
        "--summary",
        action="store_true",
        help="compare the recorded statistics only, as for a summary_only dump",
    )
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    pool = HELDOUT2 if args.heldout2 else HELDOUT if args.heldout else SCENARIOS
    unknown = [n for n in args.only or () if n not in pool]
    if unknown:
        print(f"unknown scenario(s): {', '.join(unknown)}; --list shows them", file=sys.stderr)
        return 2
    scenarios = [pool[n] for n in args.only] if args.only else list(pool.values())
    if args.list:
        list_scenarios(scenarios)
        return 0
    torch.set_num_threads(1)
    print(f"{len(scenarios)} scenario(s), seeds {args.seeds}")
    verdicts: list[Verdict] = []
    start = time.perf_counter()
    for seed in args.seeds:
        print(f"\n--- seed {seed} ---")
        header()
        runs = []
        for s in scenarios:
            with tempfile.TemporaryDirectory(prefix="ptdbg_diag_") as tmp:
                root = args.keep / f"seed{seed}" / s.name if args.keep else Path(tmp)
                v = run_one(s, seed, root, args.summary)
            print_verdict(v)
            runs.append(v)
        print(summary(runs, f"seed {seed}"))
        verdicts += runs
    closest_table(verdicts, args.seeds)
    if len(args.seeds) > 1:
        matrix(verdicts, args.seeds)
        print(summary(verdicts, f"\nall seeds ({len(args.seeds)})"))
    print(f"total {time.perf_counter() - start:.1f}s")
    if args.keep:
        print(f"dumps kept: ptdbg-tui {args.keep}/seedS/NAME/npu {args.keep}/seedS/NAME/bench")
    return 1 if any(v.problem for v in verdicts) else 0


if __name__ == "__main__":
    sys.exit(main())
