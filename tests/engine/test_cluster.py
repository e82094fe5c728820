"""``--cluster``: a real Dask cluster of worker processes (one of which serves rank 0 only), a worker
killed in the middle of a compare, tensors split into parts; CSV cells as in the local run."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import sys
import threading

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

from ptdbg_tui.cli import report_text  # noqa: E402
from ptdbg_tui.compare.report.words import job_note_text, rank_headline  # noqa: E402
from ptdbg_tui.engine import batch as batch_module  # noqa: E402
from ptdbg_tui.engine.batch import compare_dumps, scan_roots  # noqa: E402
from ptdbg_tui.engine.live.loop import LiveEngine  # noqa: E402
from ptdbg_tui.engine.live.options import LiveOptions  # noqa: E402
from ptdbg_tui.engine.workers import cluster as cluster_module  # noqa: E402
from ptdbg_tui.engine.workers.cluster import ROOTS_ENV, ClusterError, ClusterPool, check_address  # noqa: E402
from ptdbg_tui.engine.workers.pool import THREAD_ENV  # noqa: E402
from ptdbg_tui.engine.workers.tasks import CompareTask, run_task  # noqa: E402
from ptdbg_tui.formats.layout import rank_dir_path  # noqa: E402
from ptdbg_tui.formats.synthetic import write_ranks_pair  # noqa: E402

WAIT_S = 60


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    root = tmp_path_factory.mktemp("ranks")
    npu, bench = write_ranks_pair(root, ranks=2, faulty_rank=1, width=64, rows=32)
    return root, npu, bench


@pytest.fixture(scope="module")
def cluster(dumps):
    """Worker ``near`` reads only rank 0's folders (as a node holding rank 0 on its own disk); ``far``
    reads everything (shared storage)."""
    _, npu, bench = dumps
    rank0 = os.pathsep.join(str(rank_dir_path(side, 0, step=0)) for side in (npu, bench))
    env = dict(THREAD_ENV, PYTHONPATH=os.pathsep.join(sys.path))
    spec = {
        name: {"cls": distributed.Nanny, "options": {"nthreads": 1, "env": {**env, **extra}}}
        for name, extra in (("near", {ROOTS_ENV: rank0}), ("far", {}))
    }
    scheduler = {"cls": distributed.Scheduler, "options": {"dashboard_address": ":0"}}
    with (
        distributed.SpecCluster(workers=spec, scheduler=scheduler, silence_logs=logging.ERROR) as c,
        distributed.Client(c) as client,
    ):
        client.wait_for_workers(2, timeout=WAIT_S)
        yield c


def _workers(cluster) -> dict[str, str]:
    """Worker name -> address."""
    with distributed.Client(cluster.scheduler_address) as client:
        info = client.scheduler_info()["workers"]
    return {w["name"]: addr for addr, w in info.items()}


def _cells(run):
    return [[(r.name, r.result.cells, r.result.message) for r in o.rows] for o in run]


def test_cluster_gives_the_local_csv_and_verdict(cluster, dumps):
    _, npu, bench = dumps
    local = compare_dumps(npu, bench, jobs=1)
    remote = compare_dumps(npu, bench, cluster=cluster.scheduler_address)
    assert _cells(remote) == _cells(local)
    assert remote.ranks.first is not None and remote.ranks.first.view.rank == 1
    assert rank_headline(remote.ranks) == rank_headline(local.ranks)
    workers = _workers(cluster)
    assert remote.placements[workers["far"]] >= 2  # rank 1's pair and its tensors can only go there
    assert sum(remote.placements.values()) >= 4
    assert f"cluster {cluster.scheduler_address}: " in report_text(remote)


def test_a_pair_of_statistics_is_diagnosed_by_the_worker_that_read_it(cluster, dumps, monkeypatch):
    """Beside the other pairs, where its sidecars are: not one after the other in this process."""
    _, npu, bench = dumps
    local = compare_dumps(npu, bench, summary=True, jobs=1)

    def here(*_: object) -> None:
        raise AssertionError("diagnosed in the command's process")

    monkeypatch.setattr(batch_module, "judge_pair", here)  # this process's only: the workers are others
    remote = compare_dumps(npu, bench, summary=True, cluster=cluster.scheduler_address)
    assert [o.diagnosis.fault for o in remote] == ["", ""]
    assert [_culprit(o) for o in remote] == [_culprit(o) for o in local]
    assert _culprit(remote[1]) is not None
    assert rank_headline(remote.ranks) == rank_headline(local.ranks)


def _culprit(o) -> str | None:
    culprit = o.diagnosis.culprit
    return culprit.call if culprit is not None else None


def test_pairs_slower_to_fetch_than_a_look_at_the_cluster_still_come_back(cluster, dumps, monkeypatch):
    """A pair's rows are fetched once: a fetch given up after HEAL_S made the worker serialize them
    again and again (an LLM job's 9,000-row pairs take ~0.7 s: ``--cluster`` never ended)."""
    _, npu, bench = dumps
    monkeypatch.setattr(cluster_module, "HEAL_S", 1e-4)  # any fetch takes longer
    done: list[object] = []
    worker = threading.Thread(
        target=lambda: done.append(
            compare_dumps(npu, bench, summary=True, cluster=cluster.scheduler_address)
        ),
        daemon=True,
    )
    worker.start()
    worker.join(WAIT_S)
    assert done, "the compare did not end"
    assert _cells(done[0]) == _cells(compare_dumps(npu, bench, summary=True, jobs=1))


def test_a_worker_that_cannot_see_a_rank_gets_none_of_its_tasks(cluster, dumps):
    _, npu, bench = dumps
    with ClusterPool(cluster.scheduler_address) as pool:
        found = pool.scan([str(npu), str(bench)], scan_roots)[0].dumps
        workers = _workers(cluster)
        rank1 = [str(rank_dir_path(side, 1, step=0)) for side in (npu, bench)]
        assert pool.eligible(rank1) == [workers["far"]]
        assert pool.eligible([str(rank_dir_path(npu, 0, step=0))]) == sorted(workers.values())
        tasks = _tasks_of(found[1].tensor_dir, rank_dir_path(bench, 1, step=0) / found[1].tensor_dir.name)
        got = dict(pool.map(tasks))
        assert set(pool.placements) == {workers["far"]}
    assert all(got[i].cells == run_task(t).cells for i, t in enumerate(tasks))


def _tasks_of(npu_dir, bench_dir) -> list[CompareTask]:
    out = []
    for path in sorted(npu_dir.glob("*.npy")):
        a = np.load(path)
        out.append(
            CompareTask(
                str(path),
                str(bench_dir / path.name),
                "torch.float32",
                "torch.float32",
                a.shape,
                a.shape,
                nbytes=2 * a.nbytes,
            )
        )
    return out


def _big_pair(folder, k: int, size: int) -> CompareTask:
    rng = np.random.default_rng(k)
    b = rng.standard_normal(size).astype(np.float32)
    n = b * (1 + np.float32(1e-3) * rng.standard_normal(size).astype(np.float32))
    n[k * 1000] = 7.0
    paths = [folder / f"n{k}.npy", folder / f"b{k}.npy"]
    np.save(paths[0], n)
    np.save(paths[1], b)
    return CompareTask(
        str(paths[0]), str(paths[1]), "torch.float32", "torch.float16", n.shape, b.shape, nbytes=2 * n.nbytes
    )


def test_what_is_wrong_in_the_dump_s_folders_is_said_as_a_local_compare_says_it(cluster, tmp_path):
    """The notes of a local compare, in its order: a rank folder whose pkl is a folder (the workers
    found it), a pair of statistics only (a bench without its npy folder), names that repeat."""
    npu, bench = write_ranks_pair(tmp_path, ranks=2, faulty_rank=1, width=16, rows=8)
    (rank_dir_path(npu, 2, step=0) / "api_stack_dump.pkl").mkdir(parents=True)
    shutil.rmtree(rank_dir_path(bench, 1, step=0) / "api_stack_dump")
    pkl = rank_dir_path(npu, 0, step=0) / "api_stack_dump.pkl"
    with pkl.open("a") as f:
        f.write(pkl.read_text().splitlines()[0] + "\n")
    local = [job_note_text(n) for n in compare_dumps(npu, bench, jobs=1).notes]
    remote = [job_note_text(n) for n in compare_dumps(npu, bench, cluster=cluster.scheduler_address).notes]
    assert [w for w in ("is a directory", "statistics only", "duplicate") if any(w in n for n in local)] == [
        "is a directory",
        "statistics only",
        "duplicate",
    ]
    assert remote == local


def test_a_call_that_raises_comes_back_as_its_value_not_as_a_failed_task(cluster):
    """A failed task is logged by its worker, traceback and all, on the terminal of the command that
    started the cluster: a pkl that cannot be read is the user's input, said in one line of the report."""
    with distributed.Client(cluster.scheduler_address) as client:
        future = client.submit(cluster_module.located, int, "not a number", pure=False)
        worker, value = future.result(timeout=WAIT_S)
        assert future.status == "finished"
    assert isinstance(value, ValueError) and "not a number" in str(value)
    assert worker in _workers(cluster).values()


def test_a_worker_killed_mid_compare_loses_nothing(cluster, tmp_path):
    """The worker is killed once the first results are in: its running and queued tasks (batches and
    parts of split tensors) rerun elsewhere, and its restart is taken back in."""
    tasks = [_big_pair(tmp_path, k, (1 << 19) + 999 * k) for k in range(12)]
    workers = _workers(cluster)
    with distributed.Client(cluster.scheduler_address) as client:
        pids = client.run(os.getpid)
    victim = pids[workers["far"]]
    got = {}
    with ClusterPool(cluster.scheduler_address, batch_tasks=1, part_bytes=1 << 20) as pool:
        for i, result in pool.map(tasks, largest_first=True):
            if not got:
                os.kill(victim, signal.SIGKILL)
            got[i] = result
        assert pool.resubmitted > 0
    assert sorted(got) == list(range(len(tasks)))
    for i, t in enumerate(tasks):
        want = run_task(t)
        assert (got[i].cells, got[i].message, got[i].errors) == (want.cells, want.message, want.errors)
        assert got[i].worst_index == want.worst_index == (i * 1000,)
    with distributed.Client(cluster.scheduler_address) as client:
        client.wait_for_workers(2, timeout=WAIT_S)  # the nanny restarted it


def test_cluster_addresses_are_checked():
    for bad in ("local:0", "nowhere", "local:x"):
        with pytest.raises(ClusterError):
            check_address(bad)
    check_address("tcp://10.0.0.1:8786")
    check_address("local:4")


def test_the_live_engine_computes_on_the_cluster_and_names_the_rank(cluster, dumps):
    _, npu, bench = dumps
    seen = threading.Event()
    engine = LiveEngine(npu, bench, LiveOptions(watch=False, cluster=cluster.scheduler_address), seen.set)
    engine.start()
    notices: list[str] = []
    done = False
    try:
        while not done:
            assert seen.wait(WAIT_S), "the engine went quiet"
            seen.clear()
            update = engine.outbox.take()
            if update is not None:
                notices += update.notices
                done = update.progress is not None and update.progress.done
    finally:
        engine.stop(timeout=WAIT_S)
    assert f"Comparing tensors on the Dask cluster {cluster.scheduler_address}." in notices
    head = "First divergent rank: rank1 (step0): Functional_linear_1_forward"
    assert any(n.startswith(head) for n in notices)
    local = compare_dumps(npu, bench, jobs=1)
    for (_, rows), o in zip(engine.pairs(), local, strict=True):
        assert [(r.name, r.result.cells) for r in rows] == [(r.name, r.result.cells) for r in o.rows]
