"""Turning the tensors and scalars of one call into pkl records: names, stats, host copies.

Statistics are reduced on the tensor's own device in float32 (float64 tensors keep float64),
never in fp16/bf16 where an l2norm overflows. Every reduction of a call is gathered and moved to
the host in a single transfer per device (:meth:`CallCapture.finish`); on the CPU torch's reductions
use the training's intra-op threads (measured 2.3x faster than single-threaded numpy passes).
Host copies are taken when a value is added, so an in-place op that runs afterwards cannot change
what is written. On a CUDA device the transfer and the host copies are queued on the stream, and the
writer thread waits for them (:class:`InFlight`): a wait per call would stall the training's queue of
kernels at every API call.
"""

from __future__ import annotations

import contextlib
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ptdbg_tui.formats.stats import StatKind, build_stats, classify
from ptdbg_tui.formats.tensorfile import WIDENED

Path_ = tuple[int, ...]
_EXACT_FLOATS = (torch.float32, torch.float64)
#: Floats numpy has no type for (``Got unsupported ScalarType Float8_e4m3fn``), saved as float32; the
#: float8 kinds come and go with torch's version.
_WIDENED = frozenset(getattr(torch, name) for name in WIDENED if hasattr(torch, name))
#: A widened float's own bytes, for a checksum of the data as it is: an integer of its size.
_BITS = {1: torch.uint8, 2: torch.int16}
#: Unsigned integers whose min and max torch cannot take (aminmax has no kernel for them) and that fit
#: in int64; uint64 is reduced in the statistics' float type.
_WIDE_UNSIGNED = tuple(getattr(torch, name) for name in ("uint16", "uint32") if hasattr(torch, name))
_UINT64 = getattr(torch, "uint64", None)


@dataclass(slots=True)
class Value:
    """One pkl tensor line to be written, with its npy content when npy files are written."""

    name: str
    dtype: str
    shape: list[int] | str
    stats: list[Any]
    array: np.ndarray | torch.Tensor | None = None
    #: Its npy only, no pkl line (a keyword tensor: the pkl records positional ones only).
    file_only: bool = False

    @property
    def nbytes(self) -> int:
        a = self.array
        if a is None:
            return 0
        return a.nbytes if isinstance(a, np.ndarray) else a.numel() * a.element_size()


#: Values awaiting their stats: (value, kind, is a float tensor), in transfer order.
Pending = list[tuple[Value, StatKind, bool]]


def recordable_tensor(t: torch.Tensor) -> bool:
    return (
        t.layout == torch.strided
        and not t.is_meta
        and not t.is_complex()
        and not t.is_quantized
        and not t.is_nested
    )


def leaves(value: Any, path: Path_ = ()) -> Iterator[tuple[Path_, Any]]:
    """Recordable leaves of an argument: tensors and Python numbers, lists/tuples recursed.

    Other values (None, str, dtype, slice, dict, ...) yield nothing but keep their index.
    """
    if isinstance(value, torch.Tensor):
        if recordable_tensor(value):
            yield path, value
    elif isinstance(value, (bool, int, float)):
        yield path, value
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from leaves(v, (*path, i))


def tensor_leaves(value: Any, path: Path_ = ()) -> Iterator[tuple[Path_, torch.Tensor]]:
    return ((p, v) for p, v in leaves(value, path) if isinstance(v, torch.Tensor))


def _stat_dtype(device: torch.device) -> torch.dtype:
    return torch.float64 if device.type in ("cpu", "cuda") else torch.float32


def _reductions(t: torch.Tensor, kind: StatKind) -> torch.Tensor:
    """The numbers behind a stats array, as one 1-d tensor on ``t``'s device."""
    acc = _stat_dtype(t.device)
    if kind is StatKind.ZERO_D:
        return t.reshape(1).to(acc)
    if kind is StatKind.INT:
        ints = t.long() if t.dtype in _WIDE_UNSIGNED else t.to(acc) if t.dtype == _UINT64 else t
        mn, mx = torch.aminmax(ints)
        return torch.stack([mx.to(acc), mn.to(acc), t.float().mean().to(acc)])
    x = t if t.dtype in _EXACT_FLOATS else t.float()
    mn, mx = torch.aminmax(x)
    return torch.stack([mx, mn, x.mean(), torch.linalg.vector_norm(x)]).to(acc)


