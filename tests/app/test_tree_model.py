"""The tree model without a screen: counts, worst state, filters, removal, navigation, slices."""

from __future__ import annotations

from pathlib import Path

from ptdbg_tui.app.tree_model import FILTERS, TreeModel
from ptdbg_tui.compare.model import Result, Row, Status
from ptdbg_tui.engine.callpath import call_path
from ptdbg_tui.engine.live.updates import EngineUpdate, PairDelta, PairInfo, Placed
from ptdbg_tui.formats.layout import RankDump
from ptdbg_tui.formats.naming import parse_name
from ptdbg_tui.formats.records import TensorRecord

INFO = PairInfo(
    "p0", "step0/rank0", RankDump(Path("/d/npu.pkl"), 0, 0), RankDump(Path("/d/b.pkl"), 0, 0), False
)
CHAIN = (("head", "Head"),)


def _placed(name: str, seq: int, status: Status | None, bench: bool = True) -> Placed:
    rec = TensorRecord(name, 0, "torch.float32", [2], [1.0, 0.0, 0.5, 1.0], parse_name(name))
    result = None if status is None else Result(("1.0",), "Yes", "", status)
    row = Row(rec, rec if bench else None, result=result, seq=seq)
    return Placed(row, call_path(rec.entry, name, CHAIN, None), None)


def _update(*placed: Placed, removes: set[str] | None = None) -> EngineUpdate:
    delta = PairDelta(INFO, {p.row.name: p for p in placed}, removes or set())
    return EngineUpdate(pairs={INFO.key: delta})


def _model(*placed: Placed) -> TreeModel:
    model = TreeModel()
    model.load(_update(*placed))
    assert not model.apply()
    return model


ROWS = [
    ("Torch_add_0_forward_input.0", Status.PASS),
    ("Torch_add_0_forward_output", Status.PASS),
    ("Torch_mul_0_forward_input.0", Status.PASS),
    ("Torch_mul_0_forward_output", Status.FAIL),
    ("Torch_mul_0_backward_input.0", Status.FAIL),
    ("Torch_mul_0_backward_output.0", None),
]


def _demo() -> TreeModel:
    return _model(*(_placed(name, i, status) for i, (name, status) in enumerate(ROWS)))


def test_inner_nodes_count_their_leaves_and_show_the_worst():
    model = _demo()
    (pair,) = model.root.children
    forward, backward = pair.children
    assert (forward.label, backward.label) == ("Forward", "Backward")
    assert forward.worst is Status.FAIL and forward.count(Status.FAIL) == 1 and forward.total == 4
    head = forward.children[0]
    assert head.label == "head · Head" and [c.label for c in head.children] == ["Torch_add_0", "Torch_mul_0"]
    assert head.children[0].worst is Status.PASS
    assert backward.count(Status.PENDING) == 1
    assert model.status_counts()[Status.FAIL] == 2


def test_a_new_result_moves_the_counts_up_the_tree():
    model = _demo()
    model.take_changes()
    model.load(_update(_placed("Torch_mul_0_backward_output.0", 5, Status.ERROR)))
    model.apply()
    changed, _ = model.take_changes()
    leaf = model.leaves[("p0", "Torch_mul_0_backward_output.0")]
    assert leaf.status is Status.ERROR and leaf in changed
    backward = model.root.children[0].children[1]
    assert backward in changed and backward.count(Status.PENDING) == 0 and backward.count(Status.ERROR) == 1


def test_a_call_placed_after_its_modules_nodes_went_gets_new_ones():
    """A call shares its module's nodes with the call placed before it, unless they went since."""
    model = _model(_placed("Torch_add_0_forward_output", 0, Status.PASS))
    model.load(_update(_placed("Torch_mul_0_forward_output", 1, Status.FAIL)))
    model.apply()
    (head,) = model.root.children[0].children[0].children[:1]
    assert [c.label for c in head.children] == ["Torch_add_0", "Torch_mul_0"]
    model.load(_update(removes={"Torch_add_0_forward_output", "Torch_mul_0_forward_output"}))
    model.apply()
    assert model.root.children[0].children == [] and not head.alive
    model.load(_update(_placed("Torch_mul_1_forward_output", 2, Status.FAIL)))
    model.apply()
    (forward,) = model.root.children[0].children
    (again,) = forward.children
    assert again is not head and again.alive and [c.label for c in again.children] == ["Torch_mul_1"]
    assert forward.count(Status.FAIL) == 1 and model.status_counts()[Status.FAIL] == 1


