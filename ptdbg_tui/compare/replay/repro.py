"""A repro for the kernel team: ``DIR/repro.py`` re-runs one recorded call of the NPU dump on its
recorded inputs (``DIR/repro_data.pt``: the inputs, for a backward call the incoming gradients, and the
recorded results), in float64 on the CPU and in the recorded dtype on a device, and exits 1 when the
recorded result is wrong. ``python DIR/repro.py`` needs torch only.

The script is generated readable: a docstring (the call, where the user's code made it, the dump, the
replay's verdict), the call's function and arguments spelled out, the allowance the replay measured
(:mod:`~.run`, :mod:`~.verdict`: rounding and conditioning), then a copy of :mod:`~.harness` and
:mod:`~.repro_main`. Only the named torch function is ever run (:func:`~.run.resolve` vouches for it
here, the script looks it up in torch's namespaces only).
"""

from __future__ import annotations

import ast
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import EllipsisType, ModuleType
from typing import Any

import torch

from ptdbg_tui.compare.diagnosis.replay_outcome import SideVerdict
from ptdbg_tui.compare.diagnosis.replay_reasons import refusal
from ptdbg_tui.compare.model import Row
from ptdbg_tui.compare.replay import harness, repro_main
from ptdbg_tui.compare.replay.calls import SideSource
from ptdbg_tui.compare.replay.harness import Refused, leaves
from ptdbg_tui.compare.replay.plan import CannotReplay, NotReplayable, Plan, Recorded, Value, build_plan
from ptdbg_tui.compare.replay.run import load, resolve, run, torch_dtype
from ptdbg_tui.compare.replay.verdict import judge_result, judge_side
from ptdbg_tui.compare.report.replay_words import why_not_text
from ptdbg_tui.compare.report.words import repro_verdict_text
from ptdbg_tui.formats.file_writes import write_text, write_whole
from ptdbg_tui.formats.naming import call_key
from ptdbg_tui.formats.untrusted import docstring_text

SCRIPT = "repro.py"
DATA = "repro_data.pt"
DEVICES = ("cpu", "cuda", "npu")
_PLAIN = (type(None), bool, int, float, str, complex, EllipsisType)


@dataclass(frozen=True)
class Origin:
    """Where the call came from, for the script's docstring."""

    dump: str  # the records file
    label: str = ""  # its step and rank (``step0/rank0``)
    site: str = ""  # where the user's code made the call, and its source line


@dataclass(frozen=True)
class Written:
    script: Path
    verdict: SideVerdict  # the replay's verdict on the recorded results when the repro was written
    complete: bool  # every argument was recorded (the original ptdbg_ascend records no keyword ones)


def write_repro(
    rows: Sequence[Row],
    call: str,
    source: SideSource,
    out_dir: str | Path,
    origin: Origin,
    device: str = "cpu",
) -> Written:
    """Write ``out_dir/repro.py`` and ``out_dir/repro_data.pt`` for ``call`` (e.g. ``VF_lstm_0_backward``)
    of the NPU side of ``rows``; raises :class:`CannotReplay` when it cannot be rebuilt."""
    if device not in DEVICES:
        raise CannotReplay(f"unknown device {device!r} (one of {', '.join(DEVICES)})")
    spec = source.specs.get(call_key(call))
    plan = build_plan(
        rows,
        "npu",
        call,
        source.tensor_dir,
        spec,
        source.keywords_recorded,
        source.inputs_after_call,
        source.node_order,
    )
    if isinstance(plan, NotReplayable):
        raise CannotReplay(why_not_text(plan.why))
    try:
        resolve(plan.fn)
        if plan.autocast is not None:  # the script runs under it: a dtype torch has, or no script
            torch_dtype(plan.autocast, reference=False)
        done = run(plan, tf32=spec.state.tf32_matmul if spec is not None else False)
        tensors = {rec.name: load(rec, None) for rec in _tensors(plan)}  # in their recorded dtypes
        for path in plan.transposed:  # a gradient the tool records transposed: stored as its argument is
            rec = plan.results[path]
            if tensors[rec.name].dim() == 2:
                tensors[rec.name] = tensors[rec.name].t().contiguous()
        code = arguments_code(plan)
    except Refused as e:
        raise CannotReplay(why_not_text(refusal(e))) from None
    allowed = {
        p: judge_result(rec, ref, sens, done.dtypes[p], done.names[p], done.honest.get(p), done.op)
        for p, (rec, ref, sens) in done.results.items()
    }
    verdict = judge_side(done.results, done.dtypes, done.names, done.honest, done.op)
    written = Written(Path(out_dir) / SCRIPT, verdict, plan.complete)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_whole(out / DATA, lambda tmp: torch.save(tensors, tmp))
    write_text(written.script, script_text(plan, code, allowed, origin, written, device))
    return written


