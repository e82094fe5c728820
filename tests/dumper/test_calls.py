"""The call sidecar written by the dumper, read back on a real CNN + LSTM + attention step: every
recorded call has its spec, arguments decode to what was passed, tensors point at pkl entries."""

from __future__ import annotations

import functools
import operator
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from dumper import PrecisionDebugger
from ptdbg_tui.formats.calls import CallSpec, Dtype, Size, TensorArg, calls_path, read_calls
from ptdbg_tui.formats.layout import RankDump, discover
from ptdbg_tui.formats.pkl import read_pkl
from ptdbg_tui.formats.writer import RankWriter


class ConvLstmAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.relu = nn.ReLU(inplace=True)
        self.lstm = nn.LSTM(8, 8, batch_first=True)
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
        self.act = nn.GELU(approximate="tanh")
        self.head = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = self.relu(self.conv(x))  # (b, 8, 4, 4)
        f = F.max_pool2d(f, [2, 2])  # a list of ints
        seq = f.flatten(2).permute(0, 2, 1)  # (b, 4, 8)
        seq = seq.reshape(torch.Size([seq.shape[0], 4, 8]))  # a torch.Size
        out, _ = self.lstm(seq)
        out, _ = self.attn(out, out, out, need_weights=False)
        return F.log_softmax(self.head(self.act(out[:, -1])), dim=-1, dtype=torch.float32)


def _step(model: nn.Module) -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 3, 4, 4)
    F.nll_loss(model(x), torch.tensor([1, 3])).backward()


def _dump(path: Path, step=_step, model: nn.Module | None = None, **hook: object) -> RankDump:
    torch.manual_seed(0)
    model = model or ConvLstmAttention()
    debugger = PrecisionDebugger(dump_path=str(path))
    debugger.configure_hook(**hook)
    debugger.start()
    step(model)
    debugger.stop()
    (dump,) = discover(path)
    return dump


@pytest.fixture(scope="module")
def dumped(tmp_path_factory: pytest.TempPathFactory) -> tuple[RankDump, dict[str, CallSpec]]:
    dump = _dump(tmp_path_factory.mktemp("calls"))
    follower = read_calls(dump.records)
    assert follower.bad_lines == 0
    return dump, follower.specs


def _by_fn(specs: dict[str, CallSpec], fn: str) -> CallSpec:
    (spec,) = [s for s in specs.values() if s.fn == fn]
    return spec


def _tensors(value) -> list[TensorArg]:
    if isinstance(value, TensorArg):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    return []


def test_every_recorded_call_has_a_spec_that_names_a_real_function(dumped) -> None:
    dump, specs = dumped
    batch = read_pkl(dump.records)
    keys = {rec.entry.label for rec in batch.tensors} | {s.call.rsplit("_", 1)[0] for s in batch.stacks}
    assert keys == set(specs)
    for spec in specs.values():
        assert callable(functools.reduce(getattr, spec.fn.split(".")[1:], torch)), spec.fn
    assert {
        "torch.Tensor.__getitem__",
        "torch._VF.lstm",
        "torch.nn.functional.conv2d",
        "torch.nn.functional.multi_head_attention_forward",
    } <= {s.fn for s in specs.values()}


def test_recorded_tensors_point_at_pkl_entries_and_the_others_say_dtype_and_shape(dumped) -> None:
    dump, specs = dumped
    names = {rec.name for rec in read_pkl(dump.records).tensors}
    tensors = [t for s in specs.values() for t in _tensors([s.args, s.kwargs])]
    recorded = [t for t in tensors if t.entry is not None]
    assert len(recorded) > 30 and all(t.entry in names for t in recorded)
    lstm = _by_fn(specs, "torch._VF.lstm")
    assert lstm.args[0] == TensorArg(f"{lstm.call}_forward_input.0")
    assert lstm.args[2][3] == TensorArg(f"{lstm.call}_forward_input.2.3")  # a list of weights
    mha = _by_fn(specs, "torch.nn.functional.multi_head_attention_forward")
    assert mha.args[0] == TensorArg(f"{mha.call}_forward_input.0")
    assert mha.kwargs["need_weights"] is False and mha.kwargs["training"] is True
    assert mha.kwargs["attn_mask"] is None
    linear = _by_fn(specs, "torch.nn.functional.linear")
    assert linear.args[1] == TensorArg(f"{linear.call}_forward_input.1")


