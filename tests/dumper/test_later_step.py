"""An ordinary training script dumped with ``ptdbg-dump run`` at a later step, where the drift that
earlier steps left is in every activation and parameter."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

from dumper.cli import main as dump_main
from ptdbg_tui.compare.diagnosis.findings import PARAMETERS, RANDOM, UNPAIRED
from ptdbg_tui.compare.diagnosis.propagation import ENTERS
from ptdbg_tui.compare.report.words import evidence_text, note_texts, verdict_text
from ptdbg_tui.engine.batch import compare_dumps
from ptdbg_tui.formats.layout import discover

SCRIPT = textwrap.dedent("""
    import os
    import sys
    import torch
    import torch.nn.functional as F
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    data = torch.utils.data.TensorDataset(torch.randn(32, 8), torch.randn(32, 4))
    for x, y in torch.utils.data.DataLoader(data, batch_size=8):
        opt.zero_grad()
        out = model(x)
        if sys.argv[1:] == [os.environ["SCALES"]]:
            out = out * 1.001  # a small error after the model, every step, in one of the runs
        F.mse_loss(out, y).backward()
        opt.step()
""")


def _dump_both(tmp_path: Path, script_text: str, *options: str) -> None:
    """``script_text`` as ``tmp_path/train.py``, dumped by ``ptdbg-dump run`` as both runs (its first
    argument says which) into ``tmp_path/npu`` and ``tmp_path/bench``."""
    script = tmp_path / "train.py"
    script.write_text(script_text)
    for side in ("npu", "bench"):
        assert dump_main(["run", str(script), side, "--dump-path", str(tmp_path / side), *options]) == 0


@pytest.mark.parametrize("scales", ["npu", "bench"])
def test_a_call_only_one_run_makes_is_named_at_a_later_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scales: str
) -> None:
    """At step 2 the activations carry ~8e-5 of drift from steps 0 and 1, and the multiply only one run
    makes raises the error only ~12x: it was an all-clear ("No operator introduces an error beyond
    rounding"). The NPU's own multiply is the culprit; after the bench's, the loss's input is where
    the error enters, after a call only the bench run makes. Its backward, which the other run does
    without, is named too: the gradient the loss made goes on changed in one run, unchanged in the
    other."""
    monkeypatch.setenv("SCALES", scales)
    _dump_both(tmp_path, SCRIPT, "--step", "2")
    (npu,), (bench,) = discover(tmp_path / "npu"), discover(tmp_path / "bench")
    (outcome,) = compare_dumps(npu.records, bench.records, jobs=1)
    d = outcome.diagnosis
    if scales == "npu":
        assert [(s.call, s.kind) for s in d.suspects] == [
            ("Tensor___mul___0_forward", UNPAIRED),
            ("Tensor___mul___0_backward", UNPAIRED),  # the gradient passes the loss's unchanged
        ], verdict_text(d)
        assert verdict_text(d).startswith("Culprit: Tensor___mul___0_forward (forward)")
        # the evidence that stands is the stronger: its own change (×32), not error entering's (×3)
        assert "on the NPU it changes it by 0.001, allowed 3.1e-05: ×32" in verdict_text(d), verdict_text(d)
    else:
        suspects = [(s.call, s.kind) for s in d.suspects]
        assert suspects == [
            ("Functional_mse_loss_0_forward", ENTERS),
            ("Functional_linear_1_backward", ENTERS),  # the NPU passes the loss's gradient on unchanged
        ], verdict_text(d)
        assert "it entered after Tensor___mul___0_forward, a call only the bench run makes" in verdict_text(d)


BETAS = textwrap.dedent("""
    import sys
    import torch
    import torch.nn.functional as F
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4))
    betas = (0.8, 0.999) if sys.argv[1] == "npu" else (0.9, 0.999)  # the NPU script's beta1 differs
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, betas=betas)
    for x, y in [(torch.randn(8, 8), torch.randn(8, 4)) for _ in range(2)]:
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        opt.step()
""")


@pytest.mark.parametrize("only_step1", [False, True], ids=["both steps", "--step 1"])
def test_an_adam_beta_that_differs_is_named_at_step_1(tmp_path: Path, only_step1: bool) -> None:
    """Adam's first update does not depend on beta1 (its bias correction cancels it), so the parameters
    agree on entry to step 1 and only the moments differ. Compared alone (``--step 1``), step 1 named
    error entering outside the dumped calls at the first moment's ``lerp_``, since the steps before were
    looked at only when parameters differed; compared with step 0, that error became a note and took
    the ``lerp_``'s own different argument (1 - beta1) with it, leaving the second ``lerp_`` culprit."""
    _dump_both(tmp_path, BETAS, "--summary-only", "--step", "0", "1")
    outcomes = compare_dumps(tmp_path / "npu", tmp_path / "bench", step=1 if only_step1 else None, jobs=1)
    d = next(o.diagnosis for o in outcomes if o.npu.step == 1)
    assert d.suspects, verdict_text(d)
    culprit = "Culprit: Tensor_lerp__0_forward (forward): the runs pass different arguments"
    assert verdict_text(d).startswith(culprit), verdict_text(d)
    how = ", from its statistics," if only_step1 else ""
    note = (
        "the optimizer's state differs on entry to step 1 (Tensor_lerp__0_forward_input.0): "
        f"inherited from step 0, whose culprit{how} is Tensor_lerp__0_forward"
    )
    assert note in note_texts(d), note_texts(d)


