"""The monitor's loop end to end (issue 30): two trainings of bench/monitor_job.py's GPT under
``ptdbg-dump run --monitor``, ``ptdbg-tui monitor --narrow`` names the first divergent step and module
and writes the dump config, ``ptdbg-dump run --config`` dumps that module at that step on both sides,
and ``ptdbg-tui compare`` names the culprit call: for a forward kernel fault and a backward one."""

from __future__ import annotations

from pathlib import Path

import pytest

from dumper.cli import main as dump_main
from ptdbg_tui.cli import main as tui_main
from ptdbg_tui.formats.dump_options import read_options

pytest.importorskip("pyarrow")

JOB = Path(__file__).resolve().parents[2] / "bench" / "monitor_job.py"
STEPS, AT = ["--steps", "8"], ["--at", "6"]  # after the 5 steps the band is read from


@pytest.mark.parametrize(
    ("fault", "module", "line", "culprit"),
    [
        (
            "kernel",
            "blocks.2.mlp.gelu",
            "First divergent step: 6, module blocks.2.mlp.gelu: forward: ",
            "Culprit: Functional_gelu_",
        ),
        (
            "attn_backward",
            "blocks.1.attn",
            "First divergent step: 6, module blocks.1.attn: backward: the forward agrees; "
            "blocks.1.attn.c_attn.",
            "Culprit: Functional_scaled_dot_product_attention_",
        ),
    ],
)
def test_monitor_narrow_dump_compare_names_the_culprit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fault: str, module: str, line: str, culprit: str
) -> None:
    for side in ("npu", "bench"):
        args = ["run", str(JOB), "--monitor", str(tmp_path / "mon" / side), "--", side, fault]
        assert dump_main([*args, *STEPS, *AT]) == 0
    capsys.readouterr()
    config = tmp_path / "next.json"
    mon = [str(tmp_path / "mon" / "npu"), str(tmp_path / "mon" / "bench")]
    assert tui_main(["monitor", *mon, "--narrow", "-o", str(config)]) == 0
    out = capsys.readouterr().out
    assert line in out
    options = read_options(config)
    assert (options.module, options.step, options.rank) == ([module], [6], [0])
    # the commands it printed, with the script its manifest names
    dumps = tmp_path / "next"
    assert f"ptdbg-dump run {JOB} --dump-path {dumps / 'npu'} --config {config}" in out
    for side in ("npu", "bench"):
        args = ["run", str(JOB), "--dump-path", str(dumps / side), "--config", str(config)]
        assert dump_main([*args, "--", side, fault, *STEPS, *AT]) == 0
    capsys.readouterr()
    assert tui_main(["compare", str(dumps / "npu"), str(dumps / "bench"), "-o", str(tmp_path / "out")]) == 0
    report = capsys.readouterr().out
    assert culprit in report, report
