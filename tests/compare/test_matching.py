"""Pairing entries: exact, fuzzy and aligned; unmatched rows of both sides; output order; stacks."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import pytest

from ptdbg_tui.compare.matching import pairing
from ptdbg_tui.compare.matching.align import align
from ptdbg_tui.compare.matching.pairing import attach_stacks, choose_match, match_records
from ptdbg_tui.compare.report.match_words import auto_aligned_text, misfits_text
from ptdbg_tui.formats.dialects import DIALECTS, ORIGINAL_PTDBG, OURS
from ptdbg_tui.formats.pkl import read_pkl
from ptdbg_tui.formats.records import StackRecord


def _pairs(rows):
    return [(r.npu.name if r.npu else None, r.bench.name if r.bench else None) for r in rows]


def _call(api, index, direction="forward", ins=1, shape=(3,)):
    call = f"{api}_{index}_{direction}"
    names = [f"{call}_input.{k}" for k in range(ins)] + [f"{call}_output"]
    return [(n, shape) for n in names]


def _recs(record, calls):
    return [record(name, list(shape)) for call in calls for name, shape in call]


def test_exact_keeps_npu_order_and_reports_both_sides(records):
    npu = records(
        "A_x_0_forward_input.0", "A_x_0_forward_output", "B_y_0_forward_output", "D_w_0_forward_output"
    )
    bench = records(
        "Z_z_0_forward_output",
        "A_x_0_forward_input.0",
        "A_x_0_forward_output",
        "C_c_0_forward_output",
        "D_w_0_forward_output",
    )
    rows = match_records(npu, bench)
    assert _pairs(rows) == [
        (None, "Z_z_0_forward_output"),  # bench-only before any matched entry: first
        ("A_x_0_forward_input.0", "A_x_0_forward_input.0"),
        ("A_x_0_forward_output", "A_x_0_forward_output"),
        (None, "C_c_0_forward_output"),  # right after the row its bench predecessor matched
        ("B_y_0_forward_output", None),  # NPU-only
        ("D_w_0_forward_output", "D_w_0_forward_output"),
    ]
    assert [r.seq for r in rows] == list(range(6))
    assert not any(r.fuzzy for r in rows)


def test_exact_trailing_entries_of_either_side_are_kept(records):
    npu = records("A_x_0_forward_output", "A_x_1_forward_output", "A_x_2_forward_output")
    bench = records("A_x_0_forward_output")
    tail = ["A_x_1_forward_output", "A_x_2_forward_output"]
    assert _pairs(match_records(npu, bench))[1:] == [(n, None) for n in tail]
    assert _pairs(match_records(bench, npu))[1:] == [(None, n) for n in tail]


def test_duplicate_names_pair_in_order(records):
    npu = records("Module_Linear_0_forward_output", "Module_Linear_0_forward_output")
    bench = records("Module_Linear_0_forward_output", "Module_Linear_0_forward_output")
    rows = match_records(npu, bench)
    assert [(r.npu, r.bench) for r in rows] == list(zip(npu, bench, strict=True))


def test_fuzzy_drops_the_call_index(record):
    # The NPU counted an extra add while dumping was off: its indices are one ahead.
    npu = _recs(record, [_call("Torch_add", 1), _call("Torch_mul", 0), _call("Torch_add", 2)])
    bench = _recs(record, [_call("Torch_add", 0), _call("Torch_mul", 0), _call("Torch_add", 1)])
    exact = match_records(npu, bench)
    assert sum(r.matched for r in exact) == 4  # mul, and the NPU's add_1 with the bench's second add
    rows = match_records(npu, bench, "fuzzy")
    assert all(r.matched for r in rows) and len(rows) == 6
    assert _pairs(rows)[0] == ("Torch_add_1_forward_input.0", "Torch_add_0_forward_input.0")
    assert [r.fuzzy for r in rows] == [True, True, False, False, True, True]


def test_fuzzy_pairs_kth_call_per_direction(record):
    npu = _recs(record, [_call("Torch_add", 5), _call("Torch_add", 5, "backward")])
    bench = _recs(record, [_call("Torch_add", 0), _call("Torch_add", 0, "backward")])
    rows = match_records(npu, bench, "fuzzy")
    directions = [(r.npu.entry.direction, r.bench.entry.direction) for r in rows]
    assert directions == [("forward", "forward")] * 2 + [("backward", "backward")] * 2


def test_align_survives_an_extra_call_of_the_same_api(record):
    # The NPU runs one extra add (same shapes) in the middle: fuzzy shifts every later add, align does not.
    layer = [("Torch_add", (3,)), ("Torch_mul", (3,)), ("Torch_add", (4,))]
    bench_calls, npu_calls, counters_b, counters_n = [], [], {}, {}
    for k in range(6):
        for api, shape in layer:
            for calls, counters in ((bench_calls, counters_b), (npu_calls, counters_n)):
                i = counters.get(api, 0)
                counters[api] = i + 1
                calls.append(_call(api, i, shape=shape))
        if k == 2:
            i = counters_n["Torch_add"]
            counters_n["Torch_add"] = i + 1
            npu_calls.append(_call("Torch_add", i, shape=(3,)))
    npu, bench = _recs(record, npu_calls), _recs(record, bench_calls)
    rows = match_records(npu, bench, "align")
    unmatched = [r for r in rows if not r.matched]
    assert len(unmatched) == 2 and unmatched[0].npu.call == unmatched[1].npu.call
    assert unmatched[0].npu.call in ("Torch_add_6_forward", "Torch_add_7_forward")  # either is optimal
    assert all(r.npu.shape == r.bench.shape for r in rows if r.matched)
    assert sum(r.matched for r in rows) == len(bench)
    fuzzy = match_records(npu, bench, "fuzzy")
    assert any(r.matched and r.npu.shape != r.bench.shape for r in fuzzy)  # why align exists


def test_align_reports_missing_calls_and_keeps_shape_changes_visible(record):
    bench = _recs(record, [_call("A_a", 0), _call("B_b", 0), _call("C_c", 0), _call("D_d", 0)])
    npu = _recs(record, [_call("A_a", 0), _call("C_c", 0, shape=(5,)), _call("D_d", 0)])
    rows = match_records(npu, bench, "align")
    assert [r.bench.call for r in rows if r.npu is None] == ["B_b_0_forward"] * 2
    changed = [r for r in rows if r.matched and r.npu.shape != r.bench.shape]
    assert [r.npu.name for r in changed] == ["C_c_0_forward_input.0", "C_c_0_forward_output"]


def test_align_with_unparsable_names(records):
    npu = records("weird", "A_x_0_forward_output")
    bench = records("A_x_0_forward_output", "other")
    rows = match_records(npu, bench, "align")
    assert ("A_x_0_forward_output", "A_x_0_forward_output") in _pairs(rows)
    assert {("weird", None), (None, "other")} <= set(_pairs(rows))


def test_unknown_mode():
    with pytest.raises(ValueError, match="unknown match mode"):
        match_records([], [], "magic")


def _lcs(a, b):
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(len(a) - 1, -1, -1):
        for j in range(len(b) - 1, -1, -1):
            table[i][j] = table[i + 1][j + 1] + 1 if a[i] == b[j] else max(table[i + 1][j], table[i][j + 1])
    return table[0][0]


def test_align_is_a_longest_common_subsequence_on_random_edits():
    rng = random.Random(7)
    for _ in range(200):
        a = [rng.randint(0, 5) for _ in range(rng.randint(0, 25))]
        b = list(a)
        for _ in range(rng.randint(0, 6)):
            k = rng.random()
            if k < 0.4 and b:
                del b[rng.randrange(len(b))]
            elif k < 0.8:
                b.insert(rng.randint(0, len(b)), rng.randint(0, 7))
            elif b:
                b[rng.randrange(len(b))] = rng.randint(0, 7)
        pairs = align(a, b)
        assert all(a[i] == b[j] for i, j in pairs)
        assert all(p < q for (p, _), (q, _) in itertools.pairwise(pairs))
        assert all(p < q for (_, p), (_, q) in itertools.pairwise(pairs))
        assert len(pairs) == _lcs(a, b)


def test_align_on_a_long_repetitive_sequence_finds_every_insertion():
    layer = list(range(30))
    a, b = [], []
    for k in range(1000):
        a += layer
        b += layer
        if k % 25 == 0:
            b.insert(len(b) - 10, 5)  # an extra call of a common signature
    pairs = align(a, b)
    assert len(pairs) == len(a)


def test_attach_stacks_on_the_first_row_of_each_call(records):
    npu = records("A_x_0_forward_input.0", "A_x_0_forward_output", "B_y_0_forward_output")
    rows = match_records(npu, [])
    stack = StackRecord("A_x_0_forward_stack_info", [("f.py", "1", "g", None)])
    attach_stacks(rows, {stack.call: stack})
    assert [r.stack for r in rows] == [stack, None, None]


def test_auto_aligns_a_fused_call_against_its_decomposition_and_says_so(record):
    # NPU: a fused linear; bench: matmul + add, so every later Torch_matmul index shifts by one
    npu = _recs(
        record,
        [
            _call("Torch_matmul", 0),
            _call("Functional_linear", 0, shape=(5,)),
            _call("Torch_matmul", 1, shape=(4,)),
            _call("Torch_relu", 0),
        ],
    )
    bench = _recs(
        record,
        [
            _call("Torch_matmul", 0),
            _call("Torch_matmul", 1, shape=(5,)),
            _call("Torch_add", 0, shape=(5,)),
            _call("Torch_matmul", 2, shape=(4,)),
            _call("Torch_relu", 0),
        ],
    )
    exact = choose_match(npu, bench, "exact")
    assert exact.mode == "exact" and (
        "Torch_matmul_1_forward_output",
        "Torch_matmul_1_forward_output",
    ) in _pairs(exact.rows)  # shapes 4 against 5
    auto = choose_match(npu, bench)
    assert auto.mode == "align" and auto.note is not None and auto.note.shapes
    assert auto_aligned_text(auto.note).startswith("calls aligned automatically (exact names left")
    assert ("Torch_matmul_1_forward_output", "Torch_matmul_2_forward_output") in _pairs(auto.rows)
    assert ("Torch_relu_0_forward_output", "Torch_relu_0_forward_output") in _pairs(auto.rows)
    same = choose_match(npu, npu)
    assert (same.mode, same.note) == ("exact", None)


def test_match_advice_names_unpaired_entries_and_shape_mismatches(record):
    from ptdbg_tui.compare.matching.pairing import Misfits, match_advice

    npu = [record("Torch_add_0_forward_output"), record("Torch_add_1_forward_output", shape=[3])]
    bench = [record("Torch_add_0_forward_output")]
    assert match_advice(choose_match(npu, bench, "exact")) == Misfits(unpaired=1, shapes=0)
    assert misfits_text(Misfits(unpaired=1, shapes=0)) == "1 unpaired"
    assert misfits_text(Misfits(unpaired=1_200, shapes=3)) == "1,200 unpaired, 3 shapes differ"
    assert match_advice(choose_match(npu, bench, "align")) is None, "align is what it suggests"
    assert match_advice(choose_match(bench, bench, "exact")) is None
    assert match_advice(choose_match(npu, [], "exact")) is None, "nothing to pair with: no matching helps"
    assert match_advice(choose_match([], bench, "exact")) is None
    # calls of an op the other side never makes (the bench's model initialisation, before msprobe
    # started on the NPU): no shift left them unpaired, aligning pairs them with nothing
    init = [record("Tensor_uniform__0_forward_output"), record("Tensor_fill__0_forward_output")]
    assert match_advice(choose_match(bench, [*init, *bench], "exact")) is None
    assert match_advice(choose_match(npu, [*init, *bench], "exact")) == Misfits(unpaired=1, shapes=0)
    # a null on one side only (msprobe: a backward output slot for an argument that takes no
    # gradient, which one run's autograd node has): no alignment pairs it; it read "m → align? (1
    # unpaired)" on a real msprobe dump whose calls all paired
    null = record("Torch_add_0_backward_output.1", dtype="None")
    backward = [record("Torch_add_0_backward_output.0")]
    assert match_advice(choose_match([*bench, *backward, null], [*bench, *backward], "exact")) is None


# --- mixed pairs: what the other tools record differently (bench/msprobe_scenarios.py --tool ours) ------


def _mixed(npu, bench, ordered=(True, False)):
    dialects = tuple(DIALECTS[ORIGINAL_PTDBG if o else OURS] for o in ordered)
    rows = match_records(npu, bench, "exact", dialects)
    return {r.npu.name: r.bench.name for r in rows if r.matched}


def _linear_backward(record, theirs, batch=4):
    """A square linear (4 -> 4) of a batch of 4: the original's gradients (addmm node: bias, input,
    transposed weight) or ours (input, weight, bias), all but the bias [4, 4]."""
    call = "Functional_linear_0_backward"
    shapes = [(4,), (batch, 4), (4, 4)] if theirs else [(batch, 4), (4, 4), (4,)]
    return [record(f"{call}_input.0", [batch, 4])] + [
        record(f"{call}_output.{k}", list(s)) for k, s in enumerate(shapes)
    ]


@pytest.mark.parametrize("swap", [False, True])
def test_a_square_linears_transposed_weight_gradient_pairs_with_ours_transposed(record, swap):
    """By the autograd node's order, not by shape: all but the bias are [4, 4]."""
    theirs, ours = _linear_backward(record, True), _linear_backward(record, False)
    order = (False, True) if swap else (True, False)
    dialects = tuple(DIALECTS[ORIGINAL_PTDBG if o else OURS] for o in order)
    rows = match_records(*((ours, theirs) if swap else (theirs, ours)), "exact", dialects)
    pairs = {(r.bench if swap else r.npu).name: (r.npu if swap else r.bench).name for r in rows if r.matched}
    call = "Functional_linear_0_backward"
    assert pairs == {
        f"{call}_input.0": f"{call}_input.0",
        f"{call}_output.0": f"{call}_output.2",  # bias
        f"{call}_output.1": f"{call}_output.0",  # input
        f"{call}_output.2": f"{call}_output.1",
    }  # their W^T, our W
    assert [r.name for r in rows if r.transposed] == [f"{call}_output.{1 if swap else 2}"]


