"""The run manifest (``manifest_rank<R>.json``, written by every ``ptdbg-dump run``): what a run was
started with, and the differences between two runs' manifests (docs/monitor.md#the-run-manifest).

Its sections are defined here once, for the dumper that writes them and the readers. A manifest read
back is untrusted dump text: its size is bounded by the entry budget, its values must be JSON
scalars, lists and objects of bounded depth, length and text size (:func:`read_manifest`); a text
shown from it passes through :func:`ptdbg_tui.formats.untrusted.one_line`.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ptdbg_tui.formats import budget
from ptdbg_tui.formats.files import TensorFileError, describe, open_regular
from ptdbg_tui.formats.layout import RankDump
from ptdbg_tui.formats.untrusted import TEXT_LIMIT, one_line

FILE_PATTERN = "manifest_rank{rank}.json"
FORMAT = "ptdbg-manifest"
VERSION = 1

#: Environment variables that change a run's numbers, recorded when set (and as null when not):
#: the determinism switches of the collectives and kernels, the TF32 and reduced-precision overrides,
#: the thread counts that set a CPU reduction's order, the collective algorithms (their reduction
#: order), the world size (the data-parallel reduction), and the hash seed (the order of a set or a
#: dict keyed by strings, which a data loader may follow). docs/monitor.md says why each is here.
NUMERIC_ENV = (
    "HCCL_DETERMINISTIC",
    "HCCL_ALGO",
    "ASCEND_LAUNCH_BLOCKING",
    "INF_NAN_MODE_ENABLE",
    "CUBLAS_WORKSPACE_CONFIG",
    "NVIDIA_TF32_OVERRIDE",
    "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",
    "CUDA_LAUNCH_BLOCKING",
    "NCCL_ALGO",
    "NCCL_PROTO",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "MKL_CBWR",
    "KMP_DETERMINISTIC_REDUCTION",
    "ONEDNN_DEFAULT_FPMATH_MODE",
    "WORLD_SIZE",
    "PYTHONHASHSEED",
)

#: Sections, and what a difference in each is (:attr:`ManifestDifference.kind`).
HOST, ARGV, VERSIONS, ENV, FLAGS, RNG = "host", "argv", "versions", "env", "flags", "rng"
OPTIMIZERS, SCHEDULERS, MODULES, PARAMETERS, BATCHES = (
    "optimizers",
    "schedulers",
    "modules",
    "parameters",
    "batches",
)
SECTIONS = (HOST, ARGV, VERSIONS, ENV, FLAGS, RNG, OPTIMIZERS, SCHEDULERS, MODULES, PARAMETERS, BATCHES)
#: Sections whose differences never change the numbers: where and as whom a run ran.
_NOT_NUMERIC = frozenset({HOST})
#: Keys (after the section) that do not change the numbers either. numpy's and Python's global random
#: states differ between any two runs that do not seed them (Python seeds from the OS): a model's
#: numbers come from torch's generator, and data drawn from them shows as batches that differ.
_NOT_NUMERIC_KEYS = frozenset({"argv.0", "versions.python", "rng.numpy_state", "rng.python_state"})
#: The bounds of a manifest read back: nesting, items of one list or object, characters of one text.
MAX_DEPTH = 12
MAX_ITEMS = 1_000_000


class ManifestError(Exception):
    """A manifest that cannot be read, or holds what no manifest holds (the message says what)."""


def file_name(rank: int) -> str:
    return FILE_PATTERN.format(rank=rank)


Manifest = dict[str, Any]


def json_text(manifest: Manifest) -> str:
    """A manifest as its file holds it."""
    return json.dumps(manifest, indent=1) + "\n"


def _checked(value: Any, where: str, depth: int = 0) -> None:
    if depth > MAX_DEPTH:
        raise ManifestError(f"{where}: nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, str):
        if len(value) > TEXT_LIMIT:
            raise ManifestError(f"{where}: a text of {len(value):,} characters (at most {TEXT_LIMIT})")
    elif isinstance(value, Mapping | list):
        if len(value) > MAX_ITEMS:
            raise ManifestError(f"{where}: {len(value):,} items (at most {MAX_ITEMS:,})")
        items = value.items() if isinstance(value, Mapping) else enumerate(value)
        for key, item in items:
            _checked(key, where, depth + 1)
            _checked(item, f"{where}.{one_line(str(key), 80)}", depth + 1)
    elif not (value is None or isinstance(value, bool | int | float)):
        raise ManifestError(f"{where}: a {type(value).__name__}")


def checked_manifest(data: Any, what: str = "the manifest") -> Manifest:
    """``data`` as a manifest, or :class:`ManifestError` saying why it is not one."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ManifestError(f"{what} is not a {FORMAT} file")
    if data.get("version") != VERSION:
        raise ManifestError(f"{what} is of version {one_line(str(data.get('version')), 40)}, not {VERSION}")
    _checked(data, what)
    for section in SECTIONS:
        expected = list if section in (ARGV, OPTIMIZERS, SCHEDULERS, BATCHES) else dict
        if section in data and not isinstance(data[section], expected):
            raise ManifestError(f"{what}: its {section} is not a JSON {expected.__name__}")
    return data


