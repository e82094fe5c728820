"""The dumper records faithfully and changes nothing about the training it watches."""

from __future__ import annotations

import logging
import math
import threading
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from dumper import PrecisionDebugger, catalog
from dumper.capture import CallCapture
from ptdbg_tui.compare.report.words import evidence_text
from ptdbg_tui.formats.layout import discover
from ptdbg_tui.formats.npy import load_npy, npy_path
from ptdbg_tui.formats.pkl import read_pkl

from .conftest import SmallNet, make_inputs, train_step
from .conftest import dumped as _dump


def test_gradients_are_bit_identical_with_and_without_dumping(tmp_path: Path) -> None:
    model, x, target = make_inputs()
    train_step(model, x, target)
    plain = [p.grad.clone() for p in model.parameters()]
    model, x, target = make_inputs()
    _dump(tmp_path, lambda: train_step(model, x, target))
    for a, p in zip(plain, model.parameters(), strict=True):
        assert torch.equal(a, p.grad)


def test_in_place_ops_and_views_of_parameters_still_work(tmp_path: Path) -> None:
    lin = nn.Linear(4, 4)
    x = torch.randn(2, 4)

    def step() -> torch.Tensor:
        h = F.linear(x, lin.weight.t())  # a view of a leaf as an input
        F.relu(h, inplace=True)  # in place on a dumped output
        h = h * 2
        h += 1
        h.mul_(2)
        h.sum().backward()
        return h

    expected = step().detach()
    expected_grad, lin.weight.grad = lin.weight.grad, None
    h, recs = _dump(tmp_path, step)
    assert torch.equal(h.detach(), expected) and torch.equal(lin.weight.grad, expected_grad)
    assert {
        "Tensor___iadd___0_forward_input.0",
        "Tensor_mul__0_backward_input.0",
        "Tensor_t_0_backward_output.0",
        "Functional_relu_0_backward_input.0",
    } <= set(recs)


def test_an_in_place_call_records_the_gradient_of_the_argument_it_writes(tmp_path: Path) -> None:
    """``relu(h, inplace=True)`` and ``g.add_(y)``: the written argument's gradient comes from the
    call's own autograd node (as the original records it), the other arguments' from their taps."""
    torch.manual_seed(0)
    lin, x, y = nn.Linear(4, 4), torch.randn(3, 4), torch.randn(3, 4, requires_grad=True)

    def step(inplace: bool) -> tuple[torch.Tensor, torch.Tensor]:
        h = lin(x)
        h.retain_grad()
        g = F.relu(h, inplace=inplace) * 2
        g.retain_grad()
        (g.add_(y) if inplace else g + y).pow(2).sum().backward()
        return h.grad, g.grad

    want_h, want_g = step(False)
    y.grad = None
    _, recs = _dump(tmp_path, lambda: step(True))
    tensor_dir = recs["_dump"].tensor_dir
    grad = lambda name: torch.tensor(load_npy(npy_path(tensor_dir, name)))  # noqa: E731
    assert torch.equal(grad("Functional_relu_0_backward_output.0"), want_h)  # what relu gave its input
    assert torch.equal(grad("Tensor_add__0_backward_output.0"), want_g)
    assert torch.equal(grad("Tensor_add__0_backward_output.1"), y.grad)


def test_python_scalars_and_nested_lists(tmp_path: Path) -> None:
    a, b = torch.ones(2), torch.zeros(2)
    _, recs = _dump(tmp_path, lambda: (torch.cat([a, b], 0), torch.add(a, 2.5), torch.full((2,), True)))
    assert {
        "Torch_cat_0_forward_input.0.0",
        "Torch_cat_0_forward_input.0.1",
        "Torch_cat_0_forward_input.1",
    } <= set(recs)
    scalar = recs["Torch_add_0_forward_input.1"]
    assert (scalar.dtype, scalar.shape_raw, scalar.stats) == ("<class 'float'>", "[]", [2.5] * 4)
    tensor_dir = recs["_dump"].tensor_dir
    assert load_npy(npy_path(tensor_dir, "Torch_add_0_forward_input.1")).dtype == np.float64
    assert recs["Torch_full_0_forward_output"].stats == [[], [], [], "Nan"]  # bool tensor
    assert recs["Torch_full_0_forward_input.1"].dtype == "<class 'bool'>"


