"""``ptdbg-tui demo [DIR]``: dump a small CenterNet-like model twice on CPU (the command in
:mod:`ptdbg_tui.cli` then opens the app on the dumps).

The "bench" run is the reference. The "NPU" run differs by float noise everywhere (inputs and
weights nudged far below the pass thresholds) and by a faulty LSTM backward — the case of the
seed troubleshooting guide, where the LSTM's backward input matches and its output does not.
torch is imported only here, inside the functions: the reader side never needs it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

NOISE = 1e-6  # relative float noise of the "NPU" run: well within every pass threshold
SEED = 0


def build_model(torch: Any) -> Any:
    """conv + batchnorm backbone, heatmap/size heads, and an LSTM head over the feature map."""
    nn: Any = torch.nn  # torch.nn.Module is a base known at run time only

    class Backbone(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
            self.bn1 = nn.BatchNorm2d(8)
            self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
            self.bn2 = nn.BatchNorm2d(16)

        def forward(self, x: Any) -> Any:
            x = torch.relu(self.bn1(self.conv1(x)))
            return torch.relu(self.bn2(self.conv2(x)))

    class LstmHead(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = nn.LSTM(16, 16, batch_first=True)
            self.fc = nn.Linear(16, 4)

        def forward(self, feat: Any) -> Any:
            seq = feat.flatten(2).transpose(1, 2)  # (B, H*W, C): one step per position
            out, _ = self.lstm(seq)
            return self.fc(out)

    class CenterNetLike(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.backbone = Backbone()
            self.heatmap = nn.Conv2d(16, 2, 1)
            self.size = nn.Conv2d(16, 2, 1)
            self.track = LstmHead()

        def forward(self, x: Any) -> tuple[Any, Any, Any]:
            feat = self.backbone(x)
            return torch.sigmoid(self.heatmap(feat)), self.size(feat), self.track(feat)

    return CenterNetLike()


def setup(torch: Any, npu: bool) -> tuple[Any, Any, tuple[Any, Any, Any]]:
    """The model, its input and targets; the "NPU" run's input and weights nudged by :data:`NOISE`."""
    torch.manual_seed(SEED)
    model = build_model(torch)
    x = torch.randn(2, 3, 8, 8)
    targets = (torch.rand(2, 2, 4, 4), torch.rand(2, 2, 4, 4), torch.randn(2, 16, 4))
    if npu:
        gen = torch.Generator().manual_seed(SEED + 1)
        with torch.no_grad():
            for p in [x, *model.parameters()]:
                p.mul_(1 + NOISE * torch.randn(p.shape, generator=gen))
    return model, x, targets


def run_step(torch: Any, model: Any, x: Any, targets: tuple[Any, Any, Any], npu: bool) -> None:
    """One training step; the "NPU" run's LSTM backward is wrong (scripts run under ``ptdbg-dump run``
    use it too)."""
    from dumper.faults import faulty_backward

    if npu:
        with faulty_backward(torch._VF, "lstm", scale=0.5, seed=SEED):
            train_step(torch, model, x, targets)
    else:
        train_step(torch, model, x, targets)


def _run(torch: Any, dump_path: Path, npu: bool) -> None:
    from dumper import PrecisionDebugger

    model, x, targets = setup(torch, npu)
    debugger = PrecisionDebugger(dump_path=str(dump_path), hook_name="dump", rank=0, step=[0], model=model)
    debugger.configure_hook(mode="api_stack")
    debugger.start()
    try:
        run_step(torch, model, x, targets, npu)
    finally:
        debugger.stop()
        debugger.step()


def train_step(torch: Any, model: Any, x: Any, targets: tuple[Any, Any, Any]) -> None:
    heat, size, track = model(x)
    f = torch.nn.functional
    loss = f.mse_loss(heat, targets[0]) + f.l1_loss(size, targets[1]) + f.mse_loss(track, targets[2])
    loss.backward()


def write_demo(out_dir: str | Path) -> tuple[Path, Path]:
    """Write ``out_dir/npu`` and ``out_dir/cpu``; returns both dump roots.

    Raises ImportError when torch (the ``dump`` extra) is missing.
    """
    import torch

    out = Path(out_dir)
    npu, bench = out / "npu", out / "cpu"
    _run(torch, bench, npu=False)
    _run(torch, npu, npu=True)
    return npu, bench
