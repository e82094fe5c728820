"""Writing numpy arrays as dump entries, and the seed scenario as a synthetic dump pair.

Used by tests and benchmarks to build dumps without torch: stats come from
:func:`~ptdbg_tui.formats.stats.array_stats`, files from :class:`~ptdbg_tui.formats.writer.RankWriter`.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ptdbg_tui.formats.layout import rank_dir_path
from ptdbg_tui.formats.stats import array_stats
from ptdbg_tui.formats.writer import RankWriter

_TORCH_NAMES = {"float32": "float32", "float16": "float16", "float64": "float64", "bool": "bool",
                "int64": "int64", "int32": "int32", "int8": "int8", "uint8": "uint8", "int16": "int16"}


def torch_dtype(dtype: np.dtype | type | str) -> str:
    """The pkl dtype string of a numpy dtype (``torch.float32`` …)."""
    name = np.dtype(dtype).name
    return f"torch.{_TORCH_NAMES.get(name, name)}"


def write_array(writer: RankWriter, name: str, array: np.ndarray, dtype: str | None = None,
                dump_step: int = 0) -> None:
    """One tensor entry; ``dtype`` overrides the recorded dtype (``torch.bfloat16`` for fp32 data)."""
    dtype = dtype or torch_dtype(array.dtype)
    writer.write_tensor(name, dump_step, dtype, list(array.shape), array_stats(array, dtype), array)


# The seed guide's case: a CenterNet-like model whose LSTM backward is wrong on the NPU.
# (api, index, inputs' shapes, outputs' shapes), forward order.
_SEED_CALLS = [
    ("Functional_conv2d", 0, [(2, 3, 8, 8), (4, 3, 3, 3)], [(2, 4, 6, 6)]),
    ("Functional_relu", 0, [(2, 4, 6, 6)], [(2, 4, 6, 6)]),
    ("Tensor_reshape", 0, [(2, 4, 6, 6)], [(2, 4, 36)]),
    ("VF_lstm", 0, [(2, 4, 36), (16, 36)], [(2, 4, 16)]),
    ("Functional_linear", 0, [(2, 4, 16), (5, 16)], [(2, 4, 5)]),
    ("Torch_sum", 0, [(2, 4, 5)], [()]),
]
SEED_CULPRIT = "VF_lstm_0_backward"


def _entries(api: str, index: int, direction: str, ins: list, outs: list) -> list[tuple[str, tuple]]:
    call = f"{api}_{index}_{direction}"
    names = [(f"{call}_input.{k}", s) for k, s in enumerate(ins)]
    if len(outs) == 1:
        names.append((f"{call}_output", outs[0]))
    else:
        names += [(f"{call}_output.{k}", s) for k, s in enumerate(outs)]
    return names


def _seed_stack(api: str, direction: str) -> list[tuple[str, str, str, str]]:
    """As the original records them: tool frames first; backward shows the autograd side only."""
    tool = ("/usr/lib/python3/site-packages/ptdbg_ascend/hook_module/hook_module.py", "58", "__call__",
            "result = self.forward(*args)")
    if direction == "backward":
        return [("/home/user/centernet/train.py", "88", "main", "loss.backward()")]
    line = 40 + [c[0] for c in _SEED_CALLS].index(api)
    return [tool, ("/home/user/centernet/model.py", str(line), "forward", f"y = {api}(x)"),
            ("/home/user/centernet/train.py", "80", "main", "out = model(x)")]


def write_seed_pair(root: str | os.PathLike[str], seed: int = 0, noise: float = 1e-7) -> tuple[Path, Path]:
    """Write ``root/npu`` and ``root/bench`` dump roots (api_stack mode, step 0, rank 0).

    Forward calls and the backward calls before the LSTM's agree within ``noise``; the LSTM
    backward receives a matching gradient but produces a wrong one, and every backward call after
    it (in autograd order) inherits the error. Returns the two dump roots.
    """
    rng = np.random.default_rng(seed)
    roots = Path(root) / "npu", Path(root) / "bench"
    writers = [RankWriter(rank_dir_path(r, 0, step=0)) for r in roots]
    backward = [(api, i, outs, ins) for api, i, ins, outs in reversed(_SEED_CALLS)]  # grads flow back
    broken = False
    for direction, calls in (("forward", _SEED_CALLS), ("backward", backward)):
        for api, index, ins, outs in calls:
            for name, shape in _entries(api, index, direction, ins, outs):
                bench = rng.standard_normal(shape).astype(np.float32)
                npu = bench + (noise * rng.standard_normal(shape)).astype(np.float32)
                if broken or (direction == "backward" and api == "VF_lstm" and "_output" in name):
                    npu = rng.standard_normal(shape).astype(np.float32)  # wrong gradient
                for writer, data in zip(writers, (npu, bench), strict=True):
                    write_array(writer, name, np.asarray(data, dtype=np.float32))
            broken = broken or (direction == "backward" and api == "VF_lstm")
            for writer in writers:
                writer.write_stack(f"{api}_{index}_{direction}_stack_info", _seed_stack(api, direction))
    for writer in writers:
        writer.close()
    return roots
