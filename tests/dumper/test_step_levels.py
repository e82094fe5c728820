"""One side dumped with ``--step``, the other without: the error says which has no ``stepN`` folder,
in words, where it printed Python's ``steps [None]``."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from dumper.cli import main as dump_main
from ptdbg_tui.cli import main

SCRIPT = textwrap.dedent("""
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        opt.zero_grad()
        model(torch.randn(3, 4)).sum().backward()
        opt.step()
""")


@pytest.fixture(scope="module")
def dumps(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("steps")
    script = root / "train.py"
    script.write_text(SCRIPT)
    assert dump_main(["run", str(script), "--dump-path", str(root / "stepped"), "--step", "0", "1"]) == 0
    assert dump_main(["run", str(script), "--dump-path", str(root / "flat")]) == 0
    return root


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (
            ["stepped", "flat"],
            "(NPU: steps [0, 1], ranks [0]; bench: steps [none], ranks [0]): the bench dump has no stepN "
            "folder (dumped without --step) and the other has: dump both sides alike",
        ),
        (
            ["flat", "flat", "--step", "1"],
            "pair up for step 1 (NPU: steps [none], ranks [0]; bench: steps [none], ranks [0]): both dumps "
            "have no stepN folder (dumped without --step), so --step 1 selects nothing there",
        ),
    ],
)
def test_a_side_without_step_folders_is_named(
    dumps: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], words: str
) -> None:
    argv = [str(dumps / a) if not a.startswith("-") and not a.isdigit() else a for a in args]
    assert main(["compare", *argv, "-o", str(tmp_path / "out"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ptdbg-tui compare: error: no NPU and bench rank dumps pair up") and words in err