def host_copy(t: torch.Tensor, raw: bool = False) -> np.ndarray | torch.Tensor:
    """A private CPU copy (bf16 and float8 widened to fp32, as the original saves bf16; ``raw``: kept
    as their bytes, for a checksum of the data as it is).

    CPU tensors are copied by numpy: a single-threaded memcpy, several times faster than torch's
    threaded copy when the training already keeps every core busy.
    """
    if t.dtype in _WIDENED and raw:
        t = t.view(_BITS[t.element_size()])
    elif t.dtype in _WIDENED:
        t = t.float()  # a fresh tensor already: no second copy on the CPU
        if t.device.type == "cpu":
            return t.numpy()
    if t.device.type == "cpu":
        return np.array(t.numpy(), order="C", copy=True)
    if t.device.type == "cuda":
        out = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
        return out.copy_(t, non_blocking=True)
    return t.to("cpu")


#: What says that a tensor still holds the values recorded of it: its version counter, which each
#: in-place op moves, and where its data lies, which ``x.data = y`` changes without moving the counter
#: (ZeRO-style sharding swaps a parameter's data so before each use).
State = tuple[int, int]


def tensor_state(t: torch.Tensor) -> State:
    try:
        where = t.data_ptr()
    except (RuntimeError, NotImplementedError):  # no data of its own (a meta or nested tensor)
        where = -1
    return t._version, where


class SeenTensors:
    """The last few tensors recorded, so a tensor recorded again unchanged (the output of one call
    is the input of the next) reuses its stats and host copy instead of reducing and copying twice."""

    def __init__(self, size: int = 16) -> None:
        self.size = size
        self._items: OrderedDict[int, tuple[weakref.ref[torch.Tensor], State, Value]] = OrderedDict()

    def get(self, t: torch.Tensor) -> Value | None:
        if t.is_inference():  # no version counter: cannot tell whether it changed
            return None
        item = self._items.get(id(t))
        if item is None or item[0]() is not t or item[1] != tensor_state(t):
            return None
        return item[2]

    def put(self, t: torch.Tensor, state: State, value: Value) -> None:
        """Remember ``value`` as ``t``'s record while ``t`` stays in ``state``: the state it had when its
        values were taken, which an in-place call has moved on since (an input taken before
        ``x[idx] = …`` is not what ``x`` holds after it). Never an inference tensor (no version)."""
        self._items[id(t)] = (weakref.ref(t), state, value)
        self._items.move_to_end(id(t))
        if len(self._items) > self.size:
            self._items.popitem(last=False)

    def forget(self, value: Any) -> None:
        """Drop the tensors of an argument: changed in a way their version does not show (a
        collective writes into its arguments without bumping it)."""
        for _, t in tensor_leaves(value):
            self._items.pop(id(t), None)

    def forget_aliases(self, value: Any) -> None:
        """Drop the tensors over the memory of an argument's tensors: written through them, which may
        not share their version counter (``x.data.mul_(2)`` leaves ``x._version`` as it was)."""
        storages = set()
        for _, t in tensor_leaves(value):
            with contextlib.suppress(RuntimeError, NotImplementedError):  # no storage: nothing to compare
                storages.add(t.untyped_storage().data_ptr())
        if not storages:
            return
        for key, (ref, _, _) in list(self._items.items()):
            other = ref()
            try:
                if other is None or other.untyped_storage().data_ptr() in storages:
                    del self._items[key]
            except (RuntimeError, NotImplementedError):
                del self._items[key]

    def clear(self) -> None:
        self._items.clear()


