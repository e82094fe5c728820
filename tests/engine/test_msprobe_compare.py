"""``ptdbg-tui compare`` on dumps of the real msprobe 26.2 and on mixed pairs (the original ptdbg_ascend or
msprobe on the NPU side, the project's dumper on the bench), from tests/fixtures (see make_fixtures.py)."""

from __future__ import annotations

import csv
import json
import pickle
import shutil
import subprocess
import zipfile
from pathlib import Path

import numpy as np
import pytest

from ptdbg_tui.cli import main
from ptdbg_tui.compare.diagnosis.findings import NONDETERMINISTIC, UNPAIRED
from ptdbg_tui.compare.diagnosis.propagation import ENTERS, GROWTH
from ptdbg_tui.compare.model import Status
from ptdbg_tui.compare.report.msprobe_result import NOTE
from ptdbg_tui.compare.report.words import evidence_text
from ptdbg_tui.engine.batch import compare_dumps
from ptdbg_tui.formats.dialects import ORIGINAL_PTDBG
from ptdbg_tui.formats.layout import scan
from ptdbg_tui.formats.reader import open_reader

FIXTURES = Path(__file__).parents[1] / "fixtures"
MSPROBE = FIXTURES / "msprobe"
CULPRIT = "Functional.silu.0.backward"  # the faulty silu backward of make_fixtures.py


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _run(tmp_path: Path, mode: str, *extra: str) -> list[dict[str, str]]:
    out = tmp_path / "out"
    code = main(
        [
            "compare",
            str(MSPROBE / mode / "npu"),
            str(MSPROBE / mode / "bench"),
            "-o",
            str(out),
            "--jobs",
            "1",
            "--no-progress",
            *extra,
        ]
    )
    assert code == 0
    (path,) = out.glob("compare_result_*.csv")
    return _csv(path)


# Cells of msprobe's own CSV that ours must reproduce exactly, per mode (Result and Err_message by
# msprobe's own rule). The tensor mode's MaxRelativeErr differs in its last digits: msprobe divides in
# float32 for float16/bfloat16/float32 data, we in float64; it is compared to 1e-6 relative.
# EucDist is a BLAS dot product on both sides: its last digit follows the BLAS build (numpy 2.4's
# OpenBLAS sums in another order than the one msprobe's fixture was written with), so it is compared
# to 1e-13 relative.
#: msprobe's columns that ours may not reproduce to the letter (the names are matched on; MaxRelativeErr
#: and EucDist differ in their last digits and are checked apart).
APART = {"NPU Name", "EucDist", "MaxRelativeErr"}
#: The fixtures with msprobe's own compare CSV (make_fixtures.py, make_realdumps.py), each with a fault,
#: and the columns their mode has.
WITH_MSPROBE_CSV = {
    "tensor": "tensor",
    "statistics": "statistics",
    "md5": "md5",
    "xor": "md5",
    "mix": "tensor",
    "custom_inplace": "tensor",
    "scenario_conv_noise": "tensor",
    "scenario_softplus_negative_log_nan": "tensor",
    "half_zeros": "tensor",
}


def _same_number(mine: str, theirs: str, rel: float) -> bool:
    """The same cell, or the same number to ``rel`` (a last digit that depends on how it was summed or
    divided)."""
    if mine == theirs:
        return True
    try:
        return float(mine) == pytest.approx(float(theirs), rel=rel)
    except ValueError:
        return False


