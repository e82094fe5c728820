"""Multi-rank scenarios: a data-parallel job of 4 CPU processes (gloo on 127.0.0.1, spawned with
``torch.multiprocessing``), each dumping its own ``rankR`` folder at every step.

Every rank trains the same model on its own shard of the batch and sums the gradients with one
bucketed ``all_reduce`` per step (``Distributed_all_reduce_0``), as DDP does. The NPU run of
``allreduce_rank2_tail`` gets that all_reduce wrong on rank 2 only, every step: rank 2's result
departs from its peers' (which must all be equal). From step 1 on, rank 2's weights differ and its
gradients reach the other ranks through the collective: there the other ranks only *receive* the
error. Both sides of a scenario are dumped by the same 4 processes, one process group.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

from diagnosis_scenarios import faults
from diagnosis_scenarios.checks import Check, agrees, all_of, departs_from_peers, differs
from diagnosis_scenarios.faults import install
from diagnosis_scenarios.models import Mlp, regression
from diagnosis_scenarios.scenario import BENCH, NPU
from diagnosis_scenarios.training import (
    NO_FAULT,
    RANK,
    RECEIVED,
    STEPS,
    Loop,
    Training,
    Truth,
    batches,
    kernel,
    train,
)

WORLD = 4
FAULTY_RANK = 2
COLLECTIVE = "Distributed_all_reduce_0_forward"
COLLECTIVE_IN, COLLECTIVE_OUT = f"{COLLECTIVE}_input.0", f"{COLLECTIVE}_output.0"


def all_reduce_gradients(model: nn.Module) -> None:
    """DDP's gradient sync written out: flatten every gradient into one bucket, sum it across
    ranks, divide by the world size, copy back."""
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    bucket = torch.cat([g.flatten() for g in grads])
    dist.all_reduce(bucket)
    bucket.div_(dist.get_world_size())
    for g, part in zip(grads, torch.split(bucket, [g.numel() for g in grads]), strict=True):
        g.copy_(part.view_as(g))


class PlainSgd:
    """SGD written out (``p.add_(p.grad, alpha=-lr)``: the calls torch.optim.SGD makes): the first
    torch.optim optimizer of a process imports torch._dynamo, ~2 s of CPU in each of 4 processes."""

    def __init__(self, model: nn.Module, lr: float) -> None:
        self.params, self.lr = list(model.parameters()), lr

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        for p in self.params:
            if p.grad is not None:
                p.add_(p.grad, alpha=-self.lr)


def data_parallel(side: str) -> Loop:
    """An MLP; each rank takes its own 8 rows of a 32-row batch."""
    rank = dist.get_rank()
    loop = Loop(
        Mlp([16, 32, 32, 4], nn.Tanh()),
        batches(lambda: (torch.randn(32, 16), torch.randn(32, 4))),
        regression,
        lambda model: PlainSgd(model, 0.5),
        sync=all_reduce_gradients,
    )
    loop.batches = [tuple(t[8 * rank : 8 * rank + 8] for t in b) for b in loop.batches]
    return loop


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _worker(rank: int, name: str, root: str, seed: int, port: int) -> None:
    scenario = next(s for s in RANKS if s.name == name)  # by name: a scenario holds lambdas
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    try:
        for side in (BENCH, NPU):
            train(scenario, Path(root) / side, side, seed, rank=rank)
            dist.barrier()
    finally:
        dist.destroy_process_group()


def dump_ranks(scenario: Training, root: Path, seed: int = 0) -> tuple[Path, Path]:
    """``root/npu`` and ``root/bench``, every rank dumped by its own spawned process."""
    mp.spawn(_worker, args=(scenario.name, str(root), seed, _free_port()), nprocs=WORLD)
    return Path(root) / NPU, Path(root) / BENCH


def only_rank_departs(departing: list[int]) -> Check:
    """At step 0 every rank's gradient bucket agrees with the bench; the collective's result departs
    from the bench and from its peers' on ``departing`` only."""
    ranks = range(WORLD)
    return all_of(
        *(agrees(0, COLLECTIVE_IN, rank=r) for r in ranks),
        *(
            differs(0, COLLECTIVE_OUT, 1e-3, rank=r) if r in departing else agrees(0, COLLECTIVE_OUT, rank=r)
            for r in ranks
        ),
        departs_from_peers(0, COLLECTIVE_OUT, ranks, departing, high=1e-7),
    )


def _truths() -> dict[tuple[int, int], Truth]:
    """Rank 2's collective at every step; the other ranks clean at step 0, then receiving rank 2's
    error through the collective."""
    out = {}
    for step in range(STEPS):
        for rank in range(WORLD):
            if rank == FAULTY_RANK:
                out[step, rank] = kernel(COLLECTIVE)
            elif step == 0:
                out[step, rank] = NO_FAULT
            else:
                out[step, rank] = Truth(RECEIVED, frozenset({COLLECTIVE}), rank=FAULTY_RANK)
    return out


_allreduce = Training(
    "allreduce_rank2_tail",
    f"4 data-parallel ranks, gloo; the gradient all_reduce's result on rank {FAULTY_RANK} only has its last "
    "64 elements 1.01x, every step",
    data_parallel,
    _truths(),
    install(dist, "all_reduce", faults.collective_tail_scaled(1.01, 64)),
    fault_ranks=frozenset({FAULTY_RANK}),
    overall=Truth(RANK, frozenset({COLLECTIVE}), rank=FAULTY_RANK, step=0),
    dumper=dump_ranks,
    premise=only_rank_departs([FAULTY_RANK]),
)

RANKS = [
    _allreduce,
    _allreduce.variant(
        "allreduce_4ranks_off",
        "no fault: the same 4-rank data-parallel job",
        {(s, r): NO_FAULT for s in range(STEPS) for r in range(WORLD)},
        fault=None,
        overall=NO_FAULT,
        premise=only_rank_departs([]),
    ),
]
