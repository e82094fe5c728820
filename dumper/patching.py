"""Monkey-patching the wrapped APIs, and the thread-local flag that keeps nested calls unseen.

A wrapper reads its target from a :class:`Slot`, so whoever replaces an API while the dumper is
installed (``dumper.faults``) can swap the slot's function and stay *under* the wrapper: the dump
still names the call after the API.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import torch

from dumper.catalog import ApiTarget, dropout_position, without_dropout

#: True while torch.compile traces: a compiled region is traced through to the true APIs, as
#: without the dumper (its ops run fused, in no recorded call; dynamo cannot trace the recording)
is_compiling = torch.compiler.is_compiling


class _Tls(threading.local):
    inside = False  # a wrapped call (or the dumper itself) is running on this thread


TLS = _Tls()


class Session(Protocol):
    disable_dropout: bool

    def call(
        self, target: ApiTarget, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any: ...

    def dropout_forced(self, target: ApiTarget) -> None: ...


class _State:
    session: Session | None = None


STATE = _State()


class Slot:
    """One patched attribute: its target, the function called through, how to undo the patch."""

    __slots__ = ("attr", "covered", "found", "inherited", "original", "owners", "target", "wrapper")

    def __init__(self, target: ApiTarget) -> None:
        self.target, self.owners, self.attr = target, target.owners, target.attr
        self.refresh(target.original)
        self.covered: Any = None  # what the script put over the wrapper while it was installed
        self.wrapper = _make_wrapper(target, self)

    def refresh(self, current: Any) -> None:
        """Take the attribute as it is now (someone may have replaced it since the last install)."""
        self.found = self.original = current
        # not in the owner's own __dict__: inherited (Tensor from TensorBase) or served by
        # a module __getattr__ (torch._VF); undone by deleting the attribute again
        self.inherited = self.attr not in vars(self.owners[0])


def _silent_wrapper(slot: Slot) -> Callable[..., Any]:
    """A call never recorded, whose inner calls are not recorded either."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if TLS.inside:
            return slot.original(*args, **kwargs)
        TLS.inside = True
        try:
            return slot.original(*args, **kwargs)
        finally:
            TLS.inside = False

    return wrapper


def _lifting_wrapper(slot: Slot) -> Callable[..., Any]:
    """``torch.jit.script``/``trace``, run with every wrapper lifted: TorchScript resolves the
    functions a module calls by their Python objects, and a wrapper is no builtin it knows nor has
    their source (``TypeError: ... got builtin_function_or_method``); a trace would take the
    wrappers' autograd taps into its graph. Lifted, both compile the true APIs, as without the dumper."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        targets = _targets[0] if _targets else None
        if not _installed or targets is None:
            return slot.original(*args, **kwargs)
        run = slot.original
        uninstall()
        inside, TLS.inside = TLS.inside, True
        try:
            return run(*args, **kwargs)
        finally:
            TLS.inside = inside
            install(targets)

    return wrapper


def _dropout_wrapper(target: ApiTarget, slot: Slot, position: tuple[int, str | None]) -> Callable[..., Any]:
    """A dropout call, made with p=0 while the session disables dropout. A dropout function is recorded
    with the probability the script asked for (two scripts that ask for different ones differ, though
    neither run drops anything while dumping; no replay rebuilds a random op). An RNN kernel is recorded
    as it ran: a replay rebuilds it from its record."""

    def forced(*args: Any, **kwargs: Any) -> Any:
        args, kwargs, _ = without_dropout(position, args, kwargs)
        return slot.original(*args, **kwargs)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        session = STATE.session
        if session is None:
            return slot.original(*args, **kwargs)
        run = slot.original
        compiling = is_compiling()
        if session.disable_dropout:
            run = forced
            off_args, off_kwargs, changed = without_dropout(position, args, kwargs)
            if changed and not compiling:
                session.dropout_forced(target)
            if position[0] < 0:  # an RNN kernel
                run, args, kwargs = slot.original, off_args, off_kwargs
        if compiling or TLS.inside:  # inside other wrapped calls (MHA calls dropout)
            return run(*args, **kwargs)
        return session.call(target, run, args, kwargs)

    return wrapper


def _recording_wrapper(target: ApiTarget, slot: Slot) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        session = STATE.session
        if session is None or TLS.inside or is_compiling():
            return slot.original(*args, **kwargs)
        return session.call(target, slot.original, args, kwargs)

    return wrapper


def _make_wrapper(target: ApiTarget, slot: Slot) -> Callable[..., Any]:
    if target.silent:
        wrapper = _silent_wrapper(slot)
    elif target.lifted:
        wrapper = _lifting_wrapper(slot)
    elif (position := dropout_position(target)) is not None:
        wrapper = _dropout_wrapper(target, slot, position)
    else:
        wrapper = _recording_wrapper(target, slot)
    functools.update_wrapper(wrapper, slot.original, updated=())
    wrapper.__dumper_slot__ = slot  # type: ignore[attr-defined]
    return wrapper


_installed: list[Slot] = []
_built: dict[int, tuple[Sequence[ApiTarget], list[Slot]]] = {}  # wrappers built once per target list
_targets: list[Sequence[ApiTarget]] = []  # the list installed last (a lifting wrapper reinstalls it)


def install(targets: Sequence[ApiTarget]) -> None:
    """Patch every target (idempotent); cheap enough to run at every ``start()``."""
    if _installed:
        return
    _targets[:] = [targets]
    built = _built.get(id(targets))
    if built is None or built[0] is not targets:
        built = _built[id(targets)] = (targets, [Slot(t) for t in targets])
    for slot in built[1]:
        current = getattr(slot.owners[0], slot.attr)
        if current is not slot.found:
            if slot_of(current) is not None:
                continue  # wrapped by another install: leave it
            if current is slot.covered:
                # the script replaced the wrapper while it was installed (``orig = F.gelu;
                # F.gelu = mine``): theirs may call the wrapper it found, which still records the
                # call and runs the true function. Wrapping theirs would make the wrapper call
                # itself through it, without end; leave it, as during the step it was set in
                continue
            slot.refresh(current)
        for owner in slot.owners:
            setattr(owner, slot.attr, slot.wrapper)
        _installed.append(slot)


def uninstall() -> None:
    """Put back what :func:`install` replaced (or what was swapped into a slot since)."""
    for slot in reversed(_installed):
        for owner in slot.owners:
            current = getattr(owner, slot.attr, None)
            if current is not slot.wrapper:
                if owner is slot.owners[0]:
                    slot.covered = current
                continue  # replaced again by someone else: leave theirs in place
            if slot.inherited and slot.original is slot.found:
                delattr(owner, slot.attr)
            else:
                setattr(owner, slot.attr, slot.original)
    _installed.clear()


def slot_of(fn: Any) -> Slot | None:
    return getattr(fn, "__dumper_slot__", None)