def test_bf16_saved_as_float32_and_fp16_stats_do_not_overflow(tmp_path: Path) -> None:
    big = torch.full((10000,), 1000.0, dtype=torch.float16)
    bf = torch.arange(6, dtype=torch.bfloat16).reshape(2, 3)
    _, recs = _dump(tmp_path, lambda: (torch.abs(big), torch.neg(bf)))
    assert recs["Torch_abs_0_forward_output"].stats[3] == pytest.approx(100000.0, rel=1e-5)  # fp16: inf
    neg = recs["Torch_neg_0_forward_output"]
    assert neg.dtype == "torch.bfloat16" and neg.stats[:3] == [0.0, -5.0, -2.5]
    array = load_npy(npy_path(recs["_dump"].tensor_dir, "Torch_neg_0_forward_output"))
    assert array.dtype == np.float32 and array.tolist() == [[0, -1, -2], [-3, -4, -5]]


#: The narrow dtypes of torch 2.13 numpy lacks (float8, stored as float32) or torch cannot reduce (uint16+).
NARROW = [
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
    "uint16",
    "uint32",
    "uint64",
]


@pytest.mark.parametrize("checksums", [False, True])
def test_float8_and_wide_unsigned_tensors_are_recorded_with_stats_and_data(
    tmp_path: Path, caplog, checksums: bool
) -> None:
    """``TypeError: Got unsupported ScalarType Float8_e4m3fn`` was logged and the call's record
    dropped (numpy has no float8), and ``aminmax`` has no kernel for uint16/32/64. Each is recorded
    under its own dtype, with statistics of its values and an npy of them (float8 as float32)."""
    x = torch.linspace(-3, 3, 8)
    dtypes = [getattr(torch, name) for name in NARROW if hasattr(torch, name)]
    sources = {d: x if d.is_floating_point and "e8m0" not in str(d) else x.abs() for d in dtypes}
    hook = {"summary_mode": "md5"} if checksums else {}
    with caplog.at_level(logging.ERROR, logger="dumper"):
        outs, recs = _dump(tmp_path, lambda: [torch.clone(sources[d].to(d)) for d in dtypes], **hook)
    assert not caplog.records
    for i, (d, out) in enumerate(zip(dtypes, outs, strict=True)):
        rec = recs[f"Torch_clone_{i}_forward_output"]
        values = out.double()
        assert rec.dtype == str(d)
        assert rec.stats[:3] == pytest.approx([values.max(), values.min(), values.mean()]), d
        if checksums:
            assert rec.md5 is not None
            continue
        array = load_npy(npy_path(recs["_dump"].tensor_dir, rec.name))
        assert array.dtype == (np.float32 if d.is_floating_point else out.numpy().dtype), d
        assert array.tolist() == out.double().tolist(), d


def test_in_place_inputs_are_recorded_before_the_op(tmp_path: Path) -> None:
    x = torch.ones(3)
    _, recs = _dump(tmp_path, lambda: x.add_(1))
    assert recs["Tensor_add__0_forward_input.0"].stats[0] == 1.0
    assert recs["Tensor_add__0_forward_output"].stats[0] == 2.0


