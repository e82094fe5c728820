"""Fault scenarios dumped with the real msprobe (mindstudio-probe), level L1, task tensor.

    <msprobe venv>/bin/python bench/msprobe_scenarios.py DIR [--only NAME ...] [--jobs N] [--list]

For each scenario, dumps one training step of the bench run into ``DIR/NAME/bench`` and of the NPU
run (inputs and weights times ``1 + 1e-6 * randn``, maybe the whole model in fp16/bf16, and at
most one injected fault) into ``DIR/NAME/npu``, each side in a process of its own (msprobe wraps
the APIs once, when its ``PrecisionDebugger`` is created). ``DIR/NAME/truth.json`` holds the
ground truth: the msprobe call names (``Functional.gelu.1.forward``) where the error starts.
Compare them with ``bench/msprobe_diagnosis.py DIR`` (the project's venv).

This script only dumps: it needs torch and msprobe, never ptdbg_tui (msprobe is no dependency of
the project). The models and training steps are ``bench/diagnosis_scenarios/models.py``'s.

A fault keeps the autograd graph of the true op (a plain ``lambda x: 1.01 * F.gelu(x)`` would add
a ``mul`` node, and msprobe records the backward of the node the output hangs from): a forward
fault runs the true op and overwrites its output's values through ``.data`` (its backward is the
true one at the inputs the op saved); a backward fault runs the true op and hooks the op's
autograd node, rewriting the gradients it produces, in the node's own order, before msprobe's hook
on that node records them. (A ``torch.autograd.Function`` around the true op keeps the graph's
shape too, but its node lists the gradients in argument order where ``addmm``'s lists bias,
input, weight-transposed: msprobe records that order, and the backward outputs would not pair.)
The in-place ReLU fault is such a Function (``mark_dirty``, one output, as ``relu_``'s node).
The faulty function is installed on the module attribute (``torch.nn.functional.gelu``) before
the ``PrecisionDebugger`` is created (msprobe reads and wraps the attributes then), so its hook
wraps the faulty function and names it as the true one; calls inside the faulty function are
nested in the hooked call and not dumped. ``torch._VF`` functions (``nn.LSTM``'s ``_VF.lstm``) are
not hooked by this msprobe (26.2, CPU) at all: an LSTM's call is not in an L1 dump (its fault, a
Function around it, is named at the call its error reaches: the embedding's backward).
Everything a fault computes in a backward uses the torch functions as they were before msprobe
wrapped them: msprobe records an API called outside any other API (a backward) as a forward call.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import math
import os
import subprocess
import sys
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

# the originals, before msprobe wraps the module attributes
_mul, _add, _erf, _sigmoid, _rand, _zeros_like, _sub = (torch.mul, torch.add, torch.erf, torch.sigmoid,
                                                         torch.rand, torch.zeros_like, torch.sub)
_detach, _requires_grad_, _gt = torch.Tensor.detach, torch.Tensor.requires_grad_, torch.gt
_autograd_grad = torch.autograd.grad

NOISE = 1e-6
MODEL_SEED = 0
VOCAB = 40

# --- models: bench/diagnosis_scenarios/models.py (torch only), loaded by path: the package itself
# imports the project's dumper, which this venv does not have

def _load_models() -> ModuleType:
    path = Path(__file__).resolve().parent / "diagnosis_scenarios" / "models.py"
    spec = importlib.util.spec_from_file_location("scenario_models", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


_models = _load_models()
VOCAB, Workload, nudge = _models.VOCAB, _models.Workload, _models.nudge
Mlp, ResMlp, ConvBnNet = _models.Mlp, _models.ResMlp, _models.ConvBnNet
Upsampler, TinyLm = _models.Upsampler, _models.TinyLm
LstmTagger, PositiveHead = _models.LstmTagger, _models.PositiveHead
regression, aux_regression, classify = _models.regression, _models.aux_regression, _models.classify
language_model, tagging = _models.language_model, _models.tagging


def tiny_lm(depth: int = 1, **block: Any) -> Workload:
    tokens = torch.randint(1, VOCAB, (4, 13))
    tokens[:, -3:] = 0
    return Workload(TinyLm(depth=depth, **block), (tokens[:, :-1], tokens[:, 1:]), language_model)


def silu_mlp() -> Workload:
    return Workload(Mlp([32, 64, 64, 64, 8], nn.SiLU(), gain=1.7), (torch.randn(64, 32), torch.randn(64, 8)),
                    aux_regression)


def res_mlp() -> Workload:
    return Workload(ResMlp(32, blocks=4), (torch.randn(16, 32), torch.randn(16, 32)), regression)


def tanh_mlp() -> Workload:
    return Workload(Mlp([16, 32, 32, 4], nn.Tanh()), (torch.randn(8, 16), torch.randint(0, 4, (8,))),
                    classify)


def deep_mlp() -> Workload:
    return Workload(Mlp([32] * 31, nn.ReLU(), gain=2.0), (torch.randn(16, 32), torch.randn(16, 32)),
                    regression)


def conv_net() -> Workload:
    net = ConvBnNet(bias_before_bn=True)
    return Workload(net, (torch.randn(4, 3, 8, 8), torch.randint(0, 5, (4,))), classify)


def upsampler() -> Workload:
    return Workload(Upsampler(), (torch.randn(2, 4, 8, 8), torch.randn(2, 2, 16, 16)), regression)


def lstm_tagger() -> Workload:
    tokens, tags = torch.randint(0, VOCAB, (2, 10)), torch.randint(0, 6, (2, 10))
    return Workload(LstmTagger(hidden=24, layers=1), (tokens, tags), tagging)


def positive_head() -> Workload:
    x = torch.randn(8, 16)
    return Workload(PositiveHead(), (x, torch.randint(0, 4, (8,))), classify)


# --- faults ---------------------------------------------------------------------------------------

Tensors = tuple[torch.Tensor, ...]
Grads = list[torch.Tensor | None]
FwdFix = Callable[[Tensors, list[torch.Tensor]], Tensors]  # (outputs, inputs) -> outputs
# (input gradients, inputs, output gradients) -> input gradients
BwdFix = Callable[[Grads, list[torch.Tensor], Tensors], Grads]


class _Slot:
    def __init__(self, index: int) -> None:
        self.index = index


def _flatten(obj: Any, out: list[torch.Tensor]) -> Any:
    if isinstance(obj, torch.Tensor):
        out.append(obj)
        return _Slot(len(out) - 1)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_flatten(o, out) for o in obj)
    if isinstance(obj, dict):
        return {k: _flatten(v, out) for k, v in obj.items()}
    return obj


def _fill(template: Any, tensors: list[torch.Tensor]) -> Any:
    if isinstance(template, _Slot):
        return tensors[template.index]
    if isinstance(template, (list, tuple)):
        return type(template)(_fill(t, tensors) for t in template)
    if isinstance(template, dict):
        return {k: _fill(v, tensors) for k, v in template.items()}
    return template


class _Faulty(torch.autograd.Function):
    """The true op run on detached copies of its inputs (its own graph kept for the backward); the
    forward value and the input gradients passed through the fixes."""

    @staticmethod
    def forward(ctx: Any, spec: tuple[Any, ...], *tensors: torch.Tensor) -> Any:
        fn, args, kwargs, fwd, bwd = spec
        with torch.enable_grad():
            leaves = [_requires_grad_(_detach(t)) if t.requires_grad else _detach(t) for t in tensors]
            out = fn(*_fill(args, leaves), **_fill(kwargs, leaves))
        single = isinstance(out, torch.Tensor)
        outs = (out,) if single else tuple(out)
        ctx.leaves, ctx.outs, ctx.bwd = leaves, outs, bwd
        values = tuple(_detach(o) for o in outs)
        if fwd is not None:
            with torch.no_grad():
                values = fwd(values, leaves)
        return values[0] if single else values

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> Any:
        need = [i for i, leaf in enumerate(ctx.leaves) if leaf.requires_grad]
        pairs = [(o, g) for o, g in zip(ctx.outs, grads, strict=True) if o.requires_grad and g is not None]
        result: Grads = [None] * len(ctx.leaves)
        if need and pairs:
            got = _autograd_grad([o for o, _ in pairs], [ctx.leaves[i] for i in need], [g for _, g in pairs],
                                 allow_unused=True)
            for i, g in zip(need, got, strict=True):
                result[i] = g
        if ctx.bwd is not None:
            result = ctx.bwd(result, ctx.leaves, grads)
        return (None, *result)


def faulty(fn: Callable[..., Any], fwd: FwdFix | None = None, bwd: BwdFix | None = None,
           nth: int | None = None) -> Callable[..., Any]:
    """``fn`` with a forward and/or backward fix, on its ``nth`` call only (0-based) or on all."""
    count = itertools.count()

    def call(*args: Any, **kwargs: Any) -> Any:
        k = next(count)
        if nth is not None and k != nth:
            return fn(*args, **kwargs)
        tensors: list[torch.Tensor] = []
        a, kw = _flatten(args, tensors), _flatten(kwargs, tensors)
        out = _Faulty.apply((fn, a, kw, fwd, bwd), *tensors)
        return out

    call.__name__ = getattr(fn, "__name__", "faulty")
    return call


class _ReluNotWritten(torch.autograd.Function):
    """An in-place ReLU whose result is never written: the input comes out unchanged (marked
    dirty as relu_ marks it); the backward is the true one (the gradient where x > 0)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(_gt(x, 0))
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        (mask,) = ctx.saved_tensors
        return _mul(g, mask)