def test_a_linears_transposed_weight_gradient_pairs_only_when_its_shape_is_ours_reversed(record):
    theirs, ours = _linear_backward(record, True, batch=3), _linear_backward(record, False, batch=3)
    theirs[3] = record("Functional_linear_0_backward_output.2", [4, 4])
    ours[2] = record("Functional_linear_0_backward_output.1", [4, 5])  # not [4, 4] reversed
    rows = match_records(theirs, ours, "exact", (DIALECTS[ORIGINAL_PTDBG], DIALECTS[OURS]))
    assert not [r for r in rows if r.transposed]
    assert {r.name for r in rows if not r.matched} == {
        "Functional_linear_0_backward_output.2",
        "Functional_linear_0_backward_output.1",
    }


def test_two_tools_in_autograd_order_pair_linears_gradients_by_path(record):
    theirs = _linear_backward(record, True)
    assert len(_mixed(theirs, _linear_backward(record, True), ordered=(True, True))) == 4


def test_an_inner_view_nodes_gradient_does_not_pair_with_one_of_the_ops_own(record):
    """msprobe and the original record ``matmul`` of 3-D tensors (and CPU sdpa) at its last node, a
    view: one gradient, the incoming one, here of v's shape ([2, 3, 5]: attn [2, 3, 3] @ v)."""
    call = "Torch_matmul_0_backward"
    theirs = [record(f"{call}_input.0", [2, 3, 5]), record(f"{call}_output", [2, 3, 5])]
    ours = [
        record(f"{call}_input.0", [2, 3, 5]),
        record(f"{call}_output.0", [2, 3, 3]),
        record(f"{call}_output.1", [2, 3, 5]),
    ]
    assert _mixed(theirs, ours) == {f"{call}_input.0": f"{call}_input.0"}


