"""Step time of a small CNN + LSTM under the dumper, as ratios to the undumped step, and against the
original ptdbg_ascend dumping the same step in the same run.

    python bench/dump_overhead.py [--device cpu|cuda] [--batch 96] [--steps 8] [--threads 2]
        [--dir D] [--original SRC]

Timed in the same run: no dumping, ours with ``summary_only`` (pkl only) and with full npy dumping
(api_stack mode, the call sidecar included), and, when the original is importable (``--original``
names its ``debug/accuracy_tools/ptdbg_ascend/src/python`` folder, with the ``common/version.py``
its setup.py would write; or it is on PYTHONPATH), the original in the same two configurations.
The original patches torch for good when it starts, so each of its configurations runs in a child
process of its own, building the same model and batch; the parent tells it when to run a step.
A dumped step includes ``stop()``, i.e. waiting until everything is written. The configurations
take turns, round after round, so that load from other processes falls on all of them alike.
Printed: the median and the range over rounds of the wall and CPU time per step (CPU: all threads
of the configuration's process, writer threads included); the ratio to the undumped step of the
medians, of the minimums (the rounds least disturbed by other load) and per round; and our
overhead (wall ratio - 1) as a fraction of the original's, by the same three measures.
Targets: ours summary_only <= 2x, full npy <= 4x; our overhead <= 1/5 of the original's.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dumper import PrecisionDebugger

ORIGINAL = "ptdbg_ascend"


class CnnLstm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
        )
        self.lstm = nn.LSTM(32 * 8, 64, batch_first=True)
        self.head = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = self.features(x)  # (b, 32, 8, 8)
        seq = f.permute(0, 3, 1, 2).flatten(2)  # (b, 8, 256): one step per column
        out, _ = self.lstm(seq)
        return self.head(out[:, -1])


def make_step(device: str, batch: int) -> Callable[[], None]:
    torch.manual_seed(0)
    model = CnnLstm().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(batch, 3, 32, 32, device=device)
    y = torch.randint(0, 10, (batch,), device=device)

    def step() -> None:
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
        if device == "cuda":
            torch.cuda.synchronize()

    return step


def timed(step: Callable[[], None], debugger: Any) -> tuple[float, float]:
    """Wall and process CPU seconds of one step (with start/stop around it when dumping)."""
    w0, c0 = time.perf_counter(), time.process_time()
    if debugger is not None:
        debugger.start()
    step()
    if debugger is not None:
        debugger.stop()
    return time.perf_counter() - w0, time.process_time() - c0


@dataclass
class Config:
    """One configuration: run in this process (``debugger``), or in a child (``child``)."""

    name: str
    debugger: Any = None
    child: subprocess.Popen[str] | None = None
    results: IO[str] | None = None
    times: list[tuple[float, float]] = field(default_factory=list)

    def run(self, step: Callable[[], None]) -> None:
        if self.child is None:
            self.times.append(timed(step, self.debugger))
            return
        assert self.child.stdin is not None and self.results is not None
        self.child.stdin.write("go\n")
        self.child.stdin.flush()
        line = self.results.readline()
        if not line:
            raise RuntimeError(f"{self.name}: the child process ended; see its log")
        wall, cpu = map(float, line.split())
        self.times.append((wall, cpu))

    def close(self) -> None:
        if self.child is not None:
            if self.child.stdin is not None:
                self.child.stdin.close()
            self.child.wait(60)


def _child(kind: str, args: argparse.Namespace) -> None:
    """A child process: the original dumping (``original-full`` / ``original-summary``), one timed
    step per ``go`` line on stdin, its times written to fd ``--results``."""
    import ptdbg_ascend  # seeds every generator: the model is built after it, under manual_seed(0)

    torch.set_num_threads(args.threads)
    step = make_step(args.device, args.batch)
    debugger = ptdbg_ascend.PrecisionDebugger(dump_path=args.dir, hook_name="dump")
    debugger.configure_hook(mode="api_stack", summary_only=kind == "original-summary")
    with os.fdopen(args.results, "w") as out:
        timed(step, debugger)  # warm-up
        out.write("ready\n")
        out.flush()
        for _ in sys.stdin:
            wall, cpu = timed(step, debugger)
            out.write(f"{wall} {cpu}\n")
            out.flush()


def _spawn(kind: str, args: argparse.Namespace, work: Path, original: str | None) -> Config:
    (work / kind).mkdir()
    read_fd, write_fd = os.pipe()
    env = dict(os.environ)
    if original:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (original, env.get("PYTHONPATH")) if p)
    log = open(work / f"{kind}.log", "w")  # noqa: SIM115 (the child writes it until it ends)
    child = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--child",
            kind,
            "--results",
            str(write_fd),
            "--dir",
            str(work / kind),
            "--device",
            args.device,
            "--batch",
            str(args.batch),
            "--threads",
            str(args.threads),
        ],
        stdin=subprocess.PIPE,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        pass_fds=(write_fd,),
    )
    os.close(write_fd)
    results = os.fdopen(read_fd)
    if results.readline() != "ready\n":
        child.wait(60)
        raise RuntimeError(f"{kind} did not start:\n{(work / f'{kind}.log').read_text()[-3000:]}")
    return Config(
        kind.replace("original-", "original ").replace("summary", "summary_only").replace("full", "full npy"),
        child=child,
        results=results,
    )


def _original_path(args: argparse.Namespace) -> str | None:
    if args.original:
        return args.original
    return "" if importlib.util.find_spec(ORIGINAL) is not None else None


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--batch", type=int, default=96)
    ap.add_argument("--steps", type=int, default=8, help="rounds (one step of each configuration per round)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--dir",
        default=None,
        help="where the dumps go (default: a temporary directory; "
        "/dev/shm takes the disk out of the figures)",
    )
    ap.add_argument("--original", default=None, help="the original's src/python folder (else PYTHONPATH)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--results", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args.child, args)
        return
    torch.set_num_threads(args.threads)
    step = make_step(args.device, args.batch)
    work = Path(tempfile.mkdtemp(prefix="dump_overhead_", dir=args.dir))
    configs = [
        Config("undumped"),
        Config("summary_only", _debugger(work / "summary", summary_only=True)),
        Config("full npy", _debugger(work / "full", summary_only=False)),
    ]
    original = _original_path(args)
    try:
        if original is not None:
            configs += [_spawn(kind, args, work, original) for kind in ("original-summary", "original-full")]
        else:
            print(f"(the original is not importable: give --original SRC or put {ORIGINAL} on PYTHONPATH)")
        for c in configs[:3]:  # warm-up round (the children warmed up on their own)
            c.run(step)
            c.times.clear()
        for _ in range(args.steps):
            for c in configs:
                c.run(step)
        for c in configs:
            c.close()
        files = {p.stat().st_ino: p.stat().st_size for p in (work / "full").rglob("*") if p.is_file()}
        size = sum(files.values())  # a tensor recorded twice is one file with two names (a hard link)
        npy_sizes = list({p.stat().st_ino: p.stat().st_size for p in (work / "full").rglob("*.npy")}.values())
        floor = storage_floor(work, npy_sizes, args.steps + 1)
    finally:
        for c in configs:
            if c.child is not None and c.child.poll() is None:
                c.child.kill()
        shutil.rmtree(work, ignore_errors=True)
    report(configs, args, work, size, floor)


def _spread(values: list[float], fmt: str = "{:.2f}") -> str:
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}–{fmt.format(max(values))})"


def report(configs: list[Config], args: argparse.Namespace, work: Path, size: int, floor: float) -> None:
    """Per configuration: wall and CPU ms per step, median (range); its ratio to the undumped step
    as the ratio of the medians, of the minimums (the least disturbed rounds) and per round."""
    by = {c.name: c for c in configs}
    base = by["undumped"].times
    print(
        f"device={args.device} batch={args.batch} threads={args.threads} rounds={args.steps}; "
        f"dumps in {work.parent}"
    )
    print(
        f"{'':24s} {'wall ms: median (range)':>24s} {'x med':>6s} {'x min':>6s} {'x per round':>19s}   "
        f"{'cpu ms: median (range)':>23s} {'x med':>6s} {'x min':>6s}"
    )
    targets = {"summary_only": "target <= 2x", "full npy": "target <= 4x"}
    for c in configs:
        row = [f"{c.name:24s}"]
        for i in (0, 1):
            ms = [t[i] * 1e3 for t in c.times]
            ref = [t[i] * 1e3 for t in base]
            row.append(
                f"{_spread(ms, '{:.0f}'):>24s} {statistics.median(ms) / statistics.median(ref):6.2f} "
                f"{min(ms) / min(ref):6.2f}"
            )
            if i == 0:
                row.append(f"{_spread([m / r for m, r in zip(ms, ref, strict=True)]):>19s}  ")
        print(" ".join(row), targets.get(c.name, ""))
    for ours in ("summary_only", "full npy"):
        theirs = by.get(f"original {ours}")
        if theirs is None:
            continue
        fractions = {}
        for label, pick in (("medians", statistics.median), ("minimums", min)):
            b, o, t = (pick([w for w, _ in x.times]) for x in (by["undumped"], by[ours], theirs))
            fractions[label] = (o / b - 1) / (t / b - 1)
        rounds = [
            (o[0] / b[0] - 1) / (t[0] / b[0] - 1)
            for o, t, b in zip(by[ours].times, theirs.times, base, strict=True)
        ]
        print(
            f"{ours}: our overhead (wall ratio - 1) is {fractions['medians']:.3f} of the original's from "
            f"the medians, {fractions['minimums']:.3f} from the minimums, {_spread(rounds, '{:.3f}')} per "
            "round (target <= 0.20)"
        )
    print(
        f"full npy writes {size / (args.steps + 1) / 1e6:.1f} MB per step (hard links not counted again); "
        "writing that many npy files "
        f"with a plain np.save loop into the same folder takes {floor * 1e3:.1f} ms per step "
        f"({floor / statistics.median(w for w, _ in base):.2f}x the undumped step): the storage's floor "
        "for full dumping"
    )


def storage_floor(work: Path, sizes: list[int], steps: int) -> float:
    """Seconds per step to write one step's npy files (same count and sizes, new names, tmp+rename
    like the dumper) with nothing else running: what the folder's filesystem alone costs."""
    per_step = sorted(sizes)[:: max(1, steps)]  # one step's worth of the size mix
    out = work / "floor"
    out.mkdir()
    buffers = {n: np.zeros(max(0, n - 128) // 4, np.float32) for n in set(per_step)}
    start = time.perf_counter()
    for i, n in enumerate(per_step):
        tmp = out / f".{i}.npy.tmp"
        with open(tmp, "wb") as f:
            np.save(f, buffers[n])
        os.replace(tmp, out / f"{i}.npy")
    return time.perf_counter() - start


def _debugger(path: Path, summary_only: bool) -> PrecisionDebugger:
    debugger = PrecisionDebugger(dump_path=str(path))
    debugger.configure_hook(mode="api_stack", summary_only=summary_only)
    return debugger


if __name__ == "__main__":
    main()