def _assert_msprobes_cells(theirs: list[dict[str, str]], ours: list[dict[str, str]], mode: str) -> None:
    """Ours has msprobe's columns, its rows in its order (and the bench-only rows it leaves out), and
    every cell of each of its rows (:data:`APART`: to the last digits)."""
    assert list(ours[0]) == list(theirs[0]), "msprobe's columns, in its order"
    assert [r["NPU Name"] for r in ours if r["NPU Name"] != "N/A"] == [r["NPU Name"] for r in theirs]
    by_name = {r["NPU Name"]: r for r in ours}
    for row in theirs:
        mine = by_name[row["NPU Name"]]
        assert NOTE not in mine["Err_message"], "both sides msprobe's: nothing to depart from"
        same = [c for c in row if c not in APART]  # Result and Err_message too: msprobe's own rule
        assert {c: mine[c] for c in same} == {c: row[c] for c in same}, row["NPU Name"]
        if mode == "tensor":
            assert _same_number(mine["EucDist"], row["EucDist"], 1e-13), row["NPU Name"]
            assert _same_number(mine["MaxRelativeErr"], row["MaxRelativeErr"], 1e-6), row["NPU Name"]
        elif mode == "statistics":  # a percentage computed as msprobe computes it
            assert mine["MaxRelativeErr"] == row["MaxRelativeErr"], row["NPU Name"]


@pytest.mark.parametrize("fixture", list(WITH_MSPROBE_CSV))
def test_msprobe_csv_has_every_row_and_cell_of_msprobes_own(tmp_path, fixture):
    """Every cell of msprobe's own CSV, Result and Err_message included: msprobe's rule judges a
    call's rows together (the faulty silu gradient passes there, a None gradient warns), not ours."""
    theirs = _csv(MSPROBE / fixture / "msprobe_compare.csv")
    ours = _run(tmp_path, fixture)
    _assert_msprobes_cells(theirs, ours, WITH_MSPROBE_CSV[fixture])
    by_name = {r["NPU Name"]: r for r in ours}
    results = {r["NPU Name"]: r["Result"] for r in ours}
    assert set(results.values()) - {"pass"}, "each fixture has a fault msprobe's rule flags"
    if fixture in ("tensor", "mix"):
        assert results[f"{CULPRIT}.output.0"] == "pass"  # msprobe's rule misses it; ours does not
        assert results["Functional.conv2d.0.backward.output.0"] == "warning"  # a None gradient, first output
    if fixture == "scenario_conv_noise":  # no fault: a bias gradient of ~1e-9 fails the ratio rule, on
        assert results["Functional.conv2d.1.backward.output.0"] == "error"  # the call's first output
    if fixture == "half_zeros":  # float16 bench zeros the NPU's relu lifts: msprobe divides by float32's eps
        assert by_name["Functional.relu.0.forward.output.0"]["MaxRelativeErr"] == "70400.0"
    if fixture == "scenario_softplus_negative_log_nan":
        assert results["Torch.log.0.forward.output.0"] == "error"  # NaN on the NPU only


#: Fresh dumps by the real msprobe (make_realdumps.py: model, mode; the NPU side's gelu scales by 1.01)
#: and msprobe's CSV mode of each.
LIVE = {("half", "L1"): "tensor", ("cnngru", "stat_mix"): "statistics", ("custom", "md5"): "md5"}