def test_a_tensor_filled_by_setitem_is_recorded_filled_where_it_is_used_next(tmp_path: Path) -> None:
    """Mixtral's expert routing (transformers 5.x) fills ``torch.empty_like(order)`` by
    ``inverse[order] = …`` and then indexes with it. ``__setitem__`` returns nothing, so its input
    (recorded before the write, rightly) was remembered under the version the tensor had *after* the
    write, and ``src[inverse]`` reused that record: its index held the uninitialised pre-fill
    contents. ``stale`` is the same with known pre-fill contents (5s), so the check never depends on
    what ``empty`` happened to hold."""
    src = torch.randn(6)
    order = torch.tensor([0, 2, 4, 1, 3, 5])
    stale = torch.full((6,), 5)
    expected = [0, 3, 1, 4, 2, 5]

    def calls() -> tuple[torch.Tensor, torch.Tensor]:
        inverse = torch.empty_like(order)
        inverse[order] = torch.arange(6)
        stale[order] = torch.arange(6)
        return src[inverse], src[stale]

    _, recs = _dump(tmp_path, calls)
    tensor_dir = recs["_dump"].tensor_dir
    assert recs["Tensor___setitem___1_forward_input.0"].stats[:3] == [5, 5, 5.0]  # what the call saw
    for call in ("Tensor___getitem___0", "Tensor___getitem___1"):
        index = f"{call}_forward_input.1"
        assert load_npy(npy_path(tensor_dir, index)).tolist() == expected, index
        assert recs[index].stats[:3] == [5, 0, 2.5], index


def test_only_the_outermost_call_is_recorded(tmp_path: Path) -> None:
    a, b = torch.ones(2, 3), torch.ones(2)
    _, recs = _dump(tmp_path, lambda: F.cosine_embedding_loss(a, a, b))
    calls = {r.call for r in recs.values() if hasattr(r, "call")}
    assert calls == {"Functional_cosine_embedding_loss_0_forward"}


def test_dropout_forced_off_by_default_and_logged(tmp_path: Path, caplog) -> None:
    drop = nn.Dropout(0.5).train()
    x = torch.ones(1000)
    with caplog.at_level(logging.INFO, logger="dumper"):
        y, recs = _dump(tmp_path / "a", lambda: drop(x))
    # it ran with p=0; the record keeps the p the script asked for
    assert torch.equal(y, x) and recs["Functional_dropout_0_forward_input.1"].stats[0] == 0.5
    assert any("Functional_dropout runs with p=0 while dumping" in m for m in caplog.messages)
    y, _ = _dump(tmp_path / "b", lambda: drop(x), disable_dropout=False)
    assert (y == 0).any()
    # a model without dropout is told nothing of it (it was, at every start)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="dumper"):
        _dump(tmp_path / "c", lambda: x * 2)
    assert not any("p=0" in m for m in caplog.messages), caplog.messages


def test_scripts_that_ask_for_different_dropout_are_told_so_though_neither_drops(tmp_path: Path) -> None:
    """The NPU port asks for Dropout(0.3), the bench for 0.1: both run with p=0 while dumping, so the
    data agree, and the record of the p each asked for is what differs. Before, both recorded 0.0 and
    the compare gave an all-clear (found by a review)."""
    from ptdbg_tui.compare.diagnosis.findings import ARGUMENTS
    from ptdbg_tui.engine.batch import compare_dumps

    x = torch.randn(8, 16)
    dumps = {}
    for side, p in (("npu", 0.3), ("bench", 0.1)):
        y, recs = _dump(tmp_path / side, lambda p=p: torch.relu(nn.Dropout(p).train()(x)))
        assert torch.equal(y, torch.relu(x))
        dumps[side] = recs["_dump"]
    (outcome,) = compare_dumps(dumps["npu"].records, dumps["bench"].records, jobs=1)
    culprit = outcome.diagnosis.culprit
    assert (culprit.call, culprit.kind) == ("Functional_dropout_0_forward", ARGUMENTS)
    assert "input.1: 0.3 against 0.1" in evidence_text(culprit.evidence)


def test_lstm_inter_layer_dropout_forced_off(tmp_path: Path) -> None:
    torch.manual_seed(0)
    lstm = nn.LSTM(3, 3, num_layers=2, dropout=0.9).train()
    x = torch.randn(4, 1, 3)
    expected = nn.LSTM(3, 3, num_layers=2, dropout=0.0)
    expected.load_state_dict(lstm.state_dict())
    (y, _), recs = _dump(tmp_path, lambda: lstm(x))
    torch.testing.assert_close(y, expected(x)[0])
    assert recs["VF_lstm_0_forward_input.5"].stats[0] == 0.0


