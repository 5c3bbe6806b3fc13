"""Op records: defs_index (filled in by its owner)."""
