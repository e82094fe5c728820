"""How the app copes with a 100k-entry pair of dumps (statistics only).

    python bench/tui_scale.py [--entries 100000] [--keep DIR] [--repeat N]

Writes a synthetic pair with the format's own writer (250 modules, forward and backward calls
with stack lines and a module sidecar, one faulty call), opens the app headless on it and
measures: start to first paint (a fresh process: interpreter, imports, first frame); start to
all compared and shown, in wall and in CPU seconds (a fresh process, no key pressed, against the
headless ``compare_dumps`` in another: the app's overhead, which the target bounds at 1.2x);
key-press latency (from sending the key to the first frame that shows its effect) of moving the
cursor (median), of a key every 0.3 s while the comparison runs, of expanding nodes (worst),
switching to the flat view and jumping to the culprit; and peak RSS. Each figure is printed next
to a baseline measured in the same run (an empty Textual app; a Tree of ten nodes; the headless
compare) and its target. ``--repeat N`` alternates the fresh-process figures N times and prints
their median and range: on a shared machine one run says little. CPU seconds count every thread
and child process and are the steadier figure when other work competes for the cores.
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
#: Targets: seconds, MB, or for the "all compared" figures the ratio to their baseline.
TARGETS = {
    "first paint": 1.0,
    "all compared": 1.2,
    "all compared, CPU": 1.2,
    "key latency": 0.050,
    "key while busy": 0.050,
    "rss": 600.0,
}
RATIO_TARGETS = {"all compared", "all compared, CPU"}
BASELINES = {
    "first paint": "empty Textual app",
    "all compared": "headless compare_dumps",
    "all compared, CPU": "headless compare_dumps",
    "key latency": "10-node Tree, cursor",
    "key while busy": "10-node Tree key",
    "worst while busy": "10-node Tree key",
    "expand node": "10-node Tree key",
    "tree/flat switch": "10-node Tree key",
    "jump to culprit": "10-node Tree key",
}
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
        w.write_stack(
            stack_name(f"Functional_linear_{i}_forward"),
            [
                ["/home/user/net.py", str(40 + i % 7), "forward", "y = self.fc(x)"],
                ["/home/user/train.py", "88", "train_step", "out = net(x)"],
            ],
        )
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


async def paint_only(which: str, npu: Path, bench: Path, start: float = T0) -> float:
    """Seconds from ``start`` (by default this process's start) to the first paint of the app
    (``which`` = "app") or of an empty one."""
    if which == "app":
        from ptdbg_tui.app.app import PtdbgApp

        app: App = PtdbgApp(npu, bench)
    else:
        app = Blank()
    seconds, context, _ = await first_paint(app, start)
    await context.__aexit__(None, None, None)
    return seconds


def cpu_seconds() -> float:
    """CPU time of this process's threads and of its finished children (worker processes)."""
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


async def _settle_only(npu: Path, bench: Path) -> tuple[float, float]:
    """Wall and CPU seconds from starting the app until everything is compared and shown, with no
    key pressed (a cheap poll: the pilot's own pauses would cost the app's thread real time)."""
    from ptdbg_tui.app.app import PtdbgApp

    wall, cpu = time.perf_counter(), cpu_seconds()
    app = PtdbgApp(npu, bench)  # as `ptdbg-tui NPU BENCH`: watching, default options
    async with app.run_test(size=SIZE):
        while not (app.settled and app.model.progress.rows):
            await asyncio.sleep(0.02)
        wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
        # A real exit (the engine and its pool stopped) is not part of the figure.
    return wall, cpu


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


def batch_seconds(npu: Path, bench: Path) -> tuple[float, float]:
    """Wall and CPU seconds of the headless compare of the same dumps."""
    from ptdbg_tui.engine.batch import compare_dumps

    wall, cpu = time.perf_counter(), cpu_seconds()
    compare_dumps(npu, bench, summary=True, jobs=1)
    return time.perf_counter() - wall, cpu_seconds() - cpu


def in_fresh_process(*args: str) -> list[float]:
    """Run this script in ``--child`` mode (a fresh process) and read the seconds it prints."""
    out = subprocess.run(
        [sys.executable, __file__, "--child", *args], capture_output=True, text=True, check=True
    )
    return [float(x) for x in out.stdout.splitlines()[-1].split()]


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
    figures = {
        "key latency": (statistics.median(steps), base_key),
        "key while busy": (statistics.median(busy), base_key),
        "worst while busy": (max(busy), base_key),
        "expand node": (max(expand), base_key),
        "tree/flat switch": (flat, base_key),
        "jump to culprit": (jump, base_key),
        "rss": (rss_mb(), 0.0),
    }
    return {name: ([value], [base]) for name, (value, base) in figures.items()}


def fresh_figures(npu: Path, bench: Path, repeat: int) -> dict[str, tuple[list[float], list[float]]]:
    """First paint and all compared (wall, CPU), each in fresh processes, alternating with their
    baselines ``repeat`` times."""
    figures: dict[str, tuple[list[float], list[float]]] = {
        name: ([], []) for name in ("first paint", "all compared", "all compared, CPU")
    }
    for _ in range(repeat):
        for name, what in (("first paint", "app"), ("first paint", "blank")):
            figures[name][what == "blank"].append(in_fresh_process(what, str(npu), str(bench))[0])
        for what in ("settle", "batch"):
            wall, cpu = in_fresh_process(what, str(npu), str(bench))
            figures["all compared"][what == "batch"].append(wall)
            figures["all compared, CPU"][what == "batch"].append(cpu)
    return figures


def _spread(values: list[float], digits: int = 3) -> str:
    if len(values) < 2:
        return ""
    return f"{min(values):.{digits}f}-{max(values):.{digits}f}"


def report(figures: dict[str, tuple[list[float], list[float]]]) -> bool:
    """A line per figure: the median value and baseline, the median of the paired ratios, the
    target and, over several runs, the ranges."""
    print(f"{'figure':<19}{'value':>12}{'baseline':>12}{'ratio':>8}  {'target':>11}  baseline")
    ok = True
    ranges = []
    for name, (values, bases) in figures.items():
        unit = "MB" if name == "rss" else "s"
        value = statistics.median(values)
        ratios = [v / b for v, b in zip(values, bases, strict=True) if b]
        ratio = statistics.median(ratios) if ratios else None
        target = TARGETS.get(name)
        verdict = ""
        if target is not None:
            measured = ratio if name in RATIO_TARGETS else value
            met = measured is not None and measured <= target
            verdict = "ok" if met else "MISSED"
            ok &= met
        base = statistics.median(bases)
        shown_ratio = f"{ratio:7.2f}x" if ratio is not None else " " * 8
        shown_base = f"{base:10.3f} {unit}" if base else " " * 12
        goal = "" if target is None else f"<= {target:g}" + ("x" if name in RATIO_TARGETS else f" {unit}")
        print(
            f"{name:<19}{value:10.3f} {unit}{shown_base}{shown_ratio}  {goal:>11}  "
            f"{BASELINES.get(name, '-')} {verdict}"
        )
        if len(values) > 1:
            ranges.append(
                f"{name}: {_spread(values)} {unit} against {_spread(bases)} {unit}, "
                f"ratio {_spread(ratios, 2)}"
            )
    if ranges:
        print(f"ranges over {max(len(v) for v, _ in figures.values())} runs (medians above):")
        print("\n".join(f"  {line}" for line in ranges))
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--entries", type=int, default=100_000, help="entries per side (default 100000)")
    parser.add_argument("--keep", type=Path, default=None, help="write the dumps here and keep them")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="fresh-process figures: runs, alternating with their baselines (default 1)",
    )
    parser.add_argument("--child", nargs=3, metavar=("WHAT", "NPU", "BENCH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        what, npu, bench = args.child[0], Path(args.child[1]), Path(args.child[2])
        if what == "batch":
            print(*batch_seconds(npu, bench))
        elif what == "settle":
            print(*asyncio.run(_settle_only(npu, bench)))
        else:
            print(asyncio.run(paint_only(what, npu, bench)))
        return 0
    calls = max(1, args.entries // (4 * ARGS))
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        npu, bench = root / "npu", root / "bench"
        t = time.perf_counter()
        write_side(npu, calls, faulty=calls // 2)
        write_side(bench, calls, faulty=None)
        print(f"wrote 2 x {calls * 4 * ARGS:,} entries in {time.perf_counter() - t:.1f} s")
        figures = fresh_figures(npu, bench, max(1, args.repeat))
        figures.update(asyncio.run(measure(npu, bench)))
    return 0 if report(figures) else 1


if __name__ == "__main__":
    sys.exit(main())
