"""msprobe's own ``Result`` and ``Err_message`` (msprobe 26.x, ``indicator_analysis``), so that the
msprobe CSV carries its values and not ours (docs/compare.md#result-and-err_message).

msprobe judges a call's rows together: the rows of one dump.json entry (a call; a module's
``parameters_grad`` is an entry of its own), the outputs being the rows whose name holds
``.output.`` and the rest its inputs. Each check below may raise rows to ``warning`` or ``error``
and add its message; a row keeps the worst level and every message, in the order of the checks.
The checks read the cells as written (the same values msprobe's rule reads), so this module knows
nothing of metrics.

- tensor mode: NaN/Inf, One Thousandth, requires_grad, scalar, dtype, shape, Cosine;
- statistics mode: NaN/Inf, NormRelativeErr, requires_grad, scalar, dtype, shape, the norm ratio;
- md5 mode: the checksums.

Where we deliberately judge otherwise, the row's Err_message says so in a note starting
:data:`NOTE`; rows msprobe never writes (bench-only, not yet compared) are ours alone.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ptdbg_tui.compare.metrics.cells import MSG_PENDING
from ptdbg_tui.compare.model import Row, Status
from ptdbg_tui.formats.naming import OUTPUT, PARAMS_GRAD

TENSOR, STATISTICS, MD5 = "tensor", "statistics", "md5"
PASS, WARNING, ERROR = "pass", "warning", "error"
_RANK = {PASS: 0, WARNING: 1, ERROR: 2}
NA = "N/A"
#: The start of our own notes in an Err_message.
NOTE = "ptdbg-tui: "

#: Calls msprobe does not judge at all, and those whose inputs it does not judge (its
#: ``all_ignore_set`` and ``input_ignore_set``), by API name.
IGNORE_ALL = frozenset(
    {
        "empty",
        "empty_like",
        "numpy",
        "to",
        "__setitem__",
        "empty_with_format",
        "new_empty_strided",
        "new_empty",
        "empty_strided",
    }
)
IGNORE_INPUTS = frozenset(
    {"_reduce_scatter_base", "_all_gather_base", "all_to_all_single", "batch_isend_irecv"}
)
#: Dtypes msprobe pairs although they differ (``DTYPE_MATCH_GROUPS``); other differing dtypes it
#: leaves unmatched.
DTYPE_GROUPS = (
    frozenset({"torch.float16", "torch.float32", "torch.float64", "torch.bfloat16"}),
    frozenset({"float16", "float32", "float64", "bfloat16"}),
)

# Thresholds and messages of msprobe's checks, as it prints them.
COS_IN, COS_DROP = 0.9, 0.1
MSG_COSINE = f"warning: The input/parameters of Cosine > {COS_IN}, and input/parameters - output > {COS_DROP}"
RATIO_IN, RATIO_OUT = 0.9, 0.1
#: (sic: the output threshold is 0.1)
MSG_RATIO = "error: The input/parameters of One Thousandth Err Ratio > 0.9 while the output < 0.6."
NORM_IN, NORM_OUT, NORM_TIMES, NORM_FROM_ZERO = 0.1, 0.5, 10, 0.1
MSG_NORM = f"error: The NormRelativeErr of output is greater than {NORM_OUT}."
MSG_NORM_TIMES = f"warning: The norm relative error of output is {NORM_TIMES} times that of input."
MSG_INF_NAN = "error: There is nan/inf/-inf in the maximum or minimum value of NPU."
MSG_GRAD = "error: The Required_Grad of NPU and Bench are inconsistent"
MSG_SCALARS = "error: The scalar parameters of NPU and Bench are inconsistent."
MSG_DTYPE = "error: The dtype of NPU and Bench are inconsistent."
MSG_SHAPE = "error: The shape of NPU and Bench are inconsistent."
MSG_CRC = "error: The CRC-32 value of NPU differs from that of the bench."
MSG_CRC_UNMATCHED = "warning: The parameter of NPU does not match the bench."


@dataclass(slots=True)
class _Line:
    """One CSV line as msprobe's rule reads it, and its verdict so far."""

    row: Row
    cells: Mapping[str, str]
    level: str = PASS
    messages: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def flag(self, level: str, message: str) -> None:
        if _RANK[level] > _RANK[self.level]:
            self.level = level
        self.messages.append(message)

    def __getitem__(self, column: str) -> str:
        return self.cells[column]

    @property
    def unmatched(self) -> bool:
        return self.cells["Bench Name"] in ("", NA)


@dataclass(slots=True)
class _Call:
    """The lines of one call, split as msprobe splits them."""

    inputs: list[_Line] = field(default_factory=list)
    outputs: list[_Line] = field(default_factory=list)
    api: str = ""  # the API's name, from its first input (msprobe's ignore lists)

    @property
    def ignore_all(self) -> bool:
        return self.api in IGNORE_ALL

    @property
    def ignore_inputs(self) -> bool:
        return self.ignore_all or self.api in IGNORE_INPUTS

    @property
    def judged(self) -> list[_Line]:
        """The lines the per-row checks look at."""
        if self.ignore_all:
            return []
        return self.outputs if self.ignore_inputs else self.inputs + self.outputs


