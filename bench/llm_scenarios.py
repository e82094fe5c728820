"""Is the default verdict the true one on ordinary LLM training? A small GPT (RMSNorm, a qkv linear with
bias, causal SDPA, a GELU MLP) trained three steps by Adam or AdamW on random tokens
(``diagnosis_scenarios/llm_script.py``), each side dumped as a user dumps it, ``ptdbg-dump run … --step 0
1 2``, and compared as a user compares it.

    python bench/llm_scenarios.py [--only NAME ...] [--keep DIR] [--list] [--autocast] [--summary]

Each scenario is compared over the whole run and at ``--step 1``, each four ways: as it is (which replays
the suspects whose inputs differ), with ``--no-replay``, with ``--replay`` (every call up to the first
failing row), and by the reader alone (a process where ``import torch`` fails, as on a reader-only
install). ``--autocast``: both sides train under bf16 autocast; ``--summary``: statistics dumps
(``--summary-only``), compared as they are and by the reader. The culprit must be right every time: a
kernel fault (the GELU of ``blocks.1.mlp`` 2% off from step 1, forward or backward) named by its call, as
are three calls only one run makes at every step (the NPU's; the bench's: error entering where the NPU's
projection reads what they change); a no-fault run (the NPU's own GELU kernel, rounded otherwise) naming
nothing, with the all-clear; runs whose models or learning rates differ naming no call inside what
differs, with a finding that says the runs differ. The attention's key bias gets a gradient that is zero
in exact arithmetic: both sides hold rounding noise there, which Adam turns into steps of full size
(``docs/diagnosis.md``). Exit status 0 always: a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from diagnosis_scenarios.scripts import command

SCRIPT = Path(__file__).parent / "diagnosis_scenarios" / "llm_script.py"
STEPS = ("0", "1", "2")

#: Runs ``ptdbg-tui`` (``sys.argv[1:]``) in a process where ``import torch`` fails: the reader-only
#: install.
READER_ONLY = """
import runpy, sys
class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r} (reader-only)")
sys.meta_path.insert(0, NoTorch())
sys.argv = ["ptdbg-tui", *sys.argv[1:]]
runpy.run_module("ptdbg_tui", run_name="__main__")
"""

GELU_FORWARD, GELU_BACKWARD = "Functional_gelu_1_forward", "Functional_gelu_1_backward"
KERNEL, NONE, MODELS, LR = "kernel", "none", "models differ", "lr differs"


@dataclass(frozen=True)
class Scenario:
    name: str
    what: str
    npu: tuple[str, ...]  # llm_script.py's arguments on each side (besides --side)
    bench: tuple[str, ...]
    kind: str  # KERNEL, NONE, MODELS, LR
    call: str = ""  # KERNEL: the call the Culprit line must name (a regular expression)


SCENARIOS = (
    [
        Scenario(
            f"{opt}_{fault}",
            f"{opt}, the GELU of blocks.1.mlp 2% off in its {way} from step 1",
            ("--optimizer", opt, "--fault", fault),
            ("--optimizer", opt),
            KERNEL,
            call,
        )
        for opt in ("adamw", "adam")
        for fault, way, call in (
            ("gelu_forward", "forward", GELU_FORWARD),
            ("gelu_backward", "backward", GELU_BACKWARD),
        )
    ]
    + [
        Scenario(
            f"{opt}_off",
            f"{opt}, no fault: the NPU's GELU rounds otherwise",
            ("--optimizer", opt),
            ("--optimizer", opt),
            NONE,
        )
        for opt in ("adamw", "adam")
    ]
    + [
        Scenario(
            "adamw_update",
            "adamw, the optimizer's step (addcdiv_) 2% too large from step 1",
            ("--optimizer", "adamw", "--fault", "update"),
            ("--optimizer", "adamw"),
            KERNEL,
            r"Tensor_addcdiv__\d+_forward",
        ),
        Scenario(
            "adamw_npu_extra",
            "adamw at lr 5e-3, the NPU script adds 0.01 * tanh of each attention's output before its "
            "projection, three calls the bench does not make, at every step (at steps 1 and 2 the drift "
            "they left at step 0 hid them: an all-clear)",
            ("--optimizer", "adamw", "--lr", "5e-3", "--fault", "extra", "--fault-from", "0"),
            ("--optimizer", "adamw", "--lr", "5e-3"),
            KERNEL,
            r"Torch_addcmul_0_forward",
        ),
        Scenario(
            "adamw_bench_extra",
            "adamw, the bench script adds those three calls, which the NPU script lacks",
            ("--optimizer", "adamw", "--lr", "5e-3"),
            ("--optimizer", "adamw", "--lr", "5e-3", "--fault", "extra", "--fault-from", "0"),
            KERNEL,
            r"Functional_linear_1_forward",
        ),
        Scenario(
            "adamw_off_noise",
            "no fault: the NPU's GELU has 1e-6 relative noise",
            ("--optimizer", "adamw", "--kernel", "noise"),
            ("--optimizer", "adamw"),
            NONE,
        ),
        Scenario(
            "adamw_models_differ",
            "no fault, but the bench model has 3 blocks where the NPU's has 2",
            ("--optimizer", "adamw"),
            ("--optimizer", "adamw", "--blocks", "3"),
            MODELS,
        ),
        Scenario(
            "adamw_lr_differs",
            "no fault, but the NPU script trains at lr 2e-3 where the bench's uses 1e-3",
            ("--optimizer", "adamw", "--lr", "2e-3"),
            ("--optimizer", "adamw"),
            LR,
        ),
    ]
)
BY_NAME = {s.name: s for s in SCENARIOS}
WAYS = {"default": (), "no-replay": ("--no-replay",), "replay": ("--replay",), "reader": ()}


def dump(root: Path, side: str, args: Sequence[str], options: Sequence[str] = ()) -> Path:
    """One side dumped by ``ptdbg-dump run``, once per set of arguments (the bench runs repeat);
    ``options``: the dumper's own (``--summary-only``)."""
    path = root / (side + "_" + ("_".join(a.lstrip("-") for a in (*options, *args)) or "default"))
    if (path / "done").is_file():
        return path
    cmd = [*command("ptdbg-dump", "dumper.cli"), "run", str(SCRIPT), "--dump-path", str(path / "dump")]
    cmd += ["--step", *STEPS, *options, "--", "--side", side, *args]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    (path / "done").write_text("")
    return path


