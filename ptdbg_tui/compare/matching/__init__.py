"""Pairing NPU entries with bench entries: the modes (:mod:`.pairing`), sequence alignment
(:mod:`.align`) and the rules for two tools' dumps (:mod:`.mixed`)."""
