"""The words of a matching (:mod:`ptdbg_tui.compare.matching.pairing`): why ``auto`` aligned the calls,
why ``align`` may pair better, and that one run's dump ends before the other's."""

from __future__ import annotations

from ptdbg_tui.compare.matching.pairing import AutoAligned, Misfits, Tail


def auto_aligned_text(a: AutoAligned) -> str:
    why = f"exact names left {a.npu_only} NPU-only and {a.bench_only} bench-only entries" + (
        f" and {a.shapes} shape mismatches" if a.shapes else ""
    )
    return f"calls aligned automatically ({why})"


def misfits_text(m: Misfits) -> str:
    """``1 unpaired, 2 shapes differ``."""
    parts = [f"{m.unpaired:,} unpaired"] if m.unpaired else []
    if m.shapes:
        parts.append(f"{m.shapes:,} shapes differ")
    return ", ".join(parts)


def tail_text(t: Tail) -> str:
    other = "bench" if t.side == "NPU" else "NPU"
    return (
        f"the {other} dump ends before the {t.side} dump: the {t.side} dump's last "
        f"{t.entries:,} entries ({t.calls:,} calls, from {t.first} on) have no {other} "
        f"counterpart — did the {other} run stop early (an exception, Ctrl-C) or make fewer steps?"
    )
