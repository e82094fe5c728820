"""``ptdbg-dump run --monitor``: a small training run in this process, its monitor stream read back and
checked against the numbers the script computes itself, and its run manifest against another run's."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dumper.cli import main as dump_main
from ptdbg_tui.formats import monitor as fmon
from ptdbg_tui.formats.manifest import (
    ManifestError,
    json_text,
    manifest_differences,
    read_manifest,
)

pytest.importorskip("pyarrow")

#: argv: OUT LR INIT_SEED DATA_SEED NAN_STEP SCALER. Writes OUT/expected.json: per step, what torch says
#: the gradient and update norms, lr and loss were, and how many steps the monitor file held mid-run.
SCRIPT = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    import torch
    from torch import nn
    from ptdbg_tui.formats.monitor import read_monitor

    out, lr, init_seed, data_seed, nan_step, scaler_on = sys.argv[1:]
    out, nan_step = Path(out), int(nan_step)

    class Poison(nn.Module):  # NaN in two elements of its output at step nan_step
        step = -1
        def forward(self, x):
            if self.step == nan_step:
                x = x.clone()
                x[0, :2] = float("nan")
            return x

    torch.manual_seed(int(init_seed))
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), Poison(), nn.Linear(16, 4))
    crit = nn.MSELoss()
    opt = torch.optim.AdamW(model.parameters(), lr=float(lr), weight_decay=0.01)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10) if scaler_on == "1" else None
    gen = torch.Generator().manual_seed(int(data_seed))
    expected, seen_mid_run = [], None
    for step in range(6):
        model[2].step = step
        x = torch.randn(4, 8, generator=gen)
        loss = crit(model(x), torch.zeros(4, 4))
        opt.zero_grad()
        (scaler.scale(loss) if scaler else loss).backward()
        if scaler:
            scaler.unscale_(opt)
        grads = [torch.linalg.vector_norm(p.grad).item() for p in model.parameters()]
        before = [p.detach().clone() for p in model.parameters()]
        lr_now = opt.param_groups[0]["lr"]
        if scaler:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        after = list(model.parameters())
        updates = [torch.linalg.vector_norm(p.detach() - b).item() for p, b in zip(after, before)]
        expected.append({"loss": loss.item(), "lr": lr_now, "grads": grads, "updates": updates})
        sched.step()
        if step == 3:  # the monitor file, read while the training runs
            files = list(out.glob("monitor_rank*.arrows"))
            seen_mid_run = len(read_monitor(files[0]).batches) if files else None
    (out / "expected.json").write_text(json.dumps({"steps": expected, "seen_mid_run": seen_mid_run}))
""")

PARAMS = ["0.weight", "0.bias", "3.weight", "3.bias"]


def _run(
    tmp_path: Path,
    name: str,
    *extra: str,
    lr: float = 0.01,
    init: int = 0,
    data: int = 0,
    nan_step: int = -1,
    scaler: bool = False,
) -> tuple[Path, dict[str, Any]]:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    out = tmp_path / name
    out.mkdir()
    args = [str(out), str(lr), str(init), str(data), str(nan_step), "1" if scaler else "0"]
    assert dump_main(["run", str(script), "--monitor", str(out), *extra, "--", *args]) == 0
    return out, json.loads((out / "expected.json").read_text())


def _rows(out: Path) -> list[dict[str, Any]]:
    stream = fmon.read_monitor(out / "monitor_rank0.arrows")
    assert stream.cut == 0 and stream.ended
    return stream.table().to_pylist()


def _one(rows: list[dict[str, Any]], iteration: int, kind: str, name: str) -> dict[str, Any]:
    found = [r for r in rows if (r["iteration"], r["kind"], r["name"]) == (iteration, kind, name)]
    assert len(found) == 1, (iteration, kind, name, found)
    return found[0]


