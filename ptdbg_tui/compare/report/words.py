"""The words for what the diagnosis and the replay find: a suspect's finding, the verdict of a pair, a
replay's outcome, the verdict across ranks, and the pair's report as the CLI prints it. The CLI, the
CSVs, the legacy API and the app all take their sentences from here, so that they say the same things
alike and nothing downstream parses a sentence back into a value (the values stay on the findings).
"""

from __future__ import annotations

import math
import shlex
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from ptdbg_tui.compare.diagnosis.differences import (
    DataShapes,
    HyperparametersDiffer,
    ModelsDiffer,
    ModulesOnly,
    RunsDiffer,
    ShapeDiffers,
)
from ptdbg_tui.compare.diagnosis.evidence import (
    Argument,
    Arguments,
    Checksums,
    Departs,
    Entered,
    Evidence,
    Judged,
    NpuOnly,
    OneRunChange,
    OnOneRank,
    OnParameter,
    StillRandom,
    TwoDumps,
    Undumped,
    Unjudged,
    Written,
    WrittenChange,
)
from ptdbg_tui.compare.diagnosis.findings import (
    CallEvidence,
    Diagnosis,
    NoReplay,
    PairNotReplayed,
    Received,
    ReplayOff,
    Suspect,
    Unexplained,
    Unreplayed,
)
from ptdbg_tui.compare.diagnosis.kinds import Kind
from ptdbg_tui.compare.diagnosis.narrowing import (
    SCRIPT,
    Chosen,
    CulpritIn,
    MonitorFirst,
    Named,
    NarrowWhy,
)
from ptdbg_tui.compare.diagnosis.nonfinite import (
    NonFinite,
    NonFiniteOrigin,
    OriginKind,
    OriginReplay,
    Overflow,
)
from ptdbg_tui.compare.diagnosis.notes import (
    Amplified,
    Autocast,
    Carried,
    ContextFailed,
    JobNote,
    NotCompared,
    Note,
    NotReplayed,
    NoVerdict,
    OnPair,
    Repeated,
    ReplayCould,
    ScanProblem,
    Sidecar,
    StepNote,
    Undecided,
    Unread,
)
from ptdbg_tui.compare.diagnosis.numbers import fmt_error
from ptdbg_tui.compare.diagnosis.propagation import (
    BENCH_NAN,
    ENTERS,
    LEAN,
    NAN_ORIGIN,
    SUMS,
    ZEROS,
    Judgement,
)
from ptdbg_tui.compare.diagnosis.ranks import CrossRank, RankVerdict, group_size
from ptdbg_tui.compare.diagnosis.replay_outcome import CallReplay, ReplayOutcome, SideVerdict
from ptdbg_tui.compare.diagnosis.replay_reasons import WhyNot
from ptdbg_tui.compare.matching.pairing import AutoAligned, ended_early
from ptdbg_tui.compare.model import Row, Status
from ptdbg_tui.compare.report.csv_msprobe import mode_of
from ptdbg_tui.compare.report.csv_ptdbg import Column
from ptdbg_tui.compare.report.layout_words import layout_problem_text
from ptdbg_tui.compare.report.line_words import unreadable_text
from ptdbg_tui.compare.report.match_words import auto_aligned_text, tail_text
from ptdbg_tui.compare.report.msprobe_result import MD5
from ptdbg_tui.compare.report.outputs import repro_folder, suspects_path
from ptdbg_tui.compare.report.replay_words import lacking_text, why_not_text
from ptdbg_tui.formats import manifest as fm
from ptdbg_tui.formats.layout import (
    NoPairs,
    NoTensorDir,
    OneSided,
    RankDump,
    RankOnly,
    SameDump,
    Shadowed,
    Side,
    StatisticsOnly,
    TensorDirProblem,
    TensorDirUnreadable,
    Unpaired,
)
from ptdbg_tui.formats.manifest import ManifestDifference
from ptdbg_tui.formats.narrowing import Narrowed, ToolConfig
from ptdbg_tui.formats.records import BadLine, RepeatedNames, short
from ptdbg_tui.formats.untrusted import one_line


class PairReport(Protocol):
    """What a pair's report is said from (the engine's ``PairReport``; a protocol, so that the words
    stay in the report layer and the engine is never imported from here)."""

    @property
    def npu(self) -> RankDump: ...
    @property
    def rows(self) -> list[Row]: ...
    @property
    def diagnosis(self) -> Diagnosis: ...
    @property
    def bad_lines(self) -> tuple[list[BadLine], list[BadLine]]: ...
    @property
    def summary(self) -> bool: ...
    @property
    def csv(self) -> Path | None: ...
    @property
    def advisor(self) -> Path | None: ...
    @property
    def match(self) -> str: ...
    @property
    def match_note(self) -> AutoAligned | None: ...
    @property
    def no_verdict(self) -> NoVerdict | None: ...
    @property
    def culprit_module(self) -> str: ...
    @property
    def culprit_step(self) -> int | None: ...
    @property
    def label(self) -> str: ...
    def counts(self) -> Counter[Status]: ...


#: How each kind reads after the call's name.
KIND_WORDS: dict[Kind, str] = {
    Kind.GROWTH: "introduces error",
    Kind.NAN_ORIGIN: "NaN/Inf origin",
    Kind.ZEROS: "all-zero output",
    Kind.BENCH_NAN: "the bench output holds NaN/Inf from finite inputs: the bench run is no reference here",
    Kind.ENTERS: "error enters before it, outside the dumped calls",
    Kind.LEAN: "one-sided error: its results lean one way, where rounding leans neither",
    Kind.SUMS: "its results no longer sum to one",
    Kind.PARAMETERS: "parameters differ on entry to {step}",
    Kind.UNPAIRED: "the NPU run makes this call and the bench run does not",
    Kind.ARGUMENTS: "the runs pass different arguments to it",
    Kind.SHAPE: "output shape differs",
    Kind.RANDOM: "the two runs draw different random numbers — align their seeds (or, for dropout, "
    "disable it)",
    Kind.COLLECTIVE: "its result on this rank departs from the other ranks'",
    Kind.RANK_ALONE: "wrong on this rank alone",
    Kind.RECEIVED: "receives another rank's error through it",
    Kind.REPLAYED: "kernel wrong on its own inputs (replayed in float64)",
    Kind.NONDETERMINISTIC: "its output differs from bit-equal inputs: the runs compute it differently "
    "(on one device: not deterministic)",
}


def sentence(text: str) -> str:
    """A report phrase ("first divergent rank: …", a note) as a sentence of its own, its first letter
    up, for a toast or a line of the app."""
    return text[:1].upper() + text[1:]


def entries_fail(count: int, errors: int = 0) -> str:
    """``1 entry fails`` / ``3 entries fail``; of them ``errors`` could not be compared (a missing npy),
    said so, as the header's count of errors says it."""

    def entries(n: int) -> str:
        return f"{n:,} entry" if n == 1 else f"{n:,} entries"

    fails = count - errors
    if not errors:
        return f"{entries(count)} fail" + ("s" if count == 1 else "")
    if not fails:
        return f"{entries(errors)} could not be compared"
    return f"{entries(fails)} fail{'s' if fails == 1 else ''} and {errors:,} could not be compared"


# --- a call's verdict -----------------------------------------------------------------------------


def times_text(score: float) -> str:
    """A suspect's score as the evidence ends with it: ``×12,728``."""
    if math.isinf(score):
        return "×∞"
    return f"×{score:,.0f}" if score >= 10 else f"×{score:.1f}"


#: Why a call's inputs carry an infinite error, in words (:attr:`Judgement.input_why`).
_INPUTS_WHY = {
    "nan": "its inputs already carry NaN/Inf where the bench is finite",
    BENCH_NAN: (
        "its inputs hold NaN/Inf on the bench where the NPU's are finite: the bench is no reference here"
    ),
    "zeros": "an input is all zeros on the bench and not on the NPU (infinite relative error)",
}


def judgement_parts(j: Judgement) -> tuple[str, str]:
    """The numbers behind a verdict in words that match them, and apart from them the score they end
    with (``×12,728``; ``""`` where they end with none): the app's bar keeps the score by the call's
    name. :func:`judgement_text` joins them."""
    partial = " (some inputs not compared)" if j.partial else ""
    if j.kind == NAN_ORIGIN:
        return f"{j.output} gains NaN/Inf from finite inputs{partial}", ""
    if j.kind == BENCH_NAN:
        return f"{j.output} holds NaN/Inf on the bench where the NPU's is finite{partial}", ""
    if j.shapes is not None:
        npu, bench = j.shapes
        return f"{j.output}: NPU {list(npu)} vs bench {list(bench)}; the inputs' shapes agree", ""
    if math.isinf(j.input_error):
        return _INPUTS_WHY.get(j.input_why, _INPUTS_WHY["nan"]), ""
    head = f"inputs {fmt_error(j.input_error)}{partial}, outputs {fmt_error(j.output_error)}"
    if j.kind == ZEROS:
        return f"{j.output} is all zeros where the bench is not: {head}", ""
    if math.isinf(j.output_error):
        return (
            f"{j.output} is all zeros on the bench and not on the NPU: inputs {fmt_error(j.input_error)}",
            "",
        )
    if j.kind == LEAN:
        return (
            f"{j.output}'s norm leans {j.lean:+.2%} where its inputs' lean {fmt_error(j.input_error)} and "
            f"unbiased rounding allows ±{fmt_error(j.allowed)}"
        ), times_text(j.score)
    if j.kind == SUMS:
        return (
            f"{j.output}'s mean is {j.lean:+.2%} off the bench's, where each of its rows sums to one "
            f"whatever its inputs, and unbiased rounding allows ±{j.allowed:.2%}"
        ), times_text(j.score)
    if j.kind == ENTERS:
        return (
            f"{j.output} carries {fmt_error(j.output_error)} where no tensor dumped before it carried "
            f"more than {fmt_error(j.input_error)}, allowed {fmt_error(j.allowed)}"
        ), times_text(j.score)
    return f"{head}, allowed {fmt_error(j.allowed)}", times_text(j.score)


def judgement_text(j: Judgement) -> str:
    """The numbers behind a verdict, in words that match them: ``inputs 3e-07, outputs 0.24, allowed
    4e-06: ×60,000``."""
    words, score = judgement_parts(j)
    return f"{words}: {score}" if score else words


#: What a checksum cannot tell, said wherever one alone names a call.
BITS_NOT_HOW_FAR = "a checksum tells that the bits differ, not by how much"


def unjudged_text(why: Unjudged | None) -> str:
    """Why a call was not judged (``""``: no reason was recorded)."""
    return why.value if why is not None else ""


def call_evidence_text(e: CallEvidence) -> str:
    """The verdict on one call in words, or why there is none (the detail panel shows it)."""
    return judgement_text(e.judgement) if e.judgement is not None else unjudged_text(e.why_not)


