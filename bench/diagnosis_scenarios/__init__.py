"""Fault scenarios with ground truth, to measure how well a diagnosis names the faulty call.

A scenario is a real torch model on CPU dumped twice with the project's dumper (full npy,
``api_stack``): the *bench* run, and the *NPU* run, which is the bench run plus relative float
noise of 1e-6 on the inputs and weights (seeded; the seed varies between runs), optionally cast
to fp16/bf16 as a whole, plus at most one injected fault. Its ground truth is the set of NPU
calls (``Functional_silu_1_backward``) that introduce the error; empty for a no-fault scenario,
where a diagnosis should name nothing.

    from diagnosis_scenarios import SCENARIOS, dump_pair    # with bench/ on sys.path
    npu, bench = dump_pair(SCENARIOS["silu_backward_dropped_term"], tmp_dir, seed=0)

Multi-step and multi-rank scenarios, with ground truth per (step, rank), are in ``training.py``
(the loop and its dumping), ``steps.py``, ``ranks.py`` and ``scripts.py``; ``bench/divergence.py``
runs them.
"""

from __future__ import annotations

from diagnosis_scenarios.library import SCENARIOS
from diagnosis_scenarios.scenario import BENCH, NOISE, NPU, Scenario, Workload, dump_pair, dump_side

__all__ = ["BENCH", "NOISE", "NPU", "SCENARIOS", "Scenario", "Workload", "dump_pair", "dump_side"]
