"""A big pair of statistics is judged in a worker process beside the app: the same diagnosis as the
engine's own, naming the engine's rows; where the worker cannot judge what the engine read, the engine
judges it itself."""

from __future__ import annotations

import gc
import os
import time
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path

import pytest

from ptdbg_tui.engine.live import judging
from ptdbg_tui.engine.live.judging import Expected, Judges, judge_files, names_of
from ptdbg_tui.engine.live.pair import Pending
from ptdbg_tui.engine.live.side import SideState
from ptdbg_tui.formats.layout import discover


def _pair(tmp_path: Path, make_dump, ranks: int = 3) -> tuple[Path, Path]:
    """Statistics of 8 chained calls on each rank, the 5th 30% off on the NPU side of every rank."""
    npu, bench = tmp_path / "npu", tmp_path / "bench"
    for rank in range(ranks):
        n, b = make_dump(npu, rank=rank, summary_only=True), make_dump(bench, rank=rank, summary_only=True)
        for i in range(8):
            n.call("Torch_tanh", i, wrong=1.3 if i == 4 else 1.0, site=10 + i, with_npy=False)
            b.call("Torch_tanh", i, site=10 + i, with_npy=False)
        n.close()
        b.close()
    past = time.time() - 60  # finished a minute ago: quiet at once for a watching engine
    for path in tmp_path.rglob("*"):
        os.utime(path, (past, past))
    return npu, bench


def _spy(monkeypatch) -> list[tuple]:
    """The pairs sent to the worker, as they are sent."""
    sent: list[tuple] = []
    submit = Judges.submit

    def spied(self, *args):
        sent.append(args)
        return submit(self, *args)

    monkeypatch.setattr(Judges, "submit", spied)
    return sent


def _judged(follow, npu: Path, bench: Path, jobs: int, watch: bool):
    f = follow(npu, bench, jobs=jobs, watch=watch, quiet_s=0.2, rescan_s=0.5, start=False)
    judges = f.engine._judges
    if judges is not None:  # until its worker has started, the engine judges its pairs itself
        judges.start()
        judges._ready.result(timeout=60)
    f.engine.start()
    pairs = f.engine._pairs
    f.wait(
        lambda s: (
            s.progress.done
            and len(s.diagnoses) == len(pairs)
            and all(p.pending is None and p.clock.diagnosis is not None for p in pairs.values())
        )
    )
    # the first pair is judged here (the app's first verdict), the second by the worker while the engine
    # reads the third, which it judges itself (no other pair waits)
    return f, list(pairs.values())[min(1, len(pairs) - 1)]


@pytest.mark.parametrize("watch", [False, True], ids=["static", "watched"])
def test_the_worker_judges_a_big_pair_as_the_engine_does_and_names_its_rows(
    tmp_path, make_dump, follow, monkeypatch, watch
):
    npu, bench = _pair(tmp_path, make_dump)
    here, mine = _judged(follow, npu, bench, jobs=1, watch=watch)
    assert here.engine._judges is None
    monkeypatch.setattr("ptdbg_tui.engine.live.pair.WORKER_ROWS", 1)  # this pair counts as big
    sent = _spy(monkeypatch)
    _, theirs = _judged(follow, npu, bench, jobs=2, watch=watch)
    assert len(sent) == 1, "the pair was not sent to the worker"
    assert theirs.to_worker, "the worker could not judge it"
    d = theirs.clock.dumps
    assert d is not None and [s.call for s in d.suspects] == ["Torch_tanh_4_forward"]
    assert repr(d) == repr(mine.clock.dumps)
    own = {id(x) for r in theirs.rows for x in (r, r.npu, r.bench, r.result)}
    named = [x for s in d.suspects for r in s.rows for x in (r, r.npu, r.bench, r.result)]
    assert named and all(id(x) in own for x in named), "the diagnosis holds copies, not the engine's rows"


def test_where_the_worker_reads_other_rows_the_engine_judges_the_pair_itself(
    tmp_path, make_dump, follow, monkeypatch
):
    npu, bench = _pair(tmp_path, make_dump)
    monkeypatch.setattr("ptdbg_tui.engine.live.pair.WORKER_ROWS", 1)
    monkeypatch.setattr("ptdbg_tui.engine.live.pair.names_of", lambda rows: 0)  # the worker's never match
    sent = _spy(monkeypatch)
    f, _ = _judged(follow, npu, bench, jobs=2, watch=False)
    # the second pair at least; the third too where the second came back before the engine judged it
    # (a pair the worker could not judge waits for the engine again)
    refused = {args[0].records for args in sent}
    assert refused
    for pair in f.engine._pairs.values():
        assert pair.to_worker is (pair.info.npu.records not in refused)
        d = pair.clock.dumps
        assert d is not None and [s.call for s in d.suspects] == ["Torch_tanh_4_forward"]


