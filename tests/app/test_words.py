"""The CLI's report and the app say a finding in the same words, because both take them from
:mod:`ptdbg_tui.compare.report.words`: a suspect the replay confirmed, its evidence and score, the
all-clear. These fail when either side builds its own sentence again (or parses one back)."""

from __future__ import annotations

from pathlib import Path

from rich.style import Style

from ptdbg_tui.app.bars import diagnosis_lines as bar_lines
from ptdbg_tui.app.detail import replay_line
from ptdbg_tui.app.tree_model import TreeModel
from ptdbg_tui.compare.diagnosis.findings import Diagnosis, Suspect, evidence_text
from ptdbg_tui.compare.diagnosis.propagation import GROWTH, Judgement
from ptdbg_tui.compare.diagnosis.replay_outcome import CallReplay, ReplayOutcome, SideVerdict
from ptdbg_tui.compare.report.words import diagnosis_lines, replay_text, scored_evidence
from ptdbg_tui.engine.live.updates import EngineUpdate, PairDelta, PairInfo, Progress
from ptdbg_tui.formats.layout import RankDump

INFO = PairInfo(
    "p0", "step0/rank0", RankDump(Path("/d/npu.pkl"), 0, 0), RankDump(Path("/d/b.pkl"), 0, 0), False
)
CALL = "Torch_add_0_forward"
WRONG = SideVerdict(0.29, 2e-5, 0.0, 1.0, f"{CALL}_output")
RIGHT = SideVerdict(3e-7, 2e-5, 0.0, 1.0, f"{CALL}_output")


def _suspect(replay: CallReplay | None) -> Suspect:
    judgement = Judgement(1e-7, 0.02, 1.6e-5, 1240.0, GROWTH, f"{CALL}_output")
    return Suspect(
        call=CALL,
        api="Torch_add",
        direction="forward",
        kind=GROWTH,
        score=judgement.score,
        evidence=evidence_text(judgement),
        judgement=judgement,
        replay=replay,
    )


def _bar(d: Diagnosis, width: int = 400) -> str:
    model = TreeModel()
    model.load(EngineUpdate(pairs={"p0": PairDelta(INFO, diagnosis=d)}, progress=Progress(done=True)))
    model.apply()
    return "\n".join(t.plain for t in bar_lines(model, width, {}))


def test_a_confirmed_culprit_reads_alike_in_the_report_the_bar_and_the_detail():
    replay = CallReplay(CALL, WRONG, RIGHT)
    assert replay.outcome is ReplayOutcome.CONFIRMED
    said = replay_text(replay)
    assert said.startswith("confirmed by replay — NPU kernel wrong on its own inputs (error 0.29")
    d = Diagnosis(suspects=[_suspect(replay)], compared=3, judged=3)
    (culprit_line,) = [line for line in diagnosis_lines(d) if "Culprit" in line]
    assert culprit_line.startswith(f"  Culprit: {CALL} (forward): {said}; two dumps: introduces error — ")
    assert said in _bar(d)
    line = replay_line("Replay", replay, {"fail": Style(color="red"), "head": Style(bold=True)})
    assert line.plain == f"Replay: {said}" and line.style == Style(color="red")


def test_the_bar_keeps_the_score_by_the_name_and_the_rest_of_the_evidence_after():
    d = Diagnosis(suspects=[_suspect(None)], compared=3, judged=3)
    evidence, score = scored_evidence(d.suspects[0])
    assert score == " ×1,240" and evidence == "inputs 1e-07, outputs 0.02, allowed 1.6e-05"
    bar = _bar(d)
    assert f"{CALL}{score}" in bar and evidence in bar and f"{evidence}: ×" not in bar
    assert f"{evidence}{score.replace(' ', ': ')}" in "\n".join(diagnosis_lines(d))


def test_the_all_clear_is_one_sentence_in_the_report_and_the_bar():
    d = Diagnosis(compared=3, judged=3)
    (verdict,) = diagnosis_lines(d)
    assert verdict == "  No operator introduces an error beyond rounding (3 calls judged)."
    assert verdict.strip() in _bar(d)
