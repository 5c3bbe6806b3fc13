"""The ONNX codegen: an MSCGraph as an onnx.ModelProto (writer.py), one row per op (table.py, nn.py,
indexing.py, integer.py, nbits.py), shapes, outputs, bf16 detours, QDQ and functions; passes/
re-fuses what importers spelled out."""
