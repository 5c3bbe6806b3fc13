"""onnxruntime's QDQ quantization of a float ONNX model, as the int8 tests use it."""

from __future__ import annotations

from pathlib import Path


def ort_quantize(model, inputs: list, folder: Path, input_name: str = "x"):
    """``quantize_static`` in QDQ format (per-channel int8 weights, uint8 activations, MinMax)
    calibrated on ``inputs``; the quantized ModelProto."""
    import onnx
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.items = iter([{input_name: x} for x in inputs])

        def get_next(self):
            return next(self.items, None)

    src, dst = Path(folder) / "float.onnx", Path(folder) / "qdq.onnx"
    onnx.save(model, src)
    quantize_static(str(src), str(dst), Reader(), quant_format=QuantFormat.QDQ,
                    per_channel=True, activation_type=QuantType.QUInt8,
                    weight_type=QuantType.QInt8)
    return onnx.load(dst)
