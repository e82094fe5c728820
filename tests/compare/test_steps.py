"""Across steps: parameters that differ on entry to a step are inherited when the step before named a
suspect of its own, and the optimizer's update between the steps is named when that step's gradients of
them agree."""

from __future__ import annotations

import numpy as np

from ptdbg_tui.compare.diagnosis.diagnose import diagnose
from ptdbg_tui.compare.diagnosis.findings import PARAMETERS
from ptdbg_tui.compare.diagnosis.propagation import ENTERS, GROWTH
from ptdbg_tui.compare.diagnosis.steps import StepView, link_steps
from ptdbg_tui.compare.report.words import evidence_text, note_texts, times_text, verdict_text

RNG = np.random.default_rng(5)


def _step(calls_factory, weight_lean: float, grad_fault: float):
    calls = calls_factory()
    x, w = RNG.standard_normal((4, 16)).astype(np.float32), RNG.standard_normal((8, 16)).astype(np.float32)
    wn = w * np.float32(1 + weight_lean)
    calls.call("Functional_linear", 0, "forward", [(x, x), (wn, w)], [(x @ wn.T, x @ w.T)])
    g = RNG.standard_normal((4, 8)).astype(np.float32)
    gw = g.T @ x
    calls.call(
        "Functional_linear", 0, "backward", [(g, g)], [(g @ wn, g @ w), (gw * np.float32(1 + grad_fault), gw)]
    )
    return calls.rows


def test_parameters_that_differ_after_a_step_with_its_own_culprit_are_inherited(calls_factory):
    rows0 = _step(calls_factory, 0.0, 0.3)  # step 0: a faulty weight gradient
    rows1 = _step(calls_factory, 1e-3, 0.0)  # step 1: the weight that update made differ
    d0, d1 = diagnose(rows0, 0), diagnose(rows1, 1)
    assert [s.kind for s in d1.suspects] == [PARAMETERS]
    _, linked = link_steps([StepView(0, 0, rows0, d0), StepView(1, 0, rows1, d1)])
    assert linked.suspects == []
    assert any(
        "inherited from step 0" in n and "Functional_linear_0_backward" in n for n in note_texts(linked)
    )
    assert [s.kind for s in d1.suspects] == [PARAMETERS] and not d1.notes  # the views' own: as they were


def test_parameters_that_differ_after_a_clean_step_name_the_optimizers_update(calls_factory):
    rows0 = _step(calls_factory, 0.0, 0.0)
    rows1 = _step(calls_factory, 1e-3, 0.0)
    d0, d1 = diagnose(rows0, 0), diagnose(rows1, 1)
    _, d1 = link_steps([StepView(0, 0, rows0, d0), StepView(1, 0, rows1, d1)])
    assert [s.kind for s in d1.suspects] == [PARAMETERS]
    assert "parameters differ on entry to step 1" in verdict_text(d1)
    assert "optimizer's update between steps 0 and 1" in evidence_text(d1.suspects[0].evidence)
    _, d1 = link_steps([StepView(0, 0, rows0, d0), StepView(1, 0, rows1, d1)])  # again: the same words, once
    assert evidence_text(d1.suspects[0].evidence).count("optimizer's update") == 1


def test_inherited_parameters_pass_on_where_they_came_from(calls_factory):
    """Step 0's kernel fault makes the weights differ at steps 1 and 2, neither with a culprit of its
    own: both name step 0's culprit, given in any order, and again gives the same. Seen from its
    statistics only (a step compared for context), a step in between cannot tell its own error from
    what it inherited: it passes step 0's on too."""
    rows = [_step(calls_factory, 0.0, 0.3), _step(calls_factory, 1e-3, 0.0), _step(calls_factory, 2e-3, 0.0)]
    d = [diagnose(r, k) for k, r in enumerate(rows)]
    views = [StepView(k, 0, rows[k], d[k]) for k in range(3)]
    for _ in range(2):
        linked = link_steps([views[2], views[1], views[0]])[::-1]
        for k in (1, 2):
            assert linked[k].suspects == [], k
            assert note_texts(linked[k]) == [
                f"parameters differ on entry to step {k}: inherited from step 0, whose culprit is "
                "Functional_linear_0_backward"
            ], k
        views = [StepView(k, 0, rows[k], linked[k]) for k in range(3)]
    d2 = diagnose(rows[2], 2)
    busy = _step(calls_factory, 1e-3, 0.3)  # step 1 as statistics might see it: a suspect of its own
    assert [s.kind for s in diagnose(busy, 1).suspects if s.kind != PARAMETERS]
    context = {
        (0, 0): StepView(0, 0, rows[0], diagnose(rows[0], 0)),
        (1, 0): StepView(1, 0, busy, diagnose(busy, 1)),
    }
    (d2,) = link_steps([StepView(2, 0, rows[2], d2)], context)
    assert note_texts(d2) == [
        "parameters differ on entry to step 2: inherited from step 0, whose culprit, from its statistics, "
        "is Functional_linear_0_backward"
    ]


