"""What one dumped training step of a real model contains, read back with the reader side."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from dumper.stack import _SKIPPED_DIRS
from ptdbg_tui.formats.modules import ModuleFollower, sidecar_path
from ptdbg_tui.formats.naming import parse_name
from ptdbg_tui.formats.npy import load_npy, npy_path
from ptdbg_tui.formats.pkl import read_pkl

from .conftest import make_inputs, train_step

EXPECTED_CALLS = [
    "Functional_conv2d_0_forward",
    "Functional_batch_norm_0_forward",
    "Torch_relu_0_forward",
    "Tensor_mean_0_forward",
    "Tensor_transpose_0_forward",
    "VF_lstm_0_forward",
    "Tensor___getitem___0_forward",
    "Functional_linear_0_forward",
    "Functional_softmax_0_forward",
    "Torch_log_0_forward",
    "Functional_nll_loss_0_forward",
]


@pytest.fixture(scope="module")
def dumped(tmp_path_factory: pytest.TempPathFactory):
    """One dump shared by the read-only checks of this module."""
    from dumper import PrecisionDebugger
    from ptdbg_tui.formats.layout import discover

    path = tmp_path_factory.mktemp("dump")
    model, x, target = make_inputs()
    debugger = PrecisionDebugger(dump_path=str(path), hook_name="dump", step=[0])
    debugger.configure_hook(mode="api_stack")
    debugger.start()
    train_step(model, x, target)
    debugger.stop()
    debugger.step()
    (dump,) = discover(path)
    return dump, read_pkl(dump.records)


def _torch_stats(a: np.ndarray) -> list[float]:
    t = torch.from_numpy(np.array(a)).double()
    return [t.max().item(), t.min().item(), t.mean().item(), torch.linalg.vector_norm(t).item()]


def test_layout_and_every_line_parses(dumped) -> None:
    dump, batch = dumped
    assert (dump.step, dump.rank) == (0, 0)  # rank 0 on a CPU run, not the pid
    assert dump.records.name == "api_stack_dump.pkl"
    assert dump.records.parent.parent.parent.name == "ptdbg_dump_v4.0"
    assert not batch.bad and len(batch.tensors) > 50
    assert all(rec.entry is not None for rec in batch.tensors)


def test_expected_calls_in_execution_order(dumped) -> None:
    _, batch = dumped
    calls = list(dict.fromkeys(r.call for r in batch.tensors))
    forward = [c for c in calls if c.endswith("_forward")]
    positions = [forward.index(c) for c in EXPECTED_CALLS]
    assert positions == sorted(positions)
    backward = [c for c in calls if c.endswith("_backward")]
    assert (
        backward.index("Functional_linear_0_backward")
        < backward.index("VF_lstm_0_backward")
        < backward.index("Functional_conv2d_0_backward")
    )
    assert "Torch_ones_like_0_forward" not in calls  # autograd's own seed gradient is not a user call
    assert not any("detach" in c for c in calls)  # the dumper's own ops are never recorded


def test_the_loss_backward_records_its_seed_gradient(dumped) -> None:
    """The backward's root, the loss, gets autograd's seed 1.0 as its incoming gradient: recorded as
    the original records it (``_backward_input.0``), so that it pairs with the other tools' dumps."""
    _, batch = dumped
    by_name = {r.name: r for r in batch.tensors}
    seed = by_name["Functional_nll_loss_0_backward_input.0"]
    assert seed.shape == () and seed.stats[:3] == [1.0, 1.0, 1.0]
    assert [r.name for r in batch.tensors if r.call == "Functional_nll_loss_0_backward"] == [
        "Functional_nll_loss_0_backward_input.0",
        "Functional_nll_loss_0_backward_output.0",
    ]


