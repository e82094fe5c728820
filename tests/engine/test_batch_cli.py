"""``ptdbg-tui compare``: CSV, short summary, exit codes, one-line reasons, progress on stderr."""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

from ptdbg_tui.cli import _Bar, main
from ptdbg_tui.formats.layout import discover, rank_dir_path
from ptdbg_tui.formats.naming import entry_name
from ptdbg_tui.formats.synthetic import write_array, write_seed_pair
from ptdbg_tui.formats.writer import RankWriter


@pytest.fixture
def seed(tmp_path):
    return write_seed_pair(tmp_path / "dumps")


def _run(capsys, *argv):
    """``ptdbg-tui compare``, without the replay these tests do not look at (tests/dumper/
    test_default_replay.py does)."""
    code = main(["compare", *map(str, argv), "--no-progress", "--no-replay"])
    out, err = capsys.readouterr()
    return code, out, err


def test_writes_the_csv_and_prints_the_summary(seed, tmp_path, capsys):
    code, out, err = _run(capsys, *seed, "-o", tmp_path / "out", "--stack", "--jobs", "2")
    assert code == 0 and err == ""
    (path,) = (tmp_path / "out").glob("compare_result_*.csv")
    table = list(csv.reader(path.open()))
    assert len(table) == 31 and table[0][-1] == "NPU_Stack_Info"
    first = out.splitlines()[0]
    assert first.startswith("step0/rank0 vs step0/rank0 (tensors): 30 rows: ")
    assert "failed, 0 warnings, 0 unmatched, 0 errors" in first or "warnings" in first
    assert first.endswith(" 0 errors, 1 call named"), "our verdict after the original's counts, in form"
    assert "Culprit: VF_lstm_0_backward (backward): introduces error — inputs " in out
    assert "\n    source: y = VF_lstm(x)\n" in out, "the call site's source line, as the app shows it"
    assert f"CSV: {path}" in out
    suspects = path.with_name(path.name.replace("compare_result", "suspects"))
    assert f"suspects: {suspects}" in out
    header, first_suspect = list(csv.reader(suspects.open()))[:2]
    assert header[:6] == ["Rank", "NPU Call", "API", "Direction", "Kind", "Score"]
    assert first_suspect[:5] == ["1", "VF_lstm_0_backward", "VF_lstm", "backward", "growth"]
    assert float(first_suspect[5]) > 1 and first_suspect[11] == "/home/user/centernet/model.py:43"


def test_any_level_of_the_tree_and_summary_flag(seed, tmp_path, capsys):
    npu_rank = discover(seed[0])[0].rank_dir
    bench_pkl = discover(seed[1])[0].records
    code, out, _ = _run(capsys, npu_rank, bench_pkl, "-o", tmp_path, "--summary", "--jobs", "1")
    assert code == 0 and "(statistics only)" in out
    (path,) = tmp_path.glob("compare_result_*.csv")
    assert len(next(csv.reader(path.open()))) == 18


def test_unmatched_rows_are_counted(tmp_path, capsys):
    roots = tmp_path / "npu", tmp_path / "gpu"
    names = (
        ["Torch_add_0_forward_output", "Torch_mul_0_forward_output"],
        ["Torch_add_0_forward_output", "Torch_sub_0_forward_output"],
    )
    for root, side in zip(roots, names, strict=True):
        w = RankWriter(rank_dir_path(root, 0))
        for name in side:
            write_array(w, name, np.ones(3, np.float32))
        w.close()
    code, out, _ = _run(capsys, *roots, "-o", tmp_path / "out", "--jobs", "1")
    assert code == 0 and "1 passed, 0 failed, 0 warnings, 2 unmatched, 0 errors" in out
    (path,) = (tmp_path / "out").glob("compare_result*.csv")
    rows = list(csv.reader(path.open()))[1:]
    assert [(r[0], r[1], r[-1]) for r in rows] == [
        ("Torch_add_0_forward_output", "Torch_add_0_forward_output", ""),
        ("Nan", "Torch_sub_0_forward_output", "No NPU data matched."),  # after its bench predecessor
        ("Torch_mul_0_forward_output", "Nan", "No bench data matched."),
    ]


