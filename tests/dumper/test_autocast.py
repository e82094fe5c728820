"""A small attention model trained under bf16 autocast (CPU), dumped by ``ptdbg-dump run`` on both
sides: the NPU side's softmax is its own kernel, honest (it rounds otherwise) or 1% off, or its GELU is
1% off."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from dumper.cli import main as dump_main
from ptdbg_tui.compare.diagnosis.findings import Diagnosis
from ptdbg_tui.compare.diagnosis.kinds import Kind
from ptdbg_tui.compare.report.words import evidence_text
from ptdbg_tui.engine.batch import compare_dumps

SCRIPT = textwrap.dedent("""
    import math
    import sys
    import torch
    import torch.nn.functional as F
    from torch import nn
    from dumper.faults import replaced

    SIDE, SCALE, OP = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    W, H, T = 32, 4, 16

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(W), nn.LayerNorm(W)
            self.qkv, self.proj = nn.Linear(W, 3 * W), nn.Linear(W, W)
            self.fc, self.out = nn.Linear(W, 4 * W), nn.Linear(4 * W, W)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = (z.view(b, t, H, c // H).transpose(1, 2) for z in self.qkv(self.ln1(x)).split(W, dim=2))
            att = (q @ k.transpose(-2, -1)) * (1 / math.sqrt(c // H))
            att = att.masked_fill(~torch.tril(torch.ones(t, t, dtype=torch.bool)), float("-inf"))
            y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(b, t, c)
            x = x + self.proj(y)
            return x + self.out(F.gelu(self.fc(self.ln2(x))))

    def npu_gelu(true):
        def gelu(x, *args, **kwargs):
            return true(x, *args, **kwargs) * SCALE
        return gelu

    def npu_softmax(true):
        def softmax(x, dim=None, *args, **kwargs):  # the NPU's kernel: in fp32, normalised by its own sum
            e = (x.float() - x.float().amax(dim, keepdim=True)).exp()
            return (e / e.sum(dim, keepdim=True) * SCALE).to(x.dtype)
        return softmax

    torch.manual_seed(0)
    emb, block, head = nn.Embedding(64, W), Block(), nn.Linear(W, 64)
    params = [*emb.parameters(), *block.parameters(), *head.parameters()]
    opt = torch.optim.AdamW(params, lr=1e-3)
    tokens = torch.randint(0, 64, (4, T + 1))
    kernel = {"softmax": npu_softmax, "gelu": npu_gelu}[OP]
    with replaced(F, OP, kernel) if SIDE == "npu" else torch.autograd.set_grad_enabled(True):
        for _ in range(2):
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16):
                logits = head(block(emb(tokens[:, :-1])))
            F.cross_entropy(logits.float().reshape(-1, 64), tokens[:, 1:].reshape(-1)).backward()
            opt.step()
""")


def _compare(tmp_path: Path, scale: str, *options: str, op: str = "softmax") -> list[Diagnosis]:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    for side in ("npu", "bench"):
        out = str(tmp_path / side)
        assert (
            dump_main(["run", str(script), side, scale, op, "--dump-path", out, "--step", "0", "1", *options])
            == 0
        )
    outcomes = sorted(compare_dumps(tmp_path / "npu", tmp_path / "bench", jobs=1), key=lambda o: o.npu.step)
    return [o.diagnosis for o in outcomes]


def test_an_honest_softmax_under_bf16_autocast_names_nothing_from_statistics(tmp_path: Path) -> None:
    """Every tensor after the first bf16 op carries bf16's rounding, fp32 ones included, and statistics
    show an fp32 gradient's 35x too small: AdamW's sqrt was named here, and in a larger model a
    layer_norm backward that sums such a gradient into its bias' gradient (×1.9 at step 0, ×7.6 at
    step 1), in runs with no fault."""
    diagnoses = _compare(tmp_path, "1.0", "--summary-only")
    assert len(diagnoses) == 2
    for d in diagnoses:
        assert not d.suspects, [(s.call, s.score) for s in d.suspects]


@pytest.mark.parametrize("mode", ["statistics", "tensors"])
def test_a_softmax_whose_rows_sum_to_1_01_is_named_under_bf16_autocast(tmp_path: Path, mode: str) -> None:
    """1% is 2.5 units of bf16's rounding, within a bf16 call's allowance of 8: from tensors it was an
    all-clear, from statistics a layer_norm backward was named. A softmax's rows sum to one whatever its
    inputs, so its mean shows the fault, in statistics too."""
    diagnoses = _compare(tmp_path, "1.01", *(["--summary-only"] if mode == "statistics" else []))
    for d in diagnoses:
        culprit = d.suspects[0]
        assert (culprit.call, culprit.kind) == ("Functional_softmax_0_forward", Kind.SUMS), d.suspects
        said = evidence_text(culprit.evidence)
        assert "Functional_softmax_0_forward_output's mean is +" in said, said


def test_a_gelu_1pct_off_under_bf16_autocast_is_named_from_statistics(tmp_path: Path) -> None:
    """Its norm leans +0.98%, 2.5 units of bf16 within a call's allowance of 8: from tensors the lean
    test named it, from statistics 118 rows failed with no call named; they record the norm too."""
    for d in _compare(tmp_path, "1.01", "--summary-only", op="gelu"):
        culprit = d.suspects[0]
        assert (culprit.call, culprit.kind) == ("Functional_gelu_0_forward", Kind.LEAN), d.suspects
