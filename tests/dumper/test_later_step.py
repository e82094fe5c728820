"""An ordinary training script dumped with ``ptdbg-dump run`` at a later step, where the drift that
earlier steps left is in every activation and parameter."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from dumper.cli import main as dump_main
from ptdbg_tui.compare.diagnosis.findings import UNPAIRED
from ptdbg_tui.compare.diagnosis.propagation import ENTERS
from ptdbg_tui.engine.batch import compare_dumps
from ptdbg_tui.formats.layout import discover

SCRIPT = textwrap.dedent("""
    import os
    import sys
    import torch
    import torch.nn.functional as F
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    data = torch.utils.data.TensorDataset(torch.randn(32, 8), torch.randn(32, 4))
    for x, y in torch.utils.data.DataLoader(data, batch_size=8):
        opt.zero_grad()
        out = model(x)
        if sys.argv[1:] == [os.environ["SCALES"]]:
            out = out * 1.001  # a small error after the model, every step, in one of the runs
        F.mse_loss(out, y).backward()
        opt.step()
""")


@pytest.mark.parametrize("scales", ["npu", "bench"])
def test_a_call_only_one_run_makes_is_named_at_a_later_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scales: str
) -> None:
    """At step 2 the activations carry ~8e-5 of drift from steps 0 and 1, and the multiply only one run
    makes raises the error only ~12x: it was an all-clear ("No operator introduces an error beyond
    rounding"). The NPU's own multiply is the culprit; after the bench's, the loss's input is where
    the error enters, after a call only the bench run makes."""
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    monkeypatch.setenv("SCALES", scales)
    for side in ("npu", "bench"):
        assert dump_main(["run", str(script), side, "--dump-path", str(tmp_path / side), "--step", "2"]) == 0
    (npu,), (bench,) = discover(tmp_path / "npu"), discover(tmp_path / "bench")
    (outcome,) = compare_dumps(npu.records, bench.records, jobs=1)
    d = outcome.diagnosis
    if scales == "npu":
        assert [(s.call, s.kind) for s in d.suspects] == [("Tensor___mul___0_forward", UNPAIRED)], d.verdict
        assert d.verdict.startswith("Culprit: Tensor___mul___0_forward (forward)")
    else:
        suspects = [(s.call, s.kind) for s in d.suspects]
        assert suspects == [("Functional_mse_loss_0_forward", ENTERS)], d.verdict
        assert "it entered after Tensor___mul___0_forward, a call only the bench run makes" in d.verdict
