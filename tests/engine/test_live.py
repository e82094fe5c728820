"""The live engine on real folders: static compare, live growth, the unmatched rule, npy lag,
resets, new steps, malformed lines."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from ptdbg_tui.compare.model import Status
from ptdbg_tui.compare.report.csv_ptdbg import write_csv
from ptdbg_tui.compare.report.words import side_detail_text
from ptdbg_tui.engine.batch import compare_dumps
from ptdbg_tui.engine.live.loop import LiveEngine
from ptdbg_tui.engine.live.options import LiveOptions
from ptdbg_tui.engine.live.updates import EngineUpdate
from ptdbg_tui.formats.layout import rank_dir_path
from ptdbg_tui.formats.writer import RankWriter

FAST = {"quiet_s": 30.0, "rescan_s": 0.5}  # nothing becomes final by quietness during a test


def _two_sides(tmp_path: Path, make_dump, wrong_call: int | None = 1, calls: int = 3) -> tuple[Path, Path]:
    npu, bench = tmp_path / "npu", tmp_path / "bench"
    n, b = make_dump(npu), make_dump(bench)
    for i in range(calls):
        n.call("Torch_add", i, wrong=3.0 if i == wrong_call else 1.0, site=10 + i)
        b.call("Torch_add", i, site=10 + i)
    for i in reversed(range(calls)):
        n.call("Torch_add", i, "backward")
        b.call("Torch_add", i, "backward")
    n.close()
    b.close()
    return npu, bench


def test_static_compare_finds_the_culprit_and_places_calls(tmp_path, make_dump, follow):
    npu, bench = _two_sides(tmp_path, make_dump)
    f = follow(npu, bench, watch=False)
    seen = f.wait(lambda s: s.progress.done and s.progress.rows == 12)
    statuses = seen.statuses()
    assert statuses["Torch_add_1_forward_output.0"] is Status.FAIL
    assert statuses["Torch_add_1_forward_input.0"] is Status.PASS
    assert sum(s is Status.PASS for s in statuses.values()) == 11
    (diagnosis,) = seen.diagnoses.values()
    assert [s.call for s in diagnosis.suspects] == ["Torch_add_1_forward"]
    (rows,) = seen.rows.values()
    path = [seg.label for seg in rows["Torch_add_1_forward_output.0"].path]
    assert path == ["Forward", "main  train.py:99", "forward  model.py:11", "Torch_add_1"]
    backward = [seg.label for seg in rows["Torch_add_1_backward_output.0"].path]
    assert backward == ["Backward", "main  train.py:99", "forward  model.py:11", "Torch_add_1"], (
        "a backward call sits where its forward call was made"
    )
    assert seen.progress.watching == "static" and seen.progress.compared == 12


def test_engine_rows_write_the_same_csv_as_the_batch_compare(tmp_path, make_dump, follow):
    npu, bench = _two_sides(tmp_path, make_dump)
    f = follow(npu, bench, watch=False)
    f.wait(lambda s: s.progress.done and s.progress.rows == 12)
    ((info, rows),) = f.engine.pairs()
    (outcome,) = compare_dumps(npu, bench, jobs=1)
    mine = write_csv(rows, tmp_path / "app", summary=info.summary)
    theirs = write_csv(outcome.rows, tmp_path / "cli", summary=outcome.summary)
    assert mine.read_text() == theirs.read_text()


def test_live_waits_for_missing_folders_then_fills(tmp_path, make_dump, follow):
    npu, bench = tmp_path / "later" / "npu", tmp_path / "later" / "bench"
    f = follow(npu, bench, **FAST)
    seen = f.wait(lambda s: s.progress.bench is not None and s.progress.bench.state == "missing")
    assert side_detail_text(seen.progress.npu) == f"waiting for {npu} to appear"
    assert f"NPU: waiting for {npu} to appear" in seen.notices
    n = make_dump(npu)
    n.call("Torch_add", 0, site=10)
    n.call("Torch_mul", 0, site=11)
    # NPU rows without a bench dump yet stay pending (the bench side may still come)
    seen = f.wait(lambda s: "Torch_add_0_forward_output.0" in s.statuses())
    assert set(seen.statuses().values()) == {Status.PENDING}
    b = make_dump(bench)
    b.call("Torch_add", 0, site=10)
    b.call("Torch_mul", 0, wrong=2.0, site=11)
    seen = f.wait(lambda s: s.statuses().get("Torch_mul_0_forward_output.0") is Status.FAIL)
    assert seen.statuses()["Torch_add_0_forward_output.0"] is Status.PASS
    seen = f.wait(
        lambda s: any(c.call == "Torch_mul_0_forward" for d in s.diagnoses.values() for c in d.suspects)
    )
    assert seen.progress.watching in ("inotify", "polling")


def test_one_sided_row_is_unmatched_once_the_other_side_moved_past_it(tmp_path, make_dump, follow):
    npu, bench = tmp_path / "npu", tmp_path / "bench"
    n, b = make_dump(npu), make_dump(bench)
    n.call("Torch_add", 0)
    n.call("Torch_extra", 0)  # NPU only, in the middle
    n.call("Torch_add", 1)
    n.call("Torch_tail", 0)  # NPU only, at the end: the bench may still produce it
    b.call("Torch_add", 0)
    b.call("Torch_add", 1)
    f = follow(npu, bench, **FAST)
    f.wait(lambda s: s.statuses().get("Torch_add_1_forward_output.0") is Status.PASS)
    # both one-sided rows were decided in the same pass: only the one the bench moved past is final
    assert f.seen.statuses()["Torch_extra_0_forward_output.0"] is Status.UNMATCHED
    assert f.seen.statuses()["Torch_tail_0_forward_output.0"] is Status.PENDING
    b.call("Torch_tail", 0)
    f.wait(lambda s: s.statuses().get("Torch_tail_0_forward_output.0") is Status.PASS)
    assert Status.UNMATCHED not in f.seen.ever["Torch_tail_0_forward_output.0"]


def test_one_sided_row_is_unmatched_once_the_other_side_is_quiet(tmp_path, make_dump, follow):
    npu, bench = tmp_path / "npu", tmp_path / "bench"
    n, b = make_dump(npu), make_dump(bench)
    n.call("Torch_add", 0)
    n.call("Torch_tail", 0)
    b.call("Torch_add", 0)
    b.call("Torch_bench_only", 0)
    f = follow(npu, bench, quiet_s=0.3, rescan_s=0.5)
    seen = f.wait(
        lambda s: (
            s.statuses().get("Torch_tail_0_forward_output.0") is Status.UNMATCHED
            and s.statuses().get("bench:Torch_bench_only_0_forward_output.0") is Status.UNMATCHED
        )
    )
    placed = seen.rows[str(n.writer.pkl)]["bench:Torch_bench_only_0_forward_output.0"]
    assert placed.row.result.message == "No NPU data matched."


def test_missing_npy_of_a_live_dump_is_retried_not_final(tmp_path, make_dump, follow):
    npu, bench = tmp_path / "npu", tmp_path / "bench"
    n, b = make_dump(npu), make_dump(bench)
    for side in (n, b):
        side.call("Torch_add", 0, with_npy=side is b)  # the original tool: line first, data later
        side.call("Torch_mul", 0)
    f = follow(npu, bench, **FAST)
    # mul is compared in the same round, after add: add was tried while its npy was missing
    f.wait(lambda s: s.statuses().get("Torch_mul_0_forward_output.0") is Status.PASS)
    assert f.seen.statuses()["Torch_add_0_forward_output.0"] is Status.PENDING
    for name in ("Torch_add_0_forward_input.0", "Torch_add_0_forward_output.0"):
        n.writer.save_npy(name, np.load(b.writer.npy_dir / f"{name}.npy"))
    seen = f.wait(lambda s: s.statuses().get("Torch_add_0_forward_output.0") is Status.PASS)
    assert Status.ERROR not in seen.ever["Torch_add_0_forward_output.0"]


def test_missing_npy_is_an_error_in_a_static_compare(tmp_path, make_dump, follow):
    npu, bench = tmp_path / "npu", tmp_path / "bench"
    make_dump(npu).call("Torch_add", 0, with_npy=False)
    make_dump(bench).call("Torch_add", 0)
    f = follow(npu, bench, watch=False)
    seen = f.wait(lambda s: s.progress.done and s.progress.rows == 2)
    placed = seen.rows[next(iter(seen.rows))]["Torch_add_0_forward_output.0"]
    assert placed.row.result.status is Status.ERROR and "not found" in placed.row.result.message


def test_a_restarted_dump_replaces_its_rows(tmp_path, make_dump, follow):
    npu, bench = _two_sides(tmp_path, make_dump, wrong_call=None, calls=2)
    f = follow(npu, bench, **FAST)
    f.wait(lambda s: s.progress.rows == 8 and s.progress.compared == 8)
    w = RankWriter(rank_dir_path(npu, 0, 0))  # a new run of the dumper deletes and rewrites the pkl
    try:
        # the rows' removal and the progress may come in two drains: wait for both
        f.wait(lambda s: not s.statuses() and s.progress.npu_seen == 0)
    finally:
        w.close()


def test_a_new_step_is_picked_up(tmp_path, make_dump, follow):
    npu, bench = _two_sides(tmp_path, make_dump, wrong_call=None, calls=1)
    f = follow(npu, bench, **FAST)
    f.wait(lambda s: s.progress.compared == 4)
    n1, b1 = make_dump(npu, step=1), make_dump(bench, step=1)
    n1.call("Torch_mul", 0, wrong=5.0)
    b1.call("Torch_mul", 0)
    seen = f.wait(lambda s: len(s.rows) == 2 and s.progress.compared == 6)
    assert seen.progress.pairs == 2
    step1 = seen.rows[str(n1.writer.pkl)]
    assert step1["Torch_mul_0_forward_output.0"].row.result.status is Status.FAIL


def test_malformed_lines_are_reported_once(tmp_path, make_dump, follow):
    npu, bench = _two_sides(tmp_path, make_dump, wrong_call=None, calls=1)
    pkl = rank_dir_path(npu, 0, 0) / "api_stack_dump.pkl"
    with open(pkl, "a") as f:
        f.write('["broken", 0\n')
    fl = follow(npu, bench, watch=False)
    seen = fl.wait(lambda s: s.progress.done and s.progress.rows == 4)
    bad = [n for n in seen.notices if "malformed" in n]
    assert len(bad) == 1 and "line 7" in bad[0]


def test_summary_mode_without_npy(tmp_path, make_dump, follow):
    npu, bench = tmp_path / "npu", tmp_path / "bench"
    make_dump(npu, summary_only=True).call("Torch_add", 0, wrong=2.0)
    make_dump(bench, summary_only=True).call("Torch_add", 0)
    f = follow(npu, bench, watch=False)
    seen = f.wait(lambda s: s.progress.done and s.progress.rows == 2)
    ((info, _),) = f.engine.pairs()
    assert info.summary
    out = seen.rows[info.key]["Torch_add_0_forward_output.0"].row.result
    assert out.status is Status.FAIL and len(out.cells) == 4


def test_a_data_file_fixed_later_is_compared_again_without_a_change_of_the_pkl(tmp_path, make_dump, follow):
    """A tensor file that is a folder, then cut short, then whole again: each time the row shows
    what the file is now; the pkl is never touched (a rescan looks at failed rows' files)."""
    npu, bench = _two_sides(tmp_path, make_dump, wrong_call=None)
    npy = rank_dir_path(npu, 0, 0) / "api_stack_dump" / "Torch_add_1_forward_output.0.npy"
    good = npy.read_bytes()
    npy.unlink()
    npy.mkdir()
    f = follow(npu, bench, quiet_s=0.2, rescan_s=0.2)
    name = "Torch_add_1_forward_output.0"

    def shows(status: Status, text: str = ""):
        def holds(s) -> bool:
            placed = s.rows and next(iter(s.rows.values())).get(name)
            return bool(placed) and placed.row.status is status and text in placed.row.result.message

        return holds

    f.wait(shows(Status.ERROR, "is a directory"))
    npy.rmdir()
    npy.write_bytes(good[:-8])
    f.wait(shows(Status.ERROR, "truncated"))
    with npy.open("r+b") as out:  # rewritten in place: same file, other size
        out.write(good)
    seen = f.wait(shows(Status.PASS))
    assert all(st is Status.PASS for st in seen.statuses().values())


def test_a_pass_lists_every_pair_first_then_sends_each_pair_as_it_is_done(tmp_path, make_dump):
    """The app shows every pair found before any is read, then each pair's rows and verdict as soon as
    that pair is compared, not all of them at the end of the pass (an LLM job of 16 pairs showed
    nothing for its first 7 s)."""
    npu, bench = tmp_path / "npu", tmp_path / "bench"
    for rank in range(3):
        n, b = make_dump(npu, rank=rank, summary_only=True), make_dump(bench, rank=rank, summary_only=True)
        for i in range(4):
            n.call("Torch_add", i, wrong=3.0 if rank == 1 and i == 2 else 1.0)
            b.call("Torch_add", i)
        n.close()
        b.close()
    updates: list[EngineUpdate] = []
    done = threading.Event()

    def taken() -> None:  # as the app does, on every notification: here on the engine's thread
        update = engine.outbox.take()
        if update is not None:
            updates.append(update)
            if update.progress is not None and update.progress.done:
                done.set()

    engine = LiveEngine(npu, bench, LiveOptions(watch=False, flush_s=0.0), taken)
    engine.start()
    try:
        assert done.wait(20), "the pass did not end"
    finally:
        engine.stop()
    keys = [str(next((npu).rglob(f"rank{r}/*.pkl"))) for r in range(3)]
    assert list(updates[0].pairs) == keys and not any(d.upserts for d in updates[0].pairs.values())
    sent = [[k for k, d in u.pairs.items() if d.upserts] for u in updates]
    assert [k for k in sent if k] == [[keys[0]], [keys[1]], [keys[2]]], "one pair at a time, in order"
    judged = [k for u in updates for k, d in u.pairs.items() if d.diagnosis is not None]
    assert judged[:3] == keys, "each pair's verdict with its rows"


def test_a_rescan_that_finds_nothing_new_tells_the_app_nothing_new(tmp_path, make_dump):
    """Each pass sends a pair's news as soon as it has some; a rescan of quiet dumps has none, so the app
    must not be told 'comparing' and then 'done' again every rescan (its header flipped every 2 s)."""
    npu, bench = _two_sides(tmp_path, make_dump)
    taken: list[EngineUpdate] = []

    def take() -> None:  # as the app does, at each notification
        if (update := engine.outbox.take()) is not None:
            taken.append(update)

    engine = LiveEngine(npu, bench, LiveOptions(watch=False, flush_s=0.0), take)
    for _ in range(2):  # the engine's loop, run here: a rescan, a pass, the flush after it
        first = len(taken)
        engine._rescan()
        engine._pass(rescan=True)
        engine.outbox.flush(force=True)
    assert taken[0].pairs, "the first pass sends the pair"
    again = taken[first:]
    assert all(not u.pairs for u in again)
    assert [u.progress.done for u in again if u.progress is not None] in ([], [True]), again


def test_a_watched_engine_that_settled_says_done_and_then_nothing(tmp_path, make_dump):
    """The notification's rate limit holds the last pass's 'done' back a moment; the next pass, finding
    nothing, replaced it with 'comparing' before it went out, pass after pass: a settled comparison
    never said it was done (the app waited for good, on an idle machine)."""
    npu, bench = _two_sides(tmp_path, make_dump)
    taken: list[EngineUpdate] = []
    done, rescans = threading.Event(), threading.Semaphore(0)

    class Counted(LiveEngine):
        def _rescan(self) -> None:
            super()._rescan()
            rescans.release()

    def take() -> None:  # as the app does, at each notification
        if (update := engine.outbox.take()) is not None:
            taken.append(update)
            if update.progress is not None and update.progress.done:
                done.set()

    options = LiveOptions(watch=True, quiet_s=0.0, rescan_s=0.02, flush_s=0.5)  # a pass is far shorter
    engine = Counted(npu, bench, options, take)
    engine.start()
    try:
        assert done.wait(20), f"never done: {[u.progress for u in taken]}"
        after = len(taken)
        for _ in range(30):  # the rescans after it, each with its pass and flush
            assert rescans.acquire(timeout=10)
        assert taken[after:] == [], "an idle engine has nothing to tell"
    finally:
        engine.stop()
