"""One-shot comparison of two dumps: the ``ptdbg-tui compare`` command and the ``compare()`` API.

All pairs' tensor tasks go through one :class:`~ptdbg_tui.engine.pool.MetricPool` (or, with
``--cluster``, a :class:`~ptdbg_tui.engine.cluster.ClusterPool`), largest first; statistics and
unmatched rows are settled where the pkls are read. Results stay in memory and each pair's CSV is
written once at the end; several ranks also get the first divergent rank.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from ptdbg_tui.compare.diagnosis.diagnose import Diagnosis, advisor_text, diagnose
from ptdbg_tui.compare.diagnosis.ranks import CrossRank, RankView, cross_rank
from ptdbg_tui.compare.matching.pairing import MODES, attach_stacks, choose_match, model_rows
from ptdbg_tui.compare.metrics.settled import settled_result
from ptdbg_tui.compare.model import Row, Status
from ptdbg_tui.compare.report.csv_msprobe import CSV_MSPROBE, write_msprobe_csv
from ptdbg_tui.compare.report.csv_ptdbg import write_csv
from ptdbg_tui.compare.report.suspects import suspects_path, write_suspects
from ptdbg_tui.engine.gcpolicy import fewer_collections, long_lived
from ptdbg_tui.engine.pool import FUSED_BYTES, MetricPool, TaskPool
from ptdbg_tui.engine.tasks import CompareTask, task_for
from ptdbg_tui.formats.files import reason
from ptdbg_tui.formats.layout import (
    DumpLayoutError,
    RankDump,
    Scan,
    discover,
    no_dump_message,
    pair_dumps,
    same_dump_note,
    scan,
    statistics_only_note,
    tensor_bytes,
    unpaired_notes,
)
from ptdbg_tui.formats.reader import autograd_order, mixed_pair, producer, read_dump
from ptdbg_tui.formats.records import BadLine, repeated_names

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

#: progress(done_bytes, total_bytes): called from the comparing thread, often.
ProgressFn = Callable[[int, int], None]


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
    npu_npy: Path | None = None
    bench_npy: Path | None = None
    csv: Path | None = None
    match: str = "exact"  # the matching used (``auto`` resolved)
    match_note: str = ""  # why ``auto`` chose it, when it did not match exactly

    def counts(self) -> Counter[Status]:
        return Counter(row.status for row in self.rows)

    @property
    def label(self) -> str:
        return f"{self.npu.label} vs {self.bench.label}"


def _read(dump: RankDump, side: str) -> Any:
    try:
        return read_dump(dump)
    except FileNotFoundError:
        raise CompareInputError(f"{side} dump file {dump.pkl} does not exist") from None
    except OSError as e:
        raise CompareInputError(f"cannot read {side} dump file {reason(e)}") from None


def _outcome(npu: RankDump, bench: RankDump, npu_npy: Path | None, bench_npy: Path | None, match: str,
             summary: bool) -> PairOutcome:
    n, b = _read(npu, "NPU"), _read(bench, "bench")
    tools = producer(npu.format, n.stacks, n.tensors), producer(bench.format, b.stacks, b.tensors)
    matching = choose_match(n.tensors, b.tensors, match, mixed_pair(*tools), autograd_order(*tools))
    rows = matching.rows
    attach_stacks(rows, {s.call: s for s in n.stacks})
    full = not summary and npu_npy is not None and bench_npy is not None
    for row in rows:
        row.result = settled_result(row, summary=not full)
    return PairOutcome(npu, bench, rows, bad_lines=(n.bad, b.bad), summary=not full,
                       stack_mode=bool(n.stacks), npu_npy=npu_npy if full else None,
                       bench_npy=bench_npy if full else None, match=matching.mode, match_note=matching.note)


def _run_metrics(outcomes: Sequence[PairOutcome], pool: TaskPool, progress: ProgressFn | None) -> None:
    where: list[Row] = []
    tasks: list[CompareTask] = []
    for o in outcomes:
        for row in o.rows:
            if row.result is None:
                where.append(row)
                tasks.append(task_for(row, o.npu_npy, o.bench_npy, histogram=False))
    total = sum(t.nbytes + 1 for t in tasks)
    done = 0
    for i, result in pool.map(tasks, largest_first=True):
        where[i].result = result
        done += tasks[i].nbytes + 1
        if progress is not None:
            progress(done, total)


def _check_match(match: str) -> None:
    if match not in MODES:
        raise CompareInputError(f"unknown match mode {match!r} (expected one of {', '.join(MODES)})")


class Outcomes(list[PairOutcome]):
    """The compared pairs, and what was not compared or not read, in words (the report prints it);
    the cross-rank verdict, and on a cluster the Dask tasks each worker ran."""

    def __init__(self, outcomes: Sequence[PairOutcome] = (), notes: Sequence[str] = ()) -> None:
        super().__init__(outcomes)
        self.notes = list(notes)
        self.ranks = CrossRank()
        self.cluster: str | None = None
        self.placements: Counter[str] = Counter()


def _pairs(npu_path: str | os.PathLike[str], bench_path: str | os.PathLike[str], step: int | None,
           rank: int | None) -> tuple[list[tuple[RankDump, RankDump]], list[str]]:
    """The pairs to compare and notes on what stays out: unreadable folders, dumps on one side only."""
    found = []
    for path in (npu_path, bench_path):
        try:
            found.append(scan(path))
        except DumpLayoutError as e:
            raise CompareInputError(str(e)) from None
    return _paired(found[0], found[1], (npu_path, bench_path), step, rank)


def _paired(npu_scan: Scan, bench_scan: Scan, paths: Sequence[str | os.PathLike[str]], step: int | None,
            rank: int | None) -> tuple[list[tuple[RankDump, RankDump]], list[str]]:
    sides = []
    notes: list[str] = []
    for role, path, found in (("NPU", paths[0], npu_scan), ("bench", paths[1], bench_scan)):
        if not found.dumps:
            raise CompareInputError(no_dump_message(path, found.problems))
        sides.append(found.dumps)
        notes += [f"{role}: {problem}" for problem in found.problems]
    npu, bench = sides
    pairs = pair_dumps(npu, bench, step, rank)
    unpaired = unpaired_notes(npu, bench, pairs, step, rank)
    if not pairs:
        raise CompareInputError(unpaired[0])
    return pairs, [*notes, *unpaired]


def compare_dumps(npu_path: str | os.PathLike[str], bench_path: str | os.PathLike[str], *,
                  step: int | None = None, rank: int | None = None, match: str = "auto",
                  summary: bool = False, jobs: int | None = None, cluster: str | None = None,
                  progress: ProgressFn | None = None) -> Outcomes:
    """Discover, pair, match and compare two dumps (any level: root, step, rank dir or pkl), here or
    on the Dask cluster at ``cluster`` (``tcp://host:port`` or ``local:N``), and find the first
    divergent rank (``ranks``).

    What was not compared or not read is in the result's ``notes``. Raises
    :class:`CompareInputError` for inputs of which nothing can be compared, and
    :class:`~ptdbg_tui.engine.cluster.ClusterError` for a cluster that cannot be used.
    """
    _check_match(match)
    if cluster is not None:
        outcomes = _compare_on_cluster(npu_path, bench_path, step, rank, match, summary, cluster, progress)
    else:
        pairs, notes = _pairs(npu_path, bench_path, step, rank)
        if not summary:
            notes += [note for n, b in pairs if (note := _statistics_only(n, b))]
        outcomes = _compare_pairs([(n, b, _npy_dir(n), _npy_dir(b)) for n, b in pairs], match, summary,
                                  jobs, progress)
        outcomes.notes[:0] = notes
    outcomes.ranks = cross_rank([RankView(o.npu.label, o.npu.step, o.npu.rank, o.rows, o.diagnosis)
                                 for o in outcomes])
    return outcomes


def _statistics_only(n: RankDump, b: RankDump) -> str | None:
    note = statistics_only_note(n, b)
    return f"{n.label} vs {b.label}: statistics only — {note}" if note else None


def _npy_dir(dump: RankDump) -> Path | None:
    return dump.npy_dir if dump.has_npy else None


def pair_outcome(npu: RankDump, bench: RankDump, match: str, summary: bool) -> tuple[PairOutcome, list[str]]:
    """A pair read and matched where its files are (a cluster worker), tensors not compared yet, and
    the notes on it that need its folders."""
    o = _outcome(npu, bench, _npy_dir(npu), _npy_dir(bench), match, summary)
    note = None if summary else _statistics_only(npu, bench)
    return o, [*([note] if note else []), *(f"{o.label}: {n}" for n in _side_notes(o))]


def scan_roots(roots: Sequence[str]) -> list[Scan | str]:
    """Per root: what a cluster worker finds below it (its own disks), or why nothing."""
    from ptdbg_tui.engine.cluster import readable

    out: list[Scan | str] = []
    for root in roots:
        try:
            found = scan(root)
        except DumpLayoutError as e:
            out.append(str(e))
            continue
        out.append(Scan([d for d in found.dumps if readable(str(d.rank_dir))], found.problems))
    return out


def _compare_on_cluster(npu_path: str | os.PathLike[str], bench_path: str | os.PathLike[str],
                        step: int | None, rank: int | None, match: str, summary: bool, address: str,
                        progress: ProgressFn | None) -> Outcomes:
    """The workers find the rank dumps (they may live on the workers' own disks), read and match each
    pair where both its folders can be read, and compare the tensors; only rows and metrics come back.
    A pair that cannot be read or compared is a note and the others go on."""
    from ptdbg_tui.engine.cluster import ClusterPool

    roots = [os.path.abspath(npu_path), os.path.abspath(bench_path)]
    with fewer_collections(), ClusterPool(address) as pool:
        npu_scan, bench_scan = pool.scan(roots, scan_roots)
        pairs, notes = _paired(npu_scan, bench_scan, roots, step, rank)
        outcomes = Outcomes(notes=notes)
        calls = []
        for n, b in pairs:
            call = pool.submit(pair_outcome, n, b, match, summary, dirs=(str(n.rank_dir), str(b.rank_dir)))
            if call is None:  # e.g. the NPU folder on one node's disk, the bench one on another's
                outcomes.notes.append(f"{n.label} vs {b.label}: not compared — no worker of the cluster "
                                      "can read both its folders")
            else:
                calls.append(call)
        for call, got in zip(calls, pool.gather(calls), strict=True):
            long_lived()  # each pair's rows: unpickled, thousands of objects that stay
            if isinstance(got, Exception):
                n, b = call.args[0], call.args[1]
                outcomes.notes.append(f"{n.label} vs {b.label}: not compared — {_fault(got)}")
                continue
            outcomes.append(got[0])
            outcomes.notes += got[1]
        if not outcomes:
            raise CompareInputError("; ".join(outcomes.notes))
        _run_metrics(outcomes, pool, progress)
        outcomes.cluster, outcomes.placements = address, Counter(pool.placements)
        _diagnose(outcomes)  # with fewer collections too: it builds an object per call
    return outcomes


def _compare_pairs(pairs: Sequence[tuple[RankDump, RankDump, Path | None, Path | None]], match: str,
                   summary: bool, jobs: int | None, progress: ProgressFn | None) -> Outcomes:
    """Outcomes of (npu, bench, npu npy dir, bench npy dir) pairs; the workers start first so
    their start-up overlaps the pkl reading. A pair that cannot be read or compared is a note and
    the others go on; :class:`CompareInputError` when none could be."""
    outcomes = Outcomes()
    with fewer_collections():  # the diagnosis too: it builds an object per call
        folders = [] if summary else [d for _, _, nn, bn in pairs if nn and bn for d in (nn, bn)]
        fused = tensor_bytes(folders, FUSED_BYTES) >= FUSED_BYTES
        with MetricPool(jobs or os.cpu_count() or 1, fused=fused) as pool:
            if folders:
                pool.start()
            for n, b, nn, bn in pairs:
                try:
                    outcomes.append(_outcome(n, b, nn, bn, match, summary))
                    long_lived()  # its records and rows stay
                    outcomes.notes += [f"{outcomes[-1].label}: {note}" for note in _side_notes(outcomes[-1])]
                except Exception as e:  # one pair's fault must not lose the others' rows
                    outcomes.notes.append(f"{n.label} vs {b.label}: not compared — {_fault(e)}")
            if not outcomes:
                raise CompareInputError("; ".join(outcomes.notes))
            _run_metrics(outcomes, pool, progress)
        _diagnose(outcomes)
    return outcomes


def _diagnose(outcomes: Outcomes) -> None:
    for o in outcomes:
        try:
            o.diagnosis = diagnose(model_rows(o.rows))
        except Exception as e:  # the rows and their CSV still count
            outcomes.notes.append(f"{o.label}: no diagnosis — {_fault(e)}")


def _side_notes(o: PairOutcome) -> list[str]:
    """A side without entries, or with names that repeat."""
    notes = []
    for role, dump, records in (("NPU", o.npu, [r.npu for r in o.rows if r.npu is not None]),
                                ("bench", o.bench, [r.bench for r in o.rows if r.bench is not None])):
        if not records:
            notes.append(f"the {role} dump file {dump.pkl} holds no entries")
        elif repeats := repeated_names(sorted(records, key=lambda t: t.order)):
            notes.append(f"{role} dump {dump.pkl}: {repeats}")
    if same := same_dump_note(o.npu, o.bench):
        notes.append(same)
    return notes


def _fault(e: Exception) -> str:
    if isinstance(e, CompareInputError):
        return str(e)
    if isinstance(e, OSError):
        return reason(e)
    return f"{type(e).__name__}: {e}"


# --- the original's API -------------------------------------------------------------------


def _rank_dump(pkl: Any, side: str) -> RankDump:
    if not pkl:
        raise CompareInputError(f"input_param needs '{side}_pkl_path'")
    path = Path(pkl)
    if not path.is_file():
        raise CompareInputError(f"{side} pkl {path} does not exist")
    try:
        return discover(path)[0]
    except DumpLayoutError as e:
        raise CompareInputError(str(e)) from None


def _data_dir(value: Any, side: str) -> Path | None:
    if not value:
        return None
    path = Path(value)
    if not path.is_dir():
        raise CompareInputError(f"{side} dump data dir {path} is not a directory")
    return path


def compare(input_param: dict[str, Any], output_path: str | os.PathLike[str], stack_mode: bool = False,
            auto_analyze: bool = True, fuzzy_match: bool = False, **kw: Any) -> str:
    """``ptdbg_ascend.compare`` call shape; returns the CSV path.

    As the original, statistics-only mode is used unless both data dirs are given, and with
    ``auto_analyze`` an ``advisor_<ts>.txt`` names the suspect (here: the culprit call).
    Extra keywords: ``match`` ("auto"/"exact"/"fuzzy"/"align", overrides ``fuzzy_match``), ``jobs``,
    ``suffix`` (inserted into the file name).
    """
    npu = _rank_dump(input_param.get("npu_pkl_path"), "npu")
    bench = _rank_dump(input_param.get("bench_pkl_path"), "bench")
    npu_npy = _data_dir(input_param.get("npu_dump_data_dir"), "npu")
    bench_npy = _data_dir(input_param.get("bench_dump_data_dir"), "bench")
    match = kw.get("match") or ("fuzzy" if fuzzy_match else "auto")
    _check_match(match)
    (outcome,) = _compare_pairs([(npu, bench, npu_npy, bench_npy)], match, False, kw.get("jobs"), None)
    outcome.csv = write_csv(outcome.rows, output_path, stack_mode=stack_mode, summary=outcome.summary,
                            suffix=kw.get("suffix", ""))
    write_suspects(outcome.diagnosis, outcome.csv)
    if auto_analyze and not outcome.summary:
        stamp = outcome.csv.stem.removeprefix("compare_result" + kw.get("suffix", "") + "_")
        advice = advisor_text(outcome.rows, outcome.diagnosis)
        (outcome.csv.parent / f"advisor_{stamp}.txt").write_text(advice)
    if input_param.get("is_print_compare_log", True):
        print(summary_text(outcome))
    return str(outcome.csv)


# --- the command line ---------------------------------------------------------------------


def summary_text(o: PairOutcome) -> str:
    """The short report of one pair: counts, culprits, skipped pkl lines, the CSV."""
    c = o.counts()
    mode = "statistics only" if o.summary else "tensors"
    noise = sum(1 for r in o.rows if r.noise and not r.matched)
    of_them = f" ({noise} of them the other tool's own detach calls)" if noise else ""
    lines = [f"{o.label} ({mode}): {len(o.rows)} rows: {c[Status.PASS]} passed, {c[Status.FAIL]} failed, "
             f"{c[Status.WARN]} warnings, {c[Status.UNMATCHED]} unmatched{of_them}, {c[Status.ERROR]} errors"]
    if o.match_note:
        lines.append(f"  matching: {o.match} — {o.match_note}")
    lines += diagnosis_lines(o.diagnosis)
    for side, bad in zip(("NPU", "bench"), o.bad_lines, strict=True):
        if bad:
            where = f"line {bad[0].line}: " if bad[0].line else ""
            lines.append(f"  {side} dump: {len(bad)} unreadable line(s) or entries skipped, first: "
                         f"{where}{bad[0].reason}")
    if o.csv is not None:
        lines.append(f"  CSV: {o.csv}")
        lines.append(f"  suspects: {suspects_path(o.csv)}")
    return "\n".join(lines)


#: Suspects listed in the report after the culprit (all of them go to suspects_<ts>.csv).
REPORT_SUSPECTS = 5


def diagnosis_lines(d: Diagnosis) -> list[str]:
    """The report's diagnosis: the culprit and the next suspects with their evidence, or the verdict."""
    lines = [f"  {d.verdict}"]
    for k, s in enumerate(d.suspects[1:REPORT_SUSPECTS + 1], start=2):
        lines.append(f"    suspect {k} ({s.direction}): {s.call}: {s.evidence}")
    if len(d.suspects) > REPORT_SUSPECTS + 1:
        lines.append(f"    … {len(d.suspects) - REPORT_SUSPECTS - 1} more suspects")
    if d.original:
        lines.append(f"  original advisor (first No row): {d.original}")
    return lines


class _Bar:
    """Progress on stderr: a redrawn bar on a terminal, a line every ``every_s`` otherwise."""

    def __init__(self, stream: TextIO, enabled: bool, every_s: float = 10.0) -> None:
        self.stream = stream
        self.enabled = enabled
        self.tty = enabled and stream.isatty()
        self.every_s = every_s if not self.tty else 0.1
        self.start = self.last = time.monotonic()
        self.drawn = False

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if not self.enabled or now - self.last < self.every_s or (self.tty and now - self.start < 0.5):
            return
        self.last = now
        frac = done / total if total else 1.0
        rate = done / max(now - self.start, 1e-9) / 1e9
        text = f"{frac:6.1%}  {done / 1e9:.2f}/{total / 1e9:.2f} GB  {rate:.2f} GB/s"
        if self.tty:
            width = 30
            fill = int(frac * width)
            self.stream.write(f"\r[{'#' * fill}{'.' * (width - fill)}] {text}")
            self.drawn = True
        else:
            self.stream.write(f"compared {text}\n")
        self.stream.flush()

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\r\033[K")
            self.stream.flush()


def write_pair_csv(rows: Sequence[Row], out_dir: str | os.PathLike[str], npu: RankDump, fmt: str | None, *,
                   stack_mode: bool = False, summary: bool = False, suffix: str = "") -> Path:
    """A pair's CSV in ``fmt`` (``ptdbg`` or ``msprobe``; by default the NPU dump's own format)."""
    if (fmt or npu.format) == CSV_MSPROBE:
        return write_msprobe_csv(rows, out_dir, summary=summary, suffix=suffix)
    return write_csv(rows, out_dir, stack_mode=stack_mode, summary=summary, suffix=suffix)


def pair_suffix(npu: RankDump, bench: RankDump | None) -> str:
    """What goes into a CSV's name when several pairs are written (the app's export uses it too)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", f"_{npu.label}-{bench.label if bench else 'none'}")


def cluster_lines(outcomes: Outcomes) -> list[str]:
    """Where the work ran: Dask tasks per worker."""
    if outcomes.cluster is None:
        return []
    total = sum(outcomes.placements.values())
    per = ", ".join(f"{w}: {n:,}" for w, n in sorted(outcomes.placements.items()))
    workers = len(outcomes.placements)
    return [f"cluster {outcomes.cluster}: {total:,} Dask tasks on {workers} worker(s) ({per})"]


def report_text(outcomes: Outcomes) -> str:
    """The whole report: each pair, (several pairs) the cross-rank verdict, the notes, the cluster."""
    lines = [summary_text(o) for o in outcomes]
    if len(outcomes) > 1:
        lines += outcomes.ranks.lines()
    lines += [f"note: {n}" for n in outcomes.notes]
    return "\n".join(lines + cluster_lines(outcomes))


def run_cli(args: argparse.Namespace) -> int:
    """``ptdbg-tui compare``: 0 when it ran, 2 with a one-line reason when it could not."""
    from ptdbg_tui.engine.cluster import ClusterError, require

    prog = "ptdbg-tui compare"
    if args.jobs is not None and args.jobs < 1:
        print(f"{prog}: error: --jobs must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    try:
        if args.cluster is not None:
            require(args.cluster)
    except ClusterError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    bar = _Bar(sys.stderr, not args.no_progress)
    try:
        outcomes = compare_dumps(args.npu, args.bench, step=args.step, rank=args.rank, match=args.match,
                                 summary=args.summary, jobs=args.jobs, cluster=args.cluster, progress=bar)
    except (CompareInputError, ClusterError) as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as e:  # a bug: one line, not a traceback over the user's terminal
        print(f"{prog}: internal error (please report it): {_fault(e)}", file=sys.stderr)
        return EXIT_INTERNAL
    finally:
        bar.close()
    try:
        for o in outcomes:
            o.csv = write_pair_csv(o.rows, args.output, o.npu, args.format, stack_mode=args.stack,
                                   summary=o.summary,
                                   suffix=pair_suffix(o.npu, o.bench) if len(outcomes) > 1 else "")
            write_suspects(o.diagnosis, o.csv)
    except OSError as e:
        print(f"{prog}: error: cannot write the CSV to {args.output}: {e.strerror or e}", file=sys.stderr)
        return EXIT_USAGE
    try:
        print(report_text(outcomes), flush=True)
    except BrokenPipeError:  # the reader left (``| head``); the CSV is written, nothing is lost
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return EXIT_OK
