"""One-shot comparison of two dumps, for ``ptdbg-tui compare`` (:mod:`ptdbg_tui.cli`), the
``compare()`` API (:mod:`ptdbg_tui.legacy`) and the benchmarks.

All pairs' tensor tasks go through one :class:`~ptdbg_tui.engine.workers.pool.MetricPool` (or, with
``--cluster``, a :class:`~ptdbg_tui.engine.workers.cluster.ClusterPool`), largest first; statistics and
unmatched rows are settled where the records are read. Results stay in memory and each pair's CSV is
written once at the end; several ranks also get the first divergent rank.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cache, partial
from pathlib import Path
from typing import Any, NamedTuple

from ptdbg_tui.compare.diagnosis.findings import Diagnosis
from ptdbg_tui.compare.diagnosis.notes import (
    ContextFailed,
    JobNote,
    NoEntries,
    NotCompared,
    NoVerdict,
    OnPair,
    Repeated,
    ScanProblem,
    Sidecar,
    Unread,
)
from ptdbg_tui.compare.diagnosis.ranks import CrossRank
from ptdbg_tui.compare.matching.pairing import MODES, AutoAligned
from ptdbg_tui.compare.metrics.stats_pass import settled_results
from ptdbg_tui.compare.model import Row, Status
from ptdbg_tui.compare.report.layout_words import no_dump_text
from ptdbg_tui.compare.report.words import job_note_text, unpaired_text
from ptdbg_tui.engine.callpath import module_label
from ptdbg_tui.engine.context import Compared, check_collectives
from ptdbg_tui.engine.gcpolicy import fewer_collections, long_lived
from ptdbg_tui.engine.pipeline import Context, Sidecars, SideRecords, judge_job, judge_pair, match_pair
from ptdbg_tui.engine.workers.forked import Claims, Forked
from ptdbg_tui.engine.workers.pool import FUSED_BYTES, MetricPool, TaskPool
from ptdbg_tui.engine.workers.sharing import row_objects
from ptdbg_tui.engine.workers.tasks import CompareTask, task_for
from ptdbg_tui.formats.dialects import dialect_of, producer
from ptdbg_tui.formats.files import reason
from ptdbg_tui.formats.layout import (
    DumpLayoutError,
    RankDump,
    Scan,
    Side,
    pair_dumps,
    same_dump,
    scan,
    statistics_only,
    tensor_bytes,
    unpaired,
)
from ptdbg_tui.formats.naming import call_key
from ptdbg_tui.formats.reader import call_specs_of, module_chain_of, module_chains_of, read_dump
from ptdbg_tui.formats.records import BadLine, RecordBatch, repeated_names

#: progress(done_bytes, total_bytes): called from the comparing thread, often.
ProgressFn = Callable[[int, int], None]
#: write(outcome, several): a pair's CSV, once its rows are final (``several``: the job has more than
#: one pair); see :func:`compare_dumps`.
WriteFn = Callable[["PairOutcome", bool], Path]


class CompareInputError(Exception):
    """The inputs cannot be compared (the message is one line for the user)."""


@dataclass
class PairOutcome:
    """One compared pair of rank dumps."""

    npu: RankDump
    bench: RankDump
    rows: list[Row]
    diagnosis: Diagnosis = field(default_factory=Diagnosis)
    bad_lines: tuple[list[BadLine], list[BadLine]] = field(default_factory=lambda: ([], []))  # npu, bench
    summary: bool = False  # statistics only (no npy on a side, or asked for)
    stack_mode: bool = False  # the NPU pkl carries stack lines
    npu_tensors: Path | None = None
    bench_tensors: Path | None = None
    csv: Path | None = None
    advisor: Path | None = None  # advisor_<ts>.txt, once written
    match: str = "exact"  # the matching used (``auto`` resolved)
    match_note: AutoAligned | None = None  # why ``auto`` chose it, when it did not match exactly
    no_verdict: NoVerdict | None = (
        None  # why its rows say nothing of the NPU run (one dump twice, a side empty)
    )
    culprit_module: str = ""  # the innermost module the culprit ran in (``track.lstm · LSTM``), if known
    #: the training step the culprit was made in, where the pair is a whole run (no step folder) and its
    #: call sidecar says it
    culprit_step: int | None = None
    #: the pair's own diagnosis, before the steps and ranks around it adjusted it: a replay folds into
    #: it, and the job is judged again from it (:func:`judge`)
    dumps: Diagnosis | None = None

    def counts(self) -> Counter[Status]:
        statuses = [row.status for row in self.rows]  # counted by identity: an Enum hashes in Python
        return Counter({s: n for s in Status if (n := statuses.count(s))})

    @property
    def label(self) -> str:
        return f"{self.npu.label} vs {self.bench.label}"


def _read(dump: RankDump, side: str) -> Any:
    try:
        return read_dump(dump)
    except FileNotFoundError:
        raise CompareInputError(f"{side} dump file {dump.records} does not exist") from None
    except OSError as e:
        raise CompareInputError(f"cannot read {side} dump file {reason(e)}") from None


def _outcome(
    npu: RankDump,
    bench: RankDump,
    npu_tensors: Path | None,
    bench_tensors: Path | None,
    match: str,
    summary: bool,
) -> PairOutcome:
    n, b = _read(npu, "NPU"), _read(bench, "bench")
    matching = match_pair(_side(npu, n), _side(bench, b), match)
    rows = matching.rows
    full = not summary and npu_tensors is not None and bench_tensors is not None
    for row, result in zip(rows, settled_results(rows, summary=not full), strict=True):
        row.result = result
    return PairOutcome(
        npu,
        bench,
        rows,
        bad_lines=(n.bad, b.bad),
        summary=not full,
        stack_mode=bool(n.stacks),
        npu_tensors=npu_tensors if full else None,
        bench_tensors=bench_tensors if full else None,
        match=matching.mode,
        match_note=matching.note,
        no_verdict=_no_verdict(npu, bench, rows),
    )


def _side(dump: RankDump, read: RecordBatch) -> SideRecords:
    """A dump's records as read (:func:`~ptdbg_tui.formats.reader.read_dump`), for matching."""
    tool = dialect_of(producer(dump.format, read.stacks, read.tensors))
    return SideRecords(read.tensors, {s.call: s for s in read.stacks}, tool)


