"""What the live engine is asked to do (the command line's and the app's settings), apart from the
engine so that its parts (:mod:`~ptdbg_tui.engine.live.pair`) read them without importing it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LiveOptions:
    step: int | None = None
    rank: int | None = None
    match: str = "auto"
    summary: bool = False
    jobs: int = 1
    watch: bool = True
    poll: bool = False
    rescan_s: float = 2.0  # periodic rediscovery, heals missed events
    quiet_s: float = 2.0  # a side that has not grown for this long is finished (for now)
    flush_s: float = 0.1  # least time between two notifications of the app
    chunk: int = 512  # compare tasks per pool round between two flushes
    cluster: str | None = None  # a Dask scheduler (or local:N) for the metric work
    replay_budget_s: float = 0.0  # seconds of replay once the comparison settles (0: only what r asks for;
    # the command line's default is 60)
    replay_top: int = 10  # suspects of each pair replayed first