def unexplained_text(u: Unexplained) -> str:
    """Why failing rows name no suspect: ``the first failing row is ROW — its call's inputs already carry
    the error (…)``."""
    if not u.row:
        return f"{DIFFER_FIRST} (runs differ, above)"
    if u.uncompared:  # nothing was measured: its inputs carry nothing we know of
        why = f"it could not be compared ({u.message})" if u.message else "it could not be compared"
    elif u.verdict is None:
        why = "its call was not judged"
    elif u.verdict.judgement is None:
        why = f"its call was not judged: {unjudged_text(u.verdict.why_not)}"
    else:
        why = f"its call's inputs already carry the error ({call_evidence_text(u.verdict)})"
    extra = f"; before it, calls only the NPU run made: {', '.join(u.npu_only)}" if u.npu_only else ""
    return f"the first failing row is {u.row} — {why}{extra}"


# --- a call's replay ------------------------------------------------------------------------------

#: Why a suspect chosen for the replay was not replayed.
BUDGET_RAN_OUT = "the replay budget ran out (--replay-budget)"
NOT_REACHED = f"not replayed: {BUDGET_RAN_OUT}"
#: A result's error within its allowance is shown with that allowance from this size up: an error of
#: 0.96 "within rounding" is so only where cancellation allows 7.7, which the words must say.
SHOWN_ALLOWED = 0.01


def side_text(v: SideVerdict) -> str:
    """One side's figures in words (the replay's words and the repro's docstring quote them)."""
    if v.error > v.allowed:
        return f"error {fmt_error(v.error)}, allowed {fmt_error(v.allowed)}"
    if abs(v.bias) > v.bias_allowed:
        return (
            f"one-sided: mean error {v.bias:+.2g} where unbiased rounding allows "
            f"±{fmt_error(v.bias_allowed)} (error {fmt_error(v.error)})"
        )
    if v.error >= SHOWN_ALLOWED:  # "within rounding (NPU 0.96 …)" read as 96% of rounding
        return f"{fmt_error(v.error)} of {fmt_error(v.allowed)} allowed"
    return f"{fmt_error(v.error)}"


def repro_verdict_text(v: SideVerdict) -> str:
    """The replay's verdict on a repro's recorded results: ``NPU kernel wrong on its own inputs (error
    0.29, allowed 2e-05)``."""
    head = "wrong on its own inputs" if v.wrong else "within rounding on its own inputs"
    return f"NPU kernel {head} ({side_text(v)})"


def _said(v: SideVerdict | WhyNot) -> str:
    """One side's figures, or why it was not replayed."""
    return side_text(v) if isinstance(v, SideVerdict) else why_not_text(v)


def replay_text(r: CallReplay) -> str:
    """A call's replay in words, e.g. "confirmed by replay — NPU kernel wrong on its own inputs (error
    0.29, allowed 2e-05); bench 3e-07"."""
    npu, bench = r.npu, r.bench
    b = side_text(bench) if isinstance(bench, SideVerdict) else f"not replayed: {why_not_text(bench)}"
    if not isinstance(npu, SideVerdict):
        return f"not replayable: {why_not_text(npu)}"
    n = side_text(npu)
    outcome = r.outcome
    if outcome is ReplayOutcome.CONFIRMED:
        return f"confirmed by replay — NPU kernel wrong on its own inputs ({n}); bench {b}"
    if outcome is ReplayOutcome.ARGUMENTS:
        return (
            f"the runs pass different arguments — {arguments_text(r.differs)}; each side's kernel is right "
            f"on its own (NPU {n}, bench {b})"
        )
    if outcome is ReplayOutcome.REFUTED and not isinstance(bench, SideVerdict):
        return f"refuted by replay — the NPU kernel is within rounding on its own inputs ({n}); bench {b}"
    if outcome is ReplayOutcome.REFUTED:
        return (
            f"refuted by replay — both within rounding on their own inputs (NPU {n}, "
            f"bench {b}): the difference is inherited"
        )
    if npu.wrong and isinstance(bench, SideVerdict) and bench.wrong:
        why = (
            f"the rebuild may lack arguments: {lacking_text(r.lacking)}"
            if not r.complete
            else "the rebuilt call may differ from the recorded one"
        )
        return f"replay inconclusive — both sides depart from the float64 replay (NPU {n}, bench {b}): {why}"
    if npu.wrong:
        return (
            f"replay inconclusive — NPU {n}, but the rebuild may lack arguments ({lacking_text(r.lacking)}) "
            f"and the bench was {b}"
        )
    return f"replay: NPU {n}; bench kernel departs from its replay ({b})"


def suspect_replay_text(s: Suspect) -> str:
    """What the replay said of a suspect: its outcome, that the budget did not reach it, or ``""``."""
    if s.replay is not None:
        return replay_text(s.replay)
    return NOT_REACHED if s.unreached else ""


def pair_not_replayed_text(n: PairNotReplayed) -> str:
    """Why a pair was not replayed at all: ``not replayed: …``."""
    if n.no_verdict is not None:
        why = no_verdict_text(n.no_verdict)
    elif n.why is Unreplayed.UNREADABLE:
        why = f"cannot read {n.reason}"
    elif n.why is Unreplayed.BUDGET:
        why = BUDGET_RAN_OUT
    else:
        why = "the pair was compared from statistics, without tensors"
    return f"not replayed: {why}"


def replay_run_text(d: Diagnosis) -> str:
    """What a pair's replay did, in one line ("12 call(s) replayed …: 1 confirmed, …"), with the suspects
    it refuted, where a kernel may still hide, and the calls its budget did not reach; or why it did not
    run; ``""`` where none was tried."""
    run = d.replay
    if run is None:
        return ""
    if run.why_not is not None:
        return pair_not_replayed_text(run.why_not)
    if not run.replayed:
        return NOT_REACHED if run.missed else ""
    replays = d.replays
    counts = Counter(r.outcome for r in replays.values())
    seconds = sum(r.seconds for r in replays.values())
    per = f", {seconds / len(replays) * 1000:.0f} ms a call" if replays else ""
    others = "".join(
        f", {counts[k]} {k.value}" for k in (ReplayOutcome.INCONCLUSIVE, ReplayOutcome.ARGUMENTS) if counts[k]
    )
    line = (
        f"{len(replays)} call(s) replayed on each side's own inputs in float64: "
        f"{counts[ReplayOutcome.CONFIRMED]} confirmed, {counts[ReplayOutcome.REFUTED]} refuted, "
        f"{counts[ReplayOutcome.NOT_REPLAYED]} not replayable{others} ({seconds:.1f} s{per})"
        + _refuted(run.refuted)
        + _unproven(d, counts[ReplayOutcome.CONFIRMED])
    )
    return f"{line}; {run.missed} call(s) not replayed: {BUDGET_RAN_OUT}" if run.missed else line


#: Refuted suspects named in the replay's line.
REFUTED_SHOWN = 3


def _refuted(calls: Sequence[str]) -> str:
    """The suspects the replay refuted (each side right on its own inputs): they drop from the list, and
    the line says which, so a verdict the report printed before is not lost without a word."""
    if not calls:
        return ""
    more = f" (+{len(calls) - REFUTED_SHOWN} more)" if len(calls) > REFUTED_SHOWN else ""
    return f"; refuted, no longer suspects: {', '.join(calls[:REFUTED_SHOWN])}{more}"


def _unproven(d: Diagnosis, confirmed: int) -> str:
    """With nothing confirmed, the calls the replay could not redo whose outputs differ between the runs,
    the most suspect first by the two dumps, and why: where a faulty kernel may still hide (an SDPA whose
    mask came as ``attn_mask=``, a keyword tensor the dump does not record, 5% off at step 1, was named
    nowhere)."""
    if confirmed:
        return ""
    blind = []
    for r in d.replays.values():
        evidence = d.calls.get(r.call)
        j = evidence.judgement if evidence is not None else None
        if r.outcome is ReplayOutcome.NOT_REPLAYED and j is not None and j.output_error > 0:
            blind.append((j.score if math.isfinite(j.score) else math.inf, r))
    if not blind:
        return ""
    blind.sort(key=lambda x: -x[0])
    more = f" (+{len(blind) - 2} more)" if len(blind) > 2 else ""
    named = "; ".join(
        f"{r.call}: {_said(r.npu)}" for _, r in blind[:2]
    )  # not replayed: the NPU side says why
    return f"; not replayable where the runs differ: {named}{more}"


# --- a suspect ------------------------------------------------------------------------------------


def kind_words(s: Suspect) -> str:
    """What it did, without the numbers: "introduces error"."""
    step = f"step {s.step}" if s.step is not None else "this step"
    return KIND_WORDS[s.kind].format(step=step)


def finding(s: Suspect) -> str:
    """What it did and the numbers: "introduces error — inputs …" (the replay's word first)."""
    replay = suspect_replay_text(s)
    if s.kind == Kind.REPLAYED:
        return f"{replay}; {evidence_text(s.evidence)}"
    head = f"{replay}; two dumps: " if replay else ""
    return f"{head}{kind_words(s)} — {evidence_text(s.evidence)}"


def suspect_text(s: Suspect) -> str:
    """The suspect in one line: ``CALL (direction): finding; called at file:line in function``."""
    site = s.site
    where = f"; called at {site.path}:{site.line} in {site.function}" if site else ""
    return f"{s.call} ({s.direction}): {finding(s)}{where}"


def _more(names: Sequence[str], shown: int = 3) -> str:
    """`` (+2 more)`` after the first ``shown`` of ``names``; nothing where they are all shown."""
    return f" (+{len(names) - shown} more)" if len(names) > shown else ""


def _entered_after(e: Entered) -> str:
    """Where error entering outside the dumped calls came in: after which call, and what the NPU run
    lacks before it."""
    if e.running:
        return "; a running statistic, which the calls that train the module update in place"
    after = (
        f"; it entered after {e.previous}" if e.previous else f"; it entered before the first {e.way} call"
    )
    if e.bench_only:
        return after + ", a call only the bench run makes (the NPU run has no counterpart)"
    if e.skipped:  # a line the NPU script lacks (a gradient's division) sits before it, not right before
        before = f"{', '.join(e.skipped[-3:])}{_more(e.skipped)}"
        return after + f"; before it the bench run makes {before}, which the NPU run does not"
    return after


def _written_words(c: WrittenChange) -> str:
    """What a call only one run makes did, up to its score: ``changes Tensor_mul__0_forward_input.0 in
    place (input.1: 0.9999) by 0.0001, allowed 2e-05``."""
    how = f" ({', '.join(f'{place}: {value}' for place, value in c.values)})" if c.values else ""
    scale = " (a scale: its max, min and norm move by one factor)" if c.scale else ""
    limit = f"{scale}, allowed {fmt_error(c.allowed)}"
    if c.in_place:
        return f"changes {c.tensor} in place{how} by {fmt_error(c.change)}{limit}"
    return f"makes {c.made} of {c.tensor}{how}, {fmt_error(c.change)} apart{limit}"


