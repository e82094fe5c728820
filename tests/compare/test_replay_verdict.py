"""The replay's verdict on hand-made results (no torch): rounding passes, a wrong kernel or a one-sided
lean does not, an honest low-precision kernel sets the bar, and the two sides together decide."""

from __future__ import annotations

import numpy as np

from ptdbg_tui.compare.diagnosis.evidence import Argument
from ptdbg_tui.compare.diagnosis.replay_outcome import CallReplay, ReplayOutcome, SideVerdict
from ptdbg_tui.compare.diagnosis.replay_reasons import Fixed, Lacks, NotHeld
from ptdbg_tui.compare.replay.verdict import judge_result, lean
from ptdbg_tui.compare.report.words import replay_text, side_text

TANH = Argument(place="approximate", npu="'tanh'", bench="'none'")

RNG = np.random.default_rng(3)
U_BF16 = 2.0**-8


def _bf16(a: np.ndarray) -> np.ndarray:
    """Round to bfloat16 (to nearest, ties to even), kept as float64."""
    bits = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32).astype(np.float64)


def test_rounding_to_the_result_dtype_is_no_fault():
    ref = RNG.standard_normal(4096)
    v = judge_result(_bf16(ref), ref, U_BF16, "torch.bfloat16", "y")
    assert not v.wrong, v


def test_a_wrong_result_is_wrong_and_says_by_how_much():
    ref = RNG.standard_normal(1000)
    got = ref.copy()
    got[-100:] *= 1.3  # the last tile
    v = judge_result(got.astype(np.float32).astype(np.float64), ref, 6e-8, "torch.float32", "y")
    assert v.wrong and "error" in side_text(v) and "allowed" in side_text(v)


def test_a_one_sided_error_of_one_bf16_unit_is_wrong_though_rounding_allows_its_size():
    ref = RNG.standard_normal(4096)
    honest = judge_result(_bf16(ref), ref, U_BF16, "torch.bfloat16", "y")
    biased = judge_result(_bf16(ref * 1.005), ref, U_BF16, "torch.bfloat16", "y")
    assert not honest.wrong
    assert biased.error < biased.allowed, "its size alone is rounding"
    assert biased.wrong and "one-sided" in side_text(biased)
    assert abs(lean(_bf16(ref) - ref, ref)[0]) < abs(biased.bias) / 10


def test_an_honest_kernel_of_the_same_precision_sets_the_bar():
    ref = RNG.standard_normal(4096)
    got = ref * (1 + 3e-3)  # as wrong as torch's own low-precision kernel is here
    assert judge_result(got, ref, 0.0, "torch.float32", "y").wrong
    assert not judge_result(got, ref, 0.0, "torch.float32", "y", honest=(3e-3, 3e-3)).wrong


def test_nan_the_replay_does_not_make_is_wrong():
    ref = RNG.standard_normal(100)
    got = ref.copy()
    got[3] = np.nan
    assert judge_result(got, ref, 0.0, "torch.float32", "y").wrong


def _side(wrong: bool) -> SideVerdict:
    return SideVerdict(0.3 if wrong else 1e-7, 1e-5, 0.0, 1.0, "y")


def test_the_two_sides_decide_together():
    assert CallReplay("c", _side(True), _side(False)).outcome == ReplayOutcome.CONFIRMED
    assert CallReplay("c", _side(False), _side(False)).outcome == ReplayOutcome.REFUTED
    assert CallReplay("c", _side(True), _side(True)).outcome == ReplayOutcome.INCONCLUSIVE
    assert CallReplay("c", Fixed.RANDOM_OP, Fixed.RANDOM_OP).outcome == ReplayOutcome.NOT_REPLAYED
    # a rebuild without keyword arguments proves nothing unless the other side matches its replay
    assert (
        CallReplay("c", _side(True), Fixed.STATISTICS_ONLY, complete=False).outcome
        == ReplayOutcome.INCONCLUSIVE
    )
    assert CallReplay("c", _side(True), _side(False), complete=False).outcome == ReplayOutcome.CONFIRMED
    confirmed = replay_text(CallReplay("c", _side(True), _side(False)))
    assert confirmed.startswith("confirmed by replay — NPU kernel wrong on its own inputs (error 0.3")
    assert "the difference is inherited" in replay_text(CallReplay("c", _side(False), _side(False)))
    # both kernels right on their own inputs, but the runs passed different arguments: not inherited
    differs = CallReplay("c", _side(False), _side(False), differs=(TANH,))
    assert differs.outcome == ReplayOutcome.ARGUMENTS
    assert replay_text(differs).startswith(
        "the runs pass different arguments — approximate: 'tanh' against 'none'"
    )
    assert (
        CallReplay("c", _side(True), _side(False), differs=(TANH,)).outcome == ReplayOutcome.CONFIRMED
    )  # wrong regardless
    # a rebuild from the records because the dump's own sidecar lacks the call says so, not that the
    # tool records no keyword arguments; a bench that was not replayed is not said to be within rounding
    damaged = replay_text(
        CallReplay("c", _side(True), _side(True), complete=False, lacking=Lacks.NO_SIDECAR_LINE)
    )
    assert "the rebuild may lack arguments: the dump's call sidecar holds no line for it" in damaged
    alone = replay_text(CallReplay("c", _side(False), NotHeld(side="bench")))
    assert alone.startswith("refuted by replay — the NPU kernel is within rounding on its own inputs")
    assert "both within rounding" not in alone


def _leaning(sigmas: float, n: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    """A result whose errors (1e-3 each) lean one way by ``sigmas`` standard errors of their mean."""
    ref = RNG.standard_normal(n)
    noise = RNG.standard_normal(n) * 1e-3
    noise += sigmas * noise.std() / np.sqrt(n) - noise.mean()
    return ref + noise, ref


def test_a_lean_within_chance_of_its_own_spread_is_no_fault():
    """Errors that lean 4.6 standard errors one way are chance among the hundreds of results a replay
    judges, errors that share an input leaning together (a conv's weight gradient under bf16 autocast,
    no fault, leaned 4.6 and was called wrong), though beyond what rounding alone leaves; 12 standard
    errors is a kernel's."""
    chance = judge_result(*_leaning(4.6), 1e-3, "torch.float32", "y")
    assert not chance.wrong, chance
    assert abs(chance.bias) > 4 * 1e-3 / 32, "beyond the rounding's allowance alone"
    biased = judge_result(*_leaning(12.0), 1e-3, "torch.float32", "y")
    assert biased.wrong and "one-sided" in side_text(biased), biased
