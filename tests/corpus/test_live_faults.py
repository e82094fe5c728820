"""Faults under the watching app: files deleted, truncated, replaced, turned into folders or made
unreadable, then restored. Each fault is shown for what it is, the engine goes on, and the restored
dump is compared again as before."""

from __future__ import annotations

import os
import shutil
import time

import pytest

from ptdbg_tui.app.app import PtdbgApp
from ptdbg_tui.compare.model import Status
from ptdbg_tui.engine.live.options import LiveOptions
from ptdbg_tui.formats.layout import rank_dir_path

WAIT_S = 30.0
ROWS = 12


def shown(bar) -> str:
    """What a bar of the app shows now, as plain text."""
    return "\n".join(line.plain for line in bar.lines)


@pytest.mark.timeout(180)
async def test_the_app_recovers_from_faults_under_it(tmp_path, dropped_dac, clean_rank_writer):
    write_clean_rank = clean_rank_writer
    npu_rank, bench_rank = (rank_dir_path(tmp_path / side, 0, 0) for side in ("npu", "bench"))
    write_clean_rank(npu_rank)
    write_clean_rank(bench_rank)
    pkl = npu_rank / "api_stack_dump.pkl"
    original = pkl.read_bytes()
    npy = npu_rank / "api_stack_dump" / "Tensor_add_0_forward_input.0.npy"
    npy_bytes = npy.read_bytes()
    notices: list[str] = []
    with dropped_dac():  # "unreadable" must mean unreadable, root or not
        app = PtdbgApp(
            tmp_path / "npu", tmp_path / "bench", LiveOptions(watch=True, jobs=1, quiet_s=0.3, rescan_s=0.3)
        )
        notify = app.notify
        app.notify = lambda message, **kw: (notices.append(message), notify(message, **kw))[1]
        async with app.run_test(size=(140, 40)) as pilot:

            async def until(what: str, condition) -> None:
                deadline = time.monotonic() + WAIT_S
                while not condition():
                    thread = app.engine._thread  # the app starts it once its first frame is out
                    assert thread.ident is None or thread.is_alive(), f"the engine stopped ({what})"
                    rows = [
                        (r.name, r.status, r.result and r.result.message)
                        for _, rs in app.engine.pairs()
                        for r in rs
                        if r.status is not Status.PASS
                    ]
                    assert time.monotonic() < deadline, f"{what}: {app.model.progress} {notices} {rows}"
                    await pilot.pause(0.05)

            def all_pass() -> bool:
                p = app.model.progress
                return p.rows == ROWS and app.model.status_counts()[Status.PASS] == ROWS and app.settled

            def said(text: str) -> bool:
                return any(text in n for n in notices) or text in shown(app.header_bar)

            def replace_pkl(data: bytes) -> None:  # a new file: what a restarted dump does
                tmp = pkl.with_name("new.tmp")
                tmp.write_bytes(data)
                os.replace(tmp, pkl)

            await until("the clean dump compared", all_pass)

            pkl.unlink()
            await until("the deleted pkl noticed", lambda: app.model.progress.npu.state == "no dump")
            assert "No operator introduces" not in shown(app.diagnosis_bar)
            replace_pkl(original)
            await until("the restored pkl compared", all_pass)

            with pkl.open("r+b") as f:
                f.truncate(len(original) // 2)
            await until("the truncated pkl shown", lambda: app.model.progress.npu_seen < ROWS)
            replace_pkl(original)
            await until("the pkl after truncation compared", all_pass)

            replace_pkl(original.replace(b"Tensor_add_0_forward_input.0", b"Tensor_add_0_forward_input.9"))
            await until("the replaced pkl compared", lambda: app.model.status_counts()[Status.UNMATCHED] == 2)
            replace_pkl(original)
            await until("the pkl after replacement compared", all_pass)

            pkl.unlink()
            pkl.mkdir()
            await until("the pkl as a folder noticed", lambda: said("is a directory"))
            pkl.rmdir()
            replace_pkl(original)
            await until("the pkl after the folder compared", all_pass)

            pkl.chmod(0)
            await until("the unreadable pkl noticed", lambda: said("permission denied"))
            assert app.model.progress.rows == ROWS  # what was read stays
            pkl.chmod(0o640)
            notices.clear()
            replace_pkl(original + b"\n")  # a change: the side is read again
            await until("the readable pkl compared", all_pass)

            npy.unlink()
            npy.mkdir()
            replace_pkl(original)
            await until("the npy as a folder shown", lambda: app.model.status_counts()[Status.ERROR] == 1)
            npy.rmdir()
            npy.write_bytes(npy_bytes)
            replace_pkl(original + b"\n")
            await until("the restored npy compared", all_pass)

            shutil.rmtree(tmp_path / "bench")
            await until("the deleted bench noticed", lambda: app.model.progress.bench.state == "missing")
            assert "No operator introduces" not in shown(app.diagnosis_bar)
            write_clean_rank(bench_rank)
            await until("the rewritten bench compared", all_pass)
            assert "No operator introduces" in shown(app.diagnosis_bar)
