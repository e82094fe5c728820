"""The demo dumps (written once per session with the project's dumper), a small synthetic pair
for snapshots, and helpers that wait on the app's own state instead of sleeping."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import time
import traceback
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from ptdbg_tui.app.app import PtdbgApp
from ptdbg_tui.app.detail import detail_for
from ptdbg_tui.engine.live.options import LiveOptions
from ptdbg_tui.formats.layout import rank_dir_path
from ptdbg_tui.formats.naming import entry_name
from ptdbg_tui.formats.synthetic import write_array, write_seed_pair
from ptdbg_tui.formats.writer import RankWriter

SIZE = (120, 36)
#: The most a test waits for the app's state: a ceiling, never a pause. A replay worker runs at a lower
#: priority (os.nice); on a busy 2-core box (the suite's other worker, other jobs) its torch import
#: alone took ~40 s.
WAIT_S = 240.0


@pytest.fixture(scope="session")
def demo_lstm_site() -> str:
    """``demo.py:N``: where the demo's model calls its LSTM (the culprit's call site)."""
    import ptdbg_tui.demo

    lines = Path(ptdbg_tui.demo.__file__).read_text().splitlines()
    return f"demo.py:{lines.index('            out, _ = self.lstm(seq)') + 1}"


@pytest.fixture(scope="session")
def demo_dumps(tmp_path_factory) -> tuple[Path, Path]:
    from ptdbg_tui.demo import write_demo

    return write_demo(tmp_path_factory.mktemp("demo"))


@pytest.fixture(scope="session")
def steps_dumps(tmp_path_factory, small_dumps) -> tuple[Path, Path]:
    """Three steps of the small pair: steps 0 and 2 carry its fault, step 1 is the bench against itself."""
    root = tmp_path_factory.mktemp("steps")
    npu, bench = root / "npu", root / "bench"
    for side, source in ((npu, small_dumps[0]), (bench, small_dumps[1])):
        shutil.copytree(source, side)
    for step, source in ((1, small_dumps[1]), (2, small_dumps[0])):
        for side, src in ((npu, source), (bench, small_dumps[1])):
            (step0,) = src.rglob("step0")
            shutil.copytree(step0, next(side.rglob("step0")).with_name(f"step{step}"))
    return npu, bench


@pytest.fixture(scope="session")
def script_dumps(tmp_path_factory) -> tuple[Path, Path]:
    """An ordinary training script dumped by the ``ptdbg-dump`` console script (as a user runs it),
    its dump copied as the bench side."""
    root = tmp_path_factory.mktemp("script")
    script = root / "train.py"
    script.write_text(TRAIN_SCRIPT)
    launcher = Path(sys.executable).with_name("ptdbg-dump")
    done = subprocess.run(
        [str(launcher), "run", str(script), "--dump-path", str(root / "npu")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=root,
    )
    assert done.returncode == 0, done.stderr
    shutil.copytree(root / "npu", root / "bench")
    return root / "npu", root / "bench"


TRAIN_SCRIPT = """\
import torch


def main():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    loss = model(torch.ones(4, 3)).sum()
    loss.backward()


if __name__ == "__main__":
    main()
"""


@pytest.fixture(scope="session")
def small_dumps(tmp_path_factory) -> tuple[Path, Path]:
    """The seed guide's case as a small synthetic pair: fixed numbers, faulty LSTM backward."""
    return write_seed_pair(tmp_path_factory.mktemp("small"))


@pytest.fixture(scope="session")
def shifted_dumps(tmp_path_factory) -> tuple[Path, Path]:
    """Six adds of distinct shapes; the NPU runs one more add of the third's shape after it."""
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((4, 6 + i)).astype(np.float32) for i in range(6)]
    root = tmp_path_factory.mktemp("shifted")
    sides = root / "npu", root / "bench"
    for side in sides:
        writer = RankWriter(rank_dir_path(side, 0, 0))
        calls = [*xs[:3], xs[2], *xs[3:]] if side.name == "npu" else xs
        for index, x in enumerate(calls):
            write_array(writer, entry_name("Torch_add", index, "forward", "input", (0,)), x)
            write_array(writer, entry_name("Torch_add", index, "forward", "output", (0,)), x * 2)
        writer.close()
    return sides


@pytest.fixture(scope="session")
def passing_culprit_dumps(tmp_path_factory) -> tuple[Path, Path]:
    """Two kernels 2% off on the NPU, which the original's thresholds pass (every row ✔, "0 failed"):
    the forward tanh (the culprit) and the linear's backward (suspect 2)."""
    return write_two_percent_pair(tmp_path_factory.mktemp("two_percent"))