def relu_not_written(fn: Callable[..., Any], nth: int) -> Callable[..., Any]:
    count = itertools.count()

    def relu(x: torch.Tensor, inplace: bool = False) -> torch.Tensor:
        if next(count) == nth and inplace:
            return _ReluNotWritten.apply(x)
        return fn(x, inplace=inplace)

    return relu


def corrupted(fn: Callable[..., Any], fix: FwdFix, nth: int | None = None) -> Callable[..., Any]:
    """A forward fault that keeps the true op's autograd node: the true op runs, then its (first)
    output's values are overwritten through ``.data`` (no version bump: the true backward runs
    on what the op saved)."""
    count = itertools.count()

    def call(*args: Any, **kwargs: Any) -> Any:
        out = fn(*args, **kwargs)
        if nth is None or next(count) == nth:
            first = out if isinstance(out, torch.Tensor) else out[0]
            with torch.no_grad():
                first.data.copy_(fix((_detach(first),), [])[0])
        return out

    return call


# (gradients the node produces, gradients it got, the API call's arguments) -> the first
NodeFix = Callable[[list[Any], tuple[torch.Tensor, ...], tuple[Any, ...]], list[Any]]


def hooked(fn: Callable[..., Any], fix: NodeFix, nth: int | None = None) -> Callable[..., Any]:
    """A backward fault that keeps the true op's autograd node: the true op runs, and a hook on
    its output's node rewrites the gradients the node produces (``fix(grad_inputs, grad_outputs,
    args)``, in the node's order) before msprobe's hook, registered later on the same node, sees
    them."""
    count = itertools.count()

    def call(*args: Any, **kwargs: Any) -> Any:
        out = fn(*args, **kwargs)
        if nth is None or next(count) == nth:
            first = out if isinstance(out, torch.Tensor) else out[0]
            first.grad_fn.register_hook(lambda gi, go: tuple(fix(list(gi), go, args)))
        return out

    return call


