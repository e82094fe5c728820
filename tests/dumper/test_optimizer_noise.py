"""A small GPT with a qkv bias, trained by AdamW, dumped with ``ptdbg-dump run`` on both sides: the
attention key bias's gradient is zero in exact arithmetic (softmax is shift-invariant per query), so
each run holds its own rounding noise there, which AdamW turns into steps of full size. That is no
kernel's fault: the run whose only difference is a GELU rounded otherwise names nothing, and the run
whose GELU is 2% off from step 1 names that GELU."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
import torch.nn.functional as F

from dumper.cli import main as dump_main
from ptdbg_tui.cli import main as tui_main

GELU = F.gelu  # the true kernel, which the NPU script replaces while it runs

SCRIPT = textwrap.dedent("""
    import math
    import sys
    import torch
    import torch.nn.functional as F
    from torch import nn

    side, fault = sys.argv[1], sys.argv[2:] == ["fault"]
    VOCAB, WIDTH, HEADS, SEQ = 64, 32, 4, 16

    class RMSNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(WIDTH))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.qkv, self.proj = RMSNorm(), nn.Linear(WIDTH, 3 * WIDTH), nn.Linear(WIDTH, WIDTH)
            self.norm2, self.fc = RMSNorm(), nn.Linear(WIDTH, 4 * WIDTH)
            self.act, self.out = nn.GELU(), nn.Linear(4 * WIDTH, WIDTH)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = (z.view(b, t, HEADS, -1).transpose(1, 2) for z in self.qkv(self.norm1(x)).split(c, -1))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
            return x + self.out(self.act(self.fc(self.norm2(x))))

    torch.manual_seed(0)
    wte, wpe, blocks = nn.Embedding(VOCAB, WIDTH), nn.Embedding(SEQ, WIDTH), nn.ModuleList([Block(), Block()])
    norm, head = RMSNorm(), nn.Linear(WIDTH, VOCAB, bias=False)
    batches = [torch.randint(0, VOCAB, (4, SEQ + 1)) for _ in range(3)]
    modules = (wte, wpe, blocks, norm, head)
    opt = torch.optim.AdamW([p for m in modules for p in m.parameters()], lr=1e-3)
    state = {"step": 0, "inside": False}
    blocks[1].register_forward_pre_hook(lambda *_: state.update(inside=True))
    blocks[1].register_forward_hook(lambda *_: state.update(inside=False))

    def npu_gelu(gelu):
        def own(x, *args, **kwargs):  # the NPU's own kernel: erf's formula, rounded otherwise
            y = x * 0.5 * (1.0 + torch.erf(x * (1.0 / math.sqrt(2.0))))
            return y * 1.02 if fault and state["inside"] and state["step"] >= 1 else y
        return own

    if side == "npu":
        from dumper.faults import replaced
        patch = replaced(F, "gelu", npu_gelu)  # kept: a collected generator would restore F.gelu
        patch.__enter__()
    for state["step"], tokens in enumerate(batches):
        opt.zero_grad()
        x = wte(tokens[:, :-1]) + wpe(torch.arange(SEQ))
        for block in blocks:
            x = block(x)
        F.cross_entropy(head(norm(x)).reshape(-1, VOCAB), tokens[:, 1:].reshape(-1)).backward()
        opt.step()
    if side == "npu":
        patch.__exit__(None, None, None)  # the script runs in the test's process: F.gelu is everyone's
""")


@pytest.fixture(scope="module")
def dumps(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three runs: the bench, the NPU without a fault, the NPU with its GELU fault. They run in this
    process, and the NPU's script leaves its own GELU in ``F.gelu`` (the dumper's uninstall puts back
    the function it wrapped): the true one is put back, or the later tests' models call the NPU's."""
    root = tmp_path_factory.mktemp("gpt")
    script = root / "train.py"
    script.write_text(SCRIPT)
    for name, args in (("bench", ["bench"]), ("clean", ["npu"]), ("fault", ["npu", "fault"])):
        path = str(root / name)
        assert dump_main(["run", str(script), "--dump-path", path, "--step", "0", "1", "2", "--", *args]) == 0
        assert F.gelu is GELU, "the script left F.gelu replaced: later tests would call its kernel"
    return root


def _report(root: Path, npu: str, capsys: pytest.CaptureFixture[str], *options: str) -> str:
    capsys.readouterr()
    args = [str(root / npu), str(root / "bench"), "-o", str(root / f"out_{npu}"), "--no-progress"]
    assert tui_main(["compare", *args, *options]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("step", [None, "0", "1", "2"])
def test_noise_an_adaptive_optimizer_amplifies_names_nothing(
    dumps: Path, capsys: pytest.CaptureFixture[str], step: str | None
) -> None:
    """Before: 'Culprit: Tensor_addcdiv__4_forward (forward): introduces error — inputs 2e-07, outputs
    5.2e-05, allowed 1.6e-05: ×3.2' at step 0 (the update of blocks.0's qkv bias), and at step 2
    'parameters differ on entry to step 2 — bias of Functional_linear_0_forward …'."""
    out = _report(dumps, "clean", capsys, *(["--step", step] if step is not None else []))
    assert "Culprit:" not in out, out
    assert "No operator introduces an error beyond rounding" in out
    if step in (None, "0"):
        assert re.search(r"note: Tensor_addcdiv__\d+_forward: its update leaves .* rounding noise", out), out


@pytest.mark.parametrize("step", [None, "1"])
def test_a_gelu_fault_is_the_culprit_whatever_the_noise(
    dumps: Path, capsys: pytest.CaptureFixture[str], step: str | None
) -> None:
    """The whole run's culprit is the GELU at step 1, not the optimizer's update at step 0."""
    out = _report(dumps, "fault", capsys, *(["--step", step] if step is not None else []))
    culprits = re.findall(r"Culprit: (\S+)", out)
    assert culprits and culprits[0] == "Functional_gelu_1_forward", out
    assert out.index("Culprit:") > out.index("step1/rank0"), out
