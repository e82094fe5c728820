"""Jobs whose ranks are processes of their own, dumped with a narrowing config (what ``ptdbg-tui narrow``
prints for them): torchrun around ``ptdbg-dump run``, and ranks spawned by the script that start
``PrecisionDebugger.from_config``. Each dumps only the config's rank and module."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dumper import ConfigError, PrecisionDebugger
from ptdbg_tui.formats.dump_options import DumpOptions, write_options
from ptdbg_tui.formats.layout import discover
from ptdbg_tui.formats.pkl import read_pkl

JOB = Path(__file__).with_name("launch_job.py")
BIN = Path(sys.executable).parent


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "OMP_NUM_THREADS": "1"}


def _config(tmp_path: Path) -> Path:
    return write_options(
        tmp_path / "narrow.json", DumpOptions(mode="api_stack", rank=[1], module=["inner"], summary_only=True)
    )


def _calls(dump_path: Path) -> tuple[list[int | None], set[str]]:
    dumps = discover(dump_path)
    return [d.rank for d in dumps], {r.call for d in dumps for r in read_pkl(d.records).tensors}


def _run(argv: list[str], cwd: Path) -> str:
    done = subprocess.run(argv, env=_env(), cwd=cwd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def test_torchrun_around_ptdbg_dump_run_dumps_the_configs_rank_and_module(tmp_path):
    if not (BIN / "torchrun").exists():
        pytest.skip("torchrun is not installed beside this Python")
    config = _config(tmp_path)
    launch = [str(BIN / "torchrun"), "--nproc_per_node=2", "--standalone", "--no-python"]
    said = _run(
        [*launch, str(BIN / "ptdbg-dump"), "run", str(JOB), "--dump-path", "d", "--config", str(config)],
        tmp_path,
    )
    ranks, calls = _calls(tmp_path / "d")
    assert ranks == [1]
    assert calls == {"Functional_linear_0_forward", "Functional_linear_0_backward"}, "inner's linear only"
    assert "rank 0 is not dumped (rank=1 was asked)" in said
    assert "nothing was dumped" not in said, "a rank left out on purpose is no mistake to warn of"


def test_spawned_ranks_start_the_debugger_from_the_config(tmp_path):
    config = _config(tmp_path)
    _run([sys.executable, str(JOB), str(tmp_path / "store"), str(config), str(tmp_path / "d")], tmp_path)
    ranks, calls = _calls(tmp_path / "d")
    assert ranks == [1]
    assert calls == {"Functional_linear_0_forward", "Functional_linear_0_backward"}


def test_a_bad_config_is_refused_at_once(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"module": "inner"}')
    with pytest.raises(ConfigError, match="module must be a list"):
        PrecisionDebugger.from_config(bad, dump_path=tmp_path / "d")
    with pytest.raises(ConfigError, match="dump_path is required"):
        PrecisionDebugger.from_config(_config(tmp_path))
