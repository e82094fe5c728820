"""Runs that differ before any kernel: two scripts that build other models, pass other data or set
another learning rate, dumped with ``ptdbg-dump run``. Each difference is said first (``runs differ:``)
and no kernel is blamed inside it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from dumper.cli import main as dump_main
from ptdbg_tui.cli import main as cli_main
from ptdbg_tui.compare.diagnosis.findings import NOT_A_KERNEL, Diagnosis
from ptdbg_tui.compare.report.words import runs_differ_text, verdict_text
from ptdbg_tui.engine.batch import compare_dumps
from ptdbg_tui.formats.layout import discover
from ptdbg_tui.formats.modules import sidecar_path

#: A small GPT-like model trained with AdamW on token ids read from numpy (data from disk: no dumped
#: call draws it); ``key=value`` arguments after the side set what one run does otherwise.
SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    import torch
    import torch.nn.functional as F
    from torch import nn

    cfg = dict(a.split("=") for a in sys.argv[2:])
    blocks, wide, lr = int(cfg.get("blocks", 2)), int(cfg.get("wide", 32)), float(cfg.get("lr", 1e-3))
    name = cfg.get("name", "fc")

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.LayerNorm(16)
            setattr(self, name, nn.Linear(16, wide))
            self.out = nn.Linear(wide, 16)

        def forward(self, x):
            return x + self.out(F.gelu(getattr(self, name)(self.norm(x))))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(50, 16)
            self.blocks = nn.ModuleList(Block() for _ in range(blocks))
            self.head = nn.Linear(16, 50)

        def forward(self, t):
            x = self.emb(t)
            for b in self.blocks:
                x = b(x)
            return self.head(x)

    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=float(cfg.get("wd", 0.01)))
    rng = np.random.default_rng(int(cfg.get("data", 1)))
    for _ in range(2):
        t = torch.from_numpy(rng.integers(0, 50, (4, 8)))
        opt.zero_grad()
        F.cross_entropy(model(t).flatten(0, 1), t.roll(1, 1).flatten()).backward()
        opt.step()
""")


def _compare(tmp_path: Path, npu: list[str], bench: list[str], step: str = "1", *more: str) -> Diagnosis:
    """Both runs dumped at ``step`` (``npu``, ``bench``: each script's settings; ``more``: the dumper's
    options); the pair's diagnosis."""
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    for side, cfg in (("npu", npu), ("bench", bench)):
        options = ["--dump-path", str(tmp_path / side), "--step", step, *more]
        assert dump_main(["run", str(script), side, *cfg, *options]) == 0
    (outcome,) = compare_dumps(tmp_path / "npu", tmp_path / "bench", jobs=1)
    return outcome.diagnosis


def _no_kernel(d: Diagnosis) -> None:
    kernels = [(s.call, s.kind) for s in d.suspects if s.kind not in NOT_A_KERNEL]
    assert not kernels, verdict_text(d)


def _said(d: Diagnosis) -> list[str]:
    """What the report's ``runs differ:`` lines say."""
    return [runs_differ_text(x) for x in d.differ]


def test_a_block_more_on_the_bench_is_said_and_nothing_in_it_is_blamed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 3-block bench against a 2-block NPU run read 'Culprit: Functional_embedding_0_forward (forward):
    parameters differ on entry to step 1 — weight of …' and nothing said that the models differ."""
    d = _compare(tmp_path, ["blocks=2"], ["blocks=3"])
    models = "the runs' models differ: the bench has blocks.2 (Block), the NPU run does not"
    assert _said(d) and _said(d)[0].startswith(models), _said(d)
    assert "(blocks: 3 on the bench, 2 on the NPU run)" in _said(d)[0]
    assert not d.suspects, verdict_text(d)  # the embedding's parameters follow from it: no culprit
    assert not d.all_clear
    out = str(tmp_path / "out")
    assert cli_main(["compare", str(tmp_path / "npu"), str(tmp_path / "bench"), "-o", out]) == 0
    report = capsys.readouterr().out
    assert "\n  runs differ: " + models in report, report
    assert "Culprit:" not in report, report
    assert "--replay" not in report, report  # a replay would find every kernel right: it is not suggested


