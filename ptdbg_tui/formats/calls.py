"""The call sidecar: for each recorded API call, what a replay needs to run it again.

It lives next to the pkl (``api_stack_dump.calls.jsonl``), never inside it, so the pkl and npy stay
byte-compatible with the original. The dumper writes one JSON object per recorded call, before the
call's first pkl line::

    {"call": "Functional_gelu_0", "fn": "torch.nn.functional.gelu",
     "args": [{"tensor": "Functional_gelu_0_forward_input.0"}], "kwargs": {"approximate": {"value": "tanh"}},
     "inplace": null,
     "state": {"grad": true, "training": true, "autocast": null,
               "allow_tf32": {"matmul": false, "cudnn": true}, "deterministic": false,
               "default_dtype": "torch.float32"}}

``call`` is the entry names' ``{api}_{index}`` (shared by the forward and backward entries), ``fn``
the qualified name of the function called, ``inplace`` the index of the argument the call writes
into. Every argument is a tagged value (an ARG), decoded here to plain Python values or to the small
classes below, so that the reader needs no torch:

- ``{"tensor": "<pkl entry name>"}`` a tensor recorded in the pkl (:class:`TensorArg` with ``entry``);
  ``{"tensor": null, "dtype": ..., "shape": [...]}`` one that was not (a keyword argument, a dict value),
  with ``"data": "<file>.npy"`` when its data was written anyway, to a file of the tensor folder that
  no pkl line names (a tensor passed by keyword at the top level of a call, in a dump with npy files:
  ``Functional_scaled_dot_product_attention_0_forward_kwarg.attn_mask.npy``; a reader that does not
  know ``data`` takes it as unrecorded);
- ``{"value": v}`` None, bool, int, str or a finite float; ``{"float": "inf"|"-inf"|"nan"}``;
  ``{"complex": [re, im]}``; ``{"slice": [start, stop, step]}``; ``{"ellipsis": true}``;
- ``{"dtype": "torch.float32"}`` :class:`Dtype`, ``{"size": [2, 3]}`` :class:`Size`,
  ``{"device": "cpu"}`` :class:`Device`, ``{"torch": "torch.contiguous_format"}`` :class:`TorchConst`
  (any other named torch constant; a collective's ``torch.distributed.ReduceOp.SUM`` …);
- ``{"list": [...]}``, ``{"tuple": [...]}``, ``{"dict": {"k": ARG}}``;
- ``{"opaque": "<type qualname>"}`` :class:`Opaque`: a value no replay can rebuild (a Generator, a
  module, a function...).

A malformed line is skipped and kept (line number and why) for the report, as the pkl's are; sizes
and nesting are bounded like the pkl's.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ptdbg_tui.formats.files import holds_lone_surrogate, safe_name
from ptdbg_tui.formats.pkl import KeyedFollower
from ptdbg_tui.formats.records import MAX_DIMS, MAX_NUMEL, BadLine, short, shown
from ptdbg_tui.formats.unreadable import Malformed, NotACallLine

SUFFIX = ".calls.jsonl"
#: Deepest nesting of ARGs a line may hold (lists of lists of tensors are a few levels).
MAX_DEPTH = 32
#: Most ARGs one line may hold in all (an LSTM's flat weight list is a few hundred).
MAX_ARGS = 100_000
_FN_RE = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
_NON_FINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


@dataclass(frozen=True, slots=True)
class TensorArg:
    """A tensor argument: ``entry`` names its pkl entry when it was recorded, else None and only its
    dtype and shape are known — and ``data``, the file of the tensor folder holding its values, where
    the dumper wrote them with no pkl line (a keyword argument: the pkl stays the original's)."""

    entry: str | None
    dtype: str | None = None
    shape: tuple[int, ...] | None = None
    data: str | None = None


@dataclass(frozen=True, slots=True)
class Dtype:
    name: str  # "torch.float32"


@dataclass(frozen=True, slots=True)
class Size:
    dims: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Device:
    name: str  # "cpu", "cuda:0"


@dataclass(frozen=True, slots=True)
class TorchConst:
    name: str  # "torch.contiguous_format", "torch.strided"


@dataclass(frozen=True, slots=True)
class Opaque:
    type_name: str  # "torch._C.Generator"


@dataclass(frozen=True, slots=True)
class Autocast:
    device: str
    dtype: str


@dataclass(frozen=True, slots=True)
class CallState:
    """The global state that changes a call's result."""

    grad: bool = True
    training: bool | None = None  # the innermost module's flag; None outside modules
    autocast: Autocast | None = None
    tf32_matmul: bool = False
    tf32_cudnn: bool = True
    deterministic: bool = False
    default_dtype: str = "torch.float32"
    #: the training step the call was made in (the optimizer steps made before it): a whole-run dump,
    #: without step folders, tells a call's step by it; None where the writer does not record it
    step: int | None = None


@dataclass(slots=True)
class CallSpec:
    """One decoded sidecar line."""

    call: str
    fn: str
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    inplace: int | None = None
    state: CallState = field(default_factory=CallState)
    line: int = field(default=0, compare=False)  # 1-based line number in its sidecar


def calls_path(pkl: str | os.PathLike[str]) -> Path:
    pkl = Path(pkl)
    return pkl.with_name(pkl.stem + SUFFIX)


# -- encoding -------------------------------------------------------------------------------------

Convert = Callable[[Any], Any]


def _float(v: float) -> dict[str, Any]:
    if math.isfinite(v):
        return {"value": v}
    return {"float": "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")}