UNCLIPPED = textwrap.dedent("""
    import sys
    import torch
    import torch.nn.functional as F
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for x, y in [(torch.randn(8, 8), torch.randn(8, 4)) for _ in range(2)]:
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        if sys.argv[1] == "bench":  # the NPU script does not clip its gradients
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.01)
        opt.step()
""")


def test_a_gradient_clipping_one_run_skips_is_named_at_step_1(tmp_path: Path) -> None:
    """Adam's first update does not change when the gradients are scaled, so the parameters agree on
    entry to step 1 while the first moment and the gradient the first ``lerp_`` takes both differ. The
    worst of the two, the moment, became the note that step 0 left it, and the gradient's error, new at
    step 1, was hidden: "8 entries fail, yet no call judged introduces an error beyond rounding"."""
    _dump_both(tmp_path, UNCLIPPED, "--summary-only", "--step", "0", "1")
    outcomes = compare_dumps(tmp_path / "npu", tmp_path / "bench", jobs=1)
    d = next(o.diagnosis for o in outcomes if o.npu.step == 1)
    assert [(s.call, s.kind) for s in d.suspects[:1]] == [("Tensor_lerp__0_forward", ENTERS)], verdict_text(d)
    assert "Tensor_lerp__0_forward_input.1 carries" in verdict_text(d)
    assert any(n.startswith("the optimizer's state differs on entry to step 1") for n in note_texts(d)), (
        note_texts(d)
    )


AUTOCAST = textwrap.dedent("""
    import contextlib
    import sys
    import torch
    import torch.nn.functional as F
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    for x, y in [(torch.randn(32, 16), torch.randn(32, 4)) for _ in range(3)]:
        opt.zero_grad()
        # the NPU script runs its forward under bf16 autocast (fp32 parameters, bf16 gradients)
        bf16 = torch.autocast("cpu", dtype=torch.bfloat16)
        with bf16 if sys.argv[1] == "npu" else contextlib.nullcontext():
            out = model(x)
        F.mse_loss(out.float(), y).backward()
        opt.step()
""")


