"""Narrowing the next dump (issue 19): from a statistics comparison to the configuration of a tensor
dump of one module (or a few calls), at the step(s) and rank(s) where it diverged, and the commands
that run it on both sides.

With neither a call nor a module named, the target is the culprit's innermost module (the culprit of
the first divergent rank when there are several), or the culprit call itself where the dump records
no module around it. ``ptdbg-tui narrow`` (:mod:`ptdbg_tui.cli`) and the app's narrowing key use it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ptdbg_tui.compare.diagnosis.findings import NONDETERMINISTIC, UNPAIRED, Suspect
from ptdbg_tui.compare.diagnosis.narrowing import SCRIPT, CulpritCall, CulpritIn, Named, NarrowWhy
from ptdbg_tui.compare.diagnosis.ranks import is_collective
from ptdbg_tui.compare.report.line_words import module_path_text
from ptdbg_tui.compare.report.words import narrowing_lines, tool_usage_lines
from ptdbg_tui.engine.batch import Outcomes, PairOutcome
from ptdbg_tui.engine.callpath import module_label, user_frames
from ptdbg_tui.formats.dump_options import write_options
from ptdbg_tui.formats.file_writes import write_text
from ptdbg_tui.formats.files import reason
from ptdbg_tui.formats.layout import RankDump, process_id_folder
from ptdbg_tui.formats.modules import ModuleChain, within
from ptdbg_tui.formats.naming import BACKWARD, FORWARD, EntryName
from ptdbg_tui.formats.narrowing import Narrowed, dumper_options, narrowed_to_call, tool_config
from ptdbg_tui.formats.reader import DumpReader, open_reader
from ptdbg_tui.formats.records import StackRecord
from ptdbg_tui.formats.untrusted import file_component, module_path_problem

#: Module paths a message lists at most.
LISTED = 12


class NarrowError(Exception):
    """There is nothing to narrow to, or the call or module named is not in the dump (the message
    says why, in one line)."""


class NothingToNarrow(NarrowError):
    """No pair names a culprit (the runs agree, or nothing names a call): not a usage error, the report
    says each pair's verdict."""


@dataclass(frozen=True)
class Narrowing:
    """The next dump's target, the NPU dump it was found in (None: found by the training monitor, and
    the next dump is this project's), why, and the script when known."""

    target: Narrowed
    npu: RankDump | None
    why: NarrowWhy
    script: str = SCRIPT
    multi_rank: bool = False  # the dumps show a job of several ranks: say how to run one (torchrun, spawn)
    checksums: bool = False  # the culprit was found by its checksums: tensors may not show it again


@dataclass
class Written:
    """The files a narrowing wrote and what to tell the user."""

    config: Path
    dump_dir: Path
    other: Path | None = None  # the other tool's config (msprobe's), when it wrote the NPU dump
    lines: list[str] = field(default_factory=list)


class _Chains:
    """Module chains of calls, one reader per NPU dump (read once); none where it cannot be read."""

    def __init__(self) -> None:
        self._readers: dict[Path, DumpReader | None] = {}
        self.unread: dict[Path, str] = {}  # by dump: why its module sidecar cannot be read

    def __call__(self, dump: RankDump, entry: EntryName) -> ModuleChain:
        if dump.records not in self._readers:
            reader: DumpReader | None
            reader = open_reader(dump)  # sidecars only: the chunk bounds tensor records' reads
            try:
                reader.read_modules(final=True)
            except OSError as e:
                self.unread[dump.records] = reason(e)
                reader = None
            self._readers[dump.records] = reader
        reader = self._readers[dump.records]
        return (reader.module_chain(entry) or ()) if reader is not None else ()


def script_of(stack: StackRecord | None) -> str:
    """The training script: the innermost top level of a script in a call's stack (a launcher's own
    is further out); else :data:`SCRIPT`."""
    frames = user_frames(stack.frames) if stack is not None else []
    return next((f.path for f in reversed(frames) if f.function == "<module>"), SCRIPT)


def _entry(suspect: Suspect) -> EntryName | None:
    return next((r.record.entry for r in suspect.rows if r.record.entry is not None), None)