def _part(v: float) -> float | str:
    return v if math.isfinite(v) else _float(v)["float"]


def _type_name(value: Any) -> str:
    t = type(value)
    return f"{t.__module__}.{t.__qualname__}"


def encode_arg(value: Any, convert: Convert | None = None, depth: int = 0) -> dict[str, Any]:
    """The ARG of a value. ``convert`` maps values this module does not know (torch's) to ones it
    does (:class:`Dtype`, :class:`Size`...); what neither knows becomes :class:`Opaque`."""
    t = type(value)
    if value is None or t is bool or t is int or t is str:
        return {"value": value}
    if t is float:
        return _float(value)
    if depth >= MAX_DEPTH:
        return {"opaque": "nested too deeply"}
    if t is list or t is tuple:
        return {t.__name__: [encode_arg(v, convert, depth + 1) for v in value]}
    if t is dict:
        if all(type(k) is str for k in value):
            return {"dict": {k: encode_arg(v, convert, depth + 1) for k, v in value.items()}}
        return {"opaque": "dict with keys that are not strings"}
    known = _encode_known(value)
    if known is not None:
        return known
    if convert is not None:
        converted = convert(value)
        if converted is not None and type(converted) is not t:
            return encode_arg(converted, convert, depth)
    return _encode_subclass(value, convert, depth)


#: The small classes of a decoded line, by the tag that encodes each and the attribute it holds.
_NAMED = (
    (Dtype, "dtype", "name"),
    (Device, "device", "name"),
    (TorchConst, "torch", "name"),
    (Opaque, "opaque", "type_name"),
)


def _encode_tensor(value: TensorArg) -> dict[str, Any]:
    if value.entry is not None:
        return {"tensor": value.entry}
    encoded: dict[str, Any] = {
        "tensor": None,
        "dtype": value.dtype,
        "shape": None if value.shape is None else list(value.shape),
    }
    if value.data is not None:
        encoded["data"] = value.data
    return encoded


def _encode_known(value: Any) -> dict[str, Any] | None:
    if isinstance(value, TensorArg):
        return _encode_tensor(value)
    for cls, tag, attr in _NAMED:
        if isinstance(value, cls):
            return {tag: getattr(value, attr)}
    if isinstance(value, Size):
        return {"size": list(value.dims)}
    if isinstance(value, complex):
        return {"complex": [_part(value.real), _part(value.imag)]}
    if isinstance(value, slice):
        parts = (value.start, value.stop, value.step)
        if all(p is None or type(p) is int for p in parts):
            return {"slice": list(parts)}
        return {"opaque": "slice"}
    if value is Ellipsis:
        return {"ellipsis": True}
    return None


