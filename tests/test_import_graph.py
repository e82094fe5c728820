"""The import graph of ``ptdbg_tui`` and ``dumper``, read from the source with ``ast``: no cycle, and
the layers' arrows point one way (formats → compare → engine → app, cli on top; the dumper apart).

Every import counts, at module level or inside a function: a lazy import that dodges a cycle is still
one. Where an import runs matters only for torch: ``formats`` and ``compare/diagnosis`` load without it,
so they may import it inside a function alone.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("ptdbg_tui", "dumper")


@dataclass(frozen=True)
class Import:
    """One import statement's target, as seen from the module that makes it."""

    source: str
    target: str  # fully qualified, relative imports resolved
    line: int
    top: bool  # run when the module is imported (not inside a function)


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = _modules()


def _walk(node: ast.AST, top: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child, top
        inner = top and not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
        yield from _walk(child, inner)


def _imports(module: str) -> Iterator[Import]:
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node, top in _walk(ast.parse(path.read_text(encoding="utf-8")), top=True):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(module, alias.name, node.lineno, top)
            continue
        base = node.module or ""
        if node.level:
            anchor = package.split(".")
            anchor = anchor[: len(anchor) - node.level + 1]
            base = ".".join([*anchor, base] if base else anchor)
        for alias in node.names:
            name = f"{base}.{alias.name}"
            yield Import(module, name if name in MODULES else base, node.lineno, top)


IMPORTS = [imp for module in MODULES for imp in _imports(module)]


def _internal(target: str) -> str | None:
    """The module of ours an import loads (the longest known prefix), or None for another package's."""
    parts = target.split(".")
    for end in range(len(parts), 0, -1):
        name = ".".join(parts[:end])
        if name in MODULES:
            return name
    return None


#: For each module, the modules it imports, each with where (``module:line``).
Graph = dict[str, dict[str, list[str]]]


def _graph() -> Graph:
    graph: Graph = {m: {} for m in MODULES}
    for imp in IMPORTS:
        target = _internal(imp.target)
        if target is not None and target != imp.source:
            graph[imp.source].setdefault(target, []).append(f"{imp.source}:{imp.line}")
    return graph


def _reach(graph: Graph, start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for target in graph[todo.pop()]:
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def _cycles(graph: Graph) -> list[list[str]]:
    """The groups of modules that import each other, directly or not (each group sorted)."""
    reach = {v: _reach(graph, v) for v in graph}
    groups = {tuple(sorted({v} | {w for w in reach[v] if v in reach[w]})) for v in graph if v in reach[v]}
    return sorted(list(g) for g in groups)


def _package(module: str) -> str:
    return module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]


def _packages(graph: Graph) -> Graph:
    """The graph of folders: a folder imports another when one of its modules does."""
    folders: Graph = {_package(m): {} for m in graph}
    for source, targets in graph.items():
        for target, lines in targets.items():
            if _package(source) != _package(target):
                folders[_package(source)].setdefault(_package(target), []).extend(lines)
    return folders


def _described(graph: Graph, cycles: list[list[str]]) -> str:
    return "\n\n".join(
        "\n".join(
            f"  {a} → {b} ({', '.join(dict.fromkeys(graph[a][b]))})" for a in c for b in graph[a] if b in c
        )
        for c in cycles
    )


def _layer(module: str) -> str:
    parts = module.split(".")
    if parts[0] == "dumper":
        return "dumper"
    return parts[1] if len(parts) > 1 else "ptdbg_tui"


#: What each layer must not import (cli.py, legacy.py and demo.py sit on top, beside app).
FORBIDDEN = {
    "formats": {"compare", "engine", "app", "cli", "legacy", "demo", "dumper"},
    "compare": {"engine", "app", "cli", "legacy", "demo", "dumper"},
    "engine": {"app", "cli", "legacy", "demo", "dumper"},
    "app": {"cli", "legacy", "dumper"},
    "dumper": {"compare", "engine", "app", "cli", "legacy", "demo"},  # it shares the formats alone
}
#: Inside the engine, each job's package reaches only those after it: live → replay → the engine's
#: own modules (batch, context, …) → workers.
ENGINE_ORDER = ("live", "replay", "", "workers")
#: The dump extra's own entries in the reader: they run a training script's model, so they import
#: the dumper (torch) by design.
DUMPER_ENTRIES = {"ptdbg_tui.demo"}
#: Packages that must load without torch (the reader side); torch may come only inside a function.
NO_TORCH_AT_IMPORT = ("ptdbg_tui.formats", "ptdbg_tui.compare.diagnosis")


def test_the_graph_is_read() -> None:
    """The reader sees the imports it checks: a known arrow of each kind is in the graph."""
    graph = _graph()
    assert "ptdbg_tui.formats.naming" in graph["ptdbg_tui.formats.layout"]  # from … import a name
    assert "dumper.catalog" in graph["dumper.session"]  # from a package import a module
    assert "ptdbg_tui.formats.layout" in graph["dumper.session"]


def test_no_import_cycle() -> None:
    graph = _graph()
    cycles = _cycles(graph)
    assert not cycles, "import cycles:\n" + _described(graph, cycles)


def test_no_cycle_between_folders() -> None:
    """Two folders importing each other (``compare/diagnosis`` ↔ ``compare/replay``) are one job split
    in two, even when no single module closes the loop."""
    folders = _packages(_graph())
    cycles = _cycles(folders)
    assert not cycles, "folders importing each other:\n" + _described(folders, cycles)


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layers_point_one_way(layer: str) -> None:
    climbing = [
        f"{imp.source}:{imp.line} imports {target}"
        for imp in IMPORTS
        if _layer(imp.source) == layer
        and (target := _internal(imp.target)) is not None
        and _layer(target) in FORBIDDEN[layer]
        and not (_layer(target) == "dumper" and imp.source in DUMPER_ENTRIES)
    ]
    assert not climbing, "\n".join(climbing)


def _engine_job(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] != ["ptdbg_tui", "engine"]:
        return None
    return parts[2] if len(parts) > 2 and parts[2] in ENGINE_ORDER else ""


def test_the_engines_jobs_point_one_way() -> None:
    backwards = [
        f"{imp.source}:{imp.line} imports {target}"
        for imp in IMPORTS
        if (job := _engine_job(imp.source)) is not None
        and (target := _internal(imp.target)) is not None
        and (theirs := _engine_job(target)) is not None
        and ENGINE_ORDER.index(theirs) < ENGINE_ORDER.index(job)
    ]
    assert not backwards, "\n".join(backwards)


def test_the_dumper_is_reached_only_from_its_entries() -> None:
    reaching = sorted(
        {
            imp.source
            for imp in IMPORTS
            if imp.source.startswith("ptdbg_tui") and (_internal(imp.target) or "").startswith("dumper")
        }
    )
    assert set(reaching) <= DUMPER_ENTRIES, reaching


def test_the_reader_loads_without_torch() -> None:
    at_import = [
        f"{imp.source}:{imp.line} imports {imp.target}"
        for imp in IMPORTS
        if imp.source.startswith(NO_TORCH_AT_IMPORT)
        and imp.top
        and imp.target.split(".")[0] in ("torch", "torch_npu")
    ]
    assert not at_import, "\n".join(at_import)


def test_the_checks_can_fail() -> None:
    """The cycle finder and the layer map catch what they are for, on a graph made to break them."""
    loop: Graph = {"a": {"b": []}, "b": {"c": []}, "c": {"a": []}, "d": {"a": []}, "e": {"e": []}}
    assert _cycles(loop) == [["a", "b", "c"], ["e"]]
    assert _cycles({"a": {"b": []}, "b": {}}) == []
    assert _layer("ptdbg_tui.compare.replay.run") == "compare"
    assert _layer("ptdbg_tui.cli") == "cli"
    assert _layer("dumper.catalog") == "dumper"
    assert _engine_job("ptdbg_tui.engine.live.pair") == "live"
    assert _engine_job("ptdbg_tui.engine.batch") == ""
    assert _engine_job("ptdbg_tui.engine.workers") == "workers"
    assert _engine_job("ptdbg_tui.compare.model") is None
