"""The kinds of finding, in one enum: what a suspect (or a judged call) is found to do. Its values are
the words of the suspects CSV's Kind column; :mod:`ptdbg_tui.compare.report.words` says each in a
sentence. :mod:`.propagation` and :mod:`.findings` name the members as their call sites always have
(``GROWTH``, ``PARAMETERS`` …); :mod:`.findings`' docstring says what each kind means.
"""

from __future__ import annotations

from enum import Enum


class Kind(str, Enum):
    """A kind of finding; compares equal to (and prints as) its value."""

    # the call's outputs carry more error than its inputs, op and rounding explain (propagation)
    GROWTH = "growth"
    NAN_ORIGIN = "nan"
    BENCH_NAN = "bench_nan"
    ZEROS = "zeros"
    ENTERS = "enters"
    LEAN = "lean"
    SUMS = "sums"  # a softmax whose rows no longer sum to one
    # where the runs start to differ without a kernel's own error, across steps and ranks, by replay
    PARAMETERS = "parameters"
    UNPAIRED = "unpaired"
    ARGUMENTS = "arguments"  # the runs pass different arguments (not the replay's outcome of that name)
    RANDOM = "random"
    COLLECTIVE = "collective"
    RANK_ALONE = "rank_alone"
    RECEIVED = "received"
    REPLAYED = "replayed"
    NONDETERMINISTIC = "nondeterministic"
    SHAPE = "shape"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)