def arguments_text(values: Sequence[Argument]) -> str:
    """Non-tensor arguments the runs pass differently: ``approximate: 'tanh' against 'none'``."""
    return ", ".join(f"{a.place}: {a.npu} against {a.bench}" for a in values)


def _evidence_parts(e: Evidence) -> tuple[str, str, str]:
    """A finding's evidence in words as three parts: the words before its score, the score (``×12,728``,
    or ``""`` where it says none) and the words after it."""
    if isinstance(e, Judged):
        return (*judgement_parts(e.judgement), "")
    if isinstance(e, Entered):
        return (*judgement_parts(e.judgement), _entered_after(e))
    if isinstance(e, OnParameter):
        words, score = judgement_parts(e.judgement)
        also = f"; also {', '.join(e.others[:3])}{_more(e.others)}" if e.others else ""
        if e.agreed is not None:
            at, error, step = e.agreed
            also += (
                f"; their gradients agreed at step {at} ({fmt_error(error)}), so the optimizer's update "
                f"between steps {at} and {step} made them differ"
            )
        return f"{e.parameter}: {words}", score, also
    if isinstance(e, Written):
        return _written_parts(e)
    if isinstance(e, OneRunChange):
        return _changed_parts(e)
    if isinstance(e, StillRandom):
        words, score = judgement_parts(e.judgement)
        head = f"its draws differed at step {e.step}, and statistics cannot show that they still do"
        return f"{head} ({words}", score, ")"
    if isinstance(e, TwoDumps) and e.judgement is not None:
        words, score = judgement_parts(e.judgement)
        return f"the two dumps: {words}", score, ""
    if isinstance(e, OnOneRank):
        before, score, after = _evidence_parts(e.before)
        every = (
            f"every rank of its group of {e.group} (the size its shapes give)"
            if e.group is not None
            else f"all {len(e.peers) + 1} dumped ranks (its group's size is not recorded)"
        )
        peers = ", ".join(f"rank{r}" for r in e.peers)
        alone = (
            f"its inputs agree with the bench run's on {every}, its result differs on rank{e.rank} alone "
            f"({peers} match theirs)"
        )
        return before, score, f"{after}; {alone}"
    return _evidence_words(e), "", ""


def _written_parts(e: Written) -> tuple[str, str, str]:
    """A tensor a call only one run made wrote: the NPU's call (the suspect), or the bench's before the
    call that reads it."""
    wrote = "wrote" if e.wrote else "made"
    score = times_text(e.change.score)
    if e.npu:
        after = f"; {e.tensor}, the tensor it {wrote}, carries {fmt_error(e.carries)} against the bench's"
        return f"it {_written_words(e.change)}", score, after
    head = f"before it the bench run makes {e.call}, which the NPU run does not: it "
    after = f"; {e.tensor} carries {fmt_error(e.carries)} against the tensor it {wrote}"
    return head + _written_words(e.change), score, after


def _changed_parts(e: OneRunChange) -> tuple[str, str, str]:
    """``Functional_gelu_0_forward to Tensor___sub___0_forward have no counterpart in the bench run, which
    passes X on unchanged as Y; on the NPU they change it by 0.005, allowed 1e-06``, its score, and
    what the tensor carries."""
    j, one = e.judgement, e.first == e.call
    calls, they = (e.call, "it changes") if one else (f"{e.first} to {e.call}", "they change")
    change = f"by {fmt_error(j.output_error)}, allowed {fmt_error(j.allowed)}"
    after = f"; {e.tensor} carries {fmt_error(e.carries)} against the bench's"
    if e.npu:
        head = (
            f"{calls} {'has' if one else 'have'} no counterpart in the bench run, which passes {e.source} on "
            f"unchanged as {e.tensor}; on the NPU {they} it {change}"
        )
        return head, times_text(j.score), after
    head = (
        f"before it the bench run makes {calls}, which the NPU run does not: {they} {e.source}, which the "
        f"NPU run passes on unchanged as {e.tensor}, {change}"
    )
    return head, times_text(j.score), after


def _stats(values: tuple[float, ...]) -> str:
    return "[" + ", ".join(f"{v:.6g}" for v in values) + "]"


def _evidence_words(e: NpuOnly | Arguments | TwoDumps | Checksums | Undumped | Departs) -> str:
    """The evidence of the findings that say no score."""
    if isinstance(e, NpuOnly):
        j = e.judgement
        return (
            f"{e.call} has no counterpart in the bench run, and after it {e.tensor} carries "
            f"{fmt_error(j.output_error)} where nothing dumped before carried more than "
            f"{fmt_error(j.input_error)}"
        )
    if isinstance(e, Arguments):
        return arguments_text(e.values)
    if isinstance(e, TwoDumps):
        return f"the two dumps: {unjudged_text(e.why_not)}" if e.why_not is not None else "not judged"
    if isinstance(e, Checksums):
        text = f"{e.tensor}: checksum {e.npu} against {e.bench}; every input's checksum is equal"
        return f"{text}; its statistics agree within rounding: {BITS_NOT_HOW_FAR}" if e.statistics else text
    if isinstance(e, Undumped):
        return (
            f"its {e.tensor} is not dumped (the dumper records no complex tensor): outputs "
            f"{fmt_error(e.output_error)} may carry error that came in with it"
        )
    ranks = ", ".join(f"rank{r}" for r in e.peers)
    stats = f"statistics {_stats(e.mine)} against {_stats(e.theirs)}"
    if e.by_bench:
        return (
            f"{e.entry} departs from the other rank's result ({ranks}, which matches its bench run's): "
            + stats
        )
    return f"{e.entry} departs from the other ranks' result ({ranks} agree): {stats}"


def evidence_text(e: Evidence) -> str:
    """A finding's evidence in words: ``inputs 3e-07, outputs 0.24, allowed 4e-06: ×60,000``."""
    before, score, after = _evidence_parts(e)
    return f"{before}: {score}{after}" if score else before + after


def scored_evidence(s: Suspect) -> tuple[str, str]:
    """The suspect's evidence without its score, and the score (`` ×12,728``) where the evidence says
    the suspect's: the app's bar keeps the score beside the call's name and may cut the rest."""
    before, score, after = _evidence_parts(s.evidence)
    if score and score == times_text(s.score):
        return before + after, f" {score}"
    return evidence_text(s.evidence), ""


# --- a pair's verdict -----------------------------------------------------------------------------


#: Why rows fail and no call is named (the report's verdict and the app's bar say it alike).
NONE_INTRODUCES = "yet no call judged introduces an error beyond rounding"
#: Why no kernel is named where the runs' models, data or hyperparameters differ.
RUNS_DIFFER_FIRST = "runs differ before any kernel"
DIFFER_FIRST = f"the {RUNS_DIFFER_FIRST}"


# --- the runs' manifests ---------------------------------------------------------------------------

#: Names (parameters, modules, settings) listed of one kind of manifest difference, at most.
MANIFEST_SHOWN = 3
#: What the app's runs-differ texts call the manifests' differences (the report: its own line).
MANIFEST_DIFFER = "the runs' manifests differ"
#: A hyperparameter's key (after the optimizer's or scheduler's index) as it is said: the scheduler's
#: copies of the lr are the lr, said once.
_HYPER = {"parameters": "parameters optimized", "elements": "elements optimized"}
_LR_COPIES = ("initial_lr", "base_lrs", "_last_lr")
#: The optimizers' and schedulers' values, said together (the lr once), and an optimizer group's
#: counts of parameters and elements: the model's size, said with its modules.
_HYPERPARAMETERS, _SIZES = "hyperparameters", "sizes"
#: The kinds of numeric difference in the order they are said (how the runs were trained first). The
#: scripts' arguments are a note's: what an argument sets shows in these where it changes the numbers,
#: and two runs told apart by an argument (``npu``, ``bench``) do not differ before any kernel for it.
_SAID = (
    _HYPERPARAMETERS,
    fm.PARAMETERS,
    fm.BATCHES,
    fm.MODULES,
    _SIZES,
    fm.RNG,
    fm.FLAGS,
    fm.ENV,
    fm.VERSIONS,
)
#: A setting of each section, in words (``2 more environment variables differ``).
_SETTINGS = {fm.ENV: "environment variable", fm.FLAGS: "flag", fm.VERSIONS: "version", fm.ARGV: "argument"}
_RNG = {f"{fm.RNG}.torch_initial_seed": "torch seed"}
#: Where a run ran, as the note says it (:func:`ptdbg_tui.formats.manifest.numeric_key`: not numeric).
_WHERE = {
    "host.hostname": "host",
    "host.cwd": "working folder",
    "host.executable": "Python executable",
    "versions.python": "Python version",
    "argv.0": "script path",
}


def _manifest_value(value: fm.Scalar, present: bool) -> str:
    if not present:
        return "absent"
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    return one_line(value if isinstance(value, str) else repr(value), 80)


def _against(label: str, d: ManifestDifference) -> str:
    left, right = (_manifest_value(v, p) for v, p in zip((d.left, d.right), d.present, strict=True))
    return f"{one_line(label, 120)} {left} against {right}"


def _listed_names(names: Sequence[str]) -> str:
    shown = ", ".join(one_line(n, 120) for n in names[:MANIFEST_SHOWN])
    more = len(names) - MANIFEST_SHOWN
    return shown + (f" +{more} more" if more > 0 else "")


def _counted(names: Sequence[str], one: str, many: str) -> str:
    """``parameter fc.weight differs at start`` / ``2 parameters differ at start (fc.weight, fc.bias)``."""
    if len(names) == 1:
        return one.format(one_line(names[0], 120))
    return many.format(len(names)) + f" ({_listed_names(names)})"


def _hyperparameter(d: ManifestDifference) -> str:
    """``lr``, ``betas.0``, ``optimizer``: the key after the optimizer's group or the scheduler's state."""
    parts = d.key.split(".")
    rest = parts[4:] if parts[2:3] == ["groups"] else parts[3:] if parts[2:3] == ["state"] else parts[2:]
    name = ".".join(rest)
    if name.startswith(_LR_COPIES):
        return "lr"
    if name == "class":
        return "optimizer" if d.kind == fm.OPTIMIZERS else "scheduler"
    return _HYPER.get(name, name)


def _parameter(key: str) -> str:
    """The parameter of a ``parameters.<name>.<field>[.<index>]`` key (``fc.weight``)."""
    parts = key.split(".")[1:]
    while parts and parts[-1].isdigit():  # an item of its shape
        parts.pop()
    return ".".join(parts[:-1]) or key