def test_arguments_decode_to_what_was_passed(dumped) -> None:
    _, specs = dumped
    assert _by_fn(specs, "torch.nn.functional.gelu").kwargs == {"approximate": "tanh"}
    log_softmax = _by_fn(specs, "torch.nn.functional.log_softmax")
    assert log_softmax.kwargs == {"dim": -1, "dtype": Dtype("torch.float32")}
    relu = _by_fn(specs, "torch.nn.functional.relu")
    assert relu.kwargs == {"inplace": True} and relu.inplace == 0
    assert _by_fn(specs, "torch.nn.functional.max_pool2d").args[1] == [2, 2]
    assert _by_fn(specs, "torch.Tensor.reshape").args[1] == Size((2, 4, 8))
    assert _by_fn(specs, "torch.Tensor.permute").args[1:] == [0, 2, 1]
    assert _by_fn(specs, "torch.Tensor.__getitem__").args[1] == (slice(None, None, None), -1)
    conv = _by_fn(specs, "torch.nn.functional.conv2d")
    assert conv.args[3:] == [(1, 1), (1, 1), (1, 1), 1] and conv.inplace is None
    assert type(_by_fn(specs, "torch._VF.lstm").args[5]) is float  # dropout 0.0 stays a float


def test_state_says_grad_training_and_the_global_flags(dumped) -> None:
    _, specs = dumped
    conv = _by_fn(specs, "torch.nn.functional.conv2d").state
    assert conv.grad and conv.training is True and conv.autocast is None
    assert conv.default_dtype == "torch.float32" and conv.deterministic is False
    assert conv.tf32_matmul == torch.backends.cuda.matmul.allow_tf32
    assert _by_fn(specs, "torch.nn.functional.nll_loss").state.training is None  # outside modules


def test_eval_autocast_no_grad_and_determinism_are_recorded(tmp_path: Path) -> None:
    def step(model: nn.Module) -> None:
        model.eval()
        torch.use_deterministic_algorithms(True)
        try:
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
                model(torch.ones(1, 4))
        finally:
            torch.use_deterministic_algorithms(False)

    specs = read_calls(_dump(tmp_path, step, nn.Sequential(nn.Linear(4, 2))).records).specs
    state = _by_fn(specs, "torch.nn.functional.linear").state
    assert state.training is False and state.grad is False and state.deterministic is True
    assert (state.autocast.device, state.autocast.dtype) == ("cpu", "torch.bfloat16")


def test_a_call_dumped_backward_only_still_has_its_spec(tmp_path: Path) -> None:
    dump = _dump(tmp_path, mode="list", scope=["Functional_linear_0_backward"])
    specs = read_calls(dump.records).specs
    assert list(specs) == ["Functional_linear_0"]
    assert specs["Functional_linear_0"].args[0] == TensorArg(None, "torch.float32", (2, 8))


def test_a_calls_line_comes_no_later_than_its_first_pkl_line(tmp_path: Path, monkeypatch) -> None:
    order: list[tuple[str, str]] = []
    line = RankWriter._line

    def logged(f, text: str) -> None:
        order.append((Path(f.name).name, text))
        line(f, text)

    monkeypatch.setattr(RankWriter, "_line", staticmethod(logged))
    _dump(tmp_path)
    first_pkl: dict[str, int] = {}
    for i, (name, text) in enumerate(order):
        if name.endswith(".pkl"):
            first_pkl.setdefault(text[2:].split("_forward")[0].split("_backward")[0], i)
    spec_at = {text.split('"')[3]: i for i, (name, text) in enumerate(order) if name.endswith(".calls.jsonl")}
    assert set(spec_at) == set(first_pkl)
    assert all(spec_at[k] < first_pkl[k] for k in spec_at)


def test_the_pkl_and_npy_are_the_same_bytes_with_or_without_the_sidecar(tmp_path: Path, monkeypatch) -> None:
    dumps = []
    for name in ("with", "without"):  # one call site: the same stack lines
        if name == "without":
            monkeypatch.setattr(RankWriter, "write_call", lambda self, spec, convert=None: None)
        dumps.append(_dump(tmp_path / name))
    with_sidecar, without = dumps
    assert calls_path(with_sidecar.records).stat().st_size > 0 and not calls_path(without.records).exists()
    assert with_sidecar.records.read_bytes() == without.records.read_bytes()
    npys = sorted(p.name for p in with_sidecar.tensor_dir.iterdir())
    assert npys == sorted(p.name for p in without.tensor_dir.iterdir())
    assert all(
        (with_sidecar.tensor_dir / n).read_bytes() == (without.tensor_dir / n).read_bytes() for n in npys
    )


