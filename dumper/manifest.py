"""The run manifest of ``ptdbg-dump run`` (docs/monitor.md#the-run-manifest): what a run was started
with, so that two runs that differ before any kernel runs say so first.

Written whole (a temporary file, then a rename) at start and again as its parts are first seen: the
flags, RNG digests and environment at the model's first forward (the script has seeded and set its
switches by then), the first K batches at the model's first K forwards, the optimizers'
hyperparameters, the LR schedulers, the module tree and a checksum of every parameter at the first
``optimizer.step()``, before it changes anything. Its sections are :mod:`ptdbg_tui.formats.manifest`'s.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
import random
import socket
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn.modules import module as nn_module
from torch.optim import Optimizer, lr_scheduler
from torch.optim.optimizer import register_optimizer_step_pre_hook

from dumper.capture import tensor_leaves
from dumper.installed import Installed
from dumper.module_chain import ModuleTracker
from dumper.patching import TLS, is_compiling
from ptdbg_tui.formats import manifest as fm
from ptdbg_tui.formats.file_writes import DIR_MODE, write_text

#: Batches whose checksums are kept: the model's first K forwards.
DEFAULT_BATCHES = 3
#: A parameter group's or a scheduler's value kept as text when it is not a JSON scalar, this long
#: at most.
_TEXT = 200


@contextmanager
def unrecorded() -> Iterator[None]:
    """The dumper's own torch calls, which no dump may record as the script's."""
    inside, TLS.inside = TLS.inside, True
    try:
        yield
    finally:
        TLS.inside = inside


class SeenModules:
    """The modules the script runs, named as the dump's module sidecar names them (a
    :class:`~dumper.module_chain.ModuleTracker` without a model: the first top-level module called is
    the root ``""``); two different modules of one name (top-level modules of one class) are told
    apart as ``Block``, ``Block#1`` in the order first run. Each of ``root_calls`` is called after
    each forward of a top-level module with the module and its arguments."""

    def __init__(self) -> None:
        self._tracker = ModuleTracker()
        self._names: weakref.WeakKeyDictionary[nn.Module, str] = weakref.WeakKeyDictionary()
        self._taken: set[str] = set()
        self._depth = 0
        self._thread = 0
        self._installed = Installed()
        self.root_calls: list[Callable[[nn.Module, tuple[Any, ...], dict[str, Any]], None]] = []

    def install(self) -> None:
        self._thread = threading.get_ident()
        self._tracker.install()  # first: its hooks run before ours, so the chain holds the module
        self._installed.hook(
            nn_module.register_module_forward_pre_hook(self._enter),
            nn_module.register_module_forward_hook(self._leave, with_kwargs=True, always_call=True),
        )

    def remove(self) -> None:
        self._installed.undo()
        self._tracker.remove()

    def name(self, module: nn.Module) -> str | None:
        """The module's name, None when it has not run."""
        return self._names.get(module)

    def modules(self) -> list[tuple[str, nn.Module]]:
        """Every module run so far, by name."""
        return sorted(((n, m) for m, n in self._names.items()), key=lambda item: item[0])

    def parameter_names(self, optimizer: Optimizer) -> list[tuple[str, torch.Tensor]]:
        """An optimizer's parameters in its order, each by its qualified name in the modules run so
        far (the shortest, where one is shared), else as ``group<G>.<I>``."""
        names: dict[int, str] = {}
        for name, module in self.modules():
            for pname, p in module.named_parameters(recurse=False):
                full = f"{name}.{pname}" if name else pname
                old = names.get(id(p))
                if old is None or len(full) < len(old):
                    names[id(p)] = full
        return [
            (names.get(id(p), f"group{g}.{i}"), p)
            for g, group in enumerate(optimizer.param_groups)
            for i, p in enumerate(group["params"])
        ]

    def _enter(self, module: nn.Module, args: tuple[Any, ...]) -> None:
        if is_compiling() or threading.get_ident() != self._thread:
            return
        self._depth += 1
        if module not in self._names:
            chain = self._tracker.chain
            name = chain[-1][0] if chain else type(module).__name__
            unique, k = name, 0
            while unique in self._taken:
                k += 1
                unique = f"{name}#{k}"
            self._taken.add(unique)
            self._names[module] = unique

    def _leave(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any) -> None:
        if is_compiling() or threading.get_ident() != self._thread or not self._depth:
            return
        self._depth -= 1
        if not self._depth:  # its inputs, as the forward left them (a global pre-hook has no kwargs)
            for call in self.root_calls:
                call(module, args, kwargs)


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def tensor_checksum(t: torch.Tensor) -> str:
    """A digest of a tensor's dtype, shape and bytes (read on the host)."""
    host = t.detach().to("cpu").contiguous().reshape(-1)
    raw = host.view(torch.uint8) if host.numel() else host
    head = f"{t.dtype}{tuple(t.shape)}".encode()
    return _digest(head + raw.numpy().tobytes())


