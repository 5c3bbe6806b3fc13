"""The torch codegen: an MSCGraph as torch.nn.Module source (gen.py), one row per op (table.py,
nn.py, indexing.py)."""
