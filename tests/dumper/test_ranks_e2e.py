"""A real multi-rank job (three CPU processes, gloo) dumped with the project's dumper, one rank with a
faulty matmul: the compare names that rank first, and the others receive the error through the
all_reduce (which writes into its argument without bumping its version: the dumper must not reuse
the copy it took before)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ptdbg_tui.engine import forked
from ptdbg_tui.engine.batch import compare_dumps

JOB = Path(__file__).with_name("tp_job.py")
WORLD = 3
FAULTY = 1


def test_the_rank_with_the_faulty_matmul_is_named_first(tmp_path, monkeypatch):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "OMP_NUM_THREADS": "1"}
    ranks = [
        subprocess.Popen(
            [
                sys.executable,
                str(JOB),
                str(r),
                str(WORLD),
                str(tmp_path / "store"),
                str(tmp_path),
                str(FAULTY),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for r in range(WORLD)
    ]
    for proc in ranks:
        out = proc.communicate(timeout=120)[0]
        assert proc.returncode == 0, out
    run = compare_dumps(tmp_path / "npu", tmp_path / "bench", jobs=1)
    assert [o.npu.rank for o in run] == list(range(WORLD))
    first = run.ranks.first
    assert first is not None and first.view.rank == FAULTY
    assert first.suspect is not None and first.suspect.call == "Torch_matmul_1_forward"
    others = [v for v in run.ranks.verdicts if v.view.rank != FAULTY]
    assert all(v.received and v.suspect.call == "Distributed_all_reduce_1_forward" for v in others)
    # from the statistics alone, each pair diagnosed in a forked child (jobs=2): the same as here (forked
    # although earlier tests may have left an idle thread)
    monkeypatch.setattr(forked, "can_fork", lambda: True)
    here, apart = (compare_dumps(tmp_path / "npu", tmp_path / "bench", summary=True, jobs=j) for j in (1, 2))
    assert [repr(o.diagnosis) for o in apart] == [repr(o.diagnosis) for o in here]
    assert apart.notes == here.notes and apart.ranks.first.view.rank == here.ranks.first.view.rank
    for o in apart:  # the suspects name the pair's own rows
        assert o.diagnosis.suspects
        rows = {id(r) for r in o.rows}
        assert all(id(r) in rows for s in o.diagnosis.suspects for r in s.rows)