class CallCapture:
    """The values of one call and direction, awaiting one batched stats transfer."""

    def __init__(
        self, filter_on: bool, copy_npy: bool, seen: SeenTensors | None = None, checksums: bool = False
    ) -> None:
        self.filter_on = filter_on
        self.copy_npy = copy_npy
        self.checksums = checksums  # tensors copied as their raw bytes, for the writer's CRC
        self.seen = seen
        self._remember: list[tuple[torch.Tensor, State, Value]] = []
        self.values: list[Value] = []
        self._pending: dict[torch.device, Pending] = {}
        self._pieces: dict[torch.device, list[torch.Tensor]] = {}
        self._async: set[torch.device] = set()

    def add(self, name: str, value: Any) -> None:
        if isinstance(value, torch.Tensor):
            self._add_tensor(name, value)
        elif not self.filter_on:
            array = np.array(value) if self.copy_npy else None
            stats = build_stats(StatKind.SCALAR, value)
            self.values.append(Value(name, str(type(value)), "[]", stats, array))

    def _add_tensor(self, name: str, user_tensor: torch.Tensor) -> None:
        dtype = str(user_tensor.dtype)
        kind = classify(dtype, tuple(user_tensor.shape))
        if self.filter_on and (
            kind in (StatKind.EMPTY, StatKind.INT)
            or (kind is StatKind.ZERO_D and not user_tensor.is_floating_point())
        ):
            return  # the original's filter, except that 0-d float tensors (losses) are kept
        seen = self.seen.get(user_tensor) if self.seen is not None else None
        if seen is not None:
            self.values.append(Value(name, dtype, seen.shape, seen.stats, seen.array))
            return
        t = user_tensor.detach()
        empty = build_stats(StatKind.EMPTY) if kind is StatKind.EMPTY else []
        value = Value(name, dtype, list(t.shape), empty)
        if kind is not StatKind.EMPTY:
            self._pending.setdefault(t.device, []).append((value, kind, t.is_floating_point()))
            self._pieces.setdefault(t.device, []).append(_reductions(t, kind))
        if self.copy_npy or self.checksums:
            value.array = self._host_copy(t, raw=self.checksums)
        self.values.append(value)
        if self.seen is not None and not user_tensor.is_inference():  # no version counter to watch
            self._remember.append((user_tensor, tensor_state(user_tensor), value))

    def add_file(self, name: str, user_tensor: torch.Tensor) -> None:
        """A tensor whose data alone is written, to ``<name>.npy``, with no pkl line and no statistics:
        a keyword argument, which a replay needs but the original's pkl has no name for. Its host copy
        is taken now, as the positional inputs' are (on CUDA queued on the stream, waited for by the
        writer), or shared with a recent record of the same unchanged tensor."""
        if not self.copy_npy or not recordable_tensor(user_tensor):
            return
        seen = self.seen.get(user_tensor) if self.seen is not None else None
        array = seen.array if seen is not None else None
        if array is None:
            array = self._host_copy(user_tensor.detach())
        self.values.append(Value(name, str(user_tensor.dtype), list(user_tensor.shape), [], array, True))

    def _host_copy(self, t: torch.Tensor, raw: bool = False) -> np.ndarray | torch.Tensor:
        """``t``'s host copy, taken now; on CUDA queued on the stream, which the writer waits for."""
        if t.device.type == "cuda":
            self._async.add(t.device)
        return host_copy(t, raw=raw)

    def finish(self) -> tuple[list[Value], InFlight | None]:
        """Bring every pending reduction to the host (one transfer per device) and fill the stats;
        on CUDA, the values with what their writer must wait for before it reads them."""
        in_flight = InFlight() if self._async or any(d.type == "cuda" for d in self._pieces) else None
        for device, pieces in self._pieces.items():
            numbers = torch.cat(pieces)
            if in_flight is not None and device.type == "cuda":
                host = torch.empty(numbers.shape, dtype=numbers.dtype, pin_memory=True)
                in_flight.add(device, host.copy_(numbers, non_blocking=True), self._pending[device])
                self._async.discard(device)
            else:
                _fill(self._pending[device], numbers.tolist())
        for device in self._async:  # host copies with no reduction on that device
            in_flight.add(device, None, [])  # type: ignore[union-attr]
        if self.seen is not None:
            for t, state, value in self._remember:
                self.seen.put(t, state, value)
            self._remember.clear()
        self._pieces.clear()
        self._pending.clear()
        self._async.clear()
        return self.values, in_flight


def _fill(pending: Pending, numbers: list[float]) -> None:
    """Stats filled in place: a value recorded again before its stats arrive shares the list."""
    pos = 0
    for value, kind, is_float in pending:
        value.stats[:] = _stats_of(kind, is_float, numbers, pos)
        pos += 1 if kind is StatKind.ZERO_D else (3 if kind is StatKind.INT else 4)


class InFlight:
    """A call's reductions and host copies still queued on CUDA streams."""

    def __init__(self) -> None:
        self._parts: list[tuple[torch.cuda.Event, torch.Tensor | None, Pending]] = []

    def add(self, device: torch.device, numbers: torch.Tensor | None, pending: Pending) -> None:
        event = torch.cuda.Event()
        event.record(torch.cuda.current_stream(device))
        self._parts.append((event, numbers, pending))

    def wait(self) -> None:
        """Block until the stream has run them (GIL released), then fill the stats."""
        for event, numbers, pending in self._parts:
            event.synchronize()
            if numbers is not None:
                _fill(pending, numbers.tolist())
        self._parts.clear()


def _stats_of(kind: StatKind, is_float: bool, numbers: list[float], pos: int) -> list[Any]:
    if kind is StatKind.ZERO_D:
        return build_stats(kind, numbers[pos] if is_float else int(numbers[pos]))
    if kind is StatKind.INT:
        mx, mn, mean = numbers[pos : pos + 3]
        return build_stats(kind, int(mx), int(mn), mean)
    return build_stats(kind, *numbers[pos : pos + 4])
