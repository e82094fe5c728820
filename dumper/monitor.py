"""The training monitor of ``ptdbg-dump run --monitor DIR [--every N]`` (docs/monitor.md): every N
steps, a few numbers per module and per parameter, appended as one Arrow record batch to
``DIR/monitor_rank<R>.arrows`` (schema: :mod:`ptdbg_tui.formats.monitor`).

A step ends at ``optimizer.step()`` (a global step hook), or at a GradScaler's ``step()`` that
skipped it on non-finite gradients. The statistics are reduced on the tensors' device, a handful of
kernels per module call and a few ``torch._foreach_*`` calls per step (the parameters before the step
are copied into buffers kept for the run: one more copy of the parameters), and moved to the host once
per step; NaN/Inf counts of gradients, updates and parameters are taken only where a norm is not finite.
The loss is the tensor ``torch.autograd.backward`` is called on (``loss.backward()`` calls it too),
its GradScaler-unscaled value where ``scaler.scale(loss)`` made it.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn.modules import module as nn_module
from torch.optim import Optimizer
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

from dumper.capture import tensor_leaves
from dumper.installed import Installed
from dumper.manifest import SeenModules, unrecorded
from dumper.patching import is_compiling
from dumper.session import detected_rank
from ptdbg_tui.formats import monitor as fmon
from ptdbg_tui.formats.file_writes import DIR_MODE, FILE_MODE

log = logging.getLogger("dumper")
#: -1 outside a backward pass (a checkpointed module's forward run again there is not a new call)
_graph_task_id: Callable[[], int] = getattr(torch._C, "_current_graph_task_id", lambda: -1)
_FLOATS = (torch.float32, torch.float64)
_ZERO = torch.zeros(())


class _Sink:
    """A file pyarrow writes into: the bytes of a step gathered, then written with one ``os.write``
    (a reader tailing the file sees whole steps but for a rare short write)."""

    def __init__(self, path: Path) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
        self._buf = bytearray()
        self._pos = 0
        self.closed = False

    def write(self, data: bytes | memoryview) -> int:
        self._buf += data
        return len(data)

    def flush(self) -> None:
        pass

    def tell(self) -> int:
        return self._pos + len(self._buf)

    def commit(self) -> None:
        with memoryview(self._buf) as whole:
            view = whole
            while view:
                view = view[os.write(self._fd, view) :]
            del view
        self._pos += len(self._buf)
        self._buf.clear()

    def close(self) -> None:
        if not self.closed:
            self.commit()
            os.close(self._fd)
            self.closed = True


class MonitorWriter:
    """One rank's stream: one record batch per step, on disk when :meth:`write` returns."""

    def __init__(self, path: Path) -> None:
        pa = fmon.pyarrow()
        self._pa = pa
        self._schema = fmon.schema()
        self._sink = _Sink(path)
        codec = "zstd" if pa.Codec.is_available("zstd") else None
        self._writer = pa.ipc.new_stream(
            self._sink, self._schema, options=pa.ipc.IpcWriteOptions(compression=codec)
        )
        self._sink.commit()

    def write(self, columns: dict[str, Any]) -> None:
        self._writer.write_batch(self._pa.RecordBatch.from_pydict(columns, schema=self._schema))
        self._sink.commit()

    def close(self) -> None:
        self._writer.close()
        self._sink.close()


def _output_tensor(output: Any) -> torch.Tensor | None:
    """The module output whose statistics are kept: its first floating-point tensor."""
    for _, t in tensor_leaves(output):
        if t.is_floating_point():
            return t
    return None


def _stat_dtype(device: torch.device) -> torch.dtype:
    return torch.float64 if device.type in ("cpu", "cuda") else torch.float32