# --- cell values as msprobe reads them ------------------------------------------------------------


def _float(cell: str) -> float | None:
    """A numeric metric cell (tensor mode); ``None`` for text and NaN, which msprobe skips."""
    try:
        value = float(cell)
    except ValueError:
        return None
    return None if math.isnan(value) else value


def _percent(cell: str) -> float | None:
    """A ``"x%"`` cell as a fraction (statistics mode); msprobe skips every other text."""
    return _fraction(cell) if cell.endswith("%") else None


def _fraction(cell: str) -> float:
    """msprobe's ``str2float``: ``"12.5%"`` → 0.125, ``"inf"`` → inf, text → 0."""
    try:
        return float(cell.strip("%")) / 100
    except ValueError:
        return 0.0


def _extreme(
    lines: Sequence[_Line], column: str, parse: Callable[[str], float | None], lowest: bool
) -> float:
    """The least (or greatest) value of a column over lines, from 1.0 (or 0.0) when none has one."""
    values = [v for v in (parse(line[column]) for line in lines) if v is not None]
    return min(values, default=1.0) if lowest else max(values, default=0.0)


def _inf_or_nan(cell: str) -> bool:
    return cell.strip().lower() in ("inf", "-inf", "nan")


def _same_value(a: str, b: str) -> bool:
    x, y = _float(a), _float(b)
    return a == b if x is None or y is None else x == y


# --- the checks -----------------------------------------------------------------------------------


def _inf_nan(call: _Call) -> None:
    for line in call.judged:
        if _inf_or_nan(line["Bench max"]) or _inf_or_nan(line["Bench min"]):
            continue
        if _inf_or_nan(line["NPU max"]) or _inf_or_nan(line["NPU min"]):
            line.flag(ERROR, MSG_INF_NAN)


def _one_thousandth(call: _Call) -> None:
    if call.ignore_inputs or not call.outputs:
        return
    column = "One Thousandth Err Ratio"
    if (
        _extreme(call.inputs, column, _float, lowest=True) > RATIO_IN
        and _extreme(call.outputs, column, _float, lowest=True) < RATIO_OUT
    ):
        call.outputs[0].flag(ERROR, MSG_RATIO)


def _norm_relative(call: _Call) -> None:
    if call.ignore_inputs:
        return
    if abs(_extreme(call.inputs, "NormRelativeErr", _percent, lowest=False)) < NORM_IN:
        for line in call.outputs:
            if abs(_fraction(line["NormRelativeErr"])) > NORM_OUT:
                line.flag(ERROR, MSG_NORM)


def _unrecorded_grad(row: Row) -> str | None:
    """The side whose tool records no requires_grad (ours), where the other records it."""
    for side, rec in (("NPU", row.npu), ("bench", row.bench)):
        if rec is not None and rec.requires_grad is None and not rec.is_scalar and not rec.is_none:
            return side
    return None


def _requires_grad(call: _Call) -> None:
    for line in call.judged:
        npu, bench = line["NPU Requires_grad"], line["Bench Requires_grad"]
        if line.unmatched or npu in ("", "False") or bench in ("", "False") or npu == bench:
            continue  # msprobe skips a False side: only True against N/A gets this far
        side = _unrecorded_grad(line.row)
        if side is None:
            line.flag(ERROR, MSG_GRAD)
        else:
            line.notes.append(
                f"{NOTE}the {side} dump does not record requires_grad; msprobe's rule would say {MSG_GRAD!r}"
            )


def _scalars(call: _Call) -> None:
    if call.ignore_inputs:
        return
    for line in call.inputs:
        npu, bench = line["NPU Dtype"], line["Bench Dtype"]
        if line.unmatched or "class" not in npu or "class" not in bench or line["NPU Tensor Shape"] != "[]":
            continue
        if not _same_value(line["NPU max"], line["Bench max"]):
            line.flag(ERROR, MSG_SCALARS)


def _paired_by_msprobe(npu: str, bench: str) -> bool:
    return npu == bench or any(npu in g and bench in g for g in DTYPE_GROUPS)


def _dtype(call: _Call) -> None:
    for line in call.judged:
        bench_name = line["Bench Name"]
        if line.unmatched or line["NPU Name"] == NA or "qkv" in bench_name or "gate_up" in bench_name:
            continue
        npu, bench = line["NPU Dtype"], line["Bench Dtype"]
        if npu and bench and npu != bench:
            line.flag(ERROR, MSG_DTYPE)
            if not _paired_by_msprobe(npu, bench):
                line.notes.append(
                    f"{NOTE}msprobe does not pair {npu} with {bench}: it writes this row unmatched"
                )


