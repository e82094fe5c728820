"""What to dump: the modes and switches of ``configure_hook``, checked when they are given.

Every argument is validated here, at set-up time, so that a typo fails before training starts
rather than in the middle of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ptdbg_tui.formats.dump_options import SUMMARY_MODES
from ptdbg_tui.formats.naming import BACKWARD, FORWARD, INPUT, OUTPUT

#: Modes this dumper implements (``acl`` needs CANN and is refused with a message).
MODES = ("api_stack", "all", "list", "range", "api_list", "stack")
#: Modes that write a stack line per call.
STACK_LINE_MODES = ("api_stack", "list", "range", "stack")
IO_MODES = (FORWARD, BACKWARD, INPUT, OUTPUT, "all")


class ConfigError(ValueError):
    """An argument of the debugger is unknown or invalid (the message says which and why)."""


def _names(value: object, what: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ConfigError(f"{what} must be a list of names, got {value!r}")
    if not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"{what} must hold non-empty strings, got {value!r}")
    return list(value)


def _switch(value: object, what: str) -> bool:
    if value in ("ON", "OFF"):
        return value == "ON"
    raise ConfigError(f'{what} must be "ON" or "OFF", got {value!r}')


def _check_mode(mode: str, scope: list[str], apis: list[str]) -> None:
    """A mode and the scope or API list it needs."""
    if mode not in MODES:
        raise ConfigError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
    if mode == "list" and not scope:
        raise ConfigError("mode 'list' needs scope=[name prefixes], e.g. ['Torch_add_0']")
    if mode == "range" and len(scope) != 2:
        raise ConfigError("mode 'range' needs scope=[first, last] (two call names)")
    if mode == "stack" and len(scope) > 2:
        raise ConfigError("mode 'stack' takes scope=[] (all), [prefix] or [first, last]")
    if mode == "api_list" and not apis:
        raise ConfigError("mode 'api_list' needs api_list=[...], e.g. ['conv2d', 'relu']")
    if mode not in ("list", "range", "stack") and scope:
        raise ConfigError(f"scope is used by modes list, range and stack, not by {mode!r}")
    if mode != "api_list" and apis:  # else the list would be silently ignored and every API dumped
        raise ConfigError(f"api_list is used by mode api_list, not by {mode!r}")


def _io(input_output_mode: Sequence[str] | None) -> tuple[frozenset[str], frozenset[str]]:
    """The directions and kinds an ``input_output_mode`` keeps."""
    io = _names(input_output_mode, "input_output_mode") or ["all"]
    unknown = [m for m in io if m not in IO_MODES]
    if unknown:
        raise ConfigError(f"input_output_mode: unknown {unknown}; expected a subset of {list(IO_MODES)}")
    directions = {m for m in io if m in (FORWARD, BACKWARD)}
    kinds = {m for m in io if m in (INPUT, OUTPUT)}
    if "all" in io:
        directions, kinds = {FORWARD, BACKWARD}, {INPUT, OUTPUT}
    return frozenset(directions or (FORWARD, BACKWARD)), frozenset(kinds or (INPUT, OUTPUT))


@dataclass
class DumpConfig:
    """Validated configure_hook settings (defaults are the original's)."""

    mode: str = "api_stack"
    scope: list[str] = field(default_factory=list)
    api_list: list[str] = field(default_factory=list)
    filter_on: bool = False
    directions: frozenset[str] = frozenset((FORWARD, BACKWARD))
    kinds: frozenset[str] = frozenset((INPUT, OUTPUT))
    summary_only: bool = False
    disable_dropout: bool = True
    module: list[str] = field(default_factory=list)  # module paths: only calls made inside them
    summary_mode: str = "statistics"  # "md5": a CRC-32 of each tensor in the pkl too

    @classmethod
    def build(
        cls,
        mode: str = "api_stack",
        scope: Sequence[str] | None = None,
        api_list: Sequence[str] | None = None,
        filter_switch: str = "OFF",
        input_output_mode: Sequence[str] | None = None,
        summary_only: bool = False,
        disable_dropout: bool = True,
        acl_config: str | None = None,
        backward_input: Sequence[str] | None = None,
        module: Sequence[str] | None = None,
        summary_mode: str = "statistics",
    ) -> DumpConfig:
        if mode == "acl" or acl_config is not None or backward_input is not None:
            raise ConfigError(
                "mode 'acl' (CANN op-level dump) is not supported by this dumper; "
                f"use one of {', '.join(MODES)}"
            )
        scope_l = _names(scope, "scope")
        apis = [a.lower() for a in _names(api_list, "api_list")]
        _check_mode(mode, scope_l, apis)
        modules = _names(module, "module")
        bad = [m for m in modules if m != m.strip(".") or ".." in m or any(c.isspace() for c in m)]
        if bad:
            raise ConfigError(f"module: {bad[0]!r} is not a module path such as 'encoder.layers.0'")
        if not isinstance(summary_only, bool) or not isinstance(disable_dropout, bool):
            raise ConfigError("summary_only and disable_dropout must be True or False")
        if summary_mode not in SUMMARY_MODES:
            raise ConfigError(f"summary_mode must be one of {', '.join(SUMMARY_MODES)}, got {summary_mode!r}")
        directions, kinds = _io(input_output_mode)
        return cls(
            mode,
            scope_l,
            apis,
            _switch(filter_switch, "filter_switch"),
            directions,
            kinds,
            summary_only or summary_mode == "md5",
            disable_dropout,
            modules,
            summary_mode,
        )

    @property
    def writes_tensors(self) -> bool:
        return self.mode != "stack"

    @property
    def writes_stack(self) -> bool:
        return self.mode in STACK_LINE_MODES

    @property
    def writes_npy(self) -> bool:
        return self.writes_tensors and not self.summary_only

    @property
    def checksums(self) -> bool:
        """md5 mode: each tensor's CRC-32 in its pkl line (no npy files)."""
        return self.writes_tensors and self.summary_mode == "md5"


class ScopeFilter:
    """Which calls a mode's scope selects, by call name (``Torch_add_0_forward``).

    ``range`` is a state machine over calls in the order they are seen; unlike the original its
    state is reset by :meth:`reset` (at each step) instead of living forever in module globals.
    """

    def __init__(self, config: DumpConfig) -> None:
        self.config = config
        self.reset()

    def reset(self) -> None:
        self._in_range = False
        self._range_done = False

    @property
    def is_range(self) -> bool:
        mode, scope = self.config.mode, self.config.scope
        return mode == "range" or (mode == "stack" and len(scope) == 2)

    def static_match(self, call: str) -> bool:
        """The verdict of the order-free modes (range: always True; see :meth:`range_match`)."""
        mode, scope = self.config.mode, self.config.scope
        if mode == "api_list":
            lowered = call.lower()
            return any(a in lowered for a in self.config.api_list)
        if mode == "list" or (mode == "stack" and len(scope) == 1):
            return any(call.startswith(s) for s in scope)
        return True

    def range_match(self, call: str) -> bool:
        """Advance the range state with ``call`` and say whether it is inside the range."""
        if not self.is_range:
            return True
        first, last = self.config.scope
        if self._range_done:
            return False
        if not self._in_range and call.startswith(first):
            self._in_range = True
        if self._in_range and call.startswith(last):
            self._in_range, self._range_done = False, True
            return True
        return self._in_range
