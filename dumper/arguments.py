"""A call's arguments and torch's global state, for the call sidecar (``*.calls.jsonl``).

On the training thread a call only takes what could change before the writer gets to it: the
containers of its arguments are copied shallowly (a user may append to a list after the call),
and the global state is read. The writer thread turns the rest into the sidecar's values
(:mod:`ptdbg_tui.formats.calls`): tensors into references to their pkl entries (a keyword tensor: to
its data file), torch's dtypes, sizes and devices into named values.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, TypeVar

import torch

from ptdbg_tui.formats.calls import Autocast, CallSpec, CallState, Device, Dtype, Size, TensorArg, TorchConst
from ptdbg_tui.formats.naming import FORWARD, INPUT, entry_name, keyword_file_name

T = TypeVar("T", tuple[Any, ...], dict[str, Any])
_CONTAINERS = (list, tuple, dict)
#: Named torch constants written as ``{"torch": "torch.strided"}``.
_CONSTANTS = (torch.layout, torch.memory_format, torch.qscheme)


def _reduce_op_type() -> type[Any] | None:
    """The type of ``torch.distributed.ReduceOp.SUM`` … (a pybind enum), where torch has distributed."""
    try:
        import torch.distributed as dist

        return type(dist.ReduceOp.SUM) if dist.is_available() else None
    except (ImportError, AttributeError):
        return None


#: A collective's reduction (``op=ReduceOp.MAX``): by its name, so that two runs' ops compare (a rank
#: that reduces otherwise); as an opaque type name every op looked the same.
_REDUCE_OP = _reduce_op_type()
_states: dict[tuple[Any, ...], CallState] = {}


def _copy(value: Any) -> Any:
    t = type(value)
    if t is list:
        return [_copy(v) for v in value]
    if t is dict:
        return {k: _copy(v) for k, v in value.items()}
    if t is tuple and any(isinstance(v, _CONTAINERS) for v in value):
        return tuple(_copy(v) for v in value)
    return value


def frozen(args: T) -> T:
    """Positional or keyword arguments as they are now, whatever the caller does to its lists later
    (the containers themselves are the wrapper's own)."""
    for a in args.values() if isinstance(args, dict) else args:
        if isinstance(a, _CONTAINERS):
            copied: T = _copy(args)
            return copied
    return args


def _device_type(args: tuple[Any, ...]) -> str:
    for a in args:
        if isinstance(a, torch.Tensor):
            return a.device.type
        if type(a) in (list, tuple) and a and isinstance(a[0], torch.Tensor):
            return a[0].device.type
    return "cpu"


def current_state(args: tuple[Any, ...], training: bool | None, step: int | None = None) -> CallState:
    """The state that changes the result of a call with these arguments, made now (in training step
    ``step``, which changes nothing of it but says when it was made)."""
    device = _device_type(args)
    try:
        autocast = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else None
    except RuntimeError:  # a device type autocast does not know (meta): no autocast there
        autocast = None
    key = (
        torch.is_grad_enabled(),
        training,
        device,
        autocast,
        torch._C._get_cublas_allow_tf32(),
        torch._C._get_cudnn_allow_tf32(),
        torch.are_deterministic_algorithms_enabled(),
        torch.get_default_dtype(),
        step,
    )
    state = _states.get(key)
    if state is None:
        grad, _, _, _, matmul, cudnn, deterministic, default, _ = key
        state = _states[key] = CallState(
            grad,
            training,
            None if autocast is None else Autocast(device, str(autocast)),
            matmul,
            cudnn,
            deterministic,
            str(default),
            step,
        )
    return state


@dataclass(slots=True)
class PendingCall:
    """A call's sidecar line before the writer thread resolves it."""

    api: str
    index: int
    fn: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    inplace: int | None
    state: CallState

    def spec(self, recorded: Collection[str] = ()) -> CallSpec:
        """The spec, each tensor resolved to its entry name when ``recorded`` (the names the pkl
        records) holds it, else to its dtype and shape."""
        args = [self._resolve(a, (i,), recorded) for i, a in enumerate(self.args)]
        kwargs = {k: self._keyword(k, v, recorded) for k, v in self.kwargs.items()}
        return CallSpec(f"{self.api}_{self.index}", self.fn, args, kwargs, self.inplace, self.state)

    def unrecorded(self) -> PendingCall:
        """This call with its tensors resolved now, as not recorded (to be written much later: the
        writer must not hold the tensors until then)."""
        spec = self.spec()
        return PendingCall(
            self.api, self.index, self.fn, tuple(spec.args), spec.kwargs, self.inplace, self.state
        )

    def _keyword(self, key: str, value: Any, recorded: Collection[str]) -> Any:
        """A keyword argument; a tensor whose data file was written (``recorded`` holds its name) names
        that file beside its dtype and shape."""
        if isinstance(value, torch.Tensor) and recorded:
            name = keyword_file_name(self.api, self.index, key)
            if name is not None and name in recorded:
                return TensorArg(None, str(value.dtype), tuple(value.shape), f"{name}.npy")
        return self._resolve(value, None, recorded)

    def _resolve(self, value: Any, path: tuple[int, ...] | None, recorded: Collection[str]) -> Any:
        """Tensors at positional paths (those the pkl names) become :class:`TensorArg`."""
        if isinstance(value, torch.Tensor):
            if path is not None and recorded:
                name = entry_name(self.api, self.index, FORWARD, INPUT, path)
                if name in recorded:
                    return TensorArg(name)
            # a nested tensor has no single shape (its .shape raises)
            return TensorArg(None, str(value.dtype), None if value.is_nested else tuple(value.shape))
        if isinstance(value, (list, tuple)) and not isinstance(value, torch.Size):
            items = [
                self._resolve(v, None if path is None else (*path, i), recorded) for i, v in enumerate(value)
            ]
            return items if isinstance(value, list) else tuple(items)
        if isinstance(value, dict):
            return {k: self._resolve(v, None, recorded) for k, v in value.items()}
        return value


def torch_value(value: Any) -> Any:
    """A torch value as the sidecar names it (None: not one it can name)."""
    if isinstance(value, torch.dtype):
        return Dtype(str(value))
    if isinstance(value, torch.Size):
        return Size(tuple(value))
    if isinstance(value, torch.device):
        return Device(str(value))
    if isinstance(value, _CONSTANTS):
        return TorchConst(str(value))
    if _REDUCE_OP is not None and isinstance(value, _REDUCE_OP):
        return TorchConst(f"torch.distributed.ReduceOp.{value.name}")
    return None
