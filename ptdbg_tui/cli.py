"""Command line: ``ptdbg-tui NPU BENCH`` (the app), ``ptdbg-tui compare ...``, ``ptdbg-tui narrow ...``,
``ptdbg-tui demo``: the arguments, the exit codes, the headless report and its progress bar.

Heavy imports (textual, torch) happen inside the chosen command so that ``--help`` and
the headless compare start fast.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from pathlib import Path

    from textual.app import App

    from ptdbg_tui.compare.diagnosis.replay_outcome import CallReplay
    from ptdbg_tui.engine.batch import Outcomes, PairOutcome, WriteFn
    from ptdbg_tui.engine.live.options import LiveOptions

#: The CSV dialects of ``--format`` (:mod:`ptdbg_tui.compare.report.outputs`; kept here so ``--help``
#: imports nothing).
CSV_DIALECTS = ("ptdbg", "msprobe")

EXIT_OK = 0
EXIT_INTERNAL = 1  # a bug: one line, not a traceback
EXIT_USAGE = 2  # the inputs or options cannot be used (the message says why)
EXIT_MISSING_TORCH = 3  # the demo needs the ``dump`` extra
EXIT_NOTHING_TO_NARROW = 4  # narrow: no pair names a culprit (the report says why); no config written
EXIT_INTERRUPTED = 130


def _version(p: argparse.ArgumentParser) -> None:
    from ptdbg_tui import __version__

    p.add_argument("--version", action="version", version=f"ptdbg-tui {__version__}")


def _pair(
    p: argparse.ArgumentParser,
    npu: str,
    match: str = "pairing of entries (as ptdbg-tui compare)",
    alone: bool = False,
) -> None:
    """The two dumps, the step and rank, and how entries pair: every command that compares takes them
    (``alone``: the NPU dump may come alone, as the app opens on one folder)."""
    p.add_argument("npu", metavar="NPU_DIR", help=npu)
    bench = "benchmark (GPU/CPU) dump, same forms"
    if alone:
        p.add_argument("bench", metavar="BENCH_DIR", nargs="?", help=f"{bench}; without it, {ALONE}")
    else:
        p.add_argument("bench", metavar="BENCH_DIR", help=bench)
    p.add_argument("--step", type=int, default=None, help="compare this step only")
    p.add_argument("--rank", type=int, default=None, help="compare this (NPU) rank only")
    p.add_argument("--match", choices=("auto", "exact", "fuzzy", "align"), default="auto", help=match)


#: What the app shows of one dump opened alone.
ALONE = "the app shows where the dump's first NaN or Inf comes from (as ptdbg-tui check)"


def _common(p: argparse.ArgumentParser, alone: bool = False) -> None:
    _version(p)
    _pair(
        p,
        "NPU dump (ptdbg or msprobe): dump_path root, step or rank dir, a .pkl or dump.json",
        "pairing of entries: auto (default: exact names, aligned when that leaves calls unpaired on "
        "both sides or shapes that differ), exact names, call index dropped, or sequence alignment "
        "that survives extra/missing calls",
        alone,
    )
    p.add_argument(
        "--summary", action="store_true", help="compare statistics only, even if tensor files exist"
    )
    p.add_argument(
        "--format",
        choices=CSV_DIALECTS,
        default=None,
        help="the CSV's columns: ptdbg_ascend's or msprobe's (default: the NPU dump's format)",
    )
    p.add_argument(
        "--jobs", type=int, default=os.cpu_count() or 1, help="worker processes (default: all cores)"
    )
    p.add_argument(
        "--cluster",
        default=None,
        metavar="ADDRESS",
        help="compare on a Dask cluster: a scheduler's tcp://host:port, or local:N for N local "
        'worker processes (needs pip install "ptdbg-tui[cluster]")',
    )


def compare_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ptdbg-tui compare",
        description="Compare two dumps headlessly and write compare_result_<ts>.csv.",
    )
    _common(p)
    p.add_argument("-o", "--output", default=".", metavar="OUT_DIR", help="where the CSV goes (default: .)")
    p.add_argument("--stack", action="store_true", help="add the NPU_Stack_Info column")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    replay = p.add_mutually_exclusive_group()
    replay.add_argument(
        "--replay",
        action="store_true",
        help="replay more: besides the suspects, every call up to the first failing row, then the "
        "others (default budget 60 s); by default (torch importable) the suspects whose inputs already "
        "differ are re-run in float64 on each side's own recorded inputs, to confirm or refute them",
    )
    replay.add_argument(
        "--no-replay", action="store_true", help="no replay: the verdicts stand on the two dumps alone"
    )
    _replay_options(
        p,
        None,
        f"the most time the replay may take, in all (default: {DEFAULT_REPLAY_BUDGET_S:g}; with "
        f"--replay, {REPLAY_BUDGET_S:g})",
    )
    return p


#: Seconds the replay may take by default (``engine.replay.replayer.BUDGET_S``: the app's and ``--replay``'s;
#: here, so ``--help`` imports nothing).
REPLAY_BUDGET_S = 60.0
#: Seconds the compare's default replay may take: the suspects whose inputs differ, a few calls (most
#: of it is the worker's import of torch).
DEFAULT_REPLAY_BUDGET_S = 20.0


def _replay_options(
    p: argparse.ArgumentParser,
    budget: float | None = REPLAY_BUDGET_S,
    words: str = "the most time the replay may take, in all, each time the comparison settles "
    "(default: 60; 0: only the calls r asks for)",
) -> None:
    p.add_argument("--replay-budget", type=float, default=budget, metavar="SECONDS", help=words)
    p.add_argument(
        "--replay-top", type=int, default=10, metavar="K", help="suspects replayed first (default: 10)"
    )


def replay_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ptdbg-tui replay",
        description="Re-run calls in float64 on each side's own recorded inputs (needs torch: the dump "
        "extra): is a side's kernel wrong on its own inputs? One line per call, and replay_<ts>.csv.",
    )
    _version(p)
    _pair(p, "NPU dump (ptdbg or msprobe), any level, with tensors")
    p.add_argument(
        "--call",
        nargs="+",
        default=None,
        metavar="NAME",
        help="these calls (e.g. Functional_gelu_0_forward); default: the suspects, then the calls "
        "up to the first failing row, then the failing ones",
    )
    p.add_argument("--top", type=int, default=10, metavar="K", help="suspects replayed first (default: 10)")
    p.add_argument(
        "--budget",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="the most time the replay may take, in all (default: 60)",
    )
    p.add_argument("-o", "--output", default=".", metavar="OUT_DIR", help="where replay_<ts>.csv goes")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes of the compare")
    p.add_argument("--no-progress", action="store_true", help="no progress on stderr")
    return p


def narrow_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ptdbg-tui narrow",
        description="Compare two statistics dumps and write the next dump's config: tensors of one module "
        "(by default the culprit's innermost module) or call, forward and backward, at the step(s) and "
        "rank(s) where the runs diverge; prints the commands that run it on both sides.",
    )
    _version(p)
    _pair(p, "NPU dump (ptdbg or msprobe), any level")
    target = p.add_mutually_exclusive_group()
    target.add_argument(
        "--call",
        metavar="NAME",
        help="narrow to this call (as the report names it: VF_lstm_0_backward, Functional.silu.0.forward)",
    )
    target.add_argument("--module", metavar="PATH", help="narrow to this module path (track.lstm)")
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        default=None,
        help="the config file (default: ./narrow_<module or call>.json)",
    )
    p.add_argument(
        "--dump-path",
        metavar="DIR",
        default=None,
        help="where the commands dump: DIR/npu and DIR/bench (default: FILE without .json)",
    )
    p.add_argument(
        "--script",
        default=None,
        help="the training script named in the commands (default: "
        "the one the culprit's stack starts in, else SCRIPT)",
    )
    return p


def monitor_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ptdbg-tui monitor",
        description="Compare two trainings' monitor folders (ptdbg-dump run --monitor): the runs' manifests "
        "first, each rank's loss curves and rounding band, the first divergent step and module (a module "
        "whose difference grows beyond what its inputs, its own history and rounding explain), the first "
        "NaN/Inf with finite inputs, and the first divergent rank. --narrow writes the dump config of that "
        "step and module, as ptdbg-tui narrow does.",
    )
    _version(p)
    p.add_argument("npu", metavar="NPU_MON", help="the NPU run's monitor folder")
    p.add_argument("bench", metavar="BENCH_MON", help="the benchmark run's monitor folder")
    p.add_argument(
        "--follow",
        action="store_true",
        help="follow both trainings while they run: read each new step, say when the verdict changes, "
        "and report once both streams end (or on Ctrl-C)",
    )
    p.add_argument(
        "--interval", type=float, default=2.0, help="seconds between reads with --follow (default 2)"
    )
    p.add_argument(
        "--narrow",
        action="store_true",
        help="write the next dump's config: tensors of the first divergent module at its step and rank",
    )
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        default=None,
        help="with --narrow: the config file (default: ./narrow_<module>.json)",
    )
    p.add_argument(
        "--dump-path",
        metavar="DIR",
        default=None,
        help="with --narrow: where the commands dump: DIR/npu and DIR/bench (default: FILE without .json)",
    )
    p.add_argument(
        "--script",
        default=None,
        help="with --narrow: the training script named in the commands (default: the NPU run's, from its "
        "manifest, else SCRIPT)",
    )
    return p


def repro_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ptdbg-tui repro",
        description="Write DIR/repro.py for the kernel team: it re-runs one recorded call of the NPU dump "
        "on its recorded inputs (DIR/repro_data.pt) in float64 and in the recorded dtype, and exits 1 when "
        "the recorded result is wrong beyond what rounding allows (python DIR/repro.py needs torch only). "
        "Writing it needs torch: the dump extra.",
    )
    _version(p)
    p.add_argument("npu", metavar="NPU_DUMP", help="NPU dump (ptdbg or msprobe), any level, with tensors")
    p.add_argument(
        "call",
        metavar="CALL",
        help="the call: VF_lstm_0_backward, Functional.gelu.0.forward (a call's key or one of its "
        "entries also names it)",
    )
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="where repro.py and repro_data.pt go")
    p.add_argument("--step", type=int, default=None, help="the dump of this step")
    p.add_argument("--rank", type=int, default=None, help="the dump of this rank")
    p.add_argument(
        "--device",
        choices=("cpu", "cuda", "npu"),
        default="cpu",
        help="where the script re-runs the call in the recorded dtype, when the machine has one "
        "(default: cpu; python repro.py --device changes it)",
    )
    return p


def check_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ptdbg-tui check",
        description="One dump alone: name the first call whose output holds NaN or Inf while its inputs "
        "are finite, with its module and source line, and replay it in float64 on its recorded inputs to "
        "tell an overflow of the output's dtype (loss scaling, range) from a kernel wrong on its inputs "
        "(the replay needs torch: the dump extra).",
    )
    _version(p)
    p.add_argument("dump", metavar="DUMP", help="a dump (ptdbg-tui's, the original ptdbg's or msprobe's)")
    p.add_argument("--step", type=int, default=None, help="the dump of this step")
    p.add_argument("--rank", type=int, default=None, help="the dump of this rank")
    p.add_argument("--no-replay", action="store_true", help="name the origin without replaying it")
    return p


def app_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ptdbg-tui",
        # every usage message (a bare ptdbg-tui too) names the commands, the demo among them
        usage="ptdbg-tui NPU_DIR BENCH_DIR [options]  (the app; -h lists the options)\n"
        "       ptdbg-tui DUMP  (the app on one dump: where its first NaN/Inf comes from)\n"
        "       ptdbg-tui compare NPU_DIR BENCH_DIR [-o OUT_DIR] [options]  (headless)\n"
        "       ptdbg-tui narrow NPU_DIR BENCH_DIR [--call NAME | --module PATH] [-o FILE]  "
        "(the next dump's config)\n"
        "       ptdbg-tui replay NPU_DIR BENCH_DIR [-o OUT_DIR]  (re-run suspects in float64; needs torch)\n"
        "       ptdbg-tui repro NPU_DUMP CALL -o DIR  (a call's standalone repro for the kernel team)\n"
        "       ptdbg-tui check DUMP  (one dump: where its first NaN/Inf comes from)\n"
        "       ptdbg-tui monitor NPU_MON BENCH_MON [--narrow] [--follow]  (two trainings' monitors: "
        "which step and module diverge first)\n"
        "       ptdbg-tui demo [DIR]  (dumps a small model twice, then opens the app on it)",
        description="Live terminal explorer of an NPU dump against a benchmark dump; of one dump alone, "
        "where its first NaN or Inf comes from.",
        epilog="Other commands: 'ptdbg-tui compare --help', 'ptdbg-tui replay --help', "
        "'ptdbg-tui repro --help', 'ptdbg-tui check --help', 'ptdbg-tui narrow --help', "
        "'ptdbg-tui monitor --help', "
        "'ptdbg-tui demo --help'.",
    )
    _common(p, alone=True)
    p.add_argument(
        "--poll", action="store_true", help="poll the folders instead of inotify (network filesystems)"
    )
    p.add_argument("--no-watch", action="store_true", help="compare once and stay static")
    p.add_argument("--theme", default=None, help="Textual theme name (e.g. textual-light, nord)")
    _replay_options(p)
    return p


def demo_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ptdbg-tui demo",
        description="Dump a small CenterNet-like model twice (one run with a faulty "
        "LSTM backward) with the project's dumper, then open the app.",
    )
    p.add_argument(
        "dir", nargs="?", default="./ptdbg_demo", help="where the demo dumps go (default: ./ptdbg_demo)"
    )
    p.add_argument("--no-app", action="store_true", help="write the dumps and print their paths only")
    _version(p)
    p.add_argument("--theme", default=None, help="Textual theme name")
    return p


def say(text: str, file: TextIO | None = None) -> None:
    """Print a line of the report: dump text in it (names, module paths, stack lines) can hold
    terminal escapes (an OSC 52 that sets the clipboard, a title, a cleared screen) and bidi overrides,
    which go to the terminal as escapes (``\\x1b``), never as they are. Flushed: a reader waits on it."""
    from ptdbg_tui.formats.untrusted import printable

    print(printable(text), file=sys.stdout if file is None else file, flush=True)


def _never_unprintable() -> None:
    """A name or path the terminal's encoding cannot show (an ASCII or GBK console, a surrogate from
    a damaged dump) prints escaped instead of ending the run with UnicodeEncodeError."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")


