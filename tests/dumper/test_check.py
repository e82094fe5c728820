"""``ptdbg-tui check`` on one dump alone: real models on CPU dumped by the project's dumper (an fp16
overflow, a kernel that returns NaN from finite inputs, a NaN that comes with the data, a clean run),
the original's and msprobe's fixtures, and inputs it cannot read."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from torch import nn

from dumper import PrecisionDebugger
from dumper.faults import replaced
from ptdbg_tui import cli
from ptdbg_tui.compare.diagnosis.nonfinite import OriginKind, Overflow
from ptdbg_tui.engine.replay.check import check_dump
from ptdbg_tui.formats.layout import discover

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


class _Net(nn.Module):
    """A layer, then the op whose output goes non-finite, then a sum: the origin is the middle call."""

    def __init__(self, dtype: torch.dtype) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8).to(dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.exp(self.fc(x) * 16).sum()


def _dump(path: Path, x: torch.Tensor, dtype: torch.dtype = torch.float32, **hook: object) -> Path:
    torch.manual_seed(0)
    model = _Net(dtype)
    x = x.to(dtype)  # before the dump: its own call would be the first
    debugger = PrecisionDebugger(dump_path=str(path), model=model)
    if hook:
        debugger.configure_hook(**hook)
    debugger.start()
    try:
        model(x)
    finally:
        debugger.stop()
    return path


def _check(path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    code = cli.main(["check", str(path), *extra])
    out, err = capsys.readouterr()
    assert code == cli.EXIT_OK, err
    return out


def test_an_fp16_overflow_is_named_at_exp_and_the_replay_says_overflow(tmp_path, capsys):
    x = torch.linspace(-3, 3, 64).reshape(8, 8)
    dump = _dump(tmp_path, x, torch.float16)
    out = _check(dump, capsys)
    head = re.search(
        r"Non-finite origin: Torch_exp_0_forward \(forward\): output(\.0)? has (\d+) Inf, inputs finite", out
    )
    assert head, out
    assert "    module: (model) · _Net" in out, out
    assert re.search(
        r"    source: .*test_check\.py:\d+  return torch\.exp\(self\.fc\(x\) \* 16\)\.sum\(\)", out
    ), out
    assert "    replay: overflow — the float64 result reaches" in out and "beyond float16's 65504" in out, out
    # the count is the dump's own: the fp16 run's exp overflows where its argument passes log(65504)
    with torch.no_grad():
        torch.manual_seed(0)
        y = _Net(torch.float16).fc(x.to(torch.float16)) * 16
    assert int(head.group(2)) == int(torch.isinf(torch.exp(y)).sum()) > 0


def test_a_kernel_that_returns_nan_from_finite_inputs_is_found_wrong_by_replay(tmp_path, capsys):
    def nan_first(exp):
        def bad(t, *a, **k):
            out = exp(t, *a, **k)
            out.view(-1)[:3] = float("nan")
            return out

        return bad

    x = torch.linspace(-1, 1, 64).reshape(8, 8)
    exp = torch.exp
    with replaced(torch, "exp", nan_first):
        checked = check_dump(str(_dump(tmp_path, x)))
    origin = checked.origin
    assert origin is not None and origin.call == "Torch_exp_0_forward" and origin.kind is OriginKind.KERNEL
    assert [(f.nan, f.inf) for f in origin.found] == [(3, 0)]
    assert origin.replay is not None and origin.replay.outcome is Overflow.KERNEL_WRONG, origin.not_replayed
    out = _check(tmp_path, capsys)
    assert "output" in out and "has 3 NaN, inputs finite" in out, out
    assert "    replay: kernel wrong on its inputs — the float64 result is finite (max " in out, out
    assert torch.exp is exp  # restored


def test_a_nan_that_comes_with_the_data_names_no_kernel(tmp_path, capsys):
    x = torch.linspace(-1, 1, 64).reshape(8, 8)
    x[2, 3] = float("nan")
    out = _check(_dump(tmp_path, x), capsys)
    first = out.splitlines()[0]
    assert first.startswith(
        "Non-finite origin: the data, before any dumped call: Functional_linear_0_forward"
    ), out
    assert first.endswith(": input.0 has 1 NaN on entry, made by no dumped call"), out
    assert "replay:" not in out  # no kernel to replay
    assert "Torch_exp" not in out


def test_a_clean_dump_has_no_origin(tmp_path, capsys):
    dump = _dump(tmp_path, torch.linspace(-1, 1, 64).reshape(8, 8))
    assert _check(dump, capsys).splitlines() == [f"No non-finite value in {dump}"]


def test_statistics_alone_name_the_origin_and_say_why_it_is_not_replayed(tmp_path, capsys):
    x = torch.linspace(-3, 3, 64).reshape(8, 8)
    out = _check(_dump(tmp_path, x, torch.float16, summary_only=True), capsys)
    assert re.search(r"Non-finite origin: Torch_exp_0_forward \(forward\): output(\.0)?'s max is inf", out), (
        out
    )
    assert "    replay: not replayed: the dump holds statistics only" in out, out
    assert "--no-replay" in _check(tmp_path, capsys, "--no-replay")


def test_msprobe_log_of_a_negative_is_named_and_the_replay_clears_the_kernel(capsys):
    dump = FIXTURES / "msprobe" / "scenario_softplus_negative_log_nan" / "npu"
    out = _check(dump, capsys)
    assert out.startswith(
        "Non-finite origin: Torch.log.0.forward (forward): output.0 has 61 NaN, inputs finite"
    ), out
    assert "models.py:367  return self.head(torch.log(rate))" in out, out
    assert "    replay: not the kernel — the float64 result is NaN too" in out, out


@pytest.mark.parametrize(
    "dump",
    [
        FIXTURES / "original" / "interpolate_zeros" / "npu",
        FIXTURES / "msprobe" / "statistics" / "npu",
        FIXTURES / "msprobe" / "mix" / "npu",
        FIXTURES / "ptdbg_legacy" / "npu_test.pkl",
    ],
)
def test_the_finite_fixtures_of_both_tools_have_no_origin(dump, capsys):
    assert _check(dump, capsys).startswith("No non-finite value in "), dump


def test_what_cannot_be_read_is_one_line_and_exit_2(tmp_path, capsys):
    assert cli.main(["check", str(tmp_path / "missing")]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("ptdbg-tui check: error: ") and len(err.splitlines()) == 1, err
    dump = _dump(tmp_path / "d", torch.linspace(-1, 1, 64).reshape(8, 8))
    (rank,) = discover(dump)
    rank.records.write_bytes(b"\x00\xffnot a pkl line\n{[}\n")
    assert cli.main(["check", str(dump)]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert (
        err.startswith("ptdbg-tui check: error: ") and "Traceback" not in err and len(err.splitlines()) == 1
    ), err


def test_without_torch_the_origin_is_still_named(tmp_path, capsys, monkeypatch):
    import ptdbg_tui.engine.replay.check as check

    monkeypatch.setattr(check, "torch_importable", lambda: False)
    out = _check(_dump(tmp_path, torch.linspace(-3, 3, 64).reshape(8, 8), torch.float16), capsys)
    assert out.startswith("Non-finite origin: Torch_exp_0_forward (forward): "), out
    assert "    replay: not replayed: replay needs torch: pip install" in out, out


def test_memory_an_initialiser_overwrites_is_no_data(tmp_path, capsys):
    """``uniform_`` on a tensor that holds NaN (uninitialised memory, as ``torch.empty`` gives): its
    first input is not data, and what it writes is finite."""
    t = torch.full((8, 8), float("nan"))
    debugger = PrecisionDebugger(dump_path=str(tmp_path))
    debugger.start()
    try:
        torch.manual_seed(0)
        torch.tanh(t.uniform_())
    finally:
        debugger.stop()
    assert _check(tmp_path, capsys).startswith("No non-finite value in "), capsys.readouterr()


async def test_the_app_opened_on_one_folder_shows_the_origin(tmp_path):
    from ptdbg_tui.app.check import CheckApp

    dump = _dump(tmp_path, torch.linspace(-3, 3, 64).reshape(8, 8), torch.float16)
    app = CheckApp(str(dump))
    async with app.run_test() as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        text = str(app.query_one("#check").render())
    assert text.startswith("Non-finite origin: Torch_exp_0_forward (forward): output"), text
    assert "    replay: overflow — the float64 result reaches" in text, text


def test_the_cli_opens_the_check_app_on_one_folder(tmp_path, monkeypatch):
    from ptdbg_tui.app.check import CheckApp

    opened: list[str] = []
    monkeypatch.setattr(CheckApp, "run", lambda self: opened.append(self.path))
    assert cli.main([str(tmp_path)]) == cli.EXIT_OK
    assert opened == [str(tmp_path)]


def test_a_gradient_that_overflows_fp16_is_named_at_its_backward_call(tmp_path, capsys):
    """A loss scale too large: exp's forward is finite, its gradient (8 · e^10) is not."""
    x = torch.linspace(0, 10, 16, dtype=torch.float16).requires_grad_()
    debugger = PrecisionDebugger(dump_path=str(tmp_path))
    debugger.start()
    try:
        torch.exp(x).backward(gradient=torch.full_like(x, 8))
    finally:
        debugger.stop()
    out = _check(tmp_path, capsys)
    assert out.startswith(
        "Non-finite origin: Torch_exp_0_backward (backward): output.0 has 2 Inf, inputs finite"
    ), out
    assert "    replay: overflow — the float64 result reaches 1.76e+05, beyond float16's 65504" in out, out


