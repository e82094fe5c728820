"""What every metric worker needs, loaded once by the pool's fork server before it forks them:
numpy with one BLAS thread, the compare code and the compiled kernel (numba's import and cache load
cost ~0.5 s, which each spawned worker would pay again)."""

import atexit
import os

from ptdbg_tui.engine.pool import THREAD_ENV

os.environ.update(THREAD_ENV)  # read by the BLAS when numpy is first imported, just below

from ptdbg_tui.compare.metrics.accumulator import warm_up
from ptdbg_tui.engine.tasks import run_task  # noqa: F401

warm_up()

# The server's own exit ran numba's and llvmlite's teardown (~0.3 s) while it still held the
# command's stdout and stderr: a piped compare seemed to end that much later. It has nothing to
# flush; its workers leave by os._exit and never run this.
atexit.register(os._exit, 0)
