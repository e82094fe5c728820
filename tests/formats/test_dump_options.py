"""The dumper's options file: what the app writes is what the dumper reads; anything else is refused
with a message that names the key and the reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ptdbg_tui.formats.dump_options import DumpOptions, OptionsError, read_options, write_options


def test_written_options_read_back(tmp_path: Path) -> None:
    opts = DumpOptions(
        dump_path="d",
        mode="api_stack",
        step=[2],
        rank=[0, 3],
        module=["track.lstm"],
        summary_only=False,
        summary_mode="md5",
        keep_dropout=True,
    )
    path = write_options(tmp_path / "narrow.json", opts)
    assert read_options(path) == opts
    assert "scope" not in json.loads(path.read_text())  # only what is given


def test_command_line_options_override_the_file() -> None:
    base = DumpOptions(dump_path="d", mode="all", step=[1], summary_only=True)
    merged = base.overridden(DumpOptions(mode="api_stack", step=[4]))
    assert merged == DumpOptions(dump_path="d", mode="api_stack", step=[4], summary_only=True)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"modul": ["x"]}', "unknown option(s) 'modul'"),
        ('{"step": [0, -1]}', "step must be a list of non-negative integers"),
        ('{"rank": 1}', "rank must be a list"),
        ('{"step": [true]}', "step must be a list"),
        ('{"module": ["a", ""]}', "module must be a list of non-empty strings"),
        ('{"summary_only": "yes"}', "summary_only must be true or false"),
        ('{"summary_mode": "sha1"}', "summary_mode must be one of statistics, md5"),
        ('{"dump_path": 3}', "dump_path must be a non-empty string"),
        ('["mode"]', "must be a JSON object"),
        ('{"mode": "all",', "not valid JSON"),
    ],
)
def test_bad_files_are_refused_with_the_reason(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "c.json"
    path.write_text(text)
    with pytest.raises(OptionsError, match=message.replace("(", r"\(").replace(")", r"\)")) as e:
        read_options(path)
    assert str(path) in str(e.value)


def test_a_folder_or_a_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(OptionsError, match="not a regular file"):
        read_options(tmp_path)
    with pytest.raises(OptionsError, match="no such file"):
        read_options(tmp_path / "missing.json")
