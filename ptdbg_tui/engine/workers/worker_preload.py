"""What every metric worker needs, loaded once by the pool's fork server before it forks them:
numpy with one BLAS thread and the compare code. The compiled pass is loaded there too for big jobs
only (:mod:`ptdbg_tui.engine.workers.fused_preload`): numba's import and cache load cost ~0.5 s, more than a
small job's whole metric pass."""

import atexit
import os

from ptdbg_tui.engine.workers.pool import THREAD_ENV

os.environ.update(THREAD_ENV)  # read by the BLAS when numpy is first imported, just below

from ptdbg_tui.engine.workers.tasks import run_task  # noqa: F401

# The server's own exit ran numba's and llvmlite's teardown (~0.3 s, where it loaded them) while it
# still held the command's stdout and stderr: a piped compare seemed to end that much later. It has
# nothing to flush; its workers leave by os._exit and never run this.
atexit.register(os._exit, 0)