def test_filters_hide_subtrees_without_matching_leaves_and_report_flips():
    model = _demo()
    model.filter = FILTERS[1]  # failures + named (nothing is named here)
    head = model.root.children[0].children[0].children[0]
    add, mul = head.children
    assert not model.visible(add) and model.visible(mul) and model.visible(head)
    model.take_changes()
    model.load(_update(_placed("Torch_add_0_forward_output", 1, Status.FAIL)))
    model.apply()
    _, moved = model.take_changes()
    assert model.visible(add) and add in moved, "a call that starts failing appears under the filter"


def test_removing_the_last_leaf_prunes_empty_ancestors():
    model = _demo()
    model.load(_update(removes={"Torch_mul_0_backward_input.0", "Torch_mul_0_backward_output.0"}))
    model.apply()
    (pair,) = model.root.children
    assert [c.key for c in pair.children] == ["forward"]
    assert ("p0", "Torch_mul_0_backward") not in model.calls
    assert [c.key for c in model.flat["p0"]] == ["Torch_add_0_forward", "Torch_mul_0_forward"]
    assert model.status_counts()[Status.FAIL] == 1 and len(model.failing) == 1


def test_next_failure_and_search_follow_execution_order():
    model = _demo()
    first = model.next_failure(None)
    assert first.key == "Torch_mul_0_forward_output"
    second = model.next_failure(model.position(first))
    assert second.key == "Torch_mul_0_backward_input.0"
    assert model.next_failure(model.position(second)) is first, "wraps around"
    assert model.next_failure(model.position(first), backward=True) is second
    hits = model.search("MUL_0_f")
    assert [n.key for n in hits] == [
        "Torch_mul_0_forward",
        "Torch_mul_0_forward_input.0",
        "Torch_mul_0_forward_output",
    ], "the call first, then its entries"
    assert model.next_hit(hits, None) == 0 and model.next_hit(hits, hits[0]) == 1
    assert model.next_hit(hits, hits[0], backward=True) == 2, "wraps around"
    add = model.leaves[("p0", "Torch_add_0_forward_output")]
    assert model.next_hit(hits, add) == 0, "from a node that is no hit: the next one after it"
    assert model.next_hit(hits, second) == 0 and model.next_hit(hits, add, backward=True) == 2
    assert [n.parent.label for n in model.search("head")] == ["Forward", "Backward"], "modules by path"
    assert model.search("nothing") == []


def test_updates_apply_in_slices():
    model = TreeModel()
    model.load(_update(*(_placed(f"Torch_add_{i}_forward_output", i, Status.PASS) for i in range(10))))
    assert model.loading and model.apply(limit=4)
    assert model.root.total == 3  # the pair operation, then three rows
    assert not model.apply()
    assert model.root.total == 10 and not model.loading


def test_pending_row_waiting_for_the_bench_is_shown_as_pending():
    model = _model(_placed("Torch_add_0_forward_output", 0, None, bench=False))
    (leaf,) = model.leaves.values()
    assert leaf.status is Status.PENDING


def test_the_model_s_node_adopts_its_submodules_but_not_a_module_run_outside_it():
    """fc1 is placed before the model's first call of its own (live, its node came first); a loss
    module run outside the model, which the dumper names by its class, stays beside the model."""
    rows = [
        ("Functional_linear_0_forward_output", (("fc1", "Linear"),)),
        ("Torch_relu_0_forward_output", (("", "Net"),)),
        ("Functional_linear_1_forward_output", (("fc2", "Linear"),)),
        ("Functional_mse_loss_0_forward_output", (("MSELoss", "MSELoss"),)),
    ]
    placed = []
    for seq, (name, chain) in enumerate(rows):
        p = _placed(name, seq, Status.PASS)
        placed.append(Placed(p.row, call_path(p.row.npu.entry, name, chain, None), None))
    model = TreeModel()
    for p in placed:  # one update each, as the live engine sends them
        model.load(_update(p))
        model.apply()
    forward = model.root.children[0].child("forward")
    assert [n.label for n in forward.children] == ["(model) · Net", "MSELoss · MSELoss"]
    net = forward.child("")
    assert [n.label for n in net.children] == ["fc1 · Linear", "Torch_relu_0", "fc2 · Linear"]
    assert net.total == 3 and forward.total == 4