def test_parameters_that_carry_the_last_steps_rounding_are_no_suspect(tmp_path: Path) -> None:
    """Under bf16 autocast on one side only, step 0 names nothing (its gradients differ by bf16
    rounding), and the fp32 parameters the update moved by those gradients differ on entry to step 1
    by about as much: that was step 1's culprit, "parameters differ on entry to step 1", in a run without
    a fault. It is a note now; a parameter whose gradients agreed still is a suspect (the scenario
    param_over_updated_between_steps of bench/diagnosis.py)."""
    _dump_both(tmp_path, AUTOCAST, "--step", "0", "1", "2")
    outcomes = compare_dumps(tmp_path / "npu", tmp_path / "bench", jobs=1)
    d = next(o.diagnosis for o in outcomes if o.npu.step == 1)
    assert not d.suspects, verdict_text(d)
    note = "parameters differ on entry to step 1 no more than their gradients differed at step 0 ("
    assert any(n.startswith(note) for n in note_texts(d)), note_texts(d)
    # --step 2 alone sees steps 0 and 1 from their statistics, which name no parameter (1e-4 apart):
    # step 1's parameters carried step 0's rounding all the same, so step 2's carry step 1's ('parameters
    # differ on entry to step 2' was the culprit)
    (alone,) = compare_dumps(tmp_path / "npu", tmp_path / "bench", step=2, jobs=1)
    assert not alone.diagnosis.suspects, verdict_text(alone.diagnosis)
    note = "parameters differ on entry to step 2 no more than their gradients differed at step 1 ("
    assert any(n.startswith(note) for n in note_texts(alone.diagnosis)), note_texts(alone.diagnosis)
    # the scripts' precision choice, which the call sidecars record, is said where rows fail
    autocast = "calls with autocast to torch.bfloat16 where the bench run has no autocast (the first "
    assert any(autocast in n for n in note_texts(d)), note_texts(d)


DROPOUT = textwrap.dedent("""
    import sys
    import torch
    import torch.nn.functional as F
    from torch import nn

    torch.manual_seed(0)
    data = [(torch.randn(20, 16), torch.randn(20, 4)) for _ in range(3)]
    model = nn.Sequential(
        nn.Linear(16, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 4)
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    torch.manual_seed(1 if sys.argv[1] == "npu" else 2)  # dropout kept on, other generators' seeds
    for x, y in data:
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        opt.step()
""")


def test_a_dropout_whose_draws_differed_stays_the_culprit_from_statistics(tmp_path: Path) -> None:
    """From statistics, a dropout mask that differs shows only while the dropout's inputs agree: at
    step 2 its inputs carry what steps 0 and 1 left, its output's max, min, mean and norm move about as
    much, and the linear after it, whose outputs the other mask moves far, was the culprit (×3.6)."""
    _dump_both(tmp_path, DROPOUT, "--summary-only", "--keep-dropout", "--step", "0", "1", "2")
    outcomes = compare_dumps(tmp_path / "npu", tmp_path / "bench", jobs=1)
    culprits = {o.npu.step: o.diagnosis.suspects[0] for o in outcomes if o.diagnosis.suspects}
    assert {step: (s.call, s.kind) for step, s in culprits.items()} == {
        step: ("Functional_dropout_0_forward", RANDOM) for step in (0, 1, 2)
    }, [verdict_text(o.diagnosis) for o in outcomes]
    assert "its draws differed at step 1, and statistics cannot show that they still do" in evidence_text(
        culprits[2].evidence
    )


RUNNING_VAR = textwrap.dedent("""
    import sys
    import torch
    import torch.nn.functional as F
    from torch import nn
    from dumper.faults import replaced

    def wrong_update(batch_norm):
        def call(x, mean, var, *args, **kwargs):
            out = batch_norm(x, mean, var, *args, **kwargs)
            if sys.argv[1] == "npu" and args[2]:  # training: the NPU kernel's running variance 20% high
                var.numpy()[:] *= 1.2
            return out
        return call

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with replaced(F, "batch_norm", wrong_update):
        for x, y in [(torch.randn(16, 8), torch.randn(16, 4)) for _ in range(2)]:
            opt.zero_grad()
            F.mse_loss(model(x), y).backward()
            model.eval()
            with torch.no_grad():
                model(x)  # a validation pass: batch norm normalises by its running statistics
            model.train()
            opt.step()
""")


