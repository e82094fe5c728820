"""Replay end to end on real dumps of ``bench/diagnosis.py``'s scenarios: a kernel fault is confirmed
on its own recorded inputs (forward and backward), an honest call is refuted, a one-sided bf16 error of
one unit is caught, and what cannot be replayed says why. One replay worker (torch in a spawned
process) serves the module."""

from __future__ import annotations

import contextlib
import importlib.util
import shlex
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from ptdbg_tui import cli
from ptdbg_tui.compare.diagnosis.replay_outcome import CallReplay, ReplayOutcome, SideVerdict
from ptdbg_tui.compare.replay.run import Refused, resolve
from ptdbg_tui.compare.replay.verdict import HONEST_MARGIN
from ptdbg_tui.compare.report.words import note_texts, replay_run_text, replay_text, verdict_text
from ptdbg_tui.engine.batch import compare_dumps
from ptdbg_tui.engine.replay.replayer import Replayer, fold_outcomes, replay_outcomes

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from diagnosis_scenarios import SCENARIOS, dump_pair, faults

from dumper import PrecisionDebugger
from dumper.faults import replaced


@pytest.fixture(scope="module")
def worker():
    with Replayer() as r:
        yield r


def _replayed(tmp_path: Path, name: str, worker: Replayer, **kw):
    npu, bench = dump_pair(SCENARIOS[name], tmp_path, seed=0)
    outcomes = compare_dumps(npu, bench, jobs=1)
    got = replay_outcomes(outcomes, replayer=worker, **kw)
    (per_call,) = got.values()
    return outcomes[0], per_call


@pytest.mark.parametrize("name", ["sum_pool_doubled", "conv_weight_grad_only"])
def test_a_kernel_fault_is_confirmed_on_its_own_inputs_and_honest_calls_are_refuted(tmp_path, worker, name):
    outcome, replays = _replayed(tmp_path, name, worker)
    (truth,) = SCENARIOS[name].truth
    assert replays[truth].outcome == ReplayOutcome.CONFIRMED, replay_text(replays[truth])
    culprit = outcome.diagnosis.culprit
    assert culprit is not None and culprit.call == truth and culprit.confirmed
    assert "confirmed by replay — NPU kernel wrong on its own inputs" in verdict_text(outcome.diagnosis)
    honest = [r for c, r in replays.items() if c != truth]
    assert honest and all(r.outcome == ReplayOutcome.REFUTED for r in honest), [
        replay_text(r) for r in honest if r.outcome != ReplayOutcome.REFUTED
    ]
    assert "replayed on each side's own inputs" in replay_run_text(outcome.diagnosis)


def test_a_missing_tensor_file_makes_that_call_not_replayable_and_nothing_crashes(tmp_path, worker):
    npu, bench = dump_pair(SCENARIOS["sum_pool_doubled"], tmp_path, seed=0)
    (outcome,) = compare_dumps(npu, bench, jobs=1)
    for f in outcome.npu_tensors.glob("Torch_sum_0_forward_output*"):
        f.unlink()
    (got,) = replay_outcomes([outcome], replayer=worker, calls=["Torch_sum_0_forward"]).values()
    assert replay_text(got["Torch_sum_0_forward"]).startswith("not replayable: ")
    assert "cannot be read" in replay_text(got["Torch_sum_0_forward"])


def _dump(path: Path, fault: bool) -> Path:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU(), torch.nn.Linear(64, 8))
    x = torch.randn(64, 64)
    if fault:  # the NPU run: bf16, and a GELU whose results lean one bf16 unit up
        model, x = model.to(torch.bfloat16), x.to(torch.bfloat16)
    debugger = PrecisionDebugger(dump_path=str(path), hook_name="dump", rank=0, step=[0], model=model)
    debugger.configure_hook(mode="api_stack")
    gelu = replaced(F, "gelu", lambda f: lambda *a, **k: f(*a, **k) * 1.005) if fault else None
    debugger.start()
    try:
        if gelu is not None:
            with gelu:
                model(x).float().pow(2).mean().backward()
        else:
            model(x).float().pow(2).mean().backward()
    finally:
        debugger.stop()
        debugger.step()
    return path


