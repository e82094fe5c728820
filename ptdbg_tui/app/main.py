"""Entry of ``ptdbg-tui NPU_DIR BENCH_DIR``: options from the command line, then the app."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ptdbg_tui.engine.live import LiveOptions
from ptdbg_tui.formats.layout import DumpLayoutError, discover

if TYPE_CHECKING:
    from textual.app import App

EXIT_OK = 0
EXIT_USAGE = 2


def options_from(args: argparse.Namespace) -> LiveOptions:
    return LiveOptions(step=args.step, rank=args.rank, match=args.match, summary=args.summary,
                       jobs=max(1, args.jobs), watch=not args.no_watch, poll=args.poll, cluster=args.cluster)


def run_app(args: argparse.Namespace) -> int:
    """Open the app; with ``--no-watch`` both dumps must already exist."""
    if args.cluster is not None:
        from ptdbg_tui.engine.cluster import ClusterError, require

        try:
            require(args.cluster)
        except ClusterError as e:
            print(f"ptdbg-tui: {e}", file=sys.stderr)
            return EXIT_USAGE
    if args.no_watch:
        for path in (args.npu, args.bench):
            try:
                discover(path)
            except DumpLayoutError as e:
                print(f"ptdbg-tui: {e}", file=sys.stderr)
                return EXIT_USAGE
    from ptdbg_tui.app.app import PtdbgApp

    app = PtdbgApp(args.npu, args.bench, options_from(args), args.format)
    if not set_theme(app, args.theme):
        return EXIT_USAGE
    app.run()
    return EXIT_OK


def set_theme(app: App, theme: str | None) -> bool:
    """Apply ``--theme``; an unknown name is reported with the available ones."""
    if theme is None:
        return True
    if app.get_theme(theme) is None:
        print(f"ptdbg-tui: unknown theme {theme!r}; available: {', '.join(sorted(app.available_themes))}",
              file=sys.stderr)
        return False
    app.theme = theme
    return True