def test_running_statistics_that_differ_are_named_where_eval_mode_uses_them(tmp_path: Path) -> None:
    """Batch norm's running mean and variance are no error that enters while it trains (it only updates
    them), but in eval mode they are what it normalises by: a running variance off by 20% left the
    validation pass at "1 entry fails, yet no call judged introduces an error beyond rounding"."""
    _dump_both(tmp_path, RUNNING_VAR, "--summary-only", "--step", "0", "1")
    for o in compare_dumps(tmp_path / "npu", tmp_path / "bench", jobs=1):
        d = o.diagnosis
        assert [(s.call, s.kind) for s in d.suspects[:1]] == [("Functional_batch_norm_1_forward", ENTERS)], (
            verdict_text(d)
        )
        text = verdict_text(d)
        assert "Functional_batch_norm_1_forward_input.2 carries" in text, text
        assert "a running statistic, which the calls that train the module update in place" in text, text


WARM_UP = textwrap.dedent("""
    import sys
    import torch
    import torch.nn.functional as F
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.SiLU(), nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    warm = 2 if sys.argv[1] == "npu" else 4  # the NPU script's learning-rate warm-up is shorter
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm))
    for x, y in [(torch.randn(20, 16), torch.randn(20, 4)) for _ in range(2)]:
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        opt.step()
        sched.step()
""")


def test_a_learning_rate_that_still_differs_at_step_1_is_named(tmp_path: Path) -> None:
    """SGD passes the learning rate as a keyword (``param.add_(buf, alpha=-lr)``), which only the call
    sidecars record, and they were read only for a suspect that blames a kernel. At step 0 the
    update's output differs from equal inputs; at step 1 its inputs already differ (step 0 left them
    so) and it is blamed for nothing: step 1 said "No operator introduces an error beyond rounding",
    with the learning rate still 0.1 against 0.05."""
    _dump_both(tmp_path, WARM_UP, "--step", "0", "1")
    d = next(
        o.diagnosis for o in compare_dumps(tmp_path / "npu", tmp_path / "bench", jobs=1) if o.npu.step == 1
    )
    assert d.suspects, verdict_text(d)
    assert verdict_text(d).startswith(
        "Culprit: Tensor_add__1_forward (forward): the runs pass different arguments"
    ), verdict_text(d)
    assert "alpha: -0.1 against -0.05" in verdict_text(d)


FOREACH_EPS = textwrap.dedent("""
    import sys
    import torch
    import torch.nn.functional as F
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4))
    eps = 1e-3 if sys.argv[1] == "npu" else 1e-8  # the NPU script's eps differs; foreach: no call dumped
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, eps=eps, foreach=True)
    for x, y in [(torch.randn(20, 16), torch.randn(20, 4)) for _ in range(3)]:
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        opt.step()
""")


def test_parameters_an_unseen_optimizer_keeps_changing_stay_suspects(tmp_path: Path) -> None:
    """A foreach Adam whose eps differs makes the parameters differ on entry to every step; at step 2
    the gradients of step 1 differ too (the parameters did): that is no rounding the update carried,
    since step 1 named its parameters, and step 2 still names them."""
    _dump_both(tmp_path, FOREACH_EPS, "--step", "0", "1", "2")
    outcomes = compare_dumps(tmp_path / "npu", tmp_path / "bench", jobs=1)
    kinds = {o.npu.step: [s.kind for s in o.diagnosis.suspects[:1]] for o in outcomes}
    assert kinds == {0: [], 1: [PARAMETERS], 2: [PARAMETERS]}, [verdict_text(o.diagnosis) for o in outcomes]


ADAMW = textwrap.dedent("""
    import os
    import sys
    import torch
    import torch.nn.functional as F
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 4))
    # the NPU script decays its weights (AdamW, 1e-4 a step); the bench does not (Adam), or the other
    # way round (DECAYS=bench: the NPU script forgot the decay). One tensor at a time, the decay is a
    # dumped param.mul_(0.9999); foreach, a _foreach_mul_ that no hook sees
    Opt = torch.optim.AdamW if sys.argv[1] == os.environ.get("DECAYS", "npu") else torch.optim.Adam
    lr = float(os.environ.get("LR", "1e-2"))  # AdamW's decay: lr * 1e-2 a step
    opt = Opt(model.parameters(), lr=lr, foreach=os.environ["FOREACH"] == "1")
    for x, y in [(torch.randn(20, 16), torch.randn(20, 4)) for _ in range(3)]:
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        opt.step()
""")


