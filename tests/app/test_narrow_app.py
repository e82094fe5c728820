"""Narrowing from the app (issue 19): on the culprit's module, ``t`` asks where the config goes, writes
it and shows the commands; once the narrowed tensor dump is written on both sides, the app compares
it in place of the statistics dumps, live."""

from __future__ import annotations

from pathlib import Path

from dumper.cli import main as dump_main
from ptdbg_tui.app.screens import NarrowScreen, TextScreen
from ptdbg_tui.formats.dump_options import read_options

JOB = Path(__file__).parents[1] / "dumper" / "narrow_job.py"


def _dump(side: str, *options: str) -> None:
    assert dump_main(["run", str(JOB), side, *options]) == 0


async def test_t_on_a_module_writes_its_config_and_the_tensor_dump_replaces_the_statistics(
    tmp_path, ui, monkeypatch
) -> None:
    stats = tmp_path / "stats"
    for side in ("npu", "bench"):
        _dump(side, "--dump-path", str(stats / side), "--step", "0", "--summary-only")
    monkeypatch.chdir(tmp_path)  # the dialog proposes ./narrow_<module>.json
    app = ui.app(stats / "npu", stats / "bench", watch=True, rescan_s=0.3, quiet_s=1.0)
    async with app.run_test(size=ui.size) as pilot:
        await ui.settle(pilot)
        culprit, call = app.model.first_culprit()
        assert culprit.call == "VF_lstm_0_backward" and all(i.summary for i in app.model.infos.values())
        await pilot.press("c", "h", "h")  # the culprit, then (collapsed) its module
        module = app.call_tree.cursor_model_node
        assert module is call.parent and module.kind == "module" and module.key == "track.lstm"

        await pilot.press("t")
        await ui.wait_until(pilot, lambda: isinstance(app.screen, NarrowScreen))
        assert app.screen.query_one("#narrow-path").value == "./narrow_track.lstm.json"
        await pilot.press("enter")
        await ui.wait_until(pilot, lambda: isinstance(app.screen, TextScreen))
        text = ui.screen_text(app)
        assert "Narrowed to module track.lstm: the module chosen (track.lstm · LSTM)." in text
        assert "ptdbg-dump run" in text and "--dump-path narrow_track.lstm/npu --config" in text
        assert "torchrun" not in text and "from_config" not in text, "one process: no launcher's form"
        assert "This app compares narrow_track.lstm/npu with narrow_track.lstm/bench in place" in text
        config = tmp_path / "narrow_track.lstm.json"
        assert read_options(config).module == ["track.lstm"] and read_options(config).step == [0]
        assert app.engine.awaited == (Path("narrow_track.lstm/npu"), Path("narrow_track.lstm/bench"))
        await pilot.press("y")  # the commands whole, without the breaks a narrow screen wraps them at
        assert "--dump-path narrow_track.lstm/npu --config" in app.clipboard
        assert app.clipboard.splitlines() == app.screen.lines
        await pilot.press("escape")
        stale = set(app.model.infos)

        for side in ("npu", "bench"):  # the commands it showed
            _dump(side, "--dump-path", str(tmp_path / "narrow_track.lstm" / side), "--config", str(config))

        def replaced() -> bool:
            infos = app.model.infos
            return (
                bool(infos)
                and not stale & set(infos)
                and not any(i.summary for i in infos.values())
                and ui.settled(app)
                and app.model.first_culprit() is not None
            )

        await ui.wait_until(pilot, replaced)
        assert app.engine.awaited is None
        culprit, call = app.model.first_culprit()
        assert culprit.call == "VF_lstm_0_backward" and call.parent.key == "track.lstm"
        assert app.model.progress.rows < 60  # the module's calls only
