"""The runs' manifests in the compare (issue 30): two runs of ``ptdbg-dump run`` that differ before any
kernel (another lr, another initialisation, another first batch) are told so first, from what each run
was started with; where they differ only where no number depends on it (where they ran), a note says so;
a manifest that cannot be read leaves a note, and a dump without one says nothing of it."""

from __future__ import annotations

import json
import os
import shutil
import textwrap
from pathlib import Path

import pytest
import torch

from dumper.cli import main as dump_main
from ptdbg_tui.cli import main as cli_main
from ptdbg_tui.compare.diagnosis.findings import Diagnosis
from ptdbg_tui.engine.batch import compare_dumps
from ptdbg_tui.formats import budget

#: A two-layer net trained by SGD for two steps; ``key=value`` arguments set the lr, the seed of its
#: initialisation and the seed of its data (numpy's: no dumped call draws it).
SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    import torch
    from torch import nn

    cfg = dict(a.split("=") for a in sys.argv[1:])

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)
            self.out = nn.Linear(8, 4)

        def forward(self, x):
            return self.out(torch.tanh(self.fc(x)))

    torch.manual_seed(int(cfg.get("seed", 0)))
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=float(cfg.get("lr", 1e-3)))
    rng = np.random.default_rng(int(cfg.get("data", 1)))
    for _ in range(2):
        x = torch.from_numpy(rng.standard_normal((4, 8)).astype("float32"))
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()
""")
FIRST = "  runs differ before any kernel: "
RUNS = {"base": [], "lr": ["lr=1e-4"], "seed": ["seed=1"], "data": ["data=2"]}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each run of :data:`RUNS` dumped (``moved``: the base run again, its script in another folder,
    run from another working folder): the dump folder of each."""
    root = tmp_path_factory.mktemp("runs")
    out = {}
    cwd, rng = os.getcwd(), torch.get_rng_state()  # the scripts seed torch's global generator
    try:
        for name, args in [*RUNS.items(), ("moved", [])]:
            folder = root / name
            folder.mkdir()
            script = (folder if name == "moved" else root) / "train.py"
            script.write_text(SCRIPT)
            os.chdir(folder if name == "moved" else root)
            assert dump_main(["run", str(script), *args, "--dump-path", str(folder / "dump")]) == 0
            out[name] = folder / "dump"
    finally:
        os.chdir(cwd)
        torch.set_rng_state(rng)
    return out


def _report(
    npu: Path, bench: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[Diagnosis, str]:
    """The pair's diagnosis and the report the CLI prints."""
    (outcome,) = compare_dumps(npu, bench, jobs=1)
    capsys.readouterr()
    assert cli_main(["compare", str(npu), str(bench), "-o", str(tmp_path / "out")]) == 0
    return outcome.diagnosis, capsys.readouterr().out


def _first_line(report: str) -> str:
    """The line after the pair's counts: what the report says first of it."""
    lines = report.splitlines()
    return next(lines[k + 1] for k, line in enumerate(lines) if " rows: " in line)


@pytest.mark.parametrize(
    ("run", "said"),
    [
        ("lr", "lr 0.001 against 0.0001"),
        (
            "seed",
            "4 parameters differ at start (fc.weight, fc.bias, out.weight +1 more); "
            "torch seed 0 against 1; random state differs (torch)",
        ),
        ("data", "batches 0, 1 differ"),
    ],
)
def test_what_the_runs_were_started_with_is_said_first(
    runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], run: str, said: str
) -> None:
    """Another lr, another initialisation or another first batch showed only as a culprit or as
    'runs differ' lines the dumps' records support: nothing said what the scripts were started with."""
    d, report = _report(runs["base"], runs[run], tmp_path, capsys)
    assert _first_line(report) == FIRST + said, report
    assert all(m.numeric for m in d.manifest if not m.key.startswith("host.")), d.manifest
    # the argument that set it: a note, as an argument alone (``npu``, ``bench``) is no difference
    arguments = f"  note: the runs' scripts take other arguments: argument 1 absent against {RUNS[run][0]}"
    assert arguments in report.splitlines(), report
    assert "Culprit:" in report or "runs differ:" in report or "No operator" in report  # the rest still said


def test_runs_that_differ_only_where_they_ran_get_a_note_and_no_runs_differ_line(
    runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d, report = _report(runs["base"], runs["moved"], tmp_path, capsys)
    assert "runs differ" not in report, report
    note = "  note: the runs' manifests differ only where numerics do not: working folder, script path"
    assert note in report.splitlines(), report
    assert {m.key for m in d.manifest} == {"host.cwd", "argv.0"} and not any(m.numeric for m in d.manifest)
    assert d.all_clear


def _damage(path: Path, how: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The manifest at ``path`` made unreadable ``how``; the words the note gives the reason in."""
    path.unlink()
    if how == "junk":
        path.write_text('{"format": "ptdbg-manifest", "version": 1, "argv": [')
        return "Expecting value"
    if how == "huge":
        monkeypatch.setenv(budget.ENV, "64K")
        path.write_text(json.dumps({"format": "ptdbg-manifest", "version": 1, "argv": ["x"] * 40_000}))
        return "more than the 65.5 kB one dump entry may take"
    os.mkfifo(path)  # a pipe: opened for reading, it would block until a writer came
    return "is a named pipe (FIFO), not a regular file"


@pytest.mark.parametrize("how", ["junk", "huge", "pipe"])
def test_a_manifest_that_cannot_be_read_gives_a_note_and_the_compare_goes_on(
    runs: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    how: str,
) -> None:
    npu, bench = tmp_path / "npu", tmp_path / "bench"
    shutil.copytree(runs["base"], npu)
    shutil.copytree(runs["lr"], bench)
    words = _damage(npu / "manifest_rank0.json", how, monkeypatch)
    d, report = _report(npu, bench, tmp_path, capsys)
    assert not d.manifest and [side for side, _ in d.manifest_unread] == ["NPU"], d.manifest_unread
    assert FIRST not in report, report
    (note,) = [line for line in report.splitlines() if "manifest was not read" in line]
    assert note.startswith("  note: the NPU run's manifest was not read (manifest_rank0.json: "), note
    assert words in note and note.endswith("): the runs' manifests are not compared"), note
    assert str(npu) not in note  # the file's name, not its path again
    assert not d.fault and d.judged, report  # compared and diagnosed all the same


def test_dumps_without_manifests_say_nothing_of_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The original ptdbg_ascend's dumps have no manifest; one beside the NPU side only (another tool on
    the bench) is nothing to compare with either."""
    fixture = Path(__file__).parents[1] / "fixtures" / "original" / "interpolate_zeros"
    npu, bench = tmp_path / "npu", tmp_path / "bench"
    shutil.copytree(fixture / "npu", npu)
    shutil.copytree(fixture / "bench", bench)
    _, plain = _report(npu, bench, tmp_path, capsys)
    manifest = {"format": "ptdbg-manifest", "version": 1, "optimizers": [{"groups": [{"lr": 0.1}]}]}
    (npu / "manifest_rank10642.json").write_text(json.dumps(manifest))
    d, report = _report(npu, bench, tmp_path, capsys)
    assert not d.manifest and not d.manifest_unread
    assert "runs' manifests" not in report and "run's manifest" not in report, report
    assert "before any kernel" not in report, report
    assert report.splitlines()[:3] == plain.splitlines()[:3]
