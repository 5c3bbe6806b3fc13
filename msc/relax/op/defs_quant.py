"""Op records: defs_quant (filled in by its owner)."""
