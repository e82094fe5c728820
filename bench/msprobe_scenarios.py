"""Fault scenarios dumped with the real msprobe (mindstudio-probe), level L1, task tensor.

    <msprobe venv>/bin/python bench/msprobe_scenarios.py DIR [--only NAME ...] [--jobs N] [--list]
    PYTHONPATH=<repo> python bench/msprobe_scenarios.py DIR --tool ours   # the bench runs, our dumper

For each scenario, dumps one training step of the bench run into ``DIR/NAME/bench`` and of the NPU
run (inputs and weights times ``1 + 1e-6 * randn``, maybe the whole model in fp16/bf16, and at
most one injected fault) into ``DIR/NAME/npu``, each side in a process of its own (msprobe wraps
the APIs once, when its ``PrecisionDebugger`` is created). ``DIR/NAME/truth.json`` holds the
ground truth: the msprobe call names (``Functional.gelu.1.forward``) where the error starts.
Compare them with ``bench/msprobe_diagnosis.py DIR`` (the project's venv).

``--tool ours`` (the project's venv, the repository on ``PYTHONPATH``) dumps only the bench run, with
the project's dumper (mode api_stack, full npy), into ``DIR/NAME/bench``: the bench side of a mixed
pair, whose NPU side is msprobe's or the original ptdbg_ascend's ``npu`` dump of the same scenario
(the bench run has no noise and no fault, so it is the same for both tools' scenarios).

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
import json
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

NOISE = 1e-6
MODEL_SEED = 0
VOCAB = 40

# --- models: bench/diagnosis_scenarios/models.py (torch only), loaded by path: the package itself
# imports the project's dumper, which this venv does not have


def _load(name: str) -> ModuleType:
    path = Path(__file__).resolve().parent / "diagnosis_scenarios" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"scenario_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


_models = _load("models")
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
    return Workload(
        Mlp([32, 64, 64, 64, 8], nn.SiLU(), gain=1.7),
        (torch.randn(64, 32), torch.randn(64, 8)),
        aux_regression,
    )


def res_mlp() -> Workload:
    return Workload(ResMlp(32, blocks=4), (torch.randn(16, 32), torch.randn(16, 32)), regression)


def tanh_mlp() -> Workload:
    return Workload(
        Mlp([16, 32, 32, 4], nn.Tanh()), (torch.randn(8, 16), torch.randint(0, 4, (8,))), classify
    )


def deep_mlp() -> Workload:
    return Workload(
        Mlp([32] * 31, nn.ReLU(), gain=2.0), (torch.randn(16, 32), torch.randn(16, 32)), regression
    )


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


# --- faults: bench/diagnosis_scenarios/graph_faults.py (torch only), loaded by path

_faults = _load("graph_faults")
corrupted = _faults.corrupted
hooked = _faults.hooked
faulty = _faults.faulty
relu_not_written = _faults.relu_not_written
nth_call = _faults.nth_call
eps_of = _faults.eps_of
node_perturb = _faults.node_perturb
node_scale = _faults.node_scale
node_silu_without_x_term = _faults.node_silu_without_x_term
node_gelu_without_x_term = _faults.node_gelu_without_x_term
scale_out = _faults.scale_out
jitter_out = _faults.jitter_out
zero_out = _faults.zero_out
shift_out = _faults.shift_out
perturb_grad = _faults.perturb_grad


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
    S(
        "linear_6th_of_8_scale_1.01",
        "only the 6th of 8 F.linear calls returns 1.01x",
        res_mlp,
        ("Functional.linear.5.forward",),
        on(F, "linear", lambda fn: corrupted(fn, scale_out(1.01), nth=5)),
    ),
    S(
        "gelu_2nd_of_2_scale_1.01",
        "two transformer blocks; the 2nd F.gelu returns 1.01x",
        lambda: tiny_lm(depth=2),
        ("Functional.gelu.1.forward",),
        on(F, "gelu", lambda fn: corrupted(fn, scale_out(1.01), nth=1)),
    ),
    S(
        "silu_backward_dropped_term",
        "2nd SiLU's backward drops the x s(1-s) term; gradients ~1e-4",
        silu_mlp,
        ("Functional.silu.1.backward",),
        on(F, "silu", lambda fn: hooked(fn, node_silu_without_x_term, nth=1)),
    ),
    S(
        "gelu_backward_dropped_term",
        "GELU's backward drops the x phi(x) term",
        tiny_lm,
        ("Functional.gelu.0.backward",),
        on(F, "gelu", lambda fn: hooked(fn, node_gelu_without_x_term)),
    ),
    S(
        "interpolate_zeros",
        "F.interpolate returns all zeros",
        upsampler,
        ("Functional.interpolate.0.forward",),
        on(F, "interpolate", lambda fn: corrupted(fn, zero_out)),
    ),
    S(
        "softplus_negative_log_nan",
        "softplus 0.7 too small: negative for negative inputs, whose log is NaN",
        positive_head,
        ("Functional.softplus.0.forward",),
        on(F, "softplus", lambda fn: corrupted(fn, shift_out(-0.7))),
    ),
    S(
        "relu_inplace_not_written",
        "2nd in-place ReLU of a residual MLP never writes its result",
        res_mlp,
        ("Functional.relu.1.forward",),
        on(F, "relu", lambda fn: relu_not_written(fn, 1)),
    ),
    S(
        "linear_weight_grad_only",
        "2nd linear's weight gradient perturbed (30%); input and bias gradients exact",
        tanh_mlp,
        ("Functional.linear.1.backward",),
        on(F, "linear", lambda fn: hooked(fn, node_perturb(1, 0.3, 3), nth=1)),
    ),
    S(
        "conv_weight_grad_only",
        "2nd conv's weight gradient perturbed (50%)",
        conv_net,
        ("Functional.conv2d.1.backward",),
        on(F, "conv2d", lambda fn: hooked(fn, node_perturb(1, 0.5, 3), nth=1)),
    ),
    S(
        "layer_norm_eps",
        "2nd layer_norm uses eps 1e-1 instead of 1e-5",
        tiny_lm,
        ("Functional.layer_norm.1.forward",),
        on(F, "layer_norm", lambda fn: nth_call(fn, eps_of(fn, 1e-1), 1)),
    ),
    S(
        "softmax_backward_5pct",
        "attention softmax's backward perturbed (5%)",
        tiny_lm,
        ("Functional.softmax.0.backward",),
        on(F, "softmax", lambda fn: hooked(fn, node_perturb(0, 0.05, 8))),
    ),
    S(
        "matmul_forward_1e-3",
        "attention's first matmul (q k^T) off by up to 1e-3 relative",
        tiny_lm,
        ("Torch.matmul.0.forward",),
        on(torch, "matmul", lambda fn: corrupted(fn, jitter_out(1e-3), nth=0)),
    ),
    S(
        "lstm_backward",
        "LSTM's backward: the input gradient perturbed (50%)",
        lstm_tagger,
        ("Functional.embedding.0.backward",),
        on(torch._VF, "lstm", lambda fn: faulty(fn, bwd=perturb_grad(0, 0.5, 5))),
    ),
    S(
        "sdpa_forward_1e-2",
        "scaled_dot_product_attention's output off by up to 1% (per element)",
        lambda: tiny_lm(fused_attention=True),
        ("Functional.scaled_dot_product_attention.0.forward",),
        on(F, "scaled_dot_product_attention", lambda fn: corrupted(fn, jitter_out(1e-2))),
    ),
    S(
        "fp16_softmax_backward_5pct",
        "whole NPU run in fp16; softmax's backward perturbed (5%)",
        tiny_lm,
        ("Functional.softmax.0.backward",),
        on(F, "softmax", lambda fn: hooked(fn, node_perturb(0, 0.05, 8))),
        npu_dtype=torch.float16,
    ),
    S(
        "deep30_linear_backward",
        "30-layer ReLU MLP; the 15th linear's input gradient 2% too large",
        deep_mlp,
        ("Functional.linear.14.backward",),
        on(F, "linear", lambda fn: hooked(fn, node_scale(0, 1.02), nth=14)),
    ),
    # no fault
    S("fp16_tiny_lm", "whole NPU run in fp16, no fault", tiny_lm, npu_dtype=torch.float16),
    S("bf16_tiny_lm", "whole NPU run in bf16, no fault", tiny_lm, npu_dtype=torch.bfloat16),
    S("deep30_noise", "30-layer ReLU MLP (weights 2x default), noise only", deep_mlp),
    S(
        "sdpa_noise",
        "transformer block with F.scaled_dot_product_attention, noise only",
        lambda: tiny_lm(fused_attention=True),
    ),
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
            w = Workload(
                w.model.to(scenario.npu_dtype),
                tuple(t.to(scenario.npu_dtype) if t.is_floating_point() else t for t in w.inputs),
                w.step,
            )
    if npu and scenario.fault is not None:
        owner, attr, make = scenario.fault
        setattr(owner, attr, make(getattr(owner, attr)))
    out.mkdir(parents=True, exist_ok=True)
    cfg = {
        "task": "tensor",
        "dump_path": str(out),
        "rank": [],
        "step": [0],
        "level": "L1",
        "async_dump": False,
        "tensor": {"scope": [], "list": [], "data_mode": ["all"]},
    }
    cfg_path = out.parent / f".cfg_{side}.json"
    cfg_path.write_text(json.dumps(cfg))
    debugger = PrecisionDebugger(config_path=str(cfg_path))
    debugger.start(model=w.model)
    w.step(w.model, *w.inputs)
    debugger.stop()
    debugger.step()


def dump_ours(scenario: Scenario, out: Path, side: str) -> None:
    """The bench run dumped with the project's dumper (``--tool ours``): the other side of a mixed pair."""
    from dumper import PrecisionDebugger

    assert side == "bench", "--tool ours dumps the bench run only"
    torch.manual_seed(MODEL_SEED)
    w = scenario.build()
    debugger = PrecisionDebugger(dump_path=str(out), hook_name="dump", rank=0, step=[0], model=w.model)
    debugger.configure_hook(mode="api_stack")
    debugger.start()
    w.step(w.model, *w.inputs)
    debugger.stop()
    debugger.step()


