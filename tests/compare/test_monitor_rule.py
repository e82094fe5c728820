"""The two-run monitor's rule (``ptdbg_tui.compare.monitor``) on synthetic monitor streams written with
the shared schema: each divergence kind named at its step and module, and nothing named where the
runs differ by rounding alone (a constant lower-precision difference, or its chaotic growth)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ptdbg_tui.cli import EXIT_NOTHING_TO_NARROW, EXIT_OK, EXIT_USAGE
from ptdbg_tui.cli import main as tui_main
from ptdbg_tui.compare.monitor import MonitorInputError, Phase, analyse
from ptdbg_tui.compare.monitor.rule import CAP, FLOOR, GROWTH
from ptdbg_tui.formats import monitor as fmon
from ptdbg_tui.formats.dump_options import DumpOptions, read_options

pa = pytest.importorskip("pyarrow")

#: The synthetic model: modules in forward order (each ends before the next; the root last), and
#: the parameters of each.
MODULES = ("emb", "blocks.0.a", "blocks.0.b", "blocks.0", "head", "")
PARAMS = ("emb.weight", "blocks.0.a.weight", "blocks.0.b.weight", "head.weight")
STEPS = 40

#: ``fault(kind, name, step) -> (relative change, NaN count)`` of the NPU side's row.
Fault = Callable[[str, str, int], tuple[float, int]]


def none(kind: str, name: str, step: int) -> tuple[float, int]:
    return 0.0, 0


def _rows(step: int, fault: Fault, lr: float, skipped: bool = False) -> list[dict[str, Any]]:
    """One step's rows: outputs, then per parameter its grad, update and param rows."""
    base = 1.0 + 0.01 * step
    rows: list[dict[str, Any]] = [
        {"kind": fmon.LOSS, "name": "", "value": 3.0 - 0.01 * step},
        {"kind": fmon.LR, "name": "0", "value": lr},
        {"kind": fmon.SKIPPED, "name": "", "value": float(skipped)},
    ]
    for i, m in enumerate(MODULES):
        change, nan = fault(fmon.OUTPUT, m, step)
        v = (10.0 + i) * base * (1 + change)
        rows.append(
            {
                "kind": fmon.OUTPUT,
                "name": m,
                "norm": float("nan") if nan else v,
                "mean": 0.1 * v,
                "max": float("nan") if nan else 0.5 * v,
                "min": -0.5 * v,
                "nan": nan,
                "inf": 0,
                "calls": 1,
            }
        )
    for j, p in enumerate(PARAMS):
        for kind, scale in ((fmon.GRAD, 0.1), (fmon.UPDATE, 0.01), (fmon.PARAM, 5.0)):
            change, nan = fault(kind, p, step)
            v = scale * (1 + j) * base * (1 + change)
            rows.append({"kind": kind, "name": p, "norm": float("nan") if nan else v, "nan": nan, "inf": 0})
    return rows


def write_stream(
    path: Path,
    fault: Fault = none,
    lr: Callable[[int], float] = lambda s: 1e-3,
    steps: int = STEPS,
    skipped: tuple[int, ...] = (),
) -> None:
    """A monitor stream of ``steps`` steps through pyarrow with the shared schema, one batch a step."""
    path.parent.mkdir(parents=True, exist_ok=True)
    schema = fmon.schema()
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, schema) as writer:
        for step in range(steps):
            rows = [
                {"iteration": step, "step": step, **r} for r in _rows(step, fault, lr(step), step in skipped)
            ]
            columns = {name: [r.get(name) for r in rows] for name, _ in fmon.COLUMNS}
            writer.write_batch(pa.RecordBatch.from_pydict(columns, schema=schema))


def pair(tmp_path: Path, fault: Fault, **kw: Any) -> tuple[Path, Path]:
    npu, bench = tmp_path / "npu", tmp_path / "bench"
    write_stream(npu / fmon.file_name(0), fault, **kw)
    write_stream(bench / fmon.file_name(0))
    return npu, bench


def at(kind: str, name: str, start: int, change: float) -> Fault:
    """The NPU side's ``kind`` row of ``name`` off by ``change`` from ``start`` on."""

    def fault(k: str, n: str, step: int) -> tuple[float, int]:
        return (change if (k, n) == (kind, name) and step >= start else 0.0), 0

    return fault


def test_equal_runs_name_nothing_and_the_band_is_float32s_floor(tmp_path: Path) -> None:
    (rank,) = analyse(*pair(tmp_path, none)).ranks
    assert rank.divergence is None and rank.nonfinite == ()
    assert rank.band.value == FLOOR and rank.aligned == STEPS