def _no_verdict(npu: RankDump, bench: RankDump, rows: Sequence[Row]) -> NoVerdict | None:
    """Why a pair's rows say nothing about the NPU run: both sides are one dump file (every row equals
    itself), or a side holds no entries (no row is compared); None when neither."""
    if same := same_dump(npu, bench):
        return same
    for side, dump, found in (
        (Side.NPU, npu, any(r.npu is not None for r in rows)),
        (Side.BENCH, bench, any(r.bench is not None for r in rows)),
    ):
        if not found:
            return NoEntries(side=side, records=dump.records)
    return None


def _run_metrics(outcomes: Sequence[PairOutcome], pool: TaskPool, progress: ProgressFn | None) -> None:
    where: list[Row] = []
    tasks: list[CompareTask] = []
    for o in outcomes:
        for row in o.rows:
            if row.result is None:
                where.append(row)
                tasks.append(task_for(row, o.npu_tensors, o.bench_tensors, histogram=False))
    total = sum(t.nbytes + 1 for t in tasks)
    done = 0
    for i, result in pool.map(tasks, largest_first=True):
        where[i].result = result
        done += tasks[i].nbytes + 1
        if progress is not None:
            progress(done, total)


def check_match(match: str) -> None:
    if match not in MODES:
        raise CompareInputError(f"unknown match mode {match!r} (expected one of {', '.join(MODES)})")