def test_a_one_sided_bf16_error_of_one_unit_is_caught_by_both_lean_tests(tmp_path, worker):
    npu, bench = _dump(tmp_path / "npu", True), _dump(tmp_path / "bench", False)
    outcomes = compare_dumps(npu, bench, jobs=1)
    two_dumps = outcomes[0].diagnosis.culprit
    assert (
        two_dumps is not None and two_dumps.call == "Functional_gelu_0_forward" and two_dumps.kind == "lean"
    )
    (got,) = replay_outcomes(outcomes, replayer=worker).values()
    r = got["Functional_gelu_0_forward"]
    assert r.outcome == ReplayOutcome.CONFIRMED and "one-sided" in replay_text(r), replay_text(r)
    assert outcomes[0].diagnosis.culprit.call == "Functional_gelu_0_forward"


@pytest.mark.parametrize(
    "name", ["os.system", "builtins.eval", "torch.load", "torch.nn.functional.no_such_op"]
)
def test_only_the_named_torch_function_of_the_dumped_api_list_is_ever_resolved(name):
    with pytest.raises(Refused):
        resolve(name)
    assert resolve("torch.nn.functional.gelu") is F.gelu


def test_replay_without_torch_says_how_to_install_it(tmp_path, monkeypatch, capsys):
    npu, bench = dump_pair(SCENARIOS["sum_pool_doubled"], tmp_path, seed=0)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "torch" else real(n, *a))
    code = cli.main(["compare", str(npu), str(bench), "-o", str(tmp_path / "out"), "--replay", "--jobs", "1"])
    assert code == cli.EXIT_USAGE
    assert "pip install torch==2.13.0" in capsys.readouterr().err


def test_the_replay_command_on_the_originals_dump_against_ours(tmp_path, capsys):
    """``ptdbg-tui replay`` on a mixed pair (tests/fixtures/mixed: the original ptdbg_ascend's NPU dump,
    its silu backward faulty, against the project's): the fault is confirmed and nothing else; the
    NPU's rebuilds lack keyword arguments, so the bench is rebuilt the same way, never from its sidecar
    alone."""
    mixed = Path(__file__).parents[1] / "fixtures" / "mixed"
    code = cli.main(
        ["replay", str(mixed / "npu"), str(mixed / "bench"), "-o", str(tmp_path), "--no-progress"]
    )
    out, err = capsys.readouterr()
    assert code == cli.EXIT_OK, err
    confirmed = [line.split(":")[0].strip() for line in out.splitlines() if "confirmed by replay" in line]
    assert confirmed == ["Functional_silu_0_backward"], out
    # the original records no None: conv2d's skipped bias position is rebuilt as None
    assert "Functional_conv2d_0_forward: refuted by replay" in out
    (csv,) = tmp_path.glob("replay_*.csv")
    assert csv.read_text().startswith("Pair,Call,Outcome,") and f"CSV: {csv}" in out


def test_the_replay_of_one_dump_against_itself_says_there_is_no_verdict(tmp_path, capsys):
    npu = Path(__file__).parents[1] / "fixtures" / "mixed" / "npu"
    code = cli.main(["replay", str(npu), str(npu), "-o", str(tmp_path), "--no-progress"])
    out, err = capsys.readouterr()
    assert code == cli.EXIT_OK, err
    assert "not replayed: the NPU and bench dumps are the same file" in out
    assert "refuted" not in out and "inconclusive" not in out


class _Gelu(torch.nn.Module):
    def __init__(self, approximate: str) -> None:
        super().__init__()
        self.fc, self.approximate = torch.nn.Linear(8, 8), approximate

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.fc(x), approximate=self.approximate)


def test_a_keyword_argument_that_differs_is_said_and_never_refuted_into_an_all_clear(tmp_path, capsys):
    """The runs call F.gelu(approximate="tanh") and ("none"): only the call sidecar records the keyword.
    Each side's kernel is right on its own arguments, so a replay would refute a kernel suspect; the
    diagnosis reads the keyword from the two sidecars and says the runs pass different arguments, and
    the replay agrees (its calls of the GELU: "different arguments")."""
    for side, approximate in (("npu", "tanh"), ("bench", "none")):
        torch.manual_seed(0)
        model, x = _Gelu(approximate), torch.randn(16, 8) * 3
        debugger = PrecisionDebugger(dump_path=str(tmp_path / side))
        debugger.start()
        model(x).sum().backward()
        debugger.stop()
    code = cli.main(
        ["compare", str(tmp_path / "npu"), str(tmp_path / "bench"), "-o", str(tmp_path / "o"), "--replay"]
    )
    out = capsys.readouterr().out
    assert code == cli.EXIT_OK
    assert (
        "Culprit: Functional_gelu_0_forward (forward): the runs pass different arguments to it — "
        "approximate: 'tanh' against 'none'" in out
    ), out
    assert "2 different arguments" in out, out


