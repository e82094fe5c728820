"""An ordinary small-LLM training script, for ``ptdbg-dump run`` (``llm.py``): a GPT of pre-norm
blocks (RMSNorm, a qkv ``nn.Linear`` with bias, causal ``F.scaled_dot_product_attention``, a GELU
MLP), trained by Adam or AdamW for a few steps on random tokens.

    ptdbg-dump run llm_script.py --dump-path DIR --step 0 1 2 -- --side npu [--fault gelu_forward]

The NPU side's GELU is its own kernel, rounded otherwise than torch's (``--kernel``: erf's formula
in fp32 ops, or 1e-6 relative noise on the result), installed under the dumper's wrapper, so the
dump still names it ``Functional_gelu_N``; ``--fault`` makes the GELU of ``blocks.1.mlp`` 2% off
from step ``--fault-from`` on, in its forward or its backward (``--fault update``: the optimizer's step,
``addcdiv_``, 2% too large; ``--fault extra``, on either side: each attention adds ``0.01 * tanh`` of
its heads' output before the projection, three calls the other run does not make; ``--autocast``: the
forward under bf16 autocast, as most LLM training runs). The attention's
key bias gets a
gradient that is zero in exact arithmetic (softmax is shift-invariant per query): each side's is
its own rounding noise, which Adam turns into updates of ±lr.
"""

import argparse
import contextlib
import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

VOCAB, WIDTH, HEADS, SEQ, BATCH = 64, 32, 4, 16, 4
FAULT = 1.02  # 2% off
KERNEL_NOISE = 1e-6


class RMSNorm(nn.Module):
    def __init__(self, width: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Attention(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.extra = False  # --fault extra: calls this run makes and the other does not
        self.qkv = nn.Linear(width, 3 * width, bias=True)
        self.proj = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=-1)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, c)
        if self.extra:
            y = torch.addcmul(y, torch.tanh(y), torch.full_like(y, 0.01))
        return self.proj(y)


class MLP(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.fc = nn.Linear(width, 4 * width)
        self.act = nn.GELU()
        self.proj = nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(self.act(self.fc(x)))


class Block(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.norm1, self.attn = RMSNorm(width), Attention(width, heads)
        self.norm2, self.mlp = RMSNorm(width), MLP(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class GPT(nn.Module):
    def __init__(self, blocks: int) -> None:
        super().__init__()
        self.wte = nn.Embedding(VOCAB, WIDTH)
        self.wpe = nn.Embedding(SEQ, WIDTH)
        self.blocks = nn.ModuleList(Block(WIDTH, HEADS) for _ in range(blocks))
        self.norm = RMSNorm(WIDTH)
        self.head = nn.Linear(WIDTH, VOCAB, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def own_gelu(kernel: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The NPU's GELU kernel: exact in exact arithmetic, rounded otherwise than torch's."""

    def make(gelu: Callable[..., Any]) -> Callable[..., Any]:
        generator = torch.Generator().manual_seed(7)

        def npu_gelu(x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
            if kernel == "erf":  # in fp32 whatever the input's dtype, rounded once to it, as a fused kernel
                xf = x.float()
                return (xf * 0.5 * (1.0 + torch.erf(xf * (1.0 / math.sqrt(2.0))))).to(x.dtype)
            noise = torch.randn(x.shape, generator=generator, dtype=x.dtype)
            return gelu(x, *args, **kwargs) * (1 + KERNEL_NOISE * noise)

        return npu_gelu

    return make


class Faulty:
    """Makes the GELU inside one module ``FAULT`` off in its forward or its backward while on."""

    def __init__(self, module: nn.Module, where: str) -> None:
        self.where, self.inside, self.on = where, False, False
        module.register_forward_pre_hook(lambda *_: setattr(self, "inside", True))
        module.register_forward_hook(lambda *_: setattr(self, "inside", False))

    def __call__(self, gelu: Callable[..., Any]) -> Callable[..., Any]:
        from dumper.faults import with_backward

        scaled = with_backward(gelu, lambda _position, g, _tensors, _incoming: g * FAULT)

        def maybe_wrong(x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
            if not (self.on and self.inside):
                return gelu(x, *args, **kwargs)
            if self.where == "gelu_forward":
                return gelu(x, *args, **kwargs) * FAULT
            return scaled(x, *args, **kwargs)

        return maybe_wrong


def wrong_update(state: dict[str, int], first: int) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The optimizer's update ``p + c·a/b`` with its step ``FAULT`` times too large from step ``first``."""

    def make(addcdiv_: Callable[..., Any]) -> Callable[..., Any]:
        def update(p: torch.Tensor, a: torch.Tensor, b: torch.Tensor, value: float = 1.0) -> torch.Tensor:
            return addcdiv_(p, a, b, value=value * FAULT if state["step"] >= first else value)

        return update

    return make


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--side", choices=("npu", "bench"), required=True)
    p.add_argument("--optimizer", choices=("adam", "adamw"), default="adamw")
    p.add_argument("--kernel", choices=("erf", "noise"), default="erf", help="the NPU's own GELU")
    p.add_argument("--fault", choices=("gelu_forward", "gelu_backward", "update", "extra"))
    p.add_argument("--fault-from", type=int, default=1, help="the first step with the fault")
    p.add_argument("--blocks", type=int, default=2)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--autocast", action="store_true", help="the forward under bf16 autocast")
    args = p.parse_args()

    torch.manual_seed(0)
    model = GPT(args.blocks)
    tokens = [torch.randint(0, VOCAB, (BATCH, SEQ + 1)) for _ in range(args.steps)]
    optimizer_class = torch.optim.AdamW if args.optimizer == "adamw" else torch.optim.Adam
    optimizer = optimizer_class(model.parameters(), lr=args.lr)
    gelu_fault = args.fault is not None and args.fault.startswith("gelu")
    faulty = Faulty(model.blocks[1].mlp, args.fault) if args.side == "npu" and gelu_fault else None
    state = {"step": 0}

    with contextlib.ExitStack() as stack:
        if args.side == "npu":
            from dumper.faults import replaced

            stack.enter_context(replaced(F, "gelu", own_gelu(args.kernel)))
            if faulty is not None:
                stack.enter_context(replaced(F, "gelu", faulty))
            if args.fault == "update":
                stack.enter_context(replaced(torch.Tensor, "addcdiv_", wrong_update(state, args.fault_from)))
        for step, batch in enumerate(tokens):
            state["step"] = step
            if faulty is not None:
                faulty.on = step >= args.fault_from
            for block in model.blocks:
                block.attn.extra = args.fault == "extra" and step >= args.fault_from
            optimizer.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.autocast):
                logits = model(batch[:, :-1])
            logits = logits.float() if args.autocast else logits  # the loss in fp32
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), batch[:, 1:].reshape(-1))
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    main()