def test_an_error_inside_the_dumper_is_logged_and_the_result_returned(
    tmp_path: Path, monkeypatch, caplog
) -> None:
    def broken(self, name, value):
        raise RuntimeError("boom")

    monkeypatch.setattr(CallCapture, "add", broken)
    x = torch.ones(2)
    debugger = PrecisionDebugger(dump_path=str(tmp_path))
    with caplog.at_level(logging.ERROR, logger="dumper"):
        debugger.start()
        results = [torch.add(x, 1), torch.add(x, 2)]
        debugger.stop()
    assert torch.equal(results[1], torch.full((2,), 3.0))
    assert caplog.messages == ["dumper: error while recording Torch_add; the call itself ran normally"]


def test_an_error_of_the_op_itself_propagates(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="size"):
        _dump(tmp_path, lambda: torch.add(torch.ones(2), torch.ones(3)))
    assert torch.add(torch.ones(1), 1).item() == 2.0


def test_other_threads_are_not_recorded(tmp_path: Path) -> None:
    def step() -> None:
        worker = threading.Thread(target=lambda: torch.sub(torch.ones(2), 1))
        worker.start()
        worker.join()
        torch.mul(torch.ones(2), 2)

    _, recs = _dump(tmp_path, step)
    calls = {r.call for k, r in recs.items() if k != "_dump"}
    assert calls == {"Torch_ones_0_forward", "Torch_mul_0_forward"}


def test_model_argument_names_modules(tmp_path: Path) -> None:
    model = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.Tanh()))
    _, recs = _dump(tmp_path, lambda: model(torch.ones(1, 2)), ctor={"model": model})
    from ptdbg_tui.formats.modules import ModuleFollower, sidecar_path

    chains = ModuleFollower(sidecar_path(recs["_dump"].records)).read(final=True)
    assert chains == {
        "Functional_linear_0": (("0", "Linear"),),
        "Torch_tanh_0": (("1", "Sequential"), ("1.0", "Tanh")),
    }


def test_without_torch_npu_its_list_is_skipped_with_one_log_line(caplog) -> None:
    catalog._torch_npu.cache_clear()
    catalog.targets.cache_clear()
    with caplog.at_level(logging.INFO, logger="dumper"):
        targets = catalog.targets()
        catalog.targets.cache_clear()
        catalog.targets()
    assert [m for m in caplog.messages if "torch_npu" in m] == [
        "dumper: torch_npu is not installed; its fused operators (NPU_*) are not wrapped"
    ]
    prefixes = {t.prefix for t in targets}
    assert {"Tensor", "Torch", "Functional", "VF", "Distributed"} <= prefixes and "NPU" not in prefixes
    apis = {t.api for t in targets}
    assert {"Tensor___getitem__", "Tensor___matmul__", "VF_lstm", "VF_gru", "Distributed_all_reduce"} <= apis


def test_rank_comes_from_the_device_then_zero(tmp_path: Path) -> None:
    _, recs = _dump(tmp_path / "a", lambda: torch.ones(1) + 1)
    assert recs["_dump"].rank == 0
    _, recs = _dump(tmp_path / "b", lambda: torch.ones(1) + 1, ctor={"rank": 3})
    assert recs["_dump"].rank == 3


def test_stack_line_of_a_direct_call_names_this_file(tmp_path: Path) -> None:
    debugger = PrecisionDebugger(dump_path=str(tmp_path))
    debugger.start()
    torch.add(torch.ones(1), 1)  # the line the stack must name
    line = test_stack_line_of_a_direct_call_names_this_file.__code__.co_firstlineno + 3
    debugger.stop()
    (dump,) = discover(tmp_path)
    stack = {s.call: s for s in read_pkl(dump.records).stacks}["Torch_add_0_forward"]
    assert stack.frames[0] == (
        __file__,
        str(line),
        "test_stack_line_of_a_direct_call_names_this_file",
        "torch.add(torch.ones(1), 1)  # the line the stack must name",
    )


