"""``ptdbg-tui compare`` of statistics writes each pair's CSV in the forked child that diagnoses it
(:mod:`ptdbg_tui.engine.batch`; a child takes the pairs read while none was free), the last pair's
here: the same files as written one by one at the end."""

from __future__ import annotations

import os
import re
import select
import shutil
from pathlib import Path

import pytest

from ptdbg_tui.cli import main
from ptdbg_tui.compare.report import outputs as outputs_module
from ptdbg_tui.engine import batch
from ptdbg_tui.engine.workers import forked

OURS = (
    Path(__file__).resolve().parents[1]
    / "fixtures"
    / "mixed"
    / "bench"
    / "ptdbg_dump_v4.0"
    / "step0"
    / "rank0"
)


@pytest.fixture(autouse=True)
def _fork_with_idle_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fork although earlier tests left idle threads (Dask's offload thread): these children use none."""
    monkeypatch.setattr(forked, "can_fork", lambda: True)


def two_ranks(root: Path, ranks: int = 2) -> tuple[Path, Path]:
    """Both sides: ranks 0 to ``ranks`` - 1, each a copy of a real dump of the project's dumper."""
    for side in ("npu", "bench"):
        for rank in range(ranks):
            shutil.copytree(OURS, root / side / "ptdbg_dump_v4.0" / "step0" / f"rank{rank}")
    return root / "npu", root / "bench"


def outputs(folder: Path) -> dict[str, bytes]:
    """The files written, by name without their time stamp."""
    return {re.sub(r"_\d{14}", "", p.name): p.read_bytes() for p in folder.iterdir()}


def compare(npu: Path, bench: Path, out: Path, jobs: int) -> None:
    args = [
        "compare",
        str(npu),
        str(bench),
        "-o",
        str(out),
        "--summary",
        "--jobs",
        str(jobs),
        "--no-progress",
    ]
    assert main(args) == 0


def _noted_writers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A file each process that writes a pair's CSV appends its pid to."""
    writers = tmp_path / "writers"
    write = outputs_module.write_pair_csv

    def noted(*args, **kw):
        with writers.open("a") as f:
            f.write(f"{os.getpid()}\n")
        return write(*args, **kw)

    monkeypatch.setattr(outputs_module, "write_pair_csv", noted)
    return writers


def test_the_csvs_written_in_the_children_are_those_written_at_the_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    npu, bench = two_ranks(tmp_path)
    writers = _noted_writers(tmp_path, monkeypatch)
    compare(npu, bench, tmp_path / "one", jobs=1)
    here = os.getpid()
    assert set(writers.read_text().split()) == {str(here)}  # one by one, here
    writers.unlink()
    # Once this process has diagnosed the last pair, it takes those the child has not begun: on a busy
    # box that could be the child's pair too. It looks only once the child has begun its pair.
    began_r, began_w = os.pipe()
    diagnosis = batch._diagnosis

    def beginning(o):
        if os.getpid() != here:
            os.write(began_w, b"b")
        return diagnosis(o)

    take = forked.Claims.take

    def once_the_child_began(self):
        if os.getpid() == here:
            assert select.select([began_r], [], [], 60)[0], "the child did not begin its pair"
        return take(self)

    monkeypatch.setattr(batch, "_diagnosis", beginning)
    monkeypatch.setattr(forked.Claims, "take", once_the_child_began)
    try:
        compare(npu, bench, tmp_path / "two", jobs=2)
    finally:
        os.close(began_r)
        os.close(began_w)
    first, last = writers.read_text().split()
    assert first != str(here) == last  # the first in its child, the last here (beside that child)
    one, two = outputs(tmp_path / "one"), outputs(tmp_path / "two")
    assert len([name for name in one if name.startswith("compare_result_step0_rank")]) == 2
    assert two == one


def test_a_job_left_with_one_pair_names_its_csv_as_one_pair(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two pairs found, one that cannot be read: its CSV was written for several pairs, and is renamed."""
    npu, bench = two_ranks(tmp_path)
    outcome = batch._outcome

    def second_fails(n, *args, **kw):
        if n.rank == 1:
            raise OSError(5, "Input/output error")
        return outcome(n, *args, **kw)

    monkeypatch.setattr(batch, "_outcome", second_fails)
    compare(npu, bench, tmp_path / "out", jobs=2)
    assert sorted(outputs(tmp_path / "out")) == ["advisor.txt", "compare_result.csv", "suspects.csv"]


def test_a_child_takes_the_pairs_read_while_none_was_free_and_the_last_ones_are_shared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Six pairs, the first child busy until every pair is read: it took the first; of the five left, a
    child takes two and the command diagnoses three, then the one of those two that child has not begun;
    the same files as one by one."""
    npu, bench = two_ranks(tmp_path, ranks=6)
    here = os.getpid()
    read_all = {"done": False}
    claimed_r, claimed_w = os.pipe()  # a byte from the last child as it begins a pair
    gate_r, gate_w = os.pipe()  # then it waits for a byte here
    diagnosis = batch._diagnosis

    def held(o):
        if os.getpid() != here and read_all["done"]:  # a child forked once every pair was read
            os.write(claimed_w, b"c")
            os.read(gate_r, 1)
        return diagnosis(o)

    take = forked.Claims.take
    waited = {"done": False}

    def after_both_began(self):
        if os.getpid() == here and not waited["done"]:
            assert select.select([claimed_r], [], [], 60)[0], "the last child did not begin its first pair"
            os.read(claimed_r, 1)
            waited["done"] = True
        return take(self)

    collect = batch._Diagnoses._collect

    def let_them_go(self, wait):
        if wait:
            os.write(gate_w, b"g" * 6)  # enough for every pair
        collect(self, wait)

    monkeypatch.setattr(batch, "_diagnosis", held)
    monkeypatch.setattr(forked.Claims, "take", after_both_began)
    monkeypatch.setattr(batch._Diagnoses, "_collect", let_them_go)
    monkeypatch.setattr(forked.Forked, "ready", lambda self: read_all["done"])  # none done while reading
    finish = batch._Diagnoses.finish

    def after_reading(self: batch._Diagnoses, outcomes: batch.Outcomes) -> None:
        read_all["done"] = True
        finish(self, outcomes)

    monkeypatch.setattr(batch._Diagnoses, "finish", after_reading)
    writers = _noted_writers(tmp_path, monkeypatch)
    try:
        compare(npu, bench, tmp_path / "two", jobs=2)
    finally:
        for fd in (claimed_r, claimed_w, gate_r, gate_w):
            os.close(fd)
    pids = writers.read_text().split()
    assert len(pids) == 6 and pids.count(str(here)) == 4
    assert len({p for p in pids if p != str(here)}) == 2  # two children: a pair each
    writers.unlink()
    monkeypatch.undo()
    _noted_writers(tmp_path, monkeypatch)
    compare(npu, bench, tmp_path / "one", jobs=1)
    assert outputs(tmp_path / "two") == outputs(tmp_path / "one")
