"""The narrowing loop end to end (issue 19): a statistics dump of a real small model (the demo's, whose
"NPU" LSTM backward is wrong) on both sides, ``ptdbg-tui narrow`` writes the next dump's config,
``ptdbg-dump run --config`` dumps tensors of that module only, and the compare of the new pair names
the same culprit."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from dumper.cli import main as dump_main
from ptdbg_tui.cli import EXIT_NOTHING_TO_NARROW
from ptdbg_tui.cli import main as tui_main
from ptdbg_tui.compare.diagnosis.narrowing import Chosen
from ptdbg_tui.engine.batch import compare_dumps
from ptdbg_tui.engine.callpath import module_label
from ptdbg_tui.engine.narrow import multi_rank_job, narrowing_in
from ptdbg_tui.formats.dump_options import DumpOptions, read_options
from ptdbg_tui.formats.layout import RankDump, discover
from ptdbg_tui.formats.modules import ModuleFollower, sidecar_path
from ptdbg_tui.formats.pkl import read_pkl
from ptdbg_tui.formats.reader import module_chain_of

JOB = Path(__file__).with_name("narrow_job.py")


def _dump(script: Path, side: str, *options: str) -> None:
    assert dump_main(["run", str(script), side, *options]) == 0


@pytest.fixture(scope="module")
def statistics(tmp_path_factory) -> tuple[Path, Path, Path]:
    """The job's script, and its statistics dumps of steps 0 and 1 on both sides (step 1 starts from
    the weights that step 0 updated with the wrong gradient)."""
    root = tmp_path_factory.mktemp("loop")
    for side in ("npu", "bench"):
        _dump(JOB, side, "--dump-path", str(root / "stats" / side), "--step", "0", "1", "--summary-only")
    return JOB, root / "stats" / "npu", root / "stats" / "bench"


def test_narrow_writes_the_culprit_modules_config_and_the_new_dump_names_the_same_culprit(
    statistics, tmp_path: Path, capsys
) -> None:
    script, npu, bench = statistics
    before = compare_dumps(npu, bench, summary=True, jobs=1)
    stats = before[0]
    assert [o.npu.step for o in before] == [0, 1] and all(o.summary for o in before)
    assert stats.diagnosis.culprit.call == "VF_lstm_0_backward"
    assert any(s.call == "VF_lstm_0_backward" for s in before[1].diagnosis.suspects)
    for o in before:  # the module of the culprit as it stands once the steps are linked
        entry = o.diagnosis.culprit.rows[0].record.entry
        assert o.culprit_module == module_label(*module_chain_of(o.npu, entry)[-1])

    config = tmp_path / "narrow.json"
    assert tui_main(["narrow", str(npu), str(bench), "-o", str(config)]) == 0
    out = capsys.readouterr().out
    assert "Culprit: VF_lstm_0_backward (backward)" in out  # the statistics verdict, as compare says it
    assert "Narrowed to module track.lstm: the culprit VF_lstm_0_backward ran in track.lstm · LSTM." in out
    assert "step 0; rank 0" in out  # where it diverged first: step 1 inherits it
    dump_dir = tmp_path / "narrow"
    for side in ("npu", "bench"):
        assert f"ptdbg-dump run {script} --dump-path {dump_dir / side} --config {config}" in out
    assert f"ptdbg-tui compare {dump_dir / 'npu'} {dump_dir / 'bench'}" in out
    assert "torchrun" not in out and "from_config" not in out, "one process: no launcher's form"
    assert read_options(config) == DumpOptions(
        mode="api_stack",
        step=[0],
        rank=[0],
        module=["track.lstm"],
        summary_only=False,
        summary_mode="statistics",
    )
    assert not list(tmp_path.glob("*.msprobe.json"))  # a ptdbg dump: no other tool's config

    for side in ("npu", "bench"):  # the commands it printed
        _dump(script, side, "--dump-path", str(dump_dir / side), "--config", str(config))
    (narrowed,) = discover(dump_dir / "npu")
    assert narrowed.step == 0 and narrowed.has_tensors
    chains = ModuleFollower(sidecar_path(narrowed.records)).read(final=True)
    assert chains and all(chain[-1][0] == "track.lstm" for chain in chains.values())
    calls = {r.call for r in read_pkl(narrowed.records).tensors}
    assert {"VF_lstm_0_forward", "VF_lstm_0_backward"} <= calls
    assert not any(c.startswith(("Functional_conv2d", "Functional_linear")) for c in calls)

    (after,) = compare_dumps(dump_dir / "npu", dump_dir / "bench", jobs=1)
    assert not after.summary and len(after.rows) < len(stats.rows) / 10
    assert after.diagnosis.culprit.call == "VF_lstm_0_backward"
    assert after.culprit_module == stats.culprit_module == "track.lstm · LSTM"


def test_a_job_of_several_ranks_is_told_the_torchrun_and_spawned_forms_too(
    statistics, tmp_path: Path, capsys
) -> None:
    """The same dumps as rank 1 of a job (a torchrun job writes one rankN folder a rank): beside the
    plain command, narrow prints how to run it under torchrun and in spawned ranks."""
    script, npu, bench = statistics
    for side, source in (("npu", npu), ("bench", bench)):
        for rank0 in source.rglob("rank0"):
            shutil.copytree(rank0, tmp_path / side / rank0.relative_to(source).with_name("rank1"))
    config = tmp_path / "narrow.json"
    assert tui_main(["narrow", str(tmp_path / "npu"), str(tmp_path / "bench"), "-o", str(config)]) == 0
    out = capsys.readouterr().out
    assert "step 0; rank 1" in out
    assert f"ptdbg-dump run {script} --dump-path {tmp_path / 'narrow' / 'npu'} --config {config}" in out
    assert f"torchrun [its options] --no-python ptdbg-dump run {script} --dump-path" in out
    assert f"PrecisionDebugger.from_config({str(config)!r}, dump_path=…)" in out  # spawned ranks


def test_a_module_sidecar_that_cannot_be_read_is_said(statistics, tmp_path: Path, capsys) -> None:
    """A folder in the NPU module sidecar's place: compare says why the culprit has no module line, and
    narrow, which falls back to the call, does not claim that it ran in no module the dump records."""
    _, npu, bench = statistics
    shutil.copytree(npu, tmp_path / "npu")
    sidecars = [sidecar_path(d.records) for d in discover(tmp_path / "npu")]
    for sidecar in sidecars:
        sidecar.unlink()
        sidecar.mkdir()
    why = f"{sidecars[0]}: is a directory, not a regular file"
    assert tui_main(["compare", str(tmp_path / "npu"), str(bench), "-o", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "    module:" not in out
    assert f"  note: module sidecar not read ({why}): the culprit's module is not shown" in out
    assert tui_main(["narrow", str(tmp_path / "npu"), str(bench), "-o", str(tmp_path / "n.json")]) == 0
    out = capsys.readouterr().out
    assert "in no module the dump records" not in out
    assert f"which ran in a module not known: its module sidecar cannot be read ({why})" in out


def test_a_job_of_several_ranks_is_told_by_its_ranks_or_its_collectives() -> None:
    rank = RankDump(Path("/d/rank0/x.pkl"), 0, 0)
    assert not multi_rank_job([rank], ["Functional_linear_0_forward_input.0"])
    assert not multi_rank_job([replace(rank, rank=None)], [])
    assert multi_rank_job([replace(rank, rank=1)], [])
    assert multi_rank_job([rank, replace(rank, rank=1)], [])
    assert multi_rank_job([rank], ["Distributed_all_reduce_0_forward_input.0"])
    assert multi_rank_job([rank], ["Distributed.all_reduce.0.forward.input.0"])  # msprobe's names
    pid = replace(rank, rank=10267)  # the original's CPU run: rank<pid>, one folder per step
    assert not multi_rank_job([pid, replace(pid, step=1)], [])
    assert multi_rank_job([pid, replace(pid, rank=10268)], [])
    why = Chosen("net", module=True)
    assert narrowing_in(pid, why, module="net", dumps=[pid]).target.ranks is None
    assert narrowing_in(
        replace(rank, rank=3), why, module="net", dumps=[replace(rank, rank=3)]
    ).target.ranks == (3,)


def test_a_cpu_dump_of_the_original_named_by_its_process_id_is_no_rank_to_keep(
    tmp_path: Path, capsys
) -> None:
    """The original's CPU run never learns a rank and names its folder rank<pid>: a config kept
    'rank: [10267]', which dumps nothing, and the commands offered torchrun for one process."""
    mixed = Path(__file__).resolve().parents[1] / "fixtures" / "mixed"
    assert [d.rank for d in discover(mixed / "npu")] == [10267]
    assert tui_main(["narrow", str(mixed / "npu"), str(mixed / "bench"), "-o", str(tmp_path / "n.json")]) == 0
    out = capsys.readouterr().out
    assert "; step 0; every rank." in out and "torchrun" not in out
    assert read_options(tmp_path / "n.json").rank is None


def test_narrow_to_a_call_or_a_module_named(statistics, tmp_path: Path, capsys) -> None:
    _, npu, bench = statistics
    assert (
        tui_main(
            [
                "narrow",
                str(npu),
                str(bench),
                "--call",
                "Functional_linear_0_forward",  # track.fc
                "-o",
                str(tmp_path / "call.json"),
                "--dump-path",
                str(tmp_path / "d"),
                "--script",
                "train.py --epochs 1",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "Narrowed to call Functional_linear_0: the call named (Functional_linear_0_forward)." in out
    assert f"ptdbg-dump run 'train.py --epochs 1' --dump-path {tmp_path / 'd' / 'npu'}" in out
    options = read_options(tmp_path / "call.json")
    assert options.mode == "list" and options.scope == ["Functional_linear_0_"] and options.step == [0]

    assert (
        tui_main(["narrow", str(npu), str(bench), "--module", "backbone", "-o", str(tmp_path / "m.json")])
        == 0
    )
    assert read_options(tmp_path / "m.json").module == ["backbone"]
    # no suspect inside the backbone: the step and rank compared
    out = capsys.readouterr().out
    assert "Narrowed to module backbone: the module named (backbone)." in out
    # the commands name the script the target's calls were made from, as they do for the culprit
    assert f"ptdbg-dump run {JOB} --dump-path" in out

    call = ["--call", "Functional_linear_0_forward", "-o", str(tmp_path / "c.json")]
    assert tui_main(["narrow", str(npu), str(bench), *call]) == 0
    assert f"ptdbg-dump run {JOB} --dump-path" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--module", "track.lst"], "no module track.lst in the NPU dump; its modules are backbone, "),
        (
            ["--call", "Torch_nope_0"],
            "no call Torch_nope_0 in the NPU dump (a call is named as the report "
            "names it, e.g. VF_lstm_0_backward)",
        ),
    ],
)
def test_an_unknown_call_or_module_is_said(statistics, tmp_path: Path, capsys, args, message) -> None:
    _, npu, bench = statistics
    assert tui_main(["narrow", str(npu), str(bench), *args, "-o", str(tmp_path / "x.json")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()


def test_nothing_to_narrow_to_when_the_runs_agree(statistics, tmp_path: Path, capsys) -> None:
    """It read 'ptdbg-tui narrow: error: no culprit to narrow to: … (329 calls judged).; No operator …'
    on stderr and exited 2, as for unusable arguments."""
    _, _, bench = statistics
    assert (
        tui_main(["narrow", str(bench), str(bench), "-o", str(tmp_path / "x.json")]) == EXIT_NOTHING_TO_NARROW
    )
    out, err = capsys.readouterr()
    assert err == "" and "No verdict: the NPU and bench dumps are the same file" in out
    assert out.splitlines()[-1] == "nothing to narrow: no culprit (see above)"
    assert not (tmp_path / "x.json").exists()


def test_nothing_to_narrow_where_no_call_is_at_fault(statistics, tmp_path: Path, capsys) -> None:
    _, _, bench = statistics
    npu = tmp_path / "copy"
    shutil.copytree(bench, npu)  # the same run twice: every call agrees
    assert (
        tui_main(["narrow", str(npu), str(bench), "-o", str(tmp_path / "x.json")]) == EXIT_NOTHING_TO_NARROW
    )
    out = capsys.readouterr().out
    assert ".;" not in out and "No operator introduces an error beyond rounding" in out
    assert out.splitlines()[-1] == (
        "nothing to narrow: no culprit (no call introduces an error beyond rounding and no entry fails)"
    )


EXTRA_CALL = """\
import sys
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(8, 16), nn.GELU())
        self.head = nn.Linear(16, 2)

    def forward(self, x):
        h = self.enc(x)
        if sys.argv[1] == "npu":
            h = h * 1.01  # a line only the NPU script has
        return self.head(h)


torch.manual_seed(0)
net = Net()
net(torch.randn(4, 8)).sum().backward()
"""


def test_a_culprit_only_the_npu_run_makes_is_not_narrowed_to(tmp_path: Path, capsys) -> None:
    """Its config scoped the next dumps to Tensor___mul___0_: the bench dumped nothing and the suggested
    compare failed ('no such file or directory')."""
    script = tmp_path / "train.py"
    script.write_text(EXTRA_CALL)
    for side in ("npu", "bench"):
        _dump(script, side, "--dump-path", str(tmp_path / side), "--summary-only")
    assert (
        tui_main(["narrow", str(tmp_path / "npu"), str(tmp_path / "bench"), "-o", str(tmp_path / "x.json")])
        == 2
    )
    err = capsys.readouterr().err
    assert (
        f"the culprit Tensor___mul___0_forward is a call only the NPU run makes ({script}:15), in no module "
        "of its own: the bench run has no such call to dump"
    ) in err, err
    assert not (tmp_path / "x.json").exists()