def test_small_net_runs_under_the_dumper_in_eval_and_no_grad(tmp_path: Path) -> None:
    model = SmallNet().eval()
    with torch.no_grad():
        _, recs = _dump(tmp_path, lambda: model(torch.randn(1, 3, 8, 8)))
    assert not any("backward" in k for k in recs)


def test_collectives_record_their_arguments_before_and_after(tmp_path: Path) -> None:
    dist = torch.distributed
    if not dist.is_available():
        pytest.skip("torch.distributed is not built in")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    try:
        x = torch.arange(4.0)
        _, recs = _dump(tmp_path / "d", lambda: dist.all_reduce(x))
    finally:
        dist.destroy_process_group()
    assert recs["Distributed_all_reduce_0_forward_input.0"].stats[:2] == [3.0, 0.0]
    assert recs["Distributed_all_reduce_0_forward_output.0"].shape == (4,)
    assert recs["_dump"].rank == 0


def test_inference_mode_and_a_second_debugger(tmp_path: Path, caplog) -> None:
    x = torch.ones(3)
    other = PrecisionDebugger(dump_path=str(tmp_path / "other"))
    debugger = PrecisionDebugger(dump_path=str(tmp_path / "d"))
    debugger.start()
    with caplog.at_level(logging.WARNING, logger="dumper"):
        other.start()  # refused: one dump at a time
    with torch.inference_mode():
        torch.exp(torch.exp(x))
    other.stop()
    debugger.stop()
    assert "another PrecisionDebugger is dumping" in caplog.text and not (tmp_path / "other").exists()
    (dump,) = discover(tmp_path / "d")
    names = {r.name for r in read_pkl(dump.records).tensors}
    assert {
        "Torch_exp_0_forward_output",
        "Torch_exp_1_forward_input.0",
        "Torch_exp_1_forward_output",
    } <= names


def test_a_script_that_wraps_a_dumped_api_while_dumping_runs_every_step(tmp_path: Path) -> None:
    """``orig = F.gelu; F.gelu = mine`` while the dumper is installed (a script's or a library's
    import under ``ptdbg-dump run``): the next step's start() wrapped the script's function, whose
    ``orig`` is the wrapper, and the wrapper called itself without end (RecursionError at step 1)."""
    true_gelu = F.gelu
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.GELU())
    debugger = PrecisionDebugger(dump_path=str(tmp_path / "d"), hook_name="dump", step=[0, 1])
    debugger.start()
    found = F.gelu

    def gelu(x: torch.Tensor, approximate: str = "none") -> torch.Tensor:
        return found(x, approximate=approximate) * 1.0

    F.gelu = gelu
    try:
        for step in range(2):
            if step:
                debugger.start()
            model(torch.randn(2, 4)).sum().backward()
            debugger.stop()
            debugger.step()
    finally:
        F.gelu = true_gelu
    dumps = discover(tmp_path / "d")
    assert [d.step for d in dumps] == [0, 1]
    for dump in dumps:
        calls = {r.call for r in read_pkl(dump.records).tensors}
        assert {"Functional_gelu_0_forward", "Tensor___mul___0_forward"} <= calls, dump.step


def test_an_input_written_through_data_between_calls_is_recorded_as_it_is_now(tmp_path: Path) -> None:
    """``h.data.mul_(1.05)`` between two calls writes ``h`` without moving its version counter: the
    next call's input was recorded with ``h``'s stats from before the write (the previous call's
    output), so the diagnosis blamed the next call for error that entered before it."""
    torch.manual_seed(0)
    x = torch.randn(4, 4, requires_grad=True)
    debugger = PrecisionDebugger(dump_path=str(tmp_path / "d"), hook_name="dump", step=[0])
    debugger.start()
    h = F.gelu(x)
    h.data.mul_(1.05)
    torch.tanh(h).sum().backward()
    debugger.stop()
    debugger.step()
    (dump,) = discover(tmp_path / "d")
    stats = {r.name: r.stats for r in read_pkl(dump.records).tensors}
    written = stats["Tensor_mul__0_forward_output"]
    assert stats["Torch_tanh_0_forward_input.0"] == written
    assert stats["Torch_tanh_0_forward_input.0"] != stats["Functional_gelu_0_forward_output"]