def test_parameters_an_unseen_decay_moved_are_no_rounding_at_step_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Compared alone (``--step 2``), step 1 is seen from its statistics, which cannot show parameters
    1e-4 apart: it named nothing, and its gradients differed (by what those parameters did), so step 2's
    parameters passed for that step's rounding carried by the update, an all-clear. They count so only
    where the step before's parameters agreed, or carried rounding themselves. (A foreach AdamW: no
    dumped call makes its decay.)"""
    monkeypatch.setenv("FOREACH", "1")
    _dump_both(tmp_path, ADAMW, "--step", "0", "1", "2")
    (outcome,) = compare_dumps(tmp_path / "npu", tmp_path / "bench", step=2, jobs=1)
    d = outcome.diagnosis
    assert [s.kind for s in d.suspects[:1]] == [PARAMETERS], verdict_text(d)


@pytest.mark.parametrize("decays", ["npu", "bench"])
@pytest.mark.parametrize("summary", [True, False], ids=["statistics", "tensors"])
def test_a_decay_only_one_run_makes_is_named_at_every_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, summary: bool, decays: str
) -> None:
    """AdamW's decay, ``param.mul_(0.9999)`` before its update, is a call the bench's Adam does not make;
    the parameter it wrote reaches the update's ``addcdiv_`` six calls later, 1e-4 apart. From statistics
    that was an all-clear at every step (below the ×256 margin for error entering outside the dumped
    calls), and from tensors 'error enters before Tensor_addcdiv__0_forward, outside the dumped calls'.
    The decay itself is named, at each step: compared together, alone (``--step``), from statistics or
    tensors. The mirror, an NPU script that forgot the bench's decay, was an all-clear at every step from
    statistics, and from tensors 'error enters before Tensor_addcdiv__0_forward' at step 0 and
    'parameters differ on entry' (alone) or an all-clear (together) at steps 1 and 2: the bench's decay
    is named, at every step, where the NPU's update reads the parameter it wrote."""
    monkeypatch.setenv("FOREACH", "0")
    monkeypatch.setenv("DECAYS", decays)
    _dump_both(tmp_path, ADAMW, "--step", "0", "1", "2", *(["--summary-only"] if summary else []))
    together = compare_dumps(tmp_path / "npu", tmp_path / "bench", jobs=1)
    alone = [compare_dumps(tmp_path / "npu", tmp_path / "bench", step=s, jobs=1)[0] for s in (1, 2)]
    changes = "it changes Tensor_mul__0_forward_input.0 in place (input.1: 0.9999) by 0.0001"
    for outcome in [*together, *alone]:
        d = outcome.diagnosis
        found = [(s.call, s.kind, s.after_bench_only) for s in d.suspects[:2]]
        if decays == "npu":
            assert found == [
                ("Tensor_mul__0_forward", UNPAIRED, False),
                ("Tensor_mul__2_forward", UNPAIRED, False),
            ], verdict_text(d)
            assert f"{changes}, allowed" in verdict_text(d)
            assert "Tensor_addcdiv__0_forward_input.0, the tensor it wrote, carries" in verdict_text(d)
        else:  # named where the NPU's update reads the parameter: the bench's call is no NPU call
            assert found == [
                ("Tensor_addcdiv__0_forward", ENTERS, True),
                ("Tensor_addcdiv__1_forward", ENTERS, True),
            ], verdict_text(d)
            assert (
                f"before it the bench run makes Tensor_mul__0_forward, which the NPU run does not: {changes}"
            ) in verdict_text(d)
            assert "Tensor_addcdiv__0_forward_input.0 carries 0.0" in verdict_text(d)