def _label(name: str) -> str:
    """A call as given (``VF_lstm_0_backward``, ``Functional.silu.0.forward``, ``VF_lstm_0``) without
    its direction."""
    for direction in (FORWARD, BACKWARD):
        for sep in ("_", "."):
            if name.endswith(sep + direction):
                return name[: -len(direction) - 1]
    return name


def _diverged(outcomes: Outcomes) -> PairOutcome | None:
    """The pair whose culprit the narrowing follows: the first divergent rank's, else the pair where the
    report says the error first shows (every rank only receives it), else the earliest step's pair
    with a culprit."""
    first = outcomes.ranks.first or outcomes.ranks.shows_first
    if first is not None:
        view = first.view
        for o in outcomes:
            same = (o.npu.label, o.npu.step, o.npu.rank) == (view.label, view.step, view.rank)
            if same and o.diagnosis.culprit is not None:
                return o
    found = [o for o in outcomes if o.diagnosis.culprit is not None and not o.no_verdict]
    return min(found, key=lambda o: -1 if o.npu.step is None else o.npu.step, default=None)


def _modules(outcomes: Iterable[PairOutcome], chains: _Chains) -> set[str]:
    """Every module path the NPU dumps record around a call."""
    seen: set[str] = set()
    paths: set[str] = set()
    for o in outcomes:
        for row in o.rows:
            entry = row.npu.entry if row.npu is not None else None
            if entry is not None and entry.label not in seen:
                seen.add(entry.label)
                paths.update(q for q, _ in chains(o.npu, entry) if q)
    return paths


def _named_call(outcomes: Outcomes, name: str) -> tuple[PairOutcome, EntryName]:
    """The NPU entry of the call named as the report names it, or without its direction. The call's
    own name is tried as well: msprobe's module calls end in their index
    (``Module.lstm.LSTM.forward.0``), so stripping a direction off the end finds none of them."""
    label = _label(name)
    for o in outcomes:
        for row in o.rows:
            entry = row.npu.entry if row.npu is not None else None
            if entry is not None and (entry.label == label or entry.call == name):
                return o, entry
    pair = _diverged(outcomes)
    culprit = pair.diagnosis.culprit if pair is not None else None
    example = culprit.call if culprit is not None else "Functional_linear_0_forward"
    raise NarrowError(
        f"no call {name} in the NPU dump (a call is named as the report names it, e.g. {example})"
    )


def _inside(o: PairOutcome, suspect: Suspect, target: Narrowed, chains: _Chains) -> bool:
    entry = _entry(suspect)
    return entry is not None and _entry_inside(o, entry, target, chains)


def _entry_inside(o: PairOutcome, entry: EntryName, target: Narrowed, chains: _Chains) -> bool:
    if target.module:
        return any(within(q, target.module) for q, _ in chains(o.npu, entry))
    return any(entry.key[:3] == c.key[:3] for c in target.calls)


def _steps_and_ranks(
    outcomes: Outcomes, target: Narrowed, chains: _Chains, fallback: list[PairOutcome]
) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
    """The earliest step at which a suspect lies inside the target (the later ones inherit the
    divergence) and the ranks with one there; else those of ``fallback``. None where a dump has no
    step or rank number (the next dump covers them all)."""
    hits = [o for o in outcomes if any(_inside(o, s, target, chains) for s in o.diagnosis.suspects)]
    if hits and all(o.npu.step is not None for o in hits):
        first = min(o.npu.step for o in hits if o.npu.step is not None)
        hits = [o for o in hits if o.npu.step == first]
    hits = hits or fallback
    steps = {o.npu.step for o in hits}
    ranks = {o.npu.rank for o in hits}
    return (
        None if None in steps else tuple(sorted(s for s in steps if s is not None)),
        None if None in ranks else tuple(sorted(r for r in ranks if r is not None)),
    )


