"""``PrecisionDebugger``: the original's entry point, same call shape, checked at construction."""

from __future__ import annotations

import inspect
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from torch import nn

from dumper.config import ConfigError, DumpConfig
from dumper.session import DumpSession
from ptdbg_tui.formats.dump_options import DumpOptions, OptionsError, read_options
from ptdbg_tui.formats.modules import within


def _check_path(dump_path: object) -> Path:
    if not isinstance(dump_path, (str, os.PathLike)) or not str(dump_path):
        raise ConfigError(f"dump_path must be a non-empty path, got {dump_path!r}")
    path = Path(dump_path)
    if path.is_symlink():
        raise ConfigError(f"dump_path {path} is a symbolic link; give the real directory")
    if path.exists() and not path.is_dir():
        raise ConfigError(f"dump_path {path} exists and is not a directory")
    return path.absolute()  # where it is now: a script that changes its directory dumps there still


def _check_steps(step: object, what: str = "step") -> list[int]:
    if step is None:
        return []
    if (
        isinstance(step, (str, bytes))
        or not isinstance(step, Sequence)
        or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in step)
    ):
        raise ConfigError(f"{what} must be a list of non-negative integers, got {step!r}")
    return sorted(set(step))


class PrecisionDebugger:
    """Dump every wrapped API call between :meth:`start` and :meth:`stop`.

    ``step=[...]`` lists the steps to dump (a ``stepN`` folder level; ``[]`` or None: every step,
    no step level); :meth:`step` moves to the next one. ``rank=N`` names the rank folder (and, in a
    distributed job, is the only rank that dumps); ``rank=[...]`` lists the ranks that dump, each in
    its own folder, the others run undumped. ``model`` gives the modules their qualified names
    in the module sidecar; API dumping is unchanged (the original's model mode is not offered).
    """

    def __init__(
        self,
        dump_path: str | os.PathLike[str],
        hook_name: str = "dump",
        rank: int | Sequence[int] | None = None,
        step: Sequence[int] | None = None,
        enable_dataloader: bool = False,
        model: nn.Module | None = None,
    ) -> None:
        if hook_name != "dump":
            raise ConfigError(
                f"hook_name {hook_name!r} is not supported; this dumper offers 'dump' only "
                "(overflow_check needs an NPU runtime)"
            )
        ranks = None
        if isinstance(rank, Sequence) and not isinstance(rank, (str, bytes)):
            ranks, rank = frozenset(_check_steps(rank, "rank")), None
        if rank is not None and (not isinstance(rank, int) or isinstance(rank, bool) or rank < 0):
            raise ConfigError(f"rank must be a non-negative integer, a list of them or None, got {rank!r}")
        if enable_dataloader:
            raise ConfigError(
                "enable_dataloader is not supported: call start(), stop() and step(), "
                "or run the script with `ptdbg-dump run`"
            )
        if model is not None and not isinstance(model, nn.Module):
            raise ConfigError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        self.dump_path = _check_path(dump_path)
        self.steps = _check_steps(step)
        self.rank = rank
        self.ranks = ranks
        self.model = model
        self.config = DumpConfig()
        self._session: DumpSession | None = None

    @classmethod
    def from_options(cls, opts: DumpOptions, model: nn.Module | None = None) -> PrecisionDebugger:
        """A debugger configured by a dump's options (``ptdbg-dump run``'s, an options file's)."""
        if not opts.dump_path:
            raise ConfigError("dump_path is required (on the command line or in the options file)")
        rank = opts.rank[0] if opts.rank and len(opts.rank) == 1 else opts.rank or None  # one: rank=N
        debugger = cls(dump_path=opts.dump_path, step=opts.step, rank=rank, model=model)
        debugger.configure_hook(
            mode=opts.mode or "api_stack",
            scope=opts.scope,
            api_list=opts.api_list,
            summary_only=bool(opts.summary_only),
            disable_dropout=not opts.keep_dropout,
            module=opts.module,
            summary_mode=opts.summary_mode or "statistics",
        )
        return debugger

    @classmethod
    def from_config(
        cls,
        config_path: str | os.PathLike[str],
        dump_path: str | os.PathLike[str] | None = None,
        model: nn.Module | None = None,
    ) -> PrecisionDebugger:
        """A debugger configured by an options file (what ``ptdbg-tui narrow`` writes), for ranks that
        ``ptdbg-dump run`` does not start (``torch.multiprocessing.spawn``): ``dump_path`` overrides the
        file's. Start, step and stop it as any other."""
        try:
            opts = read_options(config_path)
        except OptionsError as e:
            raise ConfigError(str(e)) from None
        given = DumpOptions(dump_path=str(dump_path)) if dump_path is not None else DumpOptions()
        return cls.from_options(opts.overridden(given), model)

    def configure_hook(self, *args: Any, **kwargs: Any) -> None:
        """Choose what to dump: the switches of :meth:`DumpConfig.build <dumper.config.DumpConfig.build>`
        (the original's, and ``module``, ``summary_mode``); see docs/dumper.md#configure_hook."""
        if self._session is not None and self._session.active:
            raise ConfigError("configure_hook() must be called before start()")
        try:
            self.config = DumpConfig.build(*args, **kwargs)
        except TypeError as e:  # a switch it does not have, or too many
            raise TypeError(str(e).replace("DumpConfig.build()", "configure_hook()")) from None
        if self.model is not None and self.config.module:
            names = [n for n, _ in self.model.named_modules() if n]
            missing = [m for m in self.config.module if not any(within(n, m) for n in names)]
            if missing:
                raise ConfigError(
                    f"module: the model has no module {missing[0]!r}; its modules are "
                    f"{', '.join(names[:12])}{' ...' if len(names) > 12 else ''}"
                )
        self._session = None

    @property
    def session(self) -> DumpSession:
        if self._session is None:
            self._session = DumpSession(
                self.config, self.dump_path, self.steps, self.rank, self.model, self.ranks
            )
        return self._session

    def start(self) -> None:
        self.session.start()

    def stop(self) -> None:
        self.session.stop()

    def step(self) -> None:
        self.session.next_step()

    @property
    def rank_dir(self) -> Path | None:
        """Where this process's dump of the current step goes (None until a call was dumped)."""
        return self.session.rank_dir


# help() and editors show configure_hook's switches: they are DumpConfig.build's, defined once there
PrecisionDebugger.configure_hook.__signature__ = inspect.signature(DumpConfig.build).replace(  # type: ignore[attr-defined]
    parameters=[
        inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
        *inspect.signature(DumpConfig.build).parameters.values(),
    ],
    return_annotation=None,
)
