"""The CLI's report and the app say a finding in the same words, because both take them from
:mod:`ptdbg_tui.compare.report.words`: a suspect the replay confirmed, its evidence and score, the
all-clear. These fail when either side builds its own sentence again (or parses one back)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

from rich.style import Style

from ptdbg_tui.app.bars import diagnosis_lines as bar_lines
from ptdbg_tui.app.detail import replay_line
from ptdbg_tui.app.tree_model import TreeModel
from ptdbg_tui.compare.diagnosis.differences import ClassDiffers, ModelsDiffer
from ptdbg_tui.compare.diagnosis.evidence import Judged, OnParameter, TwoDumps
from ptdbg_tui.compare.diagnosis.findings import PARAMETERS, Diagnosis, Suspect
from ptdbg_tui.compare.diagnosis.propagation import GROWTH, Judgement
from ptdbg_tui.compare.diagnosis.replay_outcome import CallReplay, ReplayOutcome, SideVerdict
from ptdbg_tui.compare.report.words import diagnosis_lines, evidence_text, replay_text, scored_evidence
from ptdbg_tui.engine.live.updates import EngineUpdate, PairDelta, PairInfo, Progress
from ptdbg_tui.formats.layout import RankDump
from ptdbg_tui.formats.manifest import manifest_differences

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
        evidence=Judged(judgement=judgement),
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


def test_a_score_inside_the_evidence_is_taken_apart_by_its_values_not_its_words():
    """Parameters that differ on entry say their score before the other parameters: the bar takes it
    out from the middle; a score that is not the suspect's (a replayed call's, ×∞) stays in the words."""
    judgement = Judgement(0.0, 0.02, 1.6e-5, 1240.0, PARAMETERS, "fc.weight")
    on = OnParameter(judgement=judgement, parameter="fc.weight", others=("fc.bias",))
    s = replace(_suspect(None), kind=PARAMETERS, evidence=on)
    assert evidence_text(on) == "fc.weight: inputs 0, outputs 0.02, allowed 1.6e-05: ×1,240; also fc.bias"
    assert scored_evidence(s) == (
        "fc.weight: inputs 0, outputs 0.02, allowed 1.6e-05; also fc.bias",
        " ×1,240",
    )
    replayed = replace(s, score=math.inf, evidence=TwoDumps(judgement=judgement))
    assert scored_evidence(replayed) == ("the two dumps: inputs 0, outputs 0.02, allowed 1.6e-05: ×1,240", "")


def test_the_all_clear_is_one_sentence_in_the_report_and_the_bar():
    d = Diagnosis(compared=3, judged=3)
    (verdict,) = diagnosis_lines(d)
    assert verdict == "  No operator introduces an error beyond rounding (3 calls judged)."
    assert verdict.strip() in _bar(d)


def _manifest(lr: float, sums: str, host: str, threads: str) -> dict[str, object]:
    """A run's manifest: its lr (and the scheduler's copy of it), its parameters' and first batch's
    checksums, where it ran and four environment variables."""
    return {
        "format": "ptdbg-manifest",
        "version": 1,
        "host": {"hostname": host},
        "argv": [f"/{host}/train.py"],
        "env": {name: threads for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "NCCL_ALGO", "HCCL_ALGO")},
        "optimizers": [{"class": "AdamW", "groups": [{"lr": lr, "parameters": 4}]}],
        "schedulers": [{"class": "StepLR", "optimizer": 0, "state": {"base_lrs": [lr]}}],
        "parameters": {
            name: {"checksum": f"{sums}{name}"} for name in ("fc.weight", "fc.bias", "x\x1b[2J", "w")
        },
        "batches": [{"inputs": [{"checksum": sums}]}],
    }


def test_the_manifests_are_said_first_each_kind_once_and_the_app_lists_them_alike():
    """Where two runs' manifests differ: one line before the other runs-differ lines and the verdict,
    the lr once (the scheduler holds a copy), the parameters counted and named a few at a time, the
    settings a few at a time; where a run ran in a note of its own."""
    found = manifest_differences(_manifest(3e-4, "a", "npu-7", "8"), _manifest(1e-4, "b", "gpu-2", "4"))
    d = Diagnosis(
        compared=3,
        judged=3,
        differ=[ModelsDiffer(classes=(ClassDiffers(module="x", npu="A", bench="B"),))],
        manifest=tuple(found),
    )
    lines = diagnosis_lines(d)
    said = (
        "lr 0.0003 against 0.0001; 4 parameters differ at start (fc.weight, fc.bias, x\\x1b[2J +1 more); "
        "batch 0 differs; OMP_NUM_THREADS 8 against 4; MKL_NUM_THREADS 8 against 4; NCCL_ALGO 8 against 4; "
        "1 more environment variable differs"
    )
    assert lines[:2] == [
        f"  runs differ before any kernel: {said}",
        "  runs differ: the runs' models differ: x is a A against a B",
    ]
    assert "  note: the runs' manifests also differ where numerics do not: host, script path" in lines
    assert f"Runs differ: the runs' manifests differ: {said} (+1 more)" in _bar(d)
    unread = Diagnosis(compared=3, judged=3, manifest_unread=(("bench", "manifest_rank0.json: not JSON"),))
    assert diagnosis_lines(unread)[-1] == (
        "  note: the bench run's manifest was not read (manifest_rank0.json: not JSON): "
        "the runs' manifests are not compared"
    )


def test_another_optimizer_is_said_with_a_few_of_its_values_and_its_size_with_the_model():
    """AdamW against SGD differ in every value the two classes hold: the class and the lr first, then a
    count; the groups' parameter counts are the model's size, said after the modules."""

    def manifest(cls: str, lr: float, values: dict[str, object], parameters: int) -> dict[str, object]:
        groups = [{"lr": lr, **values, "parameters": parameters}]
        return {
            "format": "ptdbg-manifest",
            "version": 1,
            "optimizers": [{"class": cls, "groups": groups}],
            "schedulers": [{"class": "StepLR", "optimizer": 0, "state": {"base_lrs": [lr]}}],
            "modules": {"fc": "Linear", **({"extra": "Linear"} if parameters > 4 else {})},
        }

    adamw = manifest("AdamW", 1e-3, {"betas": [0.9, 0.999], "eps": 1e-8, "amsgrad": False}, 4)
    sgd = manifest("SGD", 1e-2, {"momentum": 0.9, "nesterov": False}, 6)
    d = Diagnosis(compared=3, judged=3, manifest=tuple(manifest_differences(adamw, sgd)))
    assert diagnosis_lines(d)[0] == (
        "  runs differ before any kernel: optimizer AdamW against SGD; lr 0.001 against 0.01; "
        "betas.0 0.9 against absent; 5 more hyperparameters differ; module extra differs; "
        "parameters optimized 4 against 6"
    )
