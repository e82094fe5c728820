"""Dump layout (docs/formats.md#ptdbg-layout): finding rank dumps at any level of a dump tree, pairing sides.

ptdbg: ``{dump_path}/{tag}_v{version}/[step{N}/]rank{R}/{mode_}dump.pkl`` plus the npy dir named
like the pkl without ``.pkl``. msprobe: ``{dump_path}/[step{N}/]rank{R}|rank|proc{pid}/dump.json``
plus ``dump_tensor_data/``. A user may point at any of these levels or at the pkl/dump.json itself.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from ptdbg_tui.formats.files import file_kind, reason
from ptdbg_tui.formats.msprobe import DATA_DIR, DUMP_JSON
from ptdbg_tui.formats.naming import STYLE_MSPROBE, STYLE_PTDBG

#: pkl file names by dump mode, in the order preferred when a rank dir holds several.
PKL_NAMES = {
    "api_stack": "api_stack_dump.pkl",
    "all": "dump.pkl",
    "list": "list_dump.pkl",
    "range": "range_dump.pkl",
    "api_list": "api_list_dump.pkl",
    "stack": "stack_dump.pkl",
    "acl": "acl_dump.pkl",
}
#: Modes whose pkl carries stack lines (docs/formats.md#ptdbg-layout).
STACK_MODES = ("api_stack", "list", "range", "acl", "stack")

DUMP_TAG = "ptdbg_dump"
VERSION = "4.0"

_RANK_RE = re.compile(r"^rank(\d+)$")
#: Rank folders without a rank number: msprobe's ``rank`` (not distributed) and ``proc<pid>`` (CPU).
_RANKLESS_RE = re.compile(r"^(?:rank|proc\d+)$")
_STEP_RE = re.compile(r"^step(\d+)$")
#: The original names a CPU run's rank folder by its process id and keeps that name (``rank<pid>``,
#: docs/formats.md): one side's only rank folder numbered from here up is taken for one. Below it a
#: lone folder keeps its number (a device index, or the one rank of a job kept); a container's small
#: process ids are not told apart.
PID_FLOOR = 1024
_TAG_RE = re.compile(r"^.+_v\d[\w.]*$")


class DumpLayoutError(Exception):
    """The path is not a dump (the message says what was expected)."""


class NoDumpFound(DumpLayoutError):
    """A path that holds no dump, and what could not be read below it (its words:
    :func:`ptdbg_tui.compare.report.layout_words.layout_error_text`)."""

    def __init__(self, root: str | os.PathLike[str], problems: Sequence[LayoutProblem]) -> None:
        super().__init__(str(root))
        self.root = str(root)
        self.problems = tuple(problems)


@dataclass(frozen=True, slots=True, kw_only=True)
class SeveralDumpFiles:
    """A folder holds several dump files (two dump modes into one dump_path): one is read."""

    folder: str
    read: str
    others: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class NotADumpFile:
    """A dump file's name on something that is not a regular file (``mode``: its ``st_mode``)."""

    path: str
    mode: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RankWithoutDump:
    """A rank folder that holds no dump file."""

    folder: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CannotScan:
    """A folder or file that cannot be read (``error``: the OSError as :func:`~.files.reason` says it)."""

    error: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Unscanned:
    """A root another process could not scan: a cluster worker's :class:`DumpLayoutError` message, or
    that no worker serves it (``message``: their words)."""

    message: str


#: What could not be read while a path's dumps were looked for.
LayoutProblem = SeveralDumpFiles | NotADumpFile | RankWithoutDump | CannotScan | Unscanned