def narrowing_of(outcomes: Outcomes, call: str | None = None, module: str | None = None) -> Narrowing:
    """The next dump's target from a (statistics) comparison: ``call`` or ``module`` when named,
    else the culprit's innermost module. Raises :class:`NarrowError`."""
    chains = _Chains()
    pair = _diverged(outcomes)
    culprit = pair.diagnosis.culprit if pair is not None else None
    why: NarrowWhy
    if call:
        pair, entry = _named_call(outcomes, call)
        target, why = narrowed_to_call(entry), Named(call, module=False)
    elif module:
        known = _modules(outcomes, chains)
        if not known:
            raise NarrowError(
                "the NPU dump records no modules around its calls (a dump of the original "
                "ptdbg_ascend, or msprobe at level L1): name a call with --call"
            )
        if module not in known:
            names = sorted(known)
            more = f" … ({len(names)} in all)" if len(names) > LISTED else ""
            raise NarrowError(
                f"no module {module} in the NPU dump; its modules are {', '.join(names[:LISTED])}{more}"
            )
        target, why = Narrowed(module=module), Named(module, module=True)
    elif pair is None or culprit is None:
        agree = all(o.diagnosis.all_clear and not o.no_verdict for o in outcomes)
        said = "no call introduces an error beyond rounding and no entry fails" if agree else "see above"
        raise NothingToNarrow(f"no culprit ({said})")
    else:
        target, why = _culprit_target(pair, culprit, chains)
    steps, ranks = _steps_and_ranks(outcomes, target, chains, [pair] if pair is not None else list(outcomes))
    dumps = [*outcomes.around.npu, *(o.npu for o in outcomes)]
    target = Narrowed(target.module, target.calls, steps, None if process_id_folder(dumps) else ranks)
    stack = _target_stack(outcomes, target, chains) if call or module else culprit.stack if culprit else None
    npu_names = (r.npu.name for o in outcomes for r in o.rows if r.npu is not None)
    return Narrowing(
        _checked(target),
        pair.npu if pair is not None else outcomes[0].npu,
        why,
        script_of(stack),
        multi_rank_job(dumps, npu_names),
        culprit is not None and culprit.kind == NONDETERMINISTIC and not (call or module),
    )


def _target_stack(outcomes: Outcomes, target: Narrowed, chains: _Chains) -> StackRecord | None:
    """The stack of the target's first call with one (it names the script, as the app's ``t`` does)."""
    for o in outcomes:
        for row in o.rows:
            entry = row.npu.entry if row.npu is not None else None
            if row.stack is not None and entry is not None and _entry_inside(o, entry, target, chains):
                return row.stack
    return None


def _culprit_target(pair: PairOutcome, culprit: Suspect, chains: _Chains) -> tuple[Narrowed, NarrowWhy]:
    entry = _entry(culprit)
    if entry is None:
        raise NarrowError(f"the culprit {culprit.call} has no call name to narrow to")
    modules = chains(pair.npu, entry)
    chain = [item for item in modules if item[0]]
    if chain:
        return Narrowed(module=chain[-1][0]), CulpritIn(culprit.call, module_label(*chain[-1]))
    if culprit.kind == UNPAIRED:  # the bench run would dump nothing, and the finding needs no tensors
        site = culprit.site
        at = f" ({site.path}:{site.line})" if site is not None else ""
        raise NarrowError(
            f"the culprit {culprit.call} is a call only the NPU run makes{at}, in no module of its own: "
            f"the bench run has no such call to dump, and a tensor dump adds nothing to that finding "
            f"(name a call or module both runs make with --call or --module)"
        )
    target = narrowed_to_call(entry)
    # the root alone: the model's own forward, which is no narrower than the whole model
    unread = chains.unread.get(pair.npu.records, "")
    forward = modules[-1][1] if modules else None
    return target, CulpritCall(culprit.call, bool(target.module), forward, "" if modules else unread)