def test_shapes_dtypes_and_stats_match_torch(dumped) -> None:
    dump, batch = dumped
    by_name = {r.name: r for r in batch.tensors}
    assert by_name["Functional_conv2d_0_forward_input.0"].shape == (2, 3, 8, 8)
    assert by_name["Functional_conv2d_0_forward_output"].shape == (2, 4, 6, 6)
    assert by_name["VF_lstm_0_forward_output.0"].shape == (2, 6, 8)
    assert by_name["Functional_softmax_0_forward_output"].shape == (2, 5)
    assert by_name["Functional_nll_loss_0_forward_input.1"].dtype == "torch.int64"
    checked = 0
    for rec in batch.tensors:
        array = load_npy(npy_path(dump.tensor_dir, rec.name))
        if rec.is_scalar:
            assert array.shape == () and rec.stats == [array.item()] * 4
            continue
        assert array.shape == rec.shape and str(array.dtype) == rec.dtype.removeprefix("torch.")
        if rec.dtype == "torch.float32" and rec.numel > 1:
            assert rec.stats == pytest.approx(_torch_stats(array), rel=1e-5, abs=1e-6)
            checked += 1
    assert checked > 40
    loss = by_name["Functional_nll_loss_0_forward_output"]
    assert loss.shape == () and loss.stats[3] == "Nan" and loss.stats[0] == loss.stats[1]


def test_stack_lines_point_at_the_user_code(dumped) -> None:
    _, batch = dumped
    stacks = {s.call: s for s in batch.stacks}
    assert set(stacks) >= set(EXPECTED_CALLS) | {"VF_lstm_0_backward"}
    conftest = str(Path(__file__).with_name("conftest.py"))
    lstm = stacks["VF_lstm_0_forward"].frames
    assert lstm[0][0] == conftest and lstm[0][2] == "forward" and lstm[0][3] == "out, _ = self.lstm(seq)"
    assert any(f[0] == conftest and f[2] == "train_step" for f in lstm)
    assert stacks["VF_lstm_0_backward"].frames == lstm  # the forward call site, also for backward
    for stack in batch.stacks:
        assert not any(f[0].startswith(_SKIPPED_DIRS) for f in stack.frames), stack.name


def test_lstm_backward_holds_the_true_gradients(dumped) -> None:
    dump, batch = dumped
    names = {r.name for r in batch.tensors}
    assert {
        "VF_lstm_0_backward_input.0",
        "VF_lstm_0_backward_output.0",
        "VF_lstm_0_backward_output.2.0",
        "VF_lstm_0_backward_output.2.3",
    } <= names
    assert "VF_lstm_0_backward_output.1.0" not in names  # h0 needs no grad: skipped, index kept

    model, x, target = make_inputs()  # the same step again, without the dumper
    seen = {}
    model.lstm.register_forward_pre_hook(lambda m, args: seen.setdefault("in", args[0]).retain_grad())
    model.lstm.register_forward_hook(lambda m, args, out: seen.setdefault("out", out[0]).retain_grad())
    train_step(model, x, target)
    expected = {
        "VF_lstm_0_backward_input.0": seen["out"].grad,
        "VF_lstm_0_backward_output.0": seen["in"].grad,
        "VF_lstm_0_backward_output.2.0": model.lstm.weight_ih_l0.grad,
        "VF_lstm_0_backward_output.2.3": model.lstm.bias_hh_l0.grad,
    }
    for name, grad in expected.items():
        np.testing.assert_allclose(
            load_npy(npy_path(dump.tensor_dir, name)), grad.numpy(), rtol=1e-5, atol=1e-8
        )


def test_module_sidecar_names_the_modules(dumped) -> None:
    dump, _ = dumped
    chains = ModuleFollower(sidecar_path(dump.records)).read(final=True)
    assert chains["VF_lstm_0"] == (("lstm", "LSTM"),)
    assert chains["Functional_linear_0"] == (("head", "Linear"),)
    assert chains["Functional_conv2d_0"] == (("conv", "Conv2d"),)
    assert chains["Torch_relu_0"] == (("", "SmallNet"),)  # called in the model's own forward: its root
    assert "Torch_log_0" not in chains  # called outside any module


def test_names_follow_the_grammar(dumped) -> None:
    _, batch = dumped
    for rec in batch.tensors:
        entry = parse_name(rec.name)
        assert entry is not None and str(entry) == rec.name
    assert not any(math.isnan(v) for r in batch.tensors for v in r.stats if isinstance(v, float))


def test_a_tensor_recorded_twice_is_written_once(dumped) -> None:
    dump, _ = dumped
    out = Path(npy_path(dump.tensor_dir, "Functional_conv2d_0_forward_output"))
    again = Path(npy_path(dump.tensor_dir, "Functional_batch_norm_0_forward_input.0"))
    assert out.stat().st_ino == again.stat().st_ino  # one host copy, one file, two names
    assert not list(dump.tensor_dir.glob(".*.tmp"))
