"""The app on two checksum (md5) dumps of the same device: a call whose output differs from bit-equal
inputs is the culprit, and its detail panel does not contradict that."""

from __future__ import annotations

import contextlib
from pathlib import Path

import torch

from dumper import PrecisionDebugger
from dumper.faults import replaced


def _dump(path: Path, ulp: bool) -> Path:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    x = torch.randn(3, 4)
    debugger = PrecisionDebugger(dump_path=str(path))
    debugger.configure_hook(summary_mode="md5")
    # one run's relu one ulp off, as a kernel that sums in another order: its statistics still agree
    off = replaced(torch, "relu", lambda relu: lambda *a, **k: relu(*a, **k) * (1 + 2.0**-23))
    with off if ulp else contextlib.nullcontext():
        debugger.start()
        model(x).sum().backward()
        debugger.stop()
    return path


async def test_a_call_named_by_its_checksums_is_not_said_to_have_no_error_of_its_own(tmp_path, ui):
    app = ui.app(_dump(tmp_path / "npu", ulp=True), _dump(tmp_path / "bench", ulp=False))
    async with app.run_test(size=ui.size) as pilot:
        await ui.settle(pilot)
        await pilot.press("c")
        assert app.call_tree.cursor_node.data.key == "Functional_relu_0_forward"  # torch.relu inside it
        text = ui.detail_text(app)
        assert "Culprit: its output differs from bit-equal inputs" in text
        assert "no error of its own" not in text and "×0.0" not in text