def _position(grads: list[torch.Tensor | None], like: torch.Tensor) -> int:
    """The node output holding the gradient of ``like`` (an argument): the one of its shape, or of
    its transpose (``addmm``'s gradient for ``weight.t()``)."""
    shapes = [None if g is None else tuple(g.shape) for g in grads]
    for shape in (tuple(like.shape), tuple(like.shape)[::-1]):
        if shapes.count(shape) == 1:
            return shapes.index(shape)
    raise ValueError(f"no unique gradient of shape {tuple(like.shape)} in {shapes}")


def node_perturb(arg: int, scale: float, seed: int) -> NodeFix:
    """The gradient for argument ``arg`` times ``1 + scale * u``, ``u`` uniform in [-1, 1]."""

    def fix(gi: list[torch.Tensor | None], go: tuple[torch.Tensor, ...], args: tuple[Any, ...]) -> list[Any]:
        i = _position(gi, args[arg])
        g = gi[i]
        assert g is not None
        gi[i] = _mul(g, _add(_mul(_uniform(g.shape, seed).to(g.dtype), scale), 1))
        return gi

    return fix


def node_scale(arg: int, factor: float) -> NodeFix:
    def fix(gi: list[torch.Tensor | None], go: tuple[torch.Tensor, ...], args: tuple[Any, ...]) -> list[Any]:
        i = _position(gi, args[arg])
        gi[i] = _mul(gi[i], factor)
        return gi

    return fix


