"""The report's notes on the replay agree with the verdict: no "rows fail … and no kernel is named" beside
a named kernel or 0 failures, and a suspect the budget did not reach says so."""

from __future__ import annotations

from ptdbg_tui.compare.diagnosis.evidence import Judged
from ptdbg_tui.compare.diagnosis.findings import PARAMETERS, Diagnosis, ReplayRun, Suspect
from ptdbg_tui.compare.diagnosis.propagation import GROWTH, Judgement
from ptdbg_tui.compare.replay.replayed import with_replays
from ptdbg_tui.compare.report.words import (
    BUDGET_RAN_OUT,
    NOT_REACHED,
    UNDECIDED_WORDS,
    finding,
    replay_run_text,
)
from ptdbg_tui.engine.replay.replayer import replay_could_decide, undecided


def _suspect(call: str, kind: str, input_error: float = 1e-4) -> Suspect:
    judgement = Judgement(input_error, 0.02, 1e-5, 2000.0, kind, f"{call}_output")
    return Suspect(
        call=call,
        api=call,
        direction="forward",
        kind=kind,
        score=2000.0,
        evidence=Judged(judgement=judgement),
        judgement=judgement,
    )


def test_a_kernel_named_second_is_named():
    """Step 1 of the GPT run: the qkv bias (parameters differ on entry) first, the GELU kernel second,
    0 rows failing; the report still read 'rows fail where the inputs already differ, and no kernel is
    named; --replay …'."""
    bias, gelu = (
        _suspect("Functional_linear_0_forward", PARAMETERS),
        _suspect("Functional_gelu_1_forward", GROWTH),
    )
    d = Diagnosis(suspects=[bias, gelu], judged=10, compared=10)
    assert not replay_could_decide(d, summary=False)


def test_parameters_alone_with_no_row_failing_are_not_called_failing_rows():
    d = Diagnosis(suspects=[_suspect("Functional_linear_0_forward", PARAMETERS)], judged=10, compared=10)
    assert replay_could_decide(d, summary=False)
    assert UNDECIDED_WORDS[undecided(d)] == "parameters differ on entry, and no kernel is named"
    d.failing = 3
    assert (
        UNDECIDED_WORDS[undecided(d)] == "rows fail where the inputs already differ, and no kernel is named"
    )


def test_a_default_replay_that_refuted_every_suspect_still_offers_the_full_one():
    d = Diagnosis(failing=3, judged=10, compared=10, replay=ReplayRun(replayed=2))
    assert not replay_could_decide(d, summary=False), "the app's replay ran every call"
    assert replay_could_decide(d, summary=False, searched=False)


def test_a_suspect_the_budget_did_not_reach_says_so():
    first, second = (
        _suspect("Functional_gelu_0_forward", GROWTH),
        _suspect("Functional_gelu_1_forward", GROWTH),
    )
    own = Diagnosis(suspects=[first, second], judged=10, compared=10)
    d = with_replays(own, [], {}, None, chosen=[first.call, second.call])
    first, second = d.suspects
    assert first.unreached and second.unreached and first.replay is None
    assert not any(s.unreached for s in own.suspects) and own.replay is None  # the pair's own: untouched
    assert finding(first).startswith(f"{NOT_REACHED}; two dumps: introduces error")
    assert replay_run_text(d) == f"not replayed: {BUDGET_RAN_OUT}"
