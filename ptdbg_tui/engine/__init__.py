"""Scheduling comparisons: one-shot batch runs, live watching, worker processes."""
