"""Narrowing a dump: ``--module`` (only the calls inside those modules, with their backward),
``--rank``, and ``--config FILE`` with the command line overriding it; bad options stop the run
before the script starts."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from torch import nn

from dumper import ConfigError, PrecisionDebugger
from dumper.cli import main
from ptdbg_tui.formats.dump_options import DumpOptions, write_options
from ptdbg_tui.formats.layout import discover
from ptdbg_tui.formats.modules import ModuleFollower, sidecar_path
from ptdbg_tui.formats.pkl import read_pkl

SCRIPT = textwrap.dedent("""
    import pathlib
    import sys
    import torch
    from torch import nn

    pathlib.Path(sys.argv[1]).write_text("started")

    class Track(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(4, 4, batch_first=True)
            self.proj = nn.Linear(4, 4)

        def forward(self, x):
            out, _ = self.lstm(x)
            return torch.tanh(self.proj(out))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Linear(3, 4)
            self.track = Track()
            self.head = nn.Linear(4, 2)

        def forward(self, x):
            return self.head(self.track(torch.relu(self.embed(x)))[:, -1])

    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        opt.zero_grad()
        model(torch.randn(2, 5, 3)).sum().backward()
        opt.step()
""")


def _run(tmp_path: Path, *options: str) -> list:
    tmp_path.mkdir(parents=True, exist_ok=True)
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    assert main(["run", str(script), str(tmp_path / "started"), *options]) == 0
    return discover(tmp_path / "d")


def _calls(dump) -> set[str]:
    return {r.call for r in read_pkl(dump.records).tensors}


def test_module_scope_dumps_only_the_calls_inside_with_their_backward(tmp_path: Path) -> None:
    (full,) = _run(tmp_path / "full", "--dump-path", str(tmp_path / "full" / "d"), "--step", "1")
    (lstm,) = _run(tmp_path, "--dump-path", str(tmp_path / "d"), "--step", "1", "--module", "track.lstm")
    assert _calls(lstm) == {
        "Torch_zeros_0_forward",
        "Torch_zeros_1_forward",  # its initial state
        "VF_lstm_0_forward",
        "VF_lstm_0_backward",
    }
    (track,) = _run(
        tmp_path / "t",
        "--dump-path",
        str(tmp_path / "t" / "d"),
        "--step",
        "1",
        "--module",
        "track",
        "--module",
        "head",
    )
    chains = ModuleFollower(sidecar_path(track.records)).read(final=True)
    assert chains and all(chain[0][0] in ("track", "head") for chain in chains.values())
    full_chains = ModuleFollower(sidecar_path(full.records)).read(final=True)
    inside = {k for k, chain in full_chains.items() if chain[0][0] in ("track", "head")}
    # the same calls under the same names as in the full dump: a narrowed dump pairs with it
    assert {c.rsplit("_", 1)[0] for c in _calls(track)} == inside
    assert _calls(track) <= _calls(full) and "Functional_linear_0_forward" not in _calls(track)
    assert {
        "Functional_linear_1_forward",
        "Functional_linear_1_backward",
        "Torch_tanh_0_backward",
        "Functional_linear_2_forward",
    } <= _calls(track)


def test_config_file_gives_every_option_and_the_command_line_overrides_it(tmp_path: Path, caplog) -> None:
    config = write_options(
        tmp_path / "narrow.json",
        DumpOptions(
            dump_path=str(tmp_path / "d"), mode="all", step=[0], module=["track.proj"], summary_only=True
        ),
    )
    with caplog.at_level(logging.INFO, logger="dumper"):
        (dump,) = _run(tmp_path, "--config", str(config), "--mode", "api_stack", "--summary-only")
    assert dump.step == 0 and dump.mode == "api_stack" and not dump.has_tensors
    # an override is said; an option given the same on both sides is not
    assert f"ptdbg-dump: --mode api_stack on the command line overrides {config}'s mode: all" in caplog.text
    assert "--summary-only on the command line" not in caplog.text
    assert _calls(dump) == {"Functional_linear_1_forward", "Functional_linear_1_backward"}


def test_md5_mode_from_the_config_writes_checksums_and_no_npy(tmp_path: Path) -> None:
    config = write_options(
        tmp_path / "c.json", DumpOptions(dump_path=str(tmp_path / "d"), step=[0], summary_mode="md5")
    )
    (dump,) = _run(tmp_path, "--config", str(config))
    tensors = read_pkl(dump.records).tensors
    assert not dump.has_tensors and all(r.md5 for r in tensors if not r.is_scalar)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"dump_path": "d", "modules": ["x"]}, "unknown option(s) 'modules'"),
        ({"dump_path": "d", "step": "0"}, "step must be a list"),
        ({"dump_path": "d", "mode": "lst"}, "unknown mode 'lst'"),
        ({"dump_path": "d", "module": ["track..lstm"]}, "not a module path"),
        ({"mode": "all"}, "--dump-path DIR is required"),
    ],
)
def test_bad_options_fail_before_the_script_starts(tmp_path: Path, capsys, config, message) -> None:
    (tmp_path / "c.json").write_text(json.dumps(config))
    with pytest.raises(SystemExit) as e:
        _run(tmp_path, "--config", str(tmp_path / "c.json"))
    assert e.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "started").exists()


def test_a_module_the_model_lacks_is_refused_and_a_scope_nothing_ran_in_is_said(
    tmp_path: Path, caplog
) -> None:
    model = nn.Sequential(nn.Linear(2, 2), nn.Tanh())
    with pytest.raises(ConfigError, match="no module 'lstm'; its modules are 0, 1"):
        PrecisionDebugger(dump_path=str(tmp_path), model=model).configure_hook(module=["lstm"])
    debugger = PrecisionDebugger(dump_path=str(tmp_path))
    debugger.configure_hook(module=["encoder"])
    with caplog.at_level(logging.WARNING, logger="dumper"):
        debugger.start()
        model(torch.ones(1, 2))
        debugger.stop()
    assert "no call ran inside module encoder; the modules seen are 0, 1" in caplog.text
    assert not list(tmp_path.rglob("*.pkl"))


def test_a_rank_list_dumps_only_the_ranks_listed(tmp_path: Path) -> None:
    for ranks, dumped in (([1, 2], False), ([0, 2], True)):
        path = tmp_path / str(ranks)
        debugger = PrecisionDebugger(dump_path=str(path), rank=ranks)
        for _ in range(2):  # the rank is known from the first step on
            debugger.start()
            torch.add(torch.ones(2), 1)
            debugger.stop()
            debugger.step()
        assert bool(list(path.rglob("*.pkl"))) == dumped
        if dumped:
            assert [d.rank for d in discover(path)] == [0]


RANK_JOB = textwrap.dedent("""
    import sys
    import torch
    import torch.distributed as dist

    rank, store = int(sys.argv[1]), sys.argv[2]
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    x = torch.ones(4) * (rank + 1)
    dist.all_reduce(x)
    torch.tanh(x)
    dist.destroy_process_group()
""")


def test_rank_under_ptdbg_dump_run_is_judged_once_the_job_is_distributed(tmp_path: Path) -> None:
    """torch.distributed starts inside the script, after the dumper: the rank is judged at the first
    call, and the other rank runs undumped."""
    job = tmp_path / "job.py"
    job.write_text(RANK_JOB)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "OMP_NUM_THREADS": "1"}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dumper.cli",
                "run",
                str(job),
                str(r),
                str(tmp_path / "store"),
                "--dump-path",
                str(tmp_path / "d"),
                "--rank",
                "1",
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for r in range(2)
    ]
    for proc in procs:
        out = proc.communicate(timeout=120)[0]
        assert proc.returncode == 0, out
    (dump,) = discover(tmp_path / "d")
    assert dump.rank == 1
    tensors = {r.name: r for r in read_pkl(dump.records).tensors}
    assert tensors["Distributed_all_reduce_0_forward_input.0"].stats[0] == 2.0  # rank 1's own, alone
    assert len(tensors) == len(read_pkl(dump.records).tensors)


class _Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attn = nn.Linear(4, 4)
        self.mlp = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.mlp(x + self.attn(x))


class _Decoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(_Block() for _ in range(3))
        self.blocks = nn.ModuleDict({"last": _Block()})

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:  # the ModuleList itself is never called
            x = layer(x)
        return self.blocks["last"](x)


class _CausalLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.model = _Decoder()
        self.lm_head = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.model(x))


def test_layers_of_a_module_list_are_named_by_their_index_without_a_model(tmp_path: Path) -> None:
    """LLaMA-style: ``model.layers.1.mlp``, never ``model._Block``, so that --module finds them."""
    torch.manual_seed(0)
    model = _CausalLM()
    runs = {}
    for name, given in (("named", model), ("found", None)):
        debugger = PrecisionDebugger(dump_path=str(tmp_path / name), step=[0], model=given)
        debugger.configure_hook(module=["model.layers.1.mlp", "model.blocks.last.attn"])
        debugger.start()
        model(torch.randn(2, 4)).sum().backward()
        debugger.stop()
        debugger.step()
        (dump,) = discover(tmp_path / name)
        runs[name] = (_calls(dump), ModuleFollower(sidecar_path(dump.records)).read(final=True))
    calls, chains = runs["found"]
    assert runs["named"] == runs["found"]
    assert {c.rsplit("_", 1)[0] for c in calls} == {
        "Functional_linear_4",
        "Functional_gelu_1",
        "Functional_linear_5",
        "Functional_linear_9",
    }
    assert chains["Functional_gelu_1"] == (
        ("model", "_Decoder"),
        ("model.layers.1", "_Block"),
        ("model.layers.1.mlp", "Sequential"),
        ("model.layers.1.mlp.1", "GELU"),
    )


def test_a_run_whose_scope_and_module_keep_no_call_says_so(tmp_path: Path, caplog) -> None:
    """A call's narrowing config (mode list) with a --module it does not run in keeps nothing: the
    message names those options, not only the processes a script may spawn."""
    options = ("--mode", "list", "--scope", "Functional_linear_0_", "--module", "head", "--step", "0")
    with caplog.at_level(logging.WARNING, logger="dumper"):
        script = tmp_path / "train.py"
        script.write_text(SCRIPT)
        assert (
            main(
                ["run", str(script), str(tmp_path / "started"), "--dump-path", str(tmp_path / "d"), *options]
            )
            == 0
        )
    assert not (tmp_path / "d" / "ptdbg_dump_v4.0").exists()  # the run manifest only (docs/monitor.md)
    assert "nothing was dumped" in caplog.text
    assert (
        "among the calls that mode list with scope Functional_linear_0_ and module head keep" in caplog.text
    )
