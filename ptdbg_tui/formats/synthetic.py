"""Writing numpy arrays as dump entries, and the seed scenario as a synthetic dump pair.

Used by tests and benchmarks to build dumps without torch: stats come from
:func:`~ptdbg_tui.formats.stats.array_stats`, files from :class:`~ptdbg_tui.formats.writer.RankWriter`.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ptdbg_tui.formats.layout import rank_dir_path
from ptdbg_tui.formats.records import Frame
from ptdbg_tui.formats.stats import array_stats
from ptdbg_tui.formats.writer import RankWriter

_TORCH_NAMES = {
    "float32": "float32",
    "float16": "float16",
    "float64": "float64",
    "bool": "bool",
    "int64": "int64",
    "int32": "int32",
    "int8": "int8",
    "uint8": "uint8",
    "int16": "int16",
}


def torch_dtype(dtype: np.dtype | type | str) -> str:
    """The pkl dtype string of a numpy dtype (``torch.float32`` …)."""
    name = np.dtype(dtype).name
    return f"torch.{_TORCH_NAMES.get(name, name)}"


def write_array(
    writer: RankWriter, name: str, array: np.ndarray, dtype: str | None = None, dump_step: int = 0
) -> None:
    """One tensor entry; ``dtype`` overrides the recorded dtype (``torch.bfloat16`` for fp32 data)."""
    dtype = dtype or torch_dtype(array.dtype)
    writer.write_tensor(name, dump_step, dtype, list(array.shape), array_stats(array, dtype), array)


# The seed guide's case: a CenterNet-like model whose LSTM backward is wrong on the NPU.
# (api, index, inputs' shapes, outputs' shapes), forward order.
_SEED_CALLS: list[tuple[str, int, list[tuple[int, ...]], list[tuple[int, ...]]]] = [
    ("Functional_conv2d", 0, [(2, 3, 8, 8), (4, 3, 3, 3)], [(2, 4, 6, 6)]),
    ("Functional_relu", 0, [(2, 4, 6, 6)], [(2, 4, 6, 6)]),
    ("Tensor_reshape", 0, [(2, 4, 6, 6)], [(2, 4, 36)]),
    ("VF_lstm", 0, [(2, 4, 36), (16, 36)], [(2, 4, 16)]),
    ("Functional_linear", 0, [(2, 4, 16), (5, 16)], [(2, 4, 5)]),
    ("Torch_sum", 0, [(2, 4, 5)], [()]),
]
SEED_CULPRIT = "VF_lstm_0_backward"


def _entries(
    api: str, index: int, direction: str, ins: list[tuple[int, ...]], outs: list[tuple[int, ...]]
) -> list[tuple[str, tuple[int, ...]]]:
    call = f"{api}_{index}_{direction}"
    names = [(f"{call}_input.{k}", s) for k, s in enumerate(ins)]
    if len(outs) == 1:
        names.append((f"{call}_output", outs[0]))
    else:
        names += [(f"{call}_output.{k}", s) for k, s in enumerate(outs)]
    return names


def _seed_stack(api: str, direction: str) -> list[Frame]:
    """As the original records them: tool frames first; backward shows the autograd side only."""
    tool = Frame(
        "/usr/lib/python3/site-packages/ptdbg_ascend/hook_module/hook_module.py",
        "58",
        "__call__",
        "result = self.forward(*args)",
    )
    if direction == "backward":
        return [Frame("/home/user/centernet/train.py", "88", "main", "loss.backward()")]
    line = 40 + [c[0] for c in _SEED_CALLS].index(api)
    return [
        tool,
        Frame("/home/user/centernet/model.py", str(line), "forward", f"y = {api}(x)"),
        Frame("/home/user/centernet/train.py", "80", "main", "out = model(x)"),
    ]


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


def write_ranks_pair(
    root: str | os.PathLike[str],
    ranks: int = 8,
    layers: int = 3,
    faulty_rank: int | None = 3,
    faulty_layer: int = 1,
    width: int = 32,
    rows: int = 8,
    seed: int = 0,
    noise: float = 1e-7,
    collectives: bool = True,
) -> tuple[Path, Path]:
    """A tensor-parallel job dumped on both sides (``root/npu``, ``root/bench``; step 0, ``ranks`` ranks).

    Each layer: every rank multiplies the same input by its own weight shard
    (``Functional_linear_L``), the partial results are summed across ranks (``Distributed_all_reduce_L``)
    and the sum goes through ``Torch_tanh_L`` into the next layer. On the NPU side every tensor carries
    ``noise``; on ``faulty_rank`` the linear of ``faulty_layer`` is 5% off, which every rank then
    receives through that layer's all_reduce (dumped unless ``collectives`` is False). Returns the two
    dump roots.
    """
    rng = np.random.default_rng(seed)
    roots = Path(root) / "npu", Path(root) / "bench"
    writers = [[RankWriter(rank_dir_path(side, r, step=0)) for r in range(ranks)] for side in roots]
    weights = [
        [
            rng.standard_normal((width, width)).astype(np.float32) / np.float32(np.sqrt(width * ranks))
            for _ in range(ranks)
        ]
        for _ in range(layers)
    ]
    x = rng.standard_normal((rows, width)).astype(np.float32)

    def put(r: int, name: str, bench: np.ndarray, npu: np.ndarray | None = None) -> None:
        if npu is None:
            npu = bench + (noise * rng.standard_normal(bench.shape)).astype(np.float32)
        write_array(writers[0][r], name, npu.astype(np.float32))
        write_array(writers[1][r], name, bench.astype(np.float32))

    npu_x = x.copy()
    for layer in range(layers):
        partial = [x @ weights[layer][r] for r in range(ranks)]
        npu_partial = [npu_x @ weights[layer][r] for r in range(ranks)]
        if faulty_rank is not None and layer == faulty_layer:
            npu_partial[faulty_rank] = npu_partial[faulty_rank] * np.float32(1.05)
        total, npu_total = np.sum(partial, axis=0), np.sum(npu_partial, axis=0)
        out, npu_out = np.tanh(total), np.tanh(npu_total)
        lin, red, act = (
            f"Functional_linear_{layer}_forward",
            f"Distributed_all_reduce_{layer}_forward",
            f"Torch_tanh_{layer}_forward",
        )
        for r in range(ranks):
            put(r, f"{lin}_input.0", x, npu_x)
            put(r, f"{lin}_input.1", weights[layer][r])
            put(r, f"{lin}_output", partial[r], npu_partial[r])
            if collectives:
                put(r, f"{red}_input.0", partial[r], npu_partial[r])
                put(r, f"{red}_output.0", total, npu_total)
            put(r, f"{act}_input.0", total, npu_total)
            put(r, f"{act}_output", out, npu_out)
        x, npu_x = out, npu_out
    for side in writers:
        for w in side:
            w.close()
    return roots
