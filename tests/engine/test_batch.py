"""One-shot comparison: compare_dumps over real dump folders, and the original's compare() API."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from ptdbg_tui.compare.model import Status
from ptdbg_tui.compare.report.words import verdict_text
from ptdbg_tui.engine.batch import CompareInputError, compare_dumps
from ptdbg_tui.formats.layout import discover, rank_dir_path
from ptdbg_tui.formats.synthetic import SEED_CULPRIT, write_array, write_seed_pair
from ptdbg_tui.formats.writer import RankWriter
from ptdbg_tui.legacy import compare


@pytest.fixture
def seed(tmp_path):
    return write_seed_pair(tmp_path / "dumps")


def _read_csv(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def test_compare_dumps_finds_the_culprit(seed):
    (o,) = compare_dumps(*seed, jobs=1)
    assert not o.summary and o.stack_mode and o.bad_lines == ([], [])
    counts = o.counts()
    assert counts[Status.FAIL] > 0 and counts[Status.ERROR] == counts[Status.UNMATCHED] == 0
    assert [s.call for s in o.diagnosis.suspects] == [SEED_CULPRIT]
    assert o.label == "step0/rank0 vs step0/rank0"


def test_a_diagnosis_that_fails_says_so_not_that_nothing_was_compared(seed, monkeypatch):
    """An internal error of the diagnosis read 'Nothing was compared: no verdict.' though every row was
    compared (the cause only in a note)."""

    def broken(*_: object) -> None:
        raise TypeError("'float' object is not iterable")

    monkeypatch.setattr("ptdbg_tui.engine.batch.judge_pair", broken)
    (o,) = compare_dumps(*seed, jobs=1)
    assert o.counts()[Status.FAIL] > 0
    assert verdict_text(o.diagnosis) == (
        "No verdict: the diagnosis failed (TypeError: 'float' object is not iterable); the rows are "
        "compared in the CSV."
    )


def test_summary_mode_on_request_and_when_npy_is_missing(seed):
    (o,) = compare_dumps(*seed, summary=True, jobs=1)
    assert o.summary and all(r.result is not None and r.result.accuracy == "" for r in o.rows)
    assert [s.call for s in o.diagnosis.suspects] == [SEED_CULPRIT]  # the stats see the wrong gradient too
    shutil.rmtree(discover(seed[1])[0].tensor_dir)
    (o,) = compare_dumps(*seed, jobs=1)
    assert o.summary


def test_missing_and_broken_npy_become_error_rows_and_the_run_goes_on(seed):
    tensor_dir = discover(seed[0])[0].tensor_dir
    (tensor_dir / "Functional_relu_0_forward_output.npy").unlink()
    (tensor_dir / "Tensor_reshape_0_forward_output.npy").write_bytes(b"garbage")
    (o,) = compare_dumps(*seed, jobs=1)
    errors = {r.name: r.result.message for r in o.rows if r.status is Status.ERROR}
    assert set(errors) == {"Functional_relu_0_forward_output", "Tensor_reshape_0_forward_output"}
    assert "not found" in errors["Functional_relu_0_forward_output"]
    assert [s.call for s in o.diagnosis.suspects] == [SEED_CULPRIT]


def test_bad_pkl_lines_are_counted_per_side(seed):
    pkl = discover(seed[1])[0].records
    with open(pkl, "a", encoding="utf-8") as f:
        f.write("not json\n" + '["half a line", 0')
    (o,) = compare_dumps(*seed, jobs=1)
    assert o.bad_lines[0] == [] and [b.line for b in o.bad_lines[1]] == [43, 44]


def test_every_match_mode_runs(seed):
    for mode in ("exact", "fuzzy", "align"):
        (o,) = compare_dumps(*seed, match=mode, jobs=1)
        assert all(r.matched for r in o.rows), mode
    with pytest.raises(CompareInputError, match="unknown match mode"):
        compare_dumps(*seed, match="nope")


def test_unpairable_inputs_say_what_was_found(tmp_path, seed):
    with pytest.raises(CompareInputError, match="no such file"):
        compare_dumps(tmp_path / "nothing", seed[1])
    with pytest.raises(CompareInputError, match=r"for step 3 .*NPU: steps \[0\], ranks \[0\]"):
        compare_dumps(*seed, step=3)


def test_several_ranks_share_one_pool(tmp_path):
    roots = tmp_path / "npu", tmp_path / "gpu"
    for root in roots:
        for rank in (0, 1):
            w = RankWriter(rank_dir_path(root, rank, 0))
            write_array(w, "Torch_add_0_forward_output", np.full(4, rank, np.float32))
            w.close()
    outcomes = compare_dumps(*roots, jobs=2)
    assert [(o.npu.rank, o.bench.rank) for o in outcomes] == [(0, 0), (1, 1)]
    assert all(o.rows[0].status is Status.PASS for o in outcomes)
    (one,) = compare_dumps(*roots, rank=1, jobs=1)
    assert one.npu.rank == 1


def test_compare_api_with_the_seeds_call_shape(seed, tmp_path):
    n, b = discover(seed[0])[0], discover(seed[1])[0]
    out = tmp_path / "out"
    path = compare(
        {
            "npu_pkl_path": str(n.records),
            "bench_pkl_path": str(b.records),
            "npu_dump_data_dir": str(n.tensor_dir),
            "bench_dump_data_dir": str(b.tensor_dir),
            "is_print_compare_log": False,
        },
        str(out),
        stack_mode=True,
        jobs=1,
    )
    table = _read_csv(path)
    assert len(table[0]) == 22 and table[0][-1] == "NPU_Stack_Info"
    assert len(table) == 1 + 30
    by_name = {row[0]: row for row in table[1:]}
    assert by_name["VF_lstm_0_backward_output.0"][19] == "No"
    assert by_name["VF_lstm_0_backward_input.0"][19] == "Yes"
    (advisor,) = out.glob("advisor_*.txt")
    assert advisor.read_text().splitlines()[1] == "Suspect Nodes: VF_lstm_0_backward_output.0"
    stamp = path.rsplit("compare_result_", 1)[1].removesuffix(".csv")
    assert advisor.name == f"advisor_{stamp}.txt"


def test_compare_api_without_data_dirs_is_statistics_only(seed, tmp_path, capsys):
    n, b = discover(seed[0])[0], discover(seed[1])[0]
    path = compare(
        {
            "npu_pkl_path": str(n.records),
            "bench_pkl_path": str(b.records),
            "npu_dump_data_dir": str(n.tensor_dir),
        },
        str(tmp_path),
        fuzzy_match=True,
    )
    assert len(_read_csv(path)[0]) == 18 and not list(tmp_path.glob("advisor_*"))
    assert "statistics only" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("param", "words"),
    [
        ({}, "needs 'npu_pkl_path'"),
        ({"npu_pkl_path": "/no/such.pkl", "bench_pkl_path": "/no/such.pkl"}, "does not exist"),
    ],
)
def test_compare_api_rejects_bad_params(param, words, tmp_path):
    with pytest.raises(CompareInputError, match=words):
        compare(param, str(tmp_path))


def test_compare_api_rejects_a_missing_data_dir(seed, tmp_path):
    pkl = str(discover(seed[0])[0].records)
    with pytest.raises(CompareInputError, match="not a directory"):
        compare(
            {
                "npu_pkl_path": pkl,
                "bench_pkl_path": pkl,
                "npu_dump_data_dir": str(tmp_path / "x"),
                "bench_dump_data_dir": str(tmp_path),
            },
            str(tmp_path),
        )


def test_compare_at_top_level_of_an_unguarded_script_with_workers(seed, tmp_path):
    """The seed's compare.py has no ``if __name__ == "__main__"``: workers must not re-run it."""
    n, b = discover(seed[0])[0], discover(seed[1])[0]
    param = {
        "npu_pkl_path": str(n.records),
        "bench_pkl_path": str(b.records),
        "npu_dump_data_dir": str(n.tensor_dir),
        "bench_dump_data_dir": str(b.tensor_dir),
    }
    script = tmp_path / "compare_script.py"
    script.write_text(
        textwrap.dedent(f"""
        from ptdbg_tui.legacy import compare
        print("RUN")
        compare({json.dumps(param)}, {str(tmp_path / "out")!r}, stack_mode=True, jobs=2)
    """)
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("RUN") == 1 and "Traceback" not in done.stderr
    assert "Culprit: VF_lstm_0_backward" in done.stdout
