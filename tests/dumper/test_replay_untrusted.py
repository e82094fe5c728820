"""Replay judges only the call the dump records: a call sidecar or a tensor file that disagrees with the
pkl's records gives "not replayable", never a false culprit or a false all-clear, and a sidecar that asks
for gigabytes is refused before anything is allocated."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from dumper import PrecisionDebugger
from ptdbg_tui.compare.diagnosis.replay_outcome import ReplayOutcome
from ptdbg_tui.compare.diagnosis.replay_reasons import FileShape, refusal
from ptdbg_tui.compare.replay.calls import replay_call
from ptdbg_tui.compare.report.replay_words import why_not_text
from ptdbg_tui.compare.report.words import replay_text
from ptdbg_tui.engine.batch import compare_dumps
from ptdbg_tui.engine.replay.replayer import sources
from ptdbg_tui.formats.calls import calls_path
from ptdbg_tui.formats.layout import RankDump, discover

MSE = "Functional_mse_loss_0_forward"
ONES = "Torch_ones_0_forward"


def _dump(path: Path) -> RankDump:
    """The same run on both sides: every row bit-identical, no kernel wrong anywhere."""
    torch.manual_seed(0)
    x, y = torch.randn(2, 5, 8), torch.randn(2, 5, 8)
    debugger = PrecisionDebugger(dump_path=str(path))
    debugger.start()
    F.mse_loss(x * 3, y)
    torch.ones(torch.Size([2, 3]))
    debugger.stop()
    (dump,) = discover(path)
    return dump


def _edit_call(dump: RankDump, key: str, change) -> None:
    path = calls_path(dump.records)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps(change(x) if x["call"] == key else x) + "\n" for x in lines))


def _replayed(tmp_path: Path, call: str, damage) -> str:
    npu, bench = _dump(tmp_path / "npu"), _dump(tmp_path / "bench")
    damage(npu)
    (o,) = compare_dumps(npu.records, bench.records, jobs=1)
    n, b = sources(o.npu, o.bench, str(o.npu_tensors), str(o.bench_tensors))
    r = replay_call(o.rows, call, n.only(call), b.only(call))
    assert r.outcome == ReplayOutcome.NOT_REPLAYED, replay_text(r)
    return replay_text(r)


def test_a_sidecar_that_names_another_function_is_not_judged(tmp_path):
    """It named l1_loss for the dump's mse_loss: "confirmed by replay" on a bit-identical pair."""
    text = _replayed(
        tmp_path,
        MSE,
        lambda d: _edit_call(
            d, "Functional_mse_loss_0", lambda x: {**x, "fn": "torch.nn.functional.l1_loss"}
        ),
    )
    assert text == (
        "not replayable: the sidecar disagrees with the dump: it calls torch.nn.functional.l1_loss, the dump "
        "records Functional_mse_loss (torch.nn.functional.mse_loss)"
    )


def test_a_sidecar_that_passes_the_calls_own_output_is_not_judged(tmp_path):
    """``mse_loss(<its own output>, …)`` refuted the true culprit into "inherited"."""

    def own_output(x):
        x["args"][0] = {"tensor": "Functional_mse_loss_0_forward_output"}
        return x

    text = _replayed(tmp_path, MSE, lambda d: _edit_call(d, "Functional_mse_loss_0", own_output))
    assert text.startswith(
        "not replayable: the sidecar disagrees with the dump: it passes Functional_mse_loss_0_forward_output "
        "as argument 0"
    ), text


def test_an_input_file_of_another_shape_than_its_record_is_not_used(tmp_path):
    """[5, 2, 8] for a recorded [2, 5, 8]: it was used, and confirmed a false culprit."""

    def reshaped(d: RankDump) -> None:
        path = d.tensor_dir / "Functional_mse_loss_0_forward_input.0.npy"
        np.save(path, np.load(path).reshape(5, 2, 8))

    text = _replayed(tmp_path, MSE, reshaped)
    assert text == (
        "not replayable: a tensor file disagrees with its record: Functional_mse_loss_0_forward_input.0.npy "
        "holds shape [5, 2, 8] but the dump records [2, 5, 8]"
    )


def test_an_undamaged_pair_replays(tmp_path):
    npu, bench = _dump(tmp_path / "npu"), _dump(tmp_path / "bench")
    (o,) = compare_dumps(npu.records, bench.records, jobs=1)
    n, b = sources(o.npu, o.bench, str(o.npu_tensors), str(o.bench_tensors))
    for call in (MSE, ONES):
        r = replay_call(o.rows, call, n.only(call), b.only(call))
        assert r.outcome != ReplayOutcome.NOT_REPLAYED, replay_text(r)


