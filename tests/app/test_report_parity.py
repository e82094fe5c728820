"""The app tells what the CLI report tells, at 80x24: the bits that differ before the first divergent
rank, what a pair was compared from, a collective wrong on one rank alone, and the report's notes.
Real dumps: a three-rank CPU job (gloo) dumped by the project's dumper (tests/dumper/tp_job.py)."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest

from ptdbg_tui.app.overview import OverviewScreen
from ptdbg_tui.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "dumper"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from test_later_step import AUTOCAST, _dump_both
from tp_job import run_job

SMALL = (80, 24)


def _job(root: Path, *fault: str) -> Path:
    """tp_job.py's three ranks, rank 1 at fault, dumped under ``root``."""
    run_job(root, 3, 1, *fault)
    return root


@pytest.fixture(scope="module")
def bits_dumps(tmp_path_factory) -> Path:
    """Checksum dumps: every rank's tanh gives other bits before rank 1's matmul is 5% off."""
    return _job(tmp_path_factory.mktemp("bits"), "bits_matmul")


@pytest.fixture(scope="module")
def alone_dumps(tmp_path_factory) -> Path:
    """Rank 1's second reduce_scatter halves its result: wrong on that rank alone."""
    return _job(tmp_path_factory.mktemp("alone"), "reduce_scatter")


def _boxed(text: str) -> str:
    """The words inside the overview's box, its lines joined (a wrapped sentence reads whole)."""
    inner = [m.group(1).strip() for m in re.finditer(r"^█(.*)█$", text, re.M)]
    return " ".join(" ".join(inner).split())


async def test_the_overview_says_where_checksums_alone_differ_before_the_first_divergent_rank(
    bits_dumps, ui, capsys
):
    """The report's line under ``first divergent rank:`` (``before it, checksums alone differ: …``)
    was nowhere in the app, whose culprit is rank1's tanh (first by checksums): the overview showed
    the tanh on every rank, "receives via Torch_tanh_0_…" on ranks 0 and 2, and the rank whose values
    diverge only in a toast. The overview now says both, whole, as the report does."""
    assert main(["compare", str(bits_dumps / "npu"), str(bits_dumps / "bench"), "-o", str(bits_dumps)]) == 0
    report = capsys.readouterr().out
    headline = next(line for line in report.splitlines() if line.startswith("first divergent rank: "))
    before = next(line for line in report.splitlines() if line.startswith("  before it, checksums alone"))
    app = ui.app(bits_dumps / "npu", bits_dumps / "bench")
    async with app.run_test(size=SMALL, notifications=True) as pilot:
        await ui.settle(pilot)
        await pilot.pause()
        screen = ui.screen_text(app)
        assert "Before it, checksums alone differ:" in screen, "the notice names the bits too"
        await pilot.press("o")
        assert isinstance(app.screen, OverviewScreen)
        await pilot.pause()
        boxed = _boxed(ui.screen_text(app))
        assert "F" + headline[1:] in boxed, boxed
        assert "B" + before.strip()[1:] in boxed, boxed
        assert "receives via Torch_tanh" not in boxed, "its tanh is its own: bits before any values"


async def test_the_header_says_a_pair_was_compared_from_checksums_or_statistics(bits_dumps, small_dumps, ui):
    """The report says ``(checksums)`` or ``(statistics only)`` after a pair's name; the app's ✔ and ✘
    did not say what they rest on."""
    cases = [
        (ui.app(bits_dumps / "npu", bits_dumps / "bench"), "checksums"),
        (ui.app(*small_dumps, summary=True), "statistics only"),
        (ui.app(*small_dumps), None),
    ]
    for app, mode in cases:
        async with app.run_test(size=SMALL) as pilot:
            await ui.settle(pilot)
            await pilot.pause()
            header = ui.screen_text(app).splitlines()[0]
            if mode is None:
                assert "statistics" not in header and "checksums" not in header, header
            else:
                assert re.search(rf"│ {mode} │", header), header


async def test_a_collective_wrong_on_one_rank_alone_is_said_whole(alone_dumps, ui):
    """The culprit ``wrong on this rank alone`` (a rank's reduce_scatter halves its result): the detail
    says so in whole words at 80 columns, and the overview names that rank first."""
    app = ui.app(alone_dumps / "npu", alone_dumps / "bench")
    async with app.run_test(size=SMALL) as pilot:
        await ui.settle(pilot)
        await pilot.press("c")
        await pilot.pause()
        panel = " ".join(ui.detail_text(app, width=38).split())
        assert "Culprit: wrong on this rank alone — inputs 0, outputs 0.5" in panel, panel
        assert "its result differs on rank1 alone (rank0, rank2 match theirs)" in panel, panel
        await pilot.press("o")
        await pilot.pause()
        boxed = _boxed(ui.screen_text(app))
        head = "First divergent rank: rank1 (step0): Distributed_reduce_scatter_tensor_1_forward (forward): "
        assert head in boxed, boxed
        assert "wrong on this rank alone" in boxed


