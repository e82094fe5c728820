"""Running a :class:`~.plan.Plan` with torch: the call re-run in float64 on CPU from its recorded inputs,
its sensitivity to rounding-sized changes of those inputs, and the recorded results beside it.

torch is imported here and only here (the ``dump`` extra); the reader never needs it. The function is
resolved only within torch's namespaces and the dumped API list (:mod:`~ptdbg_tui.formats.wrapped_apis`):
a name outside them is refused, never looked up.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ptdbg_tui.compare.diagnosis import replay_reasons as reasons
from ptdbg_tui.compare.metrics.errors import unit_roundoff
from ptdbg_tui.compare.ops import WEIGHTED
from ptdbg_tui.compare.replay.harness import (
    ArgPath,
    Call,
    Refused,
    compute,
    forward,
    leaves,
    matching,
    relative,
)
from ptdbg_tui.compare.replay.plan import NAMESPACES, Plan, Recorded, Value
from ptdbg_tui.compare.replay.verdict import lean
from ptdbg_tui.formats.budget import OverBudget, check
from ptdbg_tui.formats.tensorfile import FILE_ERRORS, load_tensor, read_tensor, stored_dtypes
from ptdbg_tui.formats.wrapped_apis import wrapped

#: Bytes of one element of the float64 reference.
FLOAT64 = 8

#: Random draws that measure how much rounding-sized changes of the inputs move the result.
SENSITIVITY_DRAWS = 2
#: Ops whose matmul a GPU runs in TF32 when ``allow_tf32`` is on: 10 mantissa bits.
TF32_OPS = frozenset(
    {
        "matmul",
        "mm",
        "bmm",
        "addmm",
        "baddbmm",
        "einsum",
        "lstm",
        "gru",
        *WEIGHTED,
    }
)
U_TF32 = 2.0**-11

Path = ArgPath


def resolve(fn: str) -> Callable[..., Any]:
    """The function a plan names, if it is one a dumper wraps in torch's namespaces; else :class:`Refused`
    with the reason (:mod:`~ptdbg_tui.compare.diagnosis.replay_reasons`), as everywhere here."""
    space, _, attr = fn.rpartition(".")
    if space not in NAMESPACES.values():
        raise Refused(reasons.OutsideNamespaces(fn=fn))
    if attr not in wrapped(space):
        raise Refused(reasons.NotWrapped(fn=fn))
    owner: Any = torch
    for part in space.split(".")[1:]:
        owner = getattr(owner, part)
    if space == "torch_npu":
        try:
            import torch_npu as owner  # type: ignore[import-not-found, no-redef]
        except ImportError:
            raise Refused(reasons.NeedsTorchNpu(fn=fn)) from None
    target: Callable[..., Any] | None = getattr(owner, attr, None)
    if not callable(target):
        raise Refused(reasons.NoSuchFunction(fn=fn))
    return target


def checked(rec: Recorded) -> None:
    """Refuse a tensor file that holds another shape or dtype than its record (or a keyword tensor's
    sidecar) says, or one larger than the budget where no record vouches for its size — read from its
    header, before its data is loaded."""
    if rec.path is None:
        raise Refused(reasons.NoTensorFile(name=rec.name))
    try:
        header, _ = read_tensor(rec.path)
    except FILE_ERRORS as e:
        raise Refused(reasons.Unreadable(name=rec.name, error=str(e))) from None
    name = os.path.basename(rec.path)
    if header.shape != rec.shape:
        raise Refused(reasons.FileShape(file=name, shape=tuple(header.shape), recorded=rec.shape))
    held = stored_dtypes(rec.dtype)
    if held is not None and header.dtype.name not in held:
        raise Refused(reasons.FileDtype(file=name, dtype=header.dtype.name, recorded=rec.dtype))
    nbytes = math.prod(rec.shape) * FLOAT64  # read, then made float64
    try:
        check(nbytes, f"{rec.name} ({name})", justified=0 if rec.sidecar else nbytes)
    except OverBudget as e:
        raise Refused(reasons.TooLarge(message=str(e))) from None


def load(rec: Recorded, as_dtype: torch.dtype | None) -> torch.Tensor:
    """A recorded tensor, floating ones as ``as_dtype`` (float64 for the reference; ``None``: the
    recorded dtype, bf16 included, which npy files hold as float32); its file :func:`checked` first."""
    checked(rec)
    assert rec.path is not None
    try:
        array = np.array(load_tensor(rec.path))
    except Exception as e:
        raise Refused(reasons.Unreadable(name=rec.name, error=str(e))) from None
    t = torch.from_numpy(array)
    if t.is_floating_point():
        recorded = getattr(torch, rec.dtype.removeprefix("torch."), None)
        target = as_dtype or (
            recorded if isinstance(recorded, torch.dtype) and recorded.is_floating_point else None
        )
        if target is not None:
            t = t.to(target)
    return t


def torch_dtype(name: str, reference: bool) -> torch.dtype:
    dtype = getattr(torch, name.removeprefix("torch."), None)
    if not isinstance(dtype, torch.dtype):
        raise Refused(reasons.UnknownDtype(name=name))
    return torch.float64 if reference and dtype.is_floating_point else dtype


def _value(v: Value, reference: bool) -> Any:
    if v.kind == "plain":
        return v.value
    if v.kind == "dtype":
        return torch_dtype(str(v.value), reference)
    if v.kind == "size":
        return torch.Size(int(d) for d in v.value)
    if v.kind == "device":
        return torch.device("cpu")
    if v.kind == "slice":
        return slice(*v.value)
    const = getattr(torch, str(v.value).removeprefix("torch."), None)
    if const is None:
        raise Refused(reasons.UnknownConstant(name=str(v.value)))
    return const


def _meta(rec: Recorded) -> torch.Tensor:
    """A recorded tensor as shape and dtype alone (the reference's float64 for a floating one)."""
    dtype = torch_dtype(rec.dtype, reference=True) if rec.dtype.startswith("torch.") else torch.float64
    return torch.empty(rec.shape, dtype=dtype, device="meta")


def materialize(
    plan: Plan, fn: Callable[..., Any], dtype: torch.dtype | None, reference: bool, meta: bool = False
) -> Call:
    """The plan's call with its recorded tensors loaded (floating ones as ``dtype``; ``reference``: dtype
    arguments that name a floating type become float64 too); ``meta``: tensors on torch's meta device
    instead, which hold no data (a device argument names it too)."""

    def build(x: Any) -> Any:
        if isinstance(x, Recorded):
            return _meta(x) if meta else load(x, dtype)
        if isinstance(x, Value):
            return torch.device("meta") if meta and x.kind == "device" else _value(x, reference)
        if isinstance(x, (list, tuple)):
            return type(x)(build(y) for y in x)
        if isinstance(x, dict):
            return {k: build(y) for k, y in x.items()}
        return x

    args, kwargs = [build(a) for a in plan.args], {k: build(v) for k, v in plan.kwargs.items()}
    return Call(fn, args, kwargs, plan.inplace, plan.fn.startswith("torch.Tensor."))


def _u(rec_dtype: str, op: str, tf32: bool) -> float:
    u = unit_roundoff(rec_dtype)
    return max(u, U_TF32) if tf32 and op in TF32_OPS and u < U_TF32 else u


@dataclass
class Replayed:
    """One side's call re-run: per recorded result, the recorded values, the float64 reference and how far
    rounding-sized changes of the inputs move that reference (relative)."""

    results: dict[Path, tuple[np.ndarray, np.ndarray, float]]  # path -> (recorded, reference, sensitivity)
    dtypes: dict[Path, str]  # the recorded result's dtype
    names: dict[Path, str]  # the recorded result's entry
    #: torch's own CPU kernel in the recorded dtypes against the reference: (error, lean) per result — what
    #: an honest kernel of that precision does (accumulation, intermediate roundings); absent where it
    #: cannot run on CPU.
    honest: dict[Path, tuple[float, float]] = field(default_factory=dict)
    op: str = ""  # the function's name (``cumsum``), which sets the rounding its kernel may do


def _honest(
    plan: Plan, fn: Callable[..., Any], reference: dict[Path, torch.Tensor]
) -> dict[Path, tuple[float, float]]:
    """torch's own CPU kernel on the recorded inputs in their recorded dtypes, against the reference;
    under the autocast the call ran under (CPU's, to the same dtype), whose casts of its inputs no
    float64 re-run makes: a call it lowers to bf16 is honest within bf16's rounding of its inputs."""
    try:
        incoming = {p: load(r, None) for p, r in plan.incoming.items()}
        with (
            torch.autocast("cpu", dtype=torch_dtype(plan.autocast, reference=False))
            if plan.autocast is not None
            else contextlib.nullcontext()
        ):
            got = compute(
                materialize(plan, fn, None, reference=False), plan.direction, list(plan.results), incoming
            )
    except Exception:  # e.g. an op CPU does not have in half precision: the sensitivity alone then
        return {}
    out: dict[Path, tuple[float, float]] = {}
    for p, ref in reference.items():
        g = matching(got, p)
        if g is None or g.numel() != ref.numel():
            continue
        a = g.detach().to(torch.float64).reshape(-1).numpy()
        b = ref.detach().to(torch.float64).reshape(-1).numpy()
        finite = np.isfinite(a) & np.isfinite(b)
        out[p] = (
            relative(torch.from_numpy(a[finite]), torch.from_numpy(b[finite])),
            lean(a[finite] - b[finite], b[finite])[0],
        )
    return out


def _spread(
    plan: Plan,
    fn: Callable[..., Any],
    reference: dict[Path, torch.Tensor],
    incoming: dict[Path, torch.Tensor],
    op: str,
    tf32: bool,
    seed: int,
) -> dict[Path, float]:
    """How far the result moves when every floating input moves by a random rounding of its dtype."""
    rng = torch.Generator().manual_seed(seed)
    spread: dict[Path, float] = dict.fromkeys(reference, 0.0)
    recorded_in = dict(_recorded_inputs(plan))

    def moved(t: torch.Tensor, dtype: str | None) -> torch.Tensor:
        u = _u(dtype, op, tf32) if dtype is not None else 2.0**-24
        return t * (1 + u * (2 * torch.rand(t.shape, generator=rng, dtype=torch.float64) - 1))

    for _ in range(SENSITIVITY_DRAWS):
        inputs = materialize(plan, fn, torch.float64, reference=True)
        for path, t in inputs.floats.items():
            rec = recorded_in.get(path)
            t.copy_(moved(t, rec.dtype if rec is not None else None))
        moved_in = {p: moved(g, plan.incoming[p].dtype) for p, g in incoming.items()}
        try:
            other = compute(inputs, plan.direction, list(plan.results), moved_in)
        except Exception:  # a discontinuity the perturbation crossed: leave the spread as measured
            continue
        for p, ref in reference.items():
            if p in other:
                spread[p] = max(spread[p], relative(other[p], ref))
    return spread


def dry_run(plan: Plan, fn: Callable[..., Any]) -> None:
    """The call run on meta tensors first, which allocates nothing: a result of another size than the
    dump records means the sidecar describes another call than the one the run made, and a result
    larger than the budget that no record vouches for (``torch.ones(Size([20000, 20000]))``) is never
    computed. An op without a meta kernel is left to the real run, its size arguments checked."""
    try:
        with torch.device("meta"):
            got = forward(materialize(plan, fn, torch.float64, reference=True, meta=True))
    except Exception:  # no meta kernel, a data-dependent shape: what can be told without one
        for _, size in leaves(plan.args, plan.kwargs, lambda x: isinstance(x, Value) and x.kind == "size"):
            check(math.prod(int(d) for d in size.value) * FLOAT64, f"a tensor of size {list(size.value)}")
        return
    recorded = plan.results if plan.direction == "forward" else plan.incoming  # a backward is fed its
    for path, t in got.items():  # forward's results' gradients, of their sizes
        rec = matching(recorded, path)
        if rec is not None and math.prod(rec.shape) != t.numel():
            size = reasons.ResultSize(fn=plan.fn, shape=tuple(t.shape), name=rec.name, recorded=rec.shape)
            raise Refused(reasons.SidecarDisagrees(what=size) if plan.sidecar else size)
        justified = math.prod(rec.shape) * FLOAT64 if rec is not None else 0
        check(t.numel() * FLOAT64, f"the result {list(path)} of {plan.fn}", justified)


def run(plan: Plan, tf32: bool = False, seed: int = 0) -> Replayed:
    """Re-run a plan in float64 and measure its sensitivity; raises :class:`Refused` with the reason."""
    fn = resolve(plan.fn)
    try:
        dry_run(plan, fn)
    except OverBudget as e:
        raise Refused(reasons.TooLarge(message=str(e))) from None
    op = plan.fn.rsplit(".", 1)[-1].strip("_")
    grads_of = list(plan.results)
    incoming = {p: load(r, torch.float64) for p, r in plan.incoming.items()}
    try:
        reference = compute(
            materialize(plan, fn, torch.float64, reference=True), plan.direction, grads_of, incoming
        )
    except Refused:
        raise
    except Exception as e:  # the op rejects the rebuilt arguments: say so, never crash
        raise Refused(reasons.CallFails(error=type(e).__name__, message=_first_line(e))) from None
    spread = _spread(plan, fn, reference, incoming, op, tf32, seed)
    out: dict[Path, tuple[np.ndarray, np.ndarray, float]] = {}
    for path, rec in plan.results.items():
        ref = matching(reference, path)
        if ref is None:
            raise Refused(reasons.NoResult(name=rec.name))
        recorded = load(rec, torch.float64)
        if path in plan.transposed and recorded.dim() == 2:  # the tool records this gradient transposed
            recorded = recorded.t()
        if recorded.numel() != ref.numel():
            raise Refused(
                reasons.ReplayShape(name=rec.name, recorded=tuple(recorded.shape), replayed=tuple(ref.shape))
            )
        sens = matching(spread, path) or 0.0
        out[path] = (recorded.reshape(-1).numpy(), ref.detach().reshape(-1).to(torch.float64).numpy(), sens)
    honest = _honest(plan, fn, reference)
    return Replayed(
        out,
        {p: r.dtype for p, r in plan.results.items()},
        {p: r.name for p, r in plan.results.items()},
        {p: v for p in plan.results if (v := matching(honest, p)) is not None},
        op,
    )


def _recorded_inputs(plan: Plan) -> Iterator[tuple[Path, Recorded]]:
    return leaves(plan.args, plan.kwargs, lambda x: isinstance(x, Recorded))


def _first_line(e: BaseException, limit: int = 200) -> str:
    """An exception's message on one line of the report (torch's list every overload it tried)."""
    text = next((line.strip() for line in str(e).splitlines() if line.strip()), "")
    return text if len(text) <= limit else text[: limit - 1] + "…"
