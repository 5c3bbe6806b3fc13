"""Fusion passes over the backend program: patterns/ (float blocks: attention, dense + activation,
elementwise chains, views, pad + conv, the in-place KV cache) and qdq/ (quantize / dequantize
chains become int8 kernel calls: fold.py, lookup tables lut.py, row ops rows.py)."""