def _manifest_kind(kind: str, found: Sequence[ManifestDifference]) -> list[str]:
    """One kind of numeric difference in words."""
    if kind in (_HYPERPARAMETERS, _SIZES):
        said = list(dict.fromkeys(_against(_hyperparameter(d), d) for d in found))  # the lr once
        more = len(said) - MANIFEST_SHOWN
        return said[:MANIFEST_SHOWN] + ([f"{more} more {kind} differ"] if more > 0 else [])
    if kind == fm.PARAMETERS:  # parameters.<name>.<checksum|shape|dtype>
        names = list(dict.fromkeys(_parameter(d.key) for d in found))
        return [_counted(names, "parameter {} differs at start", "{} parameters differ at start")]
    if kind == fm.BATCHES:
        batches = list(dict.fromkeys(d.key.split(".")[1] for d in found))
        many = f"batches {', '.join(batches)} differ"
        return [f"batch {batches[0]} differs" if len(batches) == 1 else many]
    if kind == fm.MODULES:
        names = [d.key.split(".", 1)[1] or "(the model)" for d in found]
        return [_counted(names, "module {} differs", "{} modules differ")]
    if kind == fm.RNG:
        seeds = [
            _against(_RNG.get(d.key, d.key.split(".", 1)[1]), d)
            for d in found
            if not d.key.endswith("_state")
        ]
        states = [d.key.split(".", 1)[1].removesuffix("_state") for d in found if d.key.endswith("_state")]
        return seeds + ([f"random state differs ({_listed_names(states)})"] if states else [])
    labels = [("argument " if kind == fm.ARGV else "") + d.key.split(".", 1)[1] for d in found]
    said = [_against(label, d) for label, d in zip(labels, found, strict=True)]
    more = len(said) - MANIFEST_SHOWN
    noun = _SETTINGS.get(kind, "setting")
    return said[:MANIFEST_SHOWN] + (
        [f"{more} more {noun}{'s differ' if more > 1 else ' differs'}"] if more > 0 else []
    )


def _said_as(m: ManifestDifference) -> str:
    """The kind a difference is said with: its section's, an optimizer's or a scheduler's values the
    hyperparameters, an optimizer's counts the model's size."""
    if m.kind not in (fm.OPTIMIZERS, fm.SCHEDULERS):
        return m.kind
    return _SIZES if m.kind == fm.OPTIMIZERS and _hyperparameter(m) in _HYPER.values() else _HYPERPARAMETERS


def manifest_text(d: Diagnosis) -> str:
    """Where the runs' manifests differ in what can change the numbers, each kind once, how the runs
    were trained first: ``lr 0.0003 against 0.0001; 2 parameters differ at start (fc.weight,
    fc.bias); batch 0 differs``; "" where they do not (or a run has no manifest)."""
    return differences_text(d.manifest)


def differences_text(differences: Sequence[ManifestDifference]) -> str:
    """:func:`manifest_text` of the manifests' differences themselves (the monitor's report too)."""
    parts: list[str] = []
    for kind in _SAID:
        found = [m for m in differences if m.numeric and _said_as(m) == kind]
        if found:
            parts += _manifest_kind(kind, found)
    return "; ".join(parts)


def _where(m: ManifestDifference) -> str:
    """A difference that changes no number, named: ``host``, ``script path``, ``argument 2 (a path)``."""
    if m.key in _WHERE:
        return _WHERE[m.key]
    if m.kind == fm.ARGV:
        return f"argument {one_line(m.key.split('.', 1)[1], 40)} (a path)"
    return one_line(m.key, 120)


def manifest_notes(d: Diagnosis) -> list[str]:
    """The report's notes on the manifests: a side's that could not be read, the scripts' arguments
    that differ, and where they differ in what changes no number (where a run ran, the script's path,
    an output folder)."""
    return differences_notes(d.manifest, d.manifest_unread)


def differences_notes(
    differences: Sequence[ManifestDifference], unread: Sequence[tuple[str, str]]
) -> list[str]:
    """:func:`manifest_notes` of the manifests' differences and the sides' unread manifests."""
    notes = [
        f"the {side} run's manifest was not read ({why}): the runs' manifests are not compared"
        for side, why in unread
    ]
    arguments = [m for m in differences if m.numeric and m.kind == fm.ARGV]
    if arguments:
        notes.append(
            f"the runs' scripts take other arguments: {'; '.join(_manifest_kind(fm.ARGV, arguments))}"
        )
    where = [m for m in differences if not m.numeric]
    if where:
        labels = dict.fromkeys(_where(m) for m in where)
        also = "also differ" if differences_text(differences) or arguments else "differ only"
        notes.append(f"the runs' manifests {also} where numerics do not: {', '.join(labels)}")
    return notes


#: What each sidecar's check does, which a sidecar that cannot be read leaves undone.
_UNREAD = {
    Sidecar.CALLS: "keyword arguments not compared",
    Sidecar.MODULES: "the culprit's module is not shown",
    Sidecar.STRUCTURE: "the runs' models not compared",
}


#: Where error entered after calls the NPU script lacks, in a note's words.
_BENCH_ONLY = "after calls only the bench run makes (the NPU run has no counterpart)"


def _earlier(n: StepNote) -> str:
    """The earlier step's culprit a step's note names: ``whose culprit, from its statistics, is CALL``."""
    how = ", from its statistics" if n.from_statistics else ""
    aside = f"{how}," if how else ""  # set off within the sentence
    if n.entered:  # error entering outside the dumped calls is no culprit: the call after it only shows it
        place = _BENCH_ONLY if n.bench_only else "outside the dumped calls"
        return f"where{aside} the error enters before {n.call}, {place}"
    return f"whose culprit{aside} is {n.call}"


def _step_note_text(n: StepNote) -> str:
    """What an earlier step says of this one's suspects, which the note takes the place of."""
    if n.kind is Carried.INHERITED:
        return f"parameters differ on entry to step {n.step}: inherited from step {n.origin}, {_earlier(n)}"
    if n.kind is Carried.STATE_INHERITED:
        return (
            f"the optimizer's state differs on entry to step {n.step} ({', '.join(n.names)}): inherited "
            f"from step {n.origin}, {_earlier(n)}"
        )
    if n.kind is Carried.NOISE:
        return (
            f"parameters differ on entry to step {n.step} by what the optimizer's update at step {n.origin} "
            f"({', '.join(n.names)}) made of gradient elements that are rounding noise on both sides, which "
            "named no suspect: an adaptive optimizer turns such noise into steps of full size; no kernel is "
            "at fault"
        )
    if n.kind is Carried.ROUNDING:
        gradient = fmt_error(n.gradient) if n.gradient is not None else "not compared"
        how = ", from its statistics" if n.from_statistics else ""
        return (
            f"parameters differ on entry to step {n.step} no more than their gradients differed at step "
            f"{n.origin} ({gradient}{how}), which named no suspect: the update carried that step's rounding"
        )
    if n.kind is Carried.NOT_DUMPED:
        return (
            f"parameters differ on entry to step {n.step}, the first step dumped ({', '.join(n.names[:3])}"
            f"{_more(n.names)}): the steps before it made them differ, and they are not dumped — an adaptive "
            "optimizer turns gradients that are rounding noise on both sides (an attention's key bias) into "
            f"steps of full size, or a fault there; dump step {(n.step or 1) - 1} to tell"
        )
    calls = ", ".join(f"{call} ({times_text(score)})" for call, score in n.scored)
    return (
        f"{calls} not named: from statistics, step {n.step} cannot tell a call's own error from what its "
        f"inputs carry from step {n.origin}, {_earlier(n)}"
    )


def note_text(n: Note) -> str:
    """A diagnosis' note in words: ``call sidecar not read (…): keyword arguments not compared``."""
    if isinstance(n, Unread):
        return f"{n.sidecar.value} not read ({n.reason}): {_UNREAD[n.sidecar]}"
    if isinstance(n, Autocast):
        npu, bench = (
            f"autocast to {dtype}" if dtype is not None else "no autocast" for dtype in (n.npu, n.bench)
        )
        return (
            f"the NPU run makes {n.calls} call{'s' if n.calls > 1 else ''} with {npu} where the bench "
            f"run has {bench} (the first {n.first}): a precision the scripts chose, judged by its rounding"
        )
    if isinstance(n, StepNote):
        return _step_note_text(n)
    return _amplified_text(n)


def _amplified_text(n: Amplified) -> str:
    """An update that amplified rounding noise, and the others found so by name."""
    flips = f"; {n.flips:,} of {n.elements:,} elements change sign" if n.flips else ""
    more = f" (+{len(n.others) - 3} more)" if len(n.others) > 3 else ""
    so_too = f"; so too {', '.join(n.others[:3])}{more}" if n.others else ""
    return (
        f"{n.call}: its update leaves {n.output} {fmt_error(n.error)} apart, where rounding and what came "
        f"in allow {fmt_error(n.allowed)}: its quotient divides {n.numerator}'s error "
        f"({fmt_error(n.numerator_error)}{flips}) by its denominator, and an adaptive optimizer (Adam, "
        "AdamW, Adagrad, RMSprop) turns gradient elements that are rounding noise on both sides into steps "
        f"of full size (allowed {fmt_error(n.with_it)} with that); no kernel is at fault{so_too}"
    )


def note_texts(d: Diagnosis) -> list[str]:
    """A diagnosis' notes in words, in order."""
    return [note_text(n) for n in d.notes]


def runs_differ_texts(d: Diagnosis) -> list[str]:
    """What differs between the runs before any kernel, the manifests first, as the app lists it."""
    manifest = manifest_text(d)
    return ([f"{MANIFEST_DIFFER}: {manifest}"] if manifest else []) + [runs_differ_text(x) for x in d.differ]


def no_operator_text(judged: int) -> str:
    """The all-clear's words (the app puts its mark before them)."""
    return f"No operator introduces an error beyond rounding ({judged:,} calls judged)"


def not_judged_text(compared: int) -> str:
    """Rows compared, but no call judged."""
    return f"{compared:,} rows compared, but no call has both inputs and outputs compared: no verdict."


def verdict_text(d: Diagnosis) -> str:
    """One line: the culprit, or what was found instead."""
    if d.fault:
        return f"No verdict: the diagnosis failed ({d.fault}); the rows are compared in the CSV."
    if not d.compared:
        return "Nothing was compared: no verdict."
    if not d.judged:
        return not_judged_text(d.compared)
    if not d.suspects:
        if d.failing:
            why = f": {unexplained_text(d.unexplained)}" if d.unexplained else "."
            return f"{entries_fail(d.failing, d.errors)}, {NONE_INTRODUCES} ({d.judged:,} calls judged){why}"
        but = f"; {DIFFER_FIRST} (runs differ, above)" if d.differ else ""
        undumped = [n for n in d.notes if isinstance(n, StepNote) and n.kind is Carried.NOT_DUMPED]
        if undumped:
            step = undumped[0].step
            but += f"; parameters differ on entry to step {step}, from steps not dumped (note below)"
        return f"{no_operator_text(d.judged)}{but}."
    more = len(d.suspects) - 1
    tail = f" (+{more} more suspect{'s' if more > 1 else ''})" if more else ""
    return f"Culprit: {suspect_text(d.suspects[0])}{tail}"


