"""configure_hook's modes and switches, and argument checking at construction."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import torch

from dumper import ConfigError, PrecisionDebugger
from ptdbg_tui.formats.layout import discover
from ptdbg_tui.formats.pkl import read_pkl


def _names(dump) -> list[str]:
    return [r.name for r in read_pkl(dump.records).tensors]


def _calls(dump) -> set[str]:
    batch = read_pkl(dump.records)
    return {r.call for r in batch.tensors} | {s.call for s in batch.stacks}


def test_mode_all_writes_dump_pkl_without_stack_lines(dump_model) -> None:
    dump = dump_model(mode="all")
    assert dump.records.name == "dump.pkl" and dump.tensor_dir.name == "dump" and dump.has_tensors
    assert read_pkl(dump.records).stacks == []


def test_summary_only_writes_no_npy(dump_model) -> None:
    dump = dump_model(summary_only=True)
    assert not dump.has_tensors and len(_names(dump)) > 50


def test_api_list_is_a_lowercase_substring_test(dump_model) -> None:
    dump = dump_model(mode="api_list", api_list=["LSTM", "linear"])
    assert dump.records.name == "api_list_dump.pkl"
    assert _calls(dump) == {
        "VF_lstm_0_forward",
        "VF_lstm_0_backward",
        "Functional_linear_0_forward",
        "Functional_linear_0_backward",
    }


def test_list_selects_by_name_prefix(dump_model) -> None:
    dump = dump_model(mode="list", scope=["VF_lstm_0_backward", "Torch_relu_0"])
    assert _calls(dump) == {"VF_lstm_0_backward", "Torch_relu_0_forward", "Torch_relu_0_backward"}


def test_range_runs_from_first_to_last(dump_model) -> None:
    dump = dump_model(mode="range", scope=["Tensor_mean_0_forward", "VF_lstm_0_forward"])
    forward = sorted(c for c in _calls(dump) if c.endswith("forward"))
    assert forward == [
        "Tensor_mean_0_forward",
        "Tensor_transpose_0_forward",
        "Torch_zeros_0_forward",
        "Torch_zeros_1_forward",
        "VF_lstm_0_forward",
    ]  # nn.LSTM makes h0 and c0
    assert not any(c.endswith("backward") for c in _calls(dump))  # the range ended before backward


def test_stack_mode_writes_stack_lines_only(dump_model) -> None:
    dump = dump_model(mode="stack")
    batch = read_pkl(dump.records)
    assert dump.records.name == "stack_dump.pkl" and not dump.has_tensors
    assert batch.tensors == [] and len(batch.stacks) > 10


def test_input_output_mode_filters_direction_and_kind(dump_model) -> None:
    names = _names(dump_model(input_output_mode=["backward", "output"]))
    assert names and all("_backward_output" in n for n in names)
    names = _names(dump_model(input_output_mode=["forward"]))
    assert names and all("_forward_" in n for n in names)


def test_filter_switch_drops_scalars_ints_and_empties_but_keeps_the_loss(dump_model) -> None:
    recs = read_pkl(dump_model(filter_switch="ON").records).tensors
    assert recs and all(r.dtype in ("torch.float32",) for r in recs)
    assert "Functional_nll_loss_0_forward_output" in {r.name for r in recs}  # 0-d float kept


@pytest.mark.parametrize(
    ("hook", "message"),
    [
        ({"mode": "nonsense"}, "unknown mode 'nonsense'"),
        ({"mode": "list"}, "needs scope"),
        ({"mode": "range", "scope": ["a"]}, "two call names"),
        ({"mode": "api_list"}, "needs api_list"),
        ({"mode": "acl", "scope": ["x"]}, "not supported"),
        ({"filter_switch": "on"}, '"ON" or "OFF"'),
        ({"input_output_mode": ["forwards"]}, "unknown ['forwards']"),
        ({"scope": ["Torch_add"]}, "not by 'api_stack'"),
        ({"api_list": ["gelu"]}, "api_list is used by mode api_list, not by 'api_stack'"),
        ({"summary_only": "yes"}, "True or False"),
    ],
)
def test_invalid_configure_hook_fails_with_a_clear_message(tmp_path: Path, hook, message) -> None:
    debugger = PrecisionDebugger(dump_path=str(tmp_path))
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("(", r"\(")):
        debugger.configure_hook(**hook)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"hook_name": "overflow_check"}, "overflow_check"),
        ({"step": [0, -1]}, "non-negative"),
        ({"step": "0"}, "list of non-negative"),
        ({"rank": -2}, "rank must be"),
        ({"enable_dataloader": True}, "enable_dataloader"),
        ({"model": "net"}, "torch.nn.Module"),
    ],
)
def test_invalid_constructor_arguments_fail_at_construction(tmp_path: Path, kwargs, message) -> None:
    with pytest.raises(ConfigError, match=message):
        PrecisionDebugger(dump_path=str(tmp_path), **kwargs)


def test_unknown_arguments_are_refused(tmp_path: Path) -> None:
    with pytest.raises(
        TypeError, match=r"^configure_hook\(\) got an unexpected keyword argument 'summery_only'"
    ):
        PrecisionDebugger(dump_path=str(tmp_path)).configure_hook(summery_only=True)
    # its switches, defined once (DumpConfig.build), are what help() shows
    assert "summary_only: 'bool' = False" in str(inspect.signature(PrecisionDebugger.configure_hook))
    with pytest.raises(TypeError, match="dumppath"):
        PrecisionDebugger(dumppath=str(tmp_path))


def test_a_file_as_dump_path_is_refused(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    with pytest.raises(ConfigError, match="not a directory"):
        PrecisionDebugger(dump_path=tmp_path / "f")


def test_steps_not_listed_are_not_dumped_and_counters_restart(tmp_path: Path) -> None:
    debugger = PrecisionDebugger(dump_path=str(tmp_path), step=[1, 2])
    x = torch.ones(3)
    for _ in range(3):
        debugger.start()
        torch.add(x, 1)
        torch.add(x, 2)
        debugger.stop()
        debugger.step()
    dumps = discover(tmp_path)
    assert [d.step for d in dumps] == [1, 2]
    for d in dumps:
        assert {r.call for r in read_pkl(d.records).tensors} == {"Torch_add_0_forward", "Torch_add_1_forward"}


def test_calls_are_counted_only_while_dumping(tmp_path: Path) -> None:
    debugger = PrecisionDebugger(dump_path=str(tmp_path))
    x = torch.ones(3)
    debugger.start()
    torch.add(x, 1)
    debugger.stop()
    torch.add(x, 1)  # not dumping: neither recorded nor counted
    debugger.start()  # same step: appended to the same pkl
    torch.add(x, 1)
    debugger.stop()
    (dump,) = discover(tmp_path)
    assert dump.step is None and dump.rank == 0
    assert [r.call for r in read_pkl(dump.records).tensors if r.name.endswith("output")] == [
        "Torch_add_0_forward",
        "Torch_add_1_forward",
    ]