def test_the_worker_judges_only_the_files_the_engine_read(tmp_path, make_dump):
    npu, bench = _pair(tmp_path, make_dump, ranks=1)
    (n,), (b,) = discover(npu), discover(bench)
    sides = [SideState(n), SideState(b)]
    for side in sides:
        side.poll(final=True)
    assert sides[0].mark is not None and sides[1].mark is not None
    from ptdbg_tui.engine.pipeline import match_pair

    rows = match_pair(sides[0].records(), sides[1].records(), "auto").rows
    expected = Expected((sides[0].mark, sides[1].mark), len(rows), names_of(rows))
    judged = judge_files(n, b, "auto", True, expected)
    assert judged is not None
    d = judging.diagnosis_of(judged, rows)
    assert [s.call for s in d.suspects] == ["Torch_tanh_4_forward"]
    assert all(r in rows for s in d.suspects for r in s.rows)
    assert judge_files(n, b, "auto", True, expected._replace(names=expected.names + 1)) is None
    assert judge_files(n, b, "auto", True, expected._replace(rows=len(rows) - 1)) is None
    with n.records.open("a") as f:  # the NPU side grew since the engine read it
        f.write("\n")
    assert judge_files(n, b, "auto", True, expected) is None


def test_the_worker_reads_and_judges_without_collections(tmp_path, make_dump, monkeypatch):
    """A third of its time went to young collections scanning the pair's records and rows as they were
    built; the collector is back once the pair is judged."""
    npu, bench = _pair(tmp_path, make_dump, ranks=1)
    (n,), (b,) = discover(npu), discover(bench)
    sides = [SideState(n), SideState(b)]
    for side in sides:
        side.poll(final=True)
    from ptdbg_tui.engine.pipeline import match_pair

    rows = match_pair(sides[0].records(), sides[1].records(), "auto").rows
    expected = Expected((sides[0].mark, sides[1].mark), len(rows), names_of(rows))
    collecting: list[bool] = []
    poll = SideState.poll

    def polled(self, final: bool) -> None:
        collecting.append(gc.isenabled())
        poll(self, final)

    monkeypatch.setattr(SideState, "poll", polled)
    assert gc.isenabled()
    assert judge_files(n, b, "auto", True, expected) is not None
    assert collecting == [False, False]
    assert gc.isenabled()


@pytest.mark.parametrize("ranks", [1, 2])
def test_the_first_pair_and_the_last_are_judged_by_the_engine(
    tmp_path, make_dump, follow, monkeypatch, ranks
):
    """The first: the app's first verdict comes sooner; the last: the engine would only wait for the
    worker."""
    npu, bench = _pair(tmp_path, make_dump, ranks=ranks)
    monkeypatch.setattr("ptdbg_tui.engine.live.pair.WORKER_ROWS", 1)
    sent = _spy(monkeypatch)
    f, _ = _judged(follow, npu, bench, jobs=2, watch=False)
    assert not sent
    for pair in f.engine._pairs.values():
        d = pair.clock.dumps
        assert d is not None and [s.call for s in d.suspects] == ["Torch_tanh_4_forward"]


def test_a_worker_that_died_leaves_every_pair_to_the_engine(tmp_path, make_dump, follow, monkeypatch):
    npu, bench = _pair(tmp_path, make_dump)
    monkeypatch.setattr("ptdbg_tui.engine.live.pair.WORKER_ROWS", 1)
    f = follow(npu, bench, jobs=2, watch=False, start=False)
    judges = f.engine._judges
    judges.start()
    judges._ready.result(timeout=60)
    (worker,) = judges._pool._processes.values()
    worker.kill()
    worker.join(timeout=60)
    f.engine.start()
    pairs = f.engine._pairs
    f.wait(
        lambda s: s.progress.done and len(s.diagnoses) == 3 and all(p.pending is None for p in pairs.values())
    )
    assert judges._broken
    for pair in pairs.values():
        d = pair.clock.dumps
        assert d is not None and [s.call for s in d.suspects] == ["Torch_tanh_4_forward"]


def test_a_pair_the_worker_has_not_begun_is_taken_back_when_the_engine_has_nothing_else_to_do(
    tmp_path, make_dump, follow
):
    npu, bench = _pair(tmp_path, make_dump, ranks=1)
    f, pair = _judged(follow, npu, bench, jobs=1, watch=False)
    judges = Judges(lambda: None)
    running, queued = Future(), Future()
    judges._queue += [running, queued]  # as submit() leaves them: the worker judges one at a time, in order
    for future, others_wait, taken in [
        (running, False, False),  # begun: its diagnosis is on its way
        (queued, True, False),  # the engine has a pair of its own to read first
        (queued, False, True),
    ]:
        ctx = replace(f.engine._context, judges=judges, others_wait=lambda _, w=others_wait: w)
        pair.pending = Pending(future, pair.rows)
        assert pair.take_back(ctx) is taken
        assert (pair.pending is None) is taken
