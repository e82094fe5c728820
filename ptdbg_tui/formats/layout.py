"""Dump folder layout (spec §2): finding rank dumps under any level of a dump tree, pairing sides.

ptdbg: ``{dump_path}/{tag}_v{version}/[step{N}/]rank{R}/{mode_}dump.pkl`` plus the npy dir named
like the pkl without ``.pkl``. msprobe: ``{dump_path}/[step{N}/]rank{R}|rank|proc{pid}/dump.json``
plus ``dump_tensor_data/``. A user may point at any of these levels or at the pkl/dump.json itself.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

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
#: Modes whose pkl carries stack lines (the original's stack_mode rule, §5.1).
STACK_MODES = ("api_stack", "list", "range", "acl", "stack")

DUMP_TAG = "ptdbg_dump"
VERSION = "4.0"

_RANK_RE = re.compile(r"^rank(\d+)$")
#: Rank folders without a rank number: msprobe's ``rank`` (not distributed) and ``proc<pid>`` (CPU).
_RANKLESS_RE = re.compile(r"^(?:rank|proc\d+)$")
_STEP_RE = re.compile(r"^step(\d+)$")
_TAG_RE = re.compile(r"^.+_v\d[\w.]*$")


class DumpLayoutError(Exception):
    """The path is not a dump (the message says what was expected)."""


@dataclass(frozen=True, slots=True)
class RankDump:
    """One rank's dump of one step: its metadata file (a pkl, or msprobe's dump.json) and its
    tensor data dir (which may not exist)."""

    pkl: Path
    step: int | None
    rank: int | None

    @property
    def format(self) -> str:
        """``ptdbg`` or ``msprobe`` (the naming style of its entries)."""
        return STYLE_MSPROBE if self.pkl.name == DUMP_JSON else STYLE_PTDBG

    @property
    def rank_dir(self) -> Path:
        return self.pkl.parent

    @property
    def npy_dir(self) -> Path:
        """The tensor data dir: npy files (ptdbg), pt files (msprobe)."""
        if self.format == STYLE_MSPROBE:
            return self.rank_dir / DATA_DIR
        return self.pkl.with_suffix("")

    @property
    def mode(self) -> str:
        for mode, name in PKL_NAMES.items():
            if self.pkl.name == name:
                return mode
        stem = self.pkl.stem
        return stem[: -len("_dump")] if stem.endswith("_dump") else stem

    @property
    def stack_mode(self) -> bool:
        return self.mode in STACK_MODES

    @property
    def has_npy(self) -> bool:
        return self.npy_dir.is_dir()

    @property
    def label(self) -> str:
        parts = [] if self.step is None else [f"step{self.step}"]
        parts.append(f"rank{self.rank}" if self.rank is not None else self.rank_dir.name)
        return "/".join(parts)


def rank_dir_path(dump_path: str | os.PathLike[str], rank: int, step: int | None = None,
                  tag: str = DUMP_TAG, version: str = VERSION) -> Path:
    """Where a writer puts a rank's files."""
    base = Path(dump_path) / f"{tag}_v{version}"
    if step is not None:
        base = base / f"step{step}"
    return base / f"rank{rank}"


def _number(regex: re.Pattern[str], name: str) -> int | None:
    m = regex.match(name)
    return int(m.group(1)) if m else None


def _pkl_in(rank_dir: Path) -> Path | None:
    if (rank_dir / DUMP_JSON).is_file():
        return rank_dir / DUMP_JSON
    for name in PKL_NAMES.values():
        if (rank_dir / name).is_file():
            return rank_dir / name
    found = sorted(p for p in rank_dir.glob("*.pkl") if p.is_file())
    return found[0] if found else None


def _rank_dump(pkl: Path) -> RankDump:
    rank_dir = pkl.parent
    return RankDump(pkl, _number(_STEP_RE, rank_dir.parent.name), _number(_RANK_RE, rank_dir.name))


def _subdirs(path: Path) -> list[Path]:
    try:
        return sorted((p for p in path.iterdir() if p.is_dir()), key=lambda p: p.name)
    except OSError:
        return []


def discover(path: str | os.PathLike[str]) -> list[RankDump]:
    """All rank dumps at or below ``path``, sorted by (step, rank).

    Raises :class:`DumpLayoutError` for a path that does not exist or holds no dump.
    """
    root = Path(path)
    if not root.exists():
        raise DumpLayoutError(f"{root}: no such file or directory")
    if root.is_file():
        if root.suffix != ".pkl" and root.name != DUMP_JSON:
            raise DumpLayoutError(f"{root}: not a .pkl file, an msprobe {DUMP_JSON} or a dump directory")
        return [_rank_dump(root)]
    found: list[RankDump] = []
    frontier = [root]
    for _depth in range(4):  # root -> tag -> step -> rank (msprobe: root -> step -> rank)
        nxt: list[Path] = []
        for d in frontier:
            pkl = _pkl_in(d)
            if pkl is not None:
                found.append(_rank_dump(pkl))
                continue
            for sub in _subdirs(d):
                if any(r.match(sub.name) for r in (_RANK_RE, _RANKLESS_RE, _STEP_RE, _TAG_RE)):
                    nxt.append(sub)
        frontier = nxt
    if not found:
        raise DumpLayoutError(
            f"{root}: no dump found (expected {DUMP_TAG}_v*/[stepN/]rankR/*dump.pkl, or msprobe's "
            f"[stepN/]rankR|proc<pid>/{DUMP_JSON}, below it)"
        )
    return sorted(found, key=lambda r: (r.step if r.step is not None else -1,
                                         r.rank if r.rank is not None else -1, str(r.pkl)))


def steps_and_ranks(dumps: list[RankDump]) -> tuple[list[int | None], list[int | None]]:
    steps = sorted({d.step for d in dumps}, key=lambda s: -1 if s is None else s)
    ranks = sorted({d.rank for d in dumps}, key=lambda r: -1 if r is None else r)
    return steps, ranks


def pair_dumps(npu: list[RankDump], bench: list[RankDump], step: int | None = None,
               rank: int | None = None) -> list[tuple[RankDump, RankDump]]:
    """Pair NPU and bench rank dumps by step and rank.

    Within a step, ranks pair by number; when each side holds exactly one rank they pair
    whatever their numbers (a CPU bench of the original lands in ``rank<pid>``).
    ``step``/``rank`` restrict the result (rank refers to the NPU side).
    """
    if len(npu) == 1 and len(bench) == 1:  # one dump each: pair whatever the step/rank names
        only = [(npu[0], bench[0])]
        return [p for p in only
                if (step is None or p[0].step == step) and (rank is None or p[0].rank == rank)]
    pairs = []
    steps = {d.step for d in npu} | {d.step for d in bench}
    for s in sorted(steps, key=lambda v: -1 if v is None else v):
        if step is not None and s != step:
            continue
        n_side = [d for d in npu if d.step == s]
        b_side = [d for d in bench if d.step == s]
        if len(n_side) == 1 and len(b_side) == 1:
            candidates = [(n_side[0], b_side[0])]
        else:
            by_rank = {d.rank: d for d in b_side}
            candidates = [(d, by_rank[d.rank]) for d in n_side if d.rank in by_rank]
        pairs += [(n, b) for n, b in candidates if rank is None or n.rank == rank]
    return pairs
