"""The next dump's configuration from a narrowing target: this project's dumper options (which the
dumper's own parser reads back) and msprobe's config.json, for modules, calls and both grammars."""

from __future__ import annotations

from pathlib import Path

from ptdbg_tui.compare.report.words import narrowed_text, tool_usage_lines
from ptdbg_tui.formats.dump_options import parse_options
from ptdbg_tui.formats.layout import RankDump
from ptdbg_tui.formats.naming import BACKWARD, FORWARD, OUTPUT, STYLE_MSPROBE, EntryName
from ptdbg_tui.formats.narrowing import Narrowed, dumper_options, narrowed_to_call, tool_config

PTDBG = RankDump(Path("d/ptdbg_dump_v4.0/step1/rank3/api_stack_dump.pkl"), 1, 3)
MSPROBE = RankDump(Path("d/step1/proc77/dump.json"), 1, None)


def _msprobe(api: str, index: int, direction: str = FORWARD) -> EntryName:
    return EntryName(api, index, direction, OUTPUT, (0,), STYLE_MSPROBE)


def test_a_module_dumps_its_calls_with_tensors_at_the_step_and_rank() -> None:
    target = Narrowed(module="model.layers.17.mlp", steps=(1,), ranks=(3,))
    options = dumper_options(target)
    assert options == parse_options(
        {
            "mode": "api_stack",
            "module": ["model.layers.17.mlp"],
            "step": [1],
            "rank": [3],
            "summary_only": False,
            "summary_mode": "statistics",
        }
    )
    assert tool_config(PTDBG, target, "n/npu", "n/bench") is None  # ours wrote it: our config only
    assert narrowed_text(target) == "module model.layers.17.mlp" and target.name == "model.layers.17.mlp"


def test_calls_of_either_grammar_become_this_dumpers_call_prefixes() -> None:
    calls = (EntryName("Torch_add", 1, BACKWARD, OUTPUT), _msprobe("Tensor.__mul__", 10))
    options = dumper_options(Narrowed(calls=calls))
    assert options.mode == "list" and options.scope == ["Torch_add_1_", "Tensor___mul___10_"]
    assert options.step is None and options.rank is None  # a dump without step or rank folders: all
    assert narrowed_text(Narrowed(calls=calls)) == "calls Torch_add_1, Tensor.__mul__.10"


def test_msprobe_config_lists_a_module_at_level_mix_and_a_call_at_level_l1() -> None:
    module = tool_config(MSPROBE, Narrowed(module="lstm", steps=(1,)), "n/npu", "n/bench")
    assert module is not None and module.tool == "msprobe"
    assert module.data == {
        "task": "tensor",
        "dump_path": "n/npu",
        "rank": [],
        "step": [1],
        "level": "mix",
        "async_dump": False,
        "tensor": {"scope": [], "list": ["Module.lstm."], "data_mode": ["all"]},
    }
    assert "debugger.start(model=model)" in tool_usage_lines(module, Path("c.json"))[0]
    call = tool_config(
        MSPROBE, Narrowed(calls=(_msprobe("Functional.silu", 0, BACKWARD),), ranks=(0, 2)), "n/npu", "n/bench"
    )
    assert call is not None and call.data["level"] == "L1" and call.data["rank"] == [0, 2]
    assert call.data["tensor"]["list"] == ["Functional.silu.0."]
    assert "dump_path='n/bench'" in tool_usage_lines(call, Path("c.json"))[0]  # a Python literal (repr)


def test_an_msprobe_module_entry_narrows_to_its_module() -> None:
    assert narrowed_to_call(_msprobe("Module.track.lstm.LSTM", 0), (0,)) == Narrowed(
        module="track.lstm", steps=(0,)
    )
    root = _msprobe("Module.Net", 0)  # the model itself: its call
    assert narrowed_to_call(root).calls == (root,)
