"""Cross-rank diagnosis on real multi-rank dumps: the first divergent rank through the collectives."""

from __future__ import annotations

import shutil
from dataclasses import replace

import pytest

from ptdbg_tui.cli import report_text
from ptdbg_tui.compare.diagnosis.evidence import Argument, Arguments
from ptdbg_tui.compare.diagnosis.findings import RECEIVED
from ptdbg_tui.compare.diagnosis.propagation import ENTERS
from ptdbg_tui.compare.diagnosis.ranks import cross_rank, is_collective
from ptdbg_tui.compare.report.words import evidence_text, rank_headline, received_text, suspect_text
from ptdbg_tui.engine.batch import compare_dumps, judge
from ptdbg_tui.formats.layout import rank_dir_path
from ptdbg_tui.formats.synthetic import write_ranks_pair


@pytest.mark.parametrize(("faulty_rank", "faulty_layer"), [(3, 1), (0, 2), (5, 0)])
def test_the_faulty_rank_is_named_first(tmp_path, faulty_rank, faulty_layer):
    npu, bench = write_ranks_pair(tmp_path, ranks=6, faulty_rank=faulty_rank, faulty_layer=faulty_layer)
    run = compare_dumps(npu, bench, jobs=1)
    first = run.ranks.first
    assert first is not None and first.view.rank == faulty_rank
    assert first.suspect is not None and first.suspect.call == f"Functional_linear_{faulty_layer}_forward"
    assert first.epoch == faulty_layer  # one all_reduce per earlier layer
    others = [v for v in run.ranks.verdicts if v.view.rank != faulty_rank]
    assert len(others) == 5 and all(v.received for v in others)
    assert all(v.suspect.call == f"Distributed_all_reduce_{faulty_layer}_forward" for v in others)
    head = f"first divergent rank: rank{faulty_rank} (step0): Functional_linear_{faulty_layer}_forward"
    report = report_text(run)
    assert head in report
    # each receiving rank's own block says so under its culprit; the faulty rank's does not
    pairs = report.split("\nfirst divergent rank:")[0].split("\nstep0/")
    blocks = {o.npu.rank: block for o, block in zip(run, pairs, strict=True)}
    for v in others:
        assert (
            f"  note: rank{v.view.rank} (step0) receives the error through "
            f"Distributed_all_reduce_{faulty_layer}_forward: the first divergent rank is rank{faulty_rank} "
            f"(step0), Functional_linear_{faulty_layer}_forward"
        ) in blocks[v.view.rank]
    assert "receives the error through" not in blocks[faulty_rank]
    # and every collective after it there receives it too: none reads as a kernel that introduces error
    judged = {o.npu.rank: o.diagnosis for o in run}  # each pair's diagnosis in the job
    for v in others:
        suspects = judged[v.view.rank].suspects
        assert suspects and all(s.kind == RECEIVED for s in suspects if is_collective(s.api)), suspects
        assert (
            f"  Culprit: Distributed_all_reduce_{faulty_layer}_forward (forward): receives another rank's "
            "error through it"
        ) in blocks[v.view.rank]
    assert not any(s.kind == RECEIVED for s in judged[faulty_rank].suspects)
    # each pair's own diagnosis is left as it was, and the job judged again from it says the same
    for o in run:
        assert o.dumps is not None and o.dumps.received is None
        assert not any(s.kind == RECEIVED for s in o.dumps.suspects)
    judge(run)
    assert report_text(run) == report


def test_one_sided_ranks_are_notices(tmp_path):
    npu, bench = write_ranks_pair(tmp_path, ranks=4, faulty_rank=2)
    shutil.rmtree(rank_dir_path(bench, 3, step=0))
    run = compare_dumps(npu, bench, jobs=1)
    assert [o.npu.rank for o in run] == [0, 1, 2]
    assert run.ranks.first is not None and run.ranks.first.view.rank == 2
    assert "note: NPU step0/rank3: no bench dump for it" in report_text(run)


def test_no_fault_no_rank(tmp_path):
    run = compare_dumps(*write_ranks_pair(tmp_path, ranks=3, faulty_rank=None), jobs=1)
    assert run.ranks.first is None
    assert rank_headline(run.ranks) == "first divergent rank: none (no rank has a suspect)"


