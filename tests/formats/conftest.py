"""Fixtures of the formats tests: pkl text in every variant the original (or a crash) produces."""

from __future__ import annotations

from pathlib import Path

import pytest

LEGACY_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "ptdbg_legacy"

# One line per variant of docs/formats.md#pkl-lines, byte for byte as json.dumps writes them.
V4_LINES = [
    '["Torch_add_0_forward_input.0", 0, [], "torch.float32", [3], [3.0, 1.0, 2.0, 3.7416574954986572]]',
    '["Torch_add_0_forward_input.1", 0, [], "<class \'int\'>", "[]", [1, 1, 1, 1]]',
    '["Torch_add_0_forward_output", 0, [], "torch.float32", [3], [4.0, 2.0, 3.0, 5.385164807134504]]',
    '["Torch_add_0_forward_stack_info", [["/site-packages/ptdbg_ascend/hook_module/hook_module.py", "58", '
    '"__call__", "result = self.forward(*args)"], ["/home/user/train.py", "42", "forward", null]]]',
    '["Tensor_eq_0_forward_output", 0, [], "torch.bool", [3], [[], [], [], "Nan"]]',
    '["Torch_sum_0_forward_output", 0, [], "torch.float32", [], [6.0, 6.0, 6.0, "Nan"]]',
    '["Torch_div_0_forward_output", 0, [], "torch.float32", [4], [NaN, NaN, NaN, NaN]]',
    '["Torch_exp_0_forward_output", 0, [], "torch.float16", [2], [Infinity, -Infinity, NaN, Infinity]]',
    '["Torch_add_0_forward_input.2", 0, [], "<class \'float\'>", "[]", [2.5, 2.5, 2.5, 2.5]]',
    '["Torch_add_0_forward_input.3", 0, [], "<class \'bool\'>", "[]", [true, true, true, true]]',
]


@pytest.fixture
def v4_lines() -> list[str]:
    return list(V4_LINES)


@pytest.fixture
def legacy_pkl() -> Path:
    return LEGACY_DIR / "npu_test.pkl"
