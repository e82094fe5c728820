"""Hostile names in ``ptdbg-tui narrow``: the config goes to the current folder (or ``-o``) whatever
the dump names, the printed Python and shell lines hold each path as one value, and nothing printed
holds a terminal escape (issue 29, breaches 2 and 3)."""

from __future__ import annotations

import ast
import os
import re
import shlex
import shutil
from pathlib import Path

import pytest

from ptdbg_tui.cli import main
from ptdbg_tui.engine.narrow import default_config
from ptdbg_tui.formats.naming import STYLE_MSPROBE, EntryName
from ptdbg_tui.formats.narrowing import Narrowed
from tests.corpus.hostile import HOSTILE, RAW_CONTROL, files_under, outside, write_hostile_pair

MSPROBE = Path(__file__).parents[1] / "fixtures" / "msprobe"


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_the_default_config_is_one_plain_file_name(text):
    """Before: ``./narrow_a/../../../X.json`` for a module ``a/../../../X`` (``../../X.json``)."""
    for target in (
        Narrowed(module=text),
        Narrowed(calls=(EntryName(text, 0, "forward", "output"),)),
        Narrowed(calls=(EntryName(f"Functional.{text}", 0, "forward", "output", style=STYLE_MSPROBE),)),
    ):
        path = default_config(target)
        name = path.removeprefix("./")
        assert path.startswith("./narrow_") and name.endswith(".json")
        assert "/" not in name and "\\" not in name and not name.startswith(".")
        assert len(name.encode()) + len(".msprobe") <= 255
        assert RAW_CONTROL.search(name) is None


@pytest.fixture
def cwd(tmp_path, monkeypatch) -> Path:
    """The current folder, two levels down: ``../../X.json`` from it would land in ``tmp_path``."""
    here = tmp_path / "work" / "deep"
    here.mkdir(parents=True)
    monkeypatch.chdir(here)
    return here


@pytest.mark.parametrize("module", ["a/../../../X", "/tmp/X", "..", "net.\x1b]0;t\x07", 'a")+(', "a..b"])
def test_a_module_path_from_the_dump_that_no_model_has_is_refused(tmp_path, cwd, capsys, module):
    """The culprit's module, from modules.jsonl, is ``a/../../../X``: before, narrow wrote
    ``../../X.json``; now it says the dump's module is no module path and writes nothing."""
    npu, bench = write_hostile_pair(tmp_path / "dumps", module, "forward", "y = relu(x)")
    before = files_under(tmp_path)
    code = main(["narrow", str(npu), str(bench)])
    out, err = capsys.readouterr()
    assert code == 2, out + err
    assert "the dump names a module that is not a module path" in err
    assert files_under(tmp_path) == before
    assert RAW_CONTROL.search(out + err) is None


def test_stack_and_module_text_print_without_terminal_escapes(tmp_path, cwd, capsys):
    """Escapes in a stack frame's function and source line went raw to the terminal (OSC 0 sets its
    title, OSC 52 its clipboard); now as ``\\x1b``. A newline cannot forge a report line."""
    function = "fwd\x1b]0;pwned\x07\u202eevil"
    source = "y = relu(x)  # \x1b]52;c;cHduZWQ=\x07\nCulprit: forged (forward): x"
    npu, bench = write_hostile_pair(tmp_path / "dumps", "net.act", function, source)
    assert main(["narrow", str(npu), str(bench)]) == 0
    out, _ = capsys.readouterr()
    assert RAW_CONTROL.search(out) is None
    assert "fwd\\x1b]0;pwned\\x07\\u202eevil" in out
    assert [line for line in out.splitlines() if line.lstrip().startswith("Culprit:")] == [
        next(line for line in out.splitlines() if "Culprit: Functional_relu_0_forward" in line)
    ]
    written = files_under(cwd)
    assert written == {cwd / "narrow_net.act.json"} and not outside(cwd, list(written))


def test_printed_lines_hold_the_config_path_as_one_value(tmp_path, capsys):
    """The msprobe usage line ``PrecisionDebugger(config_path="…")`` pasted the path unescaped: a path
    holding ``")…("`` made the pasted line run code. Now each path is a Python literal, and each shell
    command gives it as one word."""
    dumps = tmp_path / "dumps"
    shutil.copytree(MSPROBE / "mix", dumps)
    folder = tmp_path / 'x")+__import__("os").system("touch PWNED")+("'
    config = folder / "c'$(touch P).json"
    code = main(["narrow", str(dumps / "npu"), str(dumps / "bench"), "--module", "lstm", "-o", str(config)])
    out, err = capsys.readouterr()
    assert code == 0, err
    usage = next(line for line in out.splitlines() if "PrecisionDebugger(config_path=" in line)
    calls = re.findall(r"PrecisionDebugger\(config_path=.*?\)(?= on the NPU|\)|;|$)", usage)
    assert calls, usage
    for call in calls:
        tree = ast.parse(call, mode="eval")
        assert isinstance(tree.body, ast.Call) and all(
            isinstance(k.value, ast.Constant) for k in tree.body.keywords
        )
        assert tree.body.keywords[0].value.value == str(config.with_name("c'$(touch P).msprobe.json"))
    runs = [shlex.split(line) for line in out.splitlines() if line.strip().startswith("ptdbg-dump run")]
    assert runs and all(words[words.index("--config") + 1] == str(config) for words in runs)
    assert not any(p.name == "PWNED" for p in tmp_path.rglob("*")) and not os.path.exists("PWNED")