def named_text(d: Diagnosis) -> str:
    """``, 2 calls named``: the calls the diagnosis names, after the original's counts (a kernel 2% off
    passes its thresholds: "0 failed" alone reads as all clear); nothing when it names none, so that
    the line keeps its form where there is nothing to add."""
    named = len({s.call for s in d.suspects})
    return f", {named} call{'s' if named > 1 else ''} named" if named else ""


#: Suspects listed in the report after the culprit (all of them go to suspects_<ts>.csv).
REPORT_SUSPECTS = 5


def diagnosis_lines(d: Diagnosis, module: str = "", step: int | None = None) -> list[str]:
    """The report's diagnosis: what differs between the runs before any kernel, the culprit (with the
    ``module`` it ran in and its source line, as the app shows them, and the ``step`` of a whole run it
    was made in) and the next suspects with their evidence, or the verdict."""
    manifest = manifest_text(d)
    lines = [f"  {RUNS_DIFFER_FIRST}: {manifest}"] if manifest else []
    lines += [f"  runs differ: {runs_differ_text(x)}" for x in d.differ] + [f"  {verdict_text(d)}"]
    site = d.culprit.site if d.culprit else None
    if step is not None:
        lines.append(f"    step: {step}")
    if module:
        lines.append(f"    module: {module}")
    if site is not None and site.source:
        lines.append(f"    source: {site.source.strip()}")
    for k, s in enumerate(d.suspects[1 : REPORT_SUSPECTS + 1], start=2):
        lines.append(f"    suspect {k} ({s.direction}): {s.call}: {finding(s)}")
    if len(d.suspects) > REPORT_SUSPECTS + 1:
        lines.append(f"    … {len(d.suspects) - REPORT_SUSPECTS - 1} more suspects")
    lines += [f"  note: {n}" for n in [*manifest_notes(d), *note_texts(d)]]
    if d.replay is not None:
        lines.append(f"  replay: {replay_run_text(d)}")
    if d.original:
        lines.append(f"  original advisor (first No row): {d.original}")
    return lines


def summary_text(o: PairReport) -> str:
    """The short report of one pair: counts, culprits (and whether its culprit only receives another
    rank's error), skipped lines, the files written."""
    c = o.counts()
    mode = "checksums" if mode_of(o.rows, o.summary) == MD5 else "statistics only" if o.summary else "tensors"
    noise = sum(1 for r in o.rows if r.noise and not r.matched)
    own = f" ({noise} of them the other tool's own: detach calls, calls inside the backward)"
    of_them = own if noise else ""
    lines = [
        f"{o.label} ({mode}): {len(o.rows)} rows: {c[Status.PASS]} passed, {c[Status.FAIL]} failed, "
        f"{c[Status.WARN]} warnings, {c[Status.UNMATCHED]} unmatched{of_them}, {c[Status.ERROR]} errors"
        + ("" if o.no_verdict is not None else named_text(o.diagnosis))
    ]
    if o.no_verdict is not None:  # said first: the counts above hold, but they say nothing about the NPU run
        lines.append(f"  No verdict: {no_verdict_text(o.no_verdict)}")
    if o.match_note is not None:
        lines.append(f"  matching: {o.match} — {auto_aligned_text(o.match_note)}")
    if o.no_verdict is None:
        lines += diagnosis_lines(o.diagnosis, o.culprit_module, o.culprit_step)
    lines += [f"  note: {n}" for n in _pair_notes(o, c)]
    for side, bad in zip(("NPU", "bench"), o.bad_lines, strict=True):
        if bad:
            where = f"line {bad[0].line}: " if bad[0].line else ""
            lines.append(
                f"  {side} dump: {len(bad)} unreadable line(s) or entries skipped, first: "
                f"{where}{unreadable_text(bad[0].reason)}"
            )
    if o.csv is not None:
        lines.append(f"  CSV: {o.csv}")
        lines.append(f"  suspects: {suspects_path(o.csv)}")
    if o.advisor is not None:
        lines.append(f"  advisor: {o.advisor}")
    culprit = o.diagnosis.culprit
    if culprit is not None and culprit.confirmed and o.csv is not None:
        # the handoff: the command that writes the confirmed kernel's standalone repro beside the CSV
        folder = o.csv.parent / repro_folder(culprit.call, o.npu.label)
        lines.append(
            f"  repro: ptdbg-tui repro {shlex.quote(str(o.npu.records))} {shlex.quote(culprit.call)} "
            f"-o {shlex.quote(str(folder))}"
        )
    return "\n".join(lines)


def _pair_notes(o: PairReport, counts: Counter[Status]) -> list[str]:
    """Whether the culprit only receives another rank's error, whether one run's dump ends before the
    other's (the unmatched count alone hides a run cut short), and why a culprit stands beside
    "0 failed"."""
    received = o.diagnosis.received
    notes = [received_text(received)] if received is not None and o.no_verdict is None else []
    if (tail := ended_early(o.rows)) is not None:
        notes.append(tail_text(tail))
    culprit = o.diagnosis.culprit
    if (
        culprit is not None
        and math.isfinite(culprit.score)
        and not counts[Status.FAIL] + counts[Status.ERROR]
    ):
        notes.append(
            "no row fails the original's thresholds (Accuracy Reached or Not), which pass an error of "
            f"{fmt_error(culprit.judgement.output_error)}; the culprit is named because that is "
            f"{times_text(culprit.score)} what is allowed there (rounding, and error that came in)"
        )
    return notes


# --- across ranks ---------------------------------------------------------------------------------


def received_text(r: Received) -> str:
    """That a rank's first suspect only receives the error the first divergent rank made."""
    source = f"{r.first}, {r.first_call}"
    if not r.entered:
        return f"{r.rank} receives the error through {r.call}: the first divergent rank is {source}"
    if r.own:
        return (
            f"{r.rank}: the error enters before {r.call}, outside the dumped calls: this rank's own "
            f"error from an earlier step, {source}"
        )
    return (
        f"{r.rank} receives the error before {r.call}, outside the dumped calls (a collective no hook "
        f"saw): the first divergent rank is {source}"
    )


def rank_text(v: RankVerdict) -> str:
    """A rank's verdict: its first suspect, or that it receives the error."""
    if v.suspect is None:
        return f"{v.name}: no suspect"
    if v.suspect.kind == Kind.ENTERS:
        return f"{v.name}: the error enters outside the dumped calls, before {v.suspect.call}"
    if v.received:
        return f"{v.name}: receives the error through {v.suspect.call}"
    return f"{v.name}: {suspect_text(v.suspect)}"


def rank_headline(c: CrossRank) -> str:
    """The report line: ``first divergent rank: rankR (stepS): <suspect>``, or why there is none."""
    if c.first is not None:
        assert c.first.suspect is not None
        return f"first divergent rank: {c.first.name}: {suspect_text(c.first.suspect)}"
    v = c.shows_first
    if v is not None:
        call = v.suspect.call if v.suspect else "?"
        where = f"in {call} on {v.name}"
        why = f" (the collective itself, or a rank not dumped{_group(c, v)})"
        if v.suspect is not None and v.suspect.kind == Kind.ENTERS:  # seen in no dumped call: no collective
            where = f"before {call} on {v.name}, outside the dumped calls"
            why = " (a collective no hook saw, code not dumped, or a rank not dumped)"
        return (
            f"first divergent rank: none of the dumped ranks makes an error of its own; it first "
            f"shows {where}{why}"
        )
    return "first divergent rank: none (no rank has a suspect)"


def _group(c: CrossRank, v: RankVerdict) -> str:
    """How many ranks the collective ``v`` shows the error in has and how many of them are compared
    (``"; its group has 4 ranks, by its shapes, 2 of them compared"``), where its shapes tell."""
    group = group_size(v.view.rows, v.suspect.call) if v.suspect is not None else None
    if group is None:
        return ""
    compared = sum(1 for u in c.verdicts if u.view.step == v.view.step)
    return f"; its group has {group} ranks, by its shapes, {compared} of them compared"


def rank_summary(c: CrossRank) -> tuple[str, ...]:
    """The headline and the bits that differ before it, without the indent: what the app shows of the
    verdict across ranks (the report's lines but each rank's own)."""
    return (rank_headline(c), *(line.strip() for line in bits_lines(c)))


def rank_lines(c: CrossRank) -> list[str]:
    """The headline, the bits that differ before it, and each rank's verdict, for the report."""
    return [rank_headline(c), *bits_lines(c), *(f"  {rank_text(v)}" for v in c.verdicts)]


def rank_notice(c: CrossRank) -> str:
    """The live app's notice of a new cross-rank verdict: the headline, and where only checksums differ
    before it (the overview has all)."""
    return "\n".join(
        sentence(t) for t in (rank_summary(c)[0], *(f"{w} (o: overview)" for w in bits_where(c)))
    )


def bits_where(c: CrossRank) -> list[str]:
    """Each call whose checksums alone differ before the first divergent rank's values, and on which
    ranks (``"before it, checksums alone differ: CALL on rank0 (step0), …"``): the start of each of
    :func:`bits_lines`, short enough for a notice."""
    return [
        f"before it, checksums alone differ: {call} on {', '.join(names)}"
        for call, names in c.bits_where().items()
    ]


def bits_lines(c: CrossRank) -> list[str]:
    """Where checksums alone differ before the first divergent rank's values: the first difference in
    bits, which the headline passes over, and what a checksum cannot tell."""
    return [
        f"  {where} — its output's bits, not its statistics: {BITS_NOT_HOW_FAR} (two devices' kernels "
        "differ bitwise; on one device it is nondeterminism)"
        for where in bits_where(c)
    ]


# --- the export's column ---------------------------------------------------------------------------

#: The export's last column: each row's part in the diagnosis.
VERDICT_COLUMN = "Diagnosis"


def verdict_column(rows: Sequence[Row], diagnosis: Diagnosis | None) -> Column:
    """Our verdict on each row, as the suspects file ranks it: ``culprit: introduces error ×1,240`` on
    every row of the culprit's call, ``suspect 2: …`` on the next one's, empty elsewhere. Its
    ``Accuracy Reached or Not`` may be ``Yes``: the original's thresholds pass a 2% error."""
    said: dict[str, str] = {}
    for k, s in enumerate(diagnosis.suspects if diagnosis is not None else ()):
        said.setdefault(s.call, f"{suspect_name(k)}: {kind_words(s)} {times_text(s.score)}")
    return VERDICT_COLUMN, [said.get(r.record.call, "") for r in rows]


# --- one dump's non-finite origin (ptdbg-tui check) -------------------------------------------------


def nonfinite_text(f: NonFinite) -> str:
    """``output.0 has 12 Inf``; from statistics alone, ``output.0's max is inf``."""
    if f.nan is not None and f.inf is not None:
        counts = [f"{n} {word}" for n, word in ((f.nan, "NaN"), (f.inf, "Inf")) if n]
        return f"{one_line(f.entry)} has {' and '.join(counts)}"
    stats = ", ".join(f"{name} is {value}" for name, value in f.stats)
    return f"{one_line(f.entry)}'s {stats}"


