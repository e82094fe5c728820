"""Replay in the app, on the demo dumps with the real replay worker (torch in its own process): the culprit
becomes "confirmed by replay" once the comparison settles, ``r`` on an honest call shows "refuted", a
refuted suspect drops from the bar, ``R`` writes a repro; without torch, a notice says how to install it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from ptdbg_tui.app.screens import ReproScreen
from ptdbg_tui.compare.diagnosis.replay_outcome import CallReplay, SideVerdict
from ptdbg_tui.compare.replay.replayed import with_replays
from ptdbg_tui.compare.report.words import note_texts
from ptdbg_tui.engine.live.updates import EngineUpdate, PairDelta
from ptdbg_tui.engine.replay.replayer import INSTALL


def _detail(app, ui) -> str:
    """The detail panel's text, its wrapped lines joined."""
    return " ".join(ui.detail_text(app).split())


def _said(app, text: str) -> bool:
    return any(text in n.message for n in app._notifications)


def _confirmed(app) -> bool:
    """The culprit is confirmed by replay."""
    culprit = app.model.first_culprit()
    return culprit is not None and culprit[0].confirmed


async def _select(pilot, ui, name: str) -> None:
    """Put the cursor on the node named ``name`` (the search's first hit) and close the search."""
    await pilot.press("slash", *name, "enter", "escape")
    await ui.wait_until(
        pilot,
        lambda: (
            pilot.app.call_tree.cursor_model_node is not None
            and pilot.app.call_tree.cursor_model_node.key == name
        ),
    )


async def test_the_culprit_is_confirmed_once_the_comparison_settles(demo_dumps, ui):
    app = ui.app(*demo_dumps, replay_budget_s=600)
    async with app.run_test(size=ui.size) as pilot:
        await ui.settle(pilot)
        await ui.wait_until(pilot, lambda: _confirmed(app))
        bar = str(app.query_one("#diagnosis").render())
        assert "Culprit VF_lstm_0_backward" in bar
        assert "confirmed by replay — NPU kernel wrong on its own inputs (error 0.3, allowed" in bar
        await ui.wait_until(pilot, lambda: app.model.progress.replayed == app.model.progress.replaying > 1)
        await pilot.press("c")
        text = _detail(app, ui)
        assert "Culprit: confirmed by replay — NPU kernel wrong on its own inputs" in text
        assert "; bench " in text and "two dumps: introduces error" in text
        await _select(pilot, ui, "Functional_linear_0_forward")  # in the round: it runs before any failure
        assert "Replay: refuted by replay — both within rounding on their own inputs" in _detail(app, ui)
        # re-matched: every pair diagnosed again, the replays folded in again, none run again
        replayed, before = app.model.progress.replaying, app.model.diagnoses.copy()
        await pilot.press("m")
        await ui.wait_until(
            pilot,
            lambda: (
                app.model.match_modes() == "exact"
                and all(app.model.diagnoses[k] is not d for k, d in before.items())
            ),
        )
        await ui.settle(pilot)
        assert _confirmed(app) and app.model.progress.replaying == replayed and not app.engine._replay.busy


async def test_r_replays_an_honest_call_and_shows_refuted(demo_dumps, ui):
    app = ui.app(*demo_dumps)  # no replay until asked
    async with app.run_test(size=ui.size) as pilot:
        await ui.settle(pilot)
        await _select(pilot, ui, "Functional_linear_0_forward")
        assert "Replay" not in _detail(app, ui)
        await pilot.press("r")
        assert _said(app, "Replaying Functional_linear_0_forward")
        await ui.wait_until(pilot, lambda: "refuted by replay" in _detail(app, ui))
        text = _detail(app, ui)
        assert "Replay: refuted by replay — both within rounding on their own inputs (NPU " in text
        assert _said(app, "Functional_linear_0_forward: refuted by replay")
        await pilot.press("down")  # an entry of the call shows its call's replay too
        assert "Replay of Functional_linear_0_forward: refuted by replay" in _detail(app, ui)
        culprit = app.model.first_culprit()
        assert culprit is not None and culprit[0].call == "VF_lstm_0_backward" and not culprit[0].confirmed


async def test_r_on_a_module_says_to_pick_a_call(demo_dumps, ui):
    app = ui.app(*demo_dumps)
    async with app.run_test(size=ui.size) as pilot:
        await ui.settle(pilot)
        await _select(pilot, ui, "track.lstm")
        await pilot.press("r")
        assert _said(app, "Select a call or one of its entries to replay it.")


