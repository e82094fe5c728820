"""Throughput of ``ptdbg-tui compare`` on an msprobe tensor dump pair, against msprobe's own compare,
measured in the same run (target: >= 10x).

Writes a pair in msprobe's layout (``step0/proc<pid>/dump.json`` + ``dump_tensor_data/*.pt``, the tensors
saved with ``torch.save`` as msprobe saves them: fp32, fp16, bf16, from a few elements to 32M; >= 1 GB of
``.pt`` in total) into a temporary folder, then times, alternately, from a warm page cache:

* ours: ``ptdbg-tui compare NPU BENCH --jobs N`` (start-up, dump.json, the metric pool and the CSV);
* ours at older commits (``--old REV``, each a temporary git worktree run with ``PYTHONPATH``): CPU
  seconds (user + system of the whole process tree) and peak RSS against today's, per round, as the
  median ratio and its range (rounds alternate, so a round's two runs met the same load);
* msprobe: ``msprobe compare -tp NPU/step0 -gp BENCH/step0 -o OUT`` with its defaults, where the
  ``msprobe`` command is found (``--msprobe PATH``, else on PATH). Where it is not, that baseline is
  skipped and the script says so.

Needs torch (the ``dump`` extra) to write the files; peak RSS is sampled over each process tree.

    python bench/msprobe_throughput.py [--jobs 2] [--gb 1.1] [--repeat 2] [--msprobe PATH] [--keep DIR]
                                       [--old REV ...]

``--keep DIR`` holding a pair already is read again, not rewritten.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from compare_throughput import (
    MB,
    Timed,
    _knows_no_replay,
    _line,
    alternate,
    generated,
    old_checkout,
    ours_command,
    speedup,
)

#: (elements, torch dtype name, count) for about 0.55 GB per side at --gb 1.1.
MIX = [
    (32 << 20, "float32", 1),
    (8 << 20, "float32", 4),
    (8 << 20, "bfloat16", 4),
    (4 << 20, "float16", 8),
    (512 << 10, "float32", 64),
]
SMALL = 1000  # tensors of 1..4096 elements


def _leaf(t, data_name: str) -> dict[str, object]:
    x = t.float()
    return {
        "type": "torch.Tensor",
        "dtype": str(t.dtype),
        "shape": list(t.shape),
        "Max": x.max().item(),
        "Min": x.min().item(),
        "Mean": x.mean().item(),
        "Norm": x.norm().item(),
        "requires_grad": False,
        "data_name": data_name,
    }


def generate(root: Path, scale: float, seed: int = 0) -> int:
    """Write the pair under ``root/npu`` and ``root/bench``; returns the .pt bytes of both sides."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    sides = {side: root / side / "step0" / f"proc{1000 + i}" for i, side in enumerate(("npu", "bench"))}
    data: dict[str, dict[str, object]] = {side: {} for side in sides}
    for d in sides.values():
        (d / "dump_tensor_data").mkdir(parents=True)
    sizes = [(n, dt) for n, dt, count in MIX for _ in range(max(1, round(count * scale)))]
    sizes += [(int(torch.randint(1, 4097, (1,), generator=gen)), "float32") for _ in range(SMALL)]
    for i, (n, dtype) in enumerate(sizes):
        bench = torch.randn(n, generator=gen)
        # NPU = bench × (1 + 1e-3·noise): relative errors straddle the 0.001/0.005 ratio thresholds.
        npu = bench * (1 + 1e-3 * torch.randn(n, generator=gen))
        entry = f"Functional.linear.{i}.forward"
        name = f"{entry}.output.0.pt"
        for side, t in (("npu", npu), ("bench", bench)):
            t = t.to(getattr(torch, dtype))
            torch.save(t, sides[side] / "dump_tensor_data" / name)
            data[side][entry] = {"input_args": [], "input_kwargs": {}, "output": [_leaf(t, name)]}
    for side, d in sides.items():
        header = {
            "task": "tensor",
            "level": "L1",
            "framework": "pytorch",
            "dump_data_dir": str(d / "dump_tensor_data"),
        }
        (d / "dump.json").write_text(json.dumps({**header, "data": data[side]}, indent=1))
        (d / "stack.json").write_text("{}")
        (d / "construct.json").write_text("{}")
    return sum(f.stat().st_size for d in sides.values() for f in (d / "dump_tensor_data").iterdir())


