"""The acceptance run: an 8-rank pair with a fault on one rank, compared by ``ptdbg-tui compare
--cluster`` against a scheduler and two workers started with Dask's own command line."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ptdbg_tui.cli import main
from ptdbg_tui.formats.synthetic import write_ranks_pair

WAIT_S = 60


def _scheduler(env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    """Start ``dask scheduler``; its address once it says where it listens (its log is drained after)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "dask", "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    found = threading.Event()
    address: list[str] = []

    def drain() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            m = re.search(r"Scheduler at:\s+(tcp://\S+)", line)
            if m and not address:
                address.append(m.group(1))
                found.set()
        found.set()

    threading.Thread(target=drain, daemon=True).start()
    assert found.wait(WAIT_S) and address, "the scheduler did not start"
    return proc, address[0]


def _csvs(folder: Path) -> dict[str, str]:
    """CSV contents by name without the time stamp."""
    stamp = re.compile(r"_\d{14}(_\d+)?\.csv$")
    return {stamp.sub("", p.name): p.read_text() for p in folder.glob("compare_result_*")}


def _compare(npu: Path, bench: Path, out: Path, *extra: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ptdbg_tui",
            "compare",
            str(npu),
            str(bench),
            "-o",
            str(out),
            "--no-progress",
            "--no-replay",  # the compare's rows and verdicts on a cluster, not the replay
            *extra,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_eight_ranks_on_a_command_line_cluster(tmp_path):
    distributed = pytest.importorskip("distributed")
    npu, bench = write_ranks_pair(tmp_path, ranks=8, faulty_rank=5, faulty_layer=1)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "OPENBLAS_NUM_THREADS": "1"}
    procs: list[subprocess.Popen] = []
    try:
        scheduler, address = _scheduler(env)
        procs.append(scheduler)
        for name in ("w1", "w2"):
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "dask",
                        "worker",
                        address,
                        "--nthreads",
                        "1",
                        "--name",
                        name,
                        "--no-dashboard",
                    ],
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        with distributed.Client(address, timeout=WAIT_S) as client:
            client.wait_for_workers(2, timeout=WAIT_S)
        report = _compare(npu, bench, tmp_path / "cluster", "--cluster", address, env=env)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(WAIT_S)
    local = _compare(npu, bench, tmp_path / "local", "--jobs", "1", env=env)
    cluster_csvs, local_csvs = _csvs(tmp_path / "cluster"), _csvs(tmp_path / "local")
    assert len(local_csvs) == 8 and cluster_csvs == local_csvs
    head = "first divergent rank: rank5 (step0): Functional_linear_1_forward"
    assert head in report and head in local
    m = re.search(r"cluster tcp://\S+: (\d+) Dask tasks on 2 worker\(s\)", report)
    assert m and int(m.group(1)) >= 16  # each pair read on a worker, its tensors compared there


def test_cluster_without_dask_says_how_to_install(tmp_path, monkeypatch, capsys):
    npu, bench = write_ranks_pair(tmp_path, ranks=2, faulty_rank=1)
    monkeypatch.setitem(sys.modules, "distributed", None)  # as if not installed
    assert main(["compare", str(npu), str(bench), "-o", str(tmp_path), "--cluster", "local:2"]) == 2
    assert 'pip install "ptdbg-tui[cluster]"' in capsys.readouterr().err
