"""The in-process dumper: writes ptdbg_ascend v4 dumps (pkl lines + npy) from a training script.

from dumper import PrecisionDebugger
debugger = PrecisionDebugger(dump_path="./dump_data_new/npu", hook_name="dump", step=[0])
debugger.configure_hook(mode="api_stack")
debugger.start(); ...; debugger.stop(); debugger.step()
"""

from dumper.config import ConfigError
from dumper.debugger import PrecisionDebugger

__all__ = ["ConfigError", "PrecisionDebugger"]