def test_a_folder_of_steps_is_walked_to_the_first_step_with_a_non_finite_value(tmp_path, capsys):
    """Three steps and no --step: steps 0 and 1 are finite, step 2's input grows until exp overflows
    float16; check names step 2's origin, where no step was guessed, and each step's count."""
    torch.manual_seed(0)
    model = _Net(torch.float16)
    debugger = PrecisionDebugger(dump_path=str(tmp_path), model=model, step=[0, 1, 2])
    for scale in (0.01, 0.02, 4.0):
        x = (torch.linspace(-3, 3, 64).reshape(8, 8) * scale).to(torch.float16)
        debugger.start()
        model(x)
        debugger.stop()
        debugger.step()
    assert len(discover(tmp_path)) == 3
    out = _check(tmp_path, capsys)
    lines = out.splitlines()
    assert (
        lines[0].startswith("First dump with a non-finite value: step2")
        and "(3 dumps, 3 steps read)" in lines[0]
    )
    assert re.search(
        r"^Non-finite origin: Torch_exp_\d+_forward \(forward\): output.* inputs finite$", out, re.M
    )
    assert "replay: overflow" in out
    out = _check(tmp_path, capsys, "--step", "1")  # one dump: its own report, as before
    assert out.startswith("No non-finite value in") and "read)" not in out
    out = _check(tmp_path, capsys, "--rank", "0", "--no-replay")
    assert "(3 dumps, 3 steps read)" in out and "not replayed" in out


def test_a_folder_of_finite_steps_says_how_many_it_read(tmp_path, capsys):
    torch.manual_seed(0)
    model = _Net(torch.float32)
    debugger = PrecisionDebugger(dump_path=str(tmp_path), model=model, step=[0, 1])
    for _ in range(2):
        debugger.start()
        model(torch.linspace(-1, 1, 64).reshape(8, 8))
        debugger.stop()
        debugger.step()
    out = _check(tmp_path, capsys)
    assert out.startswith("No non-finite value in") and "(2 dumps, 2 steps read)" in out, out