class Outcomes(list[PairOutcome]):
    """The compared pairs, and what was not compared or not read (the report says it);
    the cross-rank verdict, and on a cluster the Dask tasks each worker ran."""

    def __init__(self, outcomes: Sequence[PairOutcome] = (), notes: Sequence[JobNote] = ()) -> None:
        super().__init__(outcomes)
        self.notes = list(notes)
        self.ranks = CrossRank()
        self.cluster: str | None = None
        self.placements: Counter[str] = Counter()
        self.around = Around([], [])
        self.match = "auto"  # the matching asked for (the steps before are compared with it)

    @property
    def several_ranks(self) -> bool:
        """Pairs of more than one rank (one rank over several steps has no rank to name)."""
        return len({o.npu.rank for o in self}) > 1


def judge(outcomes: Outcomes) -> None:
    """The job's verdict (:func:`~ptdbg_tui.engine.pipeline.judge_job`: the other ranks' collectives at
    each compared step, the step before each one, the first divergent rank) from each pair's own
    diagnosis, kept first (``dumps``: a replay folds into it, and the job is judged again); and each
    culprit's module and step."""
    pairs = []
    for o in outcomes:
        if o.dumps is None:
            o.dumps = o.diagnosis
        pairs.append(Compared(o.npu, o.rows, o.dumps))
    around = outcomes.around
    earlier = partial(earlier_from_statistics, match=outcomes.match, npu_dumps=around.npu)
    judged = judge_job(
        pairs,
        Context(around.npu, around.pairs, earlier),
        fault=lambda e: outcomes.notes.append(ContextFailed(fault=fault_text(e))),
    )
    for o, d in zip(outcomes, judged.diagnoses, strict=True):
        o.diagnosis = d
        o.culprit_module = _culprit_module(o)
        o.culprit_step = _culprit_step(o)
    outcomes.ranks = judged.ranks


def earlier_from_statistics(
    npu: RankDump, bench: RankDump, match: str, npu_dumps: Sequence[RankDump]
) -> tuple[list[Row], Diagnosis] | None:
    """A pair compared from its statistics alone (its collectives checked against the other ranks'),
    for what a later step's verdict needs of it."""
    try:
        o = _outcome(npu, bench, None, None, match, summary=True)
    except CompareInputError:
        return None
    (d,) = check_collectives([Compared(npu, o.rows, judge_pair(o.rows, sidecars(npu, bench)))], npu_dumps)
    return o.rows, d


class Around(NamedTuple):
    """The dumps around the compared pairs: every NPU rank dump, every pair of any step and rank."""

    npu: list[RankDump]
    pairs: list[tuple[RankDump, RankDump]]


def _pairs(
    npu_path: str | os.PathLike[str], bench_path: str | os.PathLike[str], step: int | None, rank: int | None
) -> tuple[list[tuple[RankDump, RankDump]], list[JobNote], Around]:
    """The pairs to compare and notes on what stays out: unreadable folders, dumps on one side only."""
    found = []
    for path in (npu_path, bench_path):
        try:
            found.append(scan(path))
        except DumpLayoutError as e:
            raise CompareInputError(str(e)) from None
    return _paired(found[0], found[1], (npu_path, bench_path), step, rank)


def _paired(
    npu_scan: Scan,
    bench_scan: Scan,
    paths: Sequence[str | os.PathLike[str]],
    step: int | None,
    rank: int | None,
) -> tuple[list[tuple[RankDump, RankDump]], list[JobNote], Around]:
    sides = []
    notes: list[JobNote] = []
    for side, path, found in ((Side.NPU, paths[0], npu_scan), (Side.BENCH, paths[1], bench_scan)):
        if not found.dumps:
            raise CompareInputError(no_dump_text(path, found.problems))
        sides.append(found.dumps)
        notes += [ScanProblem(side=side, problem=problem) for problem in found.problems]
    npu, bench = sides
    pairs = pair_dumps(npu, bench, step, rank)
    left_out = unpaired(npu, bench, pairs, step, rank)
    if not pairs:
        raise CompareInputError(unpaired_text(left_out[0]))
    return pairs, [*notes, *left_out], Around(npu, pair_dumps(npu, bench))