def test_an_error_seen_only_through_a_collective_names_no_rank(tmp_path):
    """The faulty rank was not dumped: every dumped rank only receives the error."""
    npu, bench = write_ranks_pair(tmp_path, ranks=4, faulty_rank=1)
    for side in (npu, bench):
        shutil.rmtree(rank_dir_path(side, 1, step=0))
    run = compare_dumps(npu, bench, jobs=1)
    assert run.ranks.first is None and all(v.received for v in run.ranks.verdicts)
    assert "Distributed_all_reduce_1_forward on rank0 (step0)" in rank_headline(run.ranks)
    assert all(run.ranks.received(o.npu.label) is None for o in run)  # no rank of its own to name


def test_collectives_no_hook_saw_leave_the_error_entering_on_the_other_ranks(tmp_path):
    """Without dumped all_reduces the other ranks' error enters outside the dumped calls: they
    received it, and the faulty rank is still the first divergent one."""
    npu, bench = write_ranks_pair(tmp_path, ranks=4, faulty_rank=2, collectives=False)
    run = compare_dumps(npu, bench, jobs=1)
    assert run.ranks.first is not None and run.ranks.first.view.rank == 2
    others = [v for v in run.ranks.verdicts if v.view.rank != 2]
    assert all(v.received and v.suspect.kind == ENTERS for v in others)
    text = report_text(run)
    assert "rank0 (step0): the error enters outside the dumped calls, before Torch_tanh_1_forward" in text
    # the note says where it shows, not that a tanh carried it in (it read "receives the error through
    # Torch_tanh_1_forward")
    assert (
        "  note: rank0 (step0) receives the error before Torch_tanh_1_forward, outside the dumped calls (a "
        "collective no hook saw): the first divergent rank is rank2 (step0), Functional_linear_1_forward"
    ) in text
    assert "receives the error through Torch_tanh" not in text
    # the first divergent rank itself, a step later, error entering again: its own error carried over (a
    # hand-written weight that is no module parameter), not another rank's received through a call
    later = replace(others[0].view, label="step1/rank2", step=1, rank=2)
    ranks = cross_rank([run.ranks.first.view, later])
    received = ranks.received("step1/rank2")
    assert received is not None and received.own
    assert received_text(received) == (
        "rank2 (step1): the error enters before Torch_tanh_1_forward, outside the dumped calls: this rank's "
        "own error from an earlier step, rank2 (step0), Functional_linear_1_forward"
    )
    # with no rank at fault in the dumps, the headline says where it shows, not "the collective itself"
    alone = cross_rank([v.view for v in others])
    assert alone.first is None
    assert rank_headline(alone) == (
        "first divergent rank: none of the dumped ranks makes an error of its own; it first shows before "
        "Torch_tanh_1_forward on rank0 (step0), outside the dumped calls (a collective no hook saw, code not "
        "dumped, or a rank not dumped)"
    )


def test_collectives_of_both_grammars():
    assert is_collective("Distributed_all_reduce") and is_collective("Distributed.all_gather")
    assert not is_collective("Functional_linear") and not is_collective("DistributedSampler")


def test_one_rank_over_several_steps_prints_no_rank_line(tmp_path):
    npu, bench = write_ranks_pair(tmp_path, ranks=1, faulty_rank=0)
    for side in (npu, bench):
        shutil.copytree(rank_dir_path(side, 0, step=0), rank_dir_path(side, 0, step=1))
    run = compare_dumps(npu, bench, jobs=1)
    assert [(o.npu.step, o.npu.rank) for o in run] == [(0, 0), (1, 0)]
    text = report_text(run)
    assert "Culprit:" in text and "first divergent rank" not in text


def _reduced(rank: int, stats: list[float]):
    from ptdbg_tui.formats.pkl_line import decode_value

    name = "Distributed_all_reduce_0_forward_output.0"
    return rank, decode_value([name, 0, [], "torch.float32", [4], stats])