def _encode_subclass(value: Any, convert: Convert | None, depth: int) -> dict[str, Any]:
    """Subclasses of the plain types (an IntEnum, numpy's float64, a namedtuple) as the plain type, and
    numpy's other number scalars (``x * np.float32(0.5)``, ``view(np.int64(3), -1)``) as the Python
    number they hold: torch takes them as it takes that number."""
    if isinstance(value, np.generic) and value.dtype.kind in "biuf":
        return encode_arg(value.item(), convert, depth)
    if isinstance(value, bool):
        return {"value": bool(value)}
    if isinstance(value, int):
        return {"value": int(value)}
    if isinstance(value, float):
        return _float(float(value))
    if isinstance(value, str):
        return {"value": str(value)}
    for plain in (list, tuple, dict):
        if isinstance(value, plain):
            return encode_arg(plain(value), convert, depth)
    return {"opaque": _type_name(value)}


def _encode_state(state: CallState) -> dict[str, Any]:
    autocast = state.autocast
    return {
        "grad": state.grad,
        "training": state.training,
        "autocast": None if autocast is None else {"device": autocast.device, "dtype": autocast.dtype},
        "allow_tf32": {"matmul": state.tf32_matmul, "cudnn": state.tf32_cudnn},
        "deterministic": state.deterministic,
        "default_dtype": state.default_dtype,
        **({} if state.step is None else {"step": state.step}),
    }


def encode_call_line(spec: CallSpec, convert: Convert | None = None) -> str:
    """One sidecar line (without its newline); ``convert`` as in :func:`encode_arg`."""
    return json.dumps(
        {
            "call": spec.call,
            "fn": spec.fn,
            "args": [encode_arg(a, convert) for a in spec.args],
            "kwargs": {k: encode_arg(v, convert) for k, v in spec.kwargs.items()},
            "inplace": spec.inplace,
            "state": _encode_state(spec.state),
        },
        allow_nan=False,
    )


# -- decoding -------------------------------------------------------------------------------------


class _Bad(ValueError):
    """A line that is not a call spec (the message says why)."""


def _int_list(value: Any, what: str, non_negative: bool) -> tuple[int, ...]:
    if (
        not isinstance(value, list)
        or len(value) > MAX_DIMS
        or not all(type(d) is int and (d >= 0 or not non_negative) for d in value)
    ):
        raise _Bad(f"{what} must be a list of at most {MAX_DIMS} integers")
    if non_negative and math.prod(value) > MAX_NUMEL:
        raise _Bad(f"{what} is too large to be a tensor's")
    return tuple(value)


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise _Bad(f"{what} must be a non-empty string")
    return value


def _number(value: Any) -> float:
    if isinstance(value, str) and value in _NON_FINITE:
        return _NON_FINITE[value]
    if type(value) in (int, float):
        return float(value)
    raise _Bad('a complex part must be a number or "inf", "-inf", "nan"')


class _ArgDecoder:
    """Decodes the ARGs of one line, counting them against :data:`MAX_ARGS`."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, arg: Any, depth: int = 0) -> Any:
        self.count += 1
        if self.count > MAX_ARGS:
            raise _Bad(f"more than {MAX_ARGS} arguments")
        if depth > MAX_DEPTH:
            raise _Bad(f"arguments nested deeper than {MAX_DEPTH}")
        if not isinstance(arg, dict) or not arg:
            raise _Bad('an argument must be a tagged object such as {"value": 1}')
        tag = next(iter(arg))
        decode = _DECODERS.get(tag)
        if decode is None:
            raise _Bad(f"unknown argument tag {tag!r}")
        return decode(self, arg[tag], arg, depth)

    def items(self, value: Any, depth: int) -> list[Any]:
        if not isinstance(value, list):
            raise _Bad("a list or tuple argument must hold a JSON list")
        return [self(v, depth + 1) for v in value]


def _file_name(value: Any) -> bool:
    """Whether a sidecar's name of a file (an entry's, a data file's) stays inside the dump folder."""
    return isinstance(value, str) and safe_name(value) and not holds_lone_surrogate(value)


