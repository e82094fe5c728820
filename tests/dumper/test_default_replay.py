"""``ptdbg-tui compare`` replays by default: on the demo's dumps the culprit is confirmed without
``--replay``; ``--no-replay`` and a reader without torch say in one note why it was not; later steps'
notes name the earlier step's culprit as the replay leaves it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from dumper import PrecisionDebugger
from dumper.faults import replaced
from ptdbg_tui import cli
from ptdbg_tui.compare.replay.verdict import REFUTED, CallReplay, SideVerdict
from ptdbg_tui.engine import replay
from ptdbg_tui.engine.batch import compare_dumps


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> tuple[Path, Path]:
    from ptdbg_tui.demo import write_demo

    return write_demo(tmp_path_factory.mktemp("demo"))


def _compare(capsys, npu: Path, bench: Path, out: Path, *options: str) -> tuple[int, str, str]:
    code = cli.main(["compare", str(npu), str(bench), "-o", str(out), "--no-progress", *options])
    got = capsys.readouterr()
    return code, got.out, got.err


def test_the_culprit_is_confirmed_without_asking(demo, tmp_path, capsys):
    """Before: the report named the culprit on the two dumps' evidence alone unless --replay was given."""
    code, out, _ = _compare(capsys, *demo, tmp_path)
    assert code == cli.EXIT_OK
    assert "Culprit: VF_lstm_0_backward (backward): confirmed by replay — NPU kernel wrong" in out, out
    assert "; two dumps: introduces error — inputs " in out
    # the default replays the suspects whose inputs differ, not every call (--replay: 40 on the demo)
    assert "  replay: 1 call(s) replayed on each side's own inputs in float64: 1 confirmed, 0 refuted" in out
    assert "not replayed" not in out


def test_no_replay_says_the_verdict_stands_on_the_two_dumps(demo, tmp_path, capsys):
    code, out, _ = _compare(capsys, *demo, tmp_path, "--no-replay")
    assert code == cli.EXIT_OK
    assert "Culprit: VF_lstm_0_backward (backward): introduces error — inputs " in out
    assert "replay:" not in out
    assert out.splitlines()[-1] == (
        "note: not replayed (--no-replay): the suspects of step0/rank0 stand on the two dumps alone"
    )


def test_without_torch_the_compare_runs_and_one_note_says_why(demo, tmp_path, capsys, monkeypatch):
    def no_torch() -> None:
        raise replay.ReplayUnavailable(replay.INSTALL)

    monkeypatch.setattr(replay, "require_torch", no_torch)
    code, out, err = _compare(capsys, *demo, tmp_path)
    assert code == cli.EXIT_OK and err == ""
    assert "Culprit: VF_lstm_0_backward (backward): introduces error — inputs " in out
    notes = [line for line in out.splitlines() if "not replayed" in line]
    assert notes == [
        f"note: not replayed ({replay.INSTALL}): the suspects of step0/rank0 stand on the two dumps alone"
    ]


def test_replay_and_no_replay_together_are_refused(demo, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["compare", str(demo[0]), str(demo[1]), "-o", str(tmp_path), "--replay", "--no-replay"])
    assert e.value.code == cli.EXIT_USAGE
    assert "not allowed with argument" in capsys.readouterr().err


def _two_steps(path: Path, fault: bool) -> Path:
    """Two SGD steps of a small MLP; ``fault``: the GELU is 5% off at step 0 (a kernel the two dumps
    name there), and step 1's parameters inherit it."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    debugger = PrecisionDebugger(dump_path=str(path), hook_name="dump", step=[0, 1])
    for step in range(2):
        x = torch.randn(5, 8)
        debugger.start()
        off = fault and step == 0
        with replaced(
            F, "gelu", lambda gelu, off=off: lambda t, *a, **k: gelu(t, *a, **k) * (1.05 if off else 1)
        ):
            loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        debugger.stop()
        debugger.step()
    return path


def test_a_later_steps_note_names_the_culprit_the_replay_leaves(tmp_path):
    """The whole GPT run: step 0's Tensor_addcdiv__4_forward was refuted by the replay, and step 1 still
    read 'parameters differ on entry to step 1: inherited from step 0, whose culprit is
    Tensor_addcdiv__4_forward'. Here step 0's culprit is refuted by a replay given to the fold."""
    outcomes = compare_dumps(
        _two_steps(tmp_path / "npu", True), _two_steps(tmp_path / "bench", False), jobs=1
    )
    first, second = outcomes
    culprit = first.diagnosis.culprit
    assert culprit is not None and culprit.call == "Functional_gelu_0_forward"
    said = f"inherited from step 0, whose culprit is {culprit.call}"
    assert any(said in n for n in second.diagnosis.notes), second.diagnosis.notes
    honest = SideVerdict(1e-8, 1e-5, 0.0, 1.0, f"{culprit.call}_output")
    refuted = CallReplay(culprit.call, honest, honest, True)
    assert refuted.outcome == REFUTED
    replay._fold_outcomes(outcomes, [([culprit.call], {culprit.call: refuted}), ([], {})])
    assert first.diagnosis.culprit is None or first.diagnosis.culprit.call != culprit.call
    assert "refuted, no longer suspects: Functional_gelu_0_forward" in first.diagnosis.replay
    assert not any(said in n for n in second.diagnosis.notes), second.diagnosis.notes
