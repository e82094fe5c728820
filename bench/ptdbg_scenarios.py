"""Fault scenarios dumped with the ORIGINAL ptdbg_ascend (v4, pkl + npy), mode api_stack, full npy.

    PYTHONPATH=<att>/debug/accuracy_tools/ptdbg_ascend/src/python python bench/ptdbg_scenarios.py DIR
        [--only NAME ...] [--jobs N] [--list]

The scenarios of ``bench/msprobe_scenarios.py`` (loaded by path: the same models, workloads, noise
and faults, ``bench/diagnosis_scenarios/graph_faults.py``), dumped by Huawei's original
``ptdbg_ascend`` into ``DIR/NAME/{npu,bench}``, each side in a process of its own, with
``DIR/NAME/truth.json`` naming the ground truth as the original writes it
(``Functional_gelu_1_forward``). Compare them with ``bench/msprobe_diagnosis.py DIR``. The
original is no dependency of the project: put its package on ``PYTHONPATH``.

When the original wraps what (read from its source):

* ``import ptdbg_ascend`` copies every ``torch.nn.functional`` attribute into its
  ``wrap_functional`` module; the ``Functional_*`` wrappers call those copies
  (``eval(op_name)``). A functional fault is therefore installed on the module attribute *before*
  the import: the wrapper calls the faulty function and names it as the true one. (The import also
  seeds every generator with 1234: the model is built after it, under ``torch.manual_seed(0)``.)
* ``PrecisionDebugger.start()`` (its first call) sets the wrappers on ``torch``, ``Tensor``,
  ``torch.nn.functional`` and ``torch._VF``. The ``Torch_*``, ``Tensor_*`` and ``VF_*`` wrappers
  call the C functions (``torch._C._VariableFunctionsClass.matmul``), never the module attribute,
  so a fault on ``torch.matmul`` would be dropped. Such a fault (owner ``"Torch"`` or ``"VF"``)
  replaces the wrapper template's ``forward`` for that op: the kernel the wrapper runs.
* ``_VF.lstm`` is wrapped (``VF_lstm``): ``nn.LSTM`` is dumped as one call. On CPU the LSTM is many
  autograd nodes, and the original hooks (``register_backward_hook``) only the node its first
  output hangs from, so ``VF_lstm_0_backward`` shows that inner node's gradients. The LSTM fault
  perturbs the gradient the LSTM gives its input (a hook on the input tensor, no node added): the
  true culprit is ``VF_lstm_0_backward``, whose record cannot show it; the first record that does
  is ``Functional_embedding_0_backward``'s input. Both count as right.

Calls inside a wrapped call are not dumped (the original's ``g_stop_hook``); a call outside any,
a backward hook's included, is dumped as a forward call: the original records its own
``Tensor.detach`` calls in the backward, and a fault computes with the unwrapped functions.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
import zlib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import torch


def _load_msprobe_scenarios() -> ModuleType:
    path = Path(__file__).resolve().parent / "msprobe_scenarios.py"
    spec = importlib.util.spec_from_file_location("msprobe_scenarios", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


_ms = _load_msprobe_scenarios()
_faults = _ms._faults
Scenario, Workload, nudge = _ms.Scenario, _ms.Workload, _ms.nudge
_mul, _add, _to, _uniform = _faults._mul, _faults._add, _faults._to, _faults._uniform


Make = Callable[[Callable[..., Any]], Callable[..., Any]]  # true function -> faulty function


def ptdbg_name(msprobe_call: str) -> str:
    """``Functional.gelu.1.forward`` -> ``Functional_gelu_1_forward``."""
    return msprobe_call.replace(".", "_")


def input_grad_perturbed(scale: float, seed: int) -> Make:
    """The op's gradient for its first argument times ``1 + scale * u`` (``u`` uniform in
    [-1, 1]): a hook on the input tensor, so no autograd node is added (the op is the input's
    only consumer)."""

    def make(fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(x: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            if x.requires_grad:
                x.register_hook(
                    lambda g: _mul(g, _to(_add(_mul(_uniform(g.shape, seed), scale), 1), g.dtype))
                )
            return fn(x, *args, **kwargs)

        return call

    return make


_on = _ms.on
_OVERRIDES: dict[str, dict[str, Any]] = {
    # torch.matmul: the Torch_matmul wrapper runs the C function; the fault replaces that kernel
    "matmul_forward_1e-3": {
        "fault": _on("Torch", "matmul", lambda fn: _faults.corrupted(fn, _faults.jitter_out(1e-3), nth=0))
    },
    "lstm_backward": {
        "truth": ("VF_lstm_0_backward", "Functional_embedding_0_backward"),
        "what": "LSTM's backward: the gradient it gives its input perturbed (50%)",
        "fault": _on("VF", "lstm", input_grad_perturbed(0.5, 5)),
    },
}


def _scenario(s: Any) -> Any:
    changes = {"truth": tuple(ptdbg_name(c) for c in s.truth), **_OVERRIDES.get(s.name, {})}
    return dataclasses.replace(s, **changes)


SCENARIOS = [_scenario(s) for s in _ms.SCENARIOS]


def _replace_kernel(template: type, op: str, make: Make) -> None:
    """The wrapper ``template`` runs ``make(kernel)`` for ``op`` (the wrapper's hooks still see the
    call as ``op``'s)."""
    true_forward = template.forward  # type: ignore[attr-defined]
    current: list[Any] = [None]
    bad = make(lambda *a, **k: true_forward(current[0], *a, **k))

    def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self.op_name_ != op:
            return true_forward(self, *args, **kwargs)
        current[0] = self
        return bad(*args, **kwargs)

    template.forward = forward  # type: ignore[attr-defined]


def dump_side(scenario: Any, out: Path, side: str) -> None:
    npu = side == "npu"
    fault = scenario.fault if npu else None
    if fault is not None and not isinstance(fault[0], str):  # a module attribute: before the import
        owner, attr, make = fault
        setattr(owner, attr, make(getattr(owner, attr)))
    import ptdbg_ascend
    from ptdbg_ascend.hook_module import wrap_torch, wrap_vf

    if fault is not None and isinstance(fault[0], str):
        owner, attr, make = fault
        template = {"Torch": wrap_torch.TorchOPTemplate, "VF": wrap_vf.VfOPTemplate}[owner]
        _replace_kernel(template, attr, make)
    torch.manual_seed(_ms.MODEL_SEED)
    w = scenario.build()
    if npu:
        nudge([*w.inputs, *w.model.parameters()], zlib.crc32(scenario.name.encode()), _ms.NOISE)
        if scenario.npu_dtype is not None:
            w = Workload(
                w.model.to(scenario.npu_dtype),
                tuple(t.to(scenario.npu_dtype) if t.is_floating_point() else t for t in w.inputs),
                w.step,
            )
    out.mkdir(parents=True, exist_ok=True)
    debugger = ptdbg_ascend.PrecisionDebugger(dump_path=str(out), hook_name="dump", step=[0])
    debugger.configure_hook(mode="api_stack")
    debugger.start()
    w.step(w.model, *w.inputs)
    debugger.stop()
    debugger.step()


if __name__ == "__main__":
    sys.exit(_ms.main(SCENARIOS, dump_side, __file__, __doc__ or ""))
