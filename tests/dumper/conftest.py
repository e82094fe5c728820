"""A small real model (conv, batchnorm, LSTM, linear, softmax, loss) and a helper that dumps one
training step of it with the project's dumper."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from dumper import PrecisionDebugger
from dumper.faults import faulty_backward
from dumper.patching import STATE, TLS, slot_of
from ptdbg_tui.formats.layout import RankDump, discover
from ptdbg_tui.formats.pkl import read_pkl


class SmallNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.lstm = nn.LSTM(4, 8, batch_first=True)
        self.head = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn(self.conv(x)))
        seq = x.mean(dim=2).transpose(1, 2)  # (batch, width, channels)
        out, _ = self.lstm(seq)
        return F.softmax(self.head(out[:, -1]), dim=-1)


def dumped(tmp_path: Path, fn: Callable[[], object], **hook: object) -> tuple[object, dict]:
    """``fn`` run while dumping (``hook``: configure_hook's options, ``ctor``: the debugger's); its
    result and the pkl's records by name, with the dump itself under ``"_dump"``."""
    ctor = hook.pop("ctor", {})
    assert isinstance(ctor, dict)
    debugger = PrecisionDebugger(dump_path=str(tmp_path), **ctor)
    debugger.configure_hook(**hook)
    debugger.start()
    try:
        result = fn()
    finally:
        debugger.stop()
    (dump,) = discover(tmp_path)
    return result, {r.name: r for r in read_pkl(dump.records).tensors} | {"_dump": dump}


def make_inputs(device: str = "cpu") -> tuple[SmallNet, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)  # drawn on the CPU, then moved: the same numbers on every device
    model = SmallNet().to(device)
    x = torch.randn(2, 3, 8, 8).to(device)
    target = torch.tensor([1, 3], device=device)
    return model, x, target


def train_step(model: nn.Module, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    loss = F.nll_loss(torch.log(model(x)), target)
    loss.backward()
    return loss


DumpFn = Callable[..., RankDump]


@pytest.fixture
def dump_model(tmp_path: Path) -> DumpFn:
    """Dump one training step of :class:`SmallNet`; returns the rank dump."""
    counter = iter(range(100))

    def run(name: str | None = None, device: str = "cpu", fault: bool = False, **hook: object) -> RankDump:
        path = tmp_path / (name or f"dump{next(counter)}")
        model, x, target = make_inputs(device)
        debugger = PrecisionDebugger(dump_path=str(path), hook_name="dump", step=[0])
        debugger.configure_hook(**hook)
        ctx = faulty_backward(torch._VF, "lstm") if fault else contextlib.nullcontext()
        with ctx:
            debugger.start()
            train_step(model, x, target)
            debugger.stop()
        debugger.step()
        (dump,) = discover(path)
        return dump

    return run


@pytest.fixture(autouse=True)
def _dumper_left_clean():
    """No test may leave a session installed or the inside flag set."""
    yield
    assert STATE.session is None
    assert not TLS.inside
    assert all(slot_of(fn) is None for fn in (torch.add, torch.Tensor.__add__, torch._VF.lstm))