def test_a_run_cut_short_is_said_not_only_counted(tmp_path, capsys):
    """The NPU run stopped (an exception, Ctrl-C) after two calls; the bench made four: the report
    said only '... 4 unmatched' and 'No operator introduces an error', nothing of the run ending."""
    calls = ["Torch_add_0", "Torch_mul_0", "Torch_sub_0", "Torch_div_0"]
    npu, gpu = _dumps_of_calls(tmp_path, calls[:2], calls)
    code, out, _ = _run(capsys, npu, gpu, "-o", tmp_path / "out", "--jobs", "1")
    assert code == 0 and "4 passed, 0 failed, 0 warnings, 4 unmatched, 0 errors\n" in out, "nothing named"
    assert (
        "  note: the NPU dump ends before the bench dump: the bench dump's last 4 entries (2 calls, from "
        "Torch_sub_0_forward_input.0 on) have no NPU counterpart — did the NPU run stop early" in out
    )
    code, out, _ = _run(capsys, gpu, npu, "-o", tmp_path / "swapped", "--jobs", "1")
    assert "note: the bench dump ends before the NPU dump: the NPU dump's last 4 entries" in out


def test_a_narrowed_dump_against_a_full_one_is_no_run_cut_short(tmp_path, capsys):
    """An NPU dump of some calls only (--module, --scope) lacks the bench's calls throughout, the
    optimizer's at the end among them: its run did not stop early."""
    calls = ["Torch_add_0", "Torch_mul_0", "Torch_sub_0", "Torch_div_0", "Torch_exp_0"]
    npu, gpu = _dumps_of_calls(tmp_path, [calls[0], calls[2]], calls)
    code, out, _ = _run(capsys, npu, gpu, "-o", tmp_path / "out", "--jobs", "1")
    assert code == 0 and "6 unmatched" in out and "ends before" not in out


def _dumps_of_calls(tmp_path, npu_calls, bench_calls):
    """Two dumps of the given forward calls, one input and one output each, all ones."""
    roots = tmp_path / "npu", tmp_path / "gpu"
    for root, made in zip(roots, (npu_calls, bench_calls), strict=True):
        w = RankWriter(rank_dir_path(root, 0))
        for call in made:
            for kind in ("input.0", "output"):
                write_array(w, f"{call}_forward_{kind}", np.ones(3, np.float32))
        w.close()
    return roots


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["{tmp}/missing", "{bench}"], "no such file or directory"),
        (["{npu}", "{bench}", "--step", "4"], "no NPU and bench rank dumps pair up for step 4"),
        (["{npu}", "{bench}", "--jobs", "0"], "--jobs must be at least 1"),
        (["{tmp}/notadump.txt", "{bench}"], "not a .pkl file, an msprobe dump.json or a dump directory"),
    ],
)
def test_unusable_inputs_exit_2_with_one_line(seed, tmp_path, capsys, args, words):
    (tmp_path / "notadump.txt").write_text("x")
    argv = [a.format(tmp=tmp_path, npu=seed[0], bench=seed[1]) for a in args]
    code, out, err = _run(capsys, *argv, "-o", tmp_path / "out")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("ptdbg-tui compare: error: ") and words in err
    assert not (tmp_path / "out").exists()