def _output_stats(x: torch.Tensor) -> torch.Tensor:
    """[norm, sum, max, min, NaN count, Inf count] of ``x`` on its device (fp16/bf16 reduced in
    float32). The counts are zero where the norm is finite; on the CPU, where reading the norm costs
    no wait for a device and a count costs more than the other four reductions together, they are
    taken only where it is not."""
    acc = torch.float32 if x.dtype not in _FLOATS else x.dtype
    norm = torch.linalg.vector_norm(x, dtype=acc)
    mn, mx = torch.aminmax(x)
    if x.device.type != "cpu" or not math.isfinite(norm):
        nan, inf = torch.count_nonzero(torch.isnan(x)), torch.count_nonzero(torch.isinf(x))
    else:
        nan = inf = _ZERO
    return torch.stack([norm, x.sum(dtype=acc), mx.to(acc), mn.to(acc), nan.to(acc), inf.to(acc)]).to(
        _stat_dtype(x.device)
    )


class _Step:
    """What one recorded step gathers until its end."""

    def __init__(self) -> None:
        self.outputs: dict[str, list[tuple[torch.Tensor, int]]] = {}  # module: (stats, numel) per call
        self.losses: list[torch.Tensor] = []
        self.before: list[torch.Tensor] | None = (
            None  # the parameters before the optimizer step (kept buffers)
        )
        self.grad_norms: list[torch.Tensor] | None = None