def test_in_a_mixed_pair_the_bench_is_replayed_under_its_own_tools_names(tmp_path, capsys):
    """msprobe's NPU dump against ours (tests/fixtures/msprobe/mixed_msprobe): the bench names each call
    otherwise (Functional_silu_0_backward), and is replayed from its own sidecar all the same."""
    mixed = Path(__file__).parents[1] / "fixtures" / "msprobe" / "mixed_msprobe"
    code = cli.main(
        ["replay", str(mixed / "npu"), str(mixed / "bench"), "-o", str(tmp_path), "--no-progress"]
    )
    out, err = capsys.readouterr()
    assert code == cli.EXIT_OK, err
    assert "Functional.silu.0.backward: confirmed by replay" in out and "; bench 4.7e-08" in out
    assert "not replayed: the bench dump does not hold it" not in out


def _replay_conv_noise(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """``ptdbg-tui replay`` on tests/fixtures/msprobe/scenario_conv_noise (real msprobe dumps of a conv
    net: bias-less conv2d, F.relu(inplace=True)); its report."""
    pair = Path(__file__).parents[1] / "fixtures" / "msprobe" / "scenario_conv_noise"
    code = cli.main(["replay", str(pair / "npu"), str(pair / "bench"), "-o", str(tmp_path), "--no-progress"])
    out, err = capsys.readouterr()
    assert code == cli.EXIT_OK, err
    return out


def test_msprobes_null_argument_is_rebuilt_as_none(tmp_path, capsys):
    """msprobe writes a conv2d's absent bias as ``null``: the call is rebuilt with None there; it read
    'not replayable: the value Functional.conv2d.0.forward.input.2 (None) cannot be rebuilt from the
    records'."""
    out = _replay_conv_noise(tmp_path, capsys)
    assert "cannot be rebuilt" not in out, out
    assert "Functional.conv2d.0.forward: refuted by replay" in out, out


def test_a_null_gradient_for_a_none_argument_keeps_its_slot_in_node_order(tmp_path, capsys):
    """msprobe records a bias-less conv2d's backward in its node's order, [input, weight, bias]: null,
    the weight's gradient, null. It read 'not replayable: its tool records the gradients in its
    autograd node's order (3), which does not match its 2 floating tensor arguments (1 needing a
    gradient) one to one'; the None bias keeps its slot."""
    out = _replay_conv_noise(tmp_path, capsys)
    assert "Functional.conv2d.0.backward: refuted by replay" in out, out


def test_a_call_with_inplace_true_is_replayed_on_a_copy(tmp_path, capsys):
    """F.relu(x, inplace=True), recorded by msprobe with its keyword: its backward read 'not replayable:
    the call fails when rebuilt: RuntimeError: a leaf Variable that requires grad is being used in an
    in-place operation.' It writes its input as relu_ does, so it runs on a copy as relu_ does."""
    out = _replay_conv_noise(tmp_path, capsys)
    assert "leaf Variable" not in out, out
    assert "Functional.relu.0.backward: refuted by replay" in out, out
    assert "Functional.relu.1.backward: refuted by replay" in out, out


def test_a_truncated_call_sidecar_is_said_to_be_one(tmp_path, capsys):
    """Our dumper's sidecar cut after its first line: the calls it no longer holds are rebuilt from the
    records, and an inconclusive one says the sidecar lacks them, not that the tool records no keywords."""
    from ptdbg_tui.formats.calls import calls_path
    from ptdbg_tui.formats.layout import discover

    for side in ("npu", "bench"):
        torch.manual_seed(0)
        model, x = _Gelu("tanh"), torch.randn(16, 8) * 3
        debugger = PrecisionDebugger(dump_path=str(tmp_path / side))
        debugger.start()
        model(x).sum().backward()
        debugger.stop()
    sidecar = calls_path(discover(tmp_path / "npu")[0].records)
    sidecar.write_text(sidecar.read_text().splitlines()[0] + "\n")
    code = cli.main(["replay", str(tmp_path / "npu"), str(tmp_path / "bench"), "-o", str(tmp_path / "o")])
    out = capsys.readouterr().out
    assert code == cli.EXIT_OK
    gelu = next(line for line in out.splitlines() if line.strip().startswith("Functional_gelu_0_forward:"))
    assert "replay inconclusive" in gelu and "the dump's call sidecar holds no line for it" in gelu, gelu
    assert "does not record keyword arguments" not in out


def _einsum_dump(path: Path, scale: float) -> Path:
    """Two steps of a weight through an einsum whose results are ``scale`` times the truth; step 1 dumped
    (a large learning rate: the weight differs on entry to it far more than the einsum's own error)."""
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.randn(16, 16))
    opt = torch.optim.SGD([w], lr=1.0)
    debugger = PrecisionDebugger(dump_path=str(path), step=[1])
    with replaced(torch, "einsum", lambda f: lambda *a, **k: f(*a, **k) * scale):
        for _ in range(2):
            debugger.start()
            torch.einsum("bij,jk->bik", torch.randn(4, 8, 16), w).square().mean().backward()
            opt.step()
            opt.zero_grad()
            debugger.stop()
            debugger.step()
    return path


