"""Which call introduced the error: one call's judgement (:mod:`.propagation`), one pair's suspects
(:mod:`.diagnose`), the first divergent rank (:mod:`.ranks`)."""