def _tensors(plan: Plan) -> Iterator[Recorded]:
    """Every recorded tensor the script needs: the arguments, incoming gradients and results."""
    yield from (rec for _, rec in leaves(plan.args, plan.kwargs, lambda x: isinstance(x, Recorded)))
    yield from plan.incoming.values()
    yield from plan.results.values()


def _literal(v: Any) -> str:
    """A plain recorded value as Python source."""
    if not isinstance(v, _PLAIN):
        raise Refused(f"an argument of type {type(v).__name__} cannot be written into a script")
    if isinstance(v, float) and not math.isfinite(v):
        return "math.nan" if math.isnan(v) else ("math.inf" if v > 0 else "-math.inf")
    if isinstance(v, complex):
        return f"complex({_literal(v.real)}, {_literal(v.imag)})"
    return "..." if v is Ellipsis else repr(v)


def _torch_name(name: str, kind: type) -> str:
    """``torch.<name>`` when torch has such a ``kind`` (a dtype, a memory format...)."""
    attr = str(name).removeprefix("torch.")
    if not attr.isidentifier() or not isinstance(getattr(torch, attr, None), kind):
        raise Refused(f"unknown torch name {name}")
    return f"torch.{attr}"


def _value_code(v: Value) -> str:
    """A recorded non-tensor value as source."""
    if v.kind == "dtype":
        return f"D({_torch_name(v.value, torch.dtype)})"
    if v.kind == "size":
        return f"torch.Size([{', '.join(str(int(d)) for d in v.value)}])"
    if v.kind == "device":
        return "device"
    if v.kind == "slice":
        return f"slice({', '.join(_literal(y) for y in v.value)})"
    if v.kind == "const":
        return _torch_name(v.value, object)
    return _literal(v.value)


def _code(x: Any) -> str:
    """An argument as the source that rebuilds it in the script's ``arguments(T, D, device)``."""
    if isinstance(x, Recorded):
        return f"T({x.name!r})"
    if isinstance(x, Value):
        return _value_code(x)
    if isinstance(x, list):
        return f"[{', '.join(_code(y) for y in x)}]"
    if isinstance(x, tuple):
        return f"({', '.join(_code(y) for y in x)}{',' if len(x) == 1 else ''})"
    if isinstance(x, dict):
        return "{" + ", ".join(f"{k!r}: {_code(y)}" for k, y in x.items()) + "}"
    return _literal(x)


def arguments_code(plan: Plan) -> str:
    """The script's ``arguments`` function: one positional argument a line, then the keyword ones."""
    lines = [
        "def arguments(T, D, device):",
        '    """The call\'s arguments as recorded: T(entry) is a recorded tensor (float64 in the',
        '    reference re-run), D(dtype) a dtype argument, device where the call runs."""',
        "    args = [",
    ]
    lines += [f"        {_code(a)}," for a in plan.args]
    lines.append("    ]")
    lines.append("    kwargs = {")
    lines += [f"        {k!r}: {_code(v)}," for k, v in plan.kwargs.items()]
    lines += ["    }", "    return args, kwargs"]
    return "\n".join(lines)


def _module_code(module: ModuleType) -> tuple[list[ast.Import | ast.ImportFrom], str]:
    """A module's imports and its code after them."""
    text = Path(module.__file__ or "").read_text(encoding="utf-8")
    imports = [n for n in ast.parse(text).body if isinstance(n, (ast.Import, ast.ImportFrom))]
    body = "\n".join(text.splitlines()[max(n.end_lineno or 0 for n in imports) :]).strip("\n")
    return imports, body


def _imports(statements: Sequence[ast.stmt]) -> str:
    """The modules' imports merged: the standard library's, then torch (``__future__``'s and this
    project's left out: the script holds the code it would import)."""
    plain: set[str] = {"math", "sys"}
    names: dict[str, set[str]] = {"pathlib": {"Path"}}
    for n in statements:
        if isinstance(n, ast.Import):
            plain.update(a.name for a in n.names)
        elif isinstance(n, ast.ImportFrom) and not (n.module or "").startswith(("__future__", "ptdbg_tui")):
            names.setdefault(n.module or "", set()).update(a.name for a in n.names)
    lines = [f"import {m}" for m in sorted(plain - {"torch"})]
    lines += [f"from {m} import {', '.join(sorted(ns))}" for m, ns in sorted(names.items())]
    return "\n".join(lines) + "\n\nimport torch"