def _optimizer_step(calls_factory, state_lean: float, grad_fault: float = 0.0):
    """A step whose optimizer updates its state in place after the backward (Adam's
    ``exp_avg.lerp_(grad, 0.1)``), the state ``state_lean`` off on entry."""
    calls = calls_factory()
    x, w = RNG.standard_normal((4, 16)).astype(np.float32), RNG.standard_normal((8, 16)).astype(np.float32)
    calls.call("Functional_linear", 0, "forward", [(x, x), (w, w)], [(x @ w.T, x @ w.T)])
    g = RNG.standard_normal((4, 8)).astype(np.float32)
    gw = g.T @ x
    calls.call(
        "Functional_linear", 0, "backward", [(g, g)], [(g @ w, g @ w), (gw * np.float32(1 + grad_fault), gw)]
    )
    m = RNG.standard_normal((8, 16)).astype(np.float32)
    mn = m * np.float32(1 + state_lean)
    calls.call("Tensor_lerp_", 0, "forward", [(mn, m), (gw, gw)], [(mn + (gw - mn) / 10, m + (gw - m) / 10)])
    return calls.rows


def test_optimizer_state_that_differs_after_a_step_with_its_own_culprit_is_inherited(calls_factory):
    """Adam's moments carry a faulty step's error into the next like the parameters: after a step with
    a culprit, error entering at the target of an in-place call after the backward is a note naming it;
    after a clean step it stays a suspect (nothing earlier explains it)."""
    rows0 = _optimizer_step(calls_factory, 0.0, grad_fault=0.3)
    rows1 = _optimizer_step(calls_factory, 0.02)
    d0, d1 = diagnose(rows0, 0), diagnose(rows1, 1)
    assert [(s.call, s.kind) for s in d1.suspects] == [("Tensor_lerp__0_forward", ENTERS)]
    _, d1 = link_steps([StepView(0, 0, rows0, d0), StepView(1, 0, rows1, d1)])
    assert d1.suspects == []
    assert any(
        "optimizer's state differs on entry to step 1 (Tensor_lerp__0_forward_input.0)" in n
        and "Functional_linear_0_backward" in n
        for n in note_texts(d1)
    )

    clean0 = _optimizer_step(calls_factory, 0.0)
    again = diagnose(rows1, 1)
    _, again = link_steps([StepView(0, 0, clean0, diagnose(clean0, 0)), StepView(1, 0, rows1, again)])
    assert [(s.call, s.kind) for s in again.suspects] == [("Tensor_lerp__0_forward", ENTERS)]


def test_parameters_inherited_from_error_that_entered_outside_the_dumped_calls_name_no_culprit(calls_factory):
    """DDP on a rank that did not make the error: its step-1 weight gradient arrives through the
    all-reduce no hook sees, and error enters before its optimizer's first call. Step 2's parameters
    inherit it; the note called that optimizer call step 1's culprit ('whose culprit is
    Tensor_lerp__0_forward'), when it only shows where the error came in."""
    rows0 = _optimizer_step(calls_factory, 0.02)  # error enters at the optimizer: nothing dumped made it
    rows1 = _step(calls_factory, 1e-3, 0.0)
    d0, d1 = diagnose(rows0, 1), diagnose(rows1, 2)
    assert [(s.call, s.kind) for s in d0.suspects] == [("Tensor_lerp__0_forward", ENTERS)]
    _, d1 = link_steps([StepView(1, 0, rows0, d0), StepView(2, 0, rows1, d1)])
    assert d1.suspects == []
    assert note_texts(d1) == [
        "parameters differ on entry to step 2: inherited from step 1, where the error enters before "
        "Tensor_lerp__0_forward, outside the dumped calls"
    ]