DECAY_BY_HAND = textwrap.dedent("""
    import os
    import sys
    import torch
    import torch.nn.functional as F
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 4))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for x, y in [(torch.randn(20, 16), torch.randn(20, 4)) for _ in range(3)]:
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        if sys.argv[1] == "npu":  # the NPU script decays its weights by hand, 1e-4 a step, not in place
            with torch.no_grad():
                for p in model.parameters():
                    if os.environ["HOW"] == "data":
                        p.data = p.data * 0.9999
                    else:
                        torch.mul(p, 0.9999, out=p)
        opt.step()
""")


@pytest.mark.parametrize("how", ["data", "out"])
def test_a_decay_only_the_npu_run_makes_not_in_place_is_named_at_every_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """``p.data = p.data * 0.9999`` (or ``torch.mul(p, 0.9999, out=p)``) before Adam's step: a call only
    the NPU run makes whose output becomes the parameter, read by the update's ``addcdiv_`` many calls
    later. From statistics every step was an all-clear (tensors: step 0 named the last parameter's
    multiply for the first parameter's ``zeros_like``, steps 1 and 2 'parameters differ on entry'). Each
    multiply is named, at each step, for what it made."""
    monkeypatch.setenv("HOW", how)
    _dump_both(tmp_path, DECAY_BY_HAND, "--step", "0", "1", "2", "--summary-only")
    together = compare_dumps(tmp_path / "npu", tmp_path / "bench", jobs=1)
    alone = compare_dumps(tmp_path / "npu", tmp_path / "bench", step=2, jobs=1)
    mul = "Tensor___mul__" if how == "data" else "Torch_mul"
    for outcome in [*together, *alone]:
        d = outcome.diagnosis
        found = [(s.call, s.kind) for s in d.suspects]
        assert found == [(f"{mul}_{i}_forward", UNPAIRED) for i in range(6)], verdict_text(d)
        evidence = evidence_text(d.suspects[0].evidence)
        assert evidence.startswith(
            f"it makes {mul}_0_forward_output of {mul}_0_forward_input.0 (input.1: 0.9999), 0.0001 apart"
        ), evidence
        reads = "Torch_zeros_like_" if outcome.npu.step == 0 else "Tensor_addcdiv__0_forward_input.0"
        assert reads in evidence and "the tensor it made, carries 0.0" in evidence, evidence


@pytest.mark.parametrize("decays", ["npu", "bench"])
@pytest.mark.parametrize("summary", [True, False], ids=["statistics", "tensors"])
def test_a_decay_finer_than_statistics_estimate_is_named_at_every_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, summary: bool, decays: str
) -> None:
    """AdamW at lr 1e-3 decays by 1e-5 a step, below what an error estimated from statistics may be
    (3.1e-5): every step was an all-clear, from statistics and from tensors, while the parameters drifted
    apart by 1e-5 a step. The decay's max, min and norm move by one factor, which measures it exactly:
    it is named at every step."""
    monkeypatch.setenv("FOREACH", "0")
    monkeypatch.setenv("DECAYS", decays)
    monkeypatch.setenv("LR", "1e-3")
    _dump_both(tmp_path, ADAMW, "--step", "0", "1", "2", *(["--summary-only"] if summary else []))
    by = "Tensor_mul__0_forward_input.0 in place (input.1: 0.99999) by 1e-05 (a scale: its max, min and norm"
    for outcome in compare_dumps(tmp_path / "npu", tmp_path / "bench", jobs=1):
        d = outcome.diagnosis
        first = d.suspects[0] if d.suspects else None
        assert first is not None, verdict_text(d)
        if decays == "npu":
            assert (first.call, first.kind) == ("Tensor_mul__0_forward", UNPAIRED), verdict_text(d)
        else:
            assert (first.call, first.kind) == ("Tensor_addcdiv__0_forward", ENTERS), verdict_text(d)
        assert by in evidence_text(first.evidence), evidence_text(first.evidence)