def _relu(record, input_stats, output_stats):
    call = "Functional_relu_0_forward"
    return [
        record(f"{call}_input.0", [4], stats=input_stats),
        record(f"{call}_output", [4], stats=output_stats),
    ]


def test_an_inplace_calls_input_the_original_records_after_the_write_stays_unpaired(record):
    """The original records ``relu(x, inplace=True)``'s input after the call: its output."""
    x, relu_x = [1.0, -1.0, 0.0, 1.5], [1.0, 0.0, 0.5, 1.2]
    ours = _relu(record, x, relu_x)
    assert _mixed(_relu(record, relu_x, relu_x), ours) == {
        "Functional_relu_0_forward_output": "Functional_relu_0_forward_output"
    }
    # a relu that failed to write (its output is its input) is nearer our input: still paired
    assert len(_mixed(_relu(record, x, x), ours)) == 2
    # a tool that records the input before the call (ours, msprobe) on both sides: never unpaired
    assert len(_mixed(_relu(record, relu_x, relu_x), ours, ordered=(False, False))) == 2


def _as_general(rows):
    return [(r.npu, r.bench, r.fuzzy, r.seq, r.noise, r.transposed) for r in rows]


@pytest.mark.parametrize(
    "pkl",
    [
        "mixed/npu/ptdbg_dump_v4.0.T2/step0/rank10267/api_stack_dump.pkl",  # the original's: its detaches
        "mixed/bench/ptdbg_dump_v4.0/step0/rank0/api_stack_dump.pkl",
    ],
)
def test_sides_of_the_same_names_pair_as_the_general_matcher_pairs_them(pkl):
    """Two sides of one sequence of names pair one for one without the general matcher: the rows
    it makes, the tools' own detaches among them (:attr:`Row.noise`) and its choice are the same."""
    path = Path(__file__).resolve().parents[1] / "fixtures" / pkl
    npu, bench = read_pkl(path).tensors, read_pkl(path).tensors
    general = pairing._rows(npu, bench, pairing._keyed_pairs([r.name for r in npu], [r.name for r in bench]))
    for mode in ("exact", "auto"):
        matching = choose_match(npu, bench, mode, (DIALECTS[ORIGINAL_PTDBG],) * 2)
        assert matching.mode == "exact" and _as_general(matching.rows) == _as_general(general)
    assert any(r.noise for r in general) == ("T2" in pkl)
    shifted = [*bench[1:], bench[0]]  # other names at each place: the general matcher's way
    rows = match_records(npu, shifted)
    assert _as_general(rows) == _as_general(
        pairing._rows(npu, shifted, pairing._keyed_pairs([r.name for r in npu], [r.name for r in shifted]))
    )