def test_a_kernel_confirmed_where_error_also_enters_before_it_is_the_culprit(tmp_path, worker):
    """Its two-dump finding ('error enters before it': the updated weight) is no finding about its kernel;
    the replay's confirmation of that kernel must not be dropped with it (it was: the backward, confirmed
    too, became the culprit, and the forward's confirmation was shown nowhere)."""
    npu, bench = _einsum_dump(tmp_path / "npu", 1.01), _einsum_dump(tmp_path / "bench", 1.0)
    outcomes = compare_dumps(npu, bench, jobs=1)
    two_dumps = [(s.call, s.kind) for s in outcomes[0].diagnosis.suspects]
    assert two_dumps == [("Torch_einsum_0_forward", "enters")]
    (got,) = replay_outcomes(outcomes, replayer=worker).values()
    assert got["Torch_einsum_0_forward"].outcome == ReplayOutcome.CONFIRMED, replay_text(
        got["Torch_einsum_0_forward"]
    )
    d = outcomes[0].diagnosis
    assert d.culprit is not None and d.culprit.call == "Torch_einsum_0_forward" and d.culprit.confirmed
    assert verdict_text(d).startswith("Culprit: Torch_einsum_0_forward (forward): confirmed by replay"), (
        verdict_text(d)
    )
    assert any(s.kind == "enters" and s.call == "Torch_einsum_0_forward" for s in d.suspects)  # it stands


def test_the_report_gives_the_command_that_writes_the_confirmed_culprit_s_repro(tmp_path, capsys):
    """The handoff to the kernel team: after --replay confirms the culprit, the report's 'repro:' line is
    a command that writes its repro beside the CSV (the report said nothing of it)."""
    npu, bench = dump_pair(SCENARIOS["sum_pool_doubled"], tmp_path, seed=0)
    out = tmp_path / "out"
    assert cli.main(["compare", str(npu), str(bench), "-o", str(out), "--replay", "--jobs", "1"]) == 0
    (line,) = [s for s in capsys.readouterr().out.splitlines() if s.startswith("  repro: ")]
    command = shlex.split(line.removeprefix("  repro: "))
    assert command[:2] == ["ptdbg-tui", "repro"] and command[3] == "Torch_sum_0_forward", command
    assert Path(command[-1]).parent == out
    assert cli.main(command[1:]) == 0
    assert "NPU kernel wrong on its own inputs" in capsys.readouterr().out
    assert (Path(command[-1]) / "repro.py").is_file()


def _keyword_tensor_dump(path: Path, op: str, scale: float) -> Path:
    """One call whose tensor comes by keyword (the pkl records positional tensors only), its results
    ``scale`` times the truth: ``layer_norm`` (``weight=``), ``scaled_dot_product_attention``
    (``attn_mask=``, a bool mask) or ``stack`` (``tensors=``, a list, whose tensors stay unrecorded)."""
    torch.manual_seed(0)
    debugger = PrecisionDebugger(dump_path=str(path), step=[0])
    with replaced(F if op != "stack" else torch, op, lambda f: lambda *a, **k: f(*a, **k) * scale):
        debugger.start()
        if op == "layer_norm":
            w = torch.nn.Parameter(torch.rand(32) + 0.5)
            out = F.layer_norm(torch.randn(16, 32), (32,), weight=w, eps=1e-3)
        elif op == "scaled_dot_product_attention":
            q = torch.randn(2, 2, 6, 8, requires_grad=True)
            mask = torch.ones(6, 6, dtype=torch.bool).tril()
            out = F.scaled_dot_product_attention(q, q * 0.5, q * 2, attn_mask=mask)
        else:
            a = torch.randn(16, 32, requires_grad=True)
            out = torch.stack(tensors=[a, a * 2])
        out.square().mean().backward()
        debugger.stop()
        debugger.step()
    return path