ATTENTION = textwrap.dedent("""
    import os
    import sys
    import torch
    from torch import nn

    torch.manual_seed(0)
    extra = sys.argv[1] == os.environ["EXTRA"]  # the run that adds calls the other does not make


    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln, self.qkv, self.proj = nn.LayerNorm(32), nn.Linear(32, 96), nn.Linear(32, 32)

        def forward(self, x):
            q, k, v = self.qkv(self.ln(x)).chunk(3, -1)
            h = torch.softmax(q @ k.transpose(-1, -2) / 32**0.5, -1) @ v
            if extra:  # h + 0.01 * gelu(h), in five calls
                h = torch.nn.functional.gelu(h) * 1.01 + h - torch.nn.functional.gelu(h)
            return x + self.proj(h)


    model = nn.Sequential(Block(), Block(), nn.Linear(32, 4))
    opt = torch.optim.AdamW(model.parameters(), 1e-3)
    g = torch.Generator().manual_seed(1)
    for step in range(3):
        x, y = torch.randn(8, 16, 32, generator=g), torch.randn(8, 16, 4, generator=g)
        opt.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        opt.step()
""")


@pytest.mark.parametrize(
    ("extra", "summary"), [("npu", False), ("bench", True)], ids=["npu-tensors", "bench-statistics"]
)
def test_calls_only_one_run_makes_are_named_at_step_2_of_an_attention_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: str, summary: bool
) -> None:
    """AdamW, qkv biases, step 2: one run adds ``h + 0.01 * gelu(h)`` in each block (gelu, mul, add, gelu,
    sub). The activation they change carries ~0.002 of drift from steps 0 and 1 and leaves them with
    ~0.005, 3x: under error entering's margin, the headline was "No operator introduces an error beyond
    rounding (174 calls judged)". The other run passes the matmul's output on to the projection
    unchanged, while they change it by ~0.007: the NPU's calls are the culprit; the bench's are named
    where the NPU's projection reads what they would have changed."""
    monkeypatch.setenv("EXTRA", extra)
    _dump_both(tmp_path, ATTENTION, "--step", "0", "2", *(["--summary-only"] if summary else []))
    (outcome,) = compare_dumps(tmp_path / "npu", tmp_path / "bench", step=2, jobs=1)
    d = outcome.diagnosis
    culprit = d.suspects[0] if d.suspects else None
    unchanged = "Tensor___matmul___1_forward_output on unchanged as Functional_linear_1_forward_input.0"
    if extra == "npu":
        assert culprit is not None and (culprit.call, culprit.kind) == ("Tensor___sub___0_forward", UNPAIRED)
        words = "Functional_gelu_0_forward to Tensor___sub___0_forward have no counterpart in the bench run"
        assert f"{words}, which passes {unchanged}; on the NPU they change it by" in verdict_text(d)
    else:
        assert culprit is not None and (culprit.call, culprit.kind) == ("Functional_linear_1_forward", ENTERS)
        assert culprit.after_bench_only
        words = "before it the bench run makes Functional_gelu_0_forward to Tensor___sub___0_forward"
        assert f"{words}, which the NPU run does not: they change" in verdict_text(d)


GPT = textwrap.dedent("""
    import math
    import os
    import sys

    import torch
    import torch.nn.functional as F
    from torch import nn

    npu = sys.argv[1] == "npu"
    fault = npu and os.environ.get("FAULT") == "attention"
    torch.manual_seed(0)
    if npu and os.environ.get("GELU") == "patched":  # the NPU's GELU in float64, put in place of torch's
        gelu = F.gelu
        F.gelu = lambda x, approximate="none": gelu(x.double()).float()
    V, C, H, T, B = 64, 32, 4, 16, 4


    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
            self.drop, self.wrong = nn.Dropout(0.1), False

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = (z.view(b, t, H, c // H).transpose(1, 2) for z in self.qkv(x).split(c, -1))
            att = (q @ k.transpose(-1, -2)) / math.sqrt(c // H)
            causal = torch.triu(torch.ones(t, t, dtype=torch.bool), 1)
            att = torch.softmax(att.masked_fill(causal, -math.inf), -1)
            if self.wrong:  # the NPU's attention 1% off
                att = att * 1.01
            y = (self.drop(att) @ v).transpose(1, 2).reshape(b, t, c)
            return self.drop(self.proj(y))


    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.attn, self.ln2 = nn.LayerNorm(C), Attention(), nn.LayerNorm(C)
            self.fc, self.out = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            h = self.fc(self.ln2(x))
            h = F.gelu(h.double()).float() if npu and "GELU" not in os.environ else F.gelu(h)  # in float64
            return x + self.out(h)


    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
            self.blocks, self.ln = nn.ModuleList([Block(), Block()]), nn.LayerNorm(C)
            self.head = nn.Linear(C, V, bias=False)
            self.head.weight = self.wte.weight  # tied

        def forward(self, idx):
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln(x))


    model = GPT()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)
    data = torch.randint(0, V, (3, B, T + 1), generator=torch.Generator().manual_seed(1))
    for step, batch in enumerate(data):
        model.blocks[1].attn.wrong = fault and step >= 1
        opt.zero_grad()
        F.cross_entropy(model(batch[:, :-1]).reshape(-1, V), batch[:, 1:].reshape(-1)).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
""")


