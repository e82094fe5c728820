"""Per pair of tensors: the original's metrics and verdict (:mod:`.accumulator`, :mod:`.kernel`,
:mod:`.verdict`, :mod:`.cells`), the diagnosis' error measures (:mod:`.errors`), and the results of
rows that need no data (:mod:`.settled`)."""
