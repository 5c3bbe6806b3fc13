"""Op records: defs_reduce (filled in by its owner)."""
