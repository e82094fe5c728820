"""Two monitor folders (``ptdbg-dump run --monitor``), compared: their manifests first, then each rank
present on both sides, paired by its file's rank, and the first divergent rank.

:func:`analyse` reads both folders as far as they are written; :class:`Follow` keeps the streams
open and reads only what was appended since (a training still running), then analyses again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ptdbg_tui.compare.monitor.findings import Curves, MonitorAnalysis, RankAnalysis
from ptdbg_tui.compare.monitor.nonfinite import first_nonfinite
from ptdbg_tui.compare.monitor.rows import RunRows, cells, run_rows
from ptdbg_tui.compare.monitor.rule import PairRule
from ptdbg_tui.formats import manifest as fm
from ptdbg_tui.formats import monitor as fmon
from ptdbg_tui.formats.untrusted import one_line


class MonitorInputError(Exception):
    """The folders cannot be compared (the message says why, in one line)."""


def _files(folder: Path, side: str) -> dict[int, Path]:
    if not folder.exists():
        raise MonitorInputError(f"the {side} folder {one_line(str(folder), 300)} does not exist")
    if not folder.is_dir():
        raise MonitorInputError(f"the {side} path {one_line(str(folder), 300)} is not a folder")
    files = fmon.rank_files(folder)
    if not files:
        raise MonitorInputError(
            f"the {side} folder {one_line(str(folder), 300)} holds no monitor stream "
            "(monitor_rank<R>.arrows, written by ptdbg-dump run --monitor)"
        )
    return files


@dataclass(frozen=True, kw_only=True)
class _Manifests:
    """A rank's manifests compared: their differences (none where a side wrote no manifest), why a
    side's could not be read, and the NPU run's script (its ``argv``'s first item)."""

    differences: list[fm.ManifestDifference]
    unread: list[tuple[str, str]]
    script: str | None


def _manifests(npu: Path, bench: Path, rank: int) -> _Manifests:
    read: dict[str, fm.Manifest] = {}
    unread: list[tuple[str, str]] = []
    for side, folder in (("NPU", npu), ("bench", bench)):
        path = folder / fm.file_name(rank)
        if not os.path.lexists(path):
            continue
        try:
            read[side] = fm.read_manifest(path)
        except fm.ManifestError as e:
            unread.append((side, str(e)))
    argv = read.get("NPU", {}).get(fm.ARGV)
    script = argv[0] if isinstance(argv, list) and argv and isinstance(argv[0], str) else None
    differences = fm.manifest_differences(read["NPU"], read["bench"]) if len(read) == 2 else []
    return _Manifests(differences=differences, unread=unread, script=script)


def _data_differs(found: list[fm.ManifestDifference], npu: Path, bench: Path, rank: int) -> bool | None:
    """Whether the manifests say the first batches differ (None: no manifest on a side says)."""
    if any(d.kind == fm.BATCHES and d.numeric for d in found):
        return True
    both = all((f / fm.file_name(rank)).is_file() for f in (npu, bench))
    return False if both else None


@dataclass
class Follow:
    """Both folders' streams, read as far as they are written at each :meth:`poll`."""

    npu: Path
    bench: Path
    streams: dict[int, tuple[fmon.MonitorStream, fmon.MonitorStream]] = field(default_factory=dict)
    only_npu: tuple[int, ...] = ()
    only_bench: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        self.npu, self.bench = Path(self.npu), Path(self.bench)
        a, b = _files(self.npu, "NPU"), _files(self.bench, "bench")
        common = sorted(set(a) & set(b))
        if not common:
            raise MonitorInputError(
                f"no rank is monitored on both sides (NPU ranks {sorted(a)}, bench ranks {sorted(b)})"
            )
        self.streams = {r: (fmon.MonitorStream(a[r]), fmon.MonitorStream(b[r])) for r in common}
        self.only_npu = tuple(sorted(set(a) - set(b)))
        self.only_bench = tuple(sorted(set(b) - set(a)))

    def poll(self) -> bool:
        """Read what was appended; whether anything was. :class:`MonitorInputError` on a stream that
        is not a monitor stream."""
        new = False
        for pair in self.streams.values():
            for stream in pair:
                try:
                    new = bool(stream.poll()) or new
                except fmon.MonitorFileError as e:
                    raise MonitorInputError(str(e)) from None
        return new

    @property
    def ended(self) -> bool:
        """Every stream was closed by its writer."""
        return all(s.ended for pair in self.streams.values() for s in pair)

    def analysis(self) -> MonitorAnalysis:
        """The analysis of what was read so far. :class:`MonitorInputError` where a side has no step."""
        ranks = []
        for rank, (a, b) in self.streams.items():
            for side, stream in (("NPU", a), ("bench", b)):
                if not stream.batches:
                    raise MonitorInputError(
                        f"the {side} stream {one_line(stream.path.name, 200)} holds no whole step yet"
                        + (
                            f" ({stream.path.name}: the last {stream.cut} bytes are not a whole step (a step "
                            "being written, or a run stopped while writing it); the steps before it are read)"
                            if stream.cut
                            else ""
                        )
                    )
            ranks.append(self._rank(rank, a, b))
        found = [r for r in ranks if r.divergence is not None]
        first = (
            min(found, key=lambda r: (*r.divergence.order(), r.rank) if r.divergence else ()).rank
            if len(ranks) > 1 and found
            else None
        )
        manifests = _manifests(self.npu, self.bench, ranks[0].rank)
        return MonitorAnalysis(
            npu=self.npu,
            bench=self.bench,
            manifest=tuple(manifests.differences),
            manifest_unread=tuple(manifests.unread),
            script=manifests.script,
            ranks=tuple(ranks),
            only_npu_ranks=self.only_npu,
            only_bench_ranks=self.only_bench,
            first_rank=first,
        )

    def _rank(self, rank: int, a: fmon.MonitorStream, b: fmon.MonitorStream) -> RankAnalysis:
        npu, bench = run_rows(a.table()), run_rows(b.table())
        manifest = _manifests(self.npu, self.bench, rank).differences
        rule = PairRule(rank, npu, bench, _data_differs(manifest, self.npu, self.bench, rank))
        backward = [rule.params[i] for i in rule.backward]
        nonfinite = tuple(
            f
            for side, run in (("npu", npu), ("bench", bench))
            if (f := first_nonfinite(run, side, rank, backward, rule.modules)) is not None
        )
        return RankAnalysis(
            rank=rank,
            npu_file=a.path,
            bench_file=b.path,
            npu_iterations=len(npu.iterations),
            bench_iterations=len(bench.iterations),
            band=rule.band,
            divergence=rule.divergence(),
            nonfinite=nonfinite,
            skipped=(int(npu.skipped.sum()), int(bench.skipped.sum())),
            only_npu=_only(npu, bench),
            only_bench=_only(bench, npu),
            cut=(a.cut, b.cut),
            ended=(a.ended, b.ended),
            curves=_curves(rule, npu, bench),
        )


def _only(run: RunRows, other: RunRows) -> tuple[str, ...]:
    """The modules and parameters one run records and the other does not."""
    return tuple(
        n
        for mine, theirs in ((run.outputs, other.outputs), (run.grads, other.grads))
        for n in mine.names
        if n not in theirs.index()
    )


def _curves(rule: PairRule, npu: RunRows, bench: RunRows) -> Curves:
    ia, ib = npu.outputs.index(), bench.outputs.index()
    return Curves(
        iterations=rule.iterations.astype(np.int64),
        steps=npu.steps[rule.ra],
        loss_npu=npu.loss[rule.ra],
        loss_bench=bench.loss[rule.rb],
        modules=rule.modules,
        norm_npu=cells(npu.outputs.values["norm"], rule.ra, [ia[m] for m in rule.modules]),
        norm_bench=cells(bench.outputs.values["norm"], rule.rb, [ib[m] for m in rule.modules]),
        difference=rule.out_diff,
    )


def analyse(npu_folder: str | Path, bench_folder: str | Path) -> MonitorAnalysis:
    """Two monitor folders compared as far as they are written now. Raises
    :class:`MonitorInputError` (a folder missing, no stream, no common rank, a side without a whole
    step, a file that is not a monitor stream) and
    :class:`~ptdbg_tui.formats.monitor.MonitorUnavailable` (no pyarrow)."""
    follow = Follow(Path(npu_folder), Path(bench_folder))
    follow.poll()
    return follow.analysis()
