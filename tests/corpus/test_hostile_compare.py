"""Hostile text through ``ptdbg-tui compare``: printed without terminal escapes, and no CSV cell we
write is a spreadsheet formula, while numbers stay numbers (issue 29, injection)."""

from __future__ import annotations

import csv

import pytest

from ptdbg_tui.cli import main
from ptdbg_tui.compare.report.line_words import unreadable_text
from ptdbg_tui.formats.msprobe import decode_entry
from ptdbg_tui.formats.untrusted import (
    csv_cell,
    csv_column,
    file_component,
    has_control,
    module_path_problem,
    printable,
)
from tests.corpus.hostile import HOSTILE, RAW_CONTROL, files_under, outside, write_hostile_pair

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


@pytest.mark.parametrize("fmt", ["ptdbg", "msprobe"])
def test_compare_csvs_hold_no_formula_and_print_no_escape(tmp_path, capsys, fmt):
    """A stack source line ``=HYPERLINK(...)`` and a function ``@SUM(...)`` with an OSC 52: before, the
    stack cell began with the formula in msprobe's CSV, and the report printed the escape raw."""
    function = "@SUM(A1)\x1b]52;c;cHduZWQ=\x07"
    dtype = "=torch.float32\x1b]0;t\x07"  # the dtype text goes into the CSV's dtype columns
    npu, bench = write_hostile_pair(
        tmp_path / "d", "=cmd", function, '=HYPERLINK("http://x","y")', dtype=dtype
    )
    out = tmp_path / "out"
    code = main(
        [
            "compare",
            str(npu),
            str(bench),
            "-o",
            str(out),
            "--jobs",
            "1",
            "--no-progress",
            "--stack",
            "--format",
            fmt,
        ]
    )
    printed, err = capsys.readouterr()
    assert code == 0, err
    assert RAW_CONTROL.search(printed + err) is None and "\\x1b]52" in printed
    written = files_under(out)
    assert written and not outside(out, list(written))
    for path in written:
        if path.suffix != ".csv":
            assert RAW_CONTROL.search(path.read_text().replace("\n", "")) is None
            continue
        with path.open(newline="") as f:
            rows = list(csv.reader(f))
        for cell in (c for row in rows for c in row):
            if cell.startswith(FORMULA_START):
                float(cell.removesuffix("%"))  # a number (-0.5, -inf) is the only cell that may
            assert RAW_CONTROL.search(cell.replace("\n", "")) is None


def test_numbers_stay_numbers_and_text_formulas_are_neutralised():
    assert [csv_cell(v) for v in ("-0.5", "-inf", " -inf", "+1e-3", "-12.5%", -0.5)] == [
        "-0.5",
        "-inf",
        " -inf",
        "+1e-3",
        "-12.5%",
        -0.5,
    ]
    assert [csv_cell(v) for v in ("=1+1", "+A1", "-A1", "@x", "\tx", "\rx")] == [
        "'=1+1",
        "'+A1",
        "'-A1",
        "'@x",
        "'\tx",
        "'\\x0dx",
    ]
    plain = ["Functional_relu_0_forward_output", "torch.float32", "[2, 3]", 1.5, None]
    assert csv_column(plain) is plain  # a real dump's column: untouched, one search


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_each_helper_makes_each_hostile_text_safe(text):
    name = file_component(text)
    assert "/" not in name and "\\" not in name and not name.startswith(".") and 0 < len(name) <= 200
    assert RAW_CONTROL.search(printable(text, lines=False)) is None and "\n" not in printable(
        text, lines=False
    )
    cell = csv_cell(text)
    assert not cell.startswith(FORMULA_START) and RAW_CONTROL.search(cell.replace("\n", "")) is None
    if module_path_problem(text) is None:  # taken as a module path: never a way out of a folder
        assert not {"/", "\\", ".."} & {c for c in ("/", "\\", "..") if c in text} and not has_control(text)


def test_an_entry_name_holding_a_control_character_is_named_and_refused(tmp_path, capsys):
    """No tool writes a name with a control character; one that holds a terminal escape or a line end
    (``Culprit: <name>`` would forge report lines) is an unreadable entry, said as such, in both
    formats; before, it was a row and the culprit, escapes and all."""
    api = "Functional_relu\x1b]52;c;cHduZWQ=\x07\nCulprit: forged"
    npu, bench = write_hostile_pair(tmp_path / "d", "net.act", "fwd", "y = relu(x)", culprit=api)
    code = main(["compare", str(npu), str(bench), "-o", str(tmp_path / "o"), "--jobs", "1", "--no-progress"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "unreadable line(s) or entries skipped, first: line 4: the name holds a control character" in out
    assert RAW_CONTROL.search(out) is None
    assert [line for line in out.splitlines() if "Culprit:" in line] == []
    records, bad = decode_entry("Functional.relu\x1b[2J.0.forward", {"input_args": []})
    assert records == [] and bad is not None
    said = unreadable_text(bad.reason)
    assert "the name holds a control character" in said and RAW_CONTROL.search(said) is None
