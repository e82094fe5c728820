"""A tensor dump that lost one npy file: the row is an error, and the diagnosis reads that tensor's
error from the pkl's statistics instead of walking on as if it carried none."""

from __future__ import annotations

import textwrap
from pathlib import Path

from dumper.cli import main as dump_main
from ptdbg_tui.compare.diagnosis.findings import UNPAIRED
from ptdbg_tui.compare.model import Status
from ptdbg_tui.compare.report.words import verdict_text
from ptdbg_tui.engine.batch import compare_dumps
from ptdbg_tui.formats.layout import discover

SCRIPT = textwrap.dedent("""
    import sys
    import torch
    import torch.nn.functional as F
    from torch import nn

    torch.manual_seed(0)
    fc1, ln, fc2 = nn.Linear(16, 32), nn.LayerNorm(32), nn.Linear(32, 4)
    params = [*fc1.parameters(), *ln.parameters(), *fc2.parameters()]
    opt = torch.optim.Adam(params, lr=1e-2)
    x, y = torch.randn(16, 16), torch.randint(0, 4, (16,))
    h = fc1(x)
    if sys.argv[1:] == ["npu"]:
        h = h * 1.01  # the "NPU" run: a wrong constant, which the LayerNorm after it mostly hides
    F.cross_entropy(fc2(ln(h)), y).backward()
    opt.step()
""")


def test_a_missing_npy_does_not_move_the_culprit(tmp_path: Path) -> None:
    """Without the LayerNorm's input file the walk saw no error enter and blamed the LayerNorm's
    backward ("introduces error — inputs 4.1e-07 (some inputs not compared) …")."""
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    for side in ("npu", "bench"):
        assert dump_main(["run", str(script), side, "--dump-path", str(tmp_path / side), "--step", "0"]) == 0
    (lost,) = (tmp_path / "npu").rglob("Functional_layer_norm_0_forward_input.0.npy")
    lost.unlink()
    (npu,), (bench,) = discover(tmp_path / "npu"), discover(tmp_path / "bench")
    (outcome,) = compare_dumps(npu.records, bench.records, jobs=1)
    (error,) = [r for r in outcome.rows if r.status is Status.ERROR]
    assert error.name == "Functional_layer_norm_0_forward_input.0"
    assert "not found" in error.result.message
    d = outcome.diagnosis
    assert [(s.call, s.kind) for s in d.suspects][:1] == [("Tensor___mul___0_forward", UNPAIRED)], (
        verdict_text(d)
    )
    assert verdict_text(d).startswith("Culprit: Tensor___mul___0_forward (forward)")