@pytest.mark.parametrize(("model", "mode"), list(LIVE))
def test_msprobe_csv_has_every_cell_of_the_installed_msprobes_own(tmp_path, msprobe_python, model, mode):
    """Where msprobe is installed (MSPROBE_PYTHON): both sides dumped by it now, its own compare, and
    ours on the same pair, cell by cell."""
    make = MSPROBE / "make_realdumps.py"
    for side in ("npu", "bench"):
        args = [msprobe_python, str(make), "msprobe", model, mode, side, str(tmp_path / side)]
        done = subprocess.run(args, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
    out = tmp_path / "msprobe_out"
    out.mkdir()
    step = [str(tmp_path / side / "step0") for side in ("npu", "bench")]
    msprobe = str(Path(msprobe_python).with_name("msprobe"))
    done = subprocess.run(
        [msprobe, "compare", "-tp", step[0], "-gp", step[1], "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (theirs,) = out.glob("compare_result*.csv")
    ours = tmp_path / "ours"
    assert main(["compare", *step, "-o", str(ours), "--jobs", "1", "--no-progress"]) == 0
    (mine,) = ours.glob("compare_result*.csv")
    _assert_msprobes_cells(_csv(theirs), _csv(mine), LIVE[model, mode])


def test_msprobe_csv_of_a_mixed_pair_says_where_it_departs_from_msprobes_rule(tmp_path):
    """msprobe against ours: our dumper records no requires_grad, and writes rows msprobe does not
    record; msprobe's rule cannot judge those as it would its own, and each such row says so."""
    rows = _run(tmp_path, "mixed_msprobe")
    bench_only = [r for r in rows if r["NPU Name"] == "N/A"]
    assert bench_only and all(f"{NOTE}present in the bench dump only" in r["Err_message"] for r in bench_only)
    unsaid = [
        r
        for r in rows
        if r["NPU Requires_grad"] == "True" and r["Bench Requires_grad"] == "N/A" and r["Bench Name"] != "N/A"
    ]
    assert unsaid
    for r in unsaid:
        messages = json.loads(r["Err_message"])
        assert not any(m.startswith("error: The Required_Grad") for m in messages), r["NPU Name"]
        assert any(m.startswith(f"{NOTE}the bench dump does not record requires_grad") for m in messages)
    noted = {r["NPU Name"] for r in rows if NOTE in r["Err_message"]}
    assert noted >= {r["NPU Name"] for r in bench_only + unsaid}
    (weight,) = [r for r in rows if r["NPU Name"] == "Functional.linear.0.backward.output.2"]
    assert (weight["NPU Tensor Shape"], weight["Bench Tensor Shape"]) == ("[32, 5]", "[5, 32]")
    assert float(weight["Cosine"]) > 0.999999 and weight["Result"] == "pass", "compared transposed"
    messages = json.loads(weight["Err_message"])
    assert any(m.startswith(f"{NOTE}compared transposed") for m in messages)
    assert not any(m.startswith("error: The shape of") for m in messages)


@pytest.mark.parametrize("summary", [False, True])
def test_msprobe_csv_of_a_mixed_pair_writes_a_norm_our_dumper_does_not_compute_as_msprobes_null(
    tmp_path, summary
):
    """Our dumper (as the original) writes "Nan" for the norm of an int or 0-d tensor: not computed, not
    a NaN. msprobe's CSV spells "not recorded" None, and its diff against a number Diff; "Nan" there
    would say the loss's norm went NaN."""
    rows = _run(tmp_path, "mixed_msprobe", *(["--summary"] if summary else []))
    assert not [r["NPU Name"] for r in rows if "Nan" in (r["Bench l2norm"], r.get("L2norm diff"))]
    by_name = {r["NPU Name"]: r for r in rows}
    loss = by_name["Functional.nll_loss.0.forward.output.0"]  # 0-d: msprobe records its norm, ours not
    assert (loss["Bench Tensor Shape"], loss["NPU l2norm"], loss["Bench l2norm"]) == (
        "[]",
        "1.5780304670333862",
        "None",
    )
    target = by_name["Functional.nll_loss.0.forward.input.1"]  # int64: neither records a norm
    assert (target["NPU l2norm"], target["Bench l2norm"]) == ("None", "None")
    if summary:
        assert (loss["L2norm diff"], loss["NormRelativeErr"]) == ("Diff", "Diff")
        assert (target["L2norm diff"], target["NormRelativeErr"]) == ("0", "0")


def test_msprobe_csv_of_a_mixed_md5_pair_checksums_a_python_value_as_msprobes_compare(tmp_path):
    """msprobe's compare checksums its own Python values (CRC-32 of str(value)) when it compares; a
    pkl records no checksum of one. Equal values pass, as msprobe against msprobe, rather than warn
    that the parameter does not match."""
    rows = _run(tmp_path, "mixed_md5")
    values = [r for r in rows if r["NPU Dtype"].startswith("<class") and r["Bench Name"] != "N/A"]
    assert {r["NPU Name"] for r in values} >= {
        "Tensor.mul_.0.forward.input.1",
        "Tensor.add_.0.forward.input.1",
    }
    for r in values:
        assert r["BENCH MD5"] == r["NPU MD5"] != "N/A", r["NPU Name"]
        assert (r["Result"], r["Err_message"]) == ("pass", "[]"), r["NPU Name"]


def test_a_mixed_md5_pair_does_not_blame_linears_transposed_weight_gradient(tmp_path):
    """msprobe records linear's weight gradient transposed (addmm's node), ours as the weight: their
    checksums differ whatever the data. Two runs without a fault: no culprit, and the msprobe CSV
    cannot compare those rows by checksum (msprobe's warning for a pair it cannot check), not error."""
    (o,) = compare_dumps(MSPROBE / "mixed_md5" / "npu", MSPROBE / "mixed_md5" / "bench", jobs=1)
    assert o.diagnosis.culprit is None, o.diagnosis.culprit
    assert not o.diagnosis.suspects
    rows = {r["NPU Name"]: r for r in _run(tmp_path, "mixed_md5")}
    for name in ("Functional.linear.0.backward.output.2", "Functional.linear.1.backward.output.2"):
        row = rows[name]
        assert list(reversed(json.loads(row["NPU Tensor Shape"]))) == json.loads(row["Bench Tensor Shape"])
        assert row["NPU MD5"] != row["BENCH MD5"] and row["Result"] == "warning", name
        messages = json.loads(row["Err_message"])
        assert not any(m.startswith("error:") for m in messages)
        assert any(m.startswith(f"{NOTE}the NPU tensor is the bench's transposed") for m in messages)


def test_ptdbg_columns_on_request(tmp_path):
    rows = _run(tmp_path, "mix", "--format", "ptdbg")
    assert "Accuracy Reached or Not" in rows[0] and "EucDist" not in rows[0]
    assert {r["NPU Name"] for r in rows} >= {
        "Module.fc.Linear.parameters_grad.0.weight",
        "Module.lstm.LSTM.forward.0.output.1.1",
    }


@pytest.mark.parametrize(("mode", "summary"), [("tensor", False), ("statistics", True), ("mix", False)])
def test_the_culprit_is_the_faulty_silu_backward(mode, summary):
    (o,) = compare_dumps(MSPROBE / mode / "npu", MSPROBE / mode / "bench", jobs=1)
    assert o.summary is summary
    assert o.diagnosis.culprit is not None and o.diagnosis.culprit.call == CULPRIT
    assert o.diagnosis.culprit.site[2] == "forward", "located by its forward call's stack"
    assert o.counts()[Status.ERROR] == 0


def test_md5_rows_pass_on_equal_checksums_and_warn_when_only_rounding_differs():
    (o,) = compare_dumps(MSPROBE / "md5" / "npu", MSPROBE / "md5" / "bench", jobs=1)
    status = {r.name: r.status for r in o.rows}
    assert status["Functional.conv2d.0.forward.output.0"] is Status.PASS
    # the faulty silu's forward is exact but not bitwise the fused kernel: different CRC, same statistics
    assert status["Functional.silu.0.forward.output.0"] is Status.WARN
    assert status[f"{CULPRIT}.output.0"] is Status.FAIL


def test_md5_names_first_the_call_whose_output_differs_from_bit_equal_inputs():
    """The faulty silu's forward is exact but not bitwise the fused kernel: its inputs have equal
    checksums and its output does not (on one device that is nondeterminism); its backward is wrong."""
    (o,) = compare_dumps(MSPROBE / "md5" / "npu", MSPROBE / "md5" / "bench", jobs=1)
    suspects = [(s.call, s.kind) for s in o.diagnosis.suspects]
    assert suspects == [("Functional.silu.0.forward", NONDETERMINISTIC), (CULPRIT, GROWTH)]


def test_xor_checksums_alone_name_the_first_call_whose_bits_differ():
    (o,) = compare_dumps(MSPROBE / "xor" / "npu", MSPROBE / "xor" / "bench", jobs=1)
    assert o.summary and o.diagnosis.culprit.call == "Functional.silu.0.forward"


def _xor_dump(root: Path, fault: bool) -> None:
    """An msprobe xor-mode dump (checksums, no statistics) of a gelu then a cross_entropy; msprobe
    writes a 0-d tensor's value where its checksum goes."""

    def tensor(shape: list[int], md5: object) -> dict[str, object]:
        return {
            "type": "torch.Tensor",
            "dtype": "torch.float32",
            "shape": shape,
            "md5": md5,
            "requires_grad": True,
        }

    out = "0x23" if fault else "0x22"
    data = {
        "Functional.gelu.0.forward": {
            "input_args": [tensor([8, 4], "0x11")],
            "input_kwargs": {},
            "output": [tensor([8, 4], out)],
        },
        "Functional.cross_entropy.0.forward": {
            "input_args": [tensor([8, 4], out)],
            "input_kwargs": {},
            "output": [tensor([], 1.6 if fault else 1.5)],
        },
    }
    rank = root / "step0" / "rank0"
    rank.mkdir(parents=True)
    head = {"task": "statistics", "level": "L1", "framework": "pytorch", "dump_data_dir": None}
    (rank / "dump.json").write_text(json.dumps({**head, "data": data}))
    (rank / "stack.json").write_text("{}")
    (rank / "construct.json").write_text("{}")


def test_checksums_alone_into_an_exponential_op_still_name_the_culprit(tmp_path):
    """An exponential op (cross_entropy, softmax, exp) whose inputs have no recorded magnitude (xor
    mode records none) raised TypeError in its amplification: a real xor dump read 'Nothing was
    compared: no verdict.' and 'no diagnosis — TypeError: 'float' object is not iterable'."""
    _xor_dump(tmp_path / "npu", True)
    _xor_dump(tmp_path / "bench", False)
    (o,) = compare_dumps(tmp_path / "npu", tmp_path / "bench", jobs=1)
    assert o.summary and o.diagnosis.culprit.call == "Functional.gelu.0.forward"


def test_a_pt_that_holds_no_tensor_is_an_error_row(tmp_path):
    npu = tmp_path / "npu"
    shutil.copytree(MSPROBE / "tensor" / "npu", npu)
    (data,) = npu.glob("step0/*/dump_tensor_data")
    with zipfile.ZipFile(data / "Functional.linear.0.forward.input.0.pt", "w") as z:
        z.writestr("x/data.pkl", pickle.dumps({"not": "a tensor"}, protocol=2))
    (o,) = compare_dumps(npu, MSPROBE / "tensor" / "bench", jobs=1)
    errors = {r.name: r.result.message for r in o.rows if r.status is Status.ERROR}
    assert list(errors) == ["Functional.linear.0.forward.input.0"]
    assert "holds a dict, not a tensor" in errors["Functional.linear.0.forward.input.0"]
    assert o.diagnosis.culprit.call == CULPRIT


# --- mixed pairs -------------------------------------------------------------------------------------


@pytest.mark.parametrize("match", ["exact", "auto"])
def test_original_ptdbg_against_ours_pairs_every_tensor_both_record(match):
    """Issue 17: the loss's seed gradient, linear's gradients (its weight's transposed) pair; what
    the original alone records is its own (noise) or an inner autograd node's gradient."""
    (o,) = compare_dumps(FIXTURES / "mixed" / "npu", FIXTURES / "mixed" / "bench", jobs=1, match=match)
    assert o.diagnosis.culprit.call == "Functional_silu_0_backward"
    pairs = {r.npu.name: r.bench.name for r in o.rows if r.matched}
    assert pairs["Functional_batch_norm_0_backward_output.1"] == "Functional_batch_norm_0_backward_output.3"
    assert pairs["Functional_batch_norm_0_backward_output.2"] == "Functional_batch_norm_0_backward_output.4"
    assert pairs["Functional_linear_0_backward_output.0"] == "Functional_linear_0_backward_output.2"  # bias
    assert pairs["Functional_linear_0_backward_output.1"] == "Functional_linear_0_backward_output.0"  # input
    assert pairs["Functional_linear_0_backward_output.2"] == "Functional_linear_0_backward_output.1"  # W^T, W
    assert pairs["Functional_nll_loss_0_backward_input.0"] == "Functional_nll_loss_0_backward_input.0"  # 1.0
    (weight,) = [r for r in o.rows if r.transposed]
    assert weight.name == "Functional_linear_0_backward_output.2" and weight.result.cosine > 0.999999
    assert weight.npu.shape == (32, 5) and weight.bench.shape == (5, 32) and weight.shapes_agree
    assert not [r.name for r in o.rows if r.matched and not r.shapes_agree]
    noise = [r for r in o.rows if r.noise]
    detach = [r for r in noise if "Tensor_detach_" in r.name]
    assert len(detach) == 248 and all(r.bench is None for r in noise)
    # the faulty silu's backward computes with wrapped ops: the original records them as forward calls
    assert {r.npu.call for r in noise} - {r.npu.call for r in detach} == {
        "Torch_sigmoid_0_forward",
        "Tensor___mul___0_forward",
        "Tensor___mul___1_forward",
        "Tensor___radd___0_forward",
        "Tensor___mul___2_forward",
    }
    npu_only = {r.name for r in o.rows if r.bench is None and not r.noise}
    assert npu_only == {"VF_lstm_0_backward_output.0"}  # the LSTM's inner view node: its incoming gradient
    bench_only = {r.name for r in o.rows if r.npu is None}
    assert {"Torch_zeros_0_forward_output", "VF_lstm_0_backward_output.2.0"} <= bench_only


def test_the_original_without_stack_lines_is_known_by_its_own_detach_calls(tmp_path):
    """Its mode ``all`` writes no stack lines: the detach records amid its backward still say which
    tool wrote the dump, and the pair is matched as a mixed one."""
    npu = tmp_path / "npu"
    shutil.copytree(FIXTURES / "mixed" / "npu", npu)
    (pkl,) = npu.rglob("*.pkl")
    lines = pkl.read_text().splitlines(keepends=True)
    pkl.write_text("".join(line for line in lines if "_stack_info" not in line))
    (o,) = compare_dumps(npu, FIXTURES / "mixed" / "bench", jobs=1, match="exact")
    pairs = {r.npu.name: r.bench.name for r in o.rows if r.matched}
    assert pairs["Functional_linear_0_backward_output.0"] == "Functional_linear_0_backward_output.2"  # bias
    assert o.diagnosis.culprit.call == "Functional_silu_0_backward"
    reader = open_reader(scan(npu).dumps[0], chunk=4096)  # the live engine's reader, a few lines a read
    while reader.producer is None and reader.read():
        pass
    assert reader.producer == ORIGINAL_PTDBG


def test_the_originals_own_detach_calls_stay_out_of_the_diagnosis_of_two_original_dumps(tmp_path):
    """Both sides the original's: its backward hooks' detach calls (of each gradient they record and of
    its max/min/mean/norm) pair up as forward calls amid the backward; a gradient's error there is no
    forward error entering. Here the bench's first stats detach (before the first backward record)
    and a later one differ."""
    bench = tmp_path / "bench"
    shutil.copytree(FIXTURES / "mixed" / "npu", bench)
    (data,) = bench.glob("*/step0/*/api_stack_dump")
    for name in ("Tensor_detach_0_forward_input.0", "Tensor_detach_40_forward_input.0"):
        np.save(data / f"{name}.npy", np.load(data / f"{name}.npy") * 3)
    (o,) = compare_dumps(FIXTURES / "mixed" / "npu", bench, jobs=1)
    noise = [r for r in o.rows if r.noise]
    assert len(noise) == 248 and all(r.matched and "Tensor_detach_" in r.name for r in noise)
    assert {"Tensor_detach_0_forward_input.0", "Tensor_detach_40_forward_input.0"} <= {
        r.name for r in noise if r.result.errors is not None and r.result.errors.rel > 0.5
    }
    assert not [s.call for s in o.diagnosis.suspects if "detach" in s.call]
    assert "Tensor_detach_0_forward" not in o.diagnosis.calls


@pytest.mark.parametrize("match", ["exact", "align", "fuzzy", "auto"])
def test_msprobe_against_ours_pairs_by_the_normalised_key(match):
    (o,) = compare_dumps(
        MSPROBE / "mixed_msprobe" / "npu", MSPROBE / "mixed_msprobe" / "bench", jobs=1, match=match
    )
    pairs = {r.npu.name: r.bench.name for r in o.rows if r.matched}
    assert pairs["Functional.conv2d.0.forward.output.0"] == "Functional_conv2d_0_forward_output"
    assert pairs["Functional.batch_norm.0.backward.output.2"] == "Functional_batch_norm_0_backward_output.4"
    assert pairs["Functional.linear.0.backward.output.2"] == "Functional_linear_0_backward_output.1"  # W^T
    assert pairs["Functional.nll_loss.0.backward.input.0"] == "Functional_nll_loss_0_backward_input.0"
    assert len(pairs) == 56
    assert o.diagnosis.culprit.call == CULPRIT
    assert not any(r.fuzzy for r in o.rows if r.matched and r.npu.entry.key == r.bench.entry.key)


# --- real dumps of other models (tests/fixtures/msprobe/make_realdumps.py: a faulty gelu forward) ---


def test_custom_function_and_inplace_ops_every_cell_of_msprobes_csv(tmp_path):
    """A custom autograd.Function and in-place ops (``mul_``, ``add_``, ``relu_``); the gelu scales by
    1.01 on the NPU. Cosines just below 1 (0.999996) print as msprobe prints them, not as ptdbg's 1.0."""
    out = tmp_path / "out"
    base = MSPROBE / "custom_inplace"
    assert (
        main(
            [
                "compare",
                str(base / "npu"),
                str(base / "bench"),
                "-o",
                str(out),
                "--jobs",
                "1",
                "--no-progress",
            ]
        )
        == 0
    )
    (path,) = out.glob("compare_result_*.csv")
    ours = {r["NPU Name"]: r for r in _csv(path)}
    theirs = _csv(base / "msprobe_compare.csv")
    assert any(r["Cosine"] == "0.999996" for r in theirs)
    for row in theirs:
        mine = ours[row["NPU Name"]]
        same = [c for c in row if c not in APART]
        assert {c: mine[c] for c in same} == {c: row[c] for c in same}, row["NPU Name"]
    (o,) = compare_dumps(base / "npu", base / "bench", jobs=1)
    assert o.diagnosis.culprit.call == "Functional.gelu.0.forward"


@pytest.mark.parametrize("match", ["exact", "align", "fuzzy", "auto"])
def test_msprobe_against_ours_pairs_layer_norms_weight_and_bias_gradients(match):
    """msprobe numbers layer_norm's gradients (input, weight, bias) .0/.1/.2, ours by argument
    position .0/.2/.3: the bias must not pair with the weight (both [8])."""
    base = MSPROBE / "mixed_layer_norm"
    (o,) = compare_dumps(base / "npu", base / "bench", jobs=1, match=match)
    pairs = {r.npu.name: r.bench.name for r in o.rows if r.matched}
    assert pairs["Functional.layer_norm.0.backward.output.1"] == "Functional_layer_norm_0_backward_output.2"
    assert pairs["Functional.layer_norm.0.backward.output.2"] == "Functional_layer_norm_0_backward_output.3"
    assert pairs["Functional.conv1d.0.backward.output.1"] == "Functional_conv1d_0_backward_output.1"
    assert pairs["Functional.linear.0.backward.output.0"] == "Functional_linear_0_backward_output.2"  # bias
    assert o.diagnosis.culprit.call == "Functional.gelu.0.forward"
    assert "Functional.layer_norm.0.backward" not in {s.call for s in o.diagnosis.suspects}
    # msprobe's cross_entropy backward output is nll_loss's gradient, ours the logits': never paired
    assert "Functional.cross_entropy.0.backward.output.0" not in pairs
    assert "Functional.cross_entropy.0.backward" not in {s.call for s in o.diagnosis.suspects}


def test_a_module_level_dump_names_where_the_error_enters_between_modules():
    """msprobe L0 dumps modules only; the faulty gelu runs in the root module's forward, between the
    conv and the norm: no dumped call introduces the error, it enters before the norm."""
    base = MSPROBE / "l0_between_modules"
    (o,) = compare_dumps(base / "npu", base / "bench", jobs=1)
    culprit = o.diagnosis.culprit
    assert culprit is not None and culprit.kind == ENTERS
    assert culprit.call == "Module.norm.LayerNorm.forward.0"
    assert "after Module.conv.Conv1d.forward.0" in evidence_text(culprit.evidence)
    assert culprit.site is not None and culprit.site[1:2] == ("33",)  # h = self.norm(h.transpose(1, 2))


@pytest.mark.parametrize("summary", [False, True])
def test_gradients_one_side_records_in_argument_order_pair_by_their_tensors(summary):
    """msprobe on both sides; the NPU's middle linear is a custom autograd Function, whose gradients msprobe
    records in the order it returns them (input, weight, bias), the bench's in addmm's node order (bias,
    input, transposed weight). Paired by name they read 'output shape differs — …output.0: NPU [4, 10] vs
    bench [10]' and the 5% input gradient went unseen; now they pair as the tensors they are."""
    root = MSPROBE / "permuted_linear"
    (o,) = compare_dumps(root / "npu", root / "bench", jobs=1, summary=summary)
    call = "Functional.linear.1.backward"
    pairs = {r.npu.name: r.bench.name for r in o.rows if r.matched and r.npu.name.startswith(call)}
    assert pairs == {
        f"{call}.input.0": f"{call}.input.0",
        f"{call}.output.0": f"{call}.output.1",  # input
        f"{call}.output.1": f"{call}.output.2",  # weight, transposed there (square)
        f"{call}.output.2": f"{call}.output.0",  # bias
    }
    assert not [r.name for r in o.rows if r.matched and not r.shapes_agree]
    # msprobe records the custom Function's own `* 1.05`, a call the bench run does not make: the fault's
    # line itself is the culprit, and the linear's backward, whose input gradient it makes, the next
    culprit, linear = o.diagnosis.suspects
    assert (culprit.call, culprit.kind) == ("Tensor.__mul__.0.forward", UNPAIRED)
    assert culprit.site is not None and "* 1.05" in culprit.site.source
    assert linear.call == call and linear.kind == GROWTH
    assert linear.judgement.output == f"{call}.output.0" and 0.04 < linear.judgement.output_error < 0.06
    if not summary:  # the weight's gradient is compared as the bench holds it: transposed
        (weight,) = [r for r in o.rows if r.transposed]
        assert weight.name == f"{call}.output.1" and weight.result.cosine > 0.999999


def test_a_gradient_whose_shape_differs_in_any_order_stays_a_shape_finding(tmp_path):
    """The same dumps with the NPU's input gradient one column wider: no order pairs every gradient, so
    the names pair them and the call's output shape differs, as before."""
    root = tmp_path / "permuted"
    shutil.copytree(MSPROBE / "permuted_linear", root)
    (dump,) = root.glob("npu/step0/*/dump.json")
    data = json.loads(dump.read_text())
    data["data"]["Functional.linear.1.backward"]["output"][0]["shape"] = [4, 11]
    dump.write_text(json.dumps(data))
    (o,) = compare_dumps(root / "npu", root / "bench", jobs=1, summary=True)
    (linear,) = [s for s in o.diagnosis.suspects if s.call == "Functional.linear.1.backward"]
    assert evidence_text(linear.evidence).startswith(
        "Functional.linear.1.backward.output.0: NPU [4, 11] vs bench [10]"
    )
