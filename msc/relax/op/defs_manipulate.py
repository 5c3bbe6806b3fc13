"""Op records: defs_manipulate (filled in by its owner)."""