def _scalar(value: Any) -> fm.Scalar | list[fm.Scalar]:
    """A hyperparameter as JSON: numbers, texts, booleans and None as they are, a tensor's value, a
    tuple as a list; anything else as a bounded text of its repr."""
    if value is None or isinstance(value, bool | int | str):
        return value if not isinstance(value, str) else value[:_TEXT]
    if isinstance(value, float):
        return value
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return value.item()
    if isinstance(value, tuple | list) and len(value) <= 64:
        return [v if isinstance(v, bool | int | float | str | type(None)) else repr(v)[:_TEXT] for v in value]
    return repr(value)[:_TEXT]


def _rank() -> int:
    """The rank as known at start: torch.distributed's, else a launcher's ``RANK``, else 0."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    text = os.environ.get("RANK", "")
    return int(text) if text.isdigit() else 0


def _versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "cuda": torch.version.cuda,
        "cudnn": str(torch.backends.cudnn.version()) if torch.backends.cudnn.is_available() else None,
    }
    for dist in ("torch_npu", "torch-npu"):
        try:
            versions["torch_npu"] = importlib.metadata.version(dist)
            break
        except importlib.metadata.PackageNotFoundError:
            continue
    home = os.environ.get("ASCEND_TOOLKIT_HOME") or os.environ.get("ASCEND_HOME_PATH")
    if home:  # the toolkit's folder is named by its CANN version (.../ascend-toolkit/8.0.RC1)
        versions["cann"] = os.path.realpath(home)[-_TEXT:]
    return versions


def _flags() -> dict[str, fm.Scalar]:
    backends = torch.backends
    matmul = backends.cuda.matmul
    return {
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "deterministic_warn_only": torch.is_deterministic_algorithms_warn_only_enabled(),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "cuda_matmul_allow_tf32": matmul.allow_tf32,
        "cuda_matmul_allow_fp16_reduced_precision": matmul.allow_fp16_reduced_precision_reduction,
        "cuda_matmul_allow_bf16_reduced_precision": matmul.allow_bf16_reduced_precision_reduction,
        "cudnn_allow_tf32": backends.cudnn.allow_tf32,
        "cudnn_deterministic": backends.cudnn.deterministic,
        "cudnn_benchmark": backends.cudnn.benchmark,
        "default_dtype": str(torch.get_default_dtype()),
        "num_threads": torch.get_num_threads(),
    }


def _numpy_state() -> bytes:
    """numpy's global RNG state as bytes (its key array whole: a repr would elide a long one)."""
    name, keys, *rest = np.random.get_state()
    return str(name).encode() + np.asarray(keys).tobytes() + repr(rest).encode()