def test_a_module_off_from_step_20_is_named_there(tmp_path: Path) -> None:
    d = analyse(*pair(tmp_path, at(fmon.OUTPUT, "blocks.0.b", 20, 0.005))).first
    assert d is not None
    assert (d.step, d.phase, d.module, d.statistic) == (20, Phase.FORWARD, "blocks.0.b", "norm")
    assert d.difference == pytest.approx(0.005 / 1.005, rel=1e-6) and d.inputs == 0.0


def _chaos(rate: float, start: float = 1e-7, jump: tuple[int, float] | None = None) -> Fault:
    """Every row off by ``start`` × ``rate``^step (rounding amplified by training), later modules a
    little more; ``jump``: a module that jumps at a step on top."""

    def fault(kind: str, name: str, step: int) -> tuple[float, int]:
        depth = MODULES.index(name) if name in MODULES else PARAMS.index(name)
        change = start * rate**step * (1 + 0.3 * depth) * (1 if step % 3 else -1)
        if jump and kind == fmon.OUTPUT and name == "head" and step >= jump[0]:
            change += jump[1]
        return change, 0

    return fault


def test_chaotic_growth_of_rounding_names_nothing(tmp_path: Path) -> None:
    rank = analyse(*pair(tmp_path, _chaos(1.3))).ranks[0]
    assert rank.curves.difference[-1].max() > 1e-3  # grown from 1e-7 to beyond a 0.1% difference
    assert rank.divergence is None


def test_a_fault_on_top_of_chaotic_growth_is_named_at_its_step(tmp_path: Path) -> None:
    d = analyse(*pair(tmp_path, _chaos(1.3, jump=(30, 0.05)))).first
    assert d is not None and (d.step, d.module) == (30, "head")
    assert d.previous > 0 and d.difference > GROWTH * (d.previous + d.inputs)


def test_a_constant_lower_precision_difference_sets_the_band(tmp_path: Path) -> None:
    def bf16(kind: str, name: str, step: int) -> tuple[float, int]:
        return (3e-3 if kind == fmon.OUTPUT and name != "emb" else 0.0), 0

    rank = analyse(*pair(tmp_path, bf16)).ranks[0]
    assert rank.divergence is None
    assert rank.band.early == pytest.approx(3e-3 / 1.003, rel=1e-6) and rank.band.value < CAP


def test_a_difference_beyond_bf16s_from_the_start_is_named_at_step_0(tmp_path: Path) -> None:
    d = analyse(*pair(tmp_path, at(fmon.OUTPUT, "blocks.0.a", 0, 0.5))).first
    assert d is not None and (d.step, d.module, d.phase) == (0, "blocks.0.a", Phase.FORWARD)


def test_a_backward_fault_names_the_module_between_agreeing_and_differing_gradients(tmp_path: Path) -> None:
    """The forward agrees; blocks.0.a's gradient (and emb's, before it in the forward) differ from step
    10, blocks.0.b's and head's agree: the fault lies in blocks.0's backward, between b and a."""

    def backward(kind: str, name: str, step: int) -> tuple[float, int]:
        hit = kind in (fmon.GRAD, fmon.UPDATE, fmon.PARAM) and name in ("emb.weight", "blocks.0.a.weight")
        return (0.02 if hit and step >= 10 + (kind == fmon.PARAM) else 0.0), 0

    d = analyse(*pair(tmp_path, backward)).first
    assert d is not None
    assert (d.step, d.phase, d.module, d.name) == (10, Phase.BACKWARD, "blocks.0", "blocks.0.a.weight")


def test_an_lr_that_differs_is_a_hyperparameter_finding(tmp_path: Path) -> None:
    d = analyse(*pair(tmp_path, none, lr=lambda s: 1e-3 if s < 15 else 5e-4)).first
    assert d is not None and (d.step, d.phase, d.name, d.module) == (
        15,
        Phase.HYPERPARAMETER,
        "lr group 0",
        "",
    )
    assert (d.npu, d.bench) == (5e-4, 1e-3)


def test_an_update_that_differs_with_equal_gradients_is_the_optimizers(tmp_path: Path) -> None:
    d = analyse(*pair(tmp_path, at(fmon.UPDATE, "head.weight", 7, 0.01))).first
    assert d is not None and (d.step, d.phase, d.module, d.name) == (
        7,
        Phase.OPTIMIZER,
        "head",
        "head.weight",
    )


