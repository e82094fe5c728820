"""Two training steps of the demo's model, for ``ptdbg-dump run narrow_job.py npu|bench``: the "NPU"
run is nudged by float noise and its LSTM backward is wrong (the narrowing loop's tests)."""

import sys

import torch

from ptdbg_tui import demo

npu = sys.argv[1] == "npu"
model, x, targets = demo.setup(torch, npu)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(2):
    opt.zero_grad()
    demo.run_step(torch, model, x, targets, npu)
    opt.step()
