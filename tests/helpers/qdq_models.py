"""onnxruntime's QDQ quantization of a float ONNX model, as the int8 tests use it, the small
float models they quantize, and the SQNR they compare by."""

from __future__ import annotations

from pathlib import Path

from msc.compression.quantize.testing import qdq_block, sqnr, tiny_conv_onnx

__all__ = ["ort_qdq_outputs", "ort_quantize", "qdq_block", "sqnr", "tiny_conv_onnx"]


def ort_quantize(model, inputs: list, folder: Path, input_name: str = "x",
                 method: str = "MinMax", activation: str = "QUInt8", weight: str = "QInt8",
                 per_channel: bool = True, qoperator: bool = False):
    """``quantize_static`` (QDQ format, per-channel int8 weights, uint8 activations unless
    told: ``activation`` / ``weight`` are onnxruntime's QuantType names, ``qoperator`` the
    QOperator format) calibrated on ``inputs`` by ``method`` (onnxruntime's
    CalibrationMethod name); the quantized ModelProto."""
    import onnx
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
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
    quantize_static(str(src), str(dst), Reader(),
                    quant_format=QuantFormat.QOperator if qoperator else QuantFormat.QDQ,
                    per_channel=per_channel, activation_type=getattr(QuantType, activation),
                    weight_type=getattr(QuantType, weight),
                    calibrate_method=getattr(CalibrationMethod, method))
    return onnx.load(dst)


def ort_qdq_outputs(model, calib: list, held_out: list, method: str) -> list:
    """onnxruntime's own int8 run: ``model`` quantized by ``ort_quantize`` (calibrated on
    ``calib`` by ``method``), run on each of ``held_out``."""
    import tempfile

    import onnxruntime as ort

    name = model.graph.input[0].name
    with tempfile.TemporaryDirectory() as folder:
        qdq = ort_quantize(model, calib, Path(folder), name, method)
    sess = ort.InferenceSession(qdq.SerializeToString(), providers=["CPUExecutionProvider"])
    return [sess.run(None, {name: x})[0] for x in held_out]
