"""Op records: defs_special (filled in by its owner)."""