async def test_a_refuted_suspect_drops_and_the_bar_moves_on(demo_dumps, ui):
    """The engine sends a diagnosis whose suspect the replay refuted: the bar no longer names it and
    says what the replay found."""
    app = ui.app(*demo_dumps)
    async with app.run_test(size=ui.size) as pilot:
        await ui.settle(pilot)
        ((info, rows),) = app.engine.pairs()
        diagnosis = app.model.diagnoses[info.key]
        fine = SideVerdict(3e-8, 1.6e-5, 0.0, 1e-6, "VF_lstm_0_backward_output.0")
        refuted = CallReplay("VF_lstm_0_backward", fine, replace(fine, error=4e-8))
        update = EngineUpdate(
            {info.key: PairDelta(info, diagnosis=with_replays(diagnosis, rows, {refuted.call: refuted}))}
        )
        app.model.load(update)
        app.model.apply()
        app.diagnosis_bar.redraw()
        bar = str(app.query_one("#diagnosis").render())
        assert "Culprit" not in bar and "yet no call judged introduces an error beyond rounding" in bar
        assert (
            "replay: 1 call(s) replayed on each side's own inputs in float64: 0 confirmed, 1 refuted" in bar
        )
        assert app.model.diagnoses[info.key] is not diagnosis and diagnosis.suspects, "the sent one is a copy"


async def test_shift_r_writes_a_repro_that_exits_1(demo_dumps, ui, tmp_path):
    app = ui.app(*demo_dumps)
    async with app.run_test(size=ui.size) as pilot:
        await ui.settle(pilot)
        await pilot.press("c", "R")
        assert isinstance(app.screen, ReproScreen)
        field = app.screen.query_one("#repro-folder")
        field.value = str(tmp_path / "lstm")
        await pilot.press("enter")
        await ui.wait_until(pilot, lambda: _said(app, f"Wrote {tmp_path / 'lstm' / 'repro.py'}"))
        assert _said(app, "NPU kernel wrong on its own inputs")
    done = subprocess.run(
        [sys.executable, str(tmp_path / "lstm" / "repro.py")], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1, done.stdout + done.stderr


async def test_without_torch_a_notice_says_how_to_install_it(demo_dumps, ui, monkeypatch):
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "torch" else find_spec(name, *a)
    )
    app = ui.app(*demo_dumps, replay_budget_s=600)
    async with app.run_test(size=ui.size) as pilot:
        await ui.settle(pilot)
        await ui.wait_until(pilot, lambda: _said(app, f"Replay is off: {INSTALL}"))  # not run once settled
        assert f"unconfirmed: {INSTALL}" in _bar(app), "the culprit's mark says why it stays unconfirmed"
        await pilot.press("c", "r")
        assert _said(app, f"No replay here: {INSTALL}")
        assert not app.model.first_culprit()[0].replay


def test_the_app_s_command_line_sets_the_budget():
    from ptdbg_tui.cli import app_parser, options_from

    args = app_parser().parse_args(["npu", "bench", "--replay-budget", "5", "--replay-top", "3"])
    options = options_from(args)
    assert (options.replay_budget_s, options.replay_top) == (5.0, 3)
    assert options_from(app_parser().parse_args(["npu", "bench"])).replay_budget_s == 60.0


async def test_the_budget_stops_the_round_and_says_so(demo_dumps, ui):
    app = ui.app(*demo_dumps, replay_budget_s=1e-6)
    async with app.run_test(size=ui.size) as pilot:
        await ui.settle(pilot)
        # the budget counts once the worker has imported torch: the calls it holds by then still finish
        await ui.wait_until(
            pilot,
            lambda: _said(app, "Replay: the budget of 1e-06 s ran out with ") and not app.engine._replay.busy,
        )
        assert app.model.progress.replayed == app.model.progress.replaying < 33


async def test_a_statistics_only_pair_has_nothing_to_replay(demo_dumps, ui):
    app = ui.app(*demo_dumps, summary=True)
    async with app.run_test(size=ui.size) as pilot:
        await ui.settle(pilot)
        await pilot.press("c", "r")
        assert _said(
            app, "VF_lstm_0_backward: compared from statistics, without tensors: nothing to replay from."
        )


