"""An ordinary training script, for ``ptdbg-dump run`` (``scripts.py``): it builds its model after
the dumper started, so nn.Linear's initialisation (``uniform_`` over ``torch.empty``) is dumped in
step 0 with uninitialised inputs; every optimizer.step() ends a step.

    ptdbg-dump run train_script.py --dump-path DIR --step 0 1 2 -- --side npu --seed 0 [--fault gelu]

``--side npu`` adds 1e-6 relative noise to the weights and batches (in numpy: no dumped call), and
``--fault gelu`` makes GELU return 1.01x (installed under the dumper's wrapper).
"""

import argparse
import contextlib

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

NOISE = 1e-6


def noisy(a: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return (a * (1 + NOISE * rng.standard_normal(a.shape))).astype(np.float32)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--side", choices=("npu", "bench"), required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--fault", choices=("gelu",))
    p.add_argument("--steps", type=int, default=3)
    args = p.parse_args()

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4))
    data = np.random.default_rng(0)
    batches = [
        (data.standard_normal((20, 16), dtype=np.float32), data.standard_normal((20, 4), dtype=np.float32))
        for _ in range(args.steps)
    ]
    if args.side == "npu":
        rng = np.random.default_rng(1000 + args.seed)
        for param in model.parameters():
            param.data = torch.from_numpy(noisy(param.data.numpy(), rng))
        batches = [(noisy(x, rng), noisy(y, rng)) for x, y in batches]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    with contextlib.ExitStack() as stack:
        if args.fault == "gelu":
            from dumper.faults import replaced

            def wrong(gelu):
                return lambda x, *a, **k: torch.mul(gelu(x, *a, **k), 1.01)

            stack.enter_context(replaced(F, "gelu", wrong))
        for x, y in batches:
            optimizer.zero_grad()
            loss = F.mse_loss(model(torch.from_numpy(x)), torch.from_numpy(y))
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    main()