def node_silu_without_x_term(gi: list[Any], go: tuple[torch.Tensor, ...], args: tuple[Any, ...]) -> list[Any]:
    """d silu/dx = s(x) (1 + x (1 - s(x))); this kernel keeps s(x) only."""
    return [_mul(go[0], _sigmoid(args[0]))]


def node_gelu_without_x_term(gi: list[Any], go: tuple[torch.Tensor, ...], args: tuple[Any, ...]) -> list[Any]:
    """d gelu/dx = Phi(x) + x phi(x); this kernel keeps Phi(x) only."""
    return [_mul(go[0], _mul(_add(_erf(_mul(args[0], 1 / math.sqrt(2))), 1), 0.5))]


def nth_call(fn: Callable[..., Any], bad: Callable[..., Any], nth: int) -> Callable[..., Any]:
    """``bad`` on the ``nth`` call (0-based), ``fn`` on the others."""
    count = itertools.count()

    def call(*args: Any, **kwargs: Any) -> Any:
        return (bad if next(count) == nth else fn)(*args, **kwargs)

    return call


def eps_of(fn: Callable[..., Any], eps: float) -> Callable[..., Any]:
    """``layer_norm`` with a wrong ``eps``."""
    return lambda x, shape, weight=None, bias=None, eps_=1e-5: fn(x, shape, weight, bias, eps)


def _uniform(shape: torch.Size, seed: int) -> torch.Tensor:
    return _sub(_mul(_rand(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float32), 2), 1)


def scale_out(factor: float) -> FwdFix:
    return lambda outs, ins: (_mul(outs[0], factor), *outs[1:])


def jitter_out(scale: float, seed: int = 7) -> FwdFix:
    def fix(outs: Tensors, ins: list[torch.Tensor]) -> Tensors:
        factor = _add(_mul(_uniform(outs[0].shape, seed), scale), 1).to(outs[0].dtype)
        return (_mul(outs[0], factor), *outs[1:])

    return fix


def zero_out(outs: Tensors, ins: list[torch.Tensor]) -> Tensors:
    return (_zeros_like(outs[0]), *outs[1:])


def shift_out(delta: float) -> FwdFix:
    return lambda outs, ins: (_add(outs[0], delta), *outs[1:])


def perturb_grad(position: int, scale: float, seed: int) -> BwdFix:
    """The gradient of input ``position`` times ``1 + scale * u``, ``u`` uniform in [-1, 1]."""

    def fix(grads: Grads, ins: list[torch.Tensor], gouts: Tensors) -> Grads:
        g = grads[position]
        if g is not None:
            u = _uniform(g.shape, seed).to(g.dtype)
            grads = [*grads[:position], _mul(g, _add(_mul(u, scale), 1)), *grads[position + 1:]]
        return grads

    return fix


# --- scenarios ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    name: str
    what: str
    build: Callable[[], Workload]
    truth: tuple[str, ...] = ()
    fault: tuple[Any, str, Callable[[Callable[..., Any]], Callable[..., Any]]] | None = None
    npu_dtype: torch.dtype | None = None


Make = Callable[[Callable[..., Any]], Callable[..., Any]]  # true function -> faulty function


def on(owner: Any, attr: str, make: Make) -> tuple[Any, str, Make]:
    return owner, attr, make


