"""Which manifest differences can change the numbers. Two ordinary runs of one script printed
'runs differ before any kernel: random state differs (numpy, python)' on every pair: Python seeds its
generator from the OS, and the model's numbers come from torch's."""

from __future__ import annotations

from ptdbg_tui.formats.manifest import numeric_key


def test_unseeded_numpy_and_python_random_states_are_no_numeric_difference():
    assert not numeric_key("rng.numpy_state", ("a", "b"))
    assert not numeric_key("rng.python_state", ("a", "b"))


def test_torch_s_random_state_and_seed_still_are():
    assert numeric_key("rng.torch_state", ("a", "b"))
    assert numeric_key("rng.torch_initial_seed", (0, 1))