@pytest.mark.parametrize(
    ("op", "call"),
    [
        ("layer_norm", "Functional_layer_norm_0_forward"),
        ("scaled_dot_product_attention", "Functional_scaled_dot_product_attention_0_forward"),
    ],
)
def test_a_faulty_call_whose_tensor_came_by_keyword_is_confirmed_by_replay(tmp_path, worker, op, call):
    """``weight=``/``attn_mask=`` were recorded by dtype and shape only: 'not replayable: the keyword
    argument attn_mask (a torch.bool tensor of shape [6, 6]) was not recorded', and a 3%-off kernel
    named nowhere. Their data file makes the call replayable: the NPU's kernel is confirmed wrong."""
    npu = _keyword_tensor_dump(tmp_path / "npu", op, 1.03)
    bench = _keyword_tensor_dump(tmp_path / "bench", op, 1.0)
    outcomes = compare_dumps(npu, bench, jobs=1)
    (got,) = replay_outcomes(outcomes, replayer=worker, calls=[call]).values()
    assert got[call].outcome == ReplayOutcome.CONFIRMED, replay_text(got[call])
    d = outcomes[0].diagnosis
    assert d.culprit is not None and d.culprit.call == call and d.culprit.confirmed, verdict_text(d)


def test_a_keyword_tensor_whose_data_file_is_lost_makes_its_call_not_replayable_and_says_why(
    tmp_path, worker
):
    """A bad input: the sidecar names a keyword tensor's data file that is gone (a dump copied in part).
    That call says why it cannot be replayed; no crash, and the other calls are replayed still."""
    npu = _keyword_tensor_dump(tmp_path / "npu", "layer_norm", 1.03)
    bench = _keyword_tensor_dump(tmp_path / "bench", "layer_norm", 1.0)
    (lost,) = npu.rglob("Functional_layer_norm_0_forward_kwarg.weight.npy")
    lost.unlink()
    outcomes = compare_dumps(npu, bench, jobs=1)
    (got,) = replay_outcomes(outcomes, replayer=worker).values()
    text = replay_text(got["Functional_layer_norm_0_forward"])
    assert text.startswith("not replayable: ") and "kwarg.weight" in text and "cannot be read" in text, text
    assert any(r.outcome != ReplayOutcome.NOT_REPLAYED for r in got.values()), "the other calls are replayed"


def test_with_nothing_confirmed_the_replay_line_names_the_calls_it_could_not_redo_where_the_runs_differ(
    tmp_path, worker
):
    """The faulty stack cannot be replayed (its tensors come in a keyword list, never recorded): the
    replay line names it and why, where nothing is confirmed (it said only '2 not replayable')."""
    npu = _keyword_tensor_dump(tmp_path / "npu", "stack", 1.03)
    bench = _keyword_tensor_dump(tmp_path / "bench", "stack", 1.0)
    outcomes = compare_dumps(npu, bench, jobs=1)
    (got,) = replay_outcomes(outcomes, replayer=worker).values()
    assert not any(r.outcome == ReplayOutcome.CONFIRMED for r in got.values())
    line = replay_run_text(outcomes[0].diagnosis)
    assert (
        "not replayable where the runs differ: Torch_stack_0_forward: the keyword argument tensors "
        "(a torch.float32 tensor of shape [16, 32]) was not recorded"
    ) in line, line


def test_where_inputs_already_differ_the_compare_offers_replay_and_replay_names_the_kernel(tmp_path, capsys):
    """A kernel wrong at every step: from step 1 its inputs differ, and two dumps cannot pin it
    ('13 entries fail, yet no call judged …'). Nothing said that --replay can: the user was left
    with a note on step 0."""
    from divergence import SUITE

    npu, bench = SUITE["linear_weight_grad_tail_tile"].dump(tmp_path, 0)
    out = str(tmp_path / "out")
    assert cli.main(["compare", str(npu), str(bench), "-o", out, "--jobs", "1"]) == 0
    report = capsys.readouterr().out
    (note,) = [s for s in report.splitlines() if "--replay" in s]
    assert note.startswith("note: step1/rank0, step2/rank0: rows fail where the inputs already differ"), note
    assert (
        cli.main(["compare", str(npu), str(bench), "-o", out, "--jobs", "1", "--step", "1", "--replay"]) == 0
    )
    report = capsys.readouterr().out
    assert "Culprit: Functional_linear_1_backward (backward): confirmed by replay" in report, report
    assert "--replay re-runs" not in report


