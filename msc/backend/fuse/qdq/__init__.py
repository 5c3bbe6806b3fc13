"""QDQ folding: quantize / dequantize chains around convs, matmuls, adds and row ops become int8
kernel calls (fold.py), element-wise int8 chains lookup tables (lut.py), row ops (rows.py)."""