def test_a_call_the_diagnosis_names_shows_under_the_failures_filter_and_n_walks_its_entries(add_suspect):
    """A kernel 2% off passes the original's thresholds: its entries are ✔, the diagnosis names it. It
    appears under "failures + named" when the diagnosis arrives (live), and n reaches its entries."""
    from ptdbg_tui.compare.diagnosis.findings import Diagnosis

    model = _demo()
    model.filter = FILTERS[1]
    add = model.calls[("p0", "Torch_add_0_forward")]
    assert not model.visible(add) and not model.named(add.children[0])
    model.take_changes()
    suspect = add_suspect
    model.load(EngineUpdate(pairs={"p0": PairDelta(INFO, diagnosis=Diagnosis(suspects=[suspect], judged=3))}))
    model.apply()
    _, moved = model.take_changes()
    assert add in moved and model.visible(add) and all(model.visible(c) for c in add.children)
    assert model.named(add) and model.named(add.children[1]) and model.named_calls() == 1
    walked = [model.next_failure(None)]
    while len(walked) < 4:
        walked.append(model.next_failure(model.position(walked[-1])))
    assert [n.key for n in walked] == [
        "Torch_add_0_forward_input.0",  # ✔, but its call is named
        "Torch_add_0_forward_output",
        "Torch_mul_0_forward_output",  # ✘
        "Torch_mul_0_backward_input.0",
    ]


# -- a lazy model: a pair's rows wait until something needs them ------------------------------------
INFO1 = PairInfo(
    "p1", "step0/rank1", RankDump(Path("/d/npu1.pkl"), 1, 0), RankDump(Path("/d/b1.pkl"), 1, 0), False
)


def _pair_update(info: PairInfo, *placed: Placed, removes: set[str] | None = None) -> EngineUpdate:
    return EngineUpdate(pairs={info.key: PairDelta(info, {p.row.name: p for p in placed}, removes or set())})


def _both(*updates: EngineUpdate) -> tuple[TreeModel, TreeModel]:
    """A lazy model and an eager one, given the same updates."""
    lazy, eager = TreeModel(lazy=True), TreeModel()
    for update in updates:
        for model in (lazy, eager):
            model.load(update)
            assert not model.apply()
    return lazy, eager


def _shape(node):
    """Everything a node shows and where it stands, down to its leaves."""
    row = id(node.row) if node.row is not None else None
    return (node.kind, node.key, node.label, node.order, node.counts, node.status, row, node.site, node.alive,
            [_shape(c) for c in node.children])  # fmt: skip


def _lazy_updates() -> list[EngineUpdate]:
    """Two pairs, each with a row that changes state and one that goes before anything needs them."""
    rows = [_placed(name, i, status) for i, (name, status) in enumerate(ROWS)]
    later = [
        _placed("Torch_mul_0_backward_output.0", 5, Status.ERROR),  # pending → error
        _placed("Torch_mul_0_forward_output", 3, Status.PASS),  # fail → pass
    ]
    gone = {"Torch_add_0_forward_input.0"}
    return [
        _pair_update(INFO, *rows),
        _pair_update(INFO1, *rows),
        _pair_update(INFO, *later, removes=gone),
        _pair_update(INFO1, *later[:1], removes=gone),
    ]


