"""Op records: defs_image (filled in by its owner)."""
