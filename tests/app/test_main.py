"""Command-line entry of the app and the demo, and the export helper, without a screen."""

from __future__ import annotations

from pathlib import Path

from ptdbg_tui import demo
from ptdbg_tui.app.export import export_pairs
from ptdbg_tui.cli import EXIT_MISSING_TORCH, app_parser, demo_parser, run_app, run_demo
from ptdbg_tui.compare.metrics.settled import summary_result
from ptdbg_tui.compare.model import Row
from ptdbg_tui.engine.live.updates import PairInfo
from ptdbg_tui.formats.layout import RankDump
from ptdbg_tui.formats.naming import parse_name
from ptdbg_tui.formats.records import TensorRecord


def test_no_watch_needs_existing_dumps(tmp_path, capsys):
    args = app_parser().parse_args([str(tmp_path / "npu"), str(tmp_path / "bench"), "--no-watch"])
    assert run_app(args) == 2
    assert "no such file or directory" in capsys.readouterr().err


def test_unknown_theme_is_refused_with_the_choices(tmp_path, capsys):
    args = app_parser().parse_args([str(tmp_path / "npu"), str(tmp_path / "bench"), "--theme", "nope"])
    assert run_app(args) == 2
    err = capsys.readouterr().err
    assert "unknown theme 'nope'" in err and "textual-light" in err


def test_demo_without_torch_says_how_to_install_it(monkeypatch, tmp_path, capsys):
    def no_torch(out_dir: object) -> None:
        raise ImportError("No module named 'torch'")

    monkeypatch.setattr(demo, "write_demo", no_torch)
    assert run_demo(demo_parser().parse_args([str(tmp_path)])) == EXIT_MISSING_TORCH
    assert "pip install" in capsys.readouterr().err


def _pair(step: int) -> tuple[PairInfo, list[Row]]:
    rec = TensorRecord(
        "Torch_add_0_forward_output",
        0,
        "torch.float32",
        [2],
        [1.0, 0.0, 0.5, 1.0],
        parse_name("Torch_add_0_forward_output"),
    )
    row = Row(rec, rec)
    row.result = summary_result(row)
    n = RankDump(Path(f"/d/npu/step{step}/rank0/api_stack_dump.pkl"), step, 0)
    b = RankDump(Path(f"/d/cpu/step{step}/rank0/api_stack_dump.pkl"), step, 0)
    return PairInfo(str(n.records), n.label, n, b, True), [row]


def test_export_of_several_pairs_names_each_file_after_its_pair(tmp_path):
    written = export_pairs([_pair(0), _pair(1)], tmp_path / "out" / "mine.csv", stack=False)
    assert [p.name for p in written] == [
        "mine_step0_rank0-step0_rank0.csv",
        "mine_step1_rank0-step1_rank0.csv",
    ]
    assert all(p.read_text().startswith("NPU Name,Bench Name") for p in written)


def test_export_to_a_directory_keeps_the_writer_s_name(tmp_path):
    (path,) = export_pairs([_pair(0)], tmp_path, stack=True)
    assert path.parent == tmp_path and path.name.startswith("compare_result_")
    assert path.stat().st_mode & 0o777 == 0o640, "every output file: 0640"
    assert "NPU_Stack_Info" in path.read_text().splitlines()[0]


def test_version(capsys):
    import pytest

    from ptdbg_tui import __version__
    from ptdbg_tui.cli import main

    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0 and capsys.readouterr().out.strip() == f"ptdbg-tui {__version__}"


def test_a_bare_ptdbg_tui_names_the_demo(capsys):
    import pytest

    from ptdbg_tui.cli import main

    with pytest.raises(SystemExit) as stop:
        main([])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "required: NPU_DIR" in err
    assert "ptdbg-tui DUMP  (the app on one dump" in err, "one dump alone opens its check"
    assert "ptdbg-tui demo" in err and "ptdbg-tui compare" in err, "the other commands, the demo first of all"
    # replay and repro too (only the epilog of -h named them)
    assert "ptdbg-tui replay NPU_DIR BENCH_DIR" in err and "ptdbg-tui repro NPU_DUMP CALL -o DIR" in err


def test_export_ends_with_our_verdict_in_either_tool_s_columns(tmp_path, add_suspect):
    """The rows of a call the diagnosis names say so in a last column, after the tool's own columns
    (msprobe's too), which its tools then still read."""
    import csv

    from ptdbg_tui.compare.diagnosis.findings import Diagnosis
    from ptdbg_tui.compare.report.outputs import write_pair_csv

    info, rows = _pair(0)
    suspect = add_suspect
    diagnoses = {info.key: Diagnosis(suspects=[suspect], judged=1)}
    for fmt in ("ptdbg", "msprobe"):
        (path,) = export_pairs([(info, rows)], tmp_path / fmt, stack=False, fmt=fmt, diagnoses=diagnoses)
        header, row = list(csv.reader(path.open()))
        assert header[-1] == "Diagnosis" and row[-1] == "culprit: introduces error ×1,240", fmt
        own = write_pair_csv(rows, tmp_path / f"own_{fmt}", info.npu, fmt, summary=info.summary)
        assert [header[:-1], row[:-1]] == list(csv.reader(own.open())), "the tool's own columns, as they are"
    (path,) = export_pairs([(info, rows)], tmp_path / "none", stack=False)
    assert list(csv.reader(path.open()))[1][-1] == "", "no diagnosis (yet): the column is empty"