@dataclass(frozen=True)
class Judged:
    where: str  # "all" or "step 1"
    way: str  # default (replays its suspects), no-replay, replay (every call), reader
    culprit: str | None  # the first Culprit line
    stdout: str
    error: str
    right: bool


def compare(npu: Path, bench: Path, out: Path, step: str | None, way: str) -> tuple[str, str]:
    """``ptdbg-tui compare`` as a user runs it (``reader``: where torch cannot be imported)."""
    exe = [sys.executable, "-c", READER_ONLY] if way == "reader" else command("ptdbg-tui", "ptdbg_tui")
    cmd = [*exe, "compare", str(npu / "dump"), str(bench / "dump"), "-o", str(out), "--no-progress"]
    cmd += ["--step", step] if step is not None else []
    done = subprocess.run([*cmd, *WAYS[way]], capture_output=True, text=True)
    error = "" if done.returncode == 0 else (done.stderr.strip().splitlines() or ["?"])[-1]
    return done.stdout, error


CULPRIT = re.compile(r"^\s*Culprit: (\S+)(.*)$", re.MULTILINE)
ALL_CLEAR = "No operator introduces an error beyond rounding"
#: What a finding that the runs differ says, by the scenario's kind.
DIFFER_WORDS = {
    MODELS: re.compile(r"models? differ", re.I),
    LR: re.compile(r"\blr\b|learning rate|value: ", re.I),
}


def right(s: Scenario, stdout: str, error: str) -> bool:
    if error:
        return False
    culprits = CULPRIT.findall(stdout)
    if s.kind == KERNEL:
        return bool(culprits) and re.fullmatch(s.call, culprits[0][0]) is not None
    if s.kind == NONE:
        return not culprits and ALL_CLEAR in stdout
    words = DIFFER_WORDS[s.kind]
    said = any(words.search(line) for line in stdout.splitlines() if "Culprit:" in line or "differ" in line)
    kernels = [c for c in culprits if "introduces error" in c[1] or "parameters differ" in c[1]]
    return said and not kernels


def run(s: Scenario, root: Path, script: Sequence[str] = (), summary: bool = False) -> list[Judged]:
    """``script``: arguments both sides' scripts add (``--autocast``); ``summary``: statistics dumps,
    compared by default and by the reader (nothing to replay)."""
    options = ("--summary-only",) if summary else ()
    npu = dump(root, "npu", (*s.npu, *script), options)
    bench = dump(root, "bench", (*s.bench, *script), options)
    out = []
    for step in (None, "1"):
        for way in ("default", "reader") if summary else WAYS:
            stdout, error = compare(npu, bench, root / "reports" / s.name, step, way)
            culprit = next(iter(CULPRIT.findall(stdout)), None)
            line = f"{culprit[0]}{culprit[1]}" if culprit else None
            where = "all" if step is None else f"step {step}"
            out.append(Judged(where, way, line, stdout, error, right(s, stdout, error)))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", nargs="+", metavar="NAME", help="run these scenarios only")
    p.add_argument("--keep", type=Path, metavar="DIR", help="keep the dumps and reports under DIR")
    p.add_argument("--list", action="store_true", help="list the scenarios, then exit")
    p.add_argument("--verbose", action="store_true", help="print every report")
    p.add_argument("--autocast", action="store_true", help="both sides train under bf16 autocast")
    p.add_argument("--summary", action="store_true", help="statistics dumps (--summary-only)")
    args = p.parse_args(argv)
    names = args.only or list(BY_NAME)
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        print(f"unknown scenario(s): {', '.join(unknown)}; --list shows them", file=sys.stderr)
        return 0
    if args.list:
        for n in names:
            s = BY_NAME[n]
            print(f"{n}: {s.what}\n    truth: {s.kind} {s.call}")
        return 0
    start = time.perf_counter()
    totals: dict[str, list[bool]] = {}
    with tempfile.TemporaryDirectory(prefix="ptdbg_llm_") as tmp:
        root = args.keep or Path(tmp)
        for n in names:
            s = BY_NAME[n]
            print(f"\n{n}: {s.what} (truth: {s.kind}{' ' + s.call if s.call else ''})")
            try:
                judged = run(s, root, ("--autocast",) if args.autocast else (), args.summary)
            except RuntimeError as e:
                print(f"    BROKEN SCENARIO: {e}")
                continue
            for j in judged:
                mark = "right" if j.right else "WRONG"
                answer = (j.error and f"(compare failed: {j.error})") or j.culprit or "-"
                print(f"  {j.where:>6s} {j.way:6s} {answer[:110]:110s} {mark}")
                if args.verbose or (not j.right and not j.error):
                    print("    " + "\n    ".join(j.stdout.strip().splitlines()[:12]))
            for j in judged:
                totals.setdefault(j.way, []).append(j.right)
    print()
    for way, marks in totals.items():
        print(f"{way:>9s}: {sum(marks)}/{len(marks)} judgements right")
    every = [m for marks in totals.values() for m in marks]
    print(f"{'in all':>9s}: {sum(every)}/{len(every)} judgements right")
    print(f"total {time.perf_counter() - start:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
