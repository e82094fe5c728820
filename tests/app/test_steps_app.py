"""The Steps screen (issue 30): the app on two trainings' monitor folders, made by running
bench/monitor_job.py's GPT under ``ptdbg-dump run --monitor`` (a GELU 0.5% off from step 6 on the NPU
side): the verdict in ``ptdbg-tui monitor``'s words, the divergent module selected and plotted, the
narrow key writing what ``--narrow`` writes, a stream followed while its writer appends to it, and the
inputs it cannot compare said on the screen."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from dumper.cli import main as dump_main
from ptdbg_tui.app.screens import HelpScreen, NarrowScreen, TextScreen
from ptdbg_tui.app.steps import StepsApp, StepsChart, opens_on_steps
from ptdbg_tui.cli import main as tui_main
from ptdbg_tui.formats import monitor as fmon
from ptdbg_tui.formats.dump_options import read_options

pytest.importorskip("pyarrow")

JOB = Path(__file__).resolve().parents[2] / "bench" / "monitor_job.py"
VERDICT = "First divergent step: 6, module blocks.2.mlp.gelu: forward: "
SIZE = (120, 40)


@pytest.fixture(scope="module")
def monitors(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("monitors")
    for side in ("npu", "bench"):
        args = ["run", str(JOB), "--monitor", str(root / side), "--", side, "kernel"]
        assert dump_main([*args, "--steps", "8", "--at", "6"]) == 0
    return root / "npu", root / "bench"


def _text(app: StepsApp) -> str:
    return str(app.steps.query_one("#steps-text").render())


async def _read_whole(ui, pilot) -> None:
    await ui.wait_until(pilot, lambda: not pilot.app.steps.state.following)
    await pilot.wait_for_scheduled_animations()  # the screen laid out again


async def test_the_app_opens_on_the_steps_screen_with_the_verdict_and_the_divergent_module(
    monitors: tuple[Path, Path], small_dumps: tuple[Path, Path], ui
) -> None:
    assert opens_on_steps(*monitors)
    assert not opens_on_steps(*small_dumps)
    app = StepsApp(*monitors)
    async with app.run_test(size=SIZE) as pilot:
        await _read_whole(ui, pilot)
        screen = app.steps
        text = _text(app)
        assert text.startswith("both runs ended: 8 steps aligned")
        # the manifests first (the scripts' arguments), then the verdict, as the CLI says them
        assert text.index("argument 1 npu against bench") < text.index(VERDICT)
        assert "rank 0: NPU 8 steps, bench 8, 8 aligned" in text
        # the divergent module selected and plotted, marked in the list
        modules = screen.rank.curves.modules
        assert modules[screen.module] == "blocks.2.mlp.gelu"
        table = screen.query_one("#steps-modules")
        assert table.cursor_row == screen.module
        assert str(table.get_row_at(screen.module)[0]).startswith("● blocks.2.mlp.gelu")
        norm, diff = (screen.query_one(f"#chart-{n}", StepsChart) for n in ("norm", "difference"))
        assert norm._drawn is not None and "blocks.2.mlp.gelu" in norm._drawn.title
        assert diff._drawn is not None and diff._drawn.vline == 6
        assert "Narrow" in ui.screen_text(app)  # the footer names the key
        # another module chosen: its curves
        await pilot.press("k")
        await ui.wait_until(pilot, lambda: screen.module == modules.index("blocks.2.mlp.gelu") - 1)
        assert diff._drawn is not None and modules[screen.module] in diff._drawn.title
        await pilot.press("question_mark")  # the screen's own keys
        await ui.wait_until(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.wait_for_scheduled_animations()
        assert "The Steps screen" in ui.screen_text(app)


async def test_the_narrow_key_writes_what_monitor_narrow_writes(
    monitors: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], ui
) -> None:
    cli_config = tmp_path / "cli.json"
    assert tui_main(["monitor", *map(str, monitors), "--narrow", "-o", str(cli_config)]) == 0
    cli_lines = capsys.readouterr().out.splitlines()
    config = tmp_path / "app.json"
    app = StepsApp(*monitors)
    async with app.run_test(size=SIZE) as pilot:
        await _read_whole(ui, pilot)
        await pilot.press("t")
        await ui.wait_until(pilot, lambda: isinstance(app.screen, NarrowScreen))
        app.screen.query_one("#narrow-path").value = str(config)
        await pilot.press("enter")
        await ui.wait_until(pilot, lambda: isinstance(app.screen, TextScreen))
        lines = app.screen.lines
        assert f"ptdbg-dump run {JOB} --dump-path {tmp_path / 'app' / 'npu'} --config {config}" in lines[4]
        assert "ptdbg-dump run" in ui.screen_text(app)
    assert read_options(config) == read_options(cli_config)
    assert (read_options(config).module, read_options(config).step) == (["blocks.2.mlp.gelu"], [6])
    # the same lines but for the file names
    names = {str(cli_config): str(config), str(tmp_path / "cli"): str(tmp_path / "app")}
    said = [line for line in cli_lines if any(n in line for n in names) or line.startswith("Narrowed")]
    assert len(said) >= 4  # the reason, the config and both machines' commands
    for line in said:
        for a, b in names.items():
            line = line.replace(a, b)
        assert line in lines


async def test_a_stream_followed_while_its_writer_appends(
    monitors: tuple[Path, Path], tmp_path: Path, ui
) -> None:
    from dumper.monitor import MonitorWriter

    live = tmp_path / "npu", tmp_path / "bench"
    writers, batches = [], []
    for source, folder in zip(monitors, live, strict=True):
        folder.mkdir()
        shutil.copy(source / "manifest_rank0.json", folder)
        batches.append(fmon.read_monitor(source / fmon.file_name(0)).batches)
        writers.append(MonitorWriter(folder / fmon.file_name(0)))
    for writer, written in zip(writers, batches, strict=True):
        for batch in written[:3]:
            writer.write(batch.to_pydict())
    app = StepsApp(*live, poll_s=0.05)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.steps
        await ui.wait_until(pilot, lambda: screen.rank is not None and screen.rank.aligned == 3)
        assert _text(app).startswith("following… 3 steps aligned")
        assert "First divergent step: none" in _text(app)
        assert "is not closed: its run may still be training" in _text(app)
        await pilot.press("t")  # nothing found yet: nothing to narrow
        await ui.wait_until(pilot, lambda: bool(app._notifications))
        assert "Nothing to narrow: the runs agree: no divergence" in next(iter(app._notifications)).message
        for writer, written in zip(writers, batches, strict=True):
            for batch in written[3:]:
                writer.write(batch.to_pydict())
            writer.close()
        await _read_whole(ui, pilot)
        assert _text(app).startswith("both runs ended: 8 steps aligned")
        assert VERDICT in _text(app)
        assert screen.rank.curves.modules[screen.module] == "blocks.2.mlp.gelu"


async def _problem(folders: tuple[Path, Path], ui, until_ended: bool = True) -> str:
    app = StepsApp(*folders, poll_s=0.05)
    async with app.run_test(size=SIZE) as pilot:
        if until_ended:
            await _read_whole(ui, pilot)
        else:
            await ui.wait_until(pilot, lambda: app.steps.state.problem is not None)
        return _text(app)


async def test_what_cannot_be_compared_is_said_on_the_screen(
    monitors: tuple[Path, Path], tmp_path: Path, ui
) -> None:
    npu, bench = monitors
    # a side without a stream (its training not started): said, and still awaited
    empty = tmp_path / "empty"
    empty.mkdir()
    text = await _problem((npu, empty), ui, until_ended=False)
    assert "the bench folder" in text and "holds no monitor stream" in text
    # a cut stream: the steps before the cut are compared, the cut is said
    cut = tmp_path / "cut"
    cut.mkdir()
    data = (bench / fmon.file_name(0)).read_bytes()
    (cut / fmon.file_name(0)).write_bytes(data[:-300])
    app = StepsApp(npu, cut, poll_s=0.05)
    async with app.run_test(size=SIZE) as pilot:
        await ui.wait_until(pilot, lambda: app.steps.rank is not None)
        assert "bytes that are not a whole step" in _text(app)
        assert app.steps.state.following  # a cut stream may still be written
    # a file that is no monitor stream
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / fmon.file_name(0)).write_text("\x1b]0;title\x07 not arrow\n")
    text = await _problem((npu, bad), ui, until_ended=False)
    assert "is not an Arrow IPC stream" in text


async def test_without_pyarrow_the_screen_says_how_to_install_it(
    monitors: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, ui
) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow raises ImportError
    text = await _problem(monitors, ui)
    assert text.startswith("stopped") and "pip install pyarrow" in text


def test_ptdbg_tui_on_monitor_folders_opens_the_steps_app(
    monitors: tuple[Path, Path], small_dumps: tuple[Path, Path]
) -> None:
    from ptdbg_tui.cli import _single_screen_app, app_parser

    assert isinstance(_single_screen_app(app_parser().parse_args(list(map(str, monitors)))), StepsApp)
    assert _single_screen_app(app_parser().parse_args(list(map(str, small_dumps)))) is None


async def test_s_opens_the_steps_screen_where_the_dumps_hold_monitor_streams_too(
    monitors: tuple[Path, Path], small_dumps: tuple[Path, Path], tmp_path: Path, ui
) -> None:
    from ptdbg_tui.app.steps import StepsScreen

    folders = tmp_path / "npu", tmp_path / "bench"
    for dump, monitor, folder in zip(small_dumps, monitors, folders, strict=True):
        shutil.copytree(dump, folder)
        shutil.copy(monitor / fmon.file_name(0), folder)
    assert not opens_on_steps(*folders)  # the call tree first
    app = ui.app(*folders)
    async with app.run_test(size=SIZE) as pilot:
        await ui.settle(pilot)
        assert "S Steps" in ui.screen_text(app)
        assert "Steps" in [c.title for c in app.get_system_commands(app.screen)]
        await pilot.press("S")
        await ui.wait_until(
            pilot, lambda: isinstance(app.screen, StepsScreen) and not app.screen.state.following
        )
        assert VERDICT in str(app.screen.query_one("#steps-text").render())
        await pilot.press("f")  # the tree's keys wait behind it
        assert app.filter_index == 0
        await pilot.press("escape")
        assert app.screen is app.screen_stack[0]
    plain = ui.app(*small_dumps)
    async with plain.run_test(size=SIZE) as pilot:
        await ui.settle(pilot)
        assert "S Steps" not in ui.screen_text(plain)
        assert "Steps" not in [c.title for c in plain.get_system_commands(plain.screen)]
        await pilot.press("S")
        assert plain.screen is plain.screen_stack[0]


def test_the_charts_never_get_a_non_finite_value_or_a_zero_on_a_log_axis() -> None:
    import numpy as np

    from ptdbg_tui.app.steps import difference_spec, loss_spec, norm_spec
    from ptdbg_tui.compare.monitor import Curves

    bad = np.array([0.0, np.nan, np.inf, -np.inf, 1e-3, 2.0])
    n = len(bad)
    column = bad.reshape(n, 1)
    c = Curves(
        iterations=np.arange(n),
        steps=np.arange(n) * 10,
        loss_npu=bad,
        loss_bench=np.full(n, np.nan),
        modules=("m",),
        norm_npu=column * 1e4,
        norm_bench=np.abs(column),
        difference=column,
    )
    loss = loss_spec(c, 40, None)
    assert loss.series[0].xs == [0.0, 40.0, 50.0] and loss.series[1].xs == []
    norm = norm_spec(c, 0, 40, 30)
    assert norm.log and norm.series[0].ys == [1.0, 4.0 + np.log10(2.0)]
    diff = difference_spec(c, 0, 0.0, 40, 30)
    ys = [y for s in (loss, norm, diff) for series in s.series for y in series.ys]
    assert all(np.isfinite(ys)) and diff.hline is not None and np.isfinite(diff.hline)
    assert len(diff.series[0].ys) == n  # every step drawn: 0 at the floor, NaN and Inf at the ceiling
    empty = loss_spec(Curves(**{**c.__dict__, "loss_npu": np.full(n, np.nan)}), 40, None)
    assert empty.empty


async def test_a_chart_of_nothing_finite_draws_without_a_crash(ui) -> None:
    from textual.app import App, ComposeResult

    from ptdbg_tui.app.steps import ChartSpec, Series

    class One(App[None]):
        def compose(self) -> ComposeResult:
            yield StepsChart(id="c")

    app = One()
    async with app.run_test(size=(60, 14)) as pilot:
        chart = app.query_one(StepsChart)
        for spec in (
            ChartSpec("none", (Series([], [], "NPU", "red"),), log=True, hline=-12.0),
            ChartSpec("one", (Series([5.0], [-12.0], "NPU", "red"),), log=True, hline=-12.0, vline=5),
        ):
            chart.draw(spec)
            await pilot.pause()
            assert chart._drawn is spec
            assert spec.title in ui.screen_text(app)


async def test_several_ranks_name_the_first_divergent_one_and_r_shows_the_next(
    monitors: tuple[Path, Path], tmp_path: Path, ui
) -> None:
    """Rank 0 carries the fault, rank 1 is the bench run on both sides."""
    bench = monitors[1]
    folders = tmp_path / "npu", tmp_path / "bench"
    for source, folder in zip(monitors, folders, strict=True):
        shutil.copytree(source, folder)
        shutil.copy(bench / fmon.file_name(0), folder / fmon.file_name(1))
    app = StepsApp(*folders)
    async with app.run_test(size=SIZE) as pilot:
        await _read_whole(ui, pilot)
        screen = app.steps
        text = _text(app)
        assert VERDICT in text and "first divergent rank: 0" in text
        assert "rank 0 shown of 0, 1 (r: next rank)" in text
        assert "r Rank" in ui.screen_text(app)
        await pilot.press("r")
        await ui.wait_until(pilot, lambda: screen.rank is not None and screen.rank.rank == 1)
        assert "rank 1: First divergent step: none" in _text(app)
        diff = screen.query_one("#chart-difference", StepsChart)
        assert diff._drawn is not None and diff._drawn.vline is None  # rank 1 diverges nowhere


async def test_a_module_name_with_control_characters_reaches_no_terminal(
    monitors: tuple[Path, Path], tmp_path: Path, ui
) -> None:
    """The names are the stream's text: an OSC that would set the terminal's title is drawn escaped,
    and the narrow key writes no config for a name that is no module path."""
    from dumper.monitor import MonitorWriter

    evil = "blocks.2.mlp.\x1b]0;pwned\x07gelu"
    folders = tmp_path / "npu", tmp_path / "bench"
    for source, folder in zip(monitors, folders, strict=True):
        folder.mkdir()
        writer = MonitorWriter(folder / fmon.file_name(0))
        for batch in fmon.read_monitor(source / fmon.file_name(0)).batches:
            columns = batch.to_pydict()
            columns["name"] = [evil if n == "blocks.2.mlp.gelu" else n for n in columns["name"]]
            writer.write(columns)
        writer.close()
    app = StepsApp(*folders)
    async with app.run_test(size=SIZE) as pilot:
        await _read_whole(ui, pilot)
        screen = app.steps
        assert screen.rank is not None and screen.rank.curves.modules[screen.module] == evil
        shown = ui.screen_text(app)
        assert "\x1b" not in shown and "\x07" not in shown
        assert "blocks.2.mlp.\\x1b]0;pwned\\x07gelu" in shown
        await pilot.press("t")
        await ui.wait_until(pilot, lambda: bool(app._notifications))
        assert "not a module path" in next(iter(app._notifications)).message
        assert not isinstance(app.screen, NarrowScreen)