def test_the_first_nan_with_finite_inputs_is_named(tmp_path: Path) -> None:
    def nan(kind: str, name: str, step: int) -> tuple[float, int]:
        late = MODULES.index(name) >= 2 if name in MODULES else True
        return 0.0, (4 if step >= 12 and late and kind != fmon.UPDATE else 0)

    (rank,) = analyse(*pair(tmp_path, nan)).ranks
    (origin,) = rank.nonfinite
    assert (origin.side, origin.step, origin.kind, origin.module, origin.count) == (
        "npu",
        12,
        "output",
        "blocks.0.b",
        4,
    )
    assert rank.divergence is not None and (rank.divergence.step, rank.divergence.module) == (
        12,
        "blocks.0.b",
    )


def test_another_data_order_is_the_input_sides_first_module_at_step_0(tmp_path: Path) -> None:
    d = analyse(*pair(tmp_path, at(fmon.OUTPUT, "emb", 0, 0.01))).first
    assert d is not None and (d.step, d.phase, d.module) == (0, Phase.DATA, "emb")


def test_the_first_divergent_rank_is_the_one_whose_divergence_comes_first(tmp_path: Path) -> None:
    npu, bench = tmp_path / "npu", tmp_path / "bench"
    for rank in range(3):
        write_stream(bench / fmon.file_name(rank))
    write_stream(npu / fmon.file_name(0), at(fmon.GRAD, "head.weight", 5, 0.1))  # its backward, at 5
    write_stream(npu / fmon.file_name(1), at(fmon.OUTPUT, "head", 5, 0.1))  # its forward at 5: first
    write_stream(npu / fmon.file_name(2))
    a = analyse(npu, bench)
    assert a.first_rank == 1 and a.first is not None and a.first.rank == 1
    assert [r.divergence.phase if r.divergence else None for r in a.ranks] == [
        Phase.BACKWARD,
        Phase.FORWARD,
        None,
    ]


def test_a_stream_cut_mid_step_is_analysed_up_to_its_cut(tmp_path: Path) -> None:
    npu, bench = pair(tmp_path, at(fmon.OUTPUT, "head", 20, 0.01))
    path = npu / fmon.file_name(0)
    path.write_bytes(path.read_bytes()[:-300])
    (rank,) = analyse(npu, bench).ranks
    assert rank.cut[0] > 0 and rank.npu_iterations == STEPS - 1 and rank.divergence is not None


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: None, "does not exist"),
        (lambda p: p.mkdir(), "holds no monitor stream"),
        (lambda p: (p.mkdir(), (p / fmon.file_name(0)).write_bytes(b"")), "holds no whole step yet"),
        (
            lambda p: (p.mkdir(), (p / fmon.file_name(0)).write_bytes(b"\xff\xff\xff\xff\x10")),
            r"holds no whole step yet \(monitor_rank0\.arrows: the last 5 bytes are not a whole step "
            r"\(a step being written, or a run stopped while writing it\); the steps before it are read\)$",
        ),
        (lambda p: (p.mkdir(), (p / fmon.file_name(3)).write_bytes(b"x")), "no rank is monitored on both"),
    ],
)
def test_folders_that_cannot_be_compared_say_why(
    tmp_path: Path, make: Callable[[Path], object], message: str
) -> None:
    write_stream(tmp_path / "bench" / fmon.file_name(0), steps=2)
    make(tmp_path / "npu")
    with pytest.raises(MonitorInputError, match=message):
        analyse(tmp_path / "npu", tmp_path / "bench")


# --- the command line -----------------------------------------------------------------------------


def test_the_cli_says_the_manifests_first_then_the_first_divergent_step(tmp_path: Path, capsys) -> None:
    npu, bench = pair(tmp_path, at(fmon.OUTPUT, "blocks.0.b", 20, 0.005))
    manifest = {
        "format": "ptdbg-manifest",
        "version": 1,
        "optimizers": [{"class": "AdamW", "groups": [{"lr": 3e-4}]}],
    }
    (npu / "manifest_rank0.json").write_text(json.dumps(manifest))
    manifest["optimizers"][0]["groups"][0]["lr"] = 1e-4
    (bench / "manifest_rank0.json").write_text(json.dumps(manifest))
    assert tui_main(["monitor", str(npu), str(bench)]) == EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == "runs differ before any kernel: lr 0.0003 against 0.0001"
    first = [line for line in lines if line.startswith("First divergent step: ")]
    assert first == [
        line for line in first if line.startswith("First divergent step: 20, module blocks.0.b: forward")
    ]
    assert len(first) == 1 and "rounding band 3.8e-06" in "\n".join(lines)