def test_a_collective_whose_result_departs_from_the_other_ranks_is_that_ranks_own_suspect():
    from ptdbg_tui.compare.diagnosis.findings import COLLECTIVE, Diagnosis
    from ptdbg_tui.compare.diagnosis.ranks import apply_departure, collective_departures, collective_results
    from ptdbg_tui.compare.model import Row

    good, bad = [2.0, -1.0, 0.25, 3.0], [2.0, -1.0, 0.2625, 3.1]
    recs = dict(_reduced(r, bad if r == 2 else good) for r in range(4))
    results = {r: collective_results([rec]) for r, rec in recs.items()}
    (departure,) = collective_departures(results)
    assert departure.rank == 2 and departure.call == "Distributed_all_reduce_0_forward"
    assert departure.peers == (0, 1, 3)
    d = apply_departure(Diagnosis(), [Row(recs[2], recs[2])], departure, step=0)
    assert [(s.call, s.kind) for s in d.suspects] == [("Distributed_all_reduce_0_forward", COLLECTIVE)]
    assert "departs from the other ranks" in suspect_text(d.suspects[0])
    # two ranks cannot outvote each other; rank results that agree have no departure
    assert collective_departures({r: results[r] for r in (1, 2)}) == []
    assert collective_departures({r: results[r] for r in (0, 1, 3)}) == []


def test_two_ranks_that_disagree_are_told_apart_by_their_bench_run():
    from ptdbg_tui.compare.diagnosis.ranks import bench_tie_departures, collective_results

    good, bad, bench = [2.0, -1.0, 0.25, 3.0], [2.0, -1.0, 0.2625, 3.1], [2.0000001, -1.0, 0.25, 3.0000002]
    npu = {r: collective_results([_reduced(r, bad if r == 1 else good)[1]]) for r in (0, 1)}
    benches = {r: collective_results([_reduced(r, bench)[1]]) for r in (0, 1)}
    (departure,) = bench_tie_departures(npu, benches)
    assert departure.rank == 1 and departure.peers == (0,) and departure.by_bench
    assert "departs from the other rank's result (rank0, which matches its bench run's)" in evidence_text(
        departure.evidence
    )
    # both off their bench alike (an error both received), or agreeing: no departure
    mid = [2.0, -1.0, 0.25625, 3.05]
    assert bench_tie_departures(npu, {r: collective_results([_reduced(r, mid)[1]]) for r in (0, 1)}) == []
    assert bench_tie_departures({r: npu[0] for r in (0, 1)}, benches) == []


def test_a_collective_a_rank_calls_with_another_reduce_op_is_that_ranks_own(tmp_path):
    """One rank passes ``op=ReduceOp.MAX`` where its bench run passes SUM: gloo gives every rank the same
    (wrong) result, so no rank's departs, and each read as receiving the error through the all_reduce —
    the headline named rank0, 'the collective itself'. The sidecars tell the op apart (by position too),
    and a collective called with other arguments is the rank's own finding, not received."""
    from ptdbg_tui.compare.diagnosis.findings import ARGUMENTS
    from ptdbg_tui.compare.diagnosis.keywords import keywords_differ
    from ptdbg_tui.formats.calls import CallSpec, TensorArg, TorchConst

    fn, t = "torch.distributed.all_reduce", TensorArg("Distributed_all_reduce_0_forward_input.0")
    op = {name: TorchConst(f"torch.distributed.ReduceOp.{name}") for name in ("SUM", "MAX")}
    npu = CallSpec("Distributed_all_reduce_0", fn, [t], {"op": op["MAX"]})
    bench = CallSpec("Distributed_all_reduce_0", fn, [t], {"op": op["SUM"]})
    words = "torch.distributed.ReduceOp.MAX against torch.distributed.ReduceOp.SUM"
    max_sum = (
        Argument(place="op", npu="torch.distributed.ReduceOp.MAX", bench="torch.distributed.ReduceOp.SUM"),
    )
    assert (
        keywords_differ(npu, bench) == max_sum and evidence_text(Arguments(values=max_sum)) == f"op: {words}"
    )
    assert keywords_differ(bench, bench) == ()
    positional = [replace(spec, args=[t, o], kwargs={}) for spec, o in ((npu, op["MAX"]), (bench, op["SUM"]))]
    assert keywords_differ(*positional) == max_sum
    # the bench run passes no op: SUM, all_reduce's default (a keyword one side leaves out was not compared)
    assert keywords_differ(npu, replace(bench, kwargs={})) == max_sum
    assert keywords_differ(positional[0], replace(bench, kwargs={})) == max_sum
    assert keywords_differ(replace(npu, kwargs={"op": op["SUM"]}), replace(bench, kwargs={})) == ()

    # every dumped rank's all_reduce result is off its bench run's; rank 2 called it with another op
    run = compare_dumps(*write_ranks_pair(tmp_path, ranks=3, faulty_rank=1), jobs=1)
    views = [v.view for v in run.ranks.verdicts if v.view.rank != 1]
    assert all(v.diagnosis.suspects[0].call == "Distributed_all_reduce_1_forward" for v in views)
    assert cross_rank(views).first is None  # each only receives it
    own = views[1].diagnosis
    own.suspects[0] = replace(own.suspects[0], kind=ARGUMENTS, evidence=Arguments(values=max_sum))
    ranks = cross_rank(views)
    assert ranks.first is not None and ranks.first.view.rank == 2
    assert rank_headline(ranks).startswith(
        "first divergent rank: rank2 (step0): Distributed_all_reduce_1_forward"
    )


