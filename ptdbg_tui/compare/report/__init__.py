"""The files a comparison writes: the original's CSV (:mod:`.csv_ptdbg`), msprobe's
(:mod:`.csv_msprobe`), the choice between them (:mod:`.outputs`), the suspects (:mod:`.suspects`)
and the advisor file (:mod:`.advisor`)."""
