"""The files a comparison writes: the original's CSV (:mod:`.csv_ptdbg`), msprobe's
(:mod:`.csv_msprobe`, its Result rule :mod:`.msprobe_result`), the choice between them
(:mod:`.outputs`), the suspects (:mod:`.suspects`) and the advisor file (:mod:`.advisor`); the words
for every finding, which all of them, the CLI and the app say (:mod:`.words`)."""
