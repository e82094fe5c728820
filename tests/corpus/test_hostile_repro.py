"""Hostile text in every slot of a generated repro.py: the script compiles and holds the statements
it is written with, no more (issue 29, breach 1)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from ptdbg_tui.cli import main
from ptdbg_tui.compare.diagnosis.replay_outcome import SideVerdict
from ptdbg_tui.compare.replay.plan import Plan, Recorded, Value
from ptdbg_tui.compare.replay.repro import Origin, Written, arguments_code, script_text
from ptdbg_tui.compare.report.outputs import repro_folder
from ptdbg_tui.formats.calls import calls_path
from tests.corpus.hostile import HOSTILE, RAW_CONTROL


def _script(text: str) -> str:
    """A whole repro script with ``text`` in every slot that holds dump text: the call, the function and
    direction, the keyword names and values read from the source line, the autocast dtype, each
    recorded tensor's entry and result path, the dump's path, its label, the call site."""
    rec = Recorded(text, None, "torch.float32", (2,))
    plan = Plan(
        call=text,
        direction=text,
        fn=text,
        args=[rec, Value("plain", text), [rec, Value("plain", text)]],
        kwargs={text: rec, "b": Value("plain", text)},
        results={(0, text): rec},
        incoming={(text,): rec},
        inplace=None,
        complete=False,
        from_source=(text, text),
        autocast=text,
    )
    verdict = SideVerdict(0.5, 0.1, 0.0, 0.1, text)
    written = Written(Path(text), verdict, False)
    site = text.replace("\n", " ")  # built by the engine of one-line parts (origin_of)
    return script_text(
        plan, arguments_code(plan), {(0, text): verdict}, Origin(text, text, site), written, "cpu"
    )


def _shape(tree: ast.AST) -> list[str]:
    """The script's statements and expressions by kind, constants' values left out."""
    return [type(n).__name__ for n in ast.walk(tree)]


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_every_text_slot_of_the_script_holds_only_a_value(text):
    """Before: the autocast dtype went into the docstring unescaped: ``float16\"\"\"`` made a script
    that did not compile, and with a keyword name holding ``'''`` one that ran the dump's code."""
    benign = ast.parse(_script("plain"))
    script = _script(text)
    tree = ast.parse(script)  # a SyntaxError here: the text ended a string
    compile(script, "repro.py", "exec")
    assert _shape(tree) == _shape(benign), "the text added or removed code"
    doc = ast.get_docstring(tree, clean=False)
    assert doc is not None and RAW_CONTROL.search(doc) is None
    benign_doc = ast.get_docstring(benign, clean=False)
    assert doc.count("\n") == benign_doc.count("\n"), "a forged line"  # the site: one line per part (engine)


def test_the_exploit_of_the_issue_runs_nothing(tmp_path):
    """The dtype text ends the docstring and opens a ``'''`` string that a keyword's entry name closes:
    on main the script ran ``touch PWNED``. Now the whole of it is a docstring and a value."""
    dtype = "float16\"\"\"\n__import__('os').system('touch PWNED')\n'''"
    rec = Recorded("x_kwarg.'''\n", None, "torch.float32", (2,))
    plan = Plan(call="c", direction="forward", fn="torch.nn.functional.gelu", args=[rec], kwargs={"k": rec})
    plan.autocast = dtype
    verdict = SideVerdict(0.5, 0.1, 0.0, 0.1, "x")
    script = script_text(
        plan, arguments_code(plan), {}, Origin("d"), Written(Path("r"), verdict, True), "cpu"
    )
    tree = ast.parse(script)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func) == "__import__"]
    assert calls == []


def test_a_sidecar_autocast_that_is_no_dtype_gets_no_script(tmp_path, capsys):
    """``ptdbg-tui repro`` on a dump whose call sidecar says ``autocast.dtype = 'float16\"\"\"'``: before,
    a repro.py that did not compile; now refused (the script would run under that autocast)."""
    from tests.dumper.test_repro import _gelu_dump

    dump = _gelu_dump(tmp_path / "gelu", 1.01)
    sidecar = calls_path(dump.records)
    lines = sidecar.read_text().splitlines()
    hostile = 'float16"""\x1b]0;t\x07'
    edited = [
        json.dumps(
            {
                **(v := json.loads(line)),
                "state": {**v["state"], "autocast": {"device": "cpu", "dtype": hostile}},
            }
        )
        if '"Functional_gelu_0"' in line
        else line
        for line in lines
    ]
    sidecar.write_text("\n".join(edited) + "\n")
    code = main(["repro", str(dump.records), "Functional_gelu_0_forward", "-o", str(tmp_path / "r")])
    out, err = capsys.readouterr()
    assert code == 2, out + err
    assert "not replayable: unknown dtype float16" in err
    assert RAW_CONTROL.search(out + err) is None
    assert not (tmp_path / "r" / "repro.py").exists()


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_the_proposed_repro_folder_is_one_plain_file_name(text):
    """The folder the report's repro command and the app's R propose, named after the call (dump
    text): before, ``repro_a/../../../X`` for a call named so."""
    for pair in (None, "step0/rank0", text):
        name = repro_folder(text, pair)
        assert name.startswith("repro_") and "/" not in name and "\\" not in name and len(name) <= 200
        assert RAW_CONTROL.search(name) is None


def test_a_repro_of_a_dump_whose_stack_text_is_hostile_compiles_and_runs_only_the_call(tmp_path, capsys):
    """The call site and its source line (stack text of the dump) go into the docstring: quotes, a
    backslash, a newline and escapes there leave a script that compiles, runs the call and nothing
    else (``touch PWNED`` is never run), and says the text literally."""
    from tests.dumper.test_repro import _gelu_dump, _run

    dump = _gelu_dump(tmp_path / "gelu", 1.01)
    hostile = "x = 1 \"\"\"\n__import__('os').system('touch PWNED')\n''' \\ \x1b]0;t\x07"
    lines = dump.records.read_text().splitlines()
    edited = []
    for line in lines:
        value = json.loads(line)
        if len(value) == 2 and "Functional_gelu_0" in value[0]:
            value[1] = [[path, number, hostile, hostile] for path, number, _, _ in value[1]]
        edited.append(json.dumps(value))
    dump.records.write_text("\n".join(edited) + "\n")
    code = main(["repro", str(dump.records), "Functional_gelu_0_forward", "-o", str(tmp_path / "r")])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert RAW_CONTROL.search(out + err) is None
    script = (tmp_path / "r" / "repro.py").read_text()
    tree = ast.parse(script)
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func) == "__import__"]
    assert RAW_CONTROL.search(script) is None and "touch PWNED" in ast.get_docstring(tree)
    done = _run(tmp_path / "r")
    assert done.returncode == 1, done.stdout + done.stderr
    assert not list(tmp_path.rglob("PWNED")) and not (tmp_path.parent / "PWNED").exists()
    assert {p.name for p in (tmp_path / "r").iterdir()} == {"repro.py", "repro_data.pt"}
