"""RankWriter → read_pkl round trip: what is written is what is read, npy before its line."""

from __future__ import annotations

import math

import numpy as np

from ptdbg_tui.formats.layout import discover, rank_dir_path
from ptdbg_tui.formats.npy import load_npy
from ptdbg_tui.formats.pkl import PklFollower, read_pkl
from ptdbg_tui.formats.stats import array_stats
from ptdbg_tui.formats.synthetic import torch_dtype, write_array, write_seed_pair
from ptdbg_tui.formats.writer import RankWriter


def test_round_trip_tensors_scalars_and_stacks(tmp_path):
    w = RankWriter(rank_dir_path(tmp_path, 0, step=0))
    arrays = {
        "Torch_add_0_forward_input.0": np.array([1.0, 2.0, 3.0], np.float32),
        "Torch_add_0_forward_output": np.array([[1.5, -2.0]], np.float16),
        "Tensor_eq_0_forward_output": np.array([True, False]),
        "Torch_sum_0_forward_output": np.array(6.0, np.float32),
        "Torch_empty_0_forward_output": np.zeros((0, 3), np.float32),
        "Torch_arange_0_forward_output": np.arange(4, dtype=np.int64),
        "Torch_div_0_forward_output": np.array([np.nan, np.inf], np.float32),
    }
    for name, a in arrays.items():
        write_array(w, name, a)
    write_array(w, "Torch_mm_0_forward_output", np.ones((2, 2), np.float32), dtype="torch.bfloat16")
    w.write_tensor("Torch_add_0_forward_input.1", 0, "<class 'int'>", "[]", [1, 1, 1, 1], np.array(1))
    frames = [("/home/user/train.py", "42", "forward", "y = torch.add(x, 1)")]
    w.write_stack("Torch_add_0_forward_stack_info", frames)
    w.close()

    dump = discover(tmp_path)[0]
    batch = read_pkl(dump.records)
    assert not batch.bad
    by_name = {t.name: t for t in batch.tensors}
    assert list(by_name) == [*arrays, "Torch_mm_0_forward_output", "Torch_add_0_forward_input.1"]
    assert by_name["Torch_add_0_forward_input.0"].stats == [3.0, 1.0, 2.0, math.sqrt(14)]
    assert by_name["Tensor_eq_0_forward_output"].stats == [[], [], [], "Nan"]
    assert by_name["Torch_sum_0_forward_output"].stats == [6.0, 6.0, 6.0, "Nan"]
    assert by_name["Torch_arange_0_forward_output"].stats == [3, 0, 1.5, "Nan"]
    assert by_name["Torch_mm_0_forward_output"].dtype == "torch.bfloat16"
    assert by_name["Torch_add_0_forward_input.1"].is_scalar
    assert math.isnan(by_name["Torch_div_0_forward_output"].stats[0])
    assert batch.stacks[0].frames == frames
    for name, a in arrays.items():
        loaded = load_npy(dump.tensor_dir / f"{name}.npy")
        assert loaded.shape == a.shape and loaded.dtype == a.dtype, name  # 0-d stays 0-d
        assert np.array_equal(loaded, a, equal_nan=True)
        assert by_name[name].dtype == torch_dtype(a.dtype)
    assert not list(dump.tensor_dir.glob(".*.tmp"))


def test_every_line_read_while_writing_has_its_file(tmp_path):
    w = RankWriter(tmp_path / "rank0", mode="all")
    follower = PklFollower(w.pkl)
    seen = 0
    for k in range(20):
        write_array(w, f"Torch_relu_{k}_forward_output", np.full(8, k, np.float32))
        for t in follower.read().tensors:
            assert (w.npy_dir / f"{t.name}.npy").is_file()
            seen += 1
    w.close()
    assert seen == 20


def test_summary_only_writes_no_npy_and_fresh_replaces_the_old_dump(tmp_path):
    rank_dir = tmp_path / "rank0"
    w = RankWriter(rank_dir)
    write_array(w, "Torch_relu_0_forward_output", np.ones(3, np.float32))
    w.close()
    w = RankWriter(rank_dir, summary_only=True)
    write_array(w, "Torch_relu_1_forward_output", np.ones(3, np.float32))
    w.close()
    dump = discover(rank_dir)[0]
    assert [t.name for t in read_pkl(dump.records).tensors] == ["Torch_relu_1_forward_output"]
    assert not dump.has_tensors


def test_stats_are_float64_reductions():
    a = np.full(100_000, 60000.0, np.float16)  # an fp16 norm would overflow
    stats = array_stats(a, "torch.float16")
    assert stats[3] == 60000.0 * math.sqrt(100_000)
    assert array_stats(5.0, "<class 'float'>") == [5.0] * 4


def test_seed_pair_layout(tmp_path):
    npu, bench = write_seed_pair(tmp_path)
    n, b = discover(npu), discover(bench)
    assert [(d.step, d.rank, d.mode) for d in n + b] == [(0, 0, "api_stack")] * 2
    nb, bb = read_pkl(n[0].records), read_pkl(b[0].records)
    assert [t.name for t in nb.tensors] == [t.name for t in bb.tensors]
    assert len(nb.stacks) == 12 and "VF_lstm_0_backward_output.1" in {t.name for t in nb.tensors}