def test_unwritable_output_exits_2(seed, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, _, err = _run(capsys, *seed, "-o", blocker / "sub", "--jobs", "1")
    assert code == 2 and "cannot write the CSV" in err and err.count("\n") == 1


def test_a_file_as_output_stops_before_the_compare(seed, tmp_path, capsys, monkeypatch):
    """-o naming a file: said at once, not after the whole compare (and replay) ran ('File exists')."""
    import ptdbg_tui.engine.batch as batch

    compared = []
    real = batch.compare_dumps
    monkeypatch.setattr(batch, "compare_dumps", lambda *a, **k: compared.append(1) or real(*a, **k))
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, out, err = _run(capsys, *seed, "-o", blocker, "--jobs", "1")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert f"cannot write the CSV to {blocker}: {blocker} is a file, not a folder" in err
    assert compared == [], "the compare ran although its CSV could not be written"
    assert blocker.read_text() == "x"


def test_a_rank_dir_without_a_readable_pkl_exits_2(seed, tmp_path, capsys):
    pkl = discover(seed[0])[0].records
    pkl.unlink()
    pkl.mkdir()  # a directory where the pkl should be
    code, _, err = _run(capsys, *seed, "-o", tmp_path)
    assert code == 2 and "no dump found" in err and err.count("\n") == 1


def test_argparse_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        main(["compare", "a", "b", "--match", "nope"])
    assert e.value.code == 2


def test_progress_lines_on_a_non_tty_stderr(seed, tmp_path):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    argv = [
        sys.executable,
        "-m",
        "ptdbg_tui",
        "compare",
        str(seed[0]),
        str(seed[1]),
        "-o",
        str(tmp_path),
        "--jobs",
        "1",
    ]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0 and "\r" not in done.stderr  # lines, no redrawn bar
    # a short run prints none; a run slowed by a loaded box prints a line every 10 s, nothing else
    assert all(re.match(r"(compared|replayed) +\d+\.\d%", line) for line in done.stderr.splitlines())
    assert "Culprit" in done.stdout


def test_rank_pid_bench_pairs_with_rank0(seed, tmp_path, capsys):
    bench_rank = discover(seed[1])[0].rank_dir
    shutil.move(bench_rank, bench_rank.with_name("rank31337"))
    code, out, _ = _run(capsys, *seed, "-o", tmp_path, "--jobs", "1")
    assert code == 0 and "step0/rank0 vs step0/rank31337" in out


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_draws_on_a_terminal_and_clears_itself():
    stream = _Terminal()
    bar = _Bar(stream, enabled=True)
    bar.start = bar.last = time.monotonic() - 1.0  # as if the run had lasted a second
    bar(50, 100)
    assert stream.getvalue().startswith("\r[" + "#" * 15 + "." * 15 + "]  50.0%")
    bar.close()
    assert stream.getvalue().endswith("\r\x1b[K")
    quiet = _Terminal()
    off = _Bar(quiet, enabled=False)
    off.start = off.last = time.monotonic() - 100.0
    off(1, 2)
    off.close()
    assert quiet.getvalue() == ""


def test_one_dump_on_both_sides_gets_no_all_clear(seed, tmp_path, capsys):
    code, out, _ = _run(capsys, seed[1], seed[1], "-o", tmp_path, "--jobs", "1")
    lines = out.splitlines()
    assert code == 0 and "30 passed" in lines[0]
    assert lines[1].startswith("  No verdict: the NPU and bench dumps are the same file"), "said first"
    assert "each row is compared with itself" in lines[1]
    assert "No operator introduces" not in out and "meets the accuracy requirements" not in out


def test_a_side_without_entries_reads_as_nothing_compared(seed, tmp_path, capsys):
    pkl = discover(seed[1])[0].records
    pkl.write_text("")
    code, out, _ = _run(capsys, *seed, "-o", tmp_path, "--jobs", "1")
    lines = out.splitlines()
    assert code == 0 and "0 passed, 0 failed, 0 warnings, 30 unmatched" in lines[0]
    assert lines[1] == f"  No verdict: the bench dump file {pkl} holds no entries", "the missing side is said"
    assert "compared" not in out.replace("Nothing was compared", "") and "align" not in out


def test_failing_entries_without_a_suspect_are_said_as_in_the_app(tmp_path, capsys):
    """bf16 rounding of large values breaks the original's MaxAbsErr ceiling, no call adds error: the
    report says both (the app's bar does), not an all-clear."""
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((32, 32)) * 300).astype(np.float32)
    roots = tmp_path / "npu", tmp_path / "bench"
    for root in roots:
        w = RankWriter(rank_dir_path(root, 0))
        for i in range(3):
            y = x * 2
            if root.name == "npu":
                y = (y * (1 + 1e-3 * rng.standard_normal(y.shape))).astype(np.float32)
            write_array(w, entry_name("Torch_mul", i, "forward", "input", (0,)), x, dtype="torch.bfloat16")
            write_array(w, entry_name("Torch_mul", i, "forward", "output", (0,)), y, dtype="torch.bfloat16")
        w.close()
    code, out, _ = _run(capsys, *roots, "-o", tmp_path / "out", "--jobs", "1")
    assert code == 0 and "3 failed" in out
    assert (
        "  3 entries fail, yet no call judged introduces an error beyond rounding (3 calls judged): "
        "the first failing row is Torch_mul_0_forward_output.0 — its call's inputs already carry the "
        "error"
    ) in out
    assert "No operator introduces" not in out


