"""A call only the NPU script makes, whose name's counter coincides with a bench call made elsewhere:
the two are not one call, and the report names the NPU's as its own, not as a difference of arguments."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from dumper.cli import main as dump_main
from ptdbg_tui.compare.diagnosis.findings import ARGUMENTS, UNPAIRED
from ptdbg_tui.compare.report.words import verdict_text
from ptdbg_tui.engine.batch import compare_dumps
from ptdbg_tui.formats.sites import stack_site

SCRIPT = textwrap.dedent("""
    import sys
    import torch
    import torch.nn.functional as F
    from torch import nn

    torch.manual_seed(0)
    # every tensor mul_ takes has one shape: names alone pair the NPU's scale with the momentum's
    fc1, fc2 = nn.Linear(16, 16, bias=False), nn.Linear(16, 16, bias=False)
    opt = torch.optim.SGD([fc1.weight, fc2.weight], lr=0.1, momentum=0.9)
    for step in range(2):
        x, y = torch.randn(16, 16), torch.randn(16, 16)
        opt.zero_grad()
        h = fc1(x)
        if sys.argv[1] == "npu" and step == 1:
            h.mul_(1.01)  # an NPU-only in-place scale: the bench's only mul_ is its momentum buffer's
        F.mse_loss(fc2(torch.tanh(h)), y).backward()
        opt.step()
""")


@pytest.mark.parametrize("summary", [False, True])
def test_an_npu_only_in_place_call_is_not_paired_with_the_bench_optimizers(
    tmp_path: Path, summary: bool
) -> None:
    """It read 'Tensor_mul__0_forward: the runs pass different arguments to it — input.1: 1.01 against
    0.9', the NPU's scale paired by name with the bench's momentum ``buf.mul_(0.9)``."""
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    options = ["--summary-only"] if summary else []
    for side in ("npu", "bench"):
        args = ["run", str(script), side, "--dump-path", str(tmp_path / side), "--step", "1", *options]
        assert dump_main(args) == 0
    (outcome,) = compare_dumps(tmp_path / "npu", tmp_path / "bench", summary=summary, jobs=1)
    d = outcome.diagnosis
    assert (d.suspects[0].call, d.suspects[0].kind) == ("Tensor_mul__0_forward", UNPAIRED), verdict_text(d)
    assert not [s for s in d.suspects if s.kind == ARGUMENTS], verdict_text(d)
    site = stack_site(d.suspects[0].stack)
    assert site is not None and "h.mul_(1.01)" in (site.source or "")