def _stack(call: str, path: str, line: int, function: str, source: str) -> StackRecord:
    return StackRecord(f"{call}_stack_info", [(path, str(line), function, source)])


def test_calls_made_at_different_code_sites_do_not_pair_by_a_name_their_counters_share(record):
    """The NPU script scales its activation in place (``h.mul_(1.01)``); the bench's only ``mul_`` is its
    momentum buffer's, from ``opt.step()``. Both are ``Tensor_mul__0``: they paired by name, and the
    diagnosis said the runs pass 1.01 against 0.9 to one call. A port that moves the script (another
    folder, lines shifted by ``import torch_npu``) and edits a line still pairs its calls."""
    activation, momentum = _call("Tensor_mul_", 0, shape=(8, 4)), _call("Tensor_mul_", 0, shape=(4, 4))
    linear = _call("Functional_linear", 0)
    npu, bench = _recs(record, [activation, linear]), _recs(record, [linear, momentum])
    mul, fc = "Tensor_mul__0_forward", "Functional_linear_0_forward"
    at = "/home/me/train.py"
    npu_sites = {
        mul: _stack(mul, at, 31, "forward", "h.mul_(1.01)"),
        fc: _stack(fc, at, 33, "forward", "self.fc(h)"),
    }
    bench_fc = _stack(
        fc, "/bench/train.py", 30, "forward", "self.fc(h)  # the head"
    )  # 3 lines up: the port's
    sites = (npu_sites, {mul: _stack(mul, "/bench/train.py", 60, "<module>", "opt.step()"), fc: bench_fc})
    for mode in ("auto", "exact", "align"):
        rows = choose_match(npu, bench, mode, stacks=sites).rows
        paired = {r.npu.name for r in rows if r.npu is not None and r.bench is not None}
        assert paired == {name for name, _ in linear}, mode
    assert all(
        r.matched for r in choose_match(npu, bench, "exact").rows if r.npu is not None
    )  # no stacks: by name
    # one site unknown, one line of code elsewhere, or another line of code where the port shifted it:
    # the name decides, as before
    for bench_mul in (None, (90, "h.mul_( 1.01 )  # x"), (28, "h.mul_(1.01 if npu else 1.0)")):
        bench_sites = {fc: bench_fc}
        if bench_mul is not None:
            bench_sites[mul] = _stack(mul, "/bench/train.py", bench_mul[0], "forward", bench_mul[1])
        rows = choose_match(npu, bench, "exact", stacks=(npu_sites, bench_sites)).rows
        assert all(r.matched for r in rows if r.npu is not None), bench_mul