TOOLS = {"ours": dump_ours}


def run_all(
    root: Path,
    names: list[str],
    jobs: int,
    by_name: dict[str, Scenario] = BY_NAME,
    script: str = __file__,
    tool: str | None = None,
) -> int:
    """Dumps each scenario's two sides (``tool``: its bench side), each by ``script --side NAME SIDE
    OUT [TOOL]`` in a process of its own."""

    def one(args: tuple[Scenario, str]) -> tuple[str, str, int, str]:
        scenario, side = args
        d = root / scenario.name
        d.mkdir(parents=True, exist_ok=True)
        (d / "truth.json").write_text(
            json.dumps({"name": scenario.name, "what": scenario.what, "truth": list(scenario.truth)})
        )
        p = subprocess.run(
            [sys.executable, script, "--side", scenario.name, side, str(d / side), *([tool] if tool else [])],
            capture_output=True,
            text=True,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        )
        (d / f"log_{side}.txt").write_text(p.stdout + p.stderr)
        return scenario.name, side, p.returncode, p.stderr[-2000:]

    work = [(by_name[n], side) for n in names for side in (("bench",) if tool else ("npu", "bench"))]
    failed = 0
    with ThreadPoolExecutor(jobs) as pool:
        for name, side, rc, err in pool.map(one, work):
            print(f"{name:32s} {side:5s} {'ok' if rc == 0 else 'FAILED'}", flush=True)
            if rc:
                failed += 1
                print(err)
    return failed


def main(
    scenarios: list[Scenario] = SCENARIOS,
    dump: Callable[[Scenario, Path, str], None] = dump_side,
    script: str = __file__,
    doc: str = __doc__ or "",
) -> int:
    by_name = {s.name: s for s in scenarios}
    if len(sys.argv) > 1 and sys.argv[1] == "--side":
        name, side, out, *tool = sys.argv[2:]
        torch.set_num_threads(1)
        (TOOLS[tool[0]] if tool else dump)(by_name[name], Path(out), side)
        return 0
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("dir", type=Path, nargs="?")
    ap.add_argument("--only", nargs="+", default=None)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--list", action="store_true")
    ap.add_argument(
        "--tool",
        choices=sorted(TOOLS),
        default=None,
        help="dump only the bench run, with this tool (ours: the project's dumper)",
    )
    a = ap.parse_args()
    if a.list or a.dir is None:
        for s in scenarios:
            print(f"{s.name:32s} {' | '.join(s.truth) or '(no fault)':45s} {s.what}")
        return 0
    return 1 if run_all(a.dir, a.only or list(by_name), a.jobs, by_name, script, a.tool) else 0


if __name__ == "__main__":
    sys.exit(main())
