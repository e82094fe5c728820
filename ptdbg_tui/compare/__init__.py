"""Pure comparison functions over records and arrays: metrics, verdicts, matching, CSV rows."""