#: The replay of a sidecar's ``torch.ones(Size([20000, 20000]))`` in a process that may map 3 GB at
#: most: it took 6.3 GB and 40 s. Torch is imported before the clock starts (on a loaded machine its
#: import alone took 10 s).
_HUGE_ONES = """
import resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
import ptdbg_tui.compare.replay.run
from ptdbg_tui.compare.replay.calls import replay_call
from ptdbg_tui.compare.report.words import replay_text
from ptdbg_tui.engine.batch import compare_dumps
from ptdbg_tui.engine.replay.replayer import sources
npu, bench, call = sys.argv[1:]
(o,) = compare_dumps(npu, bench, jobs=1)
n, b = sources(o.npu, o.bench, str(o.npu_tensors), str(o.bench_tensors))
start = time.perf_counter()
r = replay_call(o.rows, call, n.only(call), b.only(call))
print(f"{time.perf_counter() - start:.1f}")
print(replay_text(r))
"""


@pytest.mark.timeout(120)
def test_a_sidecar_asking_for_gigabytes_is_refused_before_allocating(tmp_path):
    npu, bench = _dump(tmp_path / "npu"), _dump(tmp_path / "bench")
    _edit_call(npu, "Torch_ones_0", lambda x: {**x, "args": [{"size": [20000, 20000]}]})
    assert calls_path(npu.records).stat().st_size < 4096
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_HUGE_ONES), str(npu.records), str(bench.records), ONES],
        capture_output=True,
        text=True,
        env=env,
        timeout=110,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    seconds, text = done.stdout.split("\n", 1)
    assert text.strip() == (
        "not replayable: the sidecar disagrees with the dump: torch.ones gives [20000, 20000] where the dump "
        "records Torch_ones_0_forward_output as [2, 3]"
    ), text
    assert float(seconds) < 10


def test_a_result_no_record_vouches_for_is_held_to_the_budget(tmp_path, monkeypatch):
    """A keyword tensor's size comes from the sidecar alone: over the budget, it is never loaded."""
    from ptdbg_tui.compare.replay.plan import Recorded
    from ptdbg_tui.compare.replay.run import Refused, checked
    from ptdbg_tui.formats.budget import ENV

    path = tmp_path / "rank0" / "data" / "Functional_layer_norm_0_forward_kwarg.weight.npy"
    path.parent.mkdir(parents=True)
    np.save(path, np.zeros(1000, np.float32))
    monkeypatch.setenv(ENV, "4000")
    rec = Recorded("w", str(path), "torch.float32", (1000,), sidecar=True)
    with pytest.raises(Refused) as refused:
        checked(rec)
    assert "8 kB of memory, more than the 4 kB one dump entry may take" in why_not_text(
        refusal(refused.value)
    )
    checked(Recorded("w", str(path), "torch.float32", (1000,)))  # its pkl record vouches for it


def test_an_input_linked_out_of_the_dump_is_never_read(tmp_path):
    """Its values were copied into repro_data.pt; now the link is refused and the call not judged."""

    def linked(d: RankDump) -> None:
        path = d.tensor_dir / "Functional_mse_loss_0_forward_input.0.npy"
        outside = tmp_path / "secret.npy"
        path.rename(outside)  # the same values: followed, the replay would go on unnoticed
        path.symlink_to(outside)

    text = _replayed(tmp_path, MSE, linked)
    assert text.startswith("not replayable: Functional_mse_loss_0_forward_input.0 cannot be read: "), text
    assert "resolves outside the dump's folder" in text


def test_a_sparse_file_of_another_size_than_its_record_is_refused_unread(tmp_path):
    """120 MB of a sparse npy recorded as [2, 5, 16]: it was loaded whole and made float64 (1.9 GB)."""
    from ptdbg_tui.compare.replay.plan import Recorded
    from ptdbg_tui.compare.replay.run import Refused, load

    path = tmp_path / "rank0" / "data" / "Torch_add_0_forward_input.0.npy"
    path.parent.mkdir(parents=True)
    header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (30000000,), }"
    header += b" " * (117 - len(header)) + b"\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header)
        f.truncate(128 + 120_000_000)
    tracemalloc.start()
    with pytest.raises(Refused) as refused:
        load(Recorded("Torch_add_0_forward_input.0", str(path), "torch.float32", (2, 5, 16)), torch.float64)
    assert refusal(refused.value) == FileShape(
        file="Torch_add_0_forward_input.0.npy", shape=(30000000,), recorded=(2, 5, 16)
    )
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 16 << 20
