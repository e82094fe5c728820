"""One rank of a small tensor-parallel job on the CPU (gloo), dumped twice with the project's dumper:
as the bench, then as the NPU run, where rank FAULTY's second matmul is 5% off.

    python tp_job.py RANK WORLD STORE_FILE DUMP_ROOT FAULTY [reduce_scatter | bits_matmul]

Each layer: every rank multiplies the same input by its own weight shard, the partial results are
summed in place by ``all_reduce``, and ``tanh`` of the sum feeds the next layer. With
``reduce_scatter`` the sum is a ``reduce_scatter_tensor`` of the partial results repeated once per
rank (each rank's part is the whole sum), and the fault is rank FAULTY's second one halving its
result (a wrong reduction on that rank alone), where every rank's matmul is right. With
``bits_matmul`` both runs are dumped with checksums (``md5``) and the NPU run's tanh, on every rank,
scales its argument by 1 + 2**-20 first: values within rounding in other bits, before rank FAULTY's
matmul.
"""

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from dumper import PrecisionDebugger
from dumper.faults import replaced

LAYERS = 3


def second_off(matmul):
    """The second matmul 5% off."""
    calls = iter(range(LAYERS))
    return lambda *a, **k: matmul(*a, **k) * (1.05 if next(calls) == 1 else 1.0)


def second_halved(reduce_scatter):
    """The second reduce_scatter's result halved."""
    calls = iter(range(LAYERS))

    def halved(out, inp, *a, **k):
        done = reduce_scatter(out, inp, *a, **k)
        if next(calls) == 1:
            out.mul_(0.5)
        return done

    return halved


def other_bits(tanh):
    """tanh of its argument scaled by 1 + 2**-20: within rounding, other bits."""
    return lambda y: tanh(y * (1 + 2**-20))


def summed(y: torch.Tensor, fault: str, world: int) -> torch.Tensor:
    """The ranks' partial results summed: by all_reduce, or (``reduce_scatter``) by a reduce_scatter of
    them repeated once per rank."""
    if fault != "reduce_scatter":
        dist.all_reduce(y)
        return y
    out = torch.empty_like(y)
    dist.reduce_scatter_tensor(out, y.repeat(world, 1))
    return out


def main(rank: int, world: int, store: str, root: str, faulty: int, fault: str = "matmul") -> None:
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    x = torch.randn(8, 32, generator=torch.Generator().manual_seed(0))
    weights = [
        torch.randn(32, 32, generator=torch.Generator().manual_seed(100 * layer + rank)) / 16
        for layer in range(LAYERS)
    ]
    wrong = (
        (dist, "reduce_scatter_tensor", second_halved)
        if fault == "reduce_scatter"
        else (torch, "matmul", second_off)
    )
    for side, faulty_here in (("bench", False), ("npu", rank == faulty)):
        debugger = PrecisionDebugger(dump_path=f"{root}/{side}", hook_name="dump", rank=rank, step=[0])
        if fault == "bits_matmul":
            debugger.configure_hook(summary_mode="md5")
        with contextlib.ExitStack() as faults:
            if faulty_here:
                faults.enter_context(replaced(*wrong))
            if fault == "bits_matmul" and side == "npu":
                faults.enter_context(replaced(torch, "tanh", other_bits))
            debugger.start()
            h = x
            for w in weights:
                h = torch.tanh(summed(torch.matmul(h, w), fault, world))
            debugger.stop()
        debugger.step()
    dist.destroy_process_group()


def run_job(root: Path, world: int, faulty: int, *fault: str) -> None:
    """The job's ``world`` ranks, each its own process (as torchrun starts them), dumping both runs
    under ``root``; for the tests of every layer that need a real multi-rank dump."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "OMP_NUM_THREADS": "1"}
    store = str(root / "store")
    ranks = [
        subprocess.Popen(
            [sys.executable, __file__, str(r), str(world), store, str(root), str(faulty), *fault],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for r in range(world)
    ]
    for proc in ranks:
        out = proc.communicate(timeout=120)[0]
        assert proc.returncode == 0, out


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5]), *sys.argv[6:])
