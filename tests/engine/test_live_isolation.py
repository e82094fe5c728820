"""Fault isolation in the live engine: a pair whose pass fails is a notice and is retried on the
next change while the other pairs go on; anything that escapes a pass restarts the engine."""

from __future__ import annotations

import threading

from ptdbg_tui.compare.model import Status
from ptdbg_tui.engine import pipeline
from ptdbg_tui.engine.live.loop import LiveEngine
from ptdbg_tui.formats.layout import rank_dir_path
from ptdbg_tui.formats.naming import stack_name
from ptdbg_tui.formats.pkl_line import encode_stack_line

FAST = {"quiet_s": 30.0, "rescan_s": 0.3}


def test_a_failing_pair_is_a_notice_and_recovers_on_the_next_change(tmp_path, make_dump, follow, monkeypatch):
    npu, bench = tmp_path / "npu", tmp_path / "bench"
    for step, api in ((0, "Torch_add"), (1, "Torch_mul")):
        make_dump(npu, step=step).call(api, 0)
        make_dump(bench, step=step).call(api, 0)
    broken = threading.Event()
    broken.set()
    real = pipeline.diagnose  # a pair's stages: what the live pair runs

    def diagnose(rows, step=None, keywords=None):
        if broken.is_set() and any(r.name.startswith("Torch_mul") for r in rows):
            raise RuntimeError("a bug in the diagnosis")
        return real(rows)

    monkeypatch.setattr(pipeline, "diagnose", diagnose)
    f = follow(npu, bench, **FAST)
    seen = f.wait(lambda s: s.progress.faults and s.progress.compared >= 2)
    (fault,) = seen.progress.faults
    assert fault.startswith("step1/rank0: comparing failed (RuntimeError: a bug in the diagnosis)")
    assert fault in seen.notices
    statuses = seen.statuses()
    assert statuses["Torch_add_0_forward_output.0"] is Status.PASS  # the other pair went on
    broken.clear()
    pkl = rank_dir_path(npu, 0, 1) / "api_stack_dump.pkl"
    with pkl.open("a") as out:  # a change to the failed pair: it is tried again
        out.write(encode_stack_line(stack_name("Torch_mul_1_forward"), []) + "\n")
    f.wait(
        lambda s: (
            not s.progress.faults
            and s.statuses().get("Torch_mul_0_forward_output.0") is not None
            and len(s.diagnoses) == 2
        )
    )
    assert f.engine._thread.is_alive()


def test_an_error_that_escapes_a_pass_restarts_the_engine(tmp_path, make_dump, follow, monkeypatch):
    npu, bench = tmp_path / "npu", tmp_path / "bench"
    make_dump(npu).call("Torch_add", 0)
    make_dump(bench).call("Torch_add", 0)
    real = LiveEngine._pass
    calls = []

    def once(self, rescan=False):
        calls.append(rescan)
        if len(calls) == 1:
            raise RuntimeError("unforeseen")
        return real(self, rescan)

    monkeypatch.setattr(LiveEngine, "_pass", once)
    f = follow(npu, bench, **FAST)
    seen = f.wait(lambda s: s.statuses().get("Torch_add_0_forward_output.0") is Status.PASS)
    assert any("hit an unexpected error (RuntimeError: unforeseen) and restarted" in n for n in seen.notices)
    assert f.engine._thread.is_alive()
