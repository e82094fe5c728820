"""CSV cells of the original compare (docs/compare.md#the-ptdbg-csv): sentinels, messages, number format.

Kept in one place so the metrics, the verdict and the CSV writer print exactly the same strings: the
Err_message cells are the original's words and ours beside them, the CSV's vocabulary (a row's Status
says why in :mod:`ptdbg_tui.compare.reasons`'s values).
"""

from __future__ import annotations

NAN = "Nan"  # the original's sentinel for "no value" (not a float NaN)
NA = "N/A"  # inf/nan positions differ
UNSUPPORTED = "unsupported"  # cosine of a scalar, a 1-element or an empty tensor
SHAPE_UNMATCHED = "shape unmatched"

YES = "Yes"
NO = "No"
UNMATCHED = "Unmatched"

MSG_NO_BENCH = "No bench data matched."
MSG_NO_NPU = "No NPU data matched."
MSG_SCALAR = "This is type of scalar data, can not compare."
MSG_EMPTY = "This is empty data, can not compare."
MSG_SHAPE = "Shape of NPU and bench Tensor do not match. Skipped."
MSG_DTYPE = "Dtype of NPU and bench Tensor do not match."
MSG_INF_NAN = "The position of inf or nan in NPU and bench Tensor do not match."
MSG_COS_NPU_ZERO = "Cannot compare by Cosine Similarity, All the data is Zero in npu dump data."
MSG_COS_BENCH_ZERO = "Cannot compare by Cosine Similarity, All the data is Zero in Bench dump data."
MSG_COS_NAN = "Cannot compare by Cosine Similarity, the dump data has NaN."
MSG_COS_ONE = "Cannot compare by Cosine Similarity, the tensor holds a single element."
MSG_FUZZY = "Fuzzy matching data, the comparison accuracy may be affected."
MSG_PENDING = "Not compared yet."
MSG_TRANSPOSED = (
    "The NPU tensor is the bench's transposed (its tool records linear's weight gradient "
    "transposed): compared transposed."
)

#: Separator of several messages in one Err_message cell (the original kept only one).
MESSAGE_SEP = "; "

#: Cosine values above this print as "1.0" (the original's ``correct_data``).
COS_ONE_ABOVE = 0.99999


def fmt12(value: float) -> str:
    """The original's ``format_value``: 12 decimals."""
    return f"{value:.12f}"


def cosine_cell(cos: float) -> str:
    cell = fmt12(cos)
    return "1.0" if float(cell) > COS_ONE_ABOVE else cell


def no_value_message(side: str) -> str:
    """A Python value one side (``NPU``, ``bench``) records as none."""
    return f"The {side} side records no value here."


def no_data_file_message(side: str) -> str:
    """A tensor without a data file on ``side`` (``NPU``, ``Bench``: the original's words)."""
    return f"{side} does not have data file."


def values_differ_message(npu: object, bench: object) -> str:
    return f"Values differ: NPU {npu!r}, bench {bench!r}."


def overwritten_message(call: str) -> str:
    """The first input of an in-place op that overwrites it."""
    return (
        f"Not compared: {call} overwrites this tensor in place, so what it held "
        "(often uninitialised memory) is not data."
    )


def npy_dtype_message(side: str, dtype: object) -> str:
    """A tensor file of a dtype the metrics cannot compare."""
    return f"Cannot compare the {side} data of npy dtype {dtype}."


def nonfinite_message(count: int) -> str:
    """NaN/Inf at the same positions on both sides, left out of the metrics."""
    return f"NaN/Inf at the same {count} position(s) in NPU and bench Tensor, set to 0 for the metrics."


def join_messages(messages: list[str] | tuple[str, ...]) -> str:
    return MESSAGE_SEP.join(m for m in messages if m)