def compare_dumps(
    npu_path: str | os.PathLike[str],
    bench_path: str | os.PathLike[str],
    *,
    step: int | None = None,
    rank: int | None = None,
    match: str = "auto",
    summary: bool = False,
    jobs: int | None = None,
    cluster: str | None = None,
    progress: ProgressFn | None = None,
    write: WriteFn | None = None,
) -> Outcomes:
    """Discover, pair, match and compare two dumps (any level: root, step, rank dir or pkl), here or
    on the Dask cluster at ``cluster`` (``tcp://host:port`` or ``local:N``), and find the first
    divergent rank (``ranks``).

    ``write``: a pair of statistics has its CSV written by the forked child that diagnoses it, while
    the next pair is read (its path in the outcome's ``csv``); the other pairs' ``csv`` stays ``None``.

    What was not compared or not read is in the result's ``notes``. Raises
    :class:`CompareInputError` for inputs of which nothing can be compared, and
    :class:`~ptdbg_tui.engine.workers.cluster.ClusterError` for a cluster that cannot be used.
    """
    check_match(match)
    if cluster is not None:
        outcomes = _compare_on_cluster(npu_path, bench_path, step, rank, match, summary, cluster, progress)
    else:
        pairs, notes, around = _pairs(npu_path, bench_path, step, rank)
        if not summary:
            notes += [note for n, b in pairs if (note := _statistics_only(n, b))]
        outcomes = compare_pairs(
            [(n, b, _tensor_dir(n), _tensor_dir(b)) for n, b in pairs], match, summary, jobs, progress, write
        )
        outcomes.notes[:0] = notes
        outcomes.around = around
    outcomes.match = match
    judge(outcomes)
    return outcomes


def _statistics_only(n: RankDump, b: RankDump) -> JobNote | None:
    why = statistics_only(n, b)
    return OnPair(pair=f"{n.label} vs {b.label}", what=why) if why else None


def _tensor_dir(dump: RankDump) -> Path | None:
    return dump.tensor_dir if dump.has_tensors else None


class ReadThere(NamedTuple):
    """A pair as a cluster worker read it (:func:`pair_outcome`)."""

    outcome: PairOutcome
    statistics_only: JobNote | None  # why it is compared from statistics alone (the local report's place)
    notes: list[JobNote]  # what its sides hold (names that repeat)
    diagnosed: bool  # its diagnosis was made there


def pair_outcome(npu: RankDump, bench: RankDump, match: str, summary: bool) -> ReadThere:
    """A pair read and matched where its files are (a cluster worker), tensors not compared yet, with
    the notes on it that need its folders. A pair whose rows are final once read (statistics) is
    diagnosed there: beside the other pairs and where its sidecars are, not one after the other in the
    command's process. Without collections, as here (:func:`compare_pairs`): on a worker they took a
    quarter of a statistics pair's time."""
    with fewer_collections():
        o = _outcome(npu, bench, _tensor_dir(npu), _tensor_dir(bench), match, summary)
        final = all(r.result is not None for r in o.rows)
        if final:
            o.diagnosis = _diagnosis(o)
    return ReadThere(o, None if summary else _statistics_only(npu, bench), _side_notes(o), final)


def scan_roots(roots: Sequence[str]) -> list[Scan | str]:
    """Per root: what a cluster worker finds below it (its own disks), or why nothing."""
    from ptdbg_tui.engine.workers.cluster import readable

    out: list[Scan | str] = []
    for root in roots:
        try:
            found = scan(root)
        except DumpLayoutError as e:
            out.append(str(e))
            continue
        out.append(Scan([d for d in found.dumps if readable(str(d.rank_dir))], found.problems))
    return out


