"""CSV cells of the original compare (docs/compare.md#the-ptdbg-csv): sentinels, messages, number format.

Kept in one place so the metrics, the verdict and the CSV writer print exactly the same strings.
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


def join_messages(messages: list[str] | tuple[str, ...]) -> str:
    return MESSAGE_SEP.join(m for m in messages if m)
