"""What the comparison knows of torch ops by name, shared by the diagnosis and the replay.

Names are the dump's op names (``relu_``, ``__mul__``, ``dropout``); :func:`op_name` drops the marks of
an in-place call or an operator so that ``relu_`` and ``relu`` are one op.
"""

from __future__ import annotations

from functools import lru_cache

from ptdbg_tui.formats.dialects import DROPOUTS


@lru_cache(maxsize=4096)
def op_name(op: str) -> str:
    """``relu_`` (in place) and ``__gt__`` (an operator) as ``relu`` and ``gt`` (cached: the diagnosis
    asks it of every call several times)."""
    return op.lower().strip("_")


def in_place(op: str) -> bool:
    """Whether the op writes its first argument by its name: ``add_``, ``__iadd__``; not ``__add__``."""
    if op.startswith("__") and op.endswith("__"):
        return op[2:].startswith("i") and op[3:-2] in _IN_PLACE_OPERATORS
    return op.endswith("_")


#: Operators whose ``__i<op>__`` form writes its left operand.
_IN_PLACE_OPERATORS = frozenset(
    {
        "add",
        "sub",
        "mul",
        "matmul",
        "truediv",
        "floordiv",
        "div",
        "mod",
        "pow",
        "and",
        "or",
        "xor",
        "lshift",
        "rshift",
    }
)


#: Ops whose outputs are random draws (by :func:`op_name`): they differ between devices unless the
#: generators match, and no replay draws the same numbers without the generator's state.
RANDOM_OPS = frozenset(
    {
        "rand",
        "randn",
        "randint",
        "rand_like",
        "randn_like",
        "randint_like",
        "randperm",
        "normal",
        "uniform",
        "bernoulli",
        "multinomial",
        "poisson",
        "random",
        "exponential",
        "geometric",
        "cauchy",
        "log_normal",
        "rrelu",
        "gumbel_softmax",
        "native_dropout",
        "fused_dropout",
    }
    | DROPOUTS
)

#: Ops whose output's shape follows the values of a floating-point input (which elements are non-zero,
#: which are unique): inputs that differ at all may change it, with no fault.
DATA_SHAPED = frozenset({"nonzero", "argwhere", "where", "unique", "unique_consecutive"})

#: Ops whose result does not depend on what their first argument held: they overwrite it
#: (``nn.Linear``'s init draws ``uniform_`` over ``torch.empty``: uninitialised memory, never data;
#: a collective's output buffers, often ``torch.empty_like``).
OVERWRITING_OPS = frozenset(
    {
        "all_gather",
        "all_gather_into_tensor",
        "_all_gather_base",
        "reduce_scatter",
        "reduce_scatter_tensor",
        "_reduce_scatter_base",
        "all_to_all",
        "all_to_all_single",
        "scatter",
        "recv",
        "irecv",
        "uniform_",
        "normal_",
        "zero_",
        "fill_",
        "random_",
        "exponential_",
        "geometric_",
        "cauchy_",
        "log_normal_",
        "bernoulli_",
        "copy_",
    }
)

#: Ops whose second and third arguments are a module's weight and bias.
WEIGHTED = (
    "linear",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
)
_WEIGHT_BIAS = ((1, "weight"), (2, "bias"))
_NORM = ((2, "weight"), (3, "bias"))
#: Which argument positions of an op (by :func:`op_name`) hold module parameters, and their names.
PARAMETER_SLOTS: dict[str, dict[int | str, str]] = {  # by path[0], in msprobe a keyword's name too
    op: dict(slots)
    for ops, slots in (
        (
            WEIGHTED,
            _WEIGHT_BIAS,
        ),
        (("layer_norm", "group_norm"), _NORM),
        (("batch_norm", "instance_norm"), ((3, "weight"), (4, "bias"))),
        (("rms_norm",), ((2, "weight"),)),
        (("embedding", "prelu"), ((1, "weight"),)),
        (("bilinear",), _NORM),
        (("lstm", "gru", "rnn_tanh", "rnn_relu"), ((2, "weights"),)),
        # Hugging Face's Conv1D (GPT-2's attention and MLP): ``torch.addmm(self.bias, x, self.weight)``
        (("addmm",), ((0, "bias"), (2, "weight"))),
    )
    for op in ops
}