@dataclass(frozen=True, slots=True)
class RankDump:
    """One rank's dump of one step: its metadata file (a pkl, or msprobe's dump.json) and its
    tensor data dir (which may not exist)."""

    records: Path  # the records file: a ptdbg pkl or msprobe's dump.json
    step: int | None
    rank: int | None

    @property
    def format(self) -> str:
        """``ptdbg`` or ``msprobe`` (the naming style of its entries)."""
        return STYLE_MSPROBE if self.records.name == DUMP_JSON else STYLE_PTDBG

    @property
    def report(self) -> str:
        """The compare CSV its tool writes: ``ptdbg`` (ptdbg_ascend's columns) or ``msprobe``."""
        return self.format

    @property
    def rank_dir(self) -> Path:
        return self.records.parent

    @property
    def tensor_dir(self) -> Path:
        """The tensor data dir: npy files (ptdbg), pt files (msprobe)."""
        if self.format == STYLE_MSPROBE:
            return self.rank_dir / DATA_DIR
        return self.records.with_suffix("")

    @property
    def mode(self) -> str:
        for mode, name in PKL_NAMES.items():
            if self.records.name == name:
                return mode
        stem = self.records.stem
        return stem[: -len("_dump")] if stem.endswith("_dump") else stem

    @property
    def stack_mode(self) -> bool:
        return self.mode in STACK_MODES

    @property
    def has_tensors(self) -> bool:
        return os.path.isdir(self.tensor_dir)

    @property
    def dump_path(self) -> Path:
        """The folder its writer was given (``--dump-path``): above the step folder and (a ptdbg dump's)
        tag folder, where ``ptdbg-dump run`` writes the run's manifest beside them."""
        folder = self.rank_dir.parent
        if _STEP_RE.match(folder.name):
            folder = folder.parent
        tagged = self.format == STYLE_PTDBG and _TAG_RE.match(folder.name)
        return folder.parent if tagged else folder

    @property
    def label(self) -> str:
        parts = [] if self.step is None else [f"step{self.step}"]
        parts.append(f"rank{self.rank}" if self.rank is not None else self.rank_dir.name)
        return "/".join(parts)


def rank_dir_path(
    dump_path: str | os.PathLike[str],
    rank: int,
    step: int | None = None,
    tag: str = DUMP_TAG,
    version: str = VERSION,
) -> Path:
    """Where a writer puts a rank's files."""
    base = Path(dump_path) / f"{tag}_v{version}"
    if step is not None:
        base = base / f"step{step}"
    return base / f"rank{rank}"


def _number(regex: re.Pattern[str], name: str) -> int | None:
    m = regex.match(name)
    return int(m.group(1)) if m else None


def _entries(folder: Path, problems: list[LayoutProblem]) -> list[os.DirEntry[str]] | None:
    try:
        with os.scandir(folder) as it:
            return sorted(it, key=lambda e: e.name)
    except OSError as e:
        problems.append(CannotScan(error=reason(e)))
        return None


def _is(entry: os.DirEntry[str], kind: str) -> bool:
    try:
        return entry.is_dir() if kind == "dir" else entry.is_file()
    except OSError:
        return False


def _pkl_in(entries: list[os.DirEntry[str]], problems: list[LayoutProblem]) -> Path | None:
    """The folder's dump file (msprobe's dump.json, or a pkl: the known names in order of
    preference, then any ``*.pkl``); one that is
    there but not a regular file is a problem, not a dump."""
    by_name = {e.name: e for e in entries}
    candidates = [by_name[n] for n in (DUMP_JSON, *PKL_NAMES.values()) if n in by_name]
    candidates += [e for e in entries if e.name.endswith(".pkl") and e.name not in PKL_NAMES.values()]
    files = [e for e in candidates if _is(e, "file")]
    if files:
        if len(files) > 1:  # e.g. two dump modes into one dump_path: the others are not compared
            others = tuple(e.name for e in files[1:])
            folder = str(Path(files[0].path).parent)
            problems.append(SeveralDumpFiles(folder=folder, read=files[0].name, others=others))
        return Path(files[0].path)
    for entry in candidates:
        try:
            problems.append(NotADumpFile(path=entry.path, mode=os.stat(entry.path).st_mode))
        except OSError as e:
            problems.append(CannotScan(error=reason(e)))
    return None


def _rank_dump(pkl: Path) -> RankDump:
    rank_dir = pkl.parent
    return RankDump(pkl, _number(_STEP_RE, rank_dir.parent.name), _number(_RANK_RE, rank_dir.name))


@dataclass
class Scan:
    """What a dump path holds: its rank dumps, and what could not be read on the way."""

    dumps: list[RankDump] = field(default_factory=list)
    problems: list[LayoutProblem] = field(default_factory=list)


