"""How the app copes with a 100k-entry pair of dumps (statistics only).

    python bench/tui_scale.py [--entries 100000] [--keep DIR]

Writes a synthetic pair with the format's own writer (250 modules, forward and backward calls
with stack lines and a module sidecar, one faulty call), opens the app headless on it and
measures: start to first paint (a fresh process: interpreter, imports, first frame), start to
all compared, key-press latency (from sending the key to the first frame that shows its effect)
of moving the cursor (median), expanding nodes (worst), switching to the flat view and jumping to
the culprit, and peak RSS. Each figure is printed next to a baseline measured in the same run
(an empty Textual app; a Tree of ten nodes; the headless ``compare_dumps``) and its target.
"""

from __future__ import annotations

import time

T0 = time.perf_counter()  # first paint counts from here: imports included

import argparse  # noqa: E402
import asyncio  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

from textual.app import App, ComposeResult  # noqa: E402
from textual.events import Key, Ready  # noqa: E402
from textual.widgets import Static, Tree  # noqa: E402

SIZE = (120, 40)
TARGETS = {"first paint": 1.0, "all compared": 10.0, "key latency": 0.050, "key while busy": 0.050,
           "rss": 600.0}
BASELINES = {"first paint": "empty Textual app", "all compared": "headless compare_dumps",
             "key latency": "10-node Tree, cursor", "key while busy": "10-node Tree key",
             "worst while busy": "10-node Tree key",
             "expand node": "10-node Tree key",
             "tree/flat switch": "10-node Tree key", "jump to culprit": "10-node Tree key"}
MODULES = 250
ARGS = 2  # inputs and outputs per call


