"""Replaying a dump's calls in a worker process that holds torch (:mod:`.replayer`): a pair's calls
within a budget, and the repro of one call."""
