"""``ptdbg-dump run train.py [args...] --dump-path DIR``: dump a script without editing it.

The dumper's own options may stand before or after the script path; everything after ``--`` goes
to the script untouched. With ``--step``, a step ends at every ``optimizer.step()`` (a global
optimizer hook), so ``--step 0`` dumps the first training iteration and then gets out of the way.
"""

from __future__ import annotations

import argparse
import logging
import runpy
import sys
from collections.abc import Sequence
from pathlib import Path

from torch.optim.optimizer import register_optimizer_step_post_hook
from torch.utils.hooks import RemovableHandle

from dumper.config import MODES, ConfigError
from dumper.debugger import PrecisionDebugger

_OPTIONS = ("--dump-path", "--mode", "--step", "--scope", "--api-list", "--summary-only", "--keep-dropout")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ptdbg-dump", description="Dump a training script's API calls "
                                "in ptdbg_ascend v4 format.")
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run SCRIPT under the dumper",
                         usage="ptdbg-dump run SCRIPT [ARGS...] --dump-path DIR [--mode M] [--step N ...]")
    run.add_argument("--dump-path", required=True, help="where ptdbg_dump_v4.0/ is written")
    run.add_argument("--mode", default="api_stack", choices=MODES)
    run.add_argument("--step", type=int, nargs="+", default=None,
                     help="training steps to dump (a step ends at each optimizer.step()); default: all, "
                          "without a stepN level")
    run.add_argument("--scope", nargs="+", default=None, help="call names for modes list/range/stack")
    run.add_argument("--api-list", nargs="+", default=None, help="API name parts for mode api_list")
    run.add_argument("--summary-only", action="store_true", help="write the pkl only, no npy files")
    run.add_argument("--keep-dropout", action="store_true", help="do not force dropout to p=0")
    return p


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
            taking = "=" not in a and a not in ("--summary-only", "--keep-dropout")
        elif taking and not a.startswith("-") and (script or not a.endswith(".py")):
            ours.append(a)
        else:
            taking = False
            script.append(a)
    return ours, script


def _step_hook(debugger: PrecisionDebugger) -> RemovableHandle:
    return register_optimizer_step_post_hook(lambda optimizer, args, kwargs: debugger.step())


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
    try:
        debugger = PrecisionDebugger(dump_path=ns.dump_path, step=ns.step)
        debugger.configure_hook(mode=ns.mode, scope=ns.scope, api_list=ns.api_list,
                                summary_only=ns.summary_only, disable_dropout=not ns.keep_dropout)
    except ConfigError as e:
        parser.error(str(e))
    hook = _step_hook(debugger) if ns.step else None
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [str(path), *script[1:]]
    sys.path.insert(0, str(path.resolve().parent))
    code = 0
    debugger.start()
    try:
        runpy.run_path(str(path), run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        debugger.stop()
        if hook is not None:
            hook.remove()
        sys.argv, sys.path[:] = saved_argv, saved_path
    return code


if __name__ == "__main__":
    sys.exit(main())