def _one_blas_thread() -> None:
    """The reader's own process does no heavy linear algebra (the metric workers do, one thread
    each), but an idle OpenBLAS pool spins: on 2 cores it cost a compare ~0.3 s of CPU and 15% of
    its wall time. Set before numpy is imported; a user's own setting wins."""
    from ptdbg_tui.engine.workers.pool import THREAD_ENV

    for var, value in THREAD_ENV.items():
        os.environ.setdefault(var, value)


# --- ptdbg-tui compare: the headless report (its words: compare.report.words) -------------------


def report_text(outcomes: Outcomes) -> str:
    """The whole report (:func:`~ptdbg_tui.compare.report.words.job_report_text`; imported when a
    compare ends, not when the CLI starts)."""
    from ptdbg_tui.compare.report.words import job_report_text

    return job_report_text(outcomes)


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
        text = self.text(done, total, done / max(now - self.start, 1e-9))
        if self.tty:
            width = 30
            fill = int(frac * width)
            self.stream.write(f"\r[{'#' * fill}{'.' * (width - fill)}] {frac:6.1%}  {text}")
            self.drawn = True
        else:
            self.stream.write(f"{self.verb} {frac:6.1%}  {text}\n")
        self.stream.flush()

    verb = "compared"

    def text(self, done: int, total: int, rate: float) -> str:
        """The progress in numbers (bytes compared)."""
        return f"{done / 1e9:.2f}/{total / 1e9:.2f} GB  {rate / 1e9:.2f} GB/s"

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\r\033[K")
            self.stream.flush()


def output_problem(output: str) -> str | None:
    """Why ``-o`` cannot take a command's files, told before the compare and replay run: a file in the
    way was otherwise found only when the CSV was written, after minutes of work ('File exists')."""
    from pathlib import Path

    path = Path(output)
    for p in (path, *path.parents):  # the folder, or the nearest existing one it would be made in
        if p.exists():
            if not p.is_dir():
                return f"{p} is a file, not a folder (-o names the folder the files go in)"
            return None if os.access(p, os.W_OK | os.X_OK) else f"{p}: permission denied"
    return None


def unwritable(prog: str, output: str, e: OSError) -> int:
    """A command's output folder that cannot be written: one line, and the usage exit code."""
    say(f"{prog}: error: cannot write to {output}: {e.strerror or e}", file=sys.stderr)
    return EXIT_USAGE


def failure(prog: str, e: BaseException, usage: tuple[type[Exception], ...]) -> int:
    """What a command stopped on, in one line on stderr, and its exit code: the inputs (``usage``), an
    interrupt, or a bug (one line, not a traceback over the user's terminal)."""
    from ptdbg_tui.engine.batch import fault_text

    if isinstance(e, usage):
        say(f"{prog}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    if isinstance(e, KeyboardInterrupt):
        say(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    assert isinstance(e, Exception)
    say(f"{prog}: internal error (please report it): {fault_text(e)}", file=sys.stderr)
    return EXIT_INTERNAL


def run_compare(args: argparse.Namespace) -> int:
    """``ptdbg-tui compare``: 0 when it ran, 2 with a one-line reason when it could not."""
    from ptdbg_tui.engine.batch import CompareInputError, compare_dumps
    from ptdbg_tui.engine.workers.cluster import ClusterError, require

    prog = "ptdbg-tui compare"
    if args.jobs is not None and args.jobs < 1:
        say(f"{prog}: error: --jobs must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    if (problem := output_problem(args.output)) is not None:
        say(f"{prog}: error: cannot write the CSV to {args.output}: {problem}", file=sys.stderr)
        return EXIT_USAGE
    try:
        if args.cluster is not None:
            require(args.cluster)
    except ClusterError as e:
        say(f"{prog}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    bar = _Bar(sys.stderr, not args.no_progress)
    try:
        outcomes = compare_dumps(
            args.npu,
            args.bench,
            step=args.step,
            rank=args.rank,
            match=args.match,
            summary=args.summary,
            jobs=args.jobs,
            cluster=args.cluster,
            progress=bar,
            write=_csv_writer(args),
        )
    except (Exception, KeyboardInterrupt) as e:
        return failure(prog, e, (CompareInputError, ClusterError))
    finally:
        bar.close()
    _leave(outcomes)
    if (code := _default_replay(prog, args, outcomes)) != EXIT_OK:
        return code
    if (code := _write_outputs(prog, args, outcomes)) != EXIT_OK:
        return code
    try:
        say(report_text(outcomes))
    except BrokenPipeError:  # the reader left (``| head``); the CSV is written, nothing is lost
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return EXIT_OK


def _default_replay(prog: str, args: argparse.Namespace, outcomes: Outcomes) -> int:
    """The compare's replay: by default the suspects whose inputs already differ, where torch is
    importable (else one note says why not); every call worth replaying with ``--replay`` (torch
    required); none with ``--no-replay``. Then the note where a replay of every call could still name a
    kernel."""
    from ptdbg_tui.engine.replay.replayer import ReplayUnavailable, not_run_note, replay_note, require_torch

    if args.replay:
        budget = REPLAY_BUDGET_S if args.replay_budget is None else args.replay_budget
        return _replay(prog, args, outcomes, budget, args.replay_top, full=True)[0]
    why = "--no-replay" if args.no_replay else ""
    if not why:
        try:
            require_torch()
        except ReplayUnavailable as e:
            why = str(e)
    if why:
        outcomes.notes += not_run_note(outcomes, why)
    else:
        budget = DEFAULT_REPLAY_BUDGET_S if args.replay_budget is None else args.replay_budget
        if (code := _replay(prog, args, outcomes, budget, args.replay_top, full=False)[0]) != EXIT_OK:
            return code
    outcomes.notes += replay_note(outcomes)
    return EXIT_OK


def _write_outputs(prog: str, args: argparse.Namespace, outcomes: Outcomes) -> int:
    """Each pair's CSV (unless the compare wrote it: :func:`_csv_writer`), suspects and advisor file."""
    from ptdbg_tui.compare.report.advisor import write_advisor
    from ptdbg_tui.compare.report.outputs import pair_suffix
    from ptdbg_tui.compare.report.suspects import write_suspects
    from ptdbg_tui.engine.gcpolicy import fewer_collections, long_lived

    write = _csv_writer(args)
    several = len(outcomes) > 1
    try:
        with fewer_collections():  # the rows stay: a full collection would scan them all (a second)
            long_lived()
            for o in outcomes:
                if o.csv is not None and not several and pair_suffix(o.npu, o.bench) in o.csv.name:
                    o.csv.unlink()  # written for a job of several pairs, of which one could be read
                    o.csv = None
                if o.csv is None:
                    o.csv = write(o, several)
                write_suspects(o.diagnosis, o.csv)
                o.advisor = write_advisor(o.rows, o.diagnosis, o.csv, o.no_verdict)
    except OSError as e:
        say(f"{prog}: error: cannot write the CSV to {args.output}: {e.strerror or e}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


def _csv_writer(args: argparse.Namespace) -> WriteFn:
    """A pair's CSV as ``ptdbg-tui compare`` writes it; the compare runs it as soon as a pair of
    statistics is compared (in the child that diagnoses it, while the next pair is read)."""
    from ptdbg_tui.compare.report.outputs import pair_suffix, write_pair_csv

    def write(o: PairOutcome, several: bool) -> Path:
        return write_pair_csv(
            o.rows,
            args.output,
            o.npu,
            args.format,
            stack_mode=args.stack,
            summary=o.summary,
            suffix=pair_suffix(o.npu, o.bench) if several else "",
        )

    return write


def run_replay(args: argparse.Namespace) -> int:
    """``ptdbg-tui replay``: compare, then replay the chosen calls; one line per call and the CSV."""
    from ptdbg_tui.compare.report.replays import write_replays
    from ptdbg_tui.compare.report.words import replay_report_lines
    from ptdbg_tui.engine.batch import CompareInputError, compare_dumps
    from ptdbg_tui.engine.replay.replayer import ReplayUnavailable, require_torch

    prog = "ptdbg-tui replay"
    if (problem := output_problem(args.output)) is not None:
        say(f"{prog}: error: cannot write to {args.output}: {problem}", file=sys.stderr)
        return EXIT_USAGE
    try:
        require_torch()  # before the comparison, not after it
        outcomes = compare_dumps(
            args.npu, args.bench, step=args.step, rank=args.rank, match=args.match, jobs=args.jobs
        )
    except (Exception, KeyboardInterrupt) as e:
        return failure(prog, e, (ReplayUnavailable, CompareInputError))
    code, done = _replay(prog, args, outcomes, args.budget, args.top, args.call)
    if code != EXIT_OK:
        return code
    try:
        path = write_replays(((label, r) for label, got in done.items() for r in got.values()), args.output)
    except OSError as e:
        return unwritable(prog, args.output, e)
    say("\n".join(replay_report_lines(outcomes, done, path)))
    return EXIT_OK


def run_repro(args: argparse.Namespace) -> int:
    """``ptdbg-tui repro``: 0 when the repro is written, 2 with a one-line reason when it cannot be."""
    from ptdbg_tui.compare.replay.plan import CannotReplay
    from ptdbg_tui.compare.report.words import repro_verdict_text
    from ptdbg_tui.engine.replay.replayer import (
        ReplayUnavailable,
        ReproInputError,
        repro_of_dump,
        require_torch,
    )

    prog = "ptdbg-tui repro"
    try:
        require_torch()
        written = repro_of_dump(
            args.npu, args.call, args.output, step=args.step, rank=args.rank, device=args.device
        )
    except CannotReplay as e:
        say(f"{prog}: {args.call}: not replayable: {e}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as e:
        return unwritable(prog, args.output, e)
    except (Exception, KeyboardInterrupt) as e:
        return failure(prog, e, (ReplayUnavailable, ReproInputError))
    complete = "" if written.complete else " (the dump records no keyword arguments: rebuilt without them)"
    say(f"{written.script}: {repro_verdict_text(written.verdict)}{complete}\nrun: python {written.script}")
    return EXIT_OK


def run_check(args: argparse.Namespace) -> int:
    """``ptdbg-tui check``: 0 when the dump was checked (whatever it holds), 2 with a one-line reason
    when it cannot be read."""
    from ptdbg_tui.compare.report.words import check_walk_lines
    from ptdbg_tui.engine.replay.check import check_walk
    from ptdbg_tui.engine.replay.replayer import ReproInputError

    try:
        walk = check_walk(args.dump, args.step, args.rank, replay=not args.no_replay)
    except (Exception, KeyboardInterrupt) as e:
        return failure("ptdbg-tui check", e, (ReproInputError,))
    found = [(d.label, c.origin, c.bad) for d, c in walk.found]
    lines = check_walk_lines(args.dump, found, walk.dumps, walk.steps)
    say("\n".join(lines))
    return EXIT_OK


def _replay(
    prog: str,
    args: argparse.Namespace,
    outcomes: Outcomes,
    budget_s: float,
    top: int,
    calls: Sequence[str] | None = None,
    full: bool = True,
) -> tuple[int, dict[str, dict[str, CallReplay]]]:
    """Replay the compared pairs' calls (``calls``, else the most telling ones; not ``full``: the
    suspects whose inputs already differ) and fold the verdicts into their diagnoses: the exit code so
    far, and the replays by pair and call."""
    from ptdbg_tui.engine.replay.replayer import ReplayUnavailable, replay_outcomes, require_torch

    try:
        require_torch()
    except ReplayUnavailable as e:
        say(f"{prog}: error: {e}", file=sys.stderr)
        return EXIT_USAGE, {}
    progress = _Counter(sys.stderr, not args.no_progress)
    try:
        done = replay_outcomes(
            outcomes, budget_s=budget_s, top=top, calls=calls, progress=progress, full=full
        )
    except KeyboardInterrupt:
        say(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED, {}
    finally:
        progress.close()
    return EXIT_OK, done


class _Counter(_Bar):
    """Progress counted in calls replayed, not bytes."""

    verb = "replayed"

    def text(self, done: int, total: int, rate: float) -> str:
        return f"{done}/{total} calls  {rate:.1f}/s"


# --- ptdbg-tui narrow: the next dump's config ------------------------------------------------


def run_narrow(args: argparse.Namespace) -> int:
    """``ptdbg-tui narrow``: a statistics compare, then the next dump's config and commands."""
    from dataclasses import replace

    from ptdbg_tui.engine.batch import CompareInputError, compare_dumps
    from ptdbg_tui.engine.narrow import (
        NarrowError,
        NothingToNarrow,
        default_config,
        narrowing_of,
        write_narrowing,
    )

    prog = "ptdbg-tui narrow"
    try:
        outcomes = compare_dumps(
            args.npu, args.bench, step=args.step, rank=args.rank, match=args.match, summary=True
        )
        narrowing = narrowing_of(outcomes, call=args.call, module=args.module)
    except NothingToNarrow as e:
        print(f"{report_text(outcomes)}\nnothing to narrow: {e}", flush=True)
        return EXIT_NOTHING_TO_NARROW
    except (Exception, KeyboardInterrupt) as e:
        return failure(prog, e, (CompareInputError, NarrowError))
    if args.script:
        narrowing = replace(narrowing, script=args.script)
    config = args.output or default_config(narrowing.target)
    try:
        written = write_narrowing(narrowing, config, args.dump_path)
    except OSError as e:
        say(f"{prog}: error: cannot write {config}: {e.strerror or e}", file=sys.stderr)
        return EXIT_USAGE
    say("\n".join([report_text(outcomes), *written.lines]))
    return EXIT_OK


# --- ptdbg-tui monitor: two trainings' monitors ------------------------------------------------


def _followed(prog: str, follow: Any, interval: float) -> Any:
    """Read both streams until both end or Ctrl-C, saying each time the verdict changes; the last
    analysis (None: Ctrl-C before either side had a whole step)."""
    from ptdbg_tui.compare.monitor import MonitorInputError
    from ptdbg_tui.compare.report.monitor_words import FIRST_STEP

    said, analysis = None, None
    try:
        while True:
            if follow.poll() or analysis is None:
                try:
                    analysis = follow.analysis()
                except MonitorInputError:  # a side without a whole step yet
                    analysis = None
                if analysis is not None:
                    first = analysis.first
                    now = (first.step, first.module, first.name) if first is not None else None
                    steps = min(r.aligned for r in analysis.ranks)
                    if now != said:
                        where = "none" if first is None else f"{first.step}, {first.name}"
                        say(f"{prog}: {steps} steps aligned; {FIRST_STEP}: {where}", file=sys.stderr)
                        said = now
            if follow.ended:
                return analysis
            time.sleep(interval)
    except KeyboardInterrupt:
        say(f"{prog}: stopped following; the report of the steps read", file=sys.stderr)
    return analysis


def run_monitor(args: argparse.Namespace) -> int:
    """``ptdbg-tui monitor``: 0 when the folders were compared, 2 with a one-line reason when they
    cannot be, 4 when ``--narrow`` has nothing to narrow to."""
    from ptdbg_tui.compare.monitor import Follow, MonitorInputError
    from ptdbg_tui.compare.report.monitor_words import monitor_lines
    from ptdbg_tui.engine.monitor_narrow import first_narrowing
    from ptdbg_tui.engine.narrow import NarrowError, default_config, write_narrowing
    from ptdbg_tui.formats.monitor import MonitorUnavailable

    prog = "ptdbg-tui monitor"
    try:
        follow = Follow(args.npu, args.bench)
        if args.follow:
            analysis = _followed(prog, follow, max(0.1, args.interval))
            if analysis is None:
                say(f"{prog}: error: no side had a whole step to compare", file=sys.stderr)
                return EXIT_USAGE
        else:
            follow.poll()
            analysis = follow.analysis()
    except MonitorUnavailable as e:
        say(f"{prog}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except (Exception, KeyboardInterrupt) as e:
        return failure(prog, e, (MonitorInputError,))
    lines = monitor_lines(analysis)
    if not args.narrow:
        say("\n".join(lines))
        return EXIT_OK
    try:
        narrowing = first_narrowing(analysis, args.script)
    except NarrowError as e:  # NothingToNarrow too
        say("\n".join([*lines, f"nothing to narrow: {e}"]))
        return EXIT_NOTHING_TO_NARROW
    config = args.output or default_config(narrowing.target)
    try:
        written = write_narrowing(narrowing, config, args.dump_path)
    except OSError as e:
        say(f"{prog}: error: cannot write {config}: {e.strerror or e}", file=sys.stderr)
        return EXIT_USAGE
    say("\n".join([*lines, *written.lines]))
    return EXIT_OK


# --- the app and the demo ---------------------------------------------------------------------


def options_from(args: argparse.Namespace) -> LiveOptions:
    from ptdbg_tui.engine.live.options import LiveOptions

    return LiveOptions(
        step=args.step,
        rank=args.rank,
        match=args.match,
        summary=args.summary,
        jobs=max(1, args.jobs),
        watch=not args.no_watch,
        poll=args.poll,
        cluster=args.cluster,
        replay_budget_s=max(0.0, args.replay_budget),
        replay_top=args.replay_top,
    )


def _single_screen_app(args: argparse.Namespace) -> App[None] | None:
    """The app of one dump alone (its check) or of two trainings' monitor folders without a dump (the
    Steps screen); None: the call tree's."""
    if args.bench is None:
        from ptdbg_tui.app.check import CheckApp

        return CheckApp(args.npu, args.step, args.rank)
    from ptdbg_tui.app.steps import StepsApp, opens_on_steps

    return StepsApp(args.npu, args.bench) if opens_on_steps(args.npu, args.bench) else None


def run_app(args: argparse.Namespace) -> int:
    """Open the app; with ``--no-watch`` both dumps must already exist. One dump alone: its check; two
    monitor folders: the Steps screen."""
    if (single := _single_screen_app(args)) is not None:
        if not set_theme(single, args.theme):
            return EXIT_USAGE
        single.run()
        return EXIT_OK
    if args.cluster is not None:
        from ptdbg_tui.engine.workers.cluster import ClusterError, require

        try:
            require(args.cluster)
        except ClusterError as e:
            say(f"ptdbg-tui: {e}", file=sys.stderr)
            return EXIT_USAGE
    from ptdbg_tui.compare.report.layout_words import layout_error_text
    from ptdbg_tui.formats.layout import DumpLayoutError, discover

    if args.no_watch:
        for path in (args.npu, args.bench):
            try:
                discover(path)
            except DumpLayoutError as e:
                say(f"ptdbg-tui: {layout_error_text(e)}", file=sys.stderr)
                return EXIT_USAGE
    from ptdbg_tui.app.app import PtdbgApp

    app = PtdbgApp(args.npu, args.bench, options_from(args), args.format)
    if not set_theme(app, args.theme):
        return EXIT_USAGE
    app.run()
    _leave(app, ended=not app.engine.alive)
    return EXIT_OK


def set_theme(app: App[Any], theme: str | None) -> bool:
    """Apply ``--theme``; an unknown name is reported with the available ones."""
    if theme is None:
        return True
    if app.get_theme(theme) is None:
        say(
            f"ptdbg-tui: unknown theme {theme!r}; available: {', '.join(sorted(app.available_themes))}",
            file=sys.stderr,
        )
        return False
    app.theme = theme
    return True


def run_demo(args: argparse.Namespace) -> int:
    from ptdbg_tui.demo import write_demo

    try:
        npu, bench = write_demo(args.dir)
    except ImportError as e:
        say(
            f"ptdbg-tui demo needs torch to dump its model ({e}).\n"
            "Install it with: pip install torch==2.13.0 && pip install -e '.[dump]'",
            file=sys.stderr,
        )
        return EXIT_MISSING_TORCH
    say(f"NPU dump:   {npu}\nbench dump: {bench}")
    if args.no_app:  # what to run next, as the app would have shown it
        dumps = f"{shlex.quote(str(npu))} {shlex.quote(str(bench))}"
        say(f"open them:  ptdbg-tui {dumps}\nor compare: ptdbg-tui compare {dumps} -o out")
        return EXIT_OK
    from ptdbg_tui.app.app import PtdbgApp
    from ptdbg_tui.engine.live.options import LiveOptions

    app = PtdbgApp(npu, bench, LiveOptions(watch=False, replay_budget_s=REPLAY_BUDGET_S))
    if not set_theme(app, args.theme):
        return EXIT_USAGE
    app.run()
    return EXIT_OK


#: Commands that end by leaving their memory to the operating system (:func:`run`), as the app does.
_QUICK_EXIT = ("compare", "narrow", "monitor")
#: Where such a command leaves what it compared, so that it is not freed as its function returns (an
#: LLM job's millions of objects, ~0.2 s of CPU after the report); ``None`` where the caller goes on.
_LEFT: list[object] | None = None


def _leave(done: object, ended: bool = True) -> None:
    """Leave ``done`` to the operating system where the program ends next (:func:`run`); ``ended``
    False: something of the command still runs (a thread that did not stop in time), which the usual
    exit waits for."""
    global _LEFT
    if _LEFT is not None:
        _LEFT = [*_LEFT, done] if ended else None


def run() -> None:
    """The ``ptdbg-tui`` program: :func:`main`; a headless compare (or narrow) then exits without
    freeing its rows one by one (an LLM job's millions of objects took half a second of its six, once
    everything was written; the program ends anyway, and tests call :func:`main`), and so does the app
    once its terminal is restored (3 s after ``q`` on the LLM pair, freeing what it showed)."""
    global _LEFT
    command = sys.argv[1] if sys.argv[1:2] else ""
    opens_app = command != "compare" and command not in _RUNS  # as main() dispatches
    _LEFT = [] if command in _QUICK_EXIT or opens_app else None
    code = main()
    if _LEFT is not None:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):  # a reader that left, a closed stream
                stream.flush()
        os._exit(code)
    sys.exit(code)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    _never_unprintable()
    command = argv[0] if argv else ""
    if command != "demo":
        _one_blas_thread()
    if command == "compare":
        args = compare_parser().parse_args(argv[1:])
        if args.cluster is None and not args.summary and (args.jobs is None or args.jobs > 1):
            from ptdbg_tui.engine.workers.pool import FUSED_BYTES, job_size, prestart

            # the workers' fork server loads numpy (a big job: numba and the kernel) while we import and
            # read; none for statistics alone, where it would only take a core from the reading
            if size := job_size([args.npu, args.bench]):
                prestart(fused=size >= FUSED_BYTES)
        return run_compare(args)
    if command in _RUNS:
        parser, run_command = _RUNS[command]
        return run_command(parser().parse_args(argv[1:]))
    return run_app(app_parser().parse_args(argv))


#: The commands besides ``compare`` (:func:`main`), each its parser and its function; any other first
#: argument opens the app.
_RUNS: dict[str, tuple[Callable[[], argparse.ArgumentParser], Callable[[argparse.Namespace], int]]] = {
    "replay": (replay_parser, run_replay),
    "repro": (repro_parser, run_repro),
    "check": (check_parser, run_check),
    "narrow": (narrow_parser, run_narrow),
    "monitor": (monitor_parser, run_monitor),
    "demo": (demo_parser, run_demo),
}


if __name__ == "__main__":
    sys.exit(main())
