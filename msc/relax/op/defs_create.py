"""Op records: defs_create (filled in by its owner)."""
