"""Throughput of ``ptdbg-tui compare`` against a naive single-process compare, measured in one run.

Writes a synthetic dump pair (>= 2 GB of npy in total, tensors from 1 to 64M elements, fp32, fp16
and bf16-stored-as-fp32; or with ``--conv`` a real-layout pair: one training step of a 6-block conv
net as the original dumps it, 606 npy) with the format's own RankWriter into a temporary folder,
then times

* ours: ``ptdbg-tui compare NPU BENCH --jobs N`` as a subprocess (start-up, pkl parsing, the
  metric pool and the CSV included);
* baseline: one process that, like the original, ``np.load``s both files whole, casts them to
  float64 and computes each metric in its own pass;
* the read bound: ``np.load`` of every file and nothing else, in as many processes as ours has
  workers (``--jobs``); ours should reach 70% of it (80% on 10 GB);
* with ``--old REV [REV ...]``: ours at older commits (temporary git worktrees), e.g. ``15e9299``, the
  last before the diagnosis measures joined the metric pass, to price them (issue 7 allows 10%), and
  ``main`` before the fused pass;
* the metric pass alone, in one process (one BLAS thread) over every tensor pair already in memory,
  ours and at each ``--old`` commit, alternately: what the fused numba pass earns (>= 1.5x to carry
  numba as a dependency);
* numba's compile time on a first run (an empty cache folder) and its load time from the cache.

All read the same files from a warm page cache. Peak RSS is sampled from /proc over each
process tree (parent + workers summed). The folder is deleted at the end.

    python bench/compare_throughput.py [--jobs 2] [--gb 2.0] [--conv] [--repeat 3] [--keep DIR]
                                       [--old REV ...]
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ptdbg_tui.engine.workers.pool import FUSED_BYTES
from ptdbg_tui.formats.layout import discover, rank_dir_path
from ptdbg_tui.formats.pkl import read_pkl
from ptdbg_tui.formats.synthetic import write_array
from ptdbg_tui.formats.writer import RankWriter

MB = 1 << 20
# (elements, numpy dtype, recorded dtype, count) for about 1 GB per side at --gb 2.
MIX = [
    (64 << 20, np.float32, "torch.float32", 1),
    (16 << 20, np.float32, "torch.float32", 2),
    (16 << 20, np.float16, "torch.float16", 2),
    (8 << 20, np.float32, "torch.bfloat16", 4),
    (4 << 20, np.float16, "torch.float16", 8),
    (1 << 20, np.float32, "torch.float32", 64),
    (256 << 10, np.float32, "torch.float32", 64),
    (16 << 10, np.float32, "torch.float32", 512),
]
TINY = 2000  # tensors of 1..4096 elements, plus 1-element ones


def _bf16(a: np.ndarray) -> np.ndarray:
    return (a.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)


def generate(root: Path, scale: float, seed: int = 0) -> int:
    """Write the pair under ``root/npu`` and ``root/bench``; returns the npy bytes of both sides."""
    rng = np.random.default_rng(seed)
    writers = [RankWriter(rank_dir_path(root / side, 0, 0)) for side in ("npu", "bench")]
    index = 0
    total = 0

    # NPU = bench × (1 + 1e-3·noise): relative errors straddle the 0.001/0.005 ratio thresholds.
    wobble = (1 + 1e-3 * rng.standard_normal(1 << 20)).astype(np.float32)

    def put(bench: np.ndarray, dtype: str) -> None:
        nonlocal index, total
        factor = wobble[: bench.size] if bench.size <= wobble.size else np.resize(wobble, bench.size)
        npu = (bench * factor).astype(bench.dtype)
        if dtype == "torch.bfloat16":
            npu = _bf16(npu)
        name = f"Functional_linear_{index}_forward_output"
        for writer, data in zip(writers, (npu, bench), strict=True):
            write_array(writer, name, data, dtype)
        total += npu.nbytes + bench.nbytes
        index += 1

    for size, np_dtype, dtype, count in MIX:
        for _ in range(max(1, round(count * scale))):
            bench = rng.standard_normal(size, dtype=np.float32).astype(np_dtype, copy=False)
            put(_bf16(bench) if dtype == "torch.bfloat16" else bench, dtype)
    for k in range(TINY):
        size = 1 if k % 20 == 0 else int(rng.integers(2, 4097))
        put(rng.standard_normal(size, dtype=np.float32), "torch.float32")
    for w in writers:
        w.close()
    return total


#: A 6-block VGG-like conv net as the original records one training step (api_stack mode, fp32): per
#: block two conv2d + batch_norm + relu and a max_pool2d, then flatten, linear and cross_entropy, forward
#: and backward, every tensor in its own npy: 304 a side. (channels, side of the square input) per block.
CONV_BLOCKS = [(32, 128), (64, 64), (128, 32), (256, 16), (256, 8), (512, 4)]
CONV_CLASSES = 10


def _conv_entries(batch: int) -> list[tuple[str, tuple[int, ...]]]:
    """(entry name, shape) of the conv net's step, in the order the original writes them."""
    forward: list[tuple[str, tuple[int, ...]]] = []
    backward: list[list[tuple[str, tuple[int, ...]]]] = []  # per call, run in reverse
    index: dict[str, int] = {}

    def call(api: str, inputs: list[tuple[int, ...]], output: tuple[int, ...], grads: list[int]) -> None:
        k = index[api] = index.get(api, -1) + 1
        forward.extend((f"{api}_{k}_forward_input.{i}", shape) for i, shape in enumerate(inputs))
        forward.append((f"{api}_{k}_forward_output", output))
        backward.append(
            [
                (f"{api}_{k}_backward_input.0", output),
                *((f"{api}_{k}_backward_output.{i}", inputs[i]) for i in grads),
            ]
        )

    channels = 3
    for depth, (width, side) in enumerate(CONV_BLOCKS):
        for conv in range(2):
            x = (batch, channels, side, side)
            y = (batch, width, side, side)
            first = depth == 0 and conv == 0  # the images take no gradient
            call(
                "Functional_conv2d", [x, (width, channels, 3, 3), (width,)], y, [1, 2] if first else [0, 1, 2]
            )
            call("Functional_batch_norm", [y, (width,), (width,), (width,), (width,)], y, [0, 3, 4])
            call("Functional_relu", [y], y, [0])
            channels = width
        call("Functional_max_pool2d", [y], (batch, width, side // 2, side // 2), [0])
    pooled = (batch, channels, CONV_BLOCKS[-1][1] // 2, CONV_BLOCKS[-1][1] // 2)
    flat = (batch, math.prod(pooled[1:]))
    call("Tensor_flatten", [pooled], flat, [0])
    call(
        "Functional_linear",
        [flat, (CONV_CLASSES, flat[1]), (CONV_CLASSES,)],
        (batch, CONV_CLASSES),
        [0, 1, 2],
    )
    call("Functional_cross_entropy", [(batch, CONV_CLASSES)], (), [0])
    return forward + [entry for calls in reversed(backward) for entry in calls]


def generate_conv(root: Path, gb: float, seed: int = 0) -> int:
    """The conv net's pair (``CONV_BLOCKS``) at the batch size that makes both sides about ``gb`` GB of
    npy; returns the npy bytes of both sides."""
    per_sample = sum(4 * math.prod(shape[1:]) for name, shape in _conv_entries(1) if shape and shape[0] == 1)
    batch = max(1, round(gb * 1e9 / 2 / per_sample))
    rng = np.random.default_rng(seed)
    pool = rng.standard_normal(1 << 24, dtype=np.float32)  # drawing every element would take minutes
    wobble = (1 + 1e-3 * rng.standard_normal(1 << 20)).astype(np.float32)
    writers = [RankWriter(rank_dir_path(root / side, 0, 0)) for side in ("npu", "bench")]
    total = 0
    for name, shape in _conv_entries(batch):
        size = math.prod(shape)
        start = int(rng.integers(0, pool.size))
        bench = np.resize(np.roll(pool, -start), size).reshape(shape)
        npu = bench * np.resize(wobble, size).reshape(shape)
        for writer, data in zip(writers, (npu, bench), strict=True):
            write_array(writer, name, data)
        total += npu.nbytes + bench.nbytes
    for w in writers:
        w.close()
    return total


def baseline(root: Path) -> None:
    """The original's ``compare_by_op`` steps in one process: whole loads, the relative error in the
    native dtype, NaN/Inf masks, float64 copies, then one pass per metric."""
    npu, bench = discover(root / "npu")[0], discover(root / "bench")[0]
    for rec in read_pkl(npu.records).tensors:
        n = np.load(npu.tensor_dir / f"{rec.name}.npy")
        b = np.load(bench.tensor_dir / f"{rec.name}.npy")
        zero = b == 0
        eps = np.finfo(b.dtype).eps
        b[zero] += eps
        n[zero] += eps
        rel = np.abs((n - b) / b)
        n_nan, b_nan, n_inf, b_inf = np.isnan(n), np.isnan(b), np.isinf(n), np.isinf(b)
        if (n_nan | b_nan | n_inf | b_inf).any():
            n[n_nan | n_inf] = 0
            b[b_nan | b_inf] = 0
        n64, b64 = n.reshape(-1).astype(float), b.reshape(-1).astype(float)
        if n64.size > 1:
            float(n64.dot(b64) / (np.linalg.norm(n64) * np.linalg.norm(b64)))
        float(np.max(np.abs(n64 - b64)))
        float(np.max(rel))
        float(np.sum(rel < 0.001) / rel.size)
        float(np.sum(rel < 0.005) / rel.size)


def metric_pass(root: Path, fused: bool, repeat: int = 2) -> None:
    """Print the CPU seconds of the metric pass (``fused``: the compiled one, else the numpy pass) over
    every tensor pair of ``root``, read into memory first (the best of ``repeat``)."""
    from ptdbg_tui.compare.metrics.accumulator import compare_arrays, warm_up

    npu, bench = discover(root / "npu")[0], discover(root / "bench")[0]
    pairs = [
        (
            np.load(npu.tensor_dir / f"{rec.name}.npy"),
            np.load(bench.tensor_dir / f"{rec.name}.npy"),
            rec.dtype,
        )
        for rec in read_pkl(npu.records).tensors
    ]
    if fused:
        warm_up()
    compare_arrays(*pairs[0][:2], pairs[0][2], pairs[0][2], histogram=False)
    best = math.inf
    for _ in range(repeat):
        start = time.process_time()
        for n, b, dtype in pairs:
            compare_arrays(n, b, dtype, dtype, histogram=False)
        best = min(best, time.process_time() - start)
    print(best)


def _seconds_of(argv: list[str], env: dict[str, str]) -> float:
    return float(subprocess.run(argv, capture_output=True, text=True, check=True, env=env).stdout.split()[-1])


JIT_PROBE = (
    "import time; t = time.perf_counter(); "
    "from ptdbg_tui.compare.metrics.accumulator import warm_up; "
    "warm_up(); print(time.perf_counter() - t)"
)


def jit_costs() -> tuple[float, float]:
    """Seconds to import numba and get the fused pass ready: compiled (a first run on a machine, an
    empty cache folder), then loaded from that cache."""
    with tempfile.TemporaryDirectory(prefix="ptdbg_numba_") as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        argv = [sys.executable, "-c", JIT_PROBE]
        return _seconds_of(argv, env), _seconds_of(argv, env)


def _load(path: Path) -> int:
    return np.load(path).nbytes


def load_only(root: Path, jobs: int) -> None:
    """The read bound: ``np.load`` of every npy of both sides, in ``jobs`` processes."""
    import multiprocessing

    files = sorted(root.rglob("*.npy"), key=lambda f: -f.stat().st_size)
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        sum(pool.imap_unordered(_load, files, chunksize=16))


@contextmanager
def old_checkout(rev: str) -> Iterator[Path]:
    """A temporary git worktree of this repository at ``rev``."""
    repo = Path(__file__).resolve().parent.parent
    where = Path(tempfile.mkdtemp(prefix="ptdbg_old_")) / "tree"
    subprocess.run(
        ["git", "-C", str(repo), "worktree", "add", "--detach", str(where), rev],
        check=True,
        capture_output=True,
    )
    try:
        yield where
    finally:
        subprocess.run(
            ["git", "-C", str(repo), "worktree", "remove", "--force", str(where)],
            check=False,
            capture_output=True,
        )
        shutil.rmtree(where.parent, ignore_errors=True)


def _tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and all its descendants."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            parents[int(entry)] = int(fields[1])
            rss[int(entry)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
    tree, frontier = {pid}, [pid]
    while frontier:
        p = frontier.pop()
        for child, parent in parents.items():
            if parent == p and child not in tree:
                tree.add(child)
                frontier.append(child)
    return sum(rss.get(p, 0) for p in tree)


class Timed(NamedTuple):
    """A command's runs: wall seconds, peak tree RSS, CPU seconds of its whole process tree (user
    and system: on a shared box a steadier figure than the wall time) and what each run printed."""

    walls: list[float]
    rss: int
    cpus: list[float]
    outs: list[str]


def adopt_orphans() -> None:
    """Linux: become the reaper of our descendants' orphans (a fork server's workers outlive their
    parent's wait), so that the CPU time of every process a command started is counted."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def _children() -> set[int]:
    """This process's children (from /proc; empty elsewhere)."""
    me, out = os.getpid(), set()
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == me:
                        out.add(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    return out


def _reap(keep: set[int]) -> None:
    """Wait for the orphans a command left to us (children not in ``keep``, which were ours before:
    a standing local cluster's processes)."""
    while adopted := _children() - keep:
        for pid in adopted:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, int, float, str]:
    """Wall seconds, peak tree RSS, tree CPU seconds and stdout of a subprocess (fails loudly if it
    fails)."""
    peak = 0
    ours = _children()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    # From a neutral folder: ``python -m`` puts the current one first on sys.path, ahead of PYTHONPATH,
    # so from the repository's root an --old tree's command ran this tree's code.
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tempfile.gettempdir()
    )
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.wait(0.02):
            peak = max(peak, _tree_rss(proc.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    wall = time.perf_counter() - start
    done.set()
    sampler.join()
    _reap(ours)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{argv[:3]} failed ({proc.returncode}):\n{out}\n{err}")
    return wall, peak, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, out


def alternate(commands: list[tuple[list[str], dict[str, str] | None]], repeat: int) -> list[Timed]:
    """Run the commands in turn, ``repeat`` rounds."""
    adopt_orphans()
    out = [Timed([], 0, [], []) for _ in commands]
    for _ in range(repeat):
        for k, (argv, env) in enumerate(commands):
            wall, rss, cpu, printed = timed(argv, env)
            out[k].walls.append(wall)
            out[k].cpus.append(cpu)
            out[k].outs.append(printed)
            out[k] = out[k]._replace(rss=max(out[k].rss, rss))
    return out


def ours_command(root: Path, jobs: int, replay_flag: bool = True) -> list[str]:
    """``ptdbg-tui compare`` of ``root/npu`` against ``root/bench``, as a user runs it, without the
    replay (the comparison's own speed is measured; ``replay_flag`` False: a revision from before the
    replay was the default, which knows no ``--no-replay``)."""
    return [
        sys.executable,
        "-m",
        "ptdbg_tui",
        "compare",
        str(root / "npu"),
        str(root / "bench"),
        "-o",
        str(root / "out"),
        "--jobs",
        str(jobs),
        "--no-progress",
        *(["--no-replay"] if replay_flag else []),
    ]


def generated(total: int, since: float, root: Path, what: str) -> str:
    return (
        f"generated {total / 1e9:.2f} GB of {what} in {time.perf_counter() - since:.1f} s under {root}; "
        f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
    )


def _pass_times(root: Path, trees: dict[str, tuple[Path, bool]], repeat: int) -> dict[str, list[float]]:
    """CPU seconds of the metric pass in each (tree, fused pass), alternately."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    out: dict[str, list[float]] = {label: [] for label in trees}
    for _ in range(repeat):
        for label, (tree, fused) in trees.items():
            argv = [sys.executable, __file__, "--pass-only", str(root), *([] if fused else ["--numpy-pass"])]
            out[label].append(_seconds_of(argv, {**env, "PYTHONPATH": str(tree)}))
    return out


def _ratio(old: list[float], new: list[float]) -> str:
    return f"best {min(old) / min(new):.2f}x, median {statistics.median(old) / statistics.median(new):.2f}x"


def speedup(ours: list[float], base: list[float]) -> str:
    return (
        f"speed-up: best {min(base) / min(ours):.1f}x, median "
        f"{statistics.median(base) / statistics.median(ours):.1f}x"
    )


def _line(label: str, t: Timed, total: int) -> str:
    best, median = min(t.walls), statistics.median(t.walls)
    return (
        f"{label}: best {best:6.2f} s = {total / best / 1e9:5.2f} GB/s, median {median:6.2f} s = "
        f"{total / median / 1e9:5.2f} GB/s, CPU median {statistics.median(t.cpus):5.2f} s, "
        f"peak RSS {t.rss / MB:5.0f} MiB"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--gb", type=float, default=2.0, help="npy bytes of both sides, at least (default 2.0)")
    p.add_argument(
        "--conv",
        action="store_true",
        help="a real-layout pair: a 6-block conv net's step as the original dumps it (606 npy)",
    )
    p.add_argument("--repeat", type=int, default=3, help="alternate runs of each (default 3)")
    p.add_argument("--keep", type=Path, default=None, help="write the dumps here and keep them")
    p.add_argument("--no-baseline", action="store_true", help="leave out the original-like baseline")
    p.add_argument(
        "--no-pass",
        action="store_true",
        help="leave out the metric pass alone (it holds every tensor in memory)",
    )
    p.add_argument(
        "--old",
        nargs="+",
        default=[],
        metavar="REV",
        help="also time ours at these commits (e.g. 15e9299 main)",
    )
    p.add_argument("--baseline-only", type=Path, default=None, help=argparse.SUPPRESS)
    p.add_argument("--load-only", type=Path, default=None, help=argparse.SUPPRESS)
    p.add_argument("--pass-only", type=Path, default=None, help=argparse.SUPPRESS)
    p.add_argument("--numpy-pass", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.baseline_only is not None:
        baseline(args.baseline_only)
        return
    if args.load_only is not None:
        load_only(args.load_only, args.jobs)
        return
    if args.pass_only is not None:
        metric_pass(args.pass_only, fused=not args.numpy_pass)
        return
    root = args.keep or Path(tempfile.mkdtemp(prefix="ptdbg_bench_"))
    try:
        with ExitStack() as stack:
            if (root / "npu").is_dir() and (root / "bench").is_dir():
                total = sum(f.stat().st_size for f in root.rglob("*.npy"))
                print(f"reusing {total / 1e9:.2f} GB of npy under {root}", flush=True)
            else:
                t = time.perf_counter()
                total = generate_conv(root, args.gb) if args.conv else generate(root, scale=args.gb / 2.0)
                print(generated(total, t, root, "npy"), flush=True)
            trees = {rev: stack.enter_context(old_checkout(rev)) for rev in args.old}
            whole_commands(root, total, args.jobs, args.repeat, trees, not args.no_baseline)
            if not args.no_pass:
                metric_passes(root, total, args.repeat, trees)
            print(f"load average now {os.getloadavg()[0]:.2f}")
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


def _ratios(bases: list[float], values: list[float]) -> str:
    """The median of the per-round ratios base/value and their range (rounds alternate, so a round's
    two figures met the same load)."""
    ratios = [b / v for b, v in zip(bases, values, strict=True)]
    spread = f" ({min(ratios):.0%}-{max(ratios):.0%})" if len(ratios) > 1 else ""
    return f"{statistics.median(ratios):.0%}{spread}"


def _knows_no_replay(tree: Path) -> bool:
    """Whether the revision checked out at ``tree`` takes ``--no-replay`` (it replays by default)."""
    return "--no-replay" in (tree / "ptdbg_tui" / "cli.py").read_text()


def whole_commands(
    root: Path, total: int, jobs: int, repeat: int, trees: dict[str, Path], with_baseline: bool = True
) -> None:
    """Ours, the baseline, the read bound, ours with ``--summary`` against a bare start (Python and
    numpy) and ours at older commits, alternately."""
    # One BLAS thread for the baseline: two would fight over the two cores and make it look worse.
    base_env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    commands = [
        (f"ours (--jobs {jobs})", ours_command(root, jobs), None),
        (
            f"np.load only ({jobs} processes)",
            [sys.executable, __file__, "--load-only", str(root), "--jobs", str(jobs)],
            None,
        ),
        ("ours --summary (no tensors)", [*ours_command(root, jobs), "--summary"], None),
        ("python -c 'import numpy'", [sys.executable, "-c", "import numpy"], None),
    ]
    if with_baseline:
        commands.append(
            ("baseline (1 process)", [sys.executable, __file__, "--baseline-only", str(root)], base_env)
        )
    olds = len(commands)
    commands += [
        (
            f"ours at {rev}",
            ours_command(root, jobs, _knows_no_replay(tree)),
            {**os.environ, "PYTHONPATH": str(tree)},
        )
        for rev, tree in trees.items()
    ]
    results = alternate([(argv, env) for _, argv, env in commands], repeat)
    for (label, _, _), timing in zip(commands, results, strict=True):
        print(_line(label, timing, total))
    ours, bound, summary, bare = results[:4]
    if with_baseline:
        print(f"{speedup(ours.walls, results[4].walls)} (targets: >= 5x, >= 1 GB/s, peak RSS < 1.5 GB)")
    print(
        f"read bound reached (np.load loop / ours, per round): median {_ratios(bound.walls, ours.walls)}, "
        f"best {min(bound.walls) / min(ours.walls):.0%}; in CPU time {_ratios(bound.cpus, ours.cpus)} "
        "(target >= 70%, >= 80% on 10 GB)"
    )
    median = statistics.median
    print(
        f"--summary: median {median(summary.walls):.2f} s, CPU {median(summary.cpus):.2f} s; a bare start "
        f"is {_ratios(bare.walls, summary.walls)} of it (CPU {_ratios(bare.cpus, summary.cpus)})"
    )
    for rev, old in zip(trees, results[olds:], strict=True):
        print(
            f"ours now against {rev}: median {median(ours.walls) / median(old.walls) - 1:+.0%} time, best "
            f"{min(ours.walls) / min(old.walls) - 1:+.0%}, CPU median "
            f"{median(ours.cpus) / median(old.cpus) - 1:+.0%}"
        )


def metric_passes(root: Path, total: int, repeat: int, trees: dict[str, Path]) -> None:
    """The metric pass alone, ours and at older commits; numba's compile and cache-load times."""
    here = Path(__file__).resolve().parent.parent
    passes = _pass_times(
        root,
        {
            "ours": (here, True),
            "ours, numpy pass": (here, False),
            **{rev: (tree, True) for rev, tree in trees.items()},
        },
        repeat,
    )
    for label, seconds in passes.items():
        print(
            f"metric pass {label}: best {min(seconds):.2f} s = {total / min(seconds) / 1e9:.2f} GB/s "
            f"a core, median {statistics.median(seconds):.2f} s"
        )
    print(
        f"metric pass, fused against the numpy pass: {_ratio(passes['ours, numpy pass'], passes['ours'])} "
        f"faster (small jobs run the numpy pass and never load numba; jobs of >= {FUSED_BYTES >> 20} MiB "
        "the fused one)"
    )
    for rev in trees:
        print(
            f"metric pass, ours against {rev}: {_ratio(passes[rev], passes['ours'])} faster "
            "(numba must earn >= 1.5x on the numpy pass; the diagnosis measures may cost <= 10%)"
        )
    first, cached = jit_costs()
    print(
        f"numba: the fused pass compiled in {first:.2f} s on a first run, loaded from its cache in "
        f"{cached:.2f} s (numba's import included; once per big run, in the workers' fork server)"
    )


if __name__ == "__main__":
    main()
