"""The fork server of a big job loads the compiled metric pass (numba) once, before it forks the
workers: they then run the fused pass (:func:`ptdbg_tui.compare.metrics.accumulator.warm_up`)."""

from ptdbg_tui.compare.metrics.accumulator import warm_up

warm_up()