def _words(text: str) -> str:
    return " ".join(text.split())


async def test_a_pair_s_notes_are_in_its_detail_and_the_bar_cuts_them_after_a_whole_word(
    tmp_path, ui, capsys
):
    """bf16 autocast in the NPU script alone: the report's notes on step 1 (the autocast, parameters
    that carry step 0's rounding) were only in the bar, the first of them cut mid-word at 80 columns
    ("where the bench r…") and the others not at all. The pair's detail lists them whole; the bar
    cuts after a whole word."""
    _dump_both(tmp_path, AUTOCAST, "--step", "0", "1")
    assert main(["compare", str(tmp_path / "npu"), str(tmp_path / "bench"), "-o", str(tmp_path)]) == 0
    report = capsys.readouterr().out.split("step1/rank0 vs step1/rank0", 1)[1]
    notes = [line.removeprefix("  note: ") for line in report.splitlines() if line.startswith("  note: ")]
    assert any("autocast to torch.bfloat16" in n for n in notes) and len(notes) == 3, report
    assert notes[0] == "the runs' scripts take other arguments: argument 1 npu against bench", report
    app = ui.app(tmp_path / "npu", tmp_path / "bench")
    async with app.run_test(size=SMALL) as pilot:
        await ui.settle(pilot)
        (step1,) = [n for n in app.model.root.children if n.label == "step1/rank0"]
        app.detail.show(step1)
        await pilot.pause()
        panel = _words(ui.detail_text(app, width=38))
        assert all(f"Note: {note}" in panel for note in notes), panel
        bar = [line.plain for line in app.diagnosis_bar.lines]
        assert bar[1].strip().startswith("The NPU run makes") and bar[1].endswith(" …"), bar


async def test_where_a_replay_could_name_a_kernel_the_pair_offers_the_app_s_replay(tmp_path, ui, capsys):
    """A kernel wrong at every step, at step 1, where its inputs already differ: the report ends with
    "note: step1/rank0: rows fail where the inputs already differ, and no kernel is named; --replay
    re-runs the suspects …"; the app said nothing of it. The pair's detail says it with
    the app's own way: r on a call."""
    from divergence import SUITE

    npu, bench = SUITE["linear_weight_grad_tail_tile"].dump(tmp_path, 0)
    assert main(["compare", str(npu), str(bench), "--step", "1", "-o", str(tmp_path)]) == 0
    report = capsys.readouterr().out
    assert "note: step1/rank0: rows fail where the inputs already differ, and no kernel is named" in report
    app = ui.app(npu, bench, step=1)
    async with app.run_test(size=SMALL) as pilot:
        await ui.settle(pilot)
        (pair,) = app.model.root.children
        app.detail.show(pair)
        await pilot.pause()
        panel = _words(ui.detail_text(app, width=38))
        assert (
            "Note: rows fail where the inputs already differ, and no kernel is named: r on a call re-runs it "
            "in float64 on each side's own recorded inputs, which can prove one wrong (needs torch)"
        ) in panel, panel
        assert "--replay" not in panel


async def test_a_rank_without_its_bench_is_not_counted_compared_and_the_overview_says_why(
    alone_dumps, tmp_path, ui, capsys
):
    """The bench run's rank 2 missing: the app counted that rank among those compared ("its group has 3
    ranks, by its shapes, 3 of them compared", the report: 2) and its header said "statistics only:
    1/3 pairs" of a pair compared with nothing; the report's notes on it, after the first, were only
    toasts. The overview gives the report's headline and both notes."""
    shutil.copytree(alone_dumps / "npu", tmp_path / "npu")
    shutil.copytree(alone_dumps / "bench", tmp_path / "bench")
    (rank2,) = (tmp_path / "bench").rglob("rank2")
    shutil.rmtree(rank2)
    assert main(["compare", str(tmp_path / "npu"), str(tmp_path / "bench"), "-o", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    headline = next(line for line in lines if line.startswith("first divergent rank: "))
    notes = [line.removeprefix("note: ") for line in lines if line.startswith("note: ")]
    assert "2 of them compared" in headline and len(notes) == 2, lines
    app = ui.app(tmp_path / "npu", tmp_path / "bench")
    async with app.run_test(size=SMALL) as pilot:
        await ui.settle(pilot)
        await pilot.pause()
        assert "statistics" not in ui.screen_text(app).splitlines()[0]
        await pilot.press("o")
        await pilot.pause()
        boxed = _boxed(ui.screen_text(app))
        assert "F" + headline[1:] in boxed, boxed
        assert all(note[:1].upper() + note[1:] in boxed for note in notes), boxed