def test_monitor_records_each_step_as_torch_computes_it(tmp_path: Path) -> None:
    out, expected = _run(tmp_path, "a")
    rows = _rows(out)
    assert sorted({r["iteration"] for r in rows}) == list(range(6))
    assert all(r["step"] == r["iteration"] for r in rows)
    for i, want in enumerate(expected["steps"]):
        assert _one(rows, i, fmon.LR, "0")["value"] == pytest.approx(want["lr"], rel=1e-12)
        assert _one(rows, i, fmon.LOSS, "")["value"] == pytest.approx(want["loss"], rel=1e-6)
        for name, grad, update in zip(PARAMS, want["grads"], want["updates"], strict=True):
            assert _one(rows, i, fmon.GRAD, name)["norm"] == pytest.approx(grad, rel=1e-5)
            assert _one(rows, i, fmon.UPDATE, name)["norm"] == pytest.approx(update, rel=1e-5)
    # StepLR halves the lr every 2 steps: the rows follow the live optimizer
    assert [_one(rows, i, fmon.LR, "0")["value"] for i in range(6)] == pytest.approx(
        [0.01, 0.01, 0.005, 0.005, 0.0025, 0.0025]
    )
    # every module's output, by the name the dump's module sidecar gives it (the model is the root "")
    names = {r["name"] for r in rows if r["kind"] == fmon.OUTPUT}
    assert names == {"", "0", "1", "2", "3", "MSELoss"}  # the loss module: top-level, named by its class
    tanh = _one(rows, 0, fmon.OUTPUT, "1")
    assert -1 <= tanh["min"] <= tanh["mean"] <= tanh["max"] <= 1 and tanh["nan"] == tanh["inf"] == 0
    assert expected["seen_mid_run"] == 4  # steps 0-3 on disk (step 3 ended at its opt.step()) mid-run


def test_a_nan_is_counted_where_it_appears(tmp_path: Path) -> None:
    out, _ = _run(tmp_path, "nan", nan_step=2)
    rows = _rows(out)
    assert _one(rows, 1, fmon.OUTPUT, "2")["nan"] == 0
    poisoned = _one(rows, 2, fmon.OUTPUT, "2")
    assert poisoned["nan"] == 2 and poisoned["inf"] == 0
    assert _one(rows, 2, fmon.OUTPUT, "3")["nan"] == 4  # one row of the next Linear's output
    grad = _one(rows, 2, fmon.GRAD, "3.weight")
    assert np.isnan(grad["norm"]) and grad["nan"] > 0


def test_every_2_records_steps_0_2_4(tmp_path: Path) -> None:
    out, _ = _run(tmp_path, "every", "--every", "2")
    assert sorted({r["iteration"] for r in _rows(out)}) == [0, 2, 4]


def test_a_step_the_grad_scaler_skips_is_recorded(tmp_path: Path) -> None:
    out, expected = _run(tmp_path, "scaler", nan_step=1, scaler=True)
    rows = _rows(out)
    assert [_one(rows, i, fmon.SKIPPED, "")["value"] for i in range(6)] == [0, 1, 0, 0, 0, 0]
    # the dump's step count (optimizer.step() calls) stands still at the skipped one
    assert [_one(rows, i, fmon.SKIPPED, "")["step"] for i in range(6)] == [0, 1, 1, 2, 3, 4]
    assert _one(rows, 0, fmon.LOSS_SCALE, "")["value"] == 2.0**10
    assert _one(rows, 2, fmon.LOSS_SCALE, "")["value"] == 2.0**9  # halved after the skip
    # the unscaled loss, not the scaled one backward() was called on
    assert _one(rows, 0, fmon.LOSS, "")["value"] == pytest.approx(expected["steps"][0]["loss"], rel=1e-6)