def test_an_entry_that_could_not_be_compared_is_not_said_to_inherit_an_error(tmp_path, capsys):
    """A dump cut short (its script killed, an npy missing) and nothing else wrong: the row could not
    be compared, and the report says that rather than 'its call's inputs already carry the error'
    with inputs and outputs at 0; and '1 entry could not be compared' as the header's '1 errors' (it
    read '1 entry fails' beside '0 failed')."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 8)).astype(np.float32)
    roots = tmp_path / "npu", tmp_path / "bench"
    for root in roots:
        w = RankWriter(rank_dir_path(root, 0))
        for i in range(2):
            write_array(w, entry_name("Torch_mul", i, "forward", "input", (0,)), x)
            write_array(w, entry_name("Torch_mul", i, "forward", "output", (0,)), x * 2)
        w.close()
    (missing,) = roots[0].rglob("Torch_mul_1_forward_output.0.npy")
    missing.unlink()
    code, out, _ = _run(capsys, *roots, "-o", tmp_path / "out", "--jobs", "1")
    assert code == 0 and "1 errors" in out, out
    assert "  1 entry could not be compared, yet no call judged" in out, out  # as its count of errors
    assert (
        "the first failing row is Torch_mul_1_forward_output.0 — it could not be compared (Dump file: "
        "Torch_mul_1_forward_output.0.npy not found.)"
    ) in out, out
    assert "inputs already carry" not in out, out


def test_every_file_written_is_0640_and_the_advisor_is_one_of_them(seed, tmp_path, capsys):
    old = os.umask(0o022)  # a usual umask: 0644 unless the writer says otherwise
    try:
        code, out, _ = _run(capsys, *seed, "-o", tmp_path / "out", "--jobs", "1")
    finally:
        os.umask(old)
    assert code == 0
    (path,) = (tmp_path / "out").glob("compare_result_*.csv")
    stamp = path.name.removeprefix("compare_result_").removesuffix(".csv")
    advisor = tmp_path / "out" / f"advisor_{stamp}.txt"
    assert f"  advisor: {advisor}" in out.splitlines()
    lines = advisor.read_text().splitlines()
    assert lines[1] == "Suspect Nodes: VF_lstm_0_backward_output.0"
    assert lines[2].startswith("Expert Advice: VF_lstm_0_backward (backward): introduces error")
    written = sorted((tmp_path / "out").iterdir())
    assert [p.name.split("_")[0] for p in written] == ["advisor", "compare", "suspects"]
    assert {p.name: oct(p.stat().st_mode & 0o777) for p in written} == {p.name: "0o640" for p in written}


def test_several_pairs_each_get_their_advisor(tmp_path, capsys):
    from ptdbg_tui.formats.synthetic import write_ranks_pair

    npu, bench = write_ranks_pair(tmp_path / "ranks", ranks=2, layers=2, faulty_rank=1, faulty_layer=0)
    code, out, _ = _run(capsys, npu, bench, "-o", tmp_path / "out", "--jobs", "1")
    assert code == 0
    advisors = sorted((tmp_path / "out").glob("advisor*.txt"))
    assert [p.name.split("_")[1:3] for p in advisors] == [["step0", "rank0-step0"], ["step0", "rank1-step0"]]
    assert all(f"  advisor: {p}" in out for p in advisors)


def test_the_workers_fork_server_starts_only_for_tensor_files(seed, tmp_path, capsys, monkeypatch):
    """A compare of statistics alone needs no worker: its fork server would only take a core from the
    reading (numpy's import and the compare code, ~0.3 s of CPU on a 2-core box)."""
    from ptdbg_tui.engine.workers import pool

    started: list[bool] = []
    real = pool.prestart
    monkeypatch.setattr(pool, "prestart", lambda fused=True: started.append(fused) or real(fused))
    assert _run(capsys, *seed, "-o", tmp_path / "t", "--jobs", "2")[0] == 0
    assert started and started[0] is False, "tensor files: started (a small job: without numba)"
    calls = len(started)
    for side in seed:
        for npy in list(side.rglob("*.npy")):
            npy.unlink()
        empty = [d for d in side.rglob("*") if d.is_dir() and not any(d.iterdir())]
        for folder in sorted(empty, reverse=True):
            folder.rmdir()
    assert _run(capsys, *seed, "-o", tmp_path / "s", "--jobs", "2")[0] == 0
    assert len(started) == calls, "statistics alone: not started"


@pytest.mark.parametrize(
    ("fixture", "note"),
    [
        ("l0_between_modules", "an error of 0.01; the culprit is named because that is ×124 what"),
        ("tensor", ""),
    ],
)
def test_a_culprit_beside_0_failed_says_why(tmp_path, capsys, fixture, note):
    """'37 passed, 0 failed' and a Culprit: line, with nothing to say how both hold (the original's
    thresholds pass a 1% error; the diagnosis measures it against rounding). Where rows fail, no note."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "fixtures" / "msprobe" / fixture
    assert main(["compare", str(root / "npu"), str(root / "bench"), "-o", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "  Culprit: " in out
    said = [s for s in out.splitlines() if s.startswith("  note: no row fails the original's thresholds")]
    assert [note in s for s in said] == ([True] if note else []), out
    assert (" 0 failed," in out) == bool(note)
    assert re.search(r" errors, \d+ calls? named$", out.splitlines()[0]), "what the diagnosis names, counted"
