"""The diagnosis on real dump-tool dumps: the scenarios ``bench/msprobe_scenarios.py`` (msprobe) or
``bench/ptdbg_scenarios.py`` (the original ptdbg_ascend) dumped; any directory of that layout.

    python bench/msprobe_diagnosis.py DIR [--summary] [--only NAME ...]

For each ``DIR/NAME`` (``npu``, ``bench``, ``truth.json``), compares the pair with
``compare_dumps(npu, bench, jobs=1)`` (``--summary``: statistics mode, on the same tensor dumps) and
prints the ground truth (the tool's call names), our first suspect, right or wrong, the evidence, and
the original advisor's pick (the call of the first row whose ``Accuracy Reached or Not`` is No).
A fault scenario is right when the first suspect is a ground-truth call; a no-fault one when
nothing is named. For a wrong one, the top suspects and the verdicts on the ground-truth calls are
printed; for a no-fault one, the call that came closest to being named.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from diagnosis import Named, _fmt, _named, _short, advisor_pick, closest_of, suspects_of

from ptdbg_tui.engine.batch import compare_dumps

TOP = 3


@dataclass
class Result:
    name: str
    what: str
    truth: list[str]
    suspects: list[Named]
    closest: Named | None
    on_truth: list[Named]
    advisor: str | None
    seconds: float
    missing: list[str]

    @property
    def faulty(self) -> bool:
        return bool(self.truth)

    def right(self, pick: str | None) -> bool:
        return pick in self.truth if self.faulty else pick is None

    @property
    def ours(self) -> str | None:
        return self.suspects[0].call if self.suspects else None


def run_one(d: Path, summary: bool) -> Result:
    info = json.loads((d / "truth.json").read_text())
    start = time.perf_counter()
    (o,) = compare_dumps(d / "npu", d / "bench", jobs=1, summary=summary)
    calls = {row.npu.call for row in o.rows if row.npu is not None}
    truth = list(info["truth"])
    return Result(
        info["name"],
        info["what"],
        truth,
        suspects_of(o),
        closest_of(o),
        [_named(o.diagnosis.calls[c]) for c in truth if c in o.diagnosis.calls],
        advisor_pick(o.rows),
        time.perf_counter() - start,
        [c for c in truth if c not in calls],
    )


def mark(ok: bool) -> str:
    return "right" if ok else "WRONG"


def show(r: Result) -> None:
    score = ""
    if r.suspects:
        score = _fmt(r.suspects[0].score) + (f" +{len(r.suspects) - 1}" if len(r.suspects) > 1 else "")
    elif r.closest:
        score = f"({_fmt(r.closest.score)})"
    truth = " | ".join(r.truth) or "(no fault)"
    print(
        f"{r.name:30s} {_short(truth, 40):40s} {_short(r.ours, 40):40s} {score:>10s} "
        f"{mark(r.right(r.ours))}  "
        f"{_short(r.advisor, 40):40s} {mark(r.right(r.advisor))} {r.seconds:5.1f}s"
    )
    if r.missing:
        print(f"    ground truth not in the NPU dump: {', '.join(r.missing)}")
    if r.suspects and (r.right(r.ours) or not r.faulty):
        print(f"    evidence: {r.suspects[0].evidence}")
    if not r.right(r.ours):
        for i, s in enumerate(r.suspects[:TOP], 1):
            print(f"    {i}. {s.call} (score {s.score:.3g}): {s.evidence}")
        if len(r.suspects) > TOP:
            print(f"    ... {len(r.suspects) - TOP} more suspect(s)")
        for t in r.on_truth:
            print(f"    truth {t.call} (score {t.score:.3g}): {t.evidence}")
    if not r.faulty and r.closest is not None:
        closest = r.closest
        print(f"    closest: {closest.call} (score {closest.score:.3g}): {closest.evidence}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--summary", action="store_true", help="statistics mode (compare_dumps(summary=True))")
    ap.add_argument("--only", nargs="+", default=None)
    a = ap.parse_args()
    dirs = sorted(p.parent for p in a.dir.glob("*/truth.json") if a.only is None or p.parent.name in a.only)
    print(
        f"{'scenario':30s} {'ground truth':40s} {'ours (first suspect)':40s} {'score +more':>10s} {'':5s}  "
        f"{'advisor (first No row)':40s}"
    )
    results = []
    for d in dirs:
        r = run_one(d, a.summary)
        show(r)
        results.append(r)
    faults = [r for r in results if r.faulty]
    clean = [r for r in results if not r.faulty]
    mode = "statistics (--summary)" if a.summary else "tensor"
    print(
        f"\n{mode}: faults named right: ours {sum(r.right(r.ours) for r in faults)}/{len(faults)}, "
        f"advisor {sum(r.right(r.advisor) for r in faults)}/{len(faults)}; "
        f"no-fault runs with a false suspect: ours "
        f"{sum(not r.right(r.ours) for r in clean)}/{len(clean)}, "
        f"advisor {sum(not r.right(r.advisor) for r in clean)}/{len(clean)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