@pytest.mark.parametrize(
    ("npu", "words"),
    [
        ("wide=48", "blocks.0.fc.weight [48, 16] against [32, 16]"),
        ("name=up", "the NPU run has blocks.0.up (Linear), blocks.1.up (Linear), the bench does not"),
    ],
    ids=["reshaped", "renamed"],
)
def test_a_reshaped_or_renamed_parameter_is_said(tmp_path: Path, npu: str, words: str) -> None:
    """A wider MLP on the NPU blamed 'Functional_linear_0_backward: introduces error … ×132', a kernel of
    the very linear whose weight has another shape."""
    d = _compare(tmp_path, [npu], [])
    assert _said(d) and _said(d)[0].startswith("the runs' models differ: "), _said(d)
    assert words in _said(d)[0], _said(d)
    assert not d.suspects, verdict_text(d)


def test_without_a_module_sidecar_the_parameters_shapes_are_said(tmp_path: Path) -> None:
    """A dump with no module structure: the shapes of the parameters the paired calls take."""
    _compare(tmp_path, ["wide=48"], [])
    for side in ("npu", "bench"):
        (dump,) = discover(tmp_path / side)
        sidecar_path(dump.records).unlink()
    (outcome,) = compare_dumps(tmp_path / "npu", tmp_path / "bench", jobs=1)
    d = outcome.diagnosis
    assert _said(d) == [
        "the runs' models differ: weight of Functional_linear_0_forward [48, 16] against [32, 16]; "
        "bias of Functional_linear_0_forward [48] against [32]; "
        "weight of Functional_linear_1_forward [16, 48] against [16, 32]; 3 more parameters of other shapes"
    ], _said(d)
    _no_kernel(d)


@pytest.mark.parametrize(
    ("npu", "bench", "step", "words"),
    [
        ("lr=1e-3", "lr=1e-4", "0", "lr 0.001 against 0.0001"),
        ("lr=1e-3", "lr=1e-4", "1", "lr 0.001 against 0.0001"),
        ("wd=0.1", "wd=0.01", "1", "weight_decay 0.1 against 0.01"),
    ],
)
def test_a_hyperparameter_that_differs_is_said_as_such(
    tmp_path: Path, npu: str, bench: str, step: str, words: str
) -> None:
    """AdamW at lr 1e-3 against 1e-4: at step 0 the update's 'value: -0.01 against -0.001' (lr over
    1 − β1ᵗ) was all the report said, at step 1 parameters that differ on entry. A weight decay 0.1
    against 0.01 moves AdamW's 'mul_(1 − lr·wd)' by 9e-5, below what counts as a different argument."""
    d = _compare(tmp_path, [npu], [bench], step)
    assert _said(d) == [f"the runs pass different hyperparameters: {words}"], _said(d)
    _no_kernel(d)


def test_a_different_first_batch_is_said_and_not_blamed_on_the_embedding(tmp_path: Path) -> None:
    """Other token ids: 'error enters before Functional_embedding_0_forward, outside the dumped calls'."""
    d = _compare(tmp_path, ["data=1"], ["data=2"], "0")
    data = "the runs pass different data: Functional_embedding_0_forward_input.0, the model's first input"
    assert len(_said(d)) == 1 and _said(d)[0].startswith(data), _said(d)
    assert not any(s.call == "Functional_embedding_0_forward" for s in d.suspects), verdict_text(d)
    _no_kernel(d)


@pytest.mark.parametrize("bench", ["data=2", "blocks=3"])
def test_from_statistics_other_batches_blame_no_kernel(tmp_path: Path, bench: str) -> None:
    """Two batches' statistics may agree to 1%, and an error estimated from them measures nothing: with
    a block more on the bench (and so other random draws and other batches), a model's first add was
    named ×1.4 from statistics at step 1, and the models' difference went unsaid."""
    d = _compare(tmp_path, [], [bench, "data=2"], "0", "--summary-only")
    assert any(x.startswith("the runs pass different data: ") for x in _said(d)), _said(d)
    if bench == "blocks=3":
        assert any(x.startswith("the runs' models differ: ") for x in _said(d)), _said(d)
    _no_kernel(d)
