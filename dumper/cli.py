"""``ptdbg-dump run train.py [args...] --dump-path DIR``: dump a script without editing it.

The dumper's own options may stand before or after the script path; everything after ``--`` goes
to the script untouched. With ``--step``, a step ends at every ``optimizer.step()`` (a global
optimizer hook), so ``--step 0`` dumps the first training iteration and then gets out of the way.
``--config FILE`` takes every option from a JSON file (its schema:
:mod:`ptdbg_tui.formats.dump_options`); options on the command line override the file's. Every
option is checked before the script starts.
"""

from __future__ import annotations

import argparse
import logging
import os
import runpy
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from torch.optim.optimizer import register_optimizer_step_post_hook
from torch.utils.hooks import RemovableHandle

from dumper.config import MODES, ConfigError
from dumper.debugger import PrecisionDebugger
from dumper.manifest import ManifestRecorder, SeenModules
from dumper.monitor import Monitor
from ptdbg_tui.formats.dump_options import SUMMARY_MODES, DumpOptions, OptionsError, read_options
from ptdbg_tui.formats.monitor import MonitorUnavailable

_FLAGS = ("--summary-only", "--keep-dropout")
_OPTIONS = (
    "--dump-path",
    "--mode",
    "--step",
    "--scope",
    "--api-list",
    "--module",
    "--rank",
    "--config",
    "--summary-mode",
    "--monitor",
    "--monitor-dir",
    "--every",
    *_FLAGS,
)
#: The options of a dump, which a monitored run does not take.
_DUMP_ONLY = (
    "dump_path",
    "mode",
    "step",
    "scope",
    "api_list",
    "module",
    "rank",  # every rank monitors, into its own file
    "config",
    "summary_only",
    "summary_mode",
    "keep_dropout",
)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ptdbg-dump", description="Dump a training script's API calls in ptdbg_ascend v4 format."
    )
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser(
        "run",
        help="run SCRIPT under the dumper",
        usage="ptdbg-dump run SCRIPT [ARGS...] --dump-path DIR [--mode M] [--step N ...] "
        "[--module PATH ...] [--rank R ...] [--config FILE]",
    )
    run.add_argument("--dump-path", help="where ptdbg_dump_v4.0/ is written (required here or in --config)")
    run.add_argument("--mode", choices=MODES, help="default: api_stack")
    run.add_argument(
        "--step",
        type=int,
        nargs="+",
        help="training steps to dump (a step ends at each optimizer.step()); default: all, "
        "without a stepN level",
    )
    run.add_argument("--scope", nargs="+", help="call names for modes list/range/stack")
    run.add_argument("--api-list", nargs="+", help="API name parts for mode api_list")
    run.add_argument(
        "--module",
        nargs="+",
        action="extend",
        help="dump only the calls made inside these modules (paths as the module sidecar "
        "names them, e.g. track.lstm; submodules included), with their backward",
    )
    run.add_argument(
        "--rank",
        type=int,
        nargs="+",
        help="dump only these ranks (the others run undumped); one rank also names the "
        "rank folder of a job that is not distributed",
    )
    run.add_argument("--config", help="a JSON file of options (keys: the long options with underscores)")
    run.add_argument(
        "--summary-only", action="store_true", default=None, help="write the pkl only, no npy files"
    )
    run.add_argument(
        "--summary-mode",
        choices=SUMMARY_MODES,
        help="md5: also a CRC-32 of each tensor's bytes (implies --summary-only), so that two "
        "runs on the same device compare by equality; default: statistics",
    )
    run.add_argument("--keep-dropout", action="store_true", default=None, help="do not force dropout to p=0")
    run.add_argument(
        "--monitor",
        "--monitor-dir",  # under torchrun: its own parser takes --monitor for its --monitor-interval
        metavar="DIR",
        help="monitor the training instead of dumping it: every --every steps, the loss, lr, loss "
        "scale, each module's output statistics and each parameter's gradient, update and value norms, "
        "appended to DIR/monitor_rank<R>.arrows (docs/monitor.md); under torchrun write --monitor-dir",
    )
    run.add_argument(
        "--every", type=_positive, default=1, metavar="N", help="with --monitor: every N-th step"
    )
    return p


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def split_args(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """(dumper arguments, script path and its arguments)."""
    ours: list[str] = []
    script: list[str] = []
    args = list(argv)
    if args and args[0] == "run":
        ours.append(args.pop(0))
    taking = False  # the values of a multi-value option of ours
    while args:
        a = args.pop(0)
        if a == "--":
            script += args
            break
        if a.split("=", 1)[0] in _OPTIONS or (a in ("-h", "--help") and not script):
            ours.append(a)
            taking = "=" not in a and a not in _FLAGS
        elif taking and not a.startswith("-") and (script or not a.endswith(".py")):
            ours.append(a)
        else:
            taking = False
            script.append(a)
    return ours, script


def _options(ns: argparse.Namespace) -> DumpOptions:
    """The options file's, overridden by those given on the command line."""
    given = DumpOptions(
        dump_path=ns.dump_path,
        mode=ns.mode,
        step=ns.step,
        rank=ns.rank,
        scope=ns.scope,
        api_list=ns.api_list,
        module=ns.module,
        summary_only=ns.summary_only,
        summary_mode=ns.summary_mode,
        keep_dropout=ns.keep_dropout,
    )
    if not ns.config:
        return given
    base = read_options(ns.config)
    for key, value in asdict(given).items():  # said, so that a stale option on either side is seen
        old = getattr(base, key)
        if value is not None and old is not None and old != value:
            flag = f"--{key.replace('_', '-')}" + ("" if isinstance(value, bool) else f" {_shown(value)}")
            logging.getLogger(__name__).info(
                "ptdbg-dump: %s on the command line overrides %s's %s: %s", flag, ns.config, key, _shown(old)
            )
    return base.overridden(given)


def _shown(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return " ".join(map(str, value)) if isinstance(value, list) else str(value)


def _step_hook(debugger: PrecisionDebugger, steps: bool) -> RemovableHandle:
    """Each ``optimizer.step()`` ends a step: with ``--step``, the dump's (its folders); without, it is
    only counted, for the call sidecar to say each call's step."""
    if steps:
        return register_optimizer_step_post_hook(lambda optimizer, args, kwargs: debugger.step())
    session = debugger.session

    def counted(optimizer: object, args: object, kwargs: object) -> None:
        session.optimizer_steps += 1

    return register_optimizer_step_post_hook(counted)


def main(argv: Sequence[str] | None = None) -> int:
    ours, script = split_args(sys.argv[1:] if argv is None else argv)
    parser = _parser()
    ns = parser.parse_args(ours)
    if not script:
        parser.error("run: the script to run is missing")
    path = Path(script[0])
    if not path.is_file():
        parser.error(f"run: {path} is not a file")
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if ns.monitor:
        return _monitored(parser, ns, path, script)
    try:
        opts = _options(ns)
        if not opts.dump_path:
            raise ConfigError("run: --dump-path DIR is required (on the command line or in --config)")
        debugger = PrecisionDebugger.from_options(opts)
    except (ConfigError, OptionsError) as e:
        parser.error(str(e))
    hook = _step_hook(debugger, bool(opts.step))
    debugger.start()
    try:
        code, raised = _run_recorded(path, script, Path(opts.dump_path))
    finally:
        debugger.stop()
        hook.remove()
    if raised is not None:
        _say_stopped(opts, raised, debugger)
    elif not debugger.session.dumped and not debugger.session.left_out:
        _say_nothing_dumped(opts, debugger.session.step)
    return code


def _monitored(parser: argparse.ArgumentParser, ns: argparse.Namespace, path: Path, script: list[str]) -> int:
    """``--monitor DIR``: the script run under the monitor, no dump."""
    given = [f"--{k.replace('_', '-')}" for k in _DUMP_ONLY if getattr(ns, k) not in (None, False)]
    if given:
        parser.error(f"run: --monitor records no dump: {', '.join(given)} cannot go with it")
    modules = SeenModules()
    try:
        monitor = Monitor(Path(ns.monitor).absolute(), ns.every, modules)
        monitor.install()
    except MonitorUnavailable as e:
        parser.error(str(e))
    try:
        code, raised = _run_recorded(path, script, monitor.folder, modules)
    finally:
        monitor.remove()
    log = logging.getLogger(__name__)
    if raised is not None:
        log.warning(
            "ptdbg-dump: the script stopped on %s; the steps it finished are in %s",
            type(raised).__name__,
            ns.monitor,
        )
    elif not monitor.iteration:  # the monitor records at each step's end: a script without one has none
        log.warning(
            "ptdbg-dump: the monitor recorded no step: no optimizer.step() ran in this process "
            "(a script whose ranks are spawned is monitored by running the launcher around it)"
        )
    return code


def _run_recorded(
    path: Path, script: list[str], folder: Path, modules: SeenModules | None = None
) -> tuple[int, BaseException | None]:
    """The script run as ``python SCRIPT ARGS`` would, with its run manifest written into ``folder``."""
    modules = modules or SeenModules()
    manifest = ManifestRecorder(folder, [str(path), *script[1:]], modules)
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [str(path), *script[1:]]
    sys.path.insert(0, str(path.resolve().parent))
    modules.install()
    manifest.install()
    try:
        return _run_script(path)
    finally:
        manifest.remove()
        modules.remove()
        sys.argv, sys.path[:] = saved_argv, saved_path


def _say_stopped(opts: DumpOptions, raised: BaseException, debugger: PrecisionDebugger) -> None:
    """A script that raised: whether what ran before is dumped. Nothing dumped is then the
    exception's doing, not spawned processes' (a missing data file read before the first call)."""
    log, name = logging.getLogger(__name__), type(raised).__name__
    if debugger.session.dumped or debugger.session.left_out:
        log.warning(
            "ptdbg-dump: the script stopped on %s; the calls it made before are dumped in %s",
            name,
            opts.dump_path,
        )
        return
    when = _in_steps(opts, debugger.session.step)
    log.warning(
        "ptdbg-dump: nothing was dumped to %s: the script stopped on %s before any API call%s was recorded",
        opts.dump_path,
        name,
        when,
    )


def _run_script(path: Path) -> tuple[int, BaseException | None]:
    """Run the script as ``python SCRIPT`` does: its exit code, and the exception it stopped on."""
    try:
        # its __file__ absolute, so a script that changes its directory still finds the files beside it
        runpy.run_path(os.path.abspath(path), run_name="__main__")
    except SystemExit as e:
        if not isinstance(e.code, int | None):  # sys.exit("message"): Python prints it, so do we
            print(e.code, file=sys.stderr)
        return (e.code if isinstance(e.code, int) else (0 if e.code is None else 1)), None
    except (Exception, KeyboardInterrupt) as e:
        _print_script_traceback(e, os.path.abspath(path))
        # Python's exit codes: 1 for an uncaught exception, 128 + SIGINT for Ctrl-C
        return (130 if isinstance(e, KeyboardInterrupt) else 1), e
    return 0, None


def _print_script_traceback(e: BaseException, script: str) -> None:
    """The traceback as ``python SCRIPT`` prints it, from the script's own frame: the dumper's and
    runpy's frames above it read as though the dumper had failed."""
    tb = e.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != script:
        tb = tb.tb_next
    # through sys.excepthook, as Python reports it: a hook the script installed (rich) still formats it
    if tb is not None:
        e.with_traceback(tb)  # the default hook prints the exception's own traceback, whatever it is given
    sys.excepthook(type(e), e, e.__traceback__)


def _in_steps(opts: DumpOptions, steps_made: int) -> str:
    """Where the options kept only some steps, the steps kept and how many the script made: the
    likely reason nothing was recorded."""
    if not opts.step:
        return ""
    return f" in step {', '.join(map(str, opts.step))} (the script made {steps_made} optimizer step(s))"


def _say_nothing_dumped(opts: DumpOptions, steps_made: int) -> None:
    """A run that wrote nothing says why it may be, rather than leave an empty dump path."""
    when = _in_steps(opts, steps_made)
    chosen = [f"module {' '.join(opts.module)}"] if opts.module else []
    if opts.mode in ("list", "range") and opts.scope:
        chosen.insert(0, f"mode {opts.mode} with scope {' '.join(opts.scope)}")
    if opts.mode == "api_list" and opts.api_list:
        chosen.insert(0, f"api_list {' '.join(opts.api_list)}")
    if chosen:  # the options may leave out every call the script makes
        when += f" among the calls that {' and '.join(chosen)} keep (together they may keep none)"
    logging.getLogger(__name__).warning(
        "ptdbg-dump: nothing was dumped to %s: no API call was recorded in this process%s. "
        "Processes the script starts by spawning (torch.multiprocessing.spawn, a 'spawn' Pool, a "
        "launcher) are not dumped by ptdbg-dump run: run the launcher around it (torchrun --no-python "
        "ptdbg-dump run SCRIPT ...), or start a PrecisionDebugger in the worker function "
        "(PrecisionDebugger.from_config takes a --config file; "
        "docs/dumper.md#from-the-script-precisiondebugger).",
        opts.dump_path,
        when,
    )


if __name__ == "__main__":
    sys.exit(main())