def scan(path: str | os.PathLike[str]) -> Scan:
    """All rank dumps at or below ``path``, sorted by (step, rank); a folder that cannot be read is
    a problem and the others are still searched.

    Raises :class:`DumpLayoutError` for a path that does not exist or is neither a folder nor a pkl.
    """
    root = Path(path)
    try:
        mode = os.stat(root).st_mode
    except FileNotFoundError:
        raise DumpLayoutError(f"{root}: no such file or directory") from None
    except OSError as e:
        raise DumpLayoutError(reason(e)) from None
    if stat.S_ISREG(mode):
        if root.suffix != ".pkl" and root.name != DUMP_JSON:
            raise DumpLayoutError(f"{root}: not a .pkl file, an msprobe {DUMP_JSON} or a dump directory")
        return Scan([_rank_dump(root)])
    if not stat.S_ISDIR(mode):
        raise DumpLayoutError(f"{root}: is {file_kind(mode)}, not a dump directory or a .pkl file")
    found = Scan()
    frontier = [root]
    for _depth in range(4):  # root -> tag -> step -> rank (msprobe: root -> step -> rank)
        frontier = [sub for d in frontier for sub in _scan_folder(d, d == root, found)]
    found.dumps.sort(key=_order)
    return found


def _scan_folder(d: Path, is_root: bool, found: Scan) -> list[Path]:
    """One folder of a dump tree: its rank dump into ``found``, else the folders to look into."""
    entries = _entries(d, found.problems)
    if entries is None:
        return []
    known = len(found.problems)
    records = _pkl_in(entries, found.problems)
    if records is not None:
        found.dumps.append(_rank_dump(records))
        return []
    subdirs = [
        Path(e.path)
        for e in entries
        if _is(e, "dir") and any(r.match(e.name) for r in (_RANK_RE, _RANKLESS_RE, _STEP_RE, _TAG_RE))
    ]
    if (
        not subdirs
        and len(found.problems) == known
        and not is_root
        and (_RANK_RE.match(d.name) or _RANKLESS_RE.match(d.name))
    ):
        found.problems.append(RankWithoutDump(folder=str(d)))
    return subdirs


def process_id_folder(dumps: Iterable[RankDump]) -> bool:
    """Whether one side's dumps are the lone ``rank<pid>`` folder of the original's CPU run: their
    number names no rank (not one to keep in the next dump's options, nor a job of several ranks)."""
    ranks = {d.rank for d in dumps}
    return len(ranks) == 1 and all(r is not None and r >= PID_FLOOR for r in ranks)


def discover(path: str | os.PathLike[str]) -> list[RankDump]:
    """All rank dumps at or below ``path``, sorted by (step, rank).

    Raises :class:`DumpLayoutError` for a path that does not exist or holds no dump.
    """
    found = scan(path)
    if not found.dumps:
        raise NoDumpFound(path, found.problems)
    return found.dumps


def tensor_bytes(folders: Iterable[str | os.PathLike[str]], limit: int) -> int:
    """Bytes of the files in these tensor data folders, counted until ``limit`` is reached: a job's
    size, cheaply (a stat a file, none once the answer is known); a folder that cannot be read counts 0."""
    total = 0
    for folder in folders:
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.is_file(follow_symlinks=False):
                        total += entry.stat(follow_symlinks=False).st_size
                        if total >= limit:
                            return total
        except OSError:
            continue
    return total


class Side(Enum):
    """Which run's dump a note is about."""

    NPU = "npu"
    BENCH = "bench"


@dataclass(frozen=True, slots=True, kw_only=True)
class NoTensorDir:
    """No tensor data folder ``folder`` next to the records file ``records``, where the rank folder holds
    others (``found``, the first three): a renamed one?"""

    folder: str
    records: str
    found: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class TensorDirUnreadable:
    """The tensor data folder cannot be read (``reason``: the path and the OS's reason)."""

    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TensorDirNotFolder:
    """The tensor data folder's path ``path`` is something else (``kind``: a file, a socket…)."""

    path: Path
    kind: str


#: What looks wrong with a dump's tensor data folder.
TensorDirProblem = NoTensorDir | TensorDirUnreadable | TensorDirNotFolder


