"""An optimizer's hyperparameters, read back from one run's call sidecar (this project's dumper).

A learning rate the two scripts set differently shows in the dumps only as its effect: at the first
step, the update's ``addcdiv_(…, value=-lr/(1 − β1ᵗ))`` passes another number (the two dumps read that
as *different arguments* to that call); at a later step, parameters that differ on entry to it. Neither
says "lr". The optimizer's calls carry enough to say it: torch's single-tensor Adam and AdamW run,
per parameter, in this order

    param.mul_(1 − lr·wd)                      (AdamW with a weight decay)
    exp_avg.lerp_(grad, 1 − β1)
    exp_avg_sq.mul_(β2).addcmul_(grad, grad, value=1 − β2)
    denom = (exp_avg_sq.sqrt() / √(1 − β2ᵗ)).add_(eps)
    param.addcdiv_(exp_avg, denom, value=−lr/(1 − β1ᵗ))

so β1, β2, eps, the step t (from √(1 − β2ᵗ)), lr and the decay follow from one parameter's calls. SGD's
update is ``param.add_(grad or buf, alpha=−lr)``. Each side's values are read from its own calls, not
paired with the other's; a value that cannot be worked out is left out (a foreach or fused optimizer's
calls, which no hook sees, leave nothing).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from ptdbg_tui.compare.diagnosis.diagnose import values_differ
from ptdbg_tui.formats.calls import CallSpec

#: The order the values are said in.
NAMES = ("lr", "weight_decay", "beta1", "beta2", "eps")
#: The optimizer's calls (after the backward, without autograd) whose numbers are its hyperparameters.
OPTIMIZER_FNS = frozenset(
    f"torch.Tensor.{fn}" for fn in ("addcdiv_", "lerp_", "mul_", "addcmul_", "__truediv__", "add_", "div_")
)
#: A step count worked out from √(1 − β2ᵗ) must be this near an integer (else it is not Adam's).
_STEP_SLACK = 1e-3

Hyperparameters = dict[str, float]


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _arg(spec: CallSpec, i: int) -> float | None:
    return _number(spec.args[i]) if len(spec.args) > i else None


def optimizer_call(spec: CallSpec | None) -> bool:
    """A call an optimizer makes: one of its in-place arithmetic ops, run without autograd."""
    return spec is not None and not spec.state.grad and spec.fn in OPTIMIZER_FNS


def hyperparameters(specs: Mapping[str, CallSpec]) -> Hyperparameters:
    """What one run's optimizer passes (``lr``, ``weight_decay``, ``beta1``, ``beta2``, ``eps``), from the
    calls of its first parameter's update; empty where its calls show no optimizer that it knows."""
    lines = [s for s in specs.values() if optimizer_call(s)]
    at = next((i for i, s in enumerate(lines) if s.fn == "torch.Tensor.addcdiv_"), None)
    if at is not None:
        return _adam(lines[: at + 1])
    return _sgd(lines)


def _adam(lines: Sequence[CallSpec]) -> Hyperparameters:
    """Adam's values from the calls up to its first ``addcdiv_`` (the last of ``lines``)."""
    out: Hyperparameters = {}
    step_size = _number(lines[-1].kwargs.get("value"))
    decay = None
    root = None  # √(1 − β2ᵗ)
    for spec in lines[:-1]:
        name = spec.fn.rsplit(".", 1)[-1]
        if name == "lerp_" and (w := _arg(spec, 2)) is not None:
            out["beta1"] = 1 - w
        elif name == "addcmul_" and (v := _number(spec.kwargs.get("value"))) is not None:
            out["beta2"] = 1 - v
        elif name == "mul_" and "beta1" not in out:
            decay = _arg(spec, 1)
        elif name == "__truediv__":
            root = _arg(spec, 1)
        elif name == "add_" and root is not None and not spec.kwargs and (eps := _arg(spec, 1)) is not None:
            out["eps"] = eps
    step = _step(root, out.get("beta2"))
    if step_size is not None and step is not None and "beta1" in out:
        out["lr"] = -step_size * (1 - out["beta1"] ** step)
        if decay is not None and out["lr"]:
            out["weight_decay"] = (1 - decay) / out["lr"]
    return {k: v for k, v in out.items() if math.isfinite(v)}


def _step(root: float | None, beta2: float | None) -> int | None:
    """The step t that √(1 − β2ᵗ) = ``root`` gives; None where none does."""
    if root is None or beta2 is None or not 0 < root < 1 or not 0 < beta2 < 1:
        return None
    t = math.log(1 - root * root) / math.log(beta2)
    return round(t) if abs(t - round(t)) < _STEP_SLACK * max(t, 1) and round(t) >= 1 else None


def _sgd(lines: Sequence[CallSpec]) -> Hyperparameters:
    """SGD's learning rate: its first ``add_(…, alpha=−lr)``."""
    for spec in lines:
        alpha = _number(spec.kwargs.get("alpha"))
        if spec.fn == "torch.Tensor.add_" and alpha is not None and alpha < 0:
            return {"lr": -alpha}
    return {}


def hyperparameters_differ(
    npu: Hyperparameters, bench: Hyperparameters
) -> tuple[tuple[str, float, float], ...]:
    """The values both runs' optimizers show, where they differ (name, NPU's, bench's); empty where they
    agree."""
    return tuple(
        (name, npu[name], bench[name])
        for name in NAMES
        if name in npu and name in bench and values_differ(npu[name], bench[name])
    )
