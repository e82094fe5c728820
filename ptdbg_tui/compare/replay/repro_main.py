"""What a repro script runs (:mod:`~.repro` writes the script: the call's constants and arguments, then
a copy of :mod:`~.harness` and of this module's code). torch and the standard library only, like the
harness: ``python repro.py`` needs nothing else.

The recorded results are judged as the replay judges them: their relative error against the float64
re-run, and their one-sided lean (an offset or a scale, relative to the mean magnitude), each against
the allowance the replay measured when the script was written.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ptdbg_tui.compare.replay.harness import ArgPath, Call, Refused, compute, matching, relative

EXIT_WRONG = 1
EXIT_NOT_REPLAYABLE = 2
#: The recorded results judged, by path: (their entry, the allowed relative error, the allowed lean).
Results = dict[ArgPath, tuple[str, float, float]]
#: ``arguments(T, D, device)``: the call's positional and keyword arguments, ``T(entry)`` a recorded
#: tensor, ``D(dtype)`` a dtype argument.
Arguments = Callable[..., tuple[list[Any], dict[str, Any]]]


def resolve_function(name: str) -> Callable[..., Any]:
    """The function ``name`` names (``torch.nn.functional.gelu``), looked up in torch's namespaces only."""
    root, *parts = name.split(".")
    if root not in ("torch", "torch_npu"):
        raise Refused(f"{name} is outside torch's namespaces")
    try:
        owner: Any = importlib.import_module(root)
    except ImportError:
        raise Refused(f"{name} needs {root}, which is not installed here") from None
    for part in parts:
        owner = getattr(owner, part, None)
    if not callable(owner):
        raise Refused(f"{name} does not exist in this torch")
    found: Callable[..., Any] = owner
    return found


def pick_device(asked: str) -> tuple[torch.device, str]:
    """The device asked for when this machine has one, else the CPU and why."""
    if asked == "npu":
        try:
            importlib.import_module("torch_npu")
        except ImportError:
            return torch.device("cpu"), "torch_npu is not installed: the CPU instead"
        if not torch.npu.is_available():  # type: ignore[attr-defined]
            return torch.device("cpu"), "no NPU here: the CPU instead"
        return torch.device("npu"), ""
    if asked == "cuda" and not torch.cuda.is_available():
        return torch.device("cpu"), "no CUDA device here: the CPU instead"
    return torch.device(asked), ""


def judge(recorded: torch.Tensor, reference: torch.Tensor) -> tuple[float, float]:
    """A recorded result's relative error against the float64 re-run (infinite where one of them has
    NaN/Inf the other has not), and its one-sided lean: the mean error relative to the mean magnitude,
    as an offset (all elements up) or a scale (all magnitudes up), whichever leans more."""
    r = recorded.detach().to(torch.float64).reshape(-1)
    f = reference.detach().cpu().to(torch.float64).reshape(-1)
    if not torch.equal(torch.isfinite(r), torch.isfinite(f)):
        return math.inf, 0.0
    finite = torch.isfinite(f)
    r, f = r[finite], f[finite]
    magnitude = float(f.abs().mean()) if f.numel() else 0.0
    if magnitude <= 0:
        return relative(r, f), 0.0
    diff = r - f
    offset = float(diff.mean()) / magnitude
    scale = float((diff * f.sign()).mean()) / magnitude
    return relative(r, f), offset if abs(offset) >= abs(scale) else scale


def _run(
    tensors: dict[str, torch.Tensor],
    fn: Callable[..., Any],
    arguments: Arguments,
    direction: str,
    inplace: int | None,
    method: bool,
    results: Results,
    incoming: dict[ArgPath, str],
    reference: bool,
    device: torch.device,
) -> dict[ArgPath, torch.Tensor]:
    """The call on the recorded tensors: in float64 (``reference``: dtype arguments too), or as recorded."""

    def tensor(entry: str) -> torch.Tensor:
        t = tensors[entry]
        return (t.to(torch.float64) if reference and t.is_floating_point() else t).to(device)

    def dtype(d: torch.dtype) -> torch.dtype:
        return torch.float64 if reference and d.is_floating_point else d

    args, kwargs = arguments(tensor, dtype, device)
    grads = {p: tensor(entry) for p, entry in incoming.items()}
    return compute(Call(fn, args, kwargs, inplace, method), direction, list(results), grads)


