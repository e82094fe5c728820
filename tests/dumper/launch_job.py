"""Two ranks (gloo, CPU) of a small model's step, for the launcher tests: under torchrun
(``torchrun ... --no-python ptdbg-dump run launch_job.py``) or spawned by itself
(``python launch_job.py STORE CONFIG DUMP_PATH``: each worker starts
``PrecisionDebugger.from_config``)."""

import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Linear(4, 4)
        self.outer = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.outer(torch.relu(self.inner(x)))


def train(rank: int, debugger_args: tuple[str, str] | None = None) -> None:
    torch.manual_seed(0)
    model = Net()
    debugger = None
    if debugger_args is not None:
        from dumper import PrecisionDebugger

        debugger = PrecisionDebugger.from_config(debugger_args[0], dump_path=debugger_args[1], model=model)
        debugger.start()
    y = model(torch.ones(3, 4) * (rank + 1))
    dist.all_reduce(y.detach())
    y.sum().backward()
    if debugger is not None:
        debugger.stop()


def spawned(rank: int, store: str, config: str, dump_path: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    train(rank, (config, dump_path))
    dist.destroy_process_group()


if __name__ == "__main__":
    if "LOCAL_RANK" in os.environ:  # started by torchrun
        dist.init_process_group("gloo")
        train(dist.get_rank())
        dist.destroy_process_group()
    else:
        mp.spawn(spawned, args=tuple(sys.argv[1:4]), nprocs=2)