def test_a_file_cut_mid_write_reads_back_its_finished_steps(tmp_path: Path) -> None:
    out, _ = _run(tmp_path, "cut")
    whole = (out / "monitor_rank0.arrows").read_bytes()
    cut = tmp_path / "monitor_rank0.arrows"
    stream = fmon.MonitorStream(cut)
    sizes = []
    for size in range(0, len(whole) + 1, max(len(whole) // 40, 1)):  # the file as a reader finds it, growing
        cut.write_bytes(whole[:size])
        stream.poll()
        sizes.append(len(stream.batches))
    assert sizes == sorted(sizes) and 0 < sizes[len(sizes) // 2] < 6
    cut.write_bytes(whole[:-20])  # a run killed while writing its last step (and no end marker)
    read = fmon.read_monitor(cut)
    assert len(read.batches) == 5 and read.cut > 0 and not read.ended
    assert sorted({r["iteration"] for r in read.table().to_pylist()}) == list(range(5))


def test_a_stream_of_another_schema_is_refused(tmp_path: Path) -> None:
    pa = fmon.pyarrow()
    path = tmp_path / "monitor_rank0.arrows"
    with pa.ipc.new_stream(str(path), pa.schema([pa.field("x", pa.int64())])) as writer:
        writer.write_batch(pa.record_batch({"x": [1]}))
    with pytest.raises(fmon.MonitorFileError, match="not a monitor stream"):
        fmon.read_monitor(path)
    path.write_bytes(b"PAR1 not a stream")
    with pytest.raises(fmon.MonitorFileError, match="not an Arrow IPC stream"):
        fmon.read_monitor(path)


def test_manifest_holds_the_hyperparameters_and_names_what_differs(tmp_path: Path) -> None:
    base, _ = _run(tmp_path, "base")
    manifest = read_manifest(base / "manifest_rank0.json")
    (group,) = manifest["optimizers"][0]["groups"]
    assert manifest["optimizers"][0]["class"] == "AdamW"
    assert (group["lr"], group["weight_decay"], group["betas"]) == (0.01, 0.01, [0.9, 0.999])
    (sched,) = manifest["schedulers"]
    assert sched["class"] == "StepLR" and sched["state"]["gamma"] == 0.5
    assert set(manifest["parameters"]) == set(PARAMS)
    assert manifest["modules"] == {
        "": "Sequential",
        "0": "Linear",
        "1": "Tanh",
        "2": "Poison",
        "3": "Linear",
        "MSELoss": "MSELoss",
    }
    assert [b["module"] for b in manifest["batches"]] == ["", "", ""]  # the model's, not the loss module's
    assert manifest["batches"][0]["inputs"][0]["shape"] == [4, 8]
    assert manifest["rng"]["torch_initial_seed"] == 0
    assert manifest["argv"][0].endswith("train.py")

    def differences(name: str, **kw: Any) -> dict[str, Any]:
        other, _ = _run(tmp_path, name, **kw)
        found = manifest_differences(manifest, read_manifest(other / "manifest_rank0.json"))
        return {d.key: d for d in found}

    lr = differences("lr", lr=0.02)
    assert lr["optimizers.0.groups.0.lr"].numeric
    assert (lr["optimizers.0.groups.0.lr"].left, lr["optimizers.0.groups.0.lr"].right) == (0.01, 0.02)
    assert "schedulers.0.state.base_lrs.0" in lr
    assert not any(k.startswith(("parameters", "batches")) for k in lr)
    assert not lr["argv.1"].numeric  # another output folder: a path changes no number
    assert [d.key for d in lr.values() if d.numeric][:2] == ["argv.2", "optimizers.0.groups.0.lr"]

    data = differences("data", data=1)
    assert data["batches.0.inputs.0.checksum"].numeric and "batches.2.inputs.0.checksum" in data
    assert not any(k.startswith("parameters") for k in data)

    init = differences("init", init=1)
    assert {k for k in init if k.startswith("parameters")} == {f"parameters.{p}.checksum" for p in PARAMS}
    assert all(init[f"parameters.{p}.checksum"].numeric for p in PARAMS)
    assert init["rng.torch_initial_seed"].numeric


def test_manifest_differences_put_where_a_run_ran_last(tmp_path: Path) -> None:
    a = {
        "format": "ptdbg-manifest",
        "version": 1,
        "host": {"hostname": "npu-7"},
        "env": {"OMP_NUM_THREADS": "8"},
    }
    b = {**a, "host": {"hostname": "gpu-2"}, "env": {"OMP_NUM_THREADS": None}}
    found = manifest_differences(a, b)
    assert [(d.key, d.numeric) for d in found] == [("env.OMP_NUM_THREADS", True), ("host.hostname", False)]
    assert (found[0].left, found[0].right, found[0].present) == ("8", None, (True, True))  # null, not absent


def _nested(depth: int) -> list[Any]:
    value: list[Any] = [1]
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ({"format": "other"}, "not a ptdbg-manifest"),
        ({"format": "ptdbg-manifest", "version": 1, "argv": ["x" * 5000]}, "characters"),
        ({"format": "ptdbg-manifest", "version": 1, "optimizers": {"lr": 1}}, "not a JSON list"),
        ({"format": "ptdbg-manifest", "version": 1, "env": {"a": _nested(14)}}, "nested"),
    ],
)
def test_a_manifest_is_untrusted_text(tmp_path: Path, content: dict[str, Any], message: str) -> None:
    path = tmp_path / "manifest_rank0.json"
    path.write_text(json_text(content))
    with pytest.raises(ManifestError, match=message):
        read_manifest(path)


def test_a_dump_run_writes_its_manifest_beside_the_dump(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    out = tmp_path / "dump"
    out.mkdir()
    args = [str(out), "0.01", "0", "0", "-1", "0"]
    assert dump_main(["run", str(script), "--dump-path", str(out), "--step", "0", "--", *args]) == 0
    manifest = read_manifest(out / "manifest_rank0.json")
    assert manifest["optimizers"][0]["groups"][0]["lr"] == 0.01
    assert (out / "ptdbg_dump_v4.0" / "step0" / "rank0").is_dir()


def test_without_pyarrow_the_reader_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(__import__("sys").modules, "pyarrow", None)
    with pytest.raises(fmon.MonitorUnavailable, match=r"pip install 'ptdbg-tui\[monitor\]'"):
        fmon.schema()


def test_monitor_takes_no_dump_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "train.py"
    script.write_text("")
    with pytest.raises(SystemExit):
        dump_main(["run", str(script), "--monitor", str(tmp_path), "--step", "1", "--rank", "0"])
    assert "--step, --rank cannot go with it" in capsys.readouterr().err


def test_a_run_without_a_step_says_the_monitor_recorded_none(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    script = tmp_path / "infer.py"
    script.write_text("import torch\ntorch.nn.Linear(2, 2)(torch.ones(1, 2)).sum().backward()\n")
    assert dump_main(["run", str(script), "--monitor", str(tmp_path / "m")]) == 0
    assert "the monitor recorded no step: no optimizer.step() ran" in caplog.text
    assert not fmon.rank_files(tmp_path / "m")


RANKS_JOB = textwrap.dedent("""
    import torch
    import torch.distributed as dist
    from torch import nn

    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1 * (dist.get_rank() + 1))
    for _ in range(2):
        loss = model(torch.ones(3, 4)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    dist.destroy_process_group()
""")


def test_torchrun_ranks_each_write_their_stream_and_manifest(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    bin_dir = Path(sys.executable).parent
    if not (bin_dir / "torchrun").exists():
        pytest.skip("torchrun is not installed beside this Python")
    (tmp_path / "job.py").write_text(RANKS_JOB)
    launch = [str(bin_dir / "torchrun"), "--nproc_per_node=2", "--standalone", "--no-python"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "OMP_NUM_THREADS": "1"}
    # --monitor-dir: torchrun's parser would take --monitor for its own --monitor-interval
    argv = [*launch, str(bin_dir / "ptdbg-dump"), "run", "job.py", "--monitor-dir", "m"]
    done = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    files = fmon.rank_files(tmp_path / "m")
    assert list(files) == [0, 1]
    for rank, path in files.items():
        rows = fmon.read_monitor(path).table().to_pylist()
        assert [r["value"] for r in rows if r["kind"] == fmon.LR] == pytest.approx([0.1 * (rank + 1)] * 2)
        manifest = read_manifest(tmp_path / "m" / f"manifest_rank{rank}.json")
        assert manifest["rank"] == rank and manifest["env"]["WORLD_SIZE"] == "2"


def test_the_readers_import_neither_torch_nor_pyarrow() -> None:
    """formats has no torch, and pyarrow only when a stream is read (a reader-only install)."""
    import subprocess
    import sys

    code = (
        "import sys, ptdbg_tui.formats.monitor, ptdbg_tui.formats.manifest; "
        "print(sorted(m for m in ('torch', 'pyarrow') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[]", done.stderr
