"""Regenerate the screenshots of the README and docs/ from the app's own SVG export.

    pip install -e ".[dump,screenshots]" && python screenshots/make_screenshots.py

Dumps the demo model (``ptdbg-tui demo --no-app``) into a temporary folder, drives the app
headless at a fixed size, exports each screen as SVG (``App.export_screenshot``) and converts it
to PNG with cairosvg. The SVG asks for Fira Code; offline converters cannot fetch it, so the
font is switched to DejaVu Sans Mono (installed with cairo almost everywhere) to keep the
character grid aligned.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
FONT_FROM = "font-family: Fira Code, monospace;"
FONT_TO = 'font-family: "DejaVu Sans Mono", monospace;'
SCALE = 1.0


Shot = tuple[str, tuple[int, int], list[str]]  # name, terminal size, keys


async def _shoot(npu: Path, bench: Path, shots: list[Shot]) -> dict[str, str]:
    from ptdbg_tui.app.app import PtdbgApp
    from ptdbg_tui.engine.live.options import LiveOptions

    svgs = {}
    for name, size, keys in shots:
        app = PtdbgApp(npu, bench, LiveOptions(watch=False, jobs=1))
        async with app.run_test(size=size) as pilot:
            while not (app.settled and app.model.progress.rows):
                await pilot.pause(0.05)
            await pilot.press(*keys)
            await pilot.pause(0.2)  # toasts of earlier keys would hide the bottom right corner
            app.clear_notifications()
            await pilot.pause()
            svgs[name] = app.export_screenshot(title="ptdbg-tui ptdbg_demo/npu ptdbg_demo/cpu")
    return svgs


SHOTS: list[Shot] = [
    # as it opens in an 80x24 terminal: the culprit's call, module and file:line in the bar
    ("narrow", (80, 24), []),
    # the culprit revealed: its call expanded, the call's verdict and the error along execution
    ("tree", (160, 45), ["c"]),
    # the failing gradient of the LSTM backward: statistics and Δ, metrics, |Δ| histogram, stack
    ("detail", (160, 45), ["c", "down", "down"]),
    # failures + named, cursor on the first entry that fails or that the diagnosis names (the culprit's)
    ("failures", (120, 34), ["f", "n"]),
]


def to_png(svg: str, target: Path, convert: Callable[..., object]) -> None:
    convert(bytestring=svg.replace(FONT_FROM, FONT_TO).encode(), write_to=str(target), scale=SCALE)


def main() -> int:
    try:
        from cairosvg import svg2png
    except ImportError:
        print("needs cairosvg: pip install -e '.[screenshots]'", file=sys.stderr)
        return 2
    os.chdir(HERE.parent)  # stack frames are shown relative to it: no machine's paths in the images
    with tempfile.TemporaryDirectory() as tmp:
        # as a user writes them (``ptdbg-tui demo``): the stacks start where theirs do, not in this script
        root = Path(tmp) / "demo"
        subprocess.run(
            [sys.executable, "-m", "ptdbg_tui", "demo", str(root), "--no-app"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        npu, bench = root / "npu", root / "cpu"
        svgs = asyncio.run(_shoot(npu, bench, SHOTS))
    for name, svg in svgs.items():
        target = HERE / f"{name}.png"
        to_png(svg, target, svg2png)
        print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
