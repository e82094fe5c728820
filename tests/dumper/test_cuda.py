"""The same dumps on CUDA, compared against the CPU dump of the same seeded model.

Skipped without a GPU; ``bench/gpu_check.sh`` runs them on a lent GPU machine.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from dumper import PrecisionDebugger
from ptdbg_tui.compare.model import Status
from ptdbg_tui.engine.batch import compare_dumps
from ptdbg_tui.formats.layout import discover
from ptdbg_tui.formats.npy import load_npy, npy_path
from ptdbg_tui.formats.pkl import read_pkl

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.fixture(autouse=True)
def _exact_fp32():
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


def test_cuda_dump_matches_the_cpu_dump(dump_model) -> None:
    gpu, cpu = dump_model("gpu", device="cuda"), dump_model("cpu")
    assert gpu.rank == 0
    gpu_names = {r.name for r in read_pkl(gpu.records).tensors}
    assert gpu_names == {r.name for r in read_pkl(cpu.records).tensors}
    (outcome,) = compare_dumps(gpu.records, cpu.records, jobs=1)
    counts = outcome.counts()
    assert counts[Status.FAIL] == counts[Status.UNMATCHED] == counts[Status.ERROR] == 0, [
        (r.name, r.result.reason) for r in outcome.rows if r.status is Status.FAIL
    ]
    assert outcome.diagnosis.suspects == []


def test_cuda_wrong_lstm_backward_is_flagged(dump_model) -> None:
    gpu, cpu = dump_model("gpu", device="cuda", fault=True), dump_model("cpu")
    (outcome,) = compare_dumps(gpu.records, cpu.records, jobs=1)
    assert [s.call for s in outcome.diagnosis.suspects] == ["VF_lstm_0_backward"]


def test_cuda_bf16_and_fp16_values(tmp_path: Path) -> None:
    x = torch.linspace(-3, 3, 4096, device="cuda")
    debugger = PrecisionDebugger(dump_path=str(tmp_path))
    debugger.start()
    torch.tanh(x.bfloat16())
    torch.abs(torch.full((10000,), 1000.0, dtype=torch.float16, device="cuda"))
    debugger.stop()
    (dump,) = discover(tmp_path)
    recs = {r.name: r for r in read_pkl(dump.records).tensors}
    out = recs["Torch_tanh_0_forward_output"]
    array = load_npy(npy_path(dump.tensor_dir, out.name))
    assert out.dtype == "torch.bfloat16" and array.dtype == np.float32
    np.testing.assert_array_equal(array, torch.tanh(x.bfloat16()).float().cpu().numpy())
    assert recs["Torch_abs_0_forward_output"].stats[3] == pytest.approx(100000.0, rel=1e-5)
