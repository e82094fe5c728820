"""A call that only the bench run makes: the error it leaves enters the NPU run's next call, and the
evidence names that call as the bench's own, not as code no hook saw."""

from __future__ import annotations

import textwrap
from pathlib import Path

from dumper.cli import main as dump_main
from ptdbg_tui.compare.diagnosis.propagation import ENTERS
from ptdbg_tui.compare.report.words import evidence_text, verdict_text
from ptdbg_tui.engine.batch import compare_dumps
from ptdbg_tui.formats.layout import discover

SCRIPT = textwrap.dedent("""
    import sys
    import torch
    import torch.nn.functional as F
    from torch import nn

    torch.manual_seed(0)
    fc1, fc2 = nn.Linear(8, 16), nn.Linear(16, 4)
    x, y = torch.randn(8, 8), torch.randn(8, 4)
    h = torch.relu(fc1(x))
    if sys.argv[1:] == ["bench"]:
        h = h * 1.01  # only the bench run scales (the NPU port dropped the line)
    F.mse_loss(fc2(h), y).backward()
""")


def test_the_call_only_the_bench_run_makes_is_named_as_such(tmp_path: Path) -> None:
    """It read '… it entered after Tensor___mul___0_forward' under 'outside the dumped calls', as if
    the multiply were an NPU call that no hook saw."""
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    for side in ("npu", "bench"):
        assert dump_main(["run", str(script), side, "--dump-path", str(tmp_path / side)]) == 0
    (npu,), (bench,) = discover(tmp_path / "npu"), discover(tmp_path / "bench")
    (outcome,) = compare_dumps(npu.records, bench.records, jobs=1)
    culprit = outcome.diagnosis.suspects[0]
    assert (culprit.call, culprit.kind) == ("Functional_linear_1_forward", ENTERS), verdict_text(
        outcome.diagnosis
    )
    assert "it entered after Tensor___mul___0_forward, a call only the bench run makes" in evidence_text(
        culprit.evidence
    )