def _dtype(dtype: str) -> str:
    return one_line(dtype.removeprefix("torch."))


def origin_replay_text(r: OriginReplay) -> str:
    """What the float64 replay says of the origin's non-finite output."""
    dtype = _dtype(r.dtype)
    if r.outcome is Overflow.OVERFLOW:
        beyond = f", beyond {dtype}'s {r.limit:g}" if r.limit is not None else f", beyond {dtype}'s range"
        return (
            f"overflow — the float64 result reaches {r.largest:.3g}{beyond}: the values exceed the dtype's "
            "range (loss scaling, or a range problem), the kernel is right"
        )
    if r.outcome is Overflow.KERNEL_WRONG:
        within = f", within {dtype}'s range" if r.limit is not None else ""
        return (
            f"kernel wrong on its inputs — the float64 result is finite (max {r.largest:.3g}){within}, "
            "yet the dump's output is not"
        )
    return (
        "not the kernel — the float64 result is NaN too: its inputs lie outside the function's domain "
        "(a log of a negative, 0/0), look at where they come from"
    )


def check_lines(label: str, origin: NonFiniteOrigin | None, bad: Sequence[BadLine] = ()) -> list[str]:
    """The report of ``ptdbg-tui check`` on the dump ``label``: its non-finite origin, the module and
    source line it ran at, and the replay's word (or ``No non-finite value in …``)."""
    lines: list[str] = []
    if origin is None:
        lines.append(f"No non-finite value in {one_line(label)}")
    else:
        call = f"{one_line(origin.call)} ({origin.direction})"
        found = ", ".join(nonfinite_text(f) for f in origin.found)
        if origin.kind is OriginKind.DATA:
            lines.append(
                f"Non-finite origin: the data, before any dumped call: {call}: {found} on entry, made by "
                "no dumped call"
            )
        else:
            lines.append(f"Non-finite origin: {call}: {found}, inputs finite")
        if origin.module:
            lines.append(f"    module: {one_line(origin.module)}")
        site = origin.site
        if site is not None:
            code = f"  {one_line(site.source.strip())}" if site.source else ""
            lines.append(f"    source: {one_line(site.path)}:{one_line(site.line)}{code}")
        if origin.kind is OriginKind.KERNEL:
            why = why_not_text(origin.not_replayed) if origin.not_replayed is not None else ""
            replay = origin_replay_text(origin.replay) if origin.replay else f"not replayed: {one_line(why)}"
            lines.append(f"    replay: {replay}")
    if bad:
        where = f"line {bad[0].line}: " if bad[0].line else ""
        first = f"{where}{one_line(unreadable_text(bad[0].reason))}"
        lines.append(f"  note: {len(bad)} unreadable line(s) or entries skipped, first: {first}")
    return lines


def check_walk_lines(
    label: str, found: Sequence[tuple[str, NonFiniteOrigin | None, Sequence[BadLine]]], dumps: int, steps: int
) -> list[str]:
    """The report of ``ptdbg-tui check`` on ``label`` walked step by step (``found``: each dump, by its
    label, of the first step holding a non-finite value): one dump's report as :func:`check_lines` says
    it; for several, which step first, then each of its dumps' reports."""
    if dumps == 1:
        return check_lines(label, found[0][1], found[0][2]) if found else check_lines(label, None)
    what = f"{dumps} dumps, {steps} step{'s' if steps != 1 else ''} read"
    if not found:
        return [f"No non-finite value in {one_line(label)} ({what})"]
    lines = [f"First dump with a non-finite value: {one_line(found[0][0])} ({what})"]
    for dump, origin, bad in found:
        lines += [f"{one_line(dump)}:", *check_lines(dump, origin, bad)]
    return lines


#: Each side of a pair as the notes name it.
SIDE_WORDS = {Side.NPU: "NPU", Side.BENCH: "bench"}


def tensor_dir_text(p: TensorDirProblem) -> str:
    """What looks wrong with a dump's tensor data folder."""
    if isinstance(p, NoTensorDir):
        return f"no npy folder {p.folder}/ next to {p.records} (found {', '.join(p.found)}/)"
    if isinstance(p, TensorDirUnreadable):
        return f"npy folder {p.reason}"
    return f"npy folder {p.path} is {p.kind}, not a folder"


def statistics_only_text(s: StatisticsOnly) -> str:
    """Why a pair compares statistics only where that looks unintended."""
    notes = [f"{SIDE_WORDS[side]}: {tensor_dir_text(p)}" for side, p in s.folders]
    if s.bare is not None:
        notes.append(
            f"the {SIDE_WORDS[s.bare]} dump holds no tensors (it has no data folder {s.missing}) "
            "and the other does"
        )
    return "; ".join(notes)


def same_dump_text(s: SameDump) -> str:
    """Both sides are one dump file: why no row says anything of the NPU run."""
    return (
        f"the NPU and bench dumps are the same file ({s.path}): each row is compared with itself, "
        "so every row passes"
    )


def _steps_text(steps: Sequence[int | None]) -> str:
    """The steps of one side's dumps; a dump without a ``stepN`` folder (dumped without ``--step``)
    as ``none``, not Python's ``None``."""
    return "[" + ", ".join("none" if s is None else str(s) for s in steps) + "]"


def _steps_hint(npu: Sequence[int | None], bench: Sequence[int | None], step: int | None) -> str:
    """Why steps could not pair, where one side has no ``stepN`` folder at all."""
    flat = [role for role, steps in (("NPU", npu), ("bench", bench)) if tuple(steps) == (None,)]
    if not flat or (step is None and len(flat) == 2):
        return ""
    sides = "both dumps have" if len(flat) == 2 else f"the {flat[0]} dump has"
    if step is not None:
        return f": {sides} no stepN folder (dumped without --step), so --step {step} selects nothing there"
    return f": {sides} no stepN folder (dumped without --step) and the other has: dump both sides alike"


def unpaired_text(u: Unpaired) -> str:
    """A dump no pair holds, or why no pair formed."""
    if isinstance(u, NoPairs):
        want = "".join(f" {k} {v}" for k, v in (("step", u.step), ("rank", u.rank)) if v is not None)
        return (
            f"no NPU and bench rank dumps pair up{want and ' for' + want} "
            f"(NPU: steps {_steps_text(u.npu_steps)}, ranks {list(u.npu_ranks)}; "
            f"bench: steps {_steps_text(u.bench_steps)}, ranks {list(u.bench_ranks)})"
            + _steps_hint(u.npu_steps, u.bench_steps, u.step)
        )
    if isinstance(u, Shadowed):
        return (
            f"{SIDE_WORDS[u.side]} {u.label} in {u.rank_dir}: not compared, as {u.twin} has the "
            f"same step and rank and is compared"
        )
    if isinstance(u, OneSided):
        other = SIDE_WORDS[Side.BENCH if u.side is Side.NPU else Side.NPU]
        return f"{SIDE_WORDS[u.side]} {u.label}: no {other} dump for it"
    if isinstance(u, RankOnly):
        return (
            f"rank {u.rank} only, of the NPU dump's ranks {list(u.ranks)}: the error may begin on another "
            f"rank (compare without --rank to find the first divergent one)"
        )
    return (
        f"the NPU dump holds {len(u.npu)} ranks {list(u.npu)} and the bench dump {len(u.bench)} "
        f"{list(u.bench)}: jobs of different sizes differ by design (each rank's data, the gradients' "
        f"average); only ranks on both sides are compared"
    )


#: How many pairs a note names before ``and N more``.
NOTE_PAIRS = 3

#: What a replay does where two dumps cannot name a kernel (``{what}``: what it re-runs).
REPLAY_CAN = (
    "re-runs {what} in float64 on each side's own recorded inputs, which can prove one wrong (needs torch)"
)

#: Where two dumps cannot name a kernel and a replay can, in words that hold for the pair.
UNDECIDED_WORDS = {
    Undecided.FAILING: "rows fail where the inputs already differ, and no kernel is named",
    Undecided.PARAMETERS: "parameters differ on entry, and no kernel is named",
}


def replay_key_text(u: Undecided) -> str:
    """The app's note on a pair that a replay of every call can decide (its key ``r``)."""
    return f"{UNDECIDED_WORDS[u]}: r on a call {REPLAY_CAN.format(what='it')}"


def labels_text(labels: Sequence[str]) -> str:
    """Pairs named in a note: the first few, and how many more."""
    more = f" and {len(labels) - NOTE_PAIRS} more" if len(labels) > NOTE_PAIRS else ""
    return f"{', '.join(labels[:NOTE_PAIRS])}{more}"


def no_verdict_text(n: NoVerdict) -> str:
    """Why a pair's rows say nothing about the NPU run."""
    if isinstance(n, SameDump):
        return same_dump_text(n)
    return f"the {SIDE_WORDS[n.side]} dump file {n.records} holds no entries"


def repeated_text(r: RepeatedNames) -> str:
    """Entry names that repeat in one dump: how many, the first, where."""
    where = (
        f"lines {r.lines[0]} and {r.lines[1]}" if r.lines else f"entries {r.entries[0]} and {r.entries[1]}"
    )
    more = f" (+{r.count - 1} more)" if r.count > 1 else ""
    return (
        f"{r.count} duplicate entry name(s): {short(r.name, 80)} at {where}{more}; each is a row of its own"
    )


def _on_pair_text(what: StatisticsOnly | NoVerdict | Repeated | NotCompared) -> str:
    if isinstance(what, StatisticsOnly):
        return f"statistics only — {statistics_only_text(what)}"
    if isinstance(what, Repeated):
        return f"{SIDE_WORDS[what.side]} dump {what.records}: {repeated_text(what.repeats)}"
    if isinstance(what, NotCompared):
        why = "no worker of the cluster can read both its folders" if what.fault is None else what.fault
        return f"not compared — {why}"
    return no_verdict_text(what)


def job_note_text(n: JobNote) -> str:
    """A job's note in words (the report's ``note:`` lines, the app's notices)."""
    if isinstance(n, OnPair):
        return f"{n.pair}: {_on_pair_text(n.what)}"
    if isinstance(n, ScanProblem):
        return f"{SIDE_WORDS[n.side]}: {layout_problem_text(n.problem)}"
    if isinstance(n, ContextFailed):
        return f"the verdict across ranks and steps failed: {n.fault}"
    if isinstance(n, ReplayCould):
        said = (
            "no kernel is named where the inputs already differ"
            if n.said is None
            else UNDECIDED_WORDS[n.said]
        )
        return f"{labels_text(n.labels)}: {said}; --replay " + REPLAY_CAN.format(
            what="the calls up to the first failing row"
        )
    if isinstance(n, NotReplayed):
        return f"not replayed ({n.why}): the suspects of {labels_text(n.labels)} stand on the two dumps alone"
    return unpaired_text(n)


