"""The metric pool: same results as in-process, batching, bounded submission, surviving a dead worker."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import signal

import numpy as np
import pytest

from ptdbg_tui.compare.model import Status
from ptdbg_tui.engine.workers import pool as pool_module
from ptdbg_tui.engine.workers.pool import FUSED_BYTES, MetricPool, job_size
from ptdbg_tui.engine.workers.tasks import CompareTask, run_task
from ptdbg_tui.formats.synthetic import write_seed_pair


def _tasks(tmp_path, count: int, size: int = 1000) -> list[CompareTask]:
    rng = np.random.default_rng(1)
    tasks = []
    for k in range(count):
        b = rng.standard_normal(size * (k % 3 + 1)).astype(np.float32)
        n = b + np.float32(k * 1e-3)
        paths = [tmp_path / f"n{k}.npy", tmp_path / f"b{k}.npy"]
        np.save(paths[0], n)
        np.save(paths[1], b)
        tasks.append(
            CompareTask(
                str(paths[0]),
                str(paths[1]),
                "torch.float32",
                "torch.float32",
                n.shape,
                b.shape,
                nbytes=n.nbytes * 2,
            )
        )
    tasks.append(
        CompareTask(
            str(tmp_path / "missing.npy"), str(paths[1]), "torch.float32", "torch.float32", (size,), (size,)
        )
    )
    return tasks


def test_processes_give_the_in_process_results(tmp_path):
    tasks = _tasks(tmp_path, 12)
    with MetricPool(2, batch_tasks=4) as pool:
        got = dict(pool.map(tasks, largest_first=True))
    assert sorted(got) == list(range(len(tasks)))
    for i, t in enumerate(tasks):
        want = run_task(t)
        assert (got[i].cells, got[i].status, got[i].message) == (want.cells, want.status, want.message)
    assert got[len(tasks) - 1].status is Status.ERROR


def test_in_process_order(tmp_path):
    tasks = _tasks(tmp_path, 5)
    with MetricPool(1) as pool:
        assert [i for i, _ in pool.map(tasks)] == list(range(6))
        order = [i for i, _ in pool.map(tasks, largest_first=True)]
    assert [tasks[i].nbytes for i in order] == sorted((t.nbytes for t in tasks), reverse=True)


def test_batches_close_on_bytes_and_count(tmp_path):
    tasks = _tasks(tmp_path, 9)
    pool = MetricPool(2, batch_bytes=20_000, batch_tasks=3)
    batches = list(pool._batches(tasks, range(len(tasks))))
    assert sorted(i for b in batches for i in b) == list(range(len(tasks)))
    assert all(len(b) <= 3 for b in batches)
    assert all(len(b) == 1 or sum(tasks[i].nbytes for i in b) <= 20_000 for b in batches)


def test_a_killed_worker_loses_no_task(tmp_path):
    tasks = _tasks(tmp_path, 30, size=200_000)
    seen = {}
    with MetricPool(2, batch_tasks=2) as pool:
        for n, (i, result) in enumerate(pool.map(tasks)):
            seen[i] = result
            if n == 0:
                victims = multiprocessing.active_children()
                assert victims
                os.kill(victims[0].pid, signal.SIGKILL)
    assert sorted(seen) == list(range(len(tasks)))
    assert all(seen[i].status is not Status.ERROR for i in range(len(tasks) - 1))  # retried, not lost


def test_leaving_early_does_not_hang(tmp_path):
    tasks = _tasks(tmp_path, 20, size=50_000)
    with MetricPool(2, batch_tasks=1) as pool:
        for _ in pool.map(tasks):
            break
    assert not [p for p in multiprocessing.active_children() if p.is_alive()]


@pytest.mark.parametrize("jobs", [0, -3])
def test_jobs_below_one_run_in_process(tmp_path, jobs):
    with MetricPool(jobs) as pool:
        assert pool.jobs == 1 and len(list(pool.map(_tasks(tmp_path, 2)))) == 3


def test_a_job_is_sized_by_its_tensor_files(tmp_path, monkeypatch):
    """Only a big job loads numba (the fused pass), and a job of statistics alone starts no worker: the
    size is known from the files before any pkl is read; a path that is no dump, or a side without
    tensor files, makes no tensor job (the compare then says why, or compares statistics)."""
    npu, bench = write_seed_pair(tmp_path)
    files = sum(f.stat().st_size for f in tmp_path.rglob("*.npy"))
    assert job_size([npu, bench]) == files < FUSED_BYTES
    monkeypatch.setattr(pool_module, "FUSED_BYTES", files // 2)
    assert job_size([npu, bench]) >= pool_module.FUSED_BYTES
    assert job_size([npu, tmp_path / "nowhere"]) == 0
    for folder in bench.rglob("*"):
        if folder.is_dir() and any(folder.glob("*.npy")):
            shutil.rmtree(folder)
    assert job_size([npu, bench]) == 0, "the bench has statistics only"


@pytest.mark.parametrize("fused", [False, True])
def test_either_pass_in_the_workers_gives_the_same_results(tmp_path, fused):
    tasks = _tasks(tmp_path, 6)
    with MetricPool(2, fused=fused) as pool:
        got = dict(pool.map(tasks))
    for i, t in enumerate(tasks):
        assert (got[i].cells, got[i].errors) == (run_task(t).cells, run_task(t).errors)