def _msprobe_command(msprobe: str, root: Path) -> list[str]:
    return [
        msprobe,
        "compare",
        "-tp",
        str(root / "npu" / "step0"),
        "-gp",
        str(root / "bench" / "step0"),
        "-o",
        str(root / "msprobe_out"),
    ]


def _against(label: str, rev: str, ours: Timed, old: Timed) -> str:
    """A run against an older commit's on the same pair: CPU per round and peak RSS."""
    ratios = [new / was for new, was in zip(ours.cpus, old.cpus, strict=True)]
    return (
        f"{label} against {rev}: CPU {statistics.median(ratios):.2f}x of its "
        f"(per round: range {min(ratios):.2f}-{max(ratios):.2f}, {len(ratios)} rounds; CPU median "
        f"{statistics.median(ours.cpus):.2f} s against {statistics.median(old.cpus):.2f} s), "
        f"peak RSS {ours.rss / MB:.0f} MiB against {old.rss / MB:.0f} MiB"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--gb", type=float, default=1.1, help=".pt bytes of both sides, about (default 1.1)")
    p.add_argument("--repeat", type=int, default=2, help="alternate runs of each (default 2)")
    p.add_argument("--msprobe", default=shutil.which("msprobe"), help="msprobe's command (default: on PATH)")
    p.add_argument("--keep", type=Path, default=None, help="write the dumps here and keep them")
    p.add_argument(
        "--old",
        nargs="+",
        default=[],
        metavar="REV",
        help="also time ours at these commits (e.g. main e0999a1: each against the last too)",
    )
    args = p.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="ptdbg_msprobe_bench_"))
    try:
        with ExitStack() as stack:
            if (root / "npu").is_dir() and (root / "bench").is_dir():
                total = sum(f.stat().st_size for f in root.rglob("*.pt"))
                print(f"reusing {total / 1e9:.2f} GB of .pt under {root}", flush=True)
            else:
                t = time.perf_counter()
                total = generate(root, scale=args.gb / 1.1)
                print(generated(total, t, root, ".pt"), flush=True)
            trees = {rev: stack.enter_context(old_checkout(rev)) for rev in args.old}
            # this checkout's code, not whichever the interpreter has installed (an editable install
            # of another worktree)
            here = str(Path(__file__).resolve().parent.parent)
            commands: list[tuple[list[str], dict[str, str] | None]] = [
                (ours_command(root, args.jobs), {**os.environ, "PYTHONPATH": here})
            ]
            commands += [
                (
                    ours_command(root, args.jobs, _knows_no_replay(tree)),
                    {**os.environ, "PYTHONPATH": str(tree)},
                )
                for tree in trees.values()
            ]
            if args.msprobe:
                commands.append((_msprobe_command(args.msprobe, root), None))
            alternate(commands, 1)  # warm-up, not counted: the page cache, numba's cache of each tree
            ours, *rest = alternate(commands, args.repeat)
            print(_line(f"ours (--jobs {args.jobs})", ours, total))
            olds = dict(zip(trees, rest, strict=False))
            for rev, old in olds.items():
                print(_line(f"ours at {rev}", old, total))
                print(_against("ours", rev, ours, old))
            *later, base = olds or [""]  # several: each against the last too (e.g. --old main e0999a1)
            for rev in later:
                print(_against(f"ours at {rev}", base, olds[rev], olds[base]))
            if not args.msprobe:
                print("msprobe's compare: skipped (no msprobe command found; pass --msprobe PATH)")
                return
            theirs = rest[-1]
            print(_line("msprobe compare", theirs, total))
            print(
                f"{speedup(ours.walls, theirs.walls)} (target >= 10x); load average now "
                f"{os.getloadavg()[0]:.2f}"
            )
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
