"""Every damaged input through ``ptdbg-tui compare`` (in-process, and a few as real processes):
no traceback, no hang, a message naming the problem, and every row the damage did not touch
compared exactly as on the clean dump."""

from __future__ import annotations

import contextlib
import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ptdbg_tui.cli import main

HANG_S = 60  # a hang guard, not a speed target


Rows = dict[str, list[dict[str, str]]]


def _rows(out: Path) -> Rows:
    """Rows of every CSV written, by NPU name (bench-only rows by bench name); a name may repeat."""
    rows: Rows = {}
    for path in sorted(out.glob("compare_result*.csv")):
        with path.open(newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                key = row["NPU Name"] if row["NPU Name"] != "Nan" else "bench:" + row["Bench Name"]
                rows.setdefault(key, []).append(row)
    return rows


def _messages(rows: Rows) -> list[str]:
    return [r.get("Err_message", "") for same in rows.values() for r in same]


def run(
    capsys, out: Path, npu: Path, bench: Path, options: dict[str, object], summary: bool = False
) -> tuple[int, str, Rows]:
    argv = ["compare", str(npu), str(bench), "-o", str(out), "--jobs", "1", "--no-progress"]
    argv += [x for k, v in options.items() for x in (f"--{k}", str(v))] + (["--summary"] if summary else [])
    code = main(argv)
    stdout, stderr = capsys.readouterr()
    rows = _rows(out) if out.exists() else {}
    text = "\n".join([stdout, stderr, *_messages(rows)])
    return code, text, rows


@pytest.fixture(scope="module")
def baselines(corpus, tmp_path_factory) -> dict[str, Rows]:
    """The clean pairs' rows: tensors, statistics only, msprobe."""
    out = tmp_path_factory.mktemp("baselines")
    found = {}
    for name, (npu, bench), summary in (
        ("ptdbg", corpus.clean, False),
        ("summary", corpus.clean, True),
        ("msprobe", corpus.msprobe, False),
    ):
        argv = ["compare", str(npu), str(bench), "-o", str(out / name), "--jobs", "1", "--no-progress"]
        assert main(argv + (["--summary"] if summary else [])) == 0
        found[name] = _rows(out / name)
    return found


#: msprobe's Result and Err_message judge a call's rows together: a damaged tensor may change them on
#: the other rows of its call, whose own cells stay as they were.
CALL_LEVEL = ("Result", "Err_message")


def _own(row: dict[str, str]) -> dict[str, str]:
    """A row's cells that no other row decides."""
    return {k: v for k, v in row.items() if "Result" not in row or k not in CALL_LEVEL}


def check_rows(rows: Rows, clean: Rows, lost: frozenset[str], limit: int | None) -> None:
    """Every clean row that the damage may not cost is there, compared as on the clean dump."""
    differ = [
        name
        for name, (cells, *_) in clean.items()
        if name not in lost and _own(cells) not in [_own(r) for r in rows.get(name, [])]
    ]
    if limit is None:
        return
    assert len(differ) <= limit, [(n, clean[n], rows.get(n)) for n in differ[:5]]


@pytest.mark.timeout(HANG_S)
def test_cli(case, corpus, baselines, tmp_path, capsys, dropped_dac):
    built = corpus.built[case.name]
    guard = dropped_dac() if case.privileged else contextlib.nullcontext()
    with guard:
        code, text, rows = run(capsys, tmp_path / "out", built.npu, built.bench, built.options)
    lower = text.lower()
    assert "traceback" not in lower and "internal error" not in lower, text
    assert code == (2 if case.cli_fails else 0), text
    assert not case.expect or any(e in lower for e in case.expect), (case.expect, text)
    if case.cli_fails:
        return
    clean = baselines["msprobe" if case.msprobe else "summary" if case.summary else "ptdbg"]
    check_rows(rows, clean, built.lost, case.lost_limit if built.rank is None else 0)


def _process(*argv: str, privileged: bool = False, **env: str) -> subprocess.CompletedProcess[str]:
    prefix = []
    if privileged and os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("runs as root and setpriv is missing: cannot drop the DAC capabilities")
        prefix = [setpriv, "--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), **env}
    return subprocess.run(
        [*prefix, sys.executable, "-m", "ptdbg_tui", "compare", *argv, "--jobs", "1", "--no-progress"],
        capture_output=True,
        text=True,
        timeout=HANG_S,
        env=env,
        check=False,
    )


@pytest.mark.parametrize(
    "name",
    [
        "npy_is_a_fifo",
        "nesting_100k_open",
        "dump_step_infinity",
        "pkl_unreadable",
        "bench_path_typo",
        "msprobe_dump_json_nesting",
    ],
)
def test_cli_process(name, corpus, tmp_path):
    """The real command: a pipe where a tensor file should be does not block it, nothing prints a
    traceback, and the exit code says whether it compared."""
    built = corpus.built[name]
    done = _process(str(built.npu), str(built.bench), "-o", str(tmp_path), privileged=built.case.privileged)
    text = "\n".join([done.stdout, done.stderr, *_messages(_rows(tmp_path))]).lower()
    assert "traceback" not in text, text
    assert done.returncode == (2 if built.case.cli_fails else 0), text
    assert any(e in text for e in built.case.expect), text


def test_cli_on_a_terminal_that_cannot_show_the_text(corpus, tmp_path):
    """An ASCII (or GBK) console: a name or a dash it cannot encode prints escaped, not a traceback."""
    built = corpus.built["npy_folder_is_a_file"]
    done = _process(str(built.npu), str(built.bench), "-o", str(tmp_path), PYTHONIOENCODING="ascii")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "\\u2014" in done.stdout  # "statistics only — ...": the dash, escaped