def _tensor(dec: _ArgDecoder, entry: Any, arg: dict[str, Any], depth: int) -> TensorArg:
    if entry is not None:
        if not _file_name(entry):
            raise _Bad("a tensor's entry name must be a file name inside the dump folder")
        return TensorArg(entry)
    dtype, shape, data = arg.get("dtype"), arg.get("shape"), arg.get("data")
    if dtype is not None and not isinstance(dtype, str):
        raise _Bad("a tensor's dtype must be a string")
    dims = None if shape is None else _int_list(shape, "a tensor's shape", True)
    if data is not None:
        if not _file_name(data) or not data.endswith(".npy"):
            raise _Bad("a tensor's data must be the name of an .npy file inside the dump folder")
        if dtype is None or dims is None:
            raise _Bad("a tensor with data must give its dtype and shape")
    return TensorArg(None, dtype, dims, data)


def _value(dec: _ArgDecoder, v: Any, arg: dict[str, Any], depth: int) -> Any:
    if v is not None and type(v) not in (bool, int, float, str):
        raise _Bad("a value must be null, a boolean, a number or a string")
    return v


def _non_finite(dec: _ArgDecoder, v: Any, arg: dict[str, Any], depth: int) -> float:
    if not isinstance(v, str) or v not in _NON_FINITE:
        raise _Bad('a float must be "inf", "-inf" or "nan"')
    return _NON_FINITE[v]


def _complex(dec: _ArgDecoder, v: Any, arg: dict[str, Any], depth: int) -> complex:
    if not isinstance(v, list) or len(v) != 2:
        raise _Bad("a complex must be [real, imaginary]")
    return complex(_number(v[0]), _number(v[1]))


def _slice(dec: _ArgDecoder, v: Any, arg: dict[str, Any], depth: int) -> slice:
    if not isinstance(v, list) or len(v) != 3 or not all(p is None or type(p) is int for p in v):
        raise _Bad("a slice must be [start, stop, step] of integers or nulls")
    return slice(*v)


def _ellipsis(dec: _ArgDecoder, v: Any, arg: dict[str, Any], depth: int) -> Any:
    return Ellipsis


def _dict(dec: _ArgDecoder, v: Any, arg: dict[str, Any], depth: int) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise _Bad("a dict argument must hold a JSON object")
    return {k: dec(x, depth + 1) for k, x in v.items()}


def _named(kind: Callable[[str], Any]) -> Callable[[_ArgDecoder, Any, dict[str, Any], int], Any]:
    def decode(dec: _ArgDecoder, v: Any, arg: dict[str, Any], depth: int) -> Any:
        return kind(_text(v, "a named value"))

    return decode


_DECODERS: dict[str, Callable[[_ArgDecoder, Any, dict[str, Any], int], Any]] = {
    "tensor": _tensor,
    "value": _value,
    "float": _non_finite,
    "complex": _complex,
    "slice": _slice,
    "ellipsis": _ellipsis,
    "dict": _dict,
    "list": lambda dec, v, arg, depth: dec.items(v, depth),
    "tuple": lambda dec, v, arg, depth: tuple(dec.items(v, depth)),
    "size": lambda dec, v, arg, depth: Size(_int_list(v, "a size", False)),
    "dtype": _named(Dtype),
    "device": _named(Device),
    "torch": _named(TorchConst),
    "opaque": _named(Opaque),
}