def _number(v: float) -> str:
    """An allowance in six significant digits (what decides is far from the sixth)."""
    return _literal(float(f"{v:.6g}"))


def script_text(
    plan: Plan,
    code: str,
    allowed: dict[tuple[Any, ...], SideVerdict],
    origin: Origin,
    written: Written,
    device: str,
) -> str:
    """The whole repro script."""
    site = f"\nCalled at {docstring_text(origin.site, lines=True)}" if origin.site else ""
    label = f" ({docstring_text(origin.label)})" if origin.label else ""
    read = (
        f" but {docstring_text(', '.join(plan.from_source))}, read from its source line"
        if plan.from_source
        else ""
    )
    incomplete = (
        ""
        if plan.complete
        else "\nThe dump records no keyword arguments (the original "
        f"ptdbg_ascend):\nthe call is rebuilt without them{read}, so another keyword it took would "
        "change the result.\n"
    )
    backward = (
        "\nA backward call: its forward is rebuilt in float64 on the recorded forward inputs, the\n"
        "recorded incoming gradients are fed through it, and the recorded gradients are compared.\n"
        if plan.direction == "backward"
        else ""
    )
    autocast = (
        f"\nThe NPU ran the call under torch.autocast to {docstring_text(plan.autocast)}: the allowances\n"
        "count the casts it makes of the inputs, and the re-run in the recorded dtype runs under it too.\n"
        if plan.autocast
        else ""
    )
    call, fn, direction = (docstring_text(t) for t in (plan.call, plan.fn, plan.direction))
    doc = f'''"""Repro of {call}: {fn}, {direction}.

From the NPU dump {docstring_text(str(origin.dump))}{label}.{site}
The replay's verdict when this file was written: {docstring_text(repro_verdict_text(written.verdict))}.
{incomplete}
    python {SCRIPT} [--device cpu|cuda|npu]

Re-runs the call on its recorded inputs ({DATA}, beside this file) in float64 on the CPU, and prints
the recorded results' error against it with what the replay allows (the dtype's rounding and how far
rounding-sized changes of the inputs move the result, measured when this file was written) and their
one-sided lean against what unbiased rounding allows; then re-runs it in the recorded dtype on the
device (the CPU when there is none) and prints that re-run's own error.
{backward}{autocast}
Exit status: 1 a recorded result is wrong (its error or its lean beyond what is allowed), 0 every one
is within rounding, 2 the call cannot be run here.
"""'''
    statements: list[ast.stmt] = []
    bodies = []
    for module in (harness, repro_main):
        found, body = _module_code(module)
        statements += found
        bodies.append(f"# --- {module.__name__} ---\n\n{body}")
    results = "".join(
        f"    {p!r}: ({r.name!r}, {_number(v.allowed)}, {_number(v.bias_allowed)}),\n"
        for p, r in plan.results.items()
        for v in (allowed[p],)
    )
    incoming = "".join(f"    {p!r}: {r.name!r},\n" for p, r in plan.incoming.items())
    head = f"""FUNCTION = {plan.fn!r}
DIRECTION = {plan.direction!r}
INPLACE = {plan.inplace!r}  # the argument the call writes into (None: none)
DEVICE = {device!r}  # where the re-run in the recorded dtype runs (--device)
AUTOCAST = {plan.autocast!r}  # the dtype the NPU ran the call under torch.autocast to (None: no autocast)
#: The recorded results judged, by path: (entry, the allowed relative error, the allowed one-sided lean).
RESULTS = {{
{results}}}
#: The recorded incoming gradients, by the path of the result they flow into (a backward call).
INCOMING = {{
{incoming}}}"""
    main = (
        'if __name__ == "__main__":\n    sys.exit(main(FUNCTION, DIRECTION, INPLACE, RESULTS, INCOMING, '
        f"arguments, Path(__file__).with_name({DATA!r}), DEVICE, autocast=AUTOCAST))"
    )
    top = f"{doc}\n\nfrom __future__ import annotations\n\n{_imports(statements)}"
    return "\n\n\n".join([top, head, code, *bodies, main]) + "\n"