class Monitor:
    """Installed for a whole run of the script; records every ``every``-th step."""

    def __init__(self, folder: Path, every: int, modules: SeenModules) -> None:
        self.folder = folder
        self.every = every
        self.modules = modules
        self.iteration = 0  # step ends seen, skipped steps included
        self.step = 0  # optimizer.step() calls made
        self._current: _Step | None = _Step()
        self._writer: MonitorWriter | None = None
        self._thread = 0
        self._installed = Installed()
        self._failed = False
        #: Each optimizer's parameters as they were before its step, in buffers kept for the run (a
        #: fresh copy per step cost more than the statistics: the allocator's page faults)
        self._kept: weakref.WeakKeyDictionary[Optimizer, list[torch.Tensor]] = weakref.WeakKeyDictionary()
        self._last: tuple[weakref.ref[torch.Tensor], int, torch.Tensor] | None = None  # an output's stats
        self._scaler: weakref.ref[Any] | None = None
        #: the last ``scaler.scale(loss)``: its output (weakly) and the unscaled loss
        self._scaled: tuple[weakref.ref[torch.Tensor], torch.Tensor] | None = None

    def install(self) -> None:
        fmon.pyarrow()  # a missing pyarrow said before the script starts
        self.folder.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
        self._thread = threading.get_ident()
        self._installed.hook(
            nn_module.register_module_forward_hook(self._forward),
            register_optimizer_step_pre_hook(self._before_step),
            register_optimizer_step_post_hook(self._after_step),
        )
        self._installed.patch(torch.autograd, "backward", self._backward)
        scaler = getattr(torch.amp, "GradScaler", None)
        if scaler is not None:
            self._installed.patch(scaler, "scale", self._scale)
            self._installed.patch(scaler, "step", self._scaler_step)

    def remove(self) -> None:
        self._installed.undo()
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    # -- what a step gathers ----------------------------------------------------------------

    def _forward(self, module: nn.Module, args: Any, output: Any) -> None:
        step = self._current
        if (
            step is None
            or not torch.is_grad_enabled()  # an evaluation's forward, or a checkpoint's first pass
            or _graph_task_id() != -1
            or is_compiling()
            or threading.get_ident() != self._thread
        ):
            return
        name = self.modules.name(module)
        x = _output_tensor(output)
        if name is None or x is None or not x.numel():
            return
        # the same tensor again (the root's output is its last module's): its statistics again
        last, version = self._last, -1 if x.is_inference() else x._version
        if last is not None and last[0]() is x and last[1] == version >= 0:
            stats = last[2]
        else:
            with unrecorded(), torch.no_grad():
                stats = _output_stats(x.detach())
            self._last = (weakref.ref(x), version, stats)
        step.outputs.setdefault(name, []).append((stats, x.numel()))

    def _backward(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def backward(tensors: Any, *args: Any, **kwargs: Any) -> Any:
            step = self._current
            if step is not None and isinstance(tensors, torch.Tensor) and tensors.numel() == 1:
                loss = tensors
                if self._scaled is not None and self._scaled[0]() is tensors:
                    loss = self._scaled[1]
                step.losses.append(loss.detach().reshape(()).to(_stat_dtype(loss.device)))
            return original(tensors, *args, **kwargs)

        return backward

    def _scale(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def scale(scaler: Any, outputs: Any) -> Any:
            out = original(scaler, outputs)
            self._scaler = weakref.ref(scaler)
            if isinstance(outputs, torch.Tensor) and isinstance(out, torch.Tensor):
                self._scaled = (weakref.ref(out), outputs.detach())
            return out

        return scale

    def _scaler_step(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def step(scaler: Any, optimizer: Optimizer, *args: Any, **kwargs: Any) -> Any:
            self._scaler = weakref.ref(scaler)
            before = self.iteration
            try:
                return original(scaler, optimizer, *args, **kwargs)
            finally:
                if self.iteration == before:  # it found Inf/NaN gradients: the optimizer did not step
                    self._end(optimizer, skipped=True)

        return step

    def _before_step(self, optimizer: Optimizer, args: Any, kwargs: Any) -> None:
        step = self._current
        if step is None:
            return
        with unrecorded(), torch.no_grad():
            params = [p for g in optimizer.param_groups for p in g["params"]]
            step.grad_norms = self._grad_norms(params)
            kept = self._kept.get(optimizer)
            if kept is None or [k.shape for k in kept] != [p.shape for p in params]:
                kept = self._kept[optimizer] = [p.detach().clone() for p in params]
            else:
                torch._foreach_copy_(kept, [p.detach() for p in params])
            step.before = kept

    def _after_step(self, optimizer: Optimizer, args: Any, kwargs: Any) -> None:
        self._end(optimizer, skipped=False)

    # -- the end of a step ------------------------------------------------------------------

    @staticmethod
    def _grad_norms(params: list[torch.Tensor]) -> list[torch.Tensor]:
        """Each parameter's gradient's norm (NaN where it has none), float32 at least: the parameters
        themselves, a detached copy has no gradient."""
        grads = [p.grad for p in params if p.grad is not None]
        norms = iter(torch._foreach_norm(grads, 2, dtype=torch.float32) if grads else [])
        return [next(norms) if p.grad is not None else torch.full((), float("nan")) for p in params]

    def _end(self, optimizer: Optimizer, skipped: bool) -> None:
        step, iteration = self._current, self.iteration
        self.iteration += 1
        self.step += 0 if skipped else 1
        self._current = _Step() if self.iteration % self.every == 0 else None
        if step is None or self._failed:
            return
        try:
            with unrecorded(), torch.no_grad():
                self._write(step, iteration, optimizer, skipped)
        except Exception:  # the training goes on unmonitored: a monitor never stops it
            self._failed = True
            log.exception("ptdbg-dump: the monitor failed at step %d and records nothing more", iteration)

    def _write(self, step: _Step, iteration: int, optimizer: Optimizer, skipped: bool) -> None:
        named = self.modules.parameter_names(optimizer)
        params = [p.detach() for _, p in named]
        grad_norms = (
            step.grad_norms if step.grad_norms is not None else self._grad_norms([p for _, p in named])
        )
        updates = step.before if step.before is not None and params else []
        if updates:  # before - after, in place: the update's norm without a new tensor
            torch._foreach_sub_(updates, params)
        update_norms = torch._foreach_norm(updates, 2, dtype=torch.float32) if updates else []
        param_norms = torch._foreach_norm(params, 2, dtype=torch.float32) if params else []
        scaler = self._scaler() if self._scaler is not None else None
        scale = getattr(scaler, "_scale", None) if scaler is not None and scaler.is_enabled() else None
        lrs = [g["lr"] for g in optimizer.param_groups]
        # everything the step needs from the device, in one transfer per device
        parts: list[torch.Tensor] = [
            *(s for calls in step.outputs.values() for s, _ in calls),
            *(v.reshape(1) for v in (*grad_norms, *update_norms, *param_norms)),
            *(loss.reshape(1) for loss in step.losses),
            *(t.reshape(1) for t in (*lrs, scale) if isinstance(t, torch.Tensor)),
        ]
        host = _to_host(parts)
        rows = _Rows(iteration, self.step - (0 if skipped else 1))
        at = 0
        for name, calls in step.outputs.items():
            stats = host[at : at + 6 * len(calls)].reshape(len(calls), 6)
            at += 6 * len(calls)
            numel = sum(n for _, n in calls)
            rows.stats(
                fmon.OUTPUT, name, np.sqrt(np.square(stats[:, 0]).sum()), stats[:, 1].sum() / numel,
                stats[:, 2].max(), stats[:, 3].min(), int(stats[:, 4].sum()), int(stats[:, 5].sum()),
                len(calls),
            )  # fmt: skip
        n = len(params)
        grads, at = host[at : at + n], at + n
        ups, at = host[at : at + len(update_norms)], at + len(update_norms)
        values, at = host[at : at + n], at + n
        for i, (name, p) in enumerate(named):
            rows.norm(fmon.GRAD, name, grads[i], p.grad)
            if len(ups):
                rows.norm(fmon.UPDATE, name, ups[i], updates[i])
            rows.norm(fmon.PARAM, name, values[i], p)
        if step.losses:
            rows.value(fmon.LOSS, "", float(host[at : at + len(step.losses)].mean()), len(step.losses))
            at += len(step.losses)
        for g, lr in enumerate(lrs):
            if isinstance(lr, torch.Tensor):
                lr, at = host[at], at + 1
            rows.value(fmon.LR, str(g), float(lr))
        if scale is not None:
            rows.value(fmon.LOSS_SCALE, "", float(host[at]))
        rows.value(fmon.SKIPPED, "", float(skipped))
        if self._writer is None:
            rank = detected_rank(None, params)
            self._writer = MonitorWriter(self.folder / fmon.file_name(rank))
        self._writer.write(rows.columns)


def _to_host(parts: list[torch.Tensor]) -> np.ndarray:
    """The parts as one float64 array, in order, with one copy per device."""
    if not parts:
        return np.zeros(0)
    devices: dict[torch.device, list[int]] = {}
    for i, t in enumerate(parts):
        devices.setdefault(t.device, []).append(i)
    out = np.empty(sum(t.numel() for t in parts))
    offsets = np.cumsum([0, *(t.numel() for t in parts)])
    for indices in devices.values():
        joined = torch.cat([parts[i].reshape(-1).to(_stat_dtype(parts[i].device)) for i in indices])
        host = joined.cpu().to(torch.float64).numpy()
        at = 0
        for i in indices:
            size = parts[i].numel()
            out[offsets[i] : offsets[i] + size] = host[at : at + size]
            at += size
    return out


class _Rows:
    """A step's rows, as the columns of :data:`ptdbg_tui.formats.monitor.COLUMNS`."""

    def __init__(self, iteration: int, step: int) -> None:
        self.iteration, self.step = iteration, step
        self.columns: dict[str, list[Any]] = {name: [] for name, _ in fmon.COLUMNS}

    def _row(self, **values: Any) -> None:
        values.update(iteration=self.iteration, step=self.step)
        for name, column in self.columns.items():
            column.append(values.get(name))

    def value(self, kind: str, name: str, value: float, calls: int | None = None) -> None:
        self._row(kind=kind, name=name, value=value, calls=calls)

    def stats(
        self,
        kind: str,
        name: str,
        norm: float,
        mean: float,
        mx: float,
        mn: float,
        nan: int,
        inf: int,
        calls: int,
    ) -> None:
        self._row(
            kind=kind, name=name, norm=float(norm), mean=float(mean), max=float(mx), min=float(mn),
            nan=nan, inf=inf, calls=calls,
        )  # fmt: skip

    def norm(self, kind: str, name: str, norm: float, tensor: torch.Tensor | None) -> None:
        """A norm row; its NaN/Inf counts taken from the tensor (still alive) only when it is not finite."""
        nan = inf = 0
        if tensor is not None and not np.isfinite(norm):
            nan, inf = int(torch.isnan(tensor).sum()), int(torch.isinf(tensor).sum())
        self._row(kind=kind, name=name, norm=None if tensor is None else float(norm), nan=nan, inf=inf)