def _compare_on_cluster(
    npu_path: str | os.PathLike[str],
    bench_path: str | os.PathLike[str],
    step: int | None,
    rank: int | None,
    match: str,
    summary: bool,
    address: str,
    progress: ProgressFn | None,
) -> Outcomes:
    """The workers find the rank dumps (they may live on the workers' own disks), read and match each
    pair where both its folders can be read, and compare the tensors; only rows and metrics come back.
    A pair that cannot be read or compared is a note and the others go on."""
    from ptdbg_tui.engine.workers.cluster import ClusterPool

    roots = [os.path.abspath(npu_path), os.path.abspath(bench_path)]
    with fewer_collections(), ClusterPool(address) as pool:
        npu_scan, bench_scan = pool.scan(roots, scan_roots)
        pairs, notes, around = _paired(npu_scan, bench_scan, roots, step, rank)
        outcomes = Outcomes(notes=notes)
        outcomes.around = around
        calls = []
        judged: set[int] = set()  # the outcomes (by id) diagnosed by the worker that read them
        for n, b in pairs:
            call = pool.submit(pair_outcome, n, b, match, summary, dirs=(str(n.rank_dir), str(b.rank_dir)))
            if call is None:  # e.g. the NPU folder on one node's disk, the bench one on another's
                outcomes.notes.append(OnPair(pair=f"{n.label} vs {b.label}", what=NotCompared()))
            else:
                calls.append(call)
        statistics_only: list[JobNote] = []  # after the folders' notes, as in the local report
        for call, got in zip(calls, pool.gather(calls), strict=True):
            long_lived()  # each pair's rows: unpickled, thousands of objects that stay
            if isinstance(got, Exception):
                n, b = call.args[0], call.args[1]
                outcomes.notes.append(
                    OnPair(pair=f"{n.label} vs {b.label}", what=NotCompared(fault=fault_text(got)))
                )
                continue
            outcomes.append(got.outcome)
            statistics_only += [got.statistics_only] if got.statistics_only else []
            outcomes.notes += got.notes
            if got.diagnosed:
                judged.add(id(got.outcome))
        outcomes.notes[len(notes) : len(notes)] = statistics_only
        if not outcomes:
            raise CompareInputError("; ".join(map(job_note_text, outcomes.notes)))
        _run_metrics(outcomes, pool, progress)
        outcomes.cluster, outcomes.placements = address, Counter(pool.placements)
        for o in outcomes:  # with fewer collections too: the diagnosis builds an object per call
            if id(o) not in judged:
                o.diagnosis = _diagnosis(o)
    return outcomes


def compare_pairs(
    pairs: Sequence[tuple[RankDump, RankDump, Path | None, Path | None]],
    match: str,
    summary: bool,
    jobs: int | None,
    progress: ProgressFn | None,
    write: WriteFn | None = None,
) -> Outcomes:
    """Outcomes of (npu, bench, NPU tensor folder, bench tensor folder) pairs; the workers start first so
    their start-up overlaps the reading of the records. A pair that cannot be read or compared is a note and
    the others go on; :class:`CompareInputError` when none could be."""
    outcomes = Outcomes()
    with fewer_collections():  # the diagnosis too: it builds an object per call
        folders = [] if summary else [d for _, _, nn, bn in pairs if nn and bn for d in (nn, bn)]
        fused = tensor_bytes(folders, FUSED_BYTES) >= FUSED_BYTES
        jobs = jobs or os.cpu_count() or 1
        several = len(pairs) > 1  # one pair has nothing to read while its child works
        diagnoses = _Diagnoses(jobs - 1 if several and not folders else 0, write, several)
        try:
            with MetricPool(jobs, fused=fused) as pool:
                if folders:
                    pool.start()
                for k, (n, b, nn, bn) in enumerate(pairs):
                    try:
                        outcomes.append(_outcome(n, b, nn, bn, match, summary))
                        long_lived()  # its records and rows stay
                        outcomes.notes += _side_notes(outcomes[-1])
                    except Exception as e:  # one pair's fault must not lose the others' rows
                        outcomes.notes.append(
                            OnPair(pair=f"{n.label} vs {b.label}", what=NotCompared(fault=fault_text(e)))
                        )
                        continue
                    if k < len(pairs) - 1:  # the last is shared out at the end (finish)
                        diagnoses.start(outcomes[-1])
                if not outcomes:
                    raise CompareInputError("; ".join(map(job_note_text, outcomes.notes)))
                _run_metrics(outcomes, pool, progress)
            diagnoses.finish(outcomes)
        finally:
            diagnoses.cancel()
    return outcomes