def test_with_no_rank_at_fault_the_narrowing_follows_where_the_report_says_the_error_first_shows(tmp_path):
    """Rank 1's reduce_scatter alone was wrong (every rank's inputs to it agree): no rank makes an error of
    its own, and the report says the error first shows in that collective on rank 1. ``narrow`` took the
    earliest step's first pair with a culprit instead — rank 0's, a later call where the error only
    entered — and narrowed the next dump to that call on ranks 0, 2 and 3."""
    from ptdbg_tui.compare.diagnosis.findings import Suspect
    from ptdbg_tui.engine.narrow import narrowing_of

    npu, bench = write_ranks_pair(tmp_path, ranks=4, faulty_rank=1)
    for side in (npu, bench):
        shutil.rmtree(rank_dir_path(side, 1, step=0))
    run = compare_dumps(npu, bench, jobs=1)
    # rank 0 sees the error only later, entering before its last tanh (as rank 0 of the real job did)
    rank0 = next(o for o in run if o.npu.rank == 0)
    rows = [r for r in rank0.rows if r.name.startswith("Torch_tanh_2_forward")]
    assert rank0.dumps is not None  # the pair's own diagnosis, from which the job is judged
    late = rank0.dumps.suspects[0]
    rank0.dumps.suspects = [
        Suspect(
            call="Torch_tanh_2_forward",
            api="Torch_tanh",
            direction="forward",
            kind=ENTERS,
            score=late.score,
            evidence=Arguments(values=()),
            judgement=late.judgement,
            rows=rows,
            seq=min(r.seq for r in rows),
            step=0,
        )
    ]
    judge(run)
    assert run.ranks.first is None
    assert "it first shows in Distributed_all_reduce_1_forward on rank2 (step0)" in rank_headline(run.ranks)
    target = narrowing_of(run).target
    assert [c.label for c in target.calls] == ["Distributed_all_reduce_1"] and target.ranks == (2, 3)


def test_a_rank_option_and_sides_of_different_sizes_are_said(tmp_path):
    """--rank R leaves the other ranks out, where the error may begin; a job of another size on one
    side differs by design: one note each, beside the per-dump ones."""
    npu, bench = write_ranks_pair(tmp_path, ranks=4, faulty_rank=2)
    one = report_text(compare_dumps(npu, bench, jobs=1, rank=0))
    assert (
        "note: rank 0 only, of the NPU dump's ranks [0, 1, 2, 3]: the error may begin on another rank" in one
    )
    everything = report_text(compare_dumps(npu, bench, jobs=1))
    assert "rank 0 only" not in everything and "jobs of different sizes" not in everything
    for r in (2, 3):
        shutil.rmtree(rank_dir_path(bench, r, step=0))
    fewer = report_text(compare_dumps(npu, bench, jobs=1))
    assert (
        "note: the NPU dump holds 4 ranks [0, 1, 2, 3] and the bench dump 2 [0, 1]: jobs of different "
        "sizes differ by design"
    ) in fewer