def test_an_opaque_argument_is_named_by_its_type(tmp_path: Path) -> None:
    def step(model: nn.Module) -> None:
        torch.rand(3, generator=torch.Generator().manual_seed(1))
        torch.add(torch.ones(2), torch.ones(2), alpha=2, out=torch.empty(2))

    specs = read_calls(_dump(tmp_path, step).records).specs
    assert specs["Torch_rand_0"].kwargs["generator"].type_name == "torch._C.Generator"
    add = specs["Torch_add_0"]
    assert add.kwargs == {"alpha": 2, "out": TensorArg(None, "torch.float32", (2,))}
    assert operator.eq(add.args[0], TensorArg("Torch_add_0_forward_input.0"))


def test_a_collectives_reduce_op_is_named_so_that_two_runs_compare() -> None:
    """``op=ReduceOp.MAX`` was written as its type's name (``{"opaque": "…ReduceOp.RedOpType"}``), every
    op alike: a rank that reduced otherwise than its bench run (a tensor-parallel rank with MAX for SUM)
    passed the same argument as far as the compare could tell."""
    import torch.distributed as dist

    from dumper.arguments import torch_value
    from ptdbg_tui.formats.calls import TorchConst, encode_arg

    if not dist.is_available():
        pytest.skip("torch without distributed")
    assert torch_value(dist.ReduceOp.MAX) == TorchConst("torch.distributed.ReduceOp.MAX")
    assert encode_arg(dist.ReduceOp.SUM, torch_value) == {"torch": "torch.distributed.ReduceOp.SUM"}


def test_a_tensor_passed_by_keyword_has_its_data_written_beside_the_pkl_that_never_names_it(
    tmp_path: Path,
) -> None:
    """``F.scaled_dot_product_attention(q, k, v, attn_mask=mask)`` and ``F.layer_norm(x, s, weight=w)``:
    the pkl (the original's format) records positional tensors only, so the keyword tensor was known by
    dtype and shape alone and no replay could rebuild the call. Its data now goes to a file of the tensor
    folder that only the sidecar names; ``out=`` (written by the call) gets none, nor does a dump
    without npy files."""
    w = torch.rand(8) + 0.5
    mask = torch.rand(6, 6) > 0.3
    mask.fill_diagonal_(True)

    def step(model: nn.Module) -> None:
        q = torch.randn(1, 2, 6, 8)
        F.scaled_dot_product_attention(q, q, q, attn_mask=mask)
        F.layer_norm(torch.randn(4, 8), (8,), weight=w, eps=1e-3)
        torch.add(torch.ones(2), torch.ones(2), out=torch.empty(2))

    dump = _dump(tmp_path / "full", step)
    specs = read_calls(dump.records).specs
    sdpa = specs["Functional_scaled_dot_product_attention_0"].kwargs["attn_mask"]
    assert sdpa == TensorArg(
        None, "torch.bool", (6, 6), "Functional_scaled_dot_product_attention_0_forward_kwarg.attn_mask.npy"
    )
    weight = specs["Functional_layer_norm_0"].kwargs["weight"]
    assert weight.data == "Functional_layer_norm_0_forward_kwarg.weight.npy"
    assert (np.load(dump.tensor_dir / sdpa.data) == mask.numpy()).all()
    assert np.array_equal(np.load(dump.tensor_dir / weight.data), w.numpy())
    assert specs["Torch_add_0"].kwargs["out"] == TensorArg(None, "torch.float32", (2,))
    batch = read_pkl(dump.records)
    names = [r.name for r in batch.tensors]
    assert names and not batch.bad and not any("kwarg" in n for n in names)  # the pkl is the original's
    assert sorted(p.name for p in dump.tensor_dir.iterdir() if "kwarg" in p.name) == sorted(
        [sdpa.data, weight.data]
    )

    summary = _dump(tmp_path / "summary", step, summary_only=True)
    unrecorded = read_calls(summary.records).specs["Functional_layer_norm_0"].kwargs["weight"]
    assert unrecorded == TensorArg(None, "torch.float32", (8,)) and unrecorded.data is None