def write_two_percent_pair(root: Path) -> tuple[Path, Path]:
    """linear → tanh → relu and back, with a call site per call; the NPU's tanh output and linear input
    gradient are 2% larger than the bench's, from the same inputs."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 16)).astype(np.float32)
    w = (rng.standard_normal((16, 16)) / 4).astype(np.float32)
    dy = rng.standard_normal((8, 16)).astype(np.float32)
    sides = root / "npu", root / "bench"
    for side in sides:
        off = np.float32(1.02 if side.name == "npu" else 1.0)
        writer = RankWriter(rank_dir_path(side, 0, 0))
        h = x @ w.T
        t = np.tanh(h) * off
        dt = dy * (t > 0)
        dh = dt * (1 - np.tanh(h) ** 2)
        calls = [
            ("Functional_linear", "forward", [x, w], [h], "h = self.fc(x)"),
            ("Torch_tanh", "forward", [h], [t], "t = torch.tanh(h)"),
            ("Functional_relu", "forward", [t], [np.maximum(t, 0)], "return F.relu(t)"),
            ("Functional_relu", "backward", [dy], [dt], "loss.backward()"),
            ("Torch_tanh", "backward", [dt], [dh], "loss.backward()"),
            ("Functional_linear", "backward", [dh], [dh @ w * off, dh.T @ x], "loss.backward()"),
        ]
        for line, (api, direction, ins, outs, source) in enumerate(calls):
            for slot, arrays in (("input", ins), ("output", outs)):
                for k, a in enumerate(arrays):
                    write_array(writer, entry_name(api, 0, direction, slot, (k,)), a.astype(np.float32))
            frame = ("/home/user/net/model.py", str(20 + line), "forward", source)
            writer.write_stack(f"{api}_0_{direction}_stack_info", [frame])
        writer.close()
    return sides


def _state(app: PtdbgApp) -> str:
    """What a wait that timed out needs to be told apart: the app's progress and draining, and where the
    engine's thread is."""
    thread = app.engine._thread
    frame = sys._current_frames().get(thread.ident) if thread.ident is not None else None
    stack = "".join(traceback.format_stack(frame)) if frame is not None else "(not running)"
    return (
        f"progress: {app.model.progress}\nloading {app.model.loading}, draining {app._draining}, "
        f"news waiting {app.engine.outbox.pair_news()}, engine alive {thread.is_alive()}\n"
        f"the engine's thread:\n{stack}"
    )


class Ui:
    """Helpers for Pilot tests (a fixture, since conftest modules cannot be imported)."""

    size = SIZE

    @staticmethod
    def app(npu: Path, bench: Path, **options: object) -> PtdbgApp:
        options.setdefault("watch", False)
        options.setdefault("jobs", 1)
        return PtdbgApp(npu, bench, LiveOptions(**options))

    @staticmethod
    def settled(app: PtdbgApp) -> bool:
        return app.settled and app.model.progress.rows > 0

    @staticmethod
    async def wait_until(pilot, condition, timeout: float = WAIT_S) -> None:
        """Let the app run until ``condition()`` holds (checked between message-queue drains)."""
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"the app did not reach the expected state in time\n{_state(pilot.app)}")
            await pilot.pause(0.02)

    async def settle(self, pilot) -> None:
        """Until the comparison is shown whole: settled, and the screen laid out again (a bar that grew
        by a line waits for the screen's next layout, which the pilot runs once the queues are empty)."""
        await self.wait_until(pilot, lambda: self.settled(pilot.app))
        await pilot.wait_for_scheduled_animations()

    @staticmethod
    def screen_text(app: PtdbgApp) -> str:
        """What the terminal shows, as plain text (the composited screen, modal screens included)."""
        width, height = app.size
        console = Console(
            width=width,
            height=height,
            file=io.StringIO(),
            record=True,
            color_system=None,
            legacy_windows=False,
        )
        console.print(app.screen._compositor.render_update(full=True))
        return console.export_text()

    @staticmethod
    def detail_text(app: PtdbgApp, width: int = 100) -> str:
        """The detail panel's content as plain text."""
        console = Console(width=width, file=io.StringIO(), record=True, color_system=None)
        console.print(detail_for(app.detail.node, app.model, app.detail.styles_map()))
        return console.export_text()


@pytest.fixture
def ui() -> Ui:
    return Ui()


@pytest.fixture
def add_suspect():
    """A diagnosis's suspect: ``Torch_add_0_forward`` introduces error (×1,240)."""
    from ptdbg_tui.compare.diagnosis.evidence import Judged
    from ptdbg_tui.compare.diagnosis.findings import Suspect
    from ptdbg_tui.compare.diagnosis.propagation import GROWTH, Judgement

    judgement = Judgement(0.0, 0.02, 1.6e-5, 1240.0, GROWTH, "Torch_add_0_forward_output")
    return Suspect(
        call="Torch_add_0_forward",
        api="Torch_add",
        direction="forward",
        kind=GROWTH,
        score=1240.0,
        evidence=Judged(judgement=judgement),
        judgement=judgement,
    )
