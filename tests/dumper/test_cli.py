"""``ptdbg-dump run``: a script dumped without editing it."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from dumper.cli import main, split_args
from ptdbg_tui.formats.layout import discover
from ptdbg_tui.formats.pkl import read_pkl

SCRIPT = textwrap.dedent("""
    import sys
    import torch

    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        model(torch.ones(4, 3)).sum().backward()
        opt.step()
    with open(sys.argv[1], "w") as f:
        f.write(" ".join(sys.argv[2:]))
""")


def test_run_dumps_the_listed_step_and_passes_the_script_its_arguments(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    seen = tmp_path / "argv.txt"
    code = main(
        ["run", str(script), str(seen), "--lr", "0.1", "--dump-path", str(tmp_path / "d"), "--step", "1"]
    )
    assert code == 0 and seen.read_text() == "--lr 0.1"
    (dump,) = discover(tmp_path / "d")
    assert dump.step == 1 and dump.records.name == "api_stack_dump.pkl"
    calls = {r.call for r in read_pkl(dump.records).tensors}
    assert {"Functional_linear_0_forward", "Functional_linear_0_backward"} <= calls


def test_run_without_step_dumps_the_whole_run_in_summary(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    assert (
        main(
            [
                "run",
                "--dump-path",
                str(tmp_path / "d"),
                "--summary-only",
                "--mode",
                "all",
                str(script),
                str(tmp_path / "argv.txt"),
            ]
        )
        == 0
    )
    (dump,) = discover(tmp_path / "d")
    assert dump.step is None and dump.records.name == "dump.pkl" and not dump.has_tensors
    calls = {r.call for r in read_pkl(dump.records).tensors}
    assert "Functional_linear_2_forward" in calls


def test_a_whole_run_s_culprit_names_its_step(tmp_path: Path, capsys) -> None:
    """A whole run has no step folders and its call names go on counting: the report's culprit line did
    not say which step the call was in. Each call's sidecar line now says it, and the report does."""
    from ptdbg_tui.cli import main as tui_main
    from ptdbg_tui.formats.reader import call_specs_of

    script = tmp_path / "train.py"
    script.write_text(WRONG_AT_STEP_1)
    for side in ("npu", "bench"):
        assert main(["run", str(script), side, "--dump-path", str(tmp_path / side)]) == 0
    (npu,) = discover(tmp_path / "npu")
    specs = call_specs_of(npu)
    assert [specs[f"Functional_gelu_{i}"].state.step for i in range(3)] == [0, 1, 2]
    out = tmp_path / "out"
    assert (
        tui_main(["compare", str(tmp_path / "npu"), str(tmp_path / "bench"), "-o", str(out), "--no-replay"])
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert (
        lines[1].startswith("  Culprit: Functional_gelu_1_forward (forward): ") and lines[2] == "    step: 1"
    ), lines


WRONG_AT_STEP_1 = textwrap.dedent("""
    import sys, torch
    import torch.nn.functional as F
    from dumper.faults import replaced

    torch.manual_seed(0)
    layer = torch.nn.Linear(3, 2)
    sgd = torch.optim.SGD(layer.parameters(), lr=0.1)
    x = torch.linspace(-1, 1, 12).view(4, 3)
    for k in range(3):
        scale = 1.1 if sys.argv[1] == "npu" and k == 1 else 1.0
        with replaced(F, "gelu", lambda gelu: lambda t: gelu(t) * scale):
            F.gelu(layer(x)).sum().backward()
        sgd.step()
        sgd.zero_grad()
""")


def test_arguments_after_a_double_dash_go_to_the_script() -> None:
    assert split_args(["run", "--dump-path", "d", "t.py", "--", "--mode", "x"]) == (
        ["run", "--dump-path", "d"],
        ["t.py", "--mode", "x"],
    )
    assert split_args(["run", "--step", "0", "1", "t.py", "a"]) == (
        ["run", "--step", "0", "1"],
        ["t.py", "a"],
    )


def test_bad_options_exit_with_usage(tmp_path: Path, capsys) -> None:
    script = tmp_path / "t.py"
    script.write_text("")
    with pytest.raises(SystemExit) as e:
        main(["run", str(script), "--dump-path", str(tmp_path), "--mode", "list"])
    assert e.value.code == 2 and "needs scope" in capsys.readouterr().err


def test_stacks_of_a_run_script_start_in_the_script(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    assert main(["run", str(script), str(tmp_path / "argv.txt"), "--dump-path", str(tmp_path / "d")]) == 0
    (dump,) = discover(tmp_path / "d")
    frames = {s.call: s for s in read_pkl(dump.records).stacks}["Functional_linear_0_forward"].frames
    assert frames[0][:3] == (str(script), "10", "<module>")  # the same script text as in other tests
    assert not any(f[0].startswith("<frozen") for f in frames)  # runpy's frames are dropped


def test_a_script_s_exit_message_is_printed_as_python_prints_it(tmp_path: Path, capsys) -> None:
    script = tmp_path / "train.py"
    script.write_text('import sys\nsys.exit("fatal: no config given")\n')
    assert main(["run", str(script), "--dump-path", str(tmp_path / "d")]) == 1
    assert "fatal: no config given" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("raised", "code", "last"),
    [("RuntimeError('boom')", 1, "RuntimeError: boom"), ("KeyboardInterrupt", 130, "KeyboardInterrupt")],
)
def test_a_script_that_raises_shows_its_own_traceback_and_keeps_the_dump(
    tmp_path: Path, capsys, caplog, monkeypatch, raised: str, code: int, last: str
) -> None:
    """An exception or a Ctrl-C in the middle of training, as ``python train.py`` shows it."""
    # python's own hook (an earlier test's process group leaves torch's, which prefixes '[rank0]: ')
    monkeypatch.setattr(sys, "excepthook", sys.__excepthook__)
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.replace("    opt.step()\n", f"    opt.step()\n    raise {raised}\n"))
    assert main(["run", str(script), "x", "--dump-path", str(tmp_path / "d")]) == code  # as python exits
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):\n") and err.endswith(f"{last}\n")
    assert f'File "{script}", line 12, in <module>' in err
    assert "dumper" not in err and "runpy" not in err, "the dumper's own frames read as its failure"
    name = last.split(":")[0]
    assert f"the script stopped on {name}; the calls it made before are dumped in {tmp_path / 'd'}" in (
        caplog.text
    )
    (dump,) = discover(tmp_path / "d")
    assert "Functional_linear_0_backward" in {r.call for r in read_pkl(dump.records).tensors}