def _flag(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise _Bad(f"state {what} must be true or false")
    return value


def _state(value: Any) -> CallState:
    """The state object; a key left out takes its default (an older or newer writer)."""
    if not isinstance(value, dict):
        raise _Bad("state must be a JSON object")
    d = CallState()
    autocast = value.get("autocast")
    if autocast is not None:
        if not isinstance(autocast, dict):
            raise _Bad('state autocast must be null or {"device": ..., "dtype": ...}')
        autocast = Autocast(
            _text(autocast.get("device"), "autocast device"), _text(autocast.get("dtype"), "autocast dtype")
        )
    tf32 = value.get("allow_tf32", {})
    if not isinstance(tf32, dict):
        raise _Bad('state allow_tf32 must be {"matmul": ..., "cudnn": ...}')
    training = value.get("training")
    step = value.get("step")
    if step is not None and (type(step) is not int or step < 0):
        raise _Bad("state step must be null or a whole number from 0 up")
    return CallState(
        grad=_flag(value.get("grad", d.grad), "grad"),
        training=None if training is None else _flag(training, "training"),
        autocast=autocast,
        tf32_matmul=_flag(tf32.get("matmul", d.tf32_matmul), "allow_tf32.matmul"),
        tf32_cudnn=_flag(tf32.get("cudnn", d.tf32_cudnn), "allow_tf32.cudnn"),
        deterministic=_flag(value.get("deterministic", d.deterministic), "deterministic"),
        default_dtype=_text(value.get("default_dtype", d.default_dtype), "default_dtype"),
        step=step,
    )


def decode_call(value: Any, line: int = 0) -> CallSpec:
    """A decoded JSON line as a :class:`CallSpec`; raises ValueError saying why it is not one."""
    if not isinstance(value, dict):
        raise _Bad("a call line must be a JSON object")
    call = _text(value.get("call"), "call")
    fn = _text(value.get("fn"), "fn")
    if not _FN_RE.fullmatch(fn):
        raise _Bad("fn must be a dotted Python name")
    args, kwargs = value.get("args", []), value.get("kwargs", {})
    if not isinstance(args, list) or not isinstance(kwargs, dict):
        raise _Bad("args must be a list and kwargs an object")
    dec = _ArgDecoder()
    spec = CallSpec(
        call,
        fn,
        [dec(a) for a in args],
        {k: dec(v) for k, v in kwargs.items()},
        state=_state(value.get("state", {})),
        line=line,
    )
    inplace = value.get("inplace")
    if inplace is not None and not (type(inplace) is int and 0 <= inplace < len(spec.args)):
        raise _Bad("inplace must be null or the index of a positional argument")
    spec.inplace = inplace
    return spec


def _from_value(value: Any, line: int) -> tuple[str, CallSpec] | BadLine:
    try:
        spec = decode_call(value, line)
    except ValueError as e:
        return BadLine(line, NotACallLine(error=str(e)), short(value))
    except RecursionError:
        return BadLine(line, Malformed.DEEP_CALL_LINE)
    return spec.call, spec


def _shown_arg(arg: Any) -> Any:
    if isinstance(arg, TensorArg) and arg.entry is not None:
        return TensorArg(shown(arg.entry))
    if isinstance(arg, (list, tuple)):
        return type(arg)(_shown_arg(a) for a in arg)
    if isinstance(arg, dict):
        return {shown(k): _shown_arg(v) for k, v in arg.items()}
    return shown(arg) if isinstance(arg, str) else arg


def _shown(item: tuple[str, CallSpec]) -> tuple[str, CallSpec]:
    """A spec from bytes that are not UTF-8, as the pkl reader shows its records: a tensor's entry
    is the shown name of its pkl record (whose data file keeps the exact bytes)."""
    spec = item[1]
    spec.call = shown(spec.call)
    spec.args = _shown_arg(spec.args)
    spec.kwargs = _shown_arg(spec.kwargs)
    return spec.call, spec


class CallFollower(KeyedFollower[CallSpec]):
    """Incremental reader of a call sidecar; malformed lines are kept in ``bad`` and skipped."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__(path, _from_value, _shown)

    @property
    def specs(self) -> dict[str, CallSpec]:
        return self.items


def read_calls(pkl: str | os.PathLike[str]) -> CallFollower:
    """Every spec of a finished dump's call sidecar (none when it has no sidecar)."""
    follower = CallFollower(calls_path(pkl))
    follower.read(final=True)
    return follower
