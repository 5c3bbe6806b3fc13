"""Op records: defs_msc (filled in by its owner)."""
