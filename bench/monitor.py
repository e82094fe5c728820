"""The training monitor's acceptance (issue 30): does ``ptdbg-tui monitor`` name the first divergent
step and module of two trainings, and nothing where they differ by rounding only?

    python bench/monitor.py [--steps 300] [--seed 0] [--only FAULT ...] [--keep DIR [--reuse]] [--jobs 2]

Each pair trains ``bench/monitor_job.py`` (a 4-layer GPT, tiny widths, on CPU) twice, as a user runs
it: ``ptdbg-dump run bench/monitor_job.py --monitor DIR -- npu|bench FAULT``. The NPU side does the
fault; the bench side never does. Then ``ptdbg-tui monitor NPU BENCH`` reads both folders. Printed: a
row per pair (the issue's seven, and two of its faults again on top of the noise pair's rounding
noise: the truth, the first divergent step and module found, the manifest's first difference,
the NaN origin, right or wrong, seconds), then the totals: fault pairs exact (step and module both
right), no-fault pairs with something named. The manifest must name the lr and data differences
first (pairs ``lr`` and ``data``). Exit status 1 on any miss: this benchmark is the acceptance.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ptdbg_tui.cli import main as tui_main  # noqa: E402
from ptdbg_tui.compare.monitor import Phase, analyse  # noqa: E402
from ptdbg_tui.compare.report.monitor_words import where_text  # noqa: E402
from ptdbg_tui.compare.report.words import differences_text  # noqa: E402

JOB = ROOT / "bench" / "monitor_job.py"


@dataclass(frozen=True)
class Truth:
    """A pair's ground truth: the first divergent step and where (None: nothing may be named), the
    words the manifest's report must start with, and the NaN origin's module."""

    step: int | None = None
    phase: Phase | None = None
    module: str = ""
    manifest: str = ""
    nan_module: str = ""


PAIRS = {
    "kernel": Truth(180, Phase.FORWARD, "blocks.2.mlp.gelu"),
    "attn_backward": Truth(50, Phase.BACKWARD, "blocks.1.attn"),
    "lr": Truth(100, Phase.HYPERPARAMETER, "", manifest="step_size"),
    "data": Truth(0, Phase.DATA, "wte", manifest="batch"),
    "nan": Truth(120, Phase.FORWARD, "blocks.1.mlp.c_fc", nan_module="blocks.1.mlp.c_fc"),
    "noise": Truth(),
    "bf16": Truth(),
    # the faults again on top of the rounding noise, grown chaotically by the time they start
    "kernel+noise": Truth(180, Phase.FORWARD, "blocks.2.mlp.gelu"),
    "attn_backward+noise": Truth(50, Phase.BACKWARD, "blocks.1.attn"),
}


def train(folder: Path, side: str, fault: str, steps: int, seed: int) -> None:
    """One side, as a user runs it (the monitor's own command line, in a process of its own)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    cmd = [sys.executable, "-m", "dumper.cli", "run", str(JOB), "--monitor", str(folder)]
    cmd += ["--", side, fault, "--steps", str(steps), "--seed", str(seed)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT, check=False)
    if done.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-3000:]}")


def judge(fault: str, root: Path) -> tuple[bool, list[str]]:
    """Whether the analysis of a pair is right, and the table's cells."""
    truth = PAIRS[fault]
    a = analyse(root / fault / "npu", root / fault / "bench")
    d = a.first
    found = "nothing" if d is None else f"{d.step}, {where_text(d)} ({d.phase})"
    manifest = differences_text(a.manifest)
    nan = next((f for r in a.ranks for f in r.nonfinite if f.side == "npu"), None)
    if truth.step is None:
        right = d is None and not manifest and nan is None
    else:
        right = (
            d is not None
            and (d.step, d.phase, d.module) == (truth.step, truth.phase, truth.module)
            and manifest.startswith(truth.manifest)
            and (not truth.manifest or bool(manifest))
            and (nan.module if nan is not None else "") == truth.nan_module
        )
    want = (
        "nothing" if truth.step is None else f"{truth.step}, {truth.module or 'param group'} ({truth.phase})"
    )
    origin = "-" if nan is None else f"step {nan.step} {nan.module}"
    return right, [fault, want, found, manifest[:40] or "-", origin, "right" if right else "WRONG"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument(
        "--seed", type=int, default=0, help="the model's initialisation and the corpus (default 0)"
    )
    p.add_argument("--only", nargs="*", choices=tuple(PAIRS), default=None)
    p.add_argument("--keep", type=Path, default=None, help="train into this folder and keep it")
    p.add_argument("--jobs", type=int, default=2, help="trainings at once (default 2)")
    p.add_argument("--reuse", action="store_true", help="with --keep: analyse the folders already there")
    args = p.parse_args()
    faults = args.only or list(PAIRS)
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        start = time.perf_counter()
        if not args.reuse:
            with ThreadPoolExecutor(max(1, args.jobs)) as pool:
                runs = [
                    pool.submit(train, root / f / side, side, f, args.steps, args.seed)
                    for f in faults
                    for side in ("npu", "bench")
                ]
                for run in runs:
                    run.result()
        trained = time.perf_counter() - start
        rows, misses = [], 0
        for fault in faults:
            t0 = time.perf_counter()
            right, cells = judge(fault, root)
            rows.append([*cells, f"{time.perf_counter() - t0:.1f}"])
            misses += not right
        head = ["pair", "truth", "first divergence found", "manifest first", "NaN origin", "", "s"]
        widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
        for r in [head, *rows]:
            print("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)))
        faulty = [f for f in faults if PAIRS[f].step is not None]
        clean = [f for f in faults if PAIRS[f].step is None]
        exact = sum(r[-2] == "right" for r, f in zip(rows, faults, strict=True) if f in faulty)
        false = sum(r[-2] != "right" for r, f in zip(rows, faults, strict=True) if f in clean)
        print(
            f"fault pairs exact: {exact}/{len(faulty)}; no-fault pairs with something named: "
            f"{false}/{len(clean)}; trained {len(faults) * 2} runs of {args.steps} steps in {trained:.0f} s"
        )
        if faults and not args.reuse:  # the CLI on the first pair, as a user reads it
            tui_main(["monitor", str(root / faults[0] / "npu"), str(root / faults[0] / "bench")])
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