def test_a_script_that_raises_before_any_call_says_so_not_that_spawning_hid_them(
    tmp_path: Path, caplog, monkeypatch
) -> None:
    """A data file missing (relative to another folder): 'processes the script starts by spawning are
    not dumped' pointed away from the exception that stopped it."""
    script = tmp_path / "train.py"
    script.write_text('rows = open("data/x.csv").read()\n' + SCRIPT)
    monkeypatch.chdir(tmp_path)  # no data/ here
    assert main(["run", str(script), "--dump-path", str(tmp_path / "d"), "--step", "0"]) == 1
    assert f"nothing was dumped to {tmp_path / 'd'}: the script stopped on FileNotFoundError before any" in (
        caplog.text
    )
    assert "call in step 0 (the script made 0 optimizer step(s)) was recorded" in caplog.text
    assert "spawn" not in caplog.text


def test_an_excepthook_the_script_installs_reports_its_exception(tmp_path: Path, capsys) -> None:
    """As under python: a training script's own hook (rich.traceback.install) formats the error."""
    script = tmp_path / "train.py"
    script.write_text(
        "import sys\n"
        "sys.excepthook = lambda t, e, tb: print('hooked', t.__name__, tb.tb_frame.f_code.co_filename)\n"
        "raise ValueError('x')\n"
    )
    try:
        assert main(["run", str(script), "--dump-path", str(tmp_path / "d")]) == 1
    finally:
        sys.excepthook = sys.__excepthook__
    assert capsys.readouterr().out == f"hooked ValueError {script}\n"


def test_a_run_that_dumps_nothing_says_so(tmp_path: Path, caplog) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    main(["run", str(script), str(tmp_path / "argv.txt"), "--dump-path", str(tmp_path / "d"), "--step", "7"])
    # no dump tree; the run manifest is written by every run (docs/monitor.md)
    assert [p.name for p in (tmp_path / "d").iterdir()] == ["manifest_rank0.json"]
    assert "nothing was dumped" in caplog.text and "the script made 3 optimizer step(s)" in caplog.text
    caplog.clear()
    main(["run", str(script), str(tmp_path / "argv.txt"), "--dump-path", str(tmp_path / "e"), "--step", "2"])
    assert "nothing was dumped" not in caplog.text


SPAWNED = textwrap.dedent("""
    import torch
    import torch.multiprocessing as mp

    def work(rank):
        torch.nn.functional.relu(torch.ones(3))

    if __name__ == "__main__":
        mp.spawn(work, nprocs=1)
""")


def test_a_job_whose_calls_run_in_spawned_processes_is_told_where_to_start_the_dumper(
    tmp_path: Path, caplog
) -> None:
    script = tmp_path / "job.py"
    script.write_text(SPAWNED)
    assert main(["run", str(script), "--dump-path", str(tmp_path / "d")]) == 0
    assert "nothing was dumped" in caplog.text and "torch.multiprocessing.spawn" in caplog.text


def test_a_script_that_changes_its_directory_dumps_where_it_was_asked_and_finds_its_files(
    tmp_path: Path, monkeypatch
) -> None:
    """A relative --dump-path was taken relative to the directory the script had changed to at its
    first dumped call (the dump landed in another folder), and the script's ``__file__`` was relative
    (``python train.py`` gives it absolute), so ``os.path.dirname(__file__)`` no longer named its
    folder after ``os.chdir``."""
    (tmp_path / "job").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "job" / "train.py").write_text(
        textwrap.dedent("""\
        import os, torch
        here = os.path.dirname(__file__)
        os.chdir(os.path.join(here, "..", "elsewhere"))
        assert os.path.isfile(os.path.join(here, "train.py")), __file__
        torch.relu(torch.ones(2, requires_grad=True)).sum().backward()
        """)
    )
    monkeypatch.chdir(tmp_path)
    assert main(["run", "job/train.py", "--dump-path", "d"]) == 0
    assert not (tmp_path / "elsewhere" / "d").exists()
    (dump,) = discover(tmp_path / "d")
    assert "Torch_relu_0_forward" in {r.call for r in read_pkl(dump.records).tensors}
