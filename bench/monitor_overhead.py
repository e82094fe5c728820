"""Step time of a small GPT under the training monitor (``ptdbg-dump run --monitor --every 1``), as a
ratio to the unmonitored step of the same run.

    python bench/monitor_overhead.py [--device cpu|cuda] [--layers 4] [--width 256] [--seq 128]
        [--batch 8] [--rounds 7] [--steps 4] [--threads 1] [--msprobe PYTHON [--msprobe-config FILE]]

The monitor is installed as ``ptdbg-dump run`` installs it (the module names, the forward, backward
and optimizer hooks, one Arrow record batch written per step); the run manifest, written once at
the first steps, is left out. Unmonitored and monitored rounds take turns, so that load from other
processes falls on both alike; a round's figure is the median of its steps. Printed, for the wall
time and for the CPU time (all threads of the process: less disturbed by other processes' load on a
shared machine): each configuration's median step and range over rounds, and the ratio monitored /
unmonitored of the rounds' medians and minimums, with its range over rounds (each round against the
unmonitored round before it). Target (issue 30): at most 1.15x.

``--msprobe PYTHON`` then times msprobe's monitor (``TrainerMon`` of mindstudio-probe, which must
never be a dependency of ours: PYTHON is a separate virtual environment's interpreter that has it)
on the same step, in a child process of that interpreter. The child times its own unmonitored step
in turns with the monitored one, on two models built alike, and the ratio is taken there in the
same way. Its configuration, :data:`MSPROBE_CONFIG`, asks for what comes closest to ours at every
step (docs/benchmarks.md); ``--msprobe-config FILE`` gives another (JSON, msprobe's keys).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

#: msprobe's monitor set as close to ours as it allows: every module's forward statistics (it has
#: no output-only switch: inputs are reduced too), the gradients (before and after reduction), the
#: parameters before and after the step, Adam's moments (the update itself, ``ur_distribution``,
#: is refused in its CSV format), and its two alarms; written every step.
MSPROBE_CONFIG = {
    "targets": {},
    "all_xy": True,
    "xy_distribution": True,
    "forward_only": True,
    "wg_distribution": True,
    "param_distribution": True,
    "mv_distribution": True,
    "ops": ["norm", "mean", "max", "min"],
    "format": "csv",
    "step_interval": 1,
    "alert": {
        "rules": [
            {"rule_name": "AnomalyTurbulence", "args": {"threshold": 0.5}},
            {"rule_name": "AnomalyNan", "args": {"threshold": 1e10}},
        ]
    },
}


class Block(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.fc, self.act, self.out = nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in self.qkv(self.ln1(x)).split(c, -1))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.out(self.act(self.fc(self.ln2(x))))


class Gpt(nn.Module):
    def __init__(self, vocab: int, width: int, layers: int, seq: int) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, width), nn.Embedding(seq, width)
        self.blocks = nn.ModuleList(Block(width, 4) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(width), nn.Linear(width, vocab, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def make_step(
    args: argparse.Namespace, monitor: Callable[[nn.Module, torch.optim.Optimizer], None] | None = None
) -> Callable[[], None]:
    """A training step; ``monitor`` is given the model and optimizer before the first step."""
    torch.manual_seed(0)
    vocab = 512
    model = Gpt(vocab, args.width, args.layers, args.seq).to(args.device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    if monitor is not None:
        monitor(model, opt)
    tokens = torch.randint(0, vocab, (args.batch, args.seq + 1), device=args.device)

    def step() -> None:
        opt.zero_grad()
        logits = model(tokens[:, :-1])
        F.cross_entropy(logits.reshape(-1, vocab), tokens[:, 1:].reshape(-1)).backward()
        opt.step()
        if args.device == "cuda":
            torch.cuda.synchronize()

    return step


def timed(step: Callable[[], None], steps: int) -> tuple[float, float]:
    """The median wall and CPU (all threads of this process) time of a step."""
    wall, cpu = [], []
    for _ in range(steps):
        start, start_cpu = time.perf_counter(), time.process_time()
        step()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(wall), statistics.median(cpu)


def report(name: str, plain: list[float], monitored: list[float], under: str = "monitored --every 1") -> None:
    for label, times in (("unmonitored", plain), (under, monitored)):
        print(
            f"{name} {label:>20}: median {statistics.median(times) * 1e3:8.1f} ms/step "
            f"(range {min(times) * 1e3:.1f}-{max(times) * 1e3:.1f})"
        )
    ratios = [m / u for m, u in zip(monitored, plain, strict=True)]
    print(
        f"{name} ratio monitored/unmonitored: {statistics.median(monitored) / statistics.median(plain):.3f}x "
        f"of the medians, {min(monitored) / min(plain):.3f}x of the minimums; per round median "
        f"{statistics.median(ratios):.3f}x, range {min(ratios):.3f}-{max(ratios):.3f}x (target <= 1.15x)"
    )


def ours(args: argparse.Namespace) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """Rounds of the unmonitored step and of the step under our monitor, in turns, on one model."""
    from dumper.manifest import SeenModules
    from dumper.monitor import Monitor

    step = make_step(args)
    for _ in range(2):  # warm-up: allocator, kernels' first runs
        step()
    plain: list[tuple[float, float]] = []
    monitored: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            plain.append(timed(step, args.steps))
            modules = SeenModules()
            monitor = Monitor(Path(tmp) / f"round{r}", every=1, modules=modules)
            modules.install()
            monitor.install()
            try:
                step()  # its first step names the modules and allocates the kept parameters
                monitored.append(timed(step, args.steps))
            finally:
                monitor.remove()
                modules.remove()
    return plain, monitored


def msprobe_rounds(args: argparse.Namespace) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """Rounds of the unmonitored step and of the step under msprobe's ``TrainerMon``, in turns.

    ``TrainerMon`` patches its optimizer's ``step`` and cannot be taken off, so the unmonitored
    step is a second model built alike."""
    from msprobe.pytorch import TrainerMon

    config = Path(os.environ["MONITOR_OUTPUT_DIR"]) / "monitor_config.json"
    config.write_text(
        Path(args.msprobe_config).read_text() if args.msprobe_config else json.dumps(MSPROBE_CONFIG)
    )

    def install(model: nn.Module, opt: torch.optim.Optimizer) -> None:
        TrainerMon(str(config), params_have_main_grad=False).set_monitor(model, optimizer=opt)

    plain_step, monitored_step = make_step(args), make_step(args, install)
    for _ in range(2):
        plain_step()
        monitored_step()
    plain: list[tuple[float, float]] = []
    monitored: list[tuple[float, float]] = []
    for _ in range(args.rounds):
        plain.append(timed(plain_step, args.steps))
        monitored.append(timed(monitored_step, args.steps))
    return plain, monitored


def msprobe_child(
    args: argparse.Namespace, python: str
) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """:func:`msprobe_rounds` run by ``python`` (the interpreter that has msprobe), read back as JSON."""
    argv = [python, __file__, "--as-msprobe"]
    for name in ("device", "layers", "width", "seq", "batch", "rounds", "steps", "threads"):
        argv += [f"--{name}", str(getattr(args, name))]
    if args.msprobe_config:
        argv += ["--msprobe-config", str(Path(args.msprobe_config).resolve())]
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run(
            argv, env={**os.environ, "MONITOR_OUTPUT_DIR": tmp}, capture_output=True, text=True, check=False
        )
    if done.returncode != 0:
        sys.exit(f"msprobe's run failed ({done.returncode}):\n{done.stderr[-4000:]}")
    plain, monitored = json.loads(done.stdout.splitlines()[-1])
    return [tuple(t) for t in plain], [tuple(t) for t in monitored]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument(
        "--msprobe", metavar="PYTHON", help="also time msprobe's TrainerMon, run by this interpreter"
    )
    p.add_argument(
        "--msprobe-config", metavar="FILE", help="msprobe's configuration instead of MSPROBE_CONFIG"
    )
    p.add_argument("--as-msprobe", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    if args.as_msprobe:
        print(json.dumps(msprobe_rounds(args)))
        return
    plain, monitored = ours(args)
    print(
        f"device {args.device}, {args.layers} layers of width {args.width}, batch {args.batch}x{args.seq}, "
        f"{args.threads} threads, {args.rounds} rounds of {args.steps} steps"
    )
    report("wall", [w for w, _ in plain], [w for w, _ in monitored])
    report("cpu ", [c for _, c in plain], [c for _, c in monitored])
    if args.msprobe:
        plain, monitored = msprobe_child(args, args.msprobe)
        report("msprobe wall", [w for w, _ in plain], [w for w, _ in monitored], "TrainerMon every step")
        report("msprobe cpu ", [c for _, c in plain], [c for _, c in monitored], "TrainerMon every step")


if __name__ == "__main__":
    main()
