"""One rank of a small tensor-parallel job on the CPU (gloo), dumped twice with the project's dumper:
as the bench, then as the NPU run, where rank FAULTY's second matmul is 5% off.

    python tp_job.py RANK WORLD STORE_FILE DUMP_ROOT FAULTY [reduce_scatter]

Each layer: every rank multiplies the same input by its own weight shard, the partial results are
summed in place by ``all_reduce``, and ``tanh`` of the sum feeds the next layer. With
``reduce_scatter`` the sum is a ``reduce_scatter_tensor`` of the partial results repeated once per
rank (each rank's part is the whole sum), and the fault is rank FAULTY's second one halving its
result (a wrong reduction on that rank alone), where every rank's matmul is right.
"""

import contextlib
import sys

import torch
import torch.distributed as dist

from dumper import PrecisionDebugger
from dumper.faults import replaced

LAYERS = 3


def main(rank: int, world: int, store: str, root: str, faulty: int, fault: str = "matmul") -> None:
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    x = torch.randn(8, 32, generator=torch.Generator().manual_seed(0))
    weights = [
        torch.randn(32, 32, generator=torch.Generator().manual_seed(100 * layer + rank)) / 16
        for layer in range(LAYERS)
    ]

    def second_off(matmul):
        calls = iter(range(LAYERS))
        return lambda *a, **k: matmul(*a, **k) * (1.05 if next(calls) == 1 else 1.0)

    def second_halved(reduce_scatter):
        calls = iter(range(LAYERS))

        def halved(out, inp, *a, **k):
            done = reduce_scatter(out, inp, *a, **k)
            if next(calls) == 1:
                out.mul_(0.5)
            return done

        return halved

    def summed(y: torch.Tensor) -> torch.Tensor:
        if fault != "reduce_scatter":
            dist.all_reduce(y)
            return y
        out = torch.empty_like(y)
        dist.reduce_scatter_tensor(out, y.repeat(world, 1))
        return out

    wrong = (torch, "matmul", second_off)
    if fault == "reduce_scatter":
        wrong = (dist, "reduce_scatter_tensor", second_halved)
    for side, faulty_here in (("bench", False), ("npu", rank == faulty)):
        debugger = PrecisionDebugger(dump_path=f"{root}/{side}", hook_name="dump", rank=rank, step=[0])
        with replaced(*wrong) if faulty_here else contextlib.nullcontext():
            debugger.start()
            h = x
            for w in weights:
                h = torch.tanh(summed(torch.matmul(h, w)))
            debugger.stop()
        debugger.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5]), *sys.argv[6:])
