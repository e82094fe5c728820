"""One rank of a small tensor-parallel job on the CPU (gloo), dumped twice with the project's dumper:
as the bench, then as the NPU run, where rank FAULTY's second matmul is 5% off.

    python tp_job.py RANK WORLD STORE_FILE DUMP_ROOT FAULTY

Each layer: every rank multiplies the same input by its own weight shard, the partial results are
summed in place by ``all_reduce``, and ``tanh`` of the sum feeds the next layer.
"""

import contextlib
import sys

import torch
import torch.distributed as dist

from dumper import PrecisionDebugger
from dumper.faults import replaced

LAYERS = 3


def main(rank: int, world: int, store: str, root: str, faulty: int) -> None:
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    x = torch.randn(8, 32, generator=torch.Generator().manual_seed(0))
    weights = [
        torch.randn(32, 32, generator=torch.Generator().manual_seed(100 * layer + rank)) / 16
        for layer in range(LAYERS)
    ]

    def second_off(matmul):
        calls = iter(range(LAYERS))
        return lambda *a, **k: matmul(*a, **k) * (1.05 if next(calls) == 1 else 1.0)

    for side, fault in (("bench", False), ("npu", rank == faulty)):
        debugger = PrecisionDebugger(dump_path=f"{root}/{side}", hook_name="dump", rank=rank, step=[0])
        with replaced(torch, "matmul", second_off) if fault else contextlib.nullcontext():
            debugger.start()
            h = x
            for w in weights:
                y = torch.matmul(h, w)
                dist.all_reduce(y)
                h = torch.tanh(y)
            debugger.stop()
        debugger.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5]))
