"""Narrowing real msprobe statistics dumps (tests/fixtures/msprobe): the msprobe config.json written
beside ours, and, where msprobe is installed, msprobe's own parser loads it, its tensor dump holds the
target only and the compare names the same culprit."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ptdbg_tui.cli import main
from ptdbg_tui.engine.batch import compare_dumps
from ptdbg_tui.formats.dump_options import read_options
from ptdbg_tui.formats.layout import discover
from ptdbg_tui.formats.reader import read_dump

MSPROBE = Path(__file__).parents[1] / "fixtures" / "msprobe"
CULPRIT = "Functional.silu.0.backward"  # make_fixtures.py's faulty silu backward
JOB = Path(__file__).with_name("msprobe_job.py")


def _narrow(tmp_path: Path, mode: str, *args: str) -> tuple[Path, dict]:
    config = tmp_path / f"{mode}.json"
    assert (
        main(["narrow", str(MSPROBE / mode / "npu"), str(MSPROBE / mode / "bench"), "-o", str(config), *args])
        == 0
    )
    other = tmp_path / f"{mode}.msprobe.json"
    return config, json.loads(other.read_text())


def test_statistics_dump_at_level_l1_narrows_to_the_culprit_call(tmp_path: Path, capsys) -> None:
    config, msprobe = _narrow(tmp_path, "statistics")
    out = capsys.readouterr().out
    assert f"Culprit: {CULPRIT} (backward)" in out
    assert (
        "Narrowed to call Functional.silu.0: the culprit Functional.silu.0.backward, which ran in no "
        "module the dump records." in out
    )
    assert f"msprobe config: {tmp_path / 'statistics.msprobe.json'}" in out
    assert msprobe == {
        "task": "tensor",
        "dump_path": str(tmp_path / "statistics" / "npu"),
        "rank": [],  # a proc<pid> folder: not distributed, where a rank list dumps nothing
        "step": [0],
        "level": "L1",
        "async_dump": False,
        "tensor": {"scope": [], "list": ["Functional.silu.0."], "data_mode": ["all"]},
    }
    options = read_options(config)  # ours, for the same call
    assert options.mode == "list" and options.scope == ["Functional_silu_0_"] and options.rank is None
    for path in (config, tmp_path / "statistics.msprobe.json"):
        assert oct(path.stat().st_mode & 0o777) == "0o640", "every file written: 0640"


def test_a_module_of_a_mix_dump_narrows_at_level_mix(tmp_path: Path) -> None:
    config, msprobe = _narrow(tmp_path, "mix", "--module", "lstm")
    assert msprobe["level"] == "mix" and msprobe["tensor"]["list"] == ["Module.lstm."]
    assert read_options(config).module == ["lstm"]


@pytest.mark.parametrize(
    "call", ["Module.lstm.LSTM.forward.0", "Module.lstm.LSTM.backward.0", "Module.lstm.LSTM.0"]
)
def test_a_module_call_named_as_the_report_names_it_narrows_to_its_module(
    tmp_path: Path, capsys, call
) -> None:
    """msprobe's module calls end in their index: ``--call Module.lstm.LSTM.forward.0`` (a level-L0
    culprit as the report names it) read 'no call Module.lstm.LSTM.forward.0 in the NPU dump'."""
    config, msprobe = _narrow(tmp_path, "mix", "--call", call)
    assert f"Narrowed to module lstm: the call named ({call})." in capsys.readouterr().out
    assert msprobe["level"] == "mix" and msprobe["tensor"]["list"] == ["Module.lstm."]
    assert read_options(config).module == ["lstm"]


def test_msprobe_loads_the_configs_and_its_narrowed_dumps_name_the_same_culprit(
    tmp_path: Path, msprobe_python: str
) -> None:
    python = msprobe_python
    _narrow(tmp_path, "mix", "--module", "lstm")
    _narrow(tmp_path, "statistics")
    config = tmp_path / "statistics.msprobe.json"
    for side in ("npu", "bench"):  # as the printed usage says: the bench run names its own dump_path
        checks = ["--check", str(config), str(tmp_path / "mix.msprobe.json")] if side == "npu" else []
        out = tmp_path / "statistics" / side
        done = subprocess.run(
            [python, str(JOB), str(config), side, str(out), *checks],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        if checks:
            assert "task tensor, level L1, list ['Functional.silu.0.'], scope APIRangeScope" in done.stdout
            assert "task tensor, level mix, list ['Module.lstm.'], scope MixRangeScope" in done.stdout
    (npu,) = discover(tmp_path / "statistics" / "npu")
    assert {r.call for r in read_dump(npu).tensors} == {"Functional.silu.0.forward", CULPRIT}
    (pair,) = compare_dumps(tmp_path / "statistics" / "npu", tmp_path / "statistics" / "bench", jobs=1)
    assert not pair.summary and pair.diagnosis.culprit.call == CULPRIT