def test_a_lazy_model_counts_the_rows_that_wait_and_places_them_as_the_eager_model_does():
    lazy, eager = _both(*_lazy_updates())
    assert not lazy.leaves and not lazy.calls and lazy.flat == {"p0": [], "p1": []}, "nothing placed yet"
    for waiting, placed in zip(lazy.root.children, eager.root.children, strict=True):
        assert waiting.children == [] and waiting.counts == placed.counts and waiting.worst is placed.worst
    assert lazy.root.counts == eager.root.counts
    assert lazy.status_counts()[Status.FAIL] == 3 and lazy.status_counts()[Status.ERROR] == 2
    assert lazy.first_failures() == {"p0": 4, "p1": 3}, "p0's output passes now; p1's still fails"
    lazy.place("p1")
    assert {pair for pair, _ in lazy.leaves} == {"p1"}
    assert (
        lazy.root.children[1].counts == eager.root.children[1].counts
        and lazy.root.counts == eager.root.counts
    )
    lazy.place_all()
    assert _shape(lazy.root) == _shape(eager.root), "the same tree, node for node"
    assert lazy.flat.keys() == eager.flat.keys()
    assert all([c.key for c in lazy.flat[k]] == [c.key for c in eager.flat[k]] for k in eager.flat)
    assert lazy.calls.keys() == eager.calls.keys() and lazy.leaves.keys() == eager.leaves.keys()
    assert {(n.pair, n.key) for n in lazy.failing} == {(n.pair, n.key) for n in eager.failing}
    assert lazy.first_failures() == {"p0": 4, "p1": 3}


def test_a_placed_pair_takes_its_next_rows_at_once():
    lazy, eager = _both(*_lazy_updates()[:2])
    lazy.place("p0")
    update = _lazy_updates()[2]
    for model in (lazy, eager):
        model.load(update)
        model.apply()
    leaf = lazy.leaves[("p0", "Torch_mul_0_backward_output.0")]
    assert leaf.status is Status.ERROR and ("p0", "Torch_add_0_forward_input.0") not in lazy.leaves
    assert lazy.root.children[0].counts == eager.root.children[0].counts
    assert not any(pair == "p1" for pair, _ in lazy.leaves), "the other pair still waits"


def test_search_and_n_place_the_rows_they_walk():
    lazy, _ = _both(*_lazy_updates()[:2])
    first = lazy.next_failure(None)
    assert first is not None and first.key == "Torch_mul_0_forward_output" and first.pair == "p0"
    assert not lazy._waiting, "both pairs have failures: n walks them all"
    lazy, _ = _both(*_lazy_updates()[:2])
    hits = lazy.search("mul_0_forward_out")
    assert [(n.pair, n.key) for n in hits] == [
        ("p0", "Torch_mul_0_forward_output"),
        ("p1", "Torch_mul_0_forward_output"),
    ]


def test_a_pair_its_diagnosis_names_calls_of_is_placed_for_the_bars_and_the_overview(add_suspect):
    from ptdbg_tui.compare.diagnosis.findings import Diagnosis

    lazy, _ = _both(*_lazy_updates()[:2])
    suspect = add_suspect
    lazy.load(EngineUpdate(pairs={"p1": PairDelta(INFO1, diagnosis=Diagnosis(judged=3))}))
    lazy.apply()
    assert lazy.named_calls() == 0 and set(lazy._waiting) == {"p0", "p1"}, "no suspect: it waits"
    lazy.load(EngineUpdate(pairs={"p1": PairDelta(INFO1, diagnosis=Diagnosis(suspects=[suspect], judged=3))}))
    lazy.apply()
    (found,) = lazy.suspects()
    assert found[1] is lazy.calls[("p1", "Torch_add_0_forward")] and lazy.named_calls() == 1
    assert set(lazy._waiting) == {"p0"}


def test_a_waiting_row_that_changes_state_shows_or_hides_its_pair_under_a_filter():
    lazy, _ = _both(
        _pair_update(INFO, _placed("Torch_add_0_forward_output", 0, Status.PASS)), _pair_update(INFO1)
    )
    lazy.filter = FILTERS[1]
    pair = lazy.root.children[0]
    assert not lazy.visible(pair)
    lazy.take_changes()
    lazy.load(_pair_update(INFO, _placed("Torch_add_0_forward_output", 0, Status.FAIL)))
    lazy.apply()
    changed, moved = lazy.take_changes()
    assert lazy.visible(pair) and pair in moved and pair in changed and "p0" in lazy._waiting


def test_dropping_a_waiting_pair_takes_its_rows_out_of_the_counts():
    lazy, _ = _both(*_lazy_updates()[:2])
    lazy.load(EngineUpdate(dropped={"p0"}))
    lazy.apply()
    assert [p.key for p in lazy.root.children] == ["p1"] and lazy.root.counts == lazy.root.children[0].counts
    assert lazy.first_failures() == {"p1": 3}