class _Diagnoses:
    """The pairs' diagnoses, of statistics (their rows are final once read) in forked children while
    the next pairs are read, with their CSV where there is a ``write``; the others here once their
    tensors are compared. The same diagnoses and notes as one by one.

    At most ``children`` at a time (see :mod:`.forked`); a child takes every pair read while no child
    was free, and the command reads on meanwhile: after a fork each page either process writes is a
    fault, a copy while the other holds it (the command's reading, the child's reference counts), so
    fewer forks cost less. At the end the pairs no child has taken are shared between a child and
    this process, which then also diagnoses the pairs the children have not begun
    (:class:`~ptdbg_tui.engine.workers.forked.Claims`)."""

    def __init__(self, children: int, write: WriteFn | None, several: bool) -> None:
        self.children, self.write, self.several = children, write, several
        self.waiting: list[PairOutcome] = []  # read, and not given to a child yet
        self.running: list[_Group] = []
        self.done: dict[int, tuple[Diagnosis, Path | None]] = {}  # by id of the outcome

    def start(self, o: PairOutcome) -> None:
        if self.children < 1:
            return
        self.waiting.append(o)
        self._collect(wait=False)
        if len(self.running) < self.children:
            self._fork(len(self.waiting))

    def _fork(self, count: int) -> None:
        """The first ``count`` pairs waiting, to a new child."""
        group, self.waiting = self.waiting[:count], self.waiting[count:]
        held = row_objects(r for o in group for r in o.rows)
        claims = Claims(len(group))
        work = partial(_finished, group, claims, self.write, self.several)
        self.running.append(_Group(group, claims, Forked(work, held)))

    def _collect(self, wait: bool) -> None:
        """The results of the children that have finished (``wait``: of every child)."""
        for g in list(self.running):
            if wait or g.forked.ready():
                self.running.remove(g)
                for part, found in g.forked.result():
                    self.done[id(g.pairs[part])] = found
                g.claims.close()

    def finish(self, outcomes: Outcomes) -> None:
        """Every pair's diagnosis: of those no child has, half to a free child and the others here
        (while the children work), then those the children have not begun here, then the children's."""
        self._collect(wait=False)
        running = {id(o) for g in self.running for o in g.pairs}
        self.waiting = [o for o in outcomes if id(o) not in self.done and id(o) not in running]
        while self.children > len(self.running) and len(self.waiting) > 1:
            self._fork(len(self.waiting) // 2)
        here = {id(o): (_diagnosis(o), None) for o in self.waiting}
        self.waiting = []
        for g in self.running:
            while (part := g.claims.take()) is not None:
                here[id(g.pairs[part])] = (_diagnosis(g.pairs[part]), None)
        self._collect(wait=True)
        for o in outcomes:
            o.diagnosis, o.csv = self.done.pop(id(o)) if id(o) in self.done else here[id(o)]

    def cancel(self) -> None:
        for g in self.running:
            g.forked.cancel()
            g.claims.close()
        self.running.clear()


class _Group(NamedTuple):
    """Pairs given to one child: it diagnoses each it claims (their index in ``pairs``)."""

    pairs: list[PairOutcome]
    claims: Claims
    forked: Forked[list[tuple[int, tuple[Diagnosis, Path | None]]]]


def _finished(
    group: Sequence[PairOutcome], claims: Claims, write: WriteFn | None, several: bool
) -> list[tuple[int, tuple[Diagnosis, Path | None]]]:
    """The diagnosis of each pair of ``group`` claimed, by its index, and, given ``write``, its CSV
    (``None`` where it could not be written: the caller writes it again, and reports why not)."""
    out = []
    for part in claims.parts():
        o = group[part]
        found = _diagnosis(o)
        try:
            out.append((part, (found, write(o, several) if write is not None else None)))
        except Exception:
            out.append((part, (found, None)))
    return out


def _diagnosis(o: PairOutcome) -> Diagnosis:
    """A pair's diagnosis, or one that says why it has none (its rows and their CSV still count)."""
    try:
        return judge_pair(o.rows, sidecars(o.npu, o.bench, o.bad_lines))
    except Exception as e:
        return Diagnosis(fault=fault_text(e))


def sidecars(
    npu: RankDump, bench: RankDump, bad: tuple[list[BadLine], list[BadLine]] | None = None
) -> Sidecars:
    """What a finished pair's diagnosis reads besides its rows
    (:func:`~ptdbg_tui.engine.pipeline.judge_pair`), each call sidecar once (its skipped lines are said
    once); ``bad``: each side's bad lines, which the sidecars' skipped lines join."""
    n, b = bad if bad is not None else (None, None)
    return Sidecars(
        npu,
        bench,
        cache(partial(call_specs_of, npu, n)),
        cache(partial(call_specs_of, bench, b)),
        lambda: (module_chains_of(npu, n), module_chains_of(bench, b)),
    )


def _culprit_module(o: PairOutcome) -> str:
    """The module the culprit ran in, as the app shows it; "" without a module structure (a folder on a
    cluster worker's disk only has none here), or with a note where its sidecar cannot be read."""
    culprit = o.diagnosis.culprit
    entry = next((r.record.entry for r in culprit.rows if r.record.entry), None) if culprit else None
    if entry is None:
        return ""
    try:
        chain = module_chain_of(o.npu, entry, o.bad_lines[0])
    except OSError as e:  # the structure is there: say why the module is not shown
        o.diagnosis = replace(
            o.diagnosis, notes=[*o.diagnosis.notes, Unread(sidecar=Sidecar.MODULES, reason=reason(e))]
        )
        return ""
    return module_label(*chain[-1]) if chain else ""


def _culprit_step(o: PairOutcome) -> int | None:
    """The step of a whole run's culprit, from the NPU dump's call sidecar (a backward call's is its
    forward's line); None for a dump of one step (its folder says it), or where the sidecar does not."""
    culprit = o.diagnosis.culprit
    if culprit is None or o.npu.step is not None:
        return None
    try:
        spec = call_specs_of(o.npu).get(call_key(culprit.call))
    except OSError:  # unreadable: the report goes on without the step (the replay says why it cannot)
        return None
    return spec.state.step if spec is not None else None


def _side_notes(o: PairOutcome) -> list[JobNote]:
    """A side with names that repeat (a side without entries, or one dump on both sides, is the pair's
    ``no_verdict``)."""
    notes: list[JobNote] = []
    for side, dump, records in (
        (Side.NPU, o.npu, [r.npu for r in o.rows if r.npu is not None]),
        (Side.BENCH, o.bench, [r.bench for r in o.rows if r.bench is not None]),
    ):
        if records and (repeats := repeated_names(sorted(records, key=lambda t: t.order))):
            notes.append(
                OnPair(pair=o.label, what=Repeated(side=side, records=dump.records, repeats=repeats))
            )
    return notes


def fault_text(e: Exception) -> str:
    if isinstance(e, CompareInputError):
        return str(e)
    if isinstance(e, OSError):
        return reason(e)
    return f"{type(e).__name__}: {e}"
