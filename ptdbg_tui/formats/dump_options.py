"""The dumper's options file (``ptdbg-dump run SCRIPT --config FILE``): written by the app when it
narrows the next dump, read by the dumper. No torch, so that both sides share this one definition.

A JSON object whose keys are the long options of ``ptdbg-dump run`` with underscores; every key
may be left out (its default applies), options given on the command line override the file's::

    {
      "dump_path": "./dump/npu",          # str: where ptdbg_dump_v4.0/ is written
      "mode": "api_stack",                # str: api_stack | all | list | range | api_list | stack
      "step": [2],                        # list of int >= 0: the steps dumped; [] or null: every step
      "rank": [0, 3],                     # list of int >= 0: the ranks that dump; null: all of them
      "scope": [],                        # list of str: call names for modes list, range, stack
      "api_list": [],                     # list of str: API name parts for mode api_list
      "module": ["track.lstm"],           # list of str: module paths (as the module sidecar names
                                          #   them); only calls made inside them are dumped, with
                                          #   their backward; a path also selects its submodules
      "summary_only": false,              # bool: the pkl only, no npy files
      "summary_mode": "statistics",       # str: statistics | md5 (a CRC-32 of each tensor; implies
                                          #   summary_only)
      "keep_dropout": false               # bool: run dropout as the script says (not with p=0)
    }

An unknown key, a value of the wrong type or a file that is not such an object is refused with a
message that says which and why; what a value means (a mode's scope) is checked by the dumper.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ptdbg_tui.formats.file_writes import write_text
from ptdbg_tui.formats.files import open_regular, reason

SUMMARY_MODES = ("statistics", "md5")
#: Largest options file read: a few hundred names at most in practice.
MAX_BYTES = 1 << 20


class OptionsError(ValueError):
    """The options file cannot be used (the message says why)."""


@dataclass
class DumpOptions:
    """The options of one dump; None: not given (the dumper's default applies)."""

    dump_path: str | None = None
    mode: str | None = None
    step: list[int] | None = None
    rank: list[int] | None = None
    scope: list[str] | None = None
    api_list: list[str] | None = None
    module: list[str] | None = None
    summary_only: bool | None = None
    summary_mode: str | None = None
    keep_dropout: bool | None = None

    def overridden(self, other: DumpOptions) -> DumpOptions:
        """These options with every option ``other`` gives in their place."""
        return DumpOptions(**{**asdict(self), **{k: v for k, v in asdict(other).items() if v is not None}})

    def to_json(self) -> str:
        return json.dumps({k: v for k, v in asdict(self).items() if v is not None}, indent=2)


def _ints(value: Any, key: str) -> list[int]:
    if not isinstance(value, list) or not all(type(v) is int and v >= 0 for v in value):
        raise OptionsError(f"{key} must be a list of non-negative integers, got {_short(value)}")
    return value


def _names(value: Any, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise OptionsError(f"{key} must be a list of non-empty strings, got {_short(value)}")
    return value


def _text(value: Any, key: str) -> str:
    if not isinstance(value, str) or not value:
        raise OptionsError(f"{key} must be a non-empty string, got {_short(value)}")
    return value


def _flag(value: Any, key: str) -> bool:
    if not isinstance(value, bool):
        raise OptionsError(f"{key} must be true or false, got {_short(value)}")
    return value


def _summary_mode(value: Any, key: str) -> str:
    if not isinstance(value, str) or value not in SUMMARY_MODES:
        raise OptionsError(f"{key} must be one of {', '.join(SUMMARY_MODES)}, got {_short(value)}")
    return value


#: Each option's check: the value as given (it raises :class:`OptionsError` where it is wrong).
_CHECKS: dict[str, Callable[[Any, str], Any]] = {
    "dump_path": _text,
    "mode": _text,
    "step": _ints,
    "rank": _ints,
    "scope": _names,
    "api_list": _names,
    "module": _names,
    "summary_only": _flag,
    "summary_mode": _summary_mode,
    "keep_dropout": _flag,
}


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 80 else text[:79] + "…"


def parse_options(data: Any) -> DumpOptions:
    """Options from a decoded JSON value; raises :class:`OptionsError`."""
    if not isinstance(data, dict):
        raise OptionsError('the options must be a JSON object such as {"mode": "api_stack"}')
    unknown = sorted(set(data) - set(_CHECKS))
    if unknown:
        raise OptionsError(
            f"unknown option(s) {', '.join(map(repr, unknown))}; expected some of {', '.join(_CHECKS)}"
        )
    return DumpOptions(**{k: None if v is None else _CHECKS[k](v, k) for k, v in data.items()})


def read_options(path: str | os.PathLike[str]) -> DumpOptions:
    """The options of a file; raises :class:`OptionsError` saying what is wrong with it."""
    try:
        fd, _ = open_regular(path, within=None)  # the user names it
        with os.fdopen(fd, "rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except OSError as e:
        raise OptionsError(f"cannot read the options file {reason(e)}") from e
    if len(raw) > MAX_BYTES:
        raise OptionsError(f"{path}: larger than {MAX_BYTES} bytes; not an options file")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as e:
        raise OptionsError(f"{path}: not valid JSON ({e})") from e
    try:
        return parse_options(data)
    except OptionsError as e:
        raise OptionsError(f"{path}: {e}") from e


def write_options(path: str | os.PathLike[str], options: DumpOptions) -> Path:
    """Write an options file (what the app does when it narrows the next dump)."""
    return write_text(Path(path), options.to_json() + "\n")