S = Scenario
SCENARIOS = [
    S("linear_6th_of_8_scale_1.01", "only the 6th of 8 F.linear calls returns 1.01x", res_mlp,
      ("Functional.linear.5.forward",), on(F, "linear", lambda fn: corrupted(fn, scale_out(1.01), nth=5))),
    S("gelu_2nd_of_2_scale_1.01", "two transformer blocks; the 2nd F.gelu returns 1.01x",
      lambda: tiny_lm(depth=2),
      ("Functional.gelu.1.forward",), on(F, "gelu", lambda fn: corrupted(fn, scale_out(1.01), nth=1))),
    S("silu_backward_dropped_term", "2nd SiLU's backward drops the x s(1-s) term; gradients ~1e-4", silu_mlp,
      ("Functional.silu.1.backward",), on(F, "silu", lambda fn: hooked(fn, node_silu_without_x_term, nth=1))),
    S("gelu_backward_dropped_term", "GELU's backward drops the x phi(x) term", tiny_lm,
      ("Functional.gelu.0.backward",), on(F, "gelu", lambda fn: hooked(fn, node_gelu_without_x_term))),
    S("interpolate_zeros", "F.interpolate returns all zeros", upsampler,
      ("Functional.interpolate.0.forward",), on(F, "interpolate", lambda fn: corrupted(fn, zero_out))),
    S("softplus_negative_log_nan", "softplus 0.7 too small: negative for negative inputs, whose log is NaN",
      positive_head, ("Functional.softplus.0.forward",),
      on(F, "softplus", lambda fn: corrupted(fn, shift_out(-0.7)))),
    S("relu_inplace_not_written", "2nd in-place ReLU of a residual MLP never writes its result", res_mlp,
      ("Functional.relu.1.forward",), on(F, "relu", lambda fn: relu_not_written(fn, 1))),
    S("linear_weight_grad_only",
      "2nd linear's weight gradient perturbed (30%); input and bias gradients exact",
      tanh_mlp, ("Functional.linear.1.backward",),
      on(F, "linear", lambda fn: hooked(fn, node_perturb(1, 0.3, 3), nth=1))),
    S("conv_weight_grad_only", "2nd conv's weight gradient perturbed (50%)", conv_net,
      ("Functional.conv2d.1.backward",),
      on(F, "conv2d", lambda fn: hooked(fn, node_perturb(1, 0.5, 3), nth=1))),
    S("layer_norm_eps", "2nd layer_norm uses eps 1e-1 instead of 1e-5", tiny_lm,
      ("Functional.layer_norm.1.forward",),
      on(F, "layer_norm", lambda fn: nth_call(fn, eps_of(fn, 1e-1), 1))),
    S("softmax_backward_5pct", "attention softmax's backward perturbed (5%)", tiny_lm,
      ("Functional.softmax.0.backward",),
      on(F, "softmax", lambda fn: hooked(fn, node_perturb(0, 0.05, 8)))),
    S("matmul_forward_1e-3", "attention's first matmul (q k^T) off by up to 1e-3 relative", tiny_lm,
      ("Torch.matmul.0.forward",), on(torch, "matmul", lambda fn: corrupted(fn, jitter_out(1e-3), nth=0))),
    S("lstm_backward", "LSTM's backward: the input gradient perturbed (50%)", lstm_tagger,
      ("Functional.embedding.0.backward",),
      on(torch._VF, "lstm", lambda fn: faulty(fn, bwd=perturb_grad(0, 0.5, 5)))),
    S("sdpa_forward_1e-2", "scaled_dot_product_attention's output off by up to 1% (per element)",
      lambda: tiny_lm(fused_attention=True), ("Functional.scaled_dot_product_attention.0.forward",),
      on(F, "scaled_dot_product_attention", lambda fn: corrupted(fn, jitter_out(1e-2)))),
    S("fp16_softmax_backward_5pct", "whole NPU run in fp16; softmax's backward perturbed (5%)", tiny_lm,
      ("Functional.softmax.0.backward",),
      on(F, "softmax", lambda fn: hooked(fn, node_perturb(0, 0.05, 8))),
      npu_dtype=torch.float16),
    S("deep30_linear_backward", "30-layer ReLU MLP; the 15th linear's input gradient 2% too large", deep_mlp,
      ("Functional.linear.14.backward",),
      on(F, "linear", lambda fn: hooked(fn, node_scale(0, 1.02), nth=14))),
    # no fault
    S("fp16_tiny_lm", "whole NPU run in fp16, no fault", tiny_lm, npu_dtype=torch.float16),
    S("bf16_tiny_lm", "whole NPU run in bf16, no fault", tiny_lm, npu_dtype=torch.bfloat16),
    S("deep30_noise", "30-layer ReLU MLP (weights 2x default), noise only", deep_mlp),
    S("sdpa_noise", "transformer block with F.scaled_dot_product_attention, noise only",
      lambda: tiny_lm(fused_attention=True)),
    S("lstm_noise", "LSTM tagger, noise only", lstm_tagger),
    S("conv_noise", "conv-BN net, noise only", conv_net),
]