def narrowing_in(
    npu: RankDump,
    why: NarrowWhy,
    module: str = "",
    call: EntryName | None = None,
    stack: StackRecord | None = None,
    dumps: Iterable[RankDump] = (),
    names: Iterable[str] = (),
) -> Narrowing:
    """The next dump's target at one pair's step and rank: a module, or a call (the app's key);
    ``dumps``, ``names``: every NPU dump compared and its calls' names, which tell a job of several
    ranks (:func:`multi_rank_job`) and a rank folder named by a process id."""
    dumps = list(dumps)
    steps = (npu.step,) if npu.step is not None else None
    ranks = (npu.rank,) if npu.rank is not None and not process_id_folder(dumps) else None
    target = (
        Narrowed(module=module, steps=steps, ranks=ranks)
        if module or call is None
        else narrowed_to_call(call, steps, ranks)
    )
    return Narrowing(_checked(target), npu, why, script_of(stack), multi_rank_job(dumps, names))


def monitor_narrowing(
    module: str, step: int, rank: int, why: NarrowWhy, script: str, ranks: int
) -> Narrowing:
    """The next dump's target from the training monitor (:mod:`ptdbg_tui.compare.monitor`): the module
    of the first divergence at its step and rank (``ranks``: how many ranks the monitor saw; more
    than one, or a rank above 0, is a job whose commands need torchrun's form). Raises
    :class:`NarrowError` where the module is no module path (the names are the monitor file's text)."""
    target = Narrowed(module=module, steps=(step,), ranks=(rank,))
    return Narrowing(_checked(target), None, why, script, multi_rank=ranks > 1 or rank > 0)


def _checked(target: Narrowed) -> Narrowed:
    """``target``, whose module path (dump text: modules.jsonl, msprobe's construct.json) is one a
    model can have; else :class:`NarrowError` (the config would select nothing real)."""
    if target.module and (problem := module_path_problem(target.module)):
        raise NarrowError(
            f"the dump names a module that is not a module path ({module_path_text(problem)}): name a call "
            "with --call"
        )
    return target


def default_config(target: Narrowed) -> str:
    """``./narrow_<module or call>.json``, the name made a plain file name (no separator, never ``..``,
    bounded): it is dump text."""
    return f"./narrow_{file_component(target.name)}.json"


def dump_dir_for(config: Path) -> Path:
    """Where the narrowed dumps go by default: beside the config, named after it (``npu`` and
    ``bench`` below it)."""
    name = config.name.removesuffix(".json")
    return config.with_name(name if name != config.name else name + ".dump")


def write_narrowing(n: Narrowing, config: str | Path, dump_dir: str | Path | None = None) -> Written:
    """Write the config (and the other tool's, when it wrote the NPU dump: ``<name>.<tool>.json``
    beside it) and say what to run. Raises OSError."""
    config = Path(config).expanduser()
    dump_dir = Path(dump_dir).expanduser() if dump_dir is not None else dump_dir_for(config)
    npu_dir, bench_dir = dump_dir / "npu", dump_dir / "bench"
    config.parent.mkdir(parents=True, exist_ok=True)
    write_options(config, dumper_options(n.target))
    out = Written(config, dump_dir, lines=narrowing_lines(n, config, npu_dir, bench_dir))
    other = tool_config(n.npu, n.target, str(npu_dir), str(bench_dir)) if n.npu is not None else None
    if other is not None:
        out.other = config.with_name(f"{config.name.removesuffix('.json')}.{other.tool}.json")
        text = json.dumps(other.data, indent=2)
        write_text(out.other, text + "\n")
        out.lines += [
            f"{other.tool} config: {out.other}",
            *(f"  {u}" for u in tool_usage_lines(other, out.other)),
            *(f"  {line}" for line in text.splitlines()),
        ]
    return out


def multi_rank_job(dumps: Iterable[RankDump], names: Iterable[str]) -> bool:
    """Whether NPU dumps (and the names of their entries or calls) show a job of several ranks: more
    than one rank dumped, a rank above 0, or a collective recorded. Only such a job needs the
    torchrun and spawned-ranks forms of the commands; a single-process script is run as it is."""
    dumps = list(dumps)
    ranks = set() if process_id_folder(dumps) else {d.rank for d in dumps}
    return len(ranks) > 1 or any(ranks - {None, 0}) or any(is_collective(name) for name in names)