@pytest.mark.filterwarnings("error::RuntimeWarning")  # the masked scores' -inf: no numpy warning printed
@pytest.mark.parametrize("summary", [True, False], ids=["statistics", "tensors"])
def test_a_healthy_gpt_dumped_from_step_1_names_nothing(tmp_path: Path, summary: bool) -> None:
    """A small GPT (qkv bias, causal mask, dropout, tied embeddings, clipping, AdamW), no fault, the NPU's
    GELU in float64, dumped from step 1 on: Adam turned the key bias's rounding noise at step 0 into
    steps of full size. From statistics, the key chunk carries that noise, which the qkv output's
    statistics dilute: the qkv split "introduced error" (×1.2 at step 1, ×2.6 at step 2); it rounds
    nothing, and passes on what came before it. From tensors, "Culprit: … parameters differ on entry to
    step 1 — bias of Functional_linear_0_forward" at both steps: step 0, which made them differ, is not
    dumped; a note says so, and step 2 carries step 1's on."""
    _dump_both(tmp_path, GPT, *(["--summary-only"] if summary else []), "--step", "1", "2")
    outcomes = compare_dumps(tmp_path / "npu", tmp_path / "bench", jobs=1)
    for outcome in outcomes:
        assert not outcome.diagnosis.suspects, verdict_text(outcome.diagnosis)
    if not summary:
        first = outcomes[0].diagnosis
        said = "parameters differ on entry to step 1, from steps not dumped (note below)"
        assert said in verdict_text(first), verdict_text(first)
        assert any("dump step 0 to tell" in note for note in note_texts(first)), note_texts(first)


def test_a_gelu_each_run_computes_its_own_way_is_no_suspect(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The NPU script puts its own GELU in place of torch's (``x.double()``, GELU, ``.float()``), which no
    pairing puts with the bench's GELU, and its attention is 1% off from step 1. At step 2 the bench's
    GELU, a call only the bench run makes, was taken for a write the NPU run lacks ("error enters before
    Functional_linear_3_forward … before it the bench run makes Functional_gelu_0_forward"), in each MLP,
    forward and backward, and the attention's multiply was named twice. Both runs compute that stretch,
    each its own way: only the multiply is named, once a direction."""
    monkeypatch.setenv("FAULT", "attention")
    monkeypatch.setenv("GELU", "patched")
    # the script runs in this process and replaces F.gelu for good: put torch's back after the test
    monkeypatch.setattr(torch.nn.functional, "gelu", torch.nn.functional.gelu)
    _dump_both(tmp_path, GPT, "--step", "0", "2")
    (outcome,) = compare_dumps(tmp_path / "npu", tmp_path / "bench", step=2, jobs=1)
    d = outcome.diagnosis
    found = [(s.call, s.kind) for s in d.suspects if s.kind != PARAMETERS]  # step 1 is not dumped
    assert found == [("Tensor___mul___0_forward", UNPAIRED), ("Tensor___mul___0_backward", UNPAIRED)], (
        verdict_text(d)
    )