#: Modules (or parameters) a finding of runs that differ names, at most.
SHOWN = 3


def _modules_only_text(m: ModulesOnly) -> str:
    side, other = ("bench", "NPU run") if m.side is Side.BENCH else ("NPU run", "bench")
    shown = ", ".join(f"{q} ({c})" for q, c in m.modules[:SHOWN])
    more = f" and {len(m.modules) - SHOWN} more" if len(m.modules) > SHOWN else ""
    counts = "".join(f" ({p}: {a} on the {side}, {b} on the {other})" for p, a, b in m.counts)
    return f"the {side} has {shown}{more}, the {other} does not{counts}"


def _shapes_text(shapes: Sequence[ShapeDiffers]) -> list[str]:
    """Parameters of other shapes, the first few."""
    out = [
        f"{s.name if s.call is None else f'{s.name} of {s.call}'} {list(s.npu)} against {list(s.bench)}"
        for s in shapes[:SHOWN]
    ]
    more = len(shapes) - SHOWN
    return out + ([f"{more} more parameter{'s' if more > 1 else ''} of other shapes"] if more > 0 else [])


def _values_against(values: Sequence[tuple[str, float, float]]) -> str:
    return ", ".join(f"{name} {a:.4g} against {b:.4g}" for name, a, b in values)


def runs_differ_text(x: RunsDiffer) -> str:
    """One thing that differs between the runs before any kernel (the report's ``runs differ:`` lines)."""
    if isinstance(x, ModelsDiffer):
        parts = [_modules_only_text(m) for m in x.only]
        parts += [f"{c.module} is a {c.npu} against a {c.bench}" for c in x.classes[:SHOWN]]
        return "the runs' models differ: " + "; ".join(parts + _shapes_text(x.shapes))
    if isinstance(x, HyperparametersDiffer):
        return f"the runs pass different hyperparameters: {_values_against(x.values)}"
    if isinstance(x, DataShapes):
        data = f"is {list(x.npu)} against {list(x.bench)}"
    else:
        data = f"is {fmt_error(x.error)} apart" + (f" ({_values_against(x.stats)})" if x.stats else "")
    return f"the runs pass different data: {x.name}, the model's first input, {data}"


def no_fault_text(d: Diagnosis) -> str:
    """Why a pair whose entries fail has no suspect, as the CLI's report says it (the app's overview):
    what another step or rank says of it (parameters that differ on entry), else where its first
    failure is and why no call is at fault there; or that there is no verdict."""
    if not d.judged or d.fault:
        return verdict_text(d)
    return "no call at fault: " + (
        note_text(d.notes[0])
        if d.notes
        else unexplained_text(d.unexplained)
        if d.unexplained
        else "the error is inherited"
    )


def overview_suspect_text(call: str, module: str, *, enters: bool, receives: bool) -> str:
    """A pair's first suspect in the overview: its call and module, and where it is not the pair's own
    error, how the error came (``enters``: before the call, from outside the dumped calls;
    ``receives``: through the call, from another rank)."""
    name = call + (f" · {module}" if module else "")
    if enters:
        return f"enters before {name}"
    return f"receives via {name}" if receives else name


def overview_more_text(suspect: str, suspects: int) -> str:
    """The overview's suspect cell: how many more suspects first (long names are cut), then the first."""
    return (f"(+{suspects - 1}) " if suspects > 1 else "") + suspect


def overview_differ_text(differ: str, suspect: str, suspects: int) -> str:
    """The overview's suspect cell where the runs differ before any kernel: that first, then the
    suspect."""
    return f"runs differ: {differ}" + (f" · {overview_more_text(suspect, suspects)}" if suspect else "")


class JobReport(Protocol):
    """What a job's report is said from (the engine's ``Outcomes``): its pairs, the verdict across
    ranks, its notes, and the cluster that ran it."""

    def __iter__(self) -> Iterator[PairReport]: ...
    @property
    def several_ranks(self) -> bool: ...
    @property
    def ranks(self) -> CrossRank: ...
    @property
    def notes(self) -> Sequence[JobNote]: ...
    @property
    def cluster(self) -> str | None: ...
    @property
    def placements(self) -> Mapping[str, int]: ...


def cluster_lines(job: JobReport) -> list[str]:
    """Where the work ran: Dask tasks per worker."""
    if job.cluster is None:
        return []
    total = sum(job.placements.values())
    per = ", ".join(f"{w}: {n:,}" for w, n in sorted(job.placements.items()))
    return [f"cluster {job.cluster}: {total:,} Dask tasks on {len(job.placements)} worker(s) ({per})"]


def job_report_text(job: JobReport) -> str:
    """The whole report: each pair, (several pairs) the cross-rank verdict, the notes, the cluster."""
    lines = [summary_text(o) for o in job]
    if job.several_ranks:
        lines += rank_lines(job.ranks)
    lines += [f"note: {job_note_text(n)}" for n in job.notes]
    return "\n".join(lines + cluster_lines(job))


def replay_report_lines(
    job: Iterable[PairReport], done: Mapping[str, Mapping[str, CallReplay]], csv: Path
) -> list[str]:
    """``ptdbg-tui replay``'s report: each pair's replay and each call's outcome, and the CSV written."""
    lines = [
        line
        for o in job
        for line in (
            f"{o.label}: {replay_run_text(o.diagnosis)}",
            *(f"  {call}: {replay_text(r)}" for call, r in done.get(o.label, {}).items()),
        )
    ]
    return [*lines, f"CSV: {csv}"]


def _inherited_text(diagnoses: Iterable[Diagnosis]) -> str:
    """What other steps or ranks say of the pairs (parameters or an optimizer's state that differ on
    entry, an earlier step's error): an all-clear of this step's operators must not hide it."""
    notes = [n for d in diagnoses for n in note_texts(d)]
    if not notes:
        return ""
    return sentence(notes[0]) + (f" (+{len(notes) - 1} more)" if len(notes) > 1 else "")


def no_culprit_texts(
    diagnoses: Mapping[str, Diagnosis],
    labels: Mapping[str, str],
    alike: set[str],
    counts: Mapping[Status, int],
    *,
    done: bool,
    lacking: str,
    caveat: str,
) -> list[str]:
    """The app's verdict where no pair has a suspect: never an all-clear unless every pair had rows of
    both sides compared and calls judged, its sides are two dumps (not one file twice), and no entry
    fails. All but a last optional text must stay on screen. ``diagnoses`` and ``labels`` by pair,
    ``alike``: the pairs whose sides are one dump file, ``counts``: the rows by status, ``done``: nothing
    left to compare, ``lacking``: what the sides lack, ``caveat``: what a verdict does not cover."""
    if not done or not labels:
        if lacking:
            return [f"No verdict: {lacking}"]
        return ["Diagnosis: waiting for results…" if not done else "Nothing to compare yet: no verdict."]
    same = [labels[key] for key in alike]
    if len(alike) == len(labels):  # every row equals itself: that says nothing about the NPU run
        return [
            "No verdict: the NPU and bench dumps are the same file",
            "each row is compared with itself",
            "",
        ]
    missing = [
        label
        for key, label in labels.items()
        if key not in alike and (key not in diagnoses or not diagnoses[key].judged)
    ]
    judged = sum(d.judged for key, d in diagnoses.items() if key not in alike)
    compared = sum(d.compared for key, d in diagnoses.items() if key not in alike)
    failing = counts[Status.FAIL] + counts[Status.ERROR]
    differ = any(d.differ for d in diagnoses.values())  # a manifest's difference is said, not a verdict
    if judged and not missing and failing:  # e.g. entries paired across a shifted call: not judged
        inherited = _inherited_text(diagnoses.values())  # first: what explains the failures
        why = f"no kernel is named: {DIFFER_FIRST}" if differ else NONE_INTRODUCES
        texts = [
            f"{entries_fail(failing, counts[Status.ERROR])} (n: next failure)",
            (f"{inherited}; " if inherited else "") + f"{why} ({judged:,} judged)",
        ]
    elif judged and not missing and not same and differ:
        texts = [f"No kernel is named: {DIFFER_FIRST} ({judged:,} calls judged)"]
    elif judged and not missing and not same:
        texts = [
            f"{Status.PASS.symbol} {no_operator_text(judged)}.",
            _inherited_text(diagnoses.values()),
            caveat,
        ]  # the caveat may wrap
    elif judged:
        gaps = ([f"{', '.join(missing)} (nothing compared there)"] if missing else []) + (
            [f"{', '.join(same)} (the same dump on both sides)"] if same else []
        )
        texts = [f"No suspect in {judged:,} calls judged; no verdict for {'; '.join(gaps)}."]
    elif compared:
        texts = [not_judged_text(compared)]
    else:
        texts = [f"No verdict: {lacking}" if lacking else "Nothing compared: no verdict."]
    replays = [text for d in diagnoses.values() if (text := replay_run_text(d))]
    originals = [d.original for d in diagnoses.values() if d.original]
    original = f"original: first No row {originals[0]}" if originals else ""
    last = f"replay: {replays[0]}" if replays else original
    return [*filter(None, texts), last]


# --- the live engine: its sides, its replays, its notices --------------------------------------------


