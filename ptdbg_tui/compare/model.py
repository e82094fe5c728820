"""What a comparison produces: rows (one per CSV line / tree leaf), their results and statuses.

These are the types shared by the compare functions, the engine and the app.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ptdbg_tui.formats.frozen import quick_frozen, quick_pickle
from ptdbg_tui.formats.records import StackRecord, TensorRecord

if TYPE_CHECKING:
    from ptdbg_tui.compare.reasons import Reason


class Status(enum.Enum):
    """A row's state for the UI; the CSV keeps the original's ``Accuracy Reached or Not``."""

    PASS = "pass"
    PENDING = "pending"  # not compared yet
    UNMATCHED = "unmatched"  # present on one side only
    WARN = "warn"  # compared, but the verdict is not a clean pass (Nan, fuzzy, dtype mismatch)
    ERROR = "error"  # could not be compared (missing/truncated npy, unreadable data)
    FAIL = "fail"

    @property
    def severity(self) -> int:
        return _SEVERITY[self]

    @property
    def symbol(self) -> str:
        return _SYMBOL[self]


_SEVERITY = {s: i for i, s in enumerate(Status)}
_SYMBOL = {
    Status.PASS: "✔",
    Status.PENDING: "…",
    Status.UNMATCHED: "∅",
    Status.WARN: "!",
    Status.ERROR: "⚠",
    Status.FAIL: "✘",
}


def worst(statuses: Iterable[Status]) -> Status:
    """The most severe status (PASS for none)."""
    return max(statuses, key=_SEVERITY.__getitem__, default=Status.PASS)


@quick_pickle
@quick_frozen
class ErrorMeasures:
    """What the diagnosis needs of one compared tensor pair (over positions finite on both sides).

    ``rel`` is ‖npu − bench‖₂ / ‖bench‖₂; ``robust`` the same with the few largest |Δ| left out, so that a
    handful of elements flipped at a ReLU or max boundary cannot dominate it. ``floor`` is the unit roundoff
    of the less precise of the two dtypes: the error rounding alone may leave.
    """

    rel: float
    robust: float
    npu_norm: float
    bench_norm: float
    numel: int
    floor: float
    new_nonfinite: int = 0  # NaN/Inf on the NPU where the bench is finite
    lost_nonfinite: int = 0  # NaN/Inf on the bench where the NPU is finite
    exact: bool = False  # integer or bool data: any difference is a real one
    from_stats: bool = False  # estimated from the recorded statistics (no tensor data)
    sign_flips: int = 0  # elements positive on one side only (where a ReLU's mask differs); 0 unknown

    @property
    def npu_zero(self) -> bool:
        """The NPU tensor is all zeros where the bench one is not."""
        return self.npu_norm == 0 and self.bench_norm > 0 and not self.new_nonfinite

    @property
    def abs_err(self) -> float:
        """‖npu − bench‖₂ (estimated from the relative error)."""
        return self.rel * self.bench_norm if math.isfinite(self.rel) else self.npu_norm


class FloatReprs(tuple[str, ...]):
    """A row's summary diff cells that are each ``repr`` of a float (every row whose statistics agree):
    what the CSV prints of the floats they are, as they are (:func:`~.report.csv_ptdbg.csv_columns`)."""

    __slots__ = ()


@quick_pickle
@dataclass(slots=True)
class Result:
    """Outcome of comparing one row: the CSV cells plus what the UI needs to explain it."""

    #: Five metric cells exactly as the CSV prints them: Cosine, MaxAbsErr, MaxRelativeErr,
    #: One Thousandth Err Ratio, Five Thousandths Err Ratio (full mode), or Max/Min/Mean/L2norm
    #: diff (summary mode, four cells).
    cells: tuple[str, ...]
    accuracy: str  # "Yes" | "No" | "Nan" | "Unmatched"; "" in summary mode
    message: str  # Err_message (every message, unlike the original which overwrites some)
    status: Status
    reason: Reason = ""  # why it is not a pass, naming the threshold (report.metric_words says it)
    cosine: float | None = None
    max_abs: float | None = None
    max_rel: float | None = None
    #: max |npu − bench| where the bench is 0, where MaxRelativeErr divides by an eps instead: msprobe's
    #: eps is another than the original's (float32's for float16 data), its CSV rescales this part.
    max_abs_bench_zero: float = 0.0
    ratio_1e3: float | None = None  # fraction of elements with rel err < 0.001
    ratio_5e3: float | None = None
    worst_index: tuple[int, ...] | None = None  # where |npu - bench| is largest
    worst_npu: float | None = None
    worst_bench: float | None = None
    histogram: tuple[int, ...] = ()  # element counts of |npu - bench| per bin (16× wide; see the edges)
    histogram_edges: tuple[float, ...] = ()
    errors: ErrorMeasures | None = None  # None when nothing was compared (shapes differ, unreadable …)
    euc_dist: float | None = None  # ‖npu − bench‖₂ (msprobe's EucDist), when the tensors were compared
    missing_data: bool = False  # an ERROR because a tensor file does not exist (yet, in a live dump)


def same_shape(npu: TensorRecord, bench: TensorRecord, transposed: bool = False) -> bool:
    """The records' shapes agree (``transposed``: the NPU's reversed, see :attr:`Row.transposed`)."""
    if transposed:
        return list(reversed(npu.shape)) == list(bench.shape)
    return bool(npu.shape_raw == bench.shape_raw)


@quick_pickle
@dataclass(slots=True, eq=False)
class Row:
    """One compared entry: an NPU record, its bench record, or both."""

    npu: TensorRecord | None
    bench: TensorRecord | None
    fuzzy: bool = False  # names differ (fuzzy or aligned match)
    stack: StackRecord | None = None  # NPU stack printed on this row (first row of a call)
    result: Result | None = None  # None while pending
    seq: int = 0  # position in output (execution) order
    noise: bool = False  # a dump tool's own doing, not the model's (the original's detach of a statistic)
    #: The NPU record holds the bench tensor transposed (a 2-D one: linear's weight gradient, which the
    #: tools that record in autograd order see transposed); compared as the bench's shape.
    transposed: bool = False

    @property
    def record(self) -> TensorRecord:
        rec = self.npu or self.bench
        assert rec is not None
        return rec

    @property
    def name(self) -> str:
        return self.record.name

    @property
    def matched(self) -> bool:
        return self.npu is not None and self.bench is not None

    @property
    def shapes_agree(self) -> bool:
        """Both sides hold a tensor of the same shape, once the NPU one is transposed where it must be."""
        return (
            self.npu is not None
            and self.bench is not None
            and same_shape(self.npu, self.bench, self.transposed)
        )

    @property
    def status(self) -> Status:
        if self.result is not None:
            return self.result.status
        return Status.PENDING if self.matched else Status.UNMATCHED


def rows_by_call(rows: Sequence[Row]) -> dict[str, list[Row]]:
    """The rows of each call (by its name with its direction), in execution order."""
    by_call: dict[str, list[Row]] = {}
    for r in rows:
        by_call.setdefault(r.record.call, []).append(r)
    return by_call


def side_call(rows: Sequence[Row], side: str, call: str) -> str:
    """The name the NPU's ``call`` has on ``side``: in a mixed pair the bench's tool names it otherwise
    (``Functional.gelu.0.forward`` against ``Functional_gelu_0_forward``), as its paired rows tell."""
    if side == "npu":
        return call
    paired = (r.bench.call for r in rows if r.npu is not None and r.bench is not None and r.npu.call == call)
    return next(paired, call)
