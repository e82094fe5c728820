"""Compare throughput on a Dask LocalCluster of 1, 2 and 4 worker processes against the local pool.

Writes a synthetic 16-rank tensor-parallel dump pair (``write_ranks_pair``: per layer a linear, an
all_reduce and a tanh per rank, one faulty rank) into a temporary folder, then times the whole
``ptdbg-tui compare`` command (start-up, pkl reading, metrics, CSVs, report) alternately:

* ``--jobs N``: the local process pool;
* ``--cluster tcp://...`` against an already running LocalCluster of 1, 2 and 4 worker processes
  (one thread each), the way a user runs it against a standing cluster;
* ``--cluster local:2`` once per round, which starts its own cluster (start-up included).

Every run must name the faulty rank first. On a 2-core machine the cluster cannot beat the local
pool: both are bound by the cores, and the cluster adds scheduling and process start-up.

    python bench/cluster_scale.py [--gb 1.0] [--repeat 3] [--workers 1 2 4] [--keep DIR]
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from compare_throughput import _line, alternate, generated, ours_command

from ptdbg_tui.engine.workers.pool import THREAD_ENV
from ptdbg_tui.formats.synthetic import write_ranks_pair

RANKS = 16
FAULTY = 11
#: Bytes of npy both sides write per row of the layer input, at width 512 and 4 layers.
_BYTES_PER_ROW = 2 * RANKS * 4 * (6 * 512 * 4)


def generate(root: Path, gb: float) -> int:
    rows = max(8, int(gb * 1e9 / _BYTES_PER_ROW))
    write_ranks_pair(root, ranks=RANKS, layers=4, faulty_rank=FAULTY, faulty_layer=2, width=512, rows=rows)
    return sum(p.stat().st_size for p in root.rglob("*.npy"))


def _check(root: Path, argv: list[str]) -> None:
    """One run whose report must name the faulty rank first."""
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    want = f"first divergent rank: rank{FAULTY} (step0): Functional_linear_2_forward"
    if want not in out:
        raise SystemExit(f"{argv[-3:]}: the report does not name rank{FAULTY} first:\n{out[-2000:]}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gb", type=float, default=1.0, help="npy bytes of both sides (default 1.0)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="the local pool's workers")
    p.add_argument("--keep", type=Path, default=None)
    args = p.parse_args()
    import distributed

    logging.getLogger("distributed").setLevel(logging.CRITICAL)  # closing the clusters is not news

    root = args.keep or Path(tempfile.mkdtemp(prefix="ptdbg_cluster_"))
    clusters = []
    try:
        t = time.perf_counter()
        total = generate(root, args.gb)
        print(generated(total, t, root, f"npy in {RANKS} rank pairs"), flush=True)
        commands = [(f"local pool (--jobs {args.jobs})", ours_command(root, args.jobs))]
        for n in args.workers:
            cluster = distributed.LocalCluster(
                n_workers=n,
                threads_per_worker=1,
                processes=True,
                dashboard_address=":0",
                silence_logs=logging.ERROR,
                env=dict(THREAD_ENV),
            )
            clusters.append(cluster)
            commands.append(
                (
                    f"cluster of {n} worker(s)",
                    [*ours_command(root, 1), "--cluster", cluster.scheduler_address],
                )
            )
        commands.append(
            ("--cluster local:2 (starts its own)", [*ours_command(root, 1), "--cluster", "local:2"])
        )
        for _, argv in commands:
            _check(root, argv)
        results = alternate([(argv, None) for _, argv in commands], args.repeat)
        for (label, _), timing in zip(commands, results, strict=True):
            print(_line(label, timing, total))
        print(
            f"on {os.cpu_count()} cores; load average now {os.getloadavg()[0]:.2f} (peak RSS: the compare "
            "command's own process tree; a standing cluster's workers are not in it)"
        )
    finally:
        for cluster in clusters:
            cluster.close()
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
