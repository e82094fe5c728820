"""Step time of a small CNN + LSTM under the dumper, as ratios to the undumped step.

    python bench/dump_overhead.py [--device cpu|cuda] [--batch 96] [--steps 8] [--threads 2]

Three configurations are timed in the same run: no dumping, ``summary_only`` (pkl only) and full
npy dumping (api_stack mode). A dumped step includes ``stop()``, i.e. waiting until the dump
daemon has written everything. The configurations take turns, round after round, so that load
from other processes falls on all of them alike; the figures are medians over all rounds, of wall
time and of this process's CPU time (all threads, the dump daemon included).
Targets: summary_only <= 2x, full npy <= 4x.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dumper import PrecisionDebugger


class CnnLstm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(inplace=True), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(inplace=True), nn.MaxPool2d(2),
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


def timed(step: Callable[[], None], debugger: PrecisionDebugger | None) -> tuple[float, float]:
    """Wall and process CPU seconds of one step (with start/stop around it when dumping)."""
    w0, c0 = time.perf_counter(), time.process_time()
    if debugger is not None:
        debugger.start()
    step()
    if debugger is not None:
        debugger.stop()
    return time.perf_counter() - w0, time.process_time() - c0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--batch", type=int, default=96)
    ap.add_argument("--steps", type=int, default=8, help="rounds (one step of each configuration per round)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dir", default=None, help="where the dumps go (default: a temporary directory; "
                    "/dev/shm takes the disk out of the figures)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    step = make_step(args.device, args.batch)
    work = Path(tempfile.mkdtemp(prefix="dump_overhead_", dir=args.dir))
    configs = {"undumped": None, "summary_only": _debugger(work / "summary", summary_only=True),
               "full npy": _debugger(work / "full", summary_only=False)}
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in configs}
    try:
        for debugger in configs.values():  # warm-up round
            timed(step, debugger)
        for _ in range(args.steps):
            for name, debugger in configs.items():
                times[name].append(timed(step, debugger))
        size = sum(p.stat().st_size for p in (work / "full").rglob("*") if p.is_file())
        npy_sizes = [p.stat().st_size for p in (work / "full").rglob("*.npy")]
        floor = storage_floor(work, npy_sizes, args.steps + 1)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    wall = {n: statistics.median(w for w, _ in t) for n, t in times.items()}
    cpu = {n: statistics.median(c for _, c in t) for n, t in times.items()}
    print(f"device={args.device} batch={args.batch} threads={args.threads} rounds={args.steps} (medians), "
          f"dumps in {work.parent}")
    targets = {"undumped": "", "summary_only": "(target <= 2x)", "full npy": "(target <= 4x)"}
    for name in configs:
        print(f"{name:13s} wall {wall[name] * 1e3:7.1f} ms/step {wall[name] / wall['undumped']:5.2f}x   "
              f"cpu {cpu[name] * 1e3:7.1f} ms/step {cpu[name] / cpu['undumped']:5.2f}x   {targets[name]}")
    print(f"full npy writes {size / (args.steps + 1) / 1e6:.1f} MB per step; writing that many npy files "
          f"with a plain np.save loop into the same folder takes {floor * 1e3:.1f} ms per step "
          f"({floor / wall['undumped']:.2f}x the undumped step): the storage's floor for full dumping")


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