def test_a_step_that_fails_without_naming_anything_passes_the_earlier_culprit_on(calls_factory):
    """Step 0's weight gradient is wrong on one DDP rank; at step 1 the parameters differ too little for
    statistics to name them (their margin is 16²), so step 1 fails without a suspect; at step 2 they are
    named. Step 2 read 'parameters differ on entry to step 2' as a suspect of its own (×1.3, on every
    rank), the chain to step 0's culprit broken by the step between."""
    rows = [_step(calls_factory, 0.0, 0.3), _step(calls_factory, 1e-4, 0.0), _step(calls_factory, 1e-3, 0.0)]
    d = [diagnose(r, k) for k, r in enumerate(rows)]
    d[1].suspects, d[1].failing = [], 4  # as statistics saw it: rows fail, below the margin that names them
    assert [s.kind for s in d[2].suspects] == [PARAMETERS]
    d[2] = link_steps([StepView(k, 0, rows[k], d[k]) for k in range(3)])[2]
    assert d[2].suspects == []
    assert note_texts(d[2]) == [
        "parameters differ on entry to step 2: inherited from step 0, whose culprit is "
        "Functional_linear_0_backward"
    ]
    # a step between that does not fail at all breaks the chain: the update after it made them differ
    clean = [_step(calls_factory, 0.0, 0.3), _step(calls_factory, 0.0, 0.0), _step(calls_factory, 1e-3, 0.0)]
    e = [diagnose(r, k) for k, r in enumerate(clean)]
    assert e[1].failing == 0
    e[2] = link_steps([StepView(k, 0, clean[k], e[k]) for k in range(3)])[2]
    assert [s.kind for s in e[2].suspects] == [PARAMETERS]


def _bench_only_step(calls_factory):
    """A step whose error enters after calls only the bench run makes: the NPU script skips a second
    micro-batch, whose gradient the bench adds before its optimizer's in-place update."""
    calls = calls_factory()
    g, m = RNG.standard_normal((8, 16)).astype(np.float32), RNG.standard_normal((8, 16)).astype(np.float32)
    calls.call("Functional_linear", 0, "forward", [(g, g)], [(g, g)])
    calls.bench_only("Functional_linear_1_forward_input.0", g)
    calls.bench_only("Functional_linear_1_forward_output", g)
    calls.call("Tensor_lerp_", 0, "forward", [(m, m), (g, 2 * g)], [(m + (g - m) / 10, m + (2 * g - m) / 10)])
    return calls.rows


def _faulty_step(calls_factory, summary: bool):
    """A step whose weight differs on entry and whose weight gradient is 30% off, as tensors or as
    statistics show it."""
    calls = calls_factory()
    x, w = RNG.standard_normal((4, 16)).astype(np.float32), RNG.standard_normal((8, 16)).astype(np.float32)
    wn, g = w * np.float32(1.01), RNG.standard_normal((4, 8)).astype(np.float32)
    calls.call("Functional_linear", 0, "forward", [(x, x), (wn, w)], [(x @ wn.T, x @ w.T)], summary=summary)
    outs = [(g @ wn, g @ w), (g.T @ x * np.float32(1.3), g.T @ x)]
    calls.call("Functional_linear", 0, "backward", [(g, g)], outs, summary=summary)
    return calls.rows


def test_after_calls_only_the_bench_run_makes_a_kernel_seen_from_statistics_is_not_named(calls_factory):
    """The NPU script skips a micro-batch from step 1: the bench's extra calls make the parameters differ
    far beyond rounding, and from statistics an innocent kernel at step 2 was the culprit (×1.2). Such a
    suspect becomes a note saying where the runs began to differ; seen from tensors it stays."""
    rows1 = _bench_only_step(calls_factory)
    d1 = diagnose(rows1, 1)
    assert [(s.call, s.kind, s.after_bench_only) for s in d1.suspects] == [
        ("Tensor_lerp__0_forward", ENTERS, True)
    ]
    source = (
        "from step 1, where the error enters before Tensor_lerp__0_forward, after calls only the bench run "
        "makes (the NPU run has no counterpart)"
    )
    backward = "Functional_linear_0_backward"
    for summary in (True, False):
        rows2 = _faulty_step(calls_factory, summary)
        d2 = diagnose(rows2, 2)
        found = [("Functional_linear_0_forward", PARAMETERS), (backward, GROWTH)]
        assert [(s.call, s.kind) for s in d2.suspects] == found, summary
        score = times_text(d2.suspects[1].score)
        for _ in range(2):  # again gives the same
            _, d2 = link_steps([StepView(1, 0, rows1, d1), StepView(2, 0, rows2, d2)])
            kept = [] if summary else [(backward, GROWTH)]
            assert [(s.call, s.kind) for s in d2.suspects] == kept, summary
            assert note_texts(d2) == [
                *(
                    [
                        f"{backward} ({score}) not named: from statistics, step 2 cannot tell a call's own "
                        f"error from what its inputs carry {source}"
                    ]
                    if summary
                    else []
                ),
                f"parameters differ on entry to step 2: inherited {source}",
            ], summary
