"""One dumping session: call counters, scope, rank, and the recording of each wrapped call.

A call is recorded only on the thread that called ``start()``, only while dumping is on, only
when it is the outermost wrapped call, and never from inside a backward pass (a custom Function's
backward that calls torch ops is not a forward call). Call indices are counted only while dumping
is on and restart at every ``step()`` (the original counts calls made while dumping is off too,
and never resets them with manual switches).
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook

from dumper import catalog, patching
from dumper.arguments import PendingCall, current_state, frozen
from dumper.backward import aliases_tap, hook_outputs, tap_inputs
from dumper.capture import CallCapture, SeenTensors, leaves, tensor_leaves
from dumper.config import DumpConfig, ScopeFilter
from dumper.daemon import CallRecord, DumpDaemon
from dumper.module_chain import ModuleTracker
from dumper.patching import STATE, TLS
from dumper.stack import call_site_frames
from ptdbg_tui.formats.dialects import RUNNING_STATE
from ptdbg_tui.formats.layout import rank_dir_path
from ptdbg_tui.formats.modules import ModuleChain
from ptdbg_tui.formats.naming import (
    BACKWARD,
    FORWARD,
    INPUT,
    OUTPUT,
    call_key,
    entry_name,
    keyword_file_name,
    stack_name,
)

log = logging.getLogger("dumper")

Frames = list[list[str | None]]
os.register_at_fork(after_in_child=lambda: setattr(STATE, "session", None))  # forked workers don't dump
#: -1 outside a backward pass (absent from old torch: then custom backward ops may be recorded)
_graph_task_id: Callable[[], int] = getattr(torch._C, "_current_graph_task_id", lambda: -1)
#: Not None inside a torch.func transform (vmap, grad, jacrev): its tensors are wrappers without
#: storage (a host copy raised) whose statistics would be a batch's; its calls run unrecorded, as a
#: compiled region's
_transform: Callable[[], object] = getattr(torch._C._functorch, "peek_interpreter_stack", lambda: None)


def detected_rank(given: int | None, tensors: Iterable[torch.Tensor]) -> int:
    """A process's rank folder: the given rank, else torch.distributed's, else the first device
    index among ``tensors``, else 0."""
    if given is not None:
        return given
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    for t in tensors:
        if t.device.type != "cpu":
            return t.device.index or 0
    return 0


@dataclass(slots=True, eq=False)
class BackwardCall:
    """What the backward of one recorded call needs to name and place its gradients."""

    session: DumpSession
    api: str
    index: int
    generation: int
    frames: Frames | None
    chain: ModuleChain | None  # written with the backward record when the forward one was not
    pending: PendingCall | None = None  # the call's sidecar line, likewise
    in_paths: list[tuple[int, ...]] = field(default_factory=list)
    out_paths: list[tuple[int, ...]] = field(default_factory=list)
    selected: bool | None = None
    #: The call writes its first argument in place (``relu_``, ``inplace=True``): no tap can stand
    #: between it and the call, so its gradient is taken from the call's own autograd node, as the
    #: original takes every gradient.
    written: bool = False
    written_grad: torch.Tensor | None = None

    @property
    def call(self) -> str:
        return f"{self.api}_{self.index}"

    def on_output_grads(self, grads: Any) -> None:
        last = not (self.in_paths or self.written)
        self.session.record_backward(self, INPUT, self.out_paths, grads, last=last)

    def on_written_grad(self, grad_inputs: Sequence[torch.Tensor | None], _grad_outputs: Any) -> None:
        """The in-place call's node has run: its first gradient is the written argument's (the taps
        of the other arguments, upstream of the node, run later)."""
        self.written_grad = grad_inputs[0] if grad_inputs else None
        if not self.in_paths:
            self._record_produced([])

    def on_input_grads(self, grads: Any) -> None:
        self._record_produced(list(grads))

    def _record_produced(self, grads: list[torch.Tensor | None]) -> None:
        paths = self.in_paths
        if self.written:
            paths, grads = [(0,), *paths], [self.written_grad, *grads]
            self.written_grad = None
        self.session.record_backward(self, OUTPUT, paths, grads, last=True)


@dataclass(slots=True)
class _Plan:
    target: catalog.ApiTarget
    index: int
    args: tuple[Any, ...]
    forward: bool
    capture: CallCapture | None = None
    frames: Frames | None = None
    chain: ModuleChain = ()
    backward: BackwardCall | None = None
    tapped: tuple[torch.Tensor, ...] = ()  # the tap's outputs, passed to the call for its inputs

    @property
    def call(self) -> str:
        return f"{self.target.api}_{self.index}"


def _mutates_first(target: catalog.ApiTarget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    if target.mutates_first:
        return True
    pos = target.inplace_arg
    return pos is not None and bool(kwargs.get("inplace") or (len(args) > pos and args[pos] is True))


class DumpSession:
    """State shared by the wrappers while a :class:`dumper.PrecisionDebugger` is dumping."""

    def __init__(
        self,
        config: DumpConfig,
        dump_path: Path,
        steps: list[int],
        rank: int | None,
        model: torch.nn.Module | None,
        ranks: frozenset[int] | None = None,
    ) -> None:
        self.config = config
        self.dump_path = dump_path
        self.steps = steps
        self.rank_arg = rank
        self.ranks = ranks  # the only ranks that dump (None: all), as detected
        self.step = 0
        #: optimizer steps of a whole run (``ptdbg-dump run`` without ``--step``: no step folders, and
        #: call names that go on counting), each call's sidecar line says its step by them
        self.optimizer_steps = 0
        self.active = False
        self._installed = False
        self._wanted = False  # between start() and stop(), even in a step that is not dumped
        self.disable_dropout = config.disable_dropout
        self._scope = ScopeFilter(config)
        self._counters: dict[str, int] = {}
        self._lock = threading.Lock()
        self._daemon: DumpDaemon | None = None
        self._failed: str | None = None  # why an earlier write failed: no more dumping
        self._writer_open = False
        self._opened_in_step = False
        self.dumped = False  # a rank's files were opened at some step: something was written
        self.left_out = False  # this process's rank is not one asked for: it dumps nothing on purpose
        self._rank: int | None = None
        self._generation = 0
        self._thread = 0
        self._modules = ModuleTracker(model, config.module)
        self._module_hit = False  # a call ran inside the module scope
        self._seen = SeenTensors()
        self._logged: set[str] = set()
        self._atexit = False

    # -- switches -------------------------------------------------------------------------

    def start(self) -> None:
        self._wanted = True
        if self._installed:
            return
        if self.steps and self.step not in self.steps:
            return
        if not self._rank_selected():
            return
        if self._failed is not None:
            self._once(
                "failed", logging.WARNING, "dumper: not dumping (an earlier write failed: %s)", self._failed
            )
            return
        if STATE.session is not None:
            log.warning("dumper: another PrecisionDebugger is dumping; stop() it before starting this one")
            return
        self._daemon = DumpDaemon()
        if not self._atexit:
            atexit.register(self.stop)
            self._atexit = True
        patching.install(catalog.targets())
        self._modules.install()
        _watch_optimizers()
        self._thread = threading.get_ident()
        self.active = self._installed = True
        STATE.session = self

    def stop(self) -> None:
        """Stop dumping and wait until everything recorded so far is on disk."""
        self._wanted = False
        if not self._installed:
            return
        self.active = self._installed = False
        STATE.session = None
        patching.uninstall()
        self._modules.remove()
        assert self._daemon is not None
        with self._lock:
            self._writer_open = False
        self._daemon.shutdown()
        self._failed = self._daemon.failed
        self._seen.clear()
        if self.config.module and not self._module_hit and self._modules.names():
            seen = self._modules.names()
            self._once(
                "module-miss",
                logging.WARNING,
                "dumper: no call ran inside module %s; the modules seen are %s%s",
                " or ".join(self.config.module),
                ", ".join(seen[:12]),
                f" (+{len(seen) - 12} more)" if len(seen) > 12 else "",
            )

    def optimizer_stepped(self) -> None:
        """An optimizer wrote the parameters in place, and a fused one (``Adam(fused=True)``) without
        moving their version counters: no record of a tensor taken before stands for it now."""
        self._seen.clear()

    def next_step(self) -> None:
        """Next step; dumping goes on (or starts, if now in the step list) when it was on."""
        was_active = self._wanted
        self.stop()
        self.step += 1
        self._counters.clear()
        self._scope.reset()
        self._generation += 1
        self._opened_in_step = False
        if was_active:
            self.start()

    # -- rank and files -------------------------------------------------------------------

    def _rank_selected(self) -> bool:
        """Whether this process dumps, as far as can be told now: ``rank=N`` is the only rank that
        dumps in a distributed job, ``rank=[...]`` the ranks that dump (the rank as detected). A job
        that initialises torch.distributed after start() (``ptdbg-dump run``) is judged again at its
        first recorded call."""
        dist = torch.distributed
        distributed = dist.is_available() and dist.is_initialized()
        if self.ranks is not None:
            rank = dist.get_rank() if distributed else self._rank
            wanted = rank is None or rank in self.ranks
            asked = f"rank={sorted(self.ranks)}"
        else:
            rank = dist.get_rank() if distributed else None
            wanted = self.rank_arg is None or rank is None or rank == self.rank_arg
            asked = f"rank={self.rank_arg}"
        if not wanted:
            self.left_out = True
            self._once("rank", logging.INFO, "dumper: rank %d is not dumped (%s was asked)", rank, asked)
        return wanted

    @property
    def rank_dir(self) -> Path | None:
        if self._rank is None:
            return None
        return rank_dir_path(self.dump_path, self._rank, self.step if self.steps else None)

    def _ensure_open(self, *values: Any) -> bool:
        """Open the rank's files at its first record; False when this rank is not dumped after all."""
        with self._lock:
            if self._writer_open or not self.active:
                return self._writer_open
            if self._rank is None:
                self._rank = detected_rank(self.rank_arg, (t for v in values for _, t in tensor_leaves(v)))
            if not self._rank_selected():  # undumped from now on (stop() still uninstalls)
                self.active = False
                if STATE.session is self:
                    STATE.session = None
                return False
            assert self._daemon is not None and self.rank_dir is not None
            self._daemon.open(
                self.rank_dir,
                self.config.mode,
                not self.config.writes_npy,
                fresh=not self._opened_in_step,
                checksums=self.config.checksums,
            )
            self._writer_open = self._opened_in_step = self.dumped = True
            return True

    # -- recording ------------------------------------------------------------------------

    def call(
        self, target: catalog.ApiTarget, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """Run one wrapped API call, recording it when it is ours to record."""
        if (
            not self.active
            or threading.get_ident() != self._thread
            or _graph_task_id() != -1
            or _transform() is not None
        ):
            return fn(*args, **kwargs)
        assert self._daemon is not None
        if self._daemon.failed is not None:  # the daemon said why, once; stay out of the way
            self.active, STATE.session = False, None
            return fn(*args, **kwargs)
        TLS.inside = True
        try:
            plan = self._guarded(target, self._plan, target, args, kwargs)
            out = fn(*(args if plan is None else plan.args), **kwargs)
            if plan is not None and plan.tapped and self._guarded(target, aliases_tap, out, plan.tapped):
                out = self._untapped(plan, fn, args, kwargs)
            if target.comm:  # it wrote into its arguments without bumping their version: copies are stale
                self._seen.forget(args)
            elif args and isinstance(args[0], torch.Tensor) and _mutates_first(target, args, kwargs):
                # it wrote into its first argument: another tensor over the same memory (``x.data``
                # against ``x``) has its own version counter, which did not move
                self._seen.forget_aliases(args[0])
            elif kwargs and "out" in kwargs:  # likewise into ``out=`` (``out=x.data``)
                self._seen.forget_aliases(kwargs["out"])
            if plan is not None:
                self._guarded(target, self._finish, plan, args, kwargs, out)
            if target.comm or target.attr in RUNNING_STATE:
                # it wrote into its arguments (a collective, or batch norm's running statistics), recorded
                # or not, without moving their versions; an async collective may still write (recorded
                # as they are now): what was remembered of them is stale
                self._seen.forget((args, kwargs))
            return out
        finally:
            TLS.inside = False

    @staticmethod
    def _untapped(plan: _Plan, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The call run again on its own inputs: it returned a tapped input or a view of one, which
        must be the input's own, as without the dumper, or an in-place op on it would bypass the
        input's gradient. Such calls (views, ``x.float()`` of a float ``x``) are pure and cheap. The
        gradient a single view produced for the tensor it views comes from the view's own node."""
        out = fn(*args, **kwargs)
        plan.tapped = ()
        bc = plan.backward
        if bc is not None:
            first = args[0] if args else None
            bc.written = (
                (0,) in bc.in_paths and isinstance(out, torch.Tensor) and out is not first and out._is_view()
            )
            bc.in_paths = []
        return out

    def _guarded(self, target: catalog.ApiTarget, step: Callable[..., Any], *a: Any) -> Any:
        try:
            return step(*a)
        except Exception:
            if f"error:{target.api}" not in self._logged:
                self._logged.add(f"error:{target.api}")
                log.exception("dumper: error while recording %s; the call itself ran normally", target.api)
            return None

    def _selected(self, name: str) -> bool:
        with self._lock:
            return self._scope.static_match(name) and self._scope.range_match(name)

    def _plan(self, target: catalog.ApiTarget, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Plan | None:
        cfg = self.config
        index = self._counters.get(target.api, 0)
        self._counters[target.api] = index + 1
        if self._modules.scope:
            if not self._modules.in_scope:
                return None
            self._module_hit = True
        call = f"{target.api}_{index}"
        forward = FORWARD in cfg.directions and self._selected(f"{call}_{FORWARD}")
        backward = (
            cfg.writes_tensors
            and BACKWARD in cfg.directions
            and not target.comm
            and torch.is_grad_enabled()
            and (self._scope.is_range or self._scope.static_match(f"{call}_{BACKWARD}"))
        )
        if not forward and not backward:
            return None
        plan = _Plan(target, index, args, forward)
        if cfg.writes_stack:
            plan.frames = call_site_frames()
        plan.chain = self._modules.chain
        if forward and cfg.writes_tensors and INPUT in cfg.kinds:
            plan.capture = self._capture(leaves(args), target.api, index, FORWARD, INPUT)
            if kwargs and cfg.writes_npy:
                self._keyword_files(plan.capture, kwargs, target.api, index)
        if backward:
            written = _mutates_first(target, args, kwargs)
            taps = {
                p: t for p, t in tensor_leaves(args) if t.requires_grad and not (written and p[:1] == (0,))
            }
            bc = BackwardCall(
                self, target.api, index, self._generation, plan.frames, None if forward else plan.chain
            )
            first = args[0] if args else None
            bc.written = written and isinstance(first, torch.Tensor) and first.requires_grad
            if taps:
                plan.args, plan.tapped = tap_inputs(args, taps, bc.on_input_grads)
                bc.in_paths = list(taps)
            plan.backward = bc
        return plan

    def _capture(
        self,
        items: Iterable[tuple[tuple[int, ...], Any]],
        api: str,
        index: int,
        direction: str,
        kind: str,
        capture: CallCapture | None = None,
    ) -> CallCapture:
        cap = capture or CallCapture(
            self.config.filter_on, self.config.writes_npy, self._seen, self.config.checksums
        )
        for path, value in items:
            if value is not None:
                cap.add(entry_name(api, index, direction, kind, path), value)
        return cap

    @staticmethod
    def _keyword_files(cap: CallCapture, kwargs: dict[str, Any], api: str, index: int) -> None:
        """The data of the tensors passed by keyword at the call's top level (``attn_mask=``,
        ``weight=``), each to an npy the call sidecar names: without it a replay cannot rebuild the
        call. ``out=`` is written by the call, never read."""
        for key, value in kwargs.items():
            if isinstance(value, torch.Tensor) and key != "out":
                name = keyword_file_name(api, index, key)
                if name is not None:
                    cap.add_file(name, value)

    def _finish(self, plan: _Plan, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
        cfg, target = self.config, plan.target
        single = isinstance(out, torch.Tensor)
        pending = PendingCall(
            target.api,
            plan.index,
            target.qualname,
            frozen(args),
            frozen(kwargs),
            0 if _mutates_first(target, args, kwargs) else None,
            current_state(args, self._modules.training, self.step + self.optimizer_steps),
        )
        bc = plan.backward
        if bc is not None:
            outs = [
                (p, t)
                for p, t in tensor_leaves(out, (0,) if single else ())
                if t.requires_grad and t.grad_fn is not None
            ]
            if outs:
                bc.out_paths = [p for p, _ in outs]
                hook_outputs([t for _, t in outs], bc.on_output_grads)
                bc.written = bc.written and single and out.grad_fn is not None
                if bc.written:
                    out.grad_fn.register_hook(bc.on_written_grad)
                if not plan.forward:  # written with the backward: without holding the tensors till then
                    bc.pending = pending.unrecorded()
        if not plan.forward:
            return
        capture = plan.capture
        if cfg.writes_tensors and OUTPUT in cfg.kinds:
            source = args if target.comm else out  # in-place collectives: the args, now mutated
            capture = self._capture(leaves(source), target.api, plan.index, FORWARD, OUTPUT, capture)
        if self._ensure_open(args, out):
            self._put(capture, f"{plan.call}_{FORWARD}", plan.frames, plan.chain, pending)

    def _put(
        self,
        capture: CallCapture | None,
        call: str,
        frames: Frames | None,
        chain: ModuleChain | None,
        pending: PendingCall | None,
    ) -> None:
        assert self._daemon is not None
        values, in_flight = capture.finish() if capture is not None else ([], None)
        record = CallRecord(values, call=pending, in_flight=in_flight)
        if frames is not None:
            record.stack = (stack_name(call), frames)
        if chain:
            record.modules = (call_key(call), chain)
        self._daemon.put(record)

    def record_backward(
        self, bc: BackwardCall, kind: str, paths: list[tuple[int, ...]], grads: Any, last: bool
    ) -> None:
        """Write the gradients of one side of a call's backward (any autograd thread)."""
        if not self.active or bc.generation != self._generation:
            return
        inside, TLS.inside = TLS.inside, True
        try:
            if bc.selected is None:
                bc.selected = self._selected(f"{bc.call}_{BACKWARD}")
            if not bc.selected:
                return
            capture = None
            if kind in self.config.kinds:
                capture = self._capture(zip(paths, grads, strict=True), bc.api, bc.index, BACKWARD, kind)
            if not self._ensure_open(grads):
                return
            chain, bc.chain = bc.chain, None
            pending, bc.pending = bc.pending, None
            self._put(capture, f"{bc.call}_{BACKWARD}", bc.frames if last else None, chain, pending)
        except Exception:
            if f"error:{bc.api}:bwd" not in self._logged:
                self._logged.add(f"error:{bc.api}:bwd")
                log.exception("dumper: error while recording the backward of %s", bc.call)
        finally:
            TLS.inside = inside

    def dropout_forced(self, target: catalog.ApiTarget) -> None:
        """Said once per dropout API the script calls (said at every start, it read as if a model without
        dropout had some)."""
        self._once(
            f"dropout:{target.api}",
            logging.INFO,
            "dumper: %s runs with p=0 while dumping, so that two runs compare (ptdbg-dump run "
            "--keep-dropout, or configure_hook(disable_dropout=False), keeps it)",
            target.api,
        )

    def _once(self, key: str, level: int, msg: str, *args: Any) -> None:
        if key not in self._logged:
            self._logged.add(key)
            log.log(level, msg, *args)


@cache
def _watch_optimizers() -> None:
    """Tell the dumping session of every optimizer step. Registered once a process and never removed: a
    step hook that ends the dumped step (``ptdbg-dump run --step``) stops the session while torch
    iterates its hooks, which removing one would change under it."""
    register_optimizer_step_post_hook(_optimizer_stepped)


def _optimizer_stepped(optimizer: object, args: object, kwargs: object) -> None:
    session = STATE.session
    if isinstance(session, DumpSession):
        session.optimizer_stepped()
