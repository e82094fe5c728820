"""Why a row has its Status (:attr:`ptdbg_tui.compare.model.Result.reason`), as values: the rule that
applied with its figures, the caveats that turn a pass into a warning. The words are
:func:`ptdbg_tui.compare.report.metric_words.reason_text`'s.

A ``str`` where a reason or a caveat is expected is a row's Err_message
(:mod:`ptdbg_tui.compare.metrics.cells`): the message of a row that could not be compared is its reason,
and a message such as a dtype mismatch is a caveat.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, auto
from typing import Any


class Fixed(Enum):
    """A reason without figures."""

    SHAPES_DIFFER = auto()  # the accuracy rule: shapes of NPU and bench differ
    NO_VALUE = auto()  # the accuracy rule: Cosine or MaxAbsErr has no value
    NAN_POSITIONS = auto()  # the accuracy rule: NaN/Inf at different positions
    CHECKSUMS_EQUAL = auto()
    NPU_ONLY = auto()  # the row is in the NPU dump only
    BENCH_ONLY = auto()
    NO_VALUE_EITHER = auto()  # a Python value recorded as none on both sides
    VALUES_EQUAL = auto()  # Python values compared by equality
    NAMES_DIFFER = auto()  # a caveat: paired by a fuzzy or aligned match
    FILE_DTYPE = auto()  # a caveat: a tensor file holds another dtype than recorded


class Rule(Enum):
    """Which of the original's thresholds (``verdict.COS_LOW`` …) decided."""

    BOTH = auto()  # Cosine < COS_LOW and MaxAbsErr > MAE_LOW
    COSINE = auto()  # Cosine < COS_FLOOR
    MAE = auto()  # MaxAbsErr > MAE_CEIL
    MET = auto()  # none: Accuracy Reached


@dataclass(frozen=True, slots=True, kw_only=True)
class Thresholds:
    rule: Rule
    cosine: float
    mae: float


@dataclass(frozen=True, slots=True, kw_only=True)
class CosineUnreadable:
    """The Cosine cell holds no number (``unsupported`` …)."""

    cell: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedShapes:
    """The records' shapes differ (as the dump writes them)."""

    npu: Any
    bench: Any


@dataclass(frozen=True, slots=True, kw_only=True)
class TensorShapes:
    """The tensor files' shapes differ."""

    npu: tuple[int, ...]
    bench: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DtypesDiffer:
    """A caveat: the recorded dtypes differ."""

    npu: str
    bench: str


@dataclass(frozen=True, slots=True, kw_only=True)
class StatDiffers:
    """A statistic differs by ``by`` > ``atol`` + ``rtol`` × ``scale``."""

    name: str
    by: float
    atol: float
    rtol: float
    scale: float


@dataclass(frozen=True, slots=True, kw_only=True)
class StatUnequal:
    """A statistic that must be equal is not (``exact``: of an integer dtype; else a NaN or an Inf)."""

    name: str
    npu: float
    bench: float
    exact: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Agreed:
    """The statistics ``compared`` agree within the tolerance (none compared: no statistics recorded)."""

    compared: tuple[str, ...]
    exact: bool
    atol: float
    rtol: float


@dataclass(frozen=True, slots=True, kw_only=True)
class ChecksumsDiffer:
    npu: str | None
    bench: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ChecksumsDifferBut:
    """The checksums differ, but the statistics agree: ``why``."""

    why: Reason


@dataclass(frozen=True, slots=True, kw_only=True)
class NoVerdict:
    """The original gives no verdict (``why``), with the caveats."""

    why: Reason
    caveats: tuple[Caveat, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Close:
    """No verdict from the original (``why``), but the values agree (``verdict.is_close``): a pass."""

    why: Reason


@dataclass(frozen=True, slots=True, kw_only=True)
class Caveated:
    """A verdict and its caveats (``but``: they turned a pass into a warning)."""

    why: Reason
    caveats: tuple[Caveat, ...]
    but: bool


#: A caveat: a fact that turns a pass into a warning.
Caveat = Fixed | DtypesDiffer | str
#: Why a row has its Status.
Reason = (
    Fixed
    | Thresholds
    | CosineUnreadable
    | RecordedShapes
    | TensorShapes
    | StatDiffers
    | StatUnequal
    | Agreed
    | ChecksumsDiffer
    | ChecksumsDifferBut
    | NoVerdict
    | Close
    | Caveated
    | str
)
