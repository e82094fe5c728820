"""The live engine after a narrowing: the awaited tensor dump replaces the statistics comparison once
both sides hold one, and a dump written again over a statistics one, now with tensor files, is
compared again with its tensors."""

from __future__ import annotations

from pathlib import Path

from ptdbg_tui.compare.model import Status

FAST = {"quiet_s": 30.0, "rescan_s": 0.3, "watch": True}


def _write(make_dump, npu: Path, bench: Path, summary_only: bool, calls: int = 4) -> None:
    n, b = make_dump(npu, summary_only=summary_only), make_dump(bench, summary_only=summary_only)
    for i in range(calls):
        n.call("Torch_add", i, wrong=3.0 if i == 2 else 1.0, site=10 + i)
        b.call("Torch_add", i, site=10 + i)
    n.close()
    b.close()


def _summary(f) -> list[bool]:
    return [info.summary for info, _ in f.engine.pairs()]


def test_the_awaited_dump_replaces_the_statistics_comparison(tmp_path, make_dump, follow):
    npu, bench = tmp_path / "stats" / "npu", tmp_path / "stats" / "bench"
    _write(make_dump, npu, bench, summary_only=True)
    f = follow(npu, bench, **FAST)
    f.wait(lambda s: s.progress.done and s.progress.rows == 8 and s.diagnoses)
    (old,) = f.seen.rows
    assert _summary(f) == [True]

    narrowed = tmp_path / "narrow"
    f.engine.narrow_to(narrowed / "npu", narrowed / "bench")
    assert f.engine.awaited == (narrowed / "npu", narrowed / "bench")
    _write(make_dump, narrowed / "npu", narrowed / "bench", summary_only=False, calls=3)
    seen = f.wait(
        lambda s: (
            old not in s.rows
            and s.progress.done
            and s.progress.rows == 6
            and any(d.suspects for key, d in s.diagnoses.items() if key != old)
        )
    )
    (new,) = seen.rows
    assert new.startswith(str(narrowed / "npu")) and _summary(f) == [False]
    assert seen.statuses()["Torch_add_2_forward_output.0"] is Status.FAIL
    assert seen.diagnoses[new].culprit.call == "Torch_add_2_forward"
    assert f.engine.awaited is None and f.engine.npu_root == narrowed / "npu"
    assert any(n.startswith("The narrowed dump arrived: comparing ") for n in seen.notices)
    assert seen.progress.npu is not None and seen.progress.npu.path == str(narrowed / "npu")


def test_a_tensor_dump_written_over_the_statistics_one_is_compared_with_its_tensors(
    tmp_path, make_dump, follow
):
    npu, bench = tmp_path / "npu", tmp_path / "bench"
    _write(make_dump, npu, bench, summary_only=True)
    f = follow(npu, bench, **FAST)
    f.wait(lambda s: s.progress.done and s.progress.rows == 8)
    assert _summary(f) == [True]
    _write(make_dump, npu, bench, summary_only=False)  # the same step and rank, same folders
    f.wait(lambda s: _summary(f) == [False] and s.progress.done and s.progress.rows == 8)
    ((info, rows),) = f.engine.pairs()
    assert not info.summary and all(r.result is not None and r.result.cosine is not None for r in rows)
