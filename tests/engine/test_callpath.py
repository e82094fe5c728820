"""Where calls go in the tree: module chains first, then the user's frames, forward stacks for
backward calls."""

from __future__ import annotations

from ptdbg_tui.engine.callpath import call_path, placement_stack, user_frames
from ptdbg_tui.formats.naming import parse_name
from ptdbg_tui.formats.records import StackRecord
from ptdbg_tui.formats.sites import stack_site

STACK = StackRecord(
    "Torch_add_0_forward_stack_info",
    [
        ("/site-packages/ptdbg_ascend/hook_module/hook_module.py", "58", "__call__", None),
        ("/usr/lib/python3/site-packages/torch/nn/modules/module.py", "1501", "_call_impl", None),
        ("/home/u/model.py", "42", "forward", "y = torch.add(x, 1)"),
        ("/home/u/train.py", "99", "main", "model(x)"),
    ],
)


def test_user_frames_drop_the_tool_and_torch_outermost_first():
    assert [f[2] for f in user_frames(STACK.frames)] == ["main", "forward"]


def test_module_chain_wins_over_the_stack():
    entry = parse_name("Torch_add_0_forward_output")
    path = call_path(entry, "Torch_add_0_forward_output", (("head", "Head"), ("head.lstm", "LSTM")), STACK)
    assert [(s.kind, s.label) for s in path] == [
        ("direction", "Forward"),
        ("module", "head · Head"),
        ("module", "head.lstm · LSTM"),
        ("call", "Torch_add_0"),
    ]


def test_stack_frames_when_no_module_chain():
    entry = parse_name("Torch_add_0_forward_input.0")
    path = call_path(entry, "Torch_add_0_forward_input.0", None, STACK)
    assert [s.label for s in path] == ["Forward", "main  train.py:99", "forward  model.py:42", "Torch_add_0"]


def test_backward_calls_are_placed_by_their_forward_stack():
    backward_stack = StackRecord("Torch_add_0_backward_stack_info", [("/home/u/train.py", "120", "main", "")])
    stacks = {"Torch_add_0_forward": STACK, "Torch_add_0_backward": backward_stack}
    entry = parse_name("Torch_add_0_backward_output.0")
    assert placement_stack(entry, stacks) is STACK
    path = call_path(entry, "x", None, placement_stack(entry, stacks))
    assert path[0].key == "backward" and path[-1].label == "Torch_add_0"


def test_unparsed_names_go_to_other_entries():
    path = call_path(None, "MyModule_weird", None, None)
    assert [s.label for s in path] == ["Other entries", "MyModule_weird"]


def test_launcher_frames_are_not_the_user_s():
    """The console scripts, this package's command line and runpy started the user's script."""
    frames = StackRecord(
        "x",
        [
            ("/home/u/train.py", "7", "main", "loss = model(x).sum()"),
            ("/home/u/train.py", "12", "<module>", "main()"),
            ("/usr/lib/python3.10/runpy.py", "86", "_run_code", "exec(code, run_globals)"),
            ("/home/u/.venv/lib/python3.10/site-packages/ptdbg_tui/cli.py", "129", "main", "run(a)"),
            ("/home/u/.venv/bin/ptdbg-dump", "8", "<module>", "sys.exit(main())"),
            ("/home/u/.venv/bin/ptdbg-tui", "8", "<module>", "sys.exit(main())"),
            ("C:\\venv\\Scripts\\ptdbg-dump.exe\\__main__.py", "7", "<module>", "sys.exit(main())"),
        ],
    ).frames
    assert [f[:2] for f in user_frames(frames)] == [("/home/u/train.py", "12"), ("/home/u/train.py", "7")]
    assert stack_site(StackRecord("x", frames[2:])) is None, "a launcher is nobody's call site"


def test_a_spawned_rank_starts_at_its_own_function():
    """torch.multiprocessing.spawn runs each rank's function under multiprocessing's frames."""
    frames = StackRecord(
        "x",
        [
            ("/home/u/dist.py", "40", "worker", "dist.all_reduce(g)"),
            (
                "/home/u/.venv/lib/python3.11/site-packages/torch/multiprocessing/spawn.py",
                "90",
                "_wrap",
                "fn(i)",
            ),
            ("/usr/lib/python3.11/multiprocessing/process.py", "108", "run", "self._target()"),
            ("/usr/lib/python3.11/multiprocessing/process.py", "314", "_bootstrap", "self.run()"),
            ("/usr/lib/python3.11/multiprocessing/spawn.py", "135", "_main", "return self._bootstrap()"),
            ("/usr/lib/python3.11/multiprocessing/spawn.py", "122", "spawn_main", "exitcode = _main(fd)"),
            ("<string>", "1", "<module>", ""),
        ],
    ).frames
    assert [f[:2] for f in user_frames(frames)] == [("/home/u/dist.py", "40")]