def _shape(call: _Call) -> None:
    for line in call.judged:
        if line.unmatched or line["NPU Tensor Shape"] == line["Bench Tensor Shape"]:
            continue
        if line.row.transposed:
            line.notes.append(
                f"{NOTE}compared transposed (linear's weight gradient, which one side's tool "
                f"records transposed); msprobe's rule would say {MSG_SHAPE!r}"
            )
        else:
            line.flag(ERROR, MSG_SHAPE)


def _norm_ratio(call: _Call) -> None:
    if call.ignore_inputs or not call.outputs:
        return
    norm_in = abs(_extreme(call.inputs, "NormRelativeErr", _percent, lowest=False))
    norm_out = abs(_extreme(call.outputs, "NormRelativeErr", _percent, lowest=False))
    if norm_out > NORM_FROM_ZERO if norm_in == 0 else norm_out / norm_in > NORM_TIMES:
        call.outputs[0].flag(WARNING, MSG_NORM_TIMES)


def _cosine(call: _Call) -> None:
    if call.ignore_inputs or not call.outputs:
        return
    cos_in = _extreme(call.inputs, "Cosine", _float, lowest=True)
    cos_out = _extreme(call.outputs, "Cosine", _float, lowest=True)
    if cos_in > COS_IN and cos_in - cos_out > COS_DROP:
        call.outputs[0].flag(WARNING, MSG_COSINE)


def _checksums(call: _Call) -> None:
    for line in call.judged:
        npu, bench = line["NPU MD5"], line["BENCH MD5"]
        if npu == bench:
            continue
        if {npu, bench} & {NA, "Nan", ""}:
            line.flag(WARNING, MSG_CRC_UNMATCHED)
        elif line.row.transposed:  # checksums of two layouts: no comparison, as msprobe's N/A
            line.flag(WARNING, MSG_CRC_UNMATCHED)
            line.notes.append(
                f"{NOTE}the NPU tensor is the bench's transposed (linear's weight gradient, which one side's "
                f"tool records transposed): their checksums differ whatever the data; msprobe's rule "
                f"would say {MSG_CRC!r}"
            )
        else:
            line.flag(ERROR, MSG_CRC)


CHECKS: dict[str, tuple[Callable[[_Call], None], ...]] = {
    TENSOR: (_inf_nan, _one_thousandth, _requires_grad, _scalars, _dtype, _shape, _cosine),
    STATISTICS: (_inf_nan, _norm_relative, _requires_grad, _scalars, _dtype, _shape, _norm_ratio),
    MD5: (_checksums,),
}


# --- calls and notes ------------------------------------------------------------------------------


def _calls(lines: Sequence[_Line]) -> list[_Call]:
    """The NPU rows by call, each split into inputs and outputs as msprobe splits them."""
    calls: dict[object, _Call] = {}
    for line in lines:
        rec = line.row.npu
        if rec is None:
            continue
        e = rec.entry
        key = (e.api, e.index, e.direction, e.kind == PARAMS_GRAD) if e is not None else rec.name
        call = calls.setdefault(key, _Call())
        if (e is not None and e.kind == OUTPUT) or ".output." in rec.name:
            call.outputs.append(line)
        else:
            if not call.inputs:
                call.api = e.op.split(".")[0] if e is not None else ""
            call.inputs.append(line)
    return list(calls.values())


def _ours_alone(line: _Line, mode: str) -> None:
    """A bench-only row, which msprobe leaves out: judged as msprobe judges an NPU-only one."""
    if mode == MD5:
        line.flag(WARNING, MSG_CRC_UNMATCHED)
    line.notes.append(f"{NOTE}present in the bench dump only; msprobe leaves such rows out")


def _row_notes(line: _Line) -> None:
    """What msprobe's rule does not see: a tensor we could not read, names paired although they differ."""
    r = line.row.result
    if r is not None and r.status is Status.ERROR:
        line.notes.append(f"{NOTE}not compared: {r.message}")
    elif r is not None and r.status is Status.PASS and line.level != PASS and r.message:
        # we pass what msprobe flags, and say why (an in-place op's overwritten input: not data)
        line.notes.append(f"{NOTE}{r.message[:1].lower()}{r.message[1:]}")
    if line.row.fuzzy and line.row.matched:
        line.notes.append(f"{NOTE}paired by ptdbg-tui's matching although the names differ")


def msprobe_verdicts(
    rows: Sequence[Row], cells: Sequence[Mapping[str, str]], mode: str
) -> list[tuple[str, str]]:
    """``(Result, Err_message)`` of each row, by msprobe's rule for ``mode``; ``cells`` are the rows'
    other cells by column name."""
    lines = [_Line(row, c) for row, c in zip(rows, cells, strict=True)]
    for call in _calls(lines):
        for check in CHECKS[mode]:
            check(call)
    out = []
    for line in lines:
        if line.row.npu is None:
            _ours_alone(line, mode)
        _row_notes(line)
        if line.row.result is None:
            out.append(("", json.dumps([MSG_PENDING])))
        else:
            out.append((line.level, json.dumps(line.messages + line.notes, ensure_ascii=False)))
    return out