def _rng() -> dict[str, fm.Scalar]:
    state = random.getstate()
    rng: dict[str, fm.Scalar] = {
        "torch_initial_seed": torch.initial_seed(),
        "torch_state": _digest(torch.get_rng_state().numpy().tobytes()),
        "numpy_state": _digest(_numpy_state()),
        "python_state": _digest(repr(state).encode()),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        rng["cuda_state"] = _digest(b"".join(s.numpy().tobytes() for s in torch.cuda.get_rng_state_all()))
    return rng


class ManifestRecorder:
    """Writes ``<folder>/manifest_rank<R>.json`` at :meth:`install` and as its parts are first seen."""

    def __init__(self, folder: Path, argv: list[str], modules: SeenModules, batches: int = DEFAULT_BATCHES):
        self.folder = folder
        self.modules = modules
        self.batches = batches
        self.data: dict[str, Any] = {
            "format": fm.FORMAT,
            "version": fm.VERSION,
            "rank": _rank(),
            fm.HOST: {"hostname": socket.gethostname(), "cwd": os.getcwd(), "executable": sys.executable},
            fm.ARGV: list(argv),
            fm.VERSIONS: _versions(),
            fm.ENV: self._env(),
            fm.FLAGS: _flags(),
            fm.BATCHES: [],
        }
        self._first_forward = False
        self._model: weakref.ref[nn.Module] | None = None
        self._stepped: set[int] = set()  # the optimizers seen stepping
        self._schedulers: weakref.WeakSet[Any] = weakref.WeakSet()
        self._installed = Installed()

    @property
    def path(self) -> Path:
        return self.folder / fm.file_name(self.data["rank"])

    @staticmethod
    def _env() -> dict[str, str | None]:
        return {name: os.environ.get(name) for name in fm.NUMERIC_ENV}

    def install(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
        self._write()
        self.modules.root_calls.append(self._on_root)
        self._installed.hook(register_optimizer_step_pre_hook(self._on_step))
        for cls in (lr_scheduler.LRScheduler, lr_scheduler.ReduceLROnPlateau):
            self._watch_init(cls)

    def remove(self) -> None:
        self._installed.undo()
        if self._on_root in self.modules.root_calls:
            self.modules.root_calls.remove(self._on_root)

    def _watch_init(self, cls: type) -> None:
        """Every scheduler made while the script runs is remembered (weakly), to be read at its
        optimizer's first step: the live objects, not the script's text."""
        seen = self._schedulers

        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            def init(obj: Any, *args: Any, **kwargs: Any) -> None:
                original(obj, *args, **kwargs)
                seen.add(obj)

            return init

        self._installed.patch(cls, "__init__", make)

    def _write(self) -> None:
        write_text(self.path, fm.json_text(self.data))

    def _on_root(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if not torch.is_grad_enabled() or len(self.data[fm.BATCHES]) >= self.batches:
            return
        if self._model is None:  # the model: the first top-level module run (a loss module is another)
            self._model = weakref.ref(module)
        elif self._model() is not module:
            return
        with unrecorded(), torch.no_grad():
            if not self._first_forward:
                self._first_forward = True
                self.data[fm.ENV] = self._env()
                self.data[fm.FLAGS] = _flags()
                self.data[fm.RNG] = _rng()
            inputs = [
                {
                    "path": ".".join(map(str, p)),
                    "shape": list(t.shape),
                    "dtype": str(t.dtype),
                    "checksum": tensor_checksum(t),
                }
                for p, t in tensor_leaves((args, kwargs))
            ]
            self.data[fm.BATCHES].append({"module": self.modules.name(module), "inputs": inputs})
            self._write()

    def _on_step(self, optimizer: Optimizer, args: Any, kwargs: Any) -> None:
        if id(optimizer) in self._stepped:
            return
        self._stepped.add(id(optimizer))
        with unrecorded(), torch.no_grad():
            index = len(self.data.setdefault(fm.OPTIMIZERS, []))
            groups = [{k: _scalar(v) for k, v in g.items() if k != "params"} for g in optimizer.param_groups]
            for group, g in zip(groups, optimizer.param_groups, strict=True):
                group["parameters"] = len(g["params"])
                group["elements"] = sum(p.numel() for p in g["params"])
            self.data[fm.OPTIMIZERS].append({"class": type(optimizer).__name__, "groups": groups})
            for s in list(self._schedulers):
                if getattr(s, "optimizer", None) is optimizer:
                    state = {k: _scalar(v) for k, v in s.state_dict().items() if not callable(v)}
                    self.data.setdefault(fm.SCHEDULERS, []).append(
                        {"class": type(s).__name__, "optimizer": index, "state": state}
                    )
            self._parameters(optimizer)
            self._write()

    def _parameters(self, optimizer: Optimizer) -> None:
        """The module tree and a checksum of each of the optimizer's parameters, before its first step."""
        tree = self.data.setdefault(fm.MODULES, {})
        for name, module in self.modules.modules():
            tree.setdefault(name, type(module).__name__)
        params = self.data.setdefault(fm.PARAMETERS, {})
        for name, p in self.modules.parameter_names(optimizer):
            params[name] = {"shape": list(p.shape), "dtype": str(p.dtype), "checksum": tensor_checksum(p)}