def _autocast_dump(path: Path, autocast: bool) -> Path:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.Tanh(), torch.nn.Linear(256, 8))
    x = torch.randn(128, 256)
    debugger = PrecisionDebugger(dump_path=str(path), hook_name="dump", rank=0, step=[0], model=model)
    debugger.configure_hook(mode="api_stack")
    debugger.start()
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            y = model(x)
        y.float().pow(2).mean().backward()
    finally:
        debugger.stop()
        debugger.step()
    return path


def test_a_call_under_autocast_is_replayed_as_honest_within_the_rounding_autocast_gives_its_inputs(
    tmp_path, worker
):
    """The NPU script runs its forward under bf16 autocast, the bench's not, no fault. A linear's
    weight gradient is recorded in fp32, but autocast computed it from bf16 casts of its inputs, which
    no float64 re-run makes: the replay allowed it fp32-sized rounding (0.0034 where bf16 autocast
    itself errs by 0.0017), one lean away from calling an honest kernel wrong. Its honest kernel now
    runs under the autocast the call sidecar records."""
    npu, bench = _autocast_dump(tmp_path / "npu", True), _autocast_dump(tmp_path / "bench", False)
    outcomes = compare_dumps(npu, bench, jobs=1)
    call = "Functional_linear_1_backward"
    (got,) = replay_outcomes(outcomes, replayer=worker, calls=[call]).values()
    verdict = got[call].npu
    assert got[call].outcome == ReplayOutcome.REFUTED and not isinstance(verdict, str), replay_text(got[call])
    # the NPU side IS torch's CPU kernel under bf16 autocast: its error is the honest one, within which
    # the side may err HONEST_MARGIN times (it was allowed 2x, the sensitivity to its bf16 input alone)
    assert verdict.error > 1e-4, "bf16-sized"
    assert verdict.allowed >= 0.9 * HONEST_MARGIN * verdict.error, verdict


def _scaled_at_step_one(path: Path, scale: float, kernel_at: int | None = None) -> Path:
    """Three SGD steps of a small MLP; the script scales an activation at step 1 by ``scale`` (1.0: the
    bench's, which makes no such call); ``kernel_at``: instead, the GELU kernel is ``scale`` off at that
    step (a kernel the two dumps name)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    debugger = PrecisionDebugger(dump_path=str(path), hook_name="dump", step=[0, 1, 2])
    for step in range(3):
        x = torch.randn(5, 8)
        debugger.start()
        off = scale if step == kernel_at else 1.0
        with replaced(F, "gelu", lambda gelu, off=off: lambda t, *a, **k: gelu(t, *a, **k) * off):
            h = model[0](x)
            if step == 1 and scale != 1.0 and kernel_at is None:
                h = h * scale
            loss = model[2](model[1](h)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        debugger.stop()
        debugger.step()
    return path


def test_a_later_steps_note_names_the_culprit_the_replay_leaves(tmp_path):
    """The whole GPT run: step 0's Tensor_addcdiv__4_forward was refuted by the replay, and step 1 still
    read 'parameters differ on entry to step 1: inherited from step 0, whose culprit is
    Tensor_addcdiv__4_forward'. Here step 0's culprit is refuted by a replay given to the fold."""
    npu = _scaled_at_step_one(tmp_path / "npu", 1.05, kernel_at=0)
    outcomes = compare_dumps(npu, _scaled_at_step_one(tmp_path / "bench", 1.0), jobs=1)
    first, second = outcomes[:2]
    culprit = first.diagnosis.culprit
    assert culprit is not None and culprit.call == "Functional_gelu_0_forward"
    said = f"inherited from step 0, whose culprit is {culprit.call}"
    assert any(said in n for n in note_texts(second.diagnosis)), note_texts(second.diagnosis)
    honest = SideVerdict(1e-8, 1e-5, 0.0, 1.0, f"{culprit.call}_output")
    refuted = CallReplay(culprit.call, honest, honest, True)
    assert refuted.outcome == ReplayOutcome.REFUTED
    fold_outcomes(outcomes, [([culprit.call], {culprit.call: refuted}), ([], {}), ([], {})])
    assert first.diagnosis.culprit is None or first.diagnosis.culprit.call != culprit.call
    assert "refuted, no longer suspects: Functional_gelu_0_forward" in replay_run_text(first.diagnosis)
    assert not any(said in n for d in (second.diagnosis, outcomes[2].diagnosis) for n in note_texts(d))


@pytest.mark.parametrize("steps", [[], ["--step", "2"]])
def test_no_replay_is_offered_where_the_error_is_an_earlier_steps_call_no_kernel_makes(
    tmp_path, capsys, steps
):
    """The NPU script scales an activation at step 1 (a call the bench run does not make): step 2's rows
    fail on the parameters it left. The report ended 'note: step2/rank0: rows fail where the inputs
    already differ, and no kernel is named; --replay … can prove one wrong' beside 'inherited from
    step 1, whose culprit is Tensor___mul___0_forward': every kernel of step 2 is right on its inputs."""
    npu = _scaled_at_step_one(tmp_path / "npu", 3.0)
    bench = _scaled_at_step_one(tmp_path / "bench", 1.0)
    code = cli.main(["compare", str(npu), str(bench), "-o", str(tmp_path / "o"), "--no-progress", *steps])
    report = capsys.readouterr().out
    assert code == cli.EXIT_OK
    assert "parameters differ on entry to step 2: inherited from step 1, whose culprit" in report, report
    assert "is Tensor___mul___0_forward" in report, report
    assert "step2/rank0 vs step2/rank0 (tensors)" in report and " 0 failed" not in report.split("step2/")[-1]
    assert "--replay" not in report, report