def read_manifest(path: Path) -> Manifest:
    """A manifest file, checked (:func:`checked_manifest`); :class:`ManifestError` when it is not one:
    a file that is not regular (a pipe would block), resolves outside its folder, or is over the entry
    budget is refused before it is read."""
    try:
        fd, st = open_regular(path)
        with os.fdopen(fd, "rb") as f:
            budget.check(st.st_size, f"manifest {path.name}")
            data = json.loads(f.read().decode("utf-8"))
    except (OSError, TensorFileError, UnicodeDecodeError, ValueError, RecursionError) as e:
        why = describe(e) if isinstance(e, OSError) else str(e)  # an OSError's own text repeats the path
        raise ManifestError(f"{one_line(path.name, 200)}: {one_line(why, 300)}") from None
    return checked_manifest(data, path.name)


def manifest_of(dump: RankDump) -> Manifest | None:
    """The manifest ``ptdbg-dump run`` wrote for a rank dump's run (beside its tag folder, in the folder
    it was given); None where there is none (another tool's dump). :class:`ManifestError` when it is
    there but is not one."""
    path = dump.dump_path / file_name(dump.rank or 0)
    return read_manifest(path) if os.path.lexists(path) else None


Scalar = str | int | float | bool | None


def flat(manifest: Mapping[str, Any]) -> dict[str, Scalar]:
    """Every scalar of a manifest by its dotted key (``optimizers.0.groups.0.lr``)."""
    out: dict[str, Scalar] = {}
    for section in SECTIONS:
        if section in manifest:
            out.update(_leaves(manifest[section], section))
    return out


def _leaves(value: Any, key: str) -> Iterator[tuple[str, Scalar]]:
    if isinstance(value, Mapping):
        for k, v in value.items():
            yield from _leaves(v, f"{key}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, f"{key}.{i}")
    else:
        yield key, value


@dataclass(frozen=True, slots=True)
class ManifestDifference:
    """One key whose value differs between two manifests (None on a side: absent there)."""

    kind: str  # the section: hyperparameter differences are ``optimizers``/``schedulers``
    key: str  # dotted, e.g. ``optimizers.0.groups.0.lr``, ``parameters.fc.weight.checksum``
    left: Scalar
    right: Scalar
    numeric: bool  # whether the difference can change the numbers (a hostname or a path cannot)
    present: tuple[bool, bool] = (True, True)


def _same(a: Scalar, b: Scalar) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


def numeric_key(key: str, values: tuple[Scalar, Scalar] = (None, None)) -> bool:
    """Whether a difference at ``key`` between ``values`` can change the numbers: not where a run ran
    (its host, its Python), nor the script's path, nor a script argument that is a path on either side
    (an output folder); any other argument may be a hyperparameter."""
    section = key.split(".", 1)[0]
    if section in _NOT_NUMERIC or key in _NOT_NUMERIC_KEYS:
        return False
    return not (section == ARGV and any(isinstance(v, str) and ("/" in v or "\\" in v) for v in values))


def manifest_differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[ManifestDifference]:
    """The keys whose values differ between two manifests, numeric ones first, each group in the
    manifest's section order."""
    fa, fb = flat(a), flat(b)
    order = {s: i for i, s in enumerate(SECTIONS)}
    found = []
    for key in [*fa, *(k for k in fb if k not in fa)]:
        left, right = fa.get(key), fb.get(key)
        present = (key in fa, key in fb)
        if present == (True, True) and _same(left, right):
            continue
        section = key.split(".", 1)[0]
        found.append(ManifestDifference(section, key, left, right, numeric_key(key, (left, right)), present))
    found.sort(key=lambda d: (not d.numeric, order[d.kind]))
    return found