def test_the_cli_all_clear_and_bad_input(tmp_path: Path, capsys) -> None:
    npu, bench = pair(tmp_path, none)
    assert tui_main(["monitor", str(npu), str(bench), "--narrow"]) == EXIT_NOTHING_TO_NARROW
    out = capsys.readouterr().out
    assert "First divergent step: none: over 40 steps" in out and "nothing to narrow: the runs agree" in out
    assert tui_main(["monitor", str(npu), str(tmp_path / "missing")]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("ptdbg-tui monitor: error: the bench folder") and "Traceback" not in err


def test_the_cli_narrow_writes_the_config_of_the_step_module_and_rank(tmp_path: Path, capsys) -> None:
    npu, bench = pair(tmp_path, at(fmon.OUTPUT, "blocks.0.b", 20, 0.005))
    config = tmp_path / "next.json"
    code = tui_main(["monitor", str(npu), str(bench), "--narrow", "-o", str(config), "--script", "train.py"])
    assert code == EXIT_OK
    out = capsys.readouterr().out
    assert read_options(config) == DumpOptions(
        mode="api_stack",
        step=[20],
        rank=[0],
        module=["blocks.0.b"],
        summary_only=False,
        summary_mode="statistics",
    )
    assert (
        "Narrowed to module blocks.0.b: the monitor's first divergence (forward) at step 20, rank 0." in out
    )
    assert f"ptdbg-dump run train.py --dump-path {tmp_path / 'next' / 'npu'} --config {config}" in out


def test_a_module_name_that_is_no_module_path_is_not_narrowed_to(tmp_path: Path, capsys) -> None:
    """The names are the file's text: one that is no module path writes no config."""
    global MODULES
    saved, MODULES = MODULES, ("emb", "../../x", "")
    try:
        npu, bench = pair(tmp_path, at(fmon.OUTPUT, "../../x", 3, 0.1))
    finally:
        MODULES = saved
    assert (
        tui_main(["monitor", str(npu), str(bench), "--narrow", "-o", str(tmp_path / "c.json")])
        == EXIT_NOTHING_TO_NARROW
    )
    assert "is not dotted names" in capsys.readouterr().out and not (tmp_path / "c.json").exists()


def test_the_differences_are_relative_and_nan_is_infinite() -> None:
    from ptdbg_tui.compare.monitor.rule import relative

    a, b = np.array([1.0, 0.0, 2.0]), np.array([1.01, 0.0, 2.0])
    assert relative(a, b, np.maximum(a, b)).tolist() == pytest.approx([0.01 / 1.01, 0.0, 0.0])


def test_follow_reads_until_both_streams_end_then_reports(tmp_path: Path, capsys) -> None:
    """Both streams are closed by their writers: --follow reads them once, says the verdict, reports."""
    npu, bench = pair(tmp_path, at(fmon.OUTPUT, "head", 9, 0.01))
    assert tui_main(["monitor", str(npu), str(bench), "--follow"]) == EXIT_OK
    captured = capsys.readouterr()
    assert "ptdbg-tui monitor: 40 steps aligned; First divergent step: 9, head" in captured.err
    assert "First divergent step: 9, module head: forward: " in captured.out


def test_without_pyarrow_the_cli_says_how_to_install_it(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    npu, bench = pair(tmp_path, none)

    def missing() -> None:
        raise fmon.MonitorUnavailable(
            "the training monitor's files need pyarrow: pip install 'ptdbg-tui[monitor]'"
        )

    monkeypatch.setattr(fmon, "pyarrow", missing)
    assert tui_main(["monitor", str(npu), str(bench)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "pip install 'ptdbg-tui[monitor]'" in err and "Traceback" not in err


def test_a_step_the_grad_scaler_skipped_is_no_nan_origin(tmp_path: Path) -> None:
    """Scaled gradients overflow at step 5 and the GradScaler skips it, as it should; the first NaN
    with finite inputs is the output at step 9."""

    def overflow(kind: str, name: str, step: int) -> tuple[float, int]:
        grads = kind == fmon.GRAD and step == 5
        return 0.0, (3 if grads or (kind == fmon.OUTPUT and name == "head" and step >= 9) else 0)

    write_stream(tmp_path / "npu" / fmon.file_name(0), overflow, skipped=(5,))
    write_stream(tmp_path / "bench" / fmon.file_name(0))
    (rank,) = analyse(tmp_path / "npu", tmp_path / "bench").ranks
    (origin,) = rank.nonfinite
    assert (origin.step, origin.kind, origin.module) == (9, "output", "head")
    assert rank.skipped == (1, 0)