def main(
    function: str,
    direction: str,
    inplace: int | None,
    results: Results,
    incoming: dict[ArgPath, str],
    arguments: Arguments,
    data: Path,
    device: str = "cpu",
    argv: list[str] | None = None,
    autocast: str | None = None,
) -> int:
    """Re-run the call, print the recorded results' errors; 1 when one is wrong, 0 when none is, 2 when
    the call cannot be run. ``autocast``: the dtype the NPU ran the call under torch.autocast to, under
    which the re-run in the recorded dtypes runs too."""
    parser = argparse.ArgumentParser(description=f"Re-run {function} ({direction}) on its recorded inputs.")
    parser.add_argument(
        "--device",
        choices=("cpu", "cuda", "npu"),
        default=device,
        help=f"where the re-run in the recorded dtype runs (default: {device})",
    )
    where, why = pick_device(parser.parse_args(argv).device)
    try:
        tensors = torch.load(data, weights_only=True)
        fn = resolve_function(function)
        method = function.startswith("torch.Tensor.")
        run = (tensors, fn, arguments, direction, inplace, method, results, incoming)
        reference = _run(*run, reference=True, device=torch.device("cpu"))
    except Exception as e:  # a missing data file, an op that rejects the arguments: say so, no traceback
        why = str(e) if isinstance(e, Refused) else f"{type(e).__name__}: {e}"
        print(f"not replayable: {why}")
        return EXIT_NOT_REPLAYABLE
    print(f"{function} ({direction}) re-run in float64 on the CPU from its recorded inputs:")
    wrong = []
    for path, (entry, allowed, lean_allowed) in results.items():
        ref = matching(reference, path)
        if ref is None or ref.numel() != tensors[entry].numel():
            print(f"not replayable: the re-run gives no result like the recorded {entry}")
            return EXIT_NOT_REPLAYABLE
        error, lean = judge(tensors[entry], ref)
        bad = error > allowed or abs(lean) > lean_allowed
        if bad:
            wrong.append(entry)
        print(
            f"  recorded {entry} ({str(tensors[entry].dtype).removeprefix('torch.')}): error {error:.2g}, "
            f"allowed {allowed:.2g}; one-sided lean {lean:+.2g}, allowed ±{lean_allowed:.2g}"
            f"{'  WRONG' if bad else ''}"
        )
    under = f", under autocast to {autocast}" if autocast else ""
    print(f"re-run in the recorded dtype on {where}{under}" + (f" ({why})" if why else "") + ":")
    try:
        with (
            torch.autocast(where.type, dtype=getattr(torch, autocast.removeprefix("torch.")))
            if autocast
            else contextlib.nullcontext()
        ):
            again = _run(*run, reference=False, device=where)
    except Exception as e:  # e.g. an op without a half-precision kernel on the CPU
        print(f"  failed: {type(e).__name__}: {e}")
    else:
        for path, (entry, _, _) in results.items():
            got = matching(again, path)
            if got is not None:
                print(f"  its {entry}: error {relative(got.cpu(), matching(reference, path)):.2g}")
    if wrong:
        them = ("departs", "it") if len(wrong) == 1 else ("depart", "them")
        print(
            f"WRONG: {', '.join(wrong)} {them[0]} from float64 beyond what rounding allows: the kernel that "
            f"produced {them[1]} is wrong on these inputs"
        )
        return EXIT_WRONG
    print("OK: the recorded results are within rounding of float64")
    return 0
