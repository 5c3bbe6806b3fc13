"""The Relax codegen: an MSCGraph as a Relax BlockBuilder script (gen.py)."""
