"""A real multi-rank job (three CPU processes, gloo) dumped with the project's dumper, one rank with a
faulty matmul: the compare names that rank first, and the others receive the error through the
all_reduce (which writes into its argument without bumping its version: the dumper must not reuse
the copy it took before). One rank's reduce_scatter wrong on that rank alone: that rank first."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from ptdbg_tui.compare.diagnosis.findings import NONDETERMINISTIC, RANK_ALONE
from ptdbg_tui.compare.report.words import evidence_text, rank_headline, rank_lines, received_text
from ptdbg_tui.engine.batch import compare_dumps
from ptdbg_tui.engine.workers import forked
from ptdbg_tui.formats.layout import rank_dir_path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tp_job import run_job

WORLD = 3
FAULTY = 1


def _run_job(tmp_path: Path, *fault: str, world: int = WORLD) -> None:
    """The job's ``world`` ranks, each its own process, dumping both runs under ``tmp_path``."""
    run_job(tmp_path, world, FAULTY, *fault)


def test_the_rank_with_the_faulty_matmul_is_named_first(tmp_path, monkeypatch):
    _run_job(tmp_path)
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


def test_a_collective_wrong_on_one_rank_alone_names_that_rank(tmp_path):
    """Rank FAULTY's second reduce_scatter halves its result; its inputs agree with the bench run's on
    every rank, and every other rank's result matches its bench run's. Each rank gets its own part, so
    no statistics across ranks can tell; against the bench run that rank's collective is its own error.
    The headline read 'none of the dumped ranks makes an error of its own; it first shows in
    Distributed_reduce_scatter_tensor_1_forward on rank1 (step0) (the collective itself, or a rank not
    dumped)', and that rank's block 'receives the error through' it."""
    _run_job(tmp_path, "reduce_scatter")
    for summary in (False, True):
        run = compare_dumps(tmp_path / "npu", tmp_path / "bench", summary=summary, jobs=1)
        first = run.ranks.first
        assert first is not None and first.view.rank == FAULTY, rank_headline(run.ranks)
        call = "Distributed_reduce_scatter_tensor_1_forward"
        assert first.suspect is not None and first.suspect.call == call and first.suspect.kind == RANK_ALONE
        head = f"first divergent rank: rank{FAULTY} (step0): {call} (forward): wrong on this rank alone — "
        assert rank_headline(run.ranks).startswith(head + "inputs 0, ")
        assert (
            f"its inputs agree with the bench run's on every rank of its group of {WORLD} (the size its "
            f"shapes give), its result differs on rank{FAULTY} alone (rank0, rank2 match theirs)"
        ) in rank_headline(run.ranks)
        others = [v for v in run.ranks.verdicts if v.view.rank != FAULTY]
        received = "Distributed_reduce_scatter_tensor_2_forward"
        assert all(v.received and v.suspect.call == received for v in others)
        assert all(run.ranks.received(v.view.label) for v in others)
    # one rank compared: its peers' bench runs are not, nothing tells the collective's error is its own
    alone = compare_dumps(tmp_path / "npu", tmp_path / "bench", rank=FAULTY, jobs=1)
    assert [s.kind for s in alone[0].diagnosis.suspects if s.call == call] != [RANK_ALONE]
    # a rank of its group not dumped may have sent that rank alone a wrong part: no rank is named, and the
    # headline says how many ranks its group has
    for side in ("npu", "bench"):
        shutil.copytree(tmp_path / side, tmp_path / "part" / side)
        shutil.rmtree(rank_dir_path(tmp_path / "part" / side, 2, step=0))
    part = compare_dumps(tmp_path / "part" / "npu", tmp_path / "part" / "bench", jobs=1)
    assert part.ranks.first is None
    assert rank_headline(part.ranks) == (
        "first divergent rank: none of the dumped ranks makes an error of its own; it first shows in "
        f"{call} on rank{FAULTY} (step0) (the collective itself, or a rank not dumped; its group has "
        f"{WORLD} ranks, by its shapes, 2 of them compared)"
    )


def test_checksums_that_differ_on_every_rank_do_not_hide_the_rank_whose_values_diverge(tmp_path):
    """Both runs dumped with checksums; the NPU run's tanh, on every rank, gives the same values in other
    bits before rank FAULTY's matmul is 5% off. The headline named rank0's first tanh ('first divergent
    rank: rank0 (step0): Torch_tanh_0_forward (forward): its output differs from bit-equal inputs …'),
    the same on every rank, and the matmul on no line of its own; now the rank whose values diverge, and
    a line under it for the bits that differ before it, saying what a checksum cannot tell."""
    _run_job(tmp_path, "bits_matmul")
    run = compare_dumps(tmp_path / "npu", tmp_path / "bench", jobs=1)
    assert all(o.summary for o in run)
    tanh = [v.suspect for v in run.ranks.verdicts]
    assert all(
        s is not None and s.call == "Torch_tanh_0_forward" and s.kind == NONDETERMINISTIC for s in tanh
    )
    assert all(
        "its statistics agree within rounding: a checksum tells that the bits differ, not by how "
        "much" in evidence_text(s.evidence)
        for s in tanh
        if s is not None
    )
    first = run.ranks.first
    assert first is not None and first.view.rank == FAULTY, rank_headline(run.ranks)
    assert first.suspect is not None and first.suspect.call == "Torch_matmul_1_forward"
    assert rank_lines(run.ranks)[:2] == [
        rank_headline(run.ranks),
        "  before it, checksums alone differ: Torch_tanh_0_forward on rank0 (step0), rank1 (step0), rank2 "
        "(step0) — its output's bits, not its statistics: a checksum tells that the bits differ, not by how "
        "much (two devices' kernels differ bitwise; on one device it is nondeterminism)",
    ]
    # the other ranks receive it from that rank, not from their own tanh
    others = [
        received_text(r) for o in run if o.npu.rank != FAULTY and (r := o.diagnosis.received) is not None
    ]
    assert len(others) == len([o for o in run if o.npu.rank != FAULTY])
    assert all(
        f"the first divergent rank is rank{FAULTY} (step0), Torch_matmul_1_forward" in r for r in others
    )


def test_a_rank_that_receives_from_its_only_peer_is_not_wrong_alone(tmp_path):
    """Two ranks, rank FAULTY's matmul 5% off: its all_reduce, fed that error, lands within what its
    inputs allow, and rank0's, fed right inputs, is off. rank0's collective is not wrong on that rank
    alone (its peer's differed before it): rank0 receives the error."""
    _run_job(tmp_path, world=2)
    run = compare_dumps(tmp_path / "npu", tmp_path / "bench", jobs=1)
    first = run.ranks.first
    assert first is not None and first.view.rank == FAULTY and first.suspect.call == "Torch_matmul_1_forward"
    (other,) = [v for v in run.ranks.verdicts if v.view.rank != FAULTY]
    assert other.received and other.suspect.call == "Distributed_all_reduce_1_forward"
    assert not [s for o in run for s in o.diagnosis.suspects if s.kind == RANK_ALONE]