BY_NAME = {s.name: s for s in SCENARIOS}

# --- dumping --------------------------------------------------------------------------------------


def dump_side(scenario: Scenario, out: Path, side: str) -> None:
    from msprobe.pytorch import PrecisionDebugger

    npu = side == "npu"
    torch.manual_seed(MODEL_SEED)
    w = scenario.build()
    if npu:
        nudge([*w.inputs, *w.model.parameters()], zlib.crc32(scenario.name.encode()), NOISE)
        if scenario.npu_dtype is not None:
            w = Workload(w.model.to(scenario.npu_dtype),
                         tuple(t.to(scenario.npu_dtype) if t.is_floating_point() else t for t in w.inputs),
                         w.step)
    if npu and scenario.fault is not None:
        owner, attr, make = scenario.fault
        setattr(owner, attr, make(getattr(owner, attr)))
    out.mkdir(parents=True, exist_ok=True)
    cfg = {"task": "tensor", "dump_path": str(out), "rank": [], "step": [0], "level": "L1",
           "async_dump": False,
           "tensor": {"scope": [], "list": [], "data_mode": ["all"]}}
    cfg_path = out.parent / f".cfg_{side}.json"
    cfg_path.write_text(json.dumps(cfg))
    debugger = PrecisionDebugger(config_path=str(cfg_path))
    debugger.start(model=w.model)
    w.step(w.model, *w.inputs)
    debugger.stop()
    debugger.step()


def run_all(root: Path, names: list[str], jobs: int) -> int:
    def one(args: tuple[Scenario, str]) -> tuple[str, str, int, str]:
        scenario, side = args
        d = root / scenario.name
        d.mkdir(parents=True, exist_ok=True)
        (d / "truth.json").write_text(json.dumps({"name": scenario.name, "what": scenario.what,
                                                  "truth": list(scenario.truth)}))
        p = subprocess.run([sys.executable, __file__, "--side", scenario.name, side, str(d / side)],
                           capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
        (d / f"log_{side}.txt").write_text(p.stdout + p.stderr)
        return scenario.name, side, p.returncode, p.stderr[-2000:]

    work = [(BY_NAME[n], side) for n in names for side in ("npu", "bench")]
    failed = 0
    with ThreadPoolExecutor(jobs) as pool:
        for name, side, rc, err in pool.map(one, work):
            print(f"{name:32s} {side:5s} {'ok' if rc == 0 else 'FAILED'}", flush=True)
            if rc:
                failed += 1
                print(err)
    return failed


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--side":
        name, side, out = sys.argv[2:5]
        torch.set_num_threads(1)
        dump_side(BY_NAME[name], Path(out), side)
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path, nargs="?")
    ap.add_argument("--only", nargs="+", default=None)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    if a.list or a.dir is None:
        for s in SCENARIOS:
            print(f"{s.name:32s} {' | '.join(s.truth) or '(no fault)':45s} {s.what}")
        return 0
    return 1 if run_all(a.dir, a.only or list(BY_NAME), a.jobs) else 0


if __name__ == "__main__":
    sys.exit(main())
