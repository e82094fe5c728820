"""One side of make_fixtures.py's model dumped by the real msprobe with a config narrowed by
``ptdbg-tui narrow``; first, msprobe's own parser loads every config named with ``--check``.

    MSPROBE_PYTHON msprobe_job.py CONFIG SIDE OUT [--check CONFIG ...]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "fixtures" / "msprobe"))

from make_fixtures import build, train_step


def check(path: str) -> None:
    """msprobe's parser, its debugger's checks and its scope, as its PrecisionDebugger runs them."""
    from msprobe.core.dump.data_dump.scope import ScopeFactory
    from msprobe.pytorch.dump.debugger.debugger_config import DebuggerConfig
    from msprobe.pytorch.dump.pt_config import parse_json_config

    common, task = parse_json_config(path, None)
    config = DebuggerConfig(common, task, None, None, None)
    scope = ScopeFactory(config).build_scope()
    print(
        f"loaded {path}: task {config.task}, level {config.level}, list {config.list}, "
        f"scope {type(scope).__name__}"
    )


def main(config: str, side: str, out: str, checks: list[str]) -> None:
    for path in checks:
        check(path)
    model, x, target = build(side == "npu", True)  # before msprobe wraps the APIs
    from msprobe.pytorch import PrecisionDebugger

    debugger = PrecisionDebugger(config_path=config, dump_path=out)
    debugger.start(model=model)
    train_step(model, x, target)
    debugger.stop()
    debugger.step()


if __name__ == "__main__":
    args = sys.argv[1:]
    main(args[0], args[1], args[2], args[4:] if args[3:4] == ["--check"] else [])
