"""Scenarios dumped as a user dumps an unchanged script: ``ptdbg-dump run train_script.py
--dump-path DIR --step 0 1 2`` (a subprocess per side). The script builds its model inside the
dumped region, so step 0 starts with nn.Linear's initialisation calls (``Tensor_uniform_`` …)
whose inputs are uninitialised memory: they differ between the runs and are no fault.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from diagnosis_scenarios.checks import agrees, all_of, differs, has_call
from diagnosis_scenarios.scenario import BENCH, NPU
from diagnosis_scenarios.training import NO_FAULT, Training, every_step, kernel

SCRIPT = Path(__file__).with_name("train_script.py")


def command(name: str, module: str) -> list[str]:
    """A console script of this project as installed beside this Python, else its module."""
    found = shutil.which(name, path=str(Path(sys.executable).parent))
    return [found] if found else [sys.executable, "-m", module]


def run_script(scenario: Training, root: Path, seed: int = 0, fault: str | None = None) -> tuple[Path, Path]:
    """Both sides of the script under ``ptdbg-dump run``; the NPU side with ``fault``."""
    root = Path(root)
    for side in (NPU, BENCH):
        extra = ["--fault", fault] if fault and side == NPU else []
        cmd = [
            *command("ptdbg-dump", "dumper.cli"),
            "run",
            str(SCRIPT),
            "--dump-path",
            str(root / side),
            "--step",
            *map(str, scenario.steps),
            "--",
            "--side",
            side,
            "--seed",
            str(seed),
            *extra,
        ]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return root / NPU, root / BENCH


def _gelu_fault(scenario: Training, root: Path, seed: int = 0) -> tuple[Path, Path]:
    return run_script(scenario, root, seed, fault="gelu")


UNINITIALISED = ("Tensor_uniform__*_forward_input.0",)  # uniform_ over torch.empty
_init = all_of(
    has_call(0, "Tensor_uniform__0_forward_output", why="nn.Linear's init, dumped"),
    agrees(0, "Tensor_uniform__*_forward_output", 1e-7, why="the same seed"),
)

SCRIPTS = [
    Training(
        "script_init_in_step0_off",
        "no fault: ptdbg-dump run on a script that builds its model in the dumped region (init ops "
        "over torch.empty in step 0)",
        None,
        every_step(NO_FAULT),
        dumper=run_script,
        premise=_init,
        uninitialised=UNINITIALISED,
    ),
    Training(
        "script_gelu_fault",
        "the same script with GELU 1.01x on the NPU (--fault gelu): the GELU, not an init op",
        None,
        every_step(kernel("Functional_gelu_0_forward", "Functional_gelu_0_backward")),
        dumper=_gelu_fault,
        uninitialised=UNINITIALISED,
        premise=all_of(_init, differs(0, "Functional_gelu_0_forward_output", 5e-3, why="the fault")),
    ),
]