def test_a_parameter_whose_data_is_replaced_between_calls_is_recorded_as_it_is_now(tmp_path: Path) -> None:
    """``w.data = other`` (ZeRO-style sharding gathers a parameter so before each use) gives ``w`` new
    values without moving its version counter: the next call that read ``w`` took its record from
    the call before."""
    torch.manual_seed(0)
    w = nn.Parameter(torch.randn(4, 4))
    x = torch.randn(2, 4)

    def calls() -> None:
        F.linear(x, w)
        w.data = torch.full((4, 4), 3.0)
        F.linear(x, w)

    _, records = _dump(tmp_path, calls)
    assert records["Functional_linear_1_forward_input.1"].stats == [3.0, 3.0, 3.0, 12.0]
    assert records["Functional_linear_0_forward_input.1"].stats != [3.0, 3.0, 3.0, 12.0]


def test_an_input_written_through_out_of_its_data_is_recorded_as_it_is_now(tmp_path: Path) -> None:
    """``torch.mul(h.data, 2, out=h.data)`` writes ``h`` as ``h.data.mul_(2)`` does, without moving its
    version counter: the next call's input was recorded with ``h``'s stats from before the write."""
    x = torch.randn(4, 4, requires_grad=True)

    def calls() -> None:
        h = F.gelu(x)
        torch.mul(h.data, 2, out=h.data)
        torch.tanh(h).sum().backward()

    _, records = _dump(tmp_path, calls)
    assert records["Torch_tanh_0_forward_input.0"].stats == records["Torch_mul_0_forward_output"].stats


def test_running_statistics_a_training_call_updated_are_recorded_as_they_are_now(tmp_path: Path) -> None:
    """batch_norm updates its running mean and variance in place without moving their version
    counters: a call that read them next (a validation pass) was recorded with their stats from before
    the update, whenever the training call was among the last tensors remembered. The eval pass's
    running variance then matched the bench's though it did not (a CI run named another input)."""
    torch.manual_seed(0)
    x = torch.randn(8, 4) * 3 + 1
    mean, var = torch.zeros(4), torch.ones(4)

    def calls() -> None:
        F.batch_norm(x, mean, var, training=True)
        F.batch_norm(x, mean, var, training=False)
        torch.instance_norm(x.T[None], None, None, mean, var, True, 0.1, 1e-5, False)
        F.batch_norm(x, mean, var, training=False)

    _, records = _dump(tmp_path, calls)
    first, second = (records[f"Functional_batch_norm_{i}_forward_input.2"].stats for i in (0, 1))
    assert second != first
    assert records["Torch_instance_norm_0_forward_input.4"].stats == second  # read before it updates them
    last = records["Functional_batch_norm_2_forward_input.2"].stats
    assert last != second
    assert math.isclose(last[1], var.min().item())


def test_running_statistics_a_call_left_out_of_the_dump_updated_are_recorded_as_they_are_now(
    tmp_path: Path,
) -> None:
    """The same where the dump leaves batch_norm out (``api_list``): the call is not recorded, but it
    still writes the running statistics that a recorded call read before and reads again after."""
    x = torch.randn(8, 4) * 3 + 1
    mean, var = torch.zeros(4), torch.ones(4)

    def calls() -> None:
        torch.add(var, 0)
        F.batch_norm(x, mean, var, training=True)
        torch.add(var, 0)

    _, records = _dump(tmp_path, calls, mode="api_list", api_list=["add"])
    assert "Functional_batch_norm_0_forward_input.2" not in records
    after = records["Torch_add_1_forward_input.0"].stats
    assert after != records["Torch_add_0_forward_input.0"].stats
    assert math.isclose(after[1], var.min().item())