class _RunningMean(torch.nn.Module):
    """Token features and their running sum over 1,024 tokens, scaled (a causal pool), a head."""

    def __init__(self) -> None:
        super().__init__()
        self.proj, self.head = torch.nn.Linear(16, 16), torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.sigmoid(self.proj(x))
        return self.head(torch.cumsum(h, dim=1) * (1 / h.shape[1]))


def _cumsum_dump(path: Path, npu: bool, fault: bool = False) -> Path:
    """The NPU run in fp16 (its cumsum keeping an fp16 running sum with ``fault``), the bench in fp32."""
    torch.manual_seed(0)
    model, x, target = _RunningMean(), torch.randn(2, 1024, 16), torch.randn(2, 1024, 4)
    if npu:
        model, x, target = model.half(), x.half(), target.half()
    debugger = PrecisionDebugger(dump_path=str(path), hook_name="dump", rank=0, step=[0], model=model)
    kernel = replaced(torch, "cumsum", faults.running_sum_in_own_dtype) if fault else contextlib.nullcontext()
    with kernel:
        debugger.start()
        try:
            F.mse_loss(model(x), target).backward()
        finally:
            debugger.stop()
            debugger.step()
    return path


@pytest.mark.parametrize("fault", [True, False])
def test_an_fp16_running_sum_in_a_long_cumsum_is_named_and_confirmed(tmp_path, worker, fault):
    """A 1,024-long fp16 cumsum whose kernel keeps an fp16 running sum is 2.6e-3 off (12× a correctly
    rounded result's error); the op's allowance of two fp16 roundings under the margin (3.9e-3) took it
    for rounding, in the two dumps and in the replay: no call was named. A reduction rounds once, so the
    kernel is named and confirmed by replay, and an honest fp16 cumsum is still within rounding."""
    npu = _cumsum_dump(tmp_path / "npu", npu=True, fault=fault)
    outcomes = compare_dumps(npu, _cumsum_dump(tmp_path / "bench", npu=False), jobs=1)
    culprit = outcomes[0].diagnosis.culprit
    (got,) = replay_outcomes(outcomes, replayer=worker, calls=["Torch_cumsum_0_forward"]).values()
    replay = got["Torch_cumsum_0_forward"]
    if fault:
        assert culprit is not None and culprit.call == "Torch_cumsum_0_forward"
        assert replay.outcome == ReplayOutcome.CONFIRMED, replay_text(replay)
    else:
        assert culprit is None and outcomes[0].diagnosis.suspects == []
        assert replay.outcome == ReplayOutcome.REFUTED, replay_text(replay)