@dataclass(frozen=True, slots=True, kw_only=True)
class StatisticsOnly:
    """Why a pair can compare statistics only where that looks unintended: each side's tensor folder
    that looks wrong (``folders``), or else the side (``bare``) without the data folder (``missing``)
    the other has."""

    folders: tuple[tuple[Side, TensorDirProblem], ...] = ()
    bare: Side | None = None
    missing: Path | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SameDump:
    """Both sides are the one dump file ``path`` (the same path twice, or a link)."""

    path: Path


@dataclass(frozen=True, slots=True, kw_only=True)
class NoPairs:
    """No NPU and bench rank dumps pair up (for the ``step`` and ``rank`` asked): each side's steps and
    ranks (``None``: a dump without a ``stepN`` folder, or a rank folder without a number)."""

    step: int | None
    rank: int | None
    npu_steps: tuple[int | None, ...]
    npu_ranks: tuple[int | None, ...]
    bench_steps: tuple[int | None, ...]
    bench_ranks: tuple[int | None, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Shadowed:
    """A dump (``label`` in ``rank_dir``) not compared, as another of its side (in ``twin``) has the same
    step and rank and is."""

    side: Side
    label: str
    rank_dir: Path
    twin: Path


@dataclass(frozen=True, slots=True, kw_only=True)
class OneSided:
    """A dump (``label``) the other side has none for."""

    side: Side
    label: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RankOnly:
    """``--rank rank`` leaves out the NPU dump's other ranks (``ranks``): the error may begin there."""

    rank: int
    ranks: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class RankCounts:
    """The sides hold different numbers of ranks (``npu``, ``bench``): jobs of different sizes differ by
    design; only ranks on both sides are compared."""

    npu: tuple[int, ...]
    bench: tuple[int, ...]


#: A dump no pair holds, or why none formed (:func:`unpaired`).
Unpaired = NoPairs | Shadowed | OneSided | RankOnly | RankCounts


def tensor_dir_problem(dump: RankDump) -> TensorDirProblem | None:
    """Why a dump has no tensor data folder, when that looks like a mistake: the path is something
    else, or the rank folder holds another folder (a renamed one?)."""
    try:
        mode = os.stat(dump.tensor_dir).st_mode
    except FileNotFoundError:
        others = [e.name for e in _entries(dump.rank_dir, []) or [] if _is(e, "dir")]
        if not others:
            return None
        return NoTensorDir(folder=dump.tensor_dir.name, records=dump.records.name, found=tuple(others[:3]))
    except OSError as e:
        return TensorDirUnreadable(reason=reason(e))
    if stat.S_ISDIR(mode):
        try:
            os.scandir(dump.tensor_dir).close()
        except OSError as e:
            return TensorDirUnreadable(reason=reason(e))
        return None
    return TensorDirNotFolder(path=dump.tensor_dir, kind=file_kind(mode))


def statistics_only(npu: RankDump, bench: RankDump | None) -> StatisticsOnly | None:
    """Why a pair can compare statistics only when that looks unintended: a data folder that is
    something else or named otherwise, or one side without the data folder the other has."""
    folders = tuple(
        (side, problem)
        for side, d in ((Side.NPU, npu), (Side.BENCH, bench))
        if d is not None and (problem := tensor_dir_problem(d))
    )
    if folders:
        return StatisticsOnly(folders=folders)
    if bench is not None and npu.has_tensors != bench.has_tensors:
        side, missing = (Side.BENCH, bench) if npu.has_tensors else (Side.NPU, npu)
        return StatisticsOnly(bare=side, missing=missing.tensor_dir)  # a statistics dump never has one
    return None


def same_dump(npu: RankDump, bench: RankDump) -> SameDump | None:
    """The two sides are one and the same dump file (the same path twice, or a link): every row
    then compares equal to itself, which says nothing about the NPU run."""
    try:
        same = os.path.samefile(npu.records, bench.records)
    except OSError:
        return None
    return SameDump(path=npu.records) if same else None


def steps_and_ranks(dumps: list[RankDump]) -> tuple[list[int | None], list[int | None]]:
    steps = sorted({d.step for d in dumps}, key=lambda s: -1 if s is None else s)
    ranks = sorted({d.rank for d in dumps}, key=lambda r: -1 if r is None else r)
    return steps, ranks


def pair_dumps(
    npu: list[RankDump], bench: list[RankDump], step: int | None = None, rank: int | None = None
) -> list[tuple[RankDump, RankDump]]:
    """Pair NPU and bench rank dumps by step and rank.

    Within a step, ranks pair by number; when each side holds exactly one rank they pair
    whatever their numbers (a CPU bench of the original lands in ``rank<pid>``).
    ``step``/``rank`` restrict the result (rank refers to the NPU side).
    """
    if len(npu) == 1 and len(bench) == 1:  # one dump each: pair whatever the step/rank names
        only = [(npu[0], bench[0])]
        return [
            p for p in only if (step is None or p[0].step == step) and (rank is None or p[0].rank == rank)
        ]
    pairs = []
    steps = {d.step for d in npu} | {d.step for d in bench}
    for s in sorted(steps, key=lambda v: -1 if v is None else v):
        if step is not None and s != step:
            continue
        n_side = [d for d in npu if d.step == s]
        b_side = [d for d in bench if d.step == s]
        if len(n_side) == 1 and len(b_side) == 1:
            candidates = [(n_side[0], b_side[0])]
        else:  # by rank number; of two dumps with one step and rank (rank1, rank01) one pairs
            by_rank = {d.rank: d for d in sorted(b_side, key=_canonical_last, reverse=True)}
            candidates = []
            for d in sorted(n_side, key=_canonical_last):
                b = by_rank.pop(d.rank, None)
                if b is not None:
                    candidates.append((d, b))
        pairs += [(n, b) for n, b in candidates if rank is None or n.rank == rank]
    return sorted(pairs, key=lambda p: _order(p[0]))


def _order(d: RankDump) -> tuple[int, int, str]:
    return (d.step if d.step is not None else -1, d.rank if d.rank is not None else -1, str(d.records))


def _canonical_last(d: RankDump) -> tuple[bool, str]:
    """Sort key that puts the dump whose folder is named as a writer names it (``rank1``) first."""
    return (d.rank is not None and d.rank_dir.name != f"rank{d.rank}", str(d.records))


def unpaired(
    npu: list[RankDump],
    bench: list[RankDump],
    paired: list[tuple[RankDump, RankDump]],
    step: int | None,
    rank: int | None,
) -> tuple[Unpaired, ...]:
    """Dumps that no pair holds: what the user would otherwise not see compared."""
    notes: list[Unpaired] = []
    if npu and bench and not paired:
        ns, nr = steps_and_ranks(npu)
        bs, br = steps_and_ranks(bench)
        notes.append(
            NoPairs(
                step=step,
                rank=rank,
                npu_steps=tuple(ns),
                npu_ranks=tuple(nr),
                bench_steps=tuple(bs),
                bench_ranks=tuple(br),
            )
        )
    for role, dumps, side in ((Side.NPU, npu, 0), (Side.BENCH, bench, 1)):
        compared = {p[side].label: p[side] for p in paired}
        done = {p[side].records for p in paired}
        for d in dumps:
            if d.records in done or (step is not None and d.step != step):
                continue
            if (rank is not None and d.rank != rank) or (side == 1 and not paired):
                continue  # the rank option picks the dumps; bench dumps are news only beside pairs
            twin = compared.get(d.label)
            if twin is not None:
                notes.append(Shadowed(side=role, label=d.label, rank_dir=d.rank_dir, twin=twin.rank_dir))
            else:
                notes.append(OneSided(side=role, label=d.label))
    if paired:
        notes += _rank_notes(npu, bench, step, rank)
    return tuple(notes)


def _rank_notes(
    npu: list[RankDump], bench: list[RankDump], step: int | None, rank: int | None
) -> list[Unpaired]:
    """Ranks a reader of the verdict would not think of: those ``--rank`` leaves out (the error may
    begin on one of them), and sides that hold different numbers of ranks (jobs of different sizes
    differ by design: each rank's data and the gradients' average)."""
    nr, br = (
        {d.rank for d in side if d.rank is not None and step in (None, d.step)} for side in (npu, bench)
    )
    if rank is not None:
        return [RankOnly(rank=rank, ranks=tuple(sorted(nr)))] if len(nr) >= 2 else []
    if len(nr) == len(br) or not nr or not br:
        return []
    return [RankCounts(npu=tuple(sorted(nr)), bench=tuple(sorted(br)))]