async def test_at_step_2_of_an_every_step_fault_the_replay_names_it_and_the_panel_agrees(ui, tmp_path):
    """bench/divergence.py's GELU fault at step 2: its inputs already differ, the two dumps find no error
    of its own; the replay confirms it, and the panel says so once (not also "no error of its own")."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from diagnosis_scenarios.steps import ISSUE15

    (scenario,) = [s for s in ISSUE15 if s.name == "gelu_tail_tile_every_step"]
    npu, bench = scenario.dump(tmp_path, 0)
    app = ui.app(npu, bench, step=2, replay_budget_s=600)
    async with app.run_test(size=ui.size) as pilot:
        await ui.settle(pilot)
        await ui.wait_until(pilot, lambda: _confirmed(app))
        await pilot.press("c")
        text = _detail(app, ui)
        assert text.startswith("Functional_gelu_1_forward Culprit: confirmed by replay — NPU kernel wrong"), (
            text
        )
        assert "no error of its own" not in text and "Replay:" not in text


async def test_a_held_step_s_parameters_are_inherited_from_a_step_the_app_does_not_hold(ui, tmp_path):
    """``--step 2`` of an every-step weight-gradient fault: the app reads the steps before from their
    statistics, as the CLI does, so the parameters that differ on entry are step 0's error, not the
    culprit."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from diagnosis_scenarios.steps import ISSUE15

    (scenario,) = [s for s in ISSUE15 if s.name == "linear_weight_grad_tail_tile"]
    npu, bench = scenario.dump(tmp_path, 0)
    app = ui.app(npu, bench, step=2)
    async with app.run_test(size=ui.size) as pilot:
        await ui.settle(pilot)

        def linked() -> bool:
            return any(n for d in app.model.diagnoses.values() for n in note_texts(d))

        await ui.wait_until(pilot, linked)
        (d,) = app.model.diagnoses.values()
        assert note_texts(d) == [
            "parameters differ on entry to step 2: inherited from step 0, whose culprit, from its "
            "statistics, is Functional_linear_1_backward"
        ]
        assert not d.suspects, "the inherited parameters are no culprit"
        app.diagnosis_bar.redraw()
        bar = "\n".join(line.plain for line in app.diagnosis_bar.lines)
        # the step's failures are explained in the bar by what it inherits, before all else
        assert "entries fail" in bar and "Culprit" not in bar, bar
        assert "Parameters differ on entry to step 2: inherited from step 0" in bar, bar


async def test_shift_r_offers_each_pair_its_own_folder_for_one_call_name(steps_dumps, ui):
    """Steps 0 and 2 name the same call: the second repro must not land on the first one's files."""
    app = ui.app(*steps_dumps)
    async with app.run_test(size=ui.size) as pilot:
        await ui.settle(pilot)
        offered = []
        for _ in range(2):
            await pilot.press("c", "R")
            assert isinstance(app.screen, ReproScreen)
            offered.append(app.screen.query_one("#repro-folder").value)
            await pilot.press("escape")
        assert offered == ["./repro_step0_rank0_VF_lstm_0_backward", "./repro_step2_rank0_VF_lstm_0_backward"]


def _bar(app) -> str:
    app.diagnosis_bar.redraw()
    return " ".join(line.plain for line in app.diagnosis_bar.lines)


async def test_the_culprit_is_provisional_until_its_replay_ends(demo_dumps, ui):
    """For as long as the replay ran (45 s on the GPT run), the app showed its culprit as final."""
    app = ui.app(*demo_dumps, replay_budget_s=600)
    async with app.run_test(size=ui.size) as pilot:
        await ui.wait_until(pilot, lambda: "Culprit VF_lstm_0_backward" in _bar(app))
        assert "provisional: replay" in _bar(app), _bar(app)  # to come, or replaying
        await ui.wait_until(pilot, lambda: _confirmed(app))
        bar = _bar(app)
        assert "confirmed by replay — NPU kernel wrong" in bar and "provisional" not in bar, bar


async def test_with_no_budget_the_mark_says_why_and_r_updates_it_in_place(demo_dumps, ui):
    app = ui.app(*demo_dumps, replay_budget_s=0)
    async with app.run_test(size=ui.size) as pilot:
        await ui.settle(pilot)
        assert "unconfirmed: --replay-budget 0" in _bar(app), _bar(app)
        await pilot.press("c", "r")
        await ui.wait_until(pilot, lambda: _confirmed(app))
        bar = _bar(app)
        assert (
            "Culprit VF_lstm_0_backward" in bar and "confirmed by replay" in bar and "unconfirmed" not in bar
        )
