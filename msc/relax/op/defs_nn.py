"""Op records: defs_nn (filled in by its owner)."""
