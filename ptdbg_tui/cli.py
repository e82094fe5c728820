"""Command line: ``ptdbg-tui NPU BENCH`` (the app), ``ptdbg-tui compare ...``, ``ptdbg-tui demo``.

Heavy imports (textual, torch) happen inside the chosen command so that ``--help`` and
the headless compare start fast.
"""

from __future__ import annotations

import argparse
import os
import sys

EXIT_OK = 0
EXIT_USAGE = 2


def _version(p: argparse.ArgumentParser) -> None:
    from ptdbg_tui import __version__

    p.add_argument("--version", action="version", version=f"ptdbg-tui {__version__}")


def _common(p: argparse.ArgumentParser) -> None:
    _version(p)
    p.add_argument("npu", metavar="NPU_DIR",
                   help="NPU dump (ptdbg or msprobe): dump_path root, step or rank dir, a .pkl or dump.json")
    p.add_argument("bench", metavar="BENCH_DIR", help="benchmark (GPU/CPU) dump, same forms")
    p.add_argument("--step", type=int, default=None, help="compare this step only")
    p.add_argument("--rank", type=int, default=None, help="compare this (NPU) rank only")
    p.add_argument(
        "--match",
        choices=("auto", "exact", "fuzzy", "align"),
        default="auto",
        help="pairing of entries: auto (default: exact names, aligned when that leaves calls unpaired on "
        "both sides or shapes that differ), exact names, call index dropped, or sequence alignment "
        "that survives extra/missing calls",
    )
    p.add_argument("--summary", action="store_true",
                   help="compare statistics only, even if tensor files exist")
    p.add_argument("--format", choices=("ptdbg", "msprobe"), default=None,
                   help="the CSV's columns: ptdbg_ascend's or msprobe's (default: the NPU dump's format)")
    p.add_argument(
        "--jobs", type=int, default=os.cpu_count() or 1, help="worker processes (default: all cores)"
    )
    p.add_argument("--cluster", default=None, metavar="ADDRESS",
                   help="compare on a Dask cluster: a scheduler's tcp://host:port, or local:N for N local "
                   'worker processes (needs pip install "ptdbg-tui[cluster]")')


def compare_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ptdbg-tui compare",
        description="Compare two dumps headlessly and write compare_result_<ts>.csv.",
    )
    _common(p)
    p.add_argument("-o", "--output", default=".", metavar="OUT_DIR", help="where the CSV goes (default: .)")
    p.add_argument("--stack", action="store_true", help="add the NPU_Stack_Info column")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    return p


def app_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ptdbg-tui",
        description="Live terminal explorer of an NPU dump against a benchmark dump.",
        epilog="Other commands: 'ptdbg-tui compare --help', 'ptdbg-tui demo --help'.",
    )
    _common(p)
    p.add_argument(
        "--poll", action="store_true", help="poll the folders instead of inotify (network filesystems)"
    )
    p.add_argument("--no-watch", action="store_true", help="compare once and stay static")
    p.add_argument("--theme", default=None, help="Textual theme name (e.g. textual-light, nord)")
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
    from ptdbg_tui.engine.pool import THREAD_ENV

    for var, value in THREAD_ENV.items():
        os.environ.setdefault(var, value)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    _never_unprintable()
    command = argv[0] if argv else ""
    if command != "demo":
        _one_blas_thread()
    if command == "compare":
        args = compare_parser().parse_args(argv[1:])
        if args.cluster is None and not args.summary and (args.jobs is None or args.jobs > 1):
            from ptdbg_tui.engine.pool import big_job, prestart

            # the workers' fork server loads numpy (a big job: numba and the kernel) while we import and read
            prestart(fused=big_job([args.npu, args.bench]))
        from ptdbg_tui.engine.batch import run_cli

        return run_cli(args)
    if command == "demo":
        from ptdbg_tui.demo import run_demo

        return run_demo(demo_parser().parse_args(argv[1:]))
    from ptdbg_tui.app.main import run_app

    return run_app(app_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
