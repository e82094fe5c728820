"""Acceptance: the original's only real pkl → CSV pair (legacy 3-stat format) is reproduced.

The legacy CSV compares ``npu_test.pkl`` with itself. Its npy files were never published, so the
test gives every entry the same random tensor on both sides, which is what "compared with
itself" means; every column the legacy format has must then read the same. Deliberate
differences (docs/compare.md): 21 columns instead of 16, MaxAbsErr with 12 decimals instead of 6, and
``Nan`` for the l2norm a 3-stat pkl does not record.
"""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import numpy as np

from ptdbg_tui.formats.pkl import read_pkl
from ptdbg_tui.legacy import compare

LEGACY = Path(__file__).resolve().parents[1] / "fixtures" / "ptdbg_legacy"


def _table(path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _setup(tmp_path):
    pkl = tmp_path / "dump.pkl"
    shutil.copy(LEGACY / "npu_test.pkl", pkl)
    npy = tmp_path / "dump"
    npy.mkdir()
    rng = np.random.default_rng(0)
    for rec in read_pkl(pkl).tensors:
        np.save(npy / f"{rec.name}.npy", rng.standard_normal(rec.shape).astype(np.float32))
    return pkl, npy


def test_legacy_csv_is_reproduced(tmp_path):
    pkl, npy = _setup(tmp_path)
    twin = tmp_path / "twin" / pkl.name  # the same content in another file: one file twice has no verdict
    twin.parent.mkdir()
    shutil.copy(pkl, twin)
    out = tmp_path / "out"
    path = compare(
        {
            "npu_pkl_path": str(pkl),
            "bench_pkl_path": str(twin),
            "npu_dump_data_dir": str(npy),
            "bench_dump_data_dir": str(npy),
            "is_print_compare_log": False,
        },
        str(out),
        jobs=1,
    )
    ours, theirs = _table(path), _table(LEGACY / "compare_result_20230703104808.csv")
    assert len(ours) == len(theirs) == 8
    for mine, ref in zip(ours, theirs, strict=True):
        for column, value in ref.items():
            if column == "MaxAbsErr":
                assert float(mine[column]) == float(value) == 0.0
            else:
                assert mine[column] == value, column
        assert mine["NPU l2norm"] == mine["Bench l2norm"] == "Nan"
        assert mine["MaxRelativeErr"] == "0.000000000000"
        assert mine["One Thousandth Err Ratio"] == mine["Five Thousandths Err Ratio"] == "1.000000000000"
    (advisor,) = out.glob("advisor_*.txt")
    assert advisor.read_text() == (LEGACY / "advisor.txt").read_text()


def test_one_file_on_both_sides_gets_no_all_clear_from_the_advisor(tmp_path):
    pkl, npy = _setup(tmp_path)
    compare(
        {
            "npu_pkl_path": str(pkl),
            "bench_pkl_path": str(pkl),
            "npu_dump_data_dir": str(npy),
            "bench_dump_data_dir": str(npy),
            "is_print_compare_log": False,
        },
        str(tmp_path / "out"),
        jobs=1,
    )
    (advisor,) = (tmp_path / "out").glob("advisor_*.txt")
    assert (
        advisor.read_text()
        .splitlines()[2]
        .startswith("Expert Advice: No verdict: the NPU and bench dumps are the same file")
    )


def test_legacy_statistics_mode(tmp_path):
    pkl, _ = _setup(tmp_path)
    path = compare(
        {"npu_pkl_path": str(pkl), "bench_pkl_path": str(pkl), "is_print_compare_log": False},
        str(tmp_path / "out"),
    )
    ours, theirs = _table(path), _table(LEGACY / "compare_result_20230703104808.csv")
    for mine, ref in zip(ours, theirs, strict=True):
        diffs = [mine[c] for c in ("Max diff", "Min diff", "Mean diff", "L2norm diff")]
        assert diffs == ["0.0"] * 3 + ["Nan"]
        for side in ("NPU", "Bench"):
            assert [mine[f"{side} {s}"] for s in ("max", "min", "mean")] == [
                ref[f"{side} {s}"] for s in ("max", "min", "mean")
            ]
