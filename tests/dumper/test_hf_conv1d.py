"""Hugging Face's GPT-2 computes its projections with ``Conv1D``: ``torch.addmm(self.bias, x,
self.weight)``. Its attention's key bias gets a gradient that is zero in exact arithmetic, which Adam
turns into steps of full size made of each run's own rounding noise (here the loss is summed and the
weights are of unit size, so that the noise stands above Adam's eps, as it does in GPT-2's sizes)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from dumper.cli import main as dump_main
from ptdbg_tui.compare.report.words import note_texts, verdict_text
from ptdbg_tui.engine.batch import compare_dumps

SCRIPT = textwrap.dedent("""
    import sys
    import torch
    import torch.nn.functional as F
    from torch import nn
    from dumper.faults import replaced

    W, H, T = 16, 2, 8

    class Conv1D(nn.Module):  # as transformers.pytorch_utils.Conv1D
        def __init__(self, nf, nx):
            super().__init__()
            self.weight = nn.Parameter(torch.randn(nx, nf))
            self.bias = nn.Parameter(torch.zeros(nf))

        def forward(self, x):
            out = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
            return out.view(*x.shape[:-1], -1)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln, self.c_attn, self.c_proj = nn.LayerNorm(W), Conv1D(3 * W, W), Conv1D(W, W)

        def forward(self, x):
            b, t, c = x.shape
            qkv = self.c_attn(self.ln(x)).split(W, dim=2)
            q, k, v = (z.view(b, t, H, c // H).transpose(1, 2) for z in qkv)
            att = F.softmax(q @ k.transpose(-2, -1) / (c // H) ** 0.5, dim=-1)
            return x + self.c_proj((att @ v).transpose(1, 2).reshape(b, t, c))

    def npu_softmax(true):
        def softmax(x, dim=None, *args, **kwargs):  # the NPU's kernel: honest, rounded otherwise
            e = (x - x.amax(dim, keepdim=True)).exp()
            return e / e.sum(dim, keepdim=True)
        return softmax

    torch.manual_seed(0)
    emb, block, head = nn.Embedding(32, W), Block(), nn.Linear(W, 32)
    params = [*emb.parameters(), *block.parameters(), *head.parameters()]
    opt = torch.optim.Adam(params, lr=1e-3)
    tokens = torch.randint(0, 32, (2, T + 1))
    npu = sys.argv[1] == "npu"
    with replaced(F, "softmax", npu_softmax) if npu else torch.autograd.set_grad_enabled(True):
        for _ in range(3):
            opt.zero_grad()
            logits = head(block(emb(tokens[:, :-1]))).reshape(-1, 32)
            F.cross_entropy(logits, tokens[:, 1:].reshape(-1), reduction="sum").backward()
            opt.step()
""")


def test_a_conv1d_bias_that_adam_moved_by_its_noise_is_no_culprit(tmp_path: Path) -> None:
    """At steps 1 and 2 the key bias differs by ±lr against its size: the addmm that reads it was the
    culprit, *error enters before it, outside the dumped calls* (×1.5, ×2.0 in GPT-2 itself), in a run
    with no fault. Its first and third arguments are a module's bias and weight, as a linear's are."""
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    for side in ("npu", "bench"):
        argv = ["run", str(script), side, "--dump-path", str(tmp_path / side), "--step", "0", "1", "2"]
        assert dump_main(argv) == 0
    outcomes = compare_dumps(tmp_path / "npu", tmp_path / "bench", jobs=1)
    later = [o.diagnosis for o in outcomes if o.npu.step in (1, 2)]
    assert len(later) == 2
    for d in later:
        assert not d.suspects, verdict_text(d)
        assert any("parameters differ on entry" in n for n in note_texts(d)), note_texts(d)
