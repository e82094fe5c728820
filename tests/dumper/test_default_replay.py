"""``ptdbg-tui compare`` replays by default: on the demo's dumps the culprit is confirmed without
``--replay``; ``--no-replay`` and a reader without torch say in one note why it was not (later steps'
notes after a refuting replay: ``test_replay_e2e.py``)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from ptdbg_tui import cli
from ptdbg_tui.engine.replay import replayer as replay

#: Less than any spawned worker's start and import of torch takes.
IMPORT_S = 0.2


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


def test_the_budget_is_the_replays_time_not_torchs_import():
    """Before: the budget counted from before the worker had imported torch; on a loaded machine the import
    alone outlasted the default 20 s and the culprit went unconfirmed ("the replay budget ran out"). Now
    nothing is counted until the worker is ready."""
    with replay.Replayer() as worker:
        begun = time.monotonic()
        worker.start()
        worker.wait_ready()
        elapsed = time.monotonic() - begun
        # a spawned interpreter's import of torch takes well over 0.2 s anywhere: none of it is counted
        assert elapsed > IMPORT_S and worker.counted(begun) <= elapsed - IMPORT_S


def test_no_replay_says_the_verdict_stands_on_the_two_dumps(demo, tmp_path, capsys):
    code, out, _ = _compare(capsys, *demo, tmp_path, "--no-replay")
    assert code == cli.EXIT_OK
    assert "Culprit: VF_lstm_0_backward (backward): introduces error — inputs " in out
    assert "replay:" not in out
    assert out.splitlines()[-1] == (
        "note: not replayed (--no-replay): the suspects of step0/rank0 stand on the two dumps alone"
    )


def test_without_torch_the_compare_runs_and_one_note_says_why(demo, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # what ``import torch`` meets on a reader-only install
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


class _Refusing:
    """A finder that raises where torch is looked for (a hook or a broken install: no torch, no crash)."""

    def find_spec(self, name, path=None, target=None):
        if name == "torch":
            raise ModuleNotFoundError("No module named 'torch'")


def test_a_finder_that_raises_for_torch_means_no_torch(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch")
    monkeypatch.setattr(sys, "meta_path", [_Refusing(), *sys.meta_path])
    assert not replay.torch_importable()
    with pytest.raises(replay.ReplayUnavailable):
        replay.require_torch()
