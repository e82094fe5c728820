"""Why the next dump narrows to its target: named on the command line, chosen in the app, the culprit's
module or call, the training monitor's first divergence
(:func:`ptdbg_tui.compare.report.words.narrowing_lines` says it with what to run)."""

from __future__ import annotations

from dataclasses import dataclass

#: The training script's placeholder in the commands, where the script is not known.
SCRIPT = "SCRIPT"


@dataclass(frozen=True, slots=True)
class Named:
    """The call or the module the user named (``--call``, ``--module``)."""

    name: str
    module: bool


@dataclass(frozen=True, slots=True)
class Chosen:
    """The module (its label) or the call the user chose in the app; a call's rank among the suspects
    (0: the culprit), None where it is none."""

    name: str
    module: bool
    rank: int | None = None


@dataclass(frozen=True, slots=True)
class CulpritIn:
    """The culprit ran in this module (its label): the next dump is that module's calls."""

    call: str
    module: str


@dataclass(frozen=True, slots=True)
class CulpritCall:
    """The culprit's own call: the target names its module (``in_module``), or it ran in the model's own
    forward (``forward``: the model's class; None: not there), in a module its unreadable sidecar
    (``unread``: why) does not tell, or in none the dump records."""

    call: str
    in_module: bool = False
    forward: str | None = None
    unread: str = ""


@dataclass(frozen=True, slots=True)
class MonitorFirst:
    """The training monitor's first divergence: its phase (which prints as its value), step and rank."""

    phase: str
    step: int
    rank: int


#: Why the next dump narrows to its target.
NarrowWhy = Named | Chosen | CulpritIn | CulpritCall | MonitorFirst
