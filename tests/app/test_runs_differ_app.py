"""Runs whose models differ, in the app: the bar and the overview say so first, and name no culprit
inside what differs (the report's ``runs differ:`` line)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ptdbg_tui.app.overview import OverviewScreen

#: Two blocks on the NPU, three on the bench; two AdamW steps, both dumped.
SCRIPT = """\
import sys
import torch
import torch.nn.functional as F
from torch import nn


class Net(nn.Module):
    def __init__(self, blocks):
        super().__init__()
        self.emb = nn.Embedding(50, 16)
        self.blocks = nn.ModuleList(nn.Linear(16, 16) for _ in range(blocks))
        self.head = nn.Linear(16, 50)

    def forward(self, t):
        x = self.emb(t)
        for block in self.blocks:
            x = x + torch.tanh(block(x))
        return self.head(x)


torch.manual_seed(0)
model = Net(2 if sys.argv[1] == "npu" else 3)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
t = torch.arange(32).reshape(4, 8) % 50
for _ in range(2):
    opt.zero_grad()
    F.cross_entropy(model(t).flatten(0, 1), t.flatten()).backward()
    opt.step()
"""

MODELS = "the runs' models differ: the bench has blocks.2 (Linear), the NPU run does not"
#: The manifests' line (compare/report/words.py): the parameters the extra block adds or moves.
MANIFESTS = (
    "the runs' manifests differ: 4 parameters differ at start "
    "(head.weight, head.bias, blocks.2.weight +1 more); module blocks.2 differs"
)


def _dump(root: Path) -> tuple[Path, Path]:
    script = root / "train.py"
    script.write_text(SCRIPT)
    launcher = Path(sys.executable).with_name("ptdbg-dump")
    for side in ("npu", "bench"):
        run = [str(launcher), "run", str(script), side, "--dump-path", str(root / side), "--step", "0", "1"]
        done = subprocess.run(run, capture_output=True, text=True, timeout=120, cwd=root)
        assert done.returncode == 0, done.stderr
    return root / "npu", root / "bench"


async def test_the_bar_and_the_overview_say_that_the_models_differ(tmp_path: Path, ui) -> None:
    """The bar named 'Culprit Functional_embedding_0_forward' (parameters differ on entry to step 1) of
    runs whose models differ, and nothing said they do."""
    app = ui.app(*_dump(tmp_path))
    async with app.run_test(size=(160, 45)) as pilot:
        await ui.settle(pilot)
        screen = ui.screen_text(app)
        # what the runs were started with first (their manifests), then what their records show
        assert f"Runs differ: {MANIFESTS}" in screen, screen
        assert "Culprit" not in screen, screen
        assert "o kernel is named: the runs differ before any kernel" in screen, screen
        await pilot.press("o")
        assert isinstance(app.screen, OverviewScreen)
        lines = app.screen.lines
        assert [line.differ.startswith(MANIFESTS) and MODELS in line.differ for line in lines] == [True, True]
        assert "runs differ: the runs' manifests differ: 4 parameters differ" in ui.screen_text(app)