@pytest.mark.parametrize("fused", [True, False])
def test_parameters_a_fused_optimizer_updated_are_recorded_as_they_are_now(
    tmp_path: Path, fused: bool
) -> None:
    """``Adam(fused=True)`` writes the parameters without moving their version counters: the next
    step's forward took the weight's record from the step before (the same statistics, though the
    optimizer had changed it), wherever that record was still among the last tensors remembered."""

    def train() -> nn.Linear:
        torch.manual_seed(0)
        model = nn.Linear(4, 2)
        opt = torch.optim.Adam(model.parameters(), lr=0.5, fused=fused)
        x, y = torch.randn(8, 4), torch.randn(8, 2)
        for _ in range(2):
            opt.zero_grad()
            F.mse_loss(model(x), y).backward()
            opt.step()
        return model

    torch.manual_seed(0)
    first_weight = nn.Linear(4, 2).weight.detach().clone()
    _, records = _dump(tmp_path, train)
    first, second = (records[f"Functional_linear_{i}_forward_input.1"].stats for i in (0, 1))
    assert math.isclose(first[1], first_weight.min().item())
    assert second != first  # lr 0.5: the step moved every weight


def test_an_in_place_op_on_a_view_returned_by_a_dumped_call_reaches_the_input_gradient(
    tmp_path: Path,
) -> None:
    """``y = x[0:2]; y.mul_(2)``: the view was made of the tap's detached alias of ``x``, so autograd
    rebased the tap's output, not ``x``, and ``x``'s gradient missed the multiplication (a.grad
    [1, 1, 1, 1] instead of [2, 2, 1, 1]); likewise a call that returns its input itself
    (``x.float()`` of a float tensor)."""

    def step() -> list[torch.Tensor]:
        a = torch.arange(4.0, requires_grad=True)
        x = a * 1
        x[0:2].mul_(2)
        y = x.float()
        y.mul_(3)
        (x * x).sum().backward()
        return [a.grad]

    expected = step()
    got, records = _dump(tmp_path, step)
    assert torch.equal(got[0], expected[0])
    assert "Tensor___getitem___0_forward_output" in records


def test_a_compiled_model_runs_as_without_the_dumper_and_its_region_is_not_recorded(
    tmp_path: Path,
) -> None:
    """torch.compile traced the dumper's module hooks and wrappers into the model and failed
    (``AssertionError: UnspecializedNNModuleVariable(Net) is already tracked for mutation``): the
    training died at its first step. A compiled region runs the true APIs, as without the dumper;
    the calls outside it are recorded."""
    torch._dynamo.reset()

    def step() -> list[torch.Tensor]:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Dropout(0.0), nn.Linear(8, 2))
        compiled = torch.compile(model, backend="eager")
        loss = F.mse_loss(compiled(torch.randn(3, 4)), torch.zeros(3, 2))
        loss.backward()
        return [loss.detach(), *(p.grad for p in model.parameters())]

    expected = step()
    torch._dynamo.reset()
    got, records = _dump(tmp_path, step)
    torch._dynamo.reset()
    assert all(torch.equal(a, b) for a, b in zip(got, expected, strict=True))
    assert "Functional_mse_loss_0_forward_output" in records
    assert not any(name.startswith("Functional_linear") for name in records)


def test_calls_on_meta_and_nested_tensors_are_recorded_without_errors(tmp_path: Path, caplog) -> None:
    """A call on a meta tensor lost its record (``unknown device type for autocast`` while reading
    the call's state), and one taking a nested tensor lost its record in the writer (``NestedTensorImpl
    doesn't support sizes`` while writing its call sidecar line): both were logged as dumper errors."""
    nested = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])

    def calls() -> None:
        torch.add(torch.empty(2, 2, device="meta"), 1)
        torch.cat(nested.unbind())

    with caplog.at_level(logging.ERROR, logger="dumper"):
        _, records = _dump(tmp_path, calls)
    assert not caplog.records
    stacks = {s.call for s in read_pkl(records["_dump"].records).stacks}
    assert {"Torch_add_0_forward", "Tensor_unbind_0_forward", "Torch_cat_0_forward"} <= stacks
