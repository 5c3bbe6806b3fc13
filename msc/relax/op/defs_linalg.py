"""Op records: defs_linalg (filled in by its owner)."""