def write_side(root: Path, calls: int, faulty: int | None) -> None:
    """``calls`` forward calls and their backward calls, 2 inputs and 2 outputs each."""
    from ptdbg_tui.formats.layout import rank_dir_path
    from ptdbg_tui.formats.naming import entry_name, stack_name
    from ptdbg_tui.formats.stats import StatKind, build_stats
    from ptdbg_tui.formats.writer import RankWriter

    rnd = random.Random(1)
    w = RankWriter(rank_dir_path(root, 0, 0), summary_only=True)
    per_module = max(1, calls // MODULES)

    def entries(index: int, direction: str, wrong: bool) -> None:
        for kind in ("input", "output"):
            for k in range(ARGS):
                mx, mn = rnd.uniform(1, 2), rnd.uniform(-2, -1)
                f = 3.0 if wrong and kind == "output" else 1.0
                stats = build_stats(StatKind.FLOAT, mx * f, mn * f, (mx + mn) / 2 * f, 8.0 * f)
                name = entry_name("Functional_linear", index, direction, kind, (k,))
                w.write_tensor(name, 0, "torch.float32", [16, 32], stats)

    for i in range(calls):
        entries(i, "forward", i == faulty)
        w.write_stack(stack_name(f"Functional_linear_{i}_forward"),
                      [["/home/user/net.py", str(40 + i % 7), "forward", "y = self.fc(x)"],
                       ["/home/user/train.py", "88", "train_step", "out = net(x)"]])
        chain = (("layers", "ModuleList"), (f"layers.{i // per_module}", "Block"))
        w.write_modules(f"Functional_linear_{i}", chain)
    for i in reversed(range(calls)):
        entries(i, "backward", False)
    w.close()
    past = time.time() - 60  # a finished dump: both sides are quiet already
    for p in w.rank_dir.iterdir():
        os.utime(p, (past, past))


class Blank(App[None]):
    def compose(self) -> ComposeResult:
        yield Static("baseline")


class SmallTree(App[None]):
    def compose(self) -> ComposeResult:
        tree: Tree[None] = Tree("root")
        for i in range(10):
            tree.root.add_leaf(f"node {i}")
        tree.root.expand()
        yield tree


async def first_paint(app: App, start: float) -> tuple[float, object, object]:
    """Seconds from ``start`` until the app's first frame; the open test context and its pilot."""
    ready: list[float] = []

    def hook(message: object) -> None:
        if isinstance(message, Ready) and not ready:
            ready.append(time.perf_counter())

    context = app.run_test(size=SIZE, message_hook=hook)
    pilot = await context.__aenter__()
    while not ready:
        await pilot.pause(0.005)
    return ready[0] - start, context, pilot


async def _paint_only(which: str, npu: Path, bench: Path) -> float:
    if which == "app":
        from ptdbg_tui.app.app import PtdbgApp

        app: App = PtdbgApp(npu, bench)
    else:
        app = Blank()
    seconds, context, _ = await first_paint(app, T0)
    await context.__aexit__(None, None, None)
    return seconds


class PaintClock:
    """Times the frames an app renders; ``key()`` is the latency of one key press: from sending
    the key to the first frame rendered once the key's effect (``done()``) is in place."""

    def __init__(self, app: App) -> None:
        self.app = app
        self._watch: tuple[Callable[[], bool], list[float]] | None = None
        display = app._display

        def spy(screen: object, renderable: object) -> None:
            if renderable is not None and self._watch is not None and self._watch[0]():
                self._watch[1].append(time.perf_counter())
                self._watch = None
            display(screen, renderable)

        app._display = spy

    async def key(self, key: str, done: Callable[[], bool], timeout: float = 30.0) -> float:
        painted: list[float] = []
        self._watch = (done, painted)
        start = time.perf_counter()
        self.app._driver.send_message(Key(key, key if len(key) == 1 else None))
        while not painted:
            if time.perf_counter() - start > timeout:
                raise TimeoutError(f"no frame showed the effect of {key!r}")
            await asyncio.sleep(0.001)
        return painted[0] - start


async def moves(clock: PaintClock, tree: Tree, key: str, count: int) -> list[float]:
    times = []
    step = 1 if key == "down" else -1
    for _ in range(count):
        target = tree.cursor_line + step
        times.append(await clock.key(key, lambda target=target: tree.cursor_line == target))
    return times


def rss_mb() -> float:
    """Peak resident memory of this process."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def batch_seconds(npu: Path, bench: Path) -> float:
    """The headless compare of the same dumps."""
    from ptdbg_tui.engine.batch import compare_dumps

    t = time.perf_counter()
    compare_dumps(npu, bench, summary=True, jobs=1)
    return time.perf_counter() - t


def in_fresh_process(*args: str) -> float:
    """Run this script in ``--child`` mode (a fresh process) and read the seconds it prints."""
    out = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True, text=True,
                         check=True)
    return float(out.stdout.split()[-1])


async def measure(npu: Path, bench: Path) -> dict[str, tuple[float, float]]:
    from ptdbg_tui.app.app import PtdbgApp

    small = SmallTree()
    _, context, pilot = await first_paint(small, time.perf_counter())
    clock = PaintClock(small)
    base_key = statistics.median(await moves(clock, small.query_one(Tree), "down", 9))
    await context.__aexit__(None, None, None)

    start = time.perf_counter()
    app = PtdbgApp(npu, bench)  # as `ptdbg-tui NPU BENCH`: watching, default options
    _, context, pilot = await first_paint(app, start)
    tree, clock = app.call_tree, PaintClock(app)
    busy = []  # a key every 0.3 s while the engine compares and the tree fills
    pressed = 0.0
    while not (app.settled and app.model.progress.rows):
        if time.perf_counter() - pressed >= 0.3:
            index = app.filter_index
            busy.append(await clock.key("f", lambda index=index: app.filter_index != index))
            pressed = time.perf_counter()
        await pilot.pause(0.01)
    compared = time.perf_counter() - start
    while app.filter_index:
        await pilot.press("f")
    print(f"rows compared by the app: {app.model.progress.rows:,}")
    culprit = app.model.first_culprit()
    assert culprit is not None and culprit[1] is not None, "the faulty call is found"

    await pilot.press("down")  # onto Backward
    backward = tree.cursor_node
    expand = [await clock.key("l", lambda: backward.is_expanded and bool(backward.children))]
    steps = await moves(clock, tree, "down", 20)
    for _ in range(2):
        await pilot.press("down")
        block = tree.cursor_node
        expand.append(await clock.key("l", lambda block=block: block.is_expanded and bool(block.children)))
    flat = await clock.key("s", lambda: tree.flat and bool(tree.root.children))
    steps += await moves(clock, tree, "up", 10)
    jump = await clock.key("c", lambda: tree.cursor_model_node is culprit[1])
    await context.__aexit__(None, None, None)
    return {
        "all compared": (compared, in_fresh_process("batch", str(npu), str(bench))),
        "key latency": (statistics.median(steps), base_key),
        "key while busy": (statistics.median(busy), base_key),
        "worst while busy": (max(busy), base_key),
        "expand node": (max(expand), base_key),
        "tree/flat switch": (flat, base_key),
        "jump to culprit": (jump, base_key),
        "rss": (rss_mb(), 0.0),
    }


def report(figures: dict[str, tuple[float, float]]) -> bool:
    print(f"{'figure':<18}{'value':>12}{'baseline':>12}{'ratio':>8}  {'target':>11}  baseline")
    ok = True
    for name, (value, base) in figures.items():
        unit = "MB" if name == "rss" else "s"
        target = TARGETS.get(name)
        verdict = ""
        if target is not None:
            verdict = "ok" if value <= target else "MISSED"
            ok &= value <= target
        ratio = f"{value / base:7.1f}x" if base else " " * 8
        shown_base = f"{base:10.3f} {unit}" if base else " " * 12
        goal = f"<= {target:g} {unit}" if target is not None else ""
        print(f"{name:<18}{value:10.3f} {unit}{shown_base}{ratio}  {goal:>11}  {BASELINES.get(name, '-')} "
              f"{verdict}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=100_000, help="entries per side (default 100000)")
    parser.add_argument("--keep", type=Path, default=None, help="write the dumps here and keep them")
    parser.add_argument("--child", nargs=3, metavar=("WHAT", "NPU", "BENCH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        what, npu, bench = args.child[0], Path(args.child[1]), Path(args.child[2])
        print(batch_seconds(npu, bench) if what == "batch" else asyncio.run(_paint_only(what, npu, bench)))
        return 0
    calls = max(1, args.entries // (4 * ARGS))
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        npu, bench = root / "npu", root / "bench"
        t = time.perf_counter()
        write_side(npu, calls, faulty=calls // 2)
        write_side(bench, calls, faulty=None)
        print(f"wrote 2 x {calls * 4 * ARGS:,} entries in {time.perf_counter() - t:.1f} s")
        figures = {"first paint": (in_fresh_process("app", str(npu), str(bench)),
                                   in_fresh_process("blank", str(npu), str(bench)))}
        figures.update(asyncio.run(measure(npu, bench)))
    return 0 if report(figures) else 1


if __name__ == "__main__":
    sys.exit(main())
