"""The header names what each side lacks, and the diagnosis never gives an all-clear that no
comparison backs."""

from __future__ import annotations

from ptdbg_tui.compare.model import Status


def _texts(app) -> tuple[str, str]:
    """What the header and the diagnosis bar show now, as plain text."""
    return tuple("\n".join(line.plain for line in bar.lines) for bar in (app.header_bar, app.diagnosis_bar))


async def test_a_mistyped_bench_path_is_named_and_no_all_clear_is_shown(small_dumps, tmp_path, ui):
    npu, bench = small_dumps
    typo = bench.parent / (bench.name + "u")
    app = ui.app(npu, typo, watch=True, quiet_s=0.2, rescan_s=0.2)
    async with app.run_test(size=ui.size) as pilot:
        await ui.wait_until(
            pilot,
            lambda: (
                app.model.progress.done
                and app.model.progress.rows > 0
                and app.model.status_counts()[Status.PENDING] == 0
            ),
        )
        progress, bar = _texts(app)
        assert f"bench: waiting for …/{bench.parent.name}/{typo.name}" in progress
        assert f"No verdict: bench: waiting for {typo} to appear" in bar
        assert Status.PASS.symbol not in bar and "No operator introduces" not in bar


async def test_two_folders_not_there_yet_compare_nothing(tmp_path, ui):
    """Both folders still to appear: the header said 'compared 0/0' (a review)."""
    app = ui.app(tmp_path / "npu", tmp_path / "bench", watch=True, quiet_s=0.2, rescan_s=0.2)
    async with app.run_test(size=ui.size) as pilot:
        await ui.wait_until(pilot, lambda: app.model.progress.done)
        progress, bar = _texts(app)
        assert progress.lstrip().startswith("nothing compared") and "0/0" not in progress, progress
        assert "No verdict: NPU: waiting for" in bar
