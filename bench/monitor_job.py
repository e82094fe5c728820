"""A tiny 4-layer GPT trained on CPU, one side of a pair of ``bench/monitor.py`` (run it under
``ptdbg-dump run bench/monitor_job.py --monitor DIR -- SIDE FAULT [--steps N]``).

SIDE is ``npu`` or ``bench``; FAULT what the NPU side does wrong (the bench side never does):

- ``kernel``: GELU 0.5% high in layer 2's MLP from step 180 (``F.gelu`` replaced under the dumper's
  wrapper, so a dump names the call ``Functional_gelu``).
- ``attn_backward``: layer 1's attention backward perturbed from step 50 (``dumper.faults``).
- ``lr``: the StepLR halves the lr at step 100 (the bench's at 200).
- ``data``: another shuffle of the batches.
- ``nan``: layer 1's MLP input layer computed in float16 from step 120, behind a scale that overflows it.
- ``noise``: no fault; every block's output nudged by a relative 1e-6 (another kernel's rounding).
- ``bf16``: no fault; the forward under bf16 autocast.
- ``none``: both sides alike.

Two joined by ``+`` (``kernel+noise``) are both done: a fault on top of the rounding noise.

The steps of each fault can be moved (``--at``) so that a fast test trains a few steps only.
"""

from __future__ import annotations

import argparse
import contextlib
import math
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from dumper.faults import perturbation, replaced, with_backward

FAULTS = ("kernel", "attn_backward", "lr", "data", "nan", "noise", "bf16", "none")
#: The step each fault starts at, by default (the issue's pairs).
STARTS = {"kernel": 180, "attn_backward": 50, "lr": 100, "nan": 120}
VOCAB, WIDTH, SEQ, BATCH, HEADS = 64, 32, 16, 8, 4


class Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c_attn, self.c_proj = nn.Linear(WIDTH, 3 * WIDTH), nn.Linear(WIDTH, WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = (z.view(b, t, HEADS, -1).transpose(1, 2) for z in self.c_attn(x).split(c, -1))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).reshape(b, t, c))


class Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c_fc, self.gelu, self.c_proj = (
            nn.Linear(WIDTH, 4 * WIDTH),
            nn.GELU(),
            nn.Linear(4 * WIDTH, WIDTH),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln_1, self.attn, self.ln_2, self.mlp = (
            nn.LayerNorm(WIDTH),
            Attention(),
            nn.LayerNorm(WIDTH),
            Mlp(),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt(nn.Module):
    def __init__(self, layers: int = 4) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, WIDTH), nn.Embedding(SEQ, WIDTH)
        self.blocks = nn.ModuleList(Block() for _ in range(layers))
        self.ln_f, self.lm_head = nn.LayerNorm(WIDTH), nn.Linear(WIDTH, VOCAB, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


class Switch:
    """Whether the fault is on now: set by the training loop (the step) and a module's hooks (where)."""

    def __init__(self) -> None:
        self.step_on = False
        self.inside = False

    @property
    def on(self) -> bool:
        return self.step_on and self.inside

    def around(self, module: nn.Module) -> None:
        module.register_forward_pre_hook(lambda *_: setattr(self, "inside", True))
        module.register_forward_hook(lambda *_: setattr(self, "inside", False))


def _when(switch: Switch, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> Any:
    """``make(fn)`` while the switch is on, ``fn`` otherwise."""

    def install(fn: Callable[..., Any]) -> Callable[..., Any]:
        bad = make(fn)

        def maybe(*args: Any, **kwargs: Any) -> Any:
            return (bad if switch.on else fn)(*args, **kwargs)

        maybe.__name__ = getattr(fn, "__name__", "maybe")
        return maybe

    return install


def _overflowing(fn: Callable[..., Any]) -> Callable[..., Any]:
    """F.linear in float16 behind a scale of 2^17: the scaled input overflows float16's range."""

    def linear(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
        scale = 2.0**17
        y = fn((x * scale).half(), w.half(), None if b is None else (b * scale).half())
        return (y.float() / scale).to(x.dtype)

    return linear


@contextlib.contextmanager
def fault_installed(fault: str, model: Gpt, switch: Switch) -> Iterator[None]:
    if fault == "kernel":
        switch.around(model.blocks[2].mlp.gelu)
        with replaced(F, "gelu", _when(switch, lambda fn: lambda *a, **k: fn(*a, **k) * 1.005)):
            yield
    elif fault == "attn_backward":
        switch.around(model.blocks[1].attn)
        fix = perturbation(0.5, seed=0)
        with replaced(F, "scaled_dot_product_attention", _when(switch, lambda fn: with_backward(fn, fix))):
            yield
    elif fault == "nan":
        switch.around(model.blocks[1].mlp.c_fc)
        with replaced(F, "linear", _when(switch, _overflowing)):
            yield
    else:
        if fault == "noise":
            gen = torch.Generator().manual_seed(1)

            def nudge(_m: nn.Module, _a: Any, out: torch.Tensor) -> torch.Tensor:
                return out * (1 + 1e-6 * torch.randn(out.shape, generator=gen))

            for block in model.blocks:
                block.register_forward_hook(nudge)
        yield


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("side", choices=("npu", "bench"))
    p.add_argument("fault", help=f"one of {', '.join(FAULTS)}, or two joined by + (kernel+noise)")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--at", type=int, default=None, help="the step the fault starts at (default: the issue's)")
    p.add_argument("--seed", type=int, default=0, help="the model's initialisation and the corpus")
    args = p.parse_args()
    faults = args.fault.split("+")
    if not set(faults) <= set(FAULTS):
        p.error(f"unknown fault {args.fault} (choose from {', '.join(FAULTS)})")
    torch.set_num_threads(1)
    npu = args.side == "npu"
    fault = faults[0]  # the bench side installs none of them, but its schedule follows the pair's
    start = args.at if args.at is not None else STARTS.get(fault, 0)
    torch.manual_seed(args.seed)
    model = Gpt()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    lr_step = start if fault == "lr" and npu else 2 * start if fault == "lr" else math.inf
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=int(min(lr_step, 10**9)), gamma=0.5)
    # a fixed corpus of 32 batches, visited in a shuffled order (another seed: another order)
    corpus = torch.randint(0, VOCAB, (32, BATCH, SEQ + 1), generator=torch.Generator().manual_seed(args.seed))
    done = set(faults) if npu else set()
    order = torch.randperm(32, generator=torch.Generator().manual_seed(2 if "data" in done else 1))
    switch = Switch()
    autocast = torch.autocast("cpu", dtype=torch.bfloat16) if "bf16" in done else contextlib.nullcontext()
    with contextlib.ExitStack() as installed:
        for one in done:
            installed.enter_context(fault_installed(one, model, switch))
        for step in range(args.steps):
            switch.step_on = step >= start
            tokens = corpus[order[step % 32]]
            with autocast:
                logits = model(tokens[:, :-1])
            loss = F.cross_entropy(logits.float().reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()


if __name__ == "__main__":
    main()
