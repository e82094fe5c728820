"""Gradient accumulation over two micro-batches, where the NPU script runs one from step 1 on: the bench
run makes calls the NPU run does not (the missing micro-batch), so the gradients and then the
parameters differ. The report points at those calls, never at a kernel."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from dumper.cli import main as dump_main
from ptdbg_tui.compare.diagnosis.propagation import ENTERS, GROWTH, LEAN
from ptdbg_tui.compare.report.words import evidence_text, note_texts, verdict_text
from ptdbg_tui.engine.batch import compare_dumps

SCRIPT = textwrap.dedent("""
    import sys
    import torch
    import torch.nn.functional as F
    from torch import nn

    npu = sys.argv[1] == "npu"
    torch.manual_seed(0)


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(50, 32)
            self.conv = nn.Conv1d(32, 32, 3, padding=1)
            self.bn = nn.BatchNorm1d(32)
            self.fc = nn.Linear(32, 32)
            self.out = nn.Linear(32, 50, bias=False)
            self.out.weight = self.emb.weight  # tied

        def forward(self, tok):
            h = self.emb(tok).transpose(1, 2)
            h = F.relu(self.bn(self.conv(h))).transpose(1, 2)
            h = h + torch.tanh(self.fc(h))
            return self.out(h)


    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    data = [torch.randint(0, 50, (8, 12)) for _ in range(6)]
    for step in range(3):
        opt.zero_grad()
        for m in range(1 if npu and step >= 1 else 2):  # the NPU script drops a micro-batch from step 1
            tok = data[2 * step + m]
            loss = F.cross_entropy(model(tok).float().reshape(-1, 50), tok.reshape(-1)) / 2
            loss.backward()
        opt.step()
""")


@pytest.fixture(scope="module")
def dumps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Both runs dumped at steps 0 to 2, tensors and statistics only."""
    root = tmp_path_factory.mktemp("micro_batch")
    script = root / "train.py"
    script.write_text(SCRIPT)
    out = {}
    for kind, options in (("tensors", []), ("statistics", ["--summary-only"])):
        for side in ("npu", "bench"):
            path = out[f"{side}_{kind}"] = root / kind / side
            args = ["run", str(script), side, "--dump-path", str(path), "--step", "0", "1", "2", *options]
            assert dump_main(args) == 0
    return out


@pytest.mark.parametrize("kind", ["tensors", "statistics"])
@pytest.mark.parametrize("only_step", [None, 1, 2])
def test_the_skipped_micro_batch_is_named_and_no_kernel(
    dumps: dict[str, Path], kind: str, only_step: int | None
):
    """From statistics, step 2 named an innocent kernel, 'Culprit: Functional_linear_1_backward … ×1.2',
    whose inputs carry what the parameters inherited; and step 1 said the error 'entered after
    Functional_conv1d_1_forward', the bench's skipped batch-norm counter ``Tensor_add__1`` taken for the
    NPU's optimizer call of that name."""
    outcomes = compare_dumps(
        dumps[f"npu_{kind}"], dumps[f"bench_{kind}"], step=only_step, summary=kind == "statistics", jobs=1
    )
    by_step = {o.npu.step: o.diagnosis for o in outcomes}
    assert set(by_step) == ({0, 1, 2} if only_step is None else {only_step})
    for step, d in by_step.items():
        assert not [s for s in d.suspects if s.kind in (GROWTH, LEAN)], (step, verdict_text(d))
    if 1 in by_step:
        culprit = by_step[1].suspects[0]
        assert (culprit.call, culprit.kind, culprit.after_bench_only) == (
            "Tensor_add__1_forward",
            ENTERS,
            True,
        )
        assert "it entered after Tensor_mul__0_forward; before it the bench run makes " in evidence_text(
            culprit.evidence
        )
        assert "Functional_conv1d_1_forward" not in evidence_text(culprit.evidence)
    if 2 in by_step:
        d = by_step[2]
        assert d.suspects == [], verdict_text(d)
        inherited = "parameters differ on entry to step 2: inherited from step 1, "
        source = "the error enters before Tensor_add__1_forward, after calls only the bench run makes"
        assert any(n.startswith(inherited) and source in n for n in note_texts(d)), note_texts(d)