class LiveSide(Protocol):
    """One side's path as the live engine last saw it (the engine's ``SideStatus``)."""

    @property
    def role(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def found(self) -> bool: ...
    @property
    def waiting(self) -> bool: ...
    @property
    def detail(self) -> str: ...
    @property
    def writing(self) -> bool: ...
    @property
    def problems(self) -> tuple[str, ...]: ...


class LiveProgress(Protocol):
    """What the sides' words read of the live engine's progress (the engine's ``Progress``)."""

    @property
    def npu_seen(self) -> int: ...
    @property
    def bench_seen(self) -> int: ...
    @property
    def pairs(self) -> int: ...
    @property
    def watching(self) -> str: ...
    @property
    def npu(self) -> LiveSide | None: ...
    @property
    def bench(self) -> LiveSide | None: ...
    @property
    def unpaired(self) -> tuple[Unpaired, ...]: ...
    @property
    def faults(self) -> tuple[str, ...]: ...


def short_path(path: str, parts: int = 2) -> str:
    """The last ``parts`` components of a path (``…/dumps/cpuu``)."""
    p = Path(path)
    tail = p.parts[-parts:]
    return str(Path(*tail)) if len(p.parts) <= parts else "…/" + str(Path(*tail))


def side_detail_text(status: LiveSide) -> str:
    """Why a side has no dump (``""`` where it has one): its folder is awaited, or the scan's reason."""
    return f"waiting for {status.path} to appear" if status.waiting else status.detail


def side_notice_text(status: LiveSide) -> str:
    """A side's lack as a notice: ``bench: waiting for … to appear`` (``""`` where it lacks nothing)."""
    detail = side_detail_text(status)
    return f"{status.role}: {detail}" if detail else ""


def side_progress_text(status: LiveSide | None, seen: int, watching: bool) -> str:
    """One side for the progress line: its count and whether it is being written, or what it lacks."""
    if status is None:
        return f"{'?'} {seen:,}"
    if not status.found:
        if status.waiting:
            return f"{status.role}: waiting for {short_path(status.path)}"
        return f"{status.role}: no dump at {short_path(status.path)}"
    text = f"{status.role} {seen:,}"
    if watching:
        text += " (writing)" if status.writing else " (quiet)"
    if status.problems:
        text += f" ⚠ {len(status.problems)} unreadable"
    return text


def sides_text(p: LiveProgress) -> str:
    """Both sides for the progress line."""
    watching = p.watching != "static"
    return " · ".join(
        (side_progress_text(p.npu, p.npu_seen, watching), side_progress_text(p.bench, p.bench_seen, watching))
    )


def missing_text(p: LiveProgress) -> str:
    """What keeps rows from being compared on both sides, in words ("" when nothing seems to)."""
    for status in (p.npu, p.bench):
        if status is not None and not status.found:
            return f"{status.role}: {side_detail_text(status)}"
    if p.unpaired and not p.pairs:
        return unpaired_text(p.unpaired[0])
    if p.faults:
        return p.faults[0]
    for status in (p.npu, p.bench):
        if status is not None and status.problems:
            return f"{status.role}: {status.problems[0]}"
    if p.pairs and not p.bench_seen:
        return "the bench dump has no entries yet (has the bench run started?)"
    if p.pairs and not p.npu_seen:
        return "the NPU dump has no entries yet"
    return ""


def caveat_text(p: LiveProgress) -> str:
    """What a verdict does not cover: dumps without a counterpart, failed pairs, unreadable files."""
    gaps = [*p.faults, *map(unpaired_text, p.unpaired)]
    gaps += [f"{s.role}: {q}" for s in (p.npu, p.bench) if s is not None for q in s.problems]
    if not gaps:
        return ""
    more = f" (+{len(gaps) - 1} more)" if len(gaps) > 1 else ""
    return f" Not covered: {gaps[0]}{more}."


def no_replay_text(n: NoReplay) -> str:
    """Why no replay will come on its own: ``--replay-budget 0``, ``the replay budget ran out``, …"""
    if n.why is ReplayOff.NO_BUDGET:
        return "--replay-budget 0"
    if n.why is ReplayOff.RAN_OUT:
        return "the replay budget ran out"
    if n.why is ReplayOff.DIED:
        return f"the replay worker died {n.deaths} times in a row"
    return n.reason


def replay_mark_text(summary: bool, off: NoReplay | None, replaying: bool) -> str:
    """A suspect's verdict that waits for its replay (``provisional: …``), or for which none will come
    (``unconfirmed: …``): its pair was compared from statistics (``summary``), replay is ``off``, or its
    round is ``replaying`` now."""
    if summary:
        return "unconfirmed: statistics only"
    if off is not None:
        return f"unconfirmed: {no_replay_text(off)}"
    return "provisional: replaying" if replaying else "provisional: replay to come"


def replay_stopped_text(off: NoReplay) -> str:
    """The notice that replay cannot run here (said once)."""
    return f"Replay is off: {no_replay_text(off)}"


def call_not_replayed_text(call: str, why: str) -> str:
    """A call the user asked to replay that is not: ``why`` is :func:`no_replay_text`'s, or the reader's."""
    return f"{call}: not replayed — {why}"


def call_unreadable_text(call: str, why: str) -> str:
    """A call not replayed because its records or call sidecar cannot be read now (``why``: the reader's
    reason)."""
    return call_not_replayed_text(call, f"cannot read {why}")


def asked_replay_text(call: str, replay: CallReplay) -> str:
    """The replay of a call the user asked for."""
    return f"{call}: {replay_text(replay)}"


def budget_ran_out_text(budget_s: float, left: int) -> str:
    """The notice that a round's budget ran out with ``left`` calls not replayed."""
    return (
        f"Replay: the budget of {budget_s:g} s ran out with {left} call(s) not "
        "replayed (--replay-budget; r replays the selected call)."
    )


def repro_written_text(script: Path | str, verdict: SideVerdict) -> str:
    """The notice that a repro was written, with the replay's verdict on its recorded results."""
    return f"Wrote {script} ({repro_verdict_text(verdict)}): python {script}"


def narrowed_arrived_text(now: tuple[Path, Path], before: tuple[Path, Path]) -> str:
    """The notice that the narrowed dump arrived and is compared in place of the dumps ``before``."""
    return f"The narrowed dump arrived: comparing {now[0]} ↔ {now[1]} in place of {before[0]} ↔ {before[1]}."


def skipped_lines_text(records: Path, bad: Sequence[BadLine]) -> str:
    """The notice of the lines a side skipped since the last one (``bad``: those, first first)."""
    first = bad[0]
    where = f"line {first.line}: " if first.line else ""
    return f"{records}: {len(bad)} malformed line(s) skipped ({where}{unreadable_text(first.reason)})"


# --- the app's bars -------------------------------------------------------------------------------

#: The header's count where every row is compared with itself: the same dump on both sides.
ONE_DUMP_TWICE = "one dump twice: each row compared with itself"
#: The header's count where no row has both sides (no rows yet, a side missing or empty, no name in common).
NOTHING_COMPARED = "nothing compared"


def suspect_name(index: int) -> str:
    """A suspect by its rank (``index``, 0 first): ``culprit``, ``suspect 2``, …"""
    return "culprit" if index == 0 else f"suspect {index + 1}"


def suspect_head(index: int, total: int) -> str:
    """A suspect's head in the app (``Culprit``, ``Suspect 2/3``): ``index`` among ``total``."""
    return "Culprit" if index == 0 else f"Suspect {index + 1}/{total}"


def suspect_lead(s: Suspect, receives: bool) -> str:
    """What the app's bar says before a suspect's call: that the error enters before it (no dumped call
    made it), or that it ``receives`` the error another rank made; else nothing."""
    if s.kind == Kind.ENTERS:
        return "error enters before "
    return "receives the error through " if receives else ""


def runs_differ_head(texts: Sequence[str]) -> str:
    """The app's bar on what differs between the runs before any kernel: the first, and how many more."""
    more = f" (+{len(texts) - 1} more)" if len(texts) > 1 else ""
    return f"Runs differ: {texts[0]}{more}"


# --- a narrowing: why, and what to run ---------------------------------------------------------------


class NarrowingLike(Protocol):
    """What a narrowing's lines are said from (the engine's ``Narrowing``)."""

    @property
    def target(self) -> Narrowed: ...
    @property
    def npu(self) -> RankDump | None: ...
    @property
    def why(self) -> NarrowWhy: ...
    @property
    def script(self) -> str: ...
    @property
    def multi_rank(self) -> bool: ...
    @property
    def checksums(self) -> bool: ...


def narrow_why_text(why: NarrowWhy) -> str:
    """Why the next dump narrows to its target: ``the culprit Functional_silu_3_forward ran in …``."""
    if isinstance(why, Named):
        return f"the {'module' if why.module else 'call'} named ({why.name})"
    if isinstance(why, Chosen):
        who = "the module chosen" if why.module else "the call chosen"
        if not why.module and why.rank is not None:
            who = "the culprit" if why.rank == 0 else suspect_name(why.rank)
        return f"{who} ({why.name})"
    if isinstance(why, CulpritIn):
        return f"the culprit {why.call} ran in {why.module}"
    if isinstance(why, MonitorFirst):
        return f"the monitor's first divergence ({why.phase}) at step {why.step}, rank {why.rank}"
    inside = (
        f"in the model's own forward ({why.forward})"
        if why.forward is not None
        else f"in a module not known: its module sidecar cannot be read ({why.unread})"
        if why.unread
        else "in no module the dump records"
    )
    where = "" if why.in_module else f", which ran {inside}"
    return f"the culprit {why.call}{where}"


def tool_usage_lines(c: ToolConfig, path: Path) -> list[str]:
    """How to run the other tool's config ``path`` on both sides, in words."""
    model = (
        ", and debugger.start(model=model): level mix hooks the modules" if c.data["level"] == "mix" else ""
    )
    config = str(path)  # Python to paste: each text a literal (repr), whatever the path holds
    return [
        f"{c.tool}: PrecisionDebugger(config_path={config!r}) on the NPU (it dumps to "
        f"{one_line(c.data['dump_path'])}); on the bench PrecisionDebugger(config_path={config!r}, "
        f"dump_path={c.bench_path!r}){model}"
    ]


def narrowed_text(t: Narrowed) -> str:
    """What a narrowed dump covers, in words: ``module track.lstm``, ``call Functional.silu.0``."""
    if t.module:
        return f"module {one_line(t.module)}"
    return ("call " if len(t.calls) == 1 else "calls ") + ", ".join(one_line(c.label) for c in t.calls)


def narrowing_lines(n: NarrowingLike, config: Path, npu_dir: Path, bench_dir: Path) -> list[str]:
    """What a narrowing says: its target and why, the next dump, and the commands to run it."""
    t = n.target
    steps = "every step" if t.steps is None else "step " + ", ".join(map(str, t.steps))
    ranks = "every rank" if t.ranks is None else "rank " + ", ".join(map(str, t.ranks))
    what = "its calls" if t.module else "the call" if len(t.calls) == 1 else "the calls"
    q = shlex.quote
    run = f"ptdbg-dump run {SCRIPT if n.script == SCRIPT else q(n.script)}"
    lines = [
        f"Narrowed to {narrowed_text(t)}: {narrow_why_text(n.why)}.",
        f"Next dump: tensors of {what}, forward and backward; {steps}; {ranks}.",
        f"  config: {config}",
        "Run the same script on both sides, then compare:",
        f"  {run} --dump-path {q(str(npu_dir))} --config {q(str(config))}",
        f"  {run} --dump-path {q(str(bench_dir))} --config {q(str(config))}",
        f"  ptdbg-tui compare {q(str(npu_dir))} {q(str(bench_dir))}",
    ]
    source = "the monitored run's script" if n.npu is None else "the script the culprit's stack starts in"
    lines.append(
        f"  ({SCRIPT}: your training script and its arguments)"
        if n.script == SCRIPT
        else f"  ({q(n.script)}: {source}; add its arguments)"
    )
    if n.checksums:
        lines.append(
            "  (the culprit's output differs from bit-equal inputs, by their checksums: a tensor compare"
            " judges by rounding and may find a few ulps honest; add --summary-mode md5 to both dump"
            " commands to compare checksums again)"
        )
    if n.multi_rank:  # a job whose ranks are processes of their own
        spawned = f"PrecisionDebugger.from_config({str(config)!r}, dump_path=…) (from dumper)"
        lines += [
            f"  with torchrun: torchrun [its options] --no-python {run} --dump-path … --config …",
            f"  ranks started by torch.multiprocessing.spawn: in the worker, {spawned}, then start/step/stop",
        ]
    return lines
