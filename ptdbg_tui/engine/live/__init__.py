"""Live watching for the app: the loop that follows two dump folders (:mod:`.loop`), one followed dump
(:mod:`.side`), one pair's pass (:mod:`.pair`), what the app is told (:mod:`.updates`), file events
(:mod:`.watch`), the app's replays (:mod:`.replays`) and the engine's settings (:mod:`.options`)."""
