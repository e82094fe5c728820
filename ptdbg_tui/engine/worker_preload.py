"""What every metric worker needs, loaded once by the pool's fork server before it forks them:
numpy with one BLAS thread, the compare code and the compiled kernel (numba's import and cache load
cost ~0.5 s, which each spawned worker would pay again)."""

import os

from ptdbg_tui.engine.pool import THREAD_ENV

os.environ.update(THREAD_ENV)  # read by the BLAS when numpy is first imported, just below

from ptdbg_tui.compare.metrics import warm_up
from ptdbg_tui.compare.tasks import run_task  # noqa: F401

warm_up()
