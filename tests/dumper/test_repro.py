"""``ptdbg-tui repro``: the script it writes, run as the kernel team runs it (``python repro.py``, its own
process), exits 1 on a true culprit of a real dump (the demo's LSTM backward, a GELU forward that is 1%
off), 0 on an honest call, 2 when the call cannot be run; the command says "not replayable: <reason>"
without a traceback."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from dumper import PrecisionDebugger
from dumper.faults import replaced
from ptdbg_tui.cli import main
from ptdbg_tui.formats.calls import calls_path
from ptdbg_tui.formats.layout import RankDump, discover


@pytest.fixture(scope="module")
def demo_npu(tmp_path_factory) -> Path:
    from ptdbg_tui.demo import write_demo

    return write_demo(tmp_path_factory.mktemp("demo"))[0]


class GeluNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(16, 32), nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))


def _gelu_dump(path: Path, scale: float) -> RankDump:
    """One training step of :class:`GeluNet` whose GELU forward returns ``scale`` times the truth."""
    torch.manual_seed(0)
    model, x = GeluNet(), torch.randn(8, 16)
    debugger = PrecisionDebugger(dump_path=str(path))
    debugger.start()
    with replaced(F, "gelu", lambda fn: lambda *a, **k: fn(*a, **k) * scale):
        model(x).square().mean().backward()
    debugger.stop()
    (dump,) = discover(path)
    return dump


@pytest.fixture(scope="module")
def gelu_npu(tmp_path_factory) -> RankDump:
    return _gelu_dump(tmp_path_factory.mktemp("gelu"), 1.01)


def _repro(capsys, dump: Path, call: str, out: Path) -> tuple[int, str, str]:
    """``ptdbg-tui repro DUMP CALL -o OUT``: its exit status, stdout and stderr."""
    code = main(["repro", str(dump), call, "-o", str(out)])
    out, err = capsys.readouterr()
    return code, out, err


def _run(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python repro.py`` as the kernel team runs it: its own process, from another folder."""
    return subprocess.run(
        [sys.executable, str(folder / "repro.py"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=folder.parent,
    )


def test_the_demo_lstm_backward_repro_exits_1(demo_npu, tmp_path, capsys):
    code, out, err = _repro(capsys, demo_npu, "VF_lstm_0_backward", tmp_path / "r")
    assert code == 0, err
    assert "NPU kernel wrong on its own inputs (error 0.3" in out
    script = (tmp_path / "r" / "repro.py").read_text()
    modes = {p.name: oct(p.stat().st_mode & 0o777) for p in (tmp_path / "r").iterdir()}
    assert modes == {"repro.py": "0o640", "repro_data.pt": "0o640"}, "every file written: 0640"
    assert script.startswith('"""Repro of VF_lstm_0_backward: torch._VF.lstm, backward.')
    assert "demo.py:" in script and "self.lstm(seq)" in script  # the call site and its source line
    assert "T('VF_lstm_0_forward_input.0')" in script  # the arguments spelled out
    assert "import ptdbg_tui" not in script and "from ptdbg_tui" not in script
    done = _run(tmp_path / "r")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "VF_lstm_0_backward_output.0 (float32): error 0.29" in done.stdout
    assert "WRONG" in done.stdout and "re-run in the recorded dtype on cpu" in done.stdout
    assert "VF_lstm_0_backward_output.2.0" in done.stdout.splitlines()[-1]  # several wrong: in the plural
    assert "depart from float64 beyond what rounding allows: the kernel that produced them" in done.stdout


def test_an_honest_call_s_repro_exits_0(demo_npu, tmp_path, capsys):
    # its forward: the fault is in the backward only; named by its key
    code, out, err = _repro(capsys, demo_npu, "VF_lstm_0", tmp_path / "r")
    assert code == 0, err
    assert "within rounding" in out
    done = _run(tmp_path / "r")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "OK: the recorded results are within rounding of float64" in done.stdout


def test_a_faulty_gelu_forward_exits_1_and_the_next_call_0(gelu_npu, tmp_path, capsys):
    code, _, err = _repro(capsys, gelu_npu.records, "Functional_gelu_0_forward", tmp_path / "g")
    assert code == 0, err
    assert "approximate" in (tmp_path / "g" / "repro.py").read_text()  # a keyword argument, from the sidecar
    done = _run(tmp_path / "g", "--device", "cuda")  # no CUDA device here: the CPU instead
    assert done.returncode == 1, done.stdout + done.stderr
    assert "one-sided lean +0.01" in done.stdout
    # the linear after it computes right on its (wrong) inputs (the error is inherited); named by an entry
    code, _, err = _repro(capsys, gelu_npu.records, "Functional_linear_1_forward_output", tmp_path / "l")
    assert code == 0, err
    done = _run(tmp_path / "l")
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_one_bf16_unit_lean_is_wrong(tmp_path, capsys):
    """A GELU 0.5% high in a bfloat16 model: one unit of bfloat16, but every element leans the same way."""
    torch.manual_seed(0)
    model, x = GeluNet().to(torch.bfloat16), torch.randn(64, 16, dtype=torch.bfloat16)
    debugger = PrecisionDebugger(dump_path=str(tmp_path / "bf16"))
    debugger.start()
    with replaced(F, "gelu", lambda fn: lambda *a, **k: fn(*a, **k) * 1.005):
        model(x).float().square().mean().backward()
    debugger.stop()
    (dump,) = discover(tmp_path / "bf16")
    code, _, err = _repro(capsys, dump.records, "Functional_gelu_0_forward", tmp_path / "r")
    assert code == 0, err
    done = _run(tmp_path / "r")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "(bfloat16)" in done.stdout and "WRONG" in done.stdout


def test_a_call_whose_mask_came_by_keyword_gets_a_repro_that_exits_1(tmp_path, capsys):
    """``F.scaled_dot_product_attention(q, k, v, attn_mask=mask)`` 5% high: the mask, passed by keyword,
    was never recorded, so the command said 'not replayable: the keyword argument attn_mask … was not
    recorded'. Its data file now travels in the repro's data, and the script needs nothing else."""
    torch.manual_seed(0)
    q = torch.randn(2, 2, 6, 8)
    mask = torch.ones(6, 6, dtype=torch.bool).tril()
    debugger = PrecisionDebugger(dump_path=str(tmp_path / "sdpa"))
    debugger.start()
    with replaced(F, "scaled_dot_product_attention", lambda fn: lambda *a, **k: fn(*a, **k) * 1.05):
        F.scaled_dot_product_attention(q, q * 0.5, q * 2, attn_mask=mask)
    debugger.stop()
    (dump,) = discover(tmp_path / "sdpa")
    call = "Functional_scaled_dot_product_attention_0_forward"
    code, out, err = _repro(capsys, dump.records, call, tmp_path / "r")
    assert code == 0, err
    assert "NPU kernel wrong on its own inputs" in out
    assert f"'attn_mask': T('{call}_kwarg.attn_mask')" in (tmp_path / "r" / "repro.py").read_text()
    data = torch.load(tmp_path / "r" / "repro_data.pt")
    assert torch.equal(data[f"{call}_kwarg.attn_mask"], mask)
    done = _run(tmp_path / "r")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "WRONG" in done.stdout


def test_a_call_the_dump_does_not_hold(gelu_npu, tmp_path, capsys):
    code, _, err = _repro(capsys, gelu_npu.records, "Functional_gelu_9_forward", tmp_path / "r")
    assert code == 2 and "Traceback" not in err
    assert "the dump holds no call Functional_gelu_9_forward (did you mean Functional_gelu_0_forward" in err
    assert not (tmp_path / "r").exists()


def test_a_name_outside_torch_is_never_run(gelu_npu, tmp_path, capsys):
    """A sidecar that names another function (a damaged or hostile file) is refused, never looked up."""
    sidecar = calls_path(gelu_npu.records)
    lines = sidecar.read_text().splitlines()
    edited = [
        json.dumps({**json.loads(line), "fn": "os.system"}) if '"Functional_gelu_0"' in line else line
        for line in lines
    ]
    sidecar.write_text("\n".join(edited) + "\n")
    try:
        code, _, err = _repro(capsys, gelu_npu.records, "Functional_gelu_0_forward", tmp_path / "r")
    finally:
        sidecar.write_text("\n".join(lines) + "\n")
    assert code == 2
    assert (
        "Functional_gelu_0_forward: not replayable: the sidecar disagrees with the dump: it calls os.system, "
        "the dump records Functional_gelu (torch.nn.functional.gelu)"
    ) in err


def test_a_dump_folder_named_with_quotes_and_backslashes_still_gives_a_script(tmp_path, capsys):
    """The folder's name goes into the script's docstring: escaped, so the script still runs."""
    dump = _gelu_dump(tmp_path / 'run """ + os.system("x") + """ \\', 1.01)
    code, _, err = _repro(capsys, dump.records, "Functional_gelu_0_forward", tmp_path / "r")
    assert code == 0, err
    script = (tmp_path / "r" / "repro.py").read_text()
    compile(script, "repro.py", "exec")  # a syntax error if the name closed the docstring
    assert ast.get_docstring(ast.parse(script)).count('run """ + os.system("x") + """ \\') == 1
    done = _run(tmp_path / "r")
    assert done.returncode == 1, done.stdout + done.stderr


def test_a_random_op_is_not_replayable(tmp_path, capsys):
    torch.manual_seed(0)
    debugger = PrecisionDebugger(dump_path=str(tmp_path / "d"))
    debugger.start()
    F.dropout(torch.randn(4, 4), 0.5, training=True).sum()
    debugger.stop()
    (dump,) = discover(tmp_path / "d")
    code, _, err = _repro(capsys, dump.records, "Functional_dropout_0_forward", tmp_path / "r")
    assert code == 2 and "not replayable: a random op" in err


def test_the_script_without_its_data_says_why(demo_npu, tmp_path, capsys):
    assert _repro(capsys, demo_npu, "VF_lstm_0", tmp_path / "r")[0] == 0
    (tmp_path / "r" / "repro_data.pt").unlink()
    done = _run(tmp_path / "r")
    assert done.returncode == 2 and done.stdout.startswith("not replayable: ")
    assert "Traceback" not in done.stderr


def test_a_real_msprobe_dump_s_faulty_gelu(tmp_path, capsys):
    """msprobe's own dump (tests/fixtures/msprobe/custom_inplace: its GELU forward 1% high), named as
    msprobe names it."""
    npu = Path(__file__).parents[1] / "fixtures" / "msprobe" / "custom_inplace" / "npu"
    code, out, err = _repro(capsys, npu, "Functional.gelu.0", tmp_path / "g")
    assert code == 0, err
    assert "NPU kernel wrong on its own inputs (error 0.01" in out
    assert _run(tmp_path / "g").returncode == 1
    assert _repro(capsys, npu, "Functional.linear.1.forward", tmp_path / "l")[0] == 0
    done = _run(tmp_path / "l")
    assert done.returncode == 0, done.stdout + done.stderr


ORIGINAL = Path(__file__).parents[1] / "fixtures" / "original" / "interpolate_zeros"


def test_the_originals_call_is_rebuilt_with_the_keywords_its_source_line_spells(tmp_path, capsys):
    """The original ptdbg_ascend records no keyword arguments: ``F.interpolate(x, scale_factor=2.0,
    mode="nearest")`` cannot be rebuilt from its records alone (neither size nor scale_factor); its
    recorded source line gives them, and the bench's replay matching shows the rebuild right."""
    code = main(
        ["compare", str(ORIGINAL / "npu"), str(ORIGINAL / "bench"), "-o", str(tmp_path / "o"), "--replay"]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert (
        "Culprit: Functional_interpolate_0_forward (forward): confirmed by replay — NPU kernel wrong" in out
    )
    assert "Warning" not in err  # the rebuilt calls' deprecation notices stay in the worker
    code, out, err = _repro(capsys, ORIGINAL / "npu", "Functional_interpolate_0_forward", tmp_path / "r")
    assert code == 0, err
    script = (tmp_path / "r" / "repro.py").read_text()
    assert "rebuilt without them but scale_factor, mode, read from its source line" in script
    assert "'scale_factor': 2.0" in script and "'mode': 'nearest'" in script
    done = _run(tmp_path / "r")
    assert done.returncode == 1, done.stdout + done.stderr


def test_without_torch_the_command_says_how_to_install_it(demo_npu, tmp_path, capsys, monkeypatch):
    import importlib.util

    from ptdbg_tui.engine.replay.replayer import INSTALL

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "torch" else find_spec(name, *a)
    )
    code, _, err = _repro(capsys, demo_npu, "VF_lstm_0", tmp_path / "r")
    assert code == 2 and INSTALL in err and not (tmp_path / "r").exists()


def test_a_weight_gradient_msprobe_records_transposed_is_judged_as_the_replay_judges_it(tmp_path, capsys):
    """msprobe records linear's weight gradient as its autograd node has it, transposed: the repro
    stores it as the weight is, so an honest linear backward exits 0, as its replay says."""
    npu = Path(__file__).parents[1] / "fixtures" / "msprobe" / "tensor" / "npu"
    code, out, err = _repro(capsys, npu, "Functional.linear.0.backward", tmp_path / "l")
    assert code == 0 and "within rounding" in out, err
    done = _run(tmp_path / "l")
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_numpy_scalar_argument_is_rebuilt(tmp_path, capsys):
    """``x * np.float32(0.5)``: torch takes a numpy scalar as the number it holds; the sidecar records it
    so (it recorded an opaque numpy.float32, and the call was not replayable)."""
    import numpy as np

    debugger = PrecisionDebugger(dump_path=str(tmp_path / "d"))
    debugger.start()
    try:  # its product 1% high (torch.mul: the wrong __mul__ must not call itself)
        with replaced(torch.Tensor, "__mul__", lambda fn: lambda *a, **k: torch.mul(fn(*a, **k), 1.01)):
            (torch.randn(8, 16) * np.float32(0.5)).sum()
    finally:
        debugger.stop()
    (dump,) = discover(tmp_path / "d")
    code, out, err = _repro(capsys, dump.records, "Tensor___mul___0_forward", tmp_path / "r")
    assert code == 0, err
    assert "NPU kernel wrong on its own inputs (error 0.01" in out
    assert _run(tmp_path / "r").returncode == 1
