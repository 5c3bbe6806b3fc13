"""What the int8 demo steps share: onnxruntime's quantize_static of a float ONNX model, msc's
build of the QDQ model, and both int8 runs' SQNR against the float model."""

from __future__ import annotations

import tempfile
from pathlib import Path


def ort_qdq(model, calib: list, **options):
    """onnxruntime's quantize_static of ``model`` (QDQ format, per channel, ``options`` on
    top: activation / weight types, calibrate_method) calibrated on ``calib``; a ModelProto."""
    import onnx
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

    name = model.graph.input[0].name

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.items = iter([{name: x} for x in calib])

        def get_next(self):
            return next(self.items, None)

    with tempfile.TemporaryDirectory() as folder:
        src, dst = Path(folder) / "float.onnx", Path(folder) / "qdq.onnx"
        onnx.save(model, src)
        quantize_static(str(src), str(dst), Reader(), quant_format=QuantFormat.QDQ,
                        per_channel=True, **options)
        return onnx.load(dst)


def sqnr(ref: list, got: list) -> float:
    """Signal to quantization noise of ``got`` against ``ref`` (lists of arrays), in dB."""
    import numpy as np

    ref = np.concatenate([np.ravel(r) for r in ref]).astype(np.float64)
    got = np.concatenate([np.ravel(g) for g in got]).astype(np.float64)
    return float(10 * np.log10((ref ** 2).sum() / max(((ref - got) ** 2).sum(), 1e-300)))


def quantized_run(model, data: list, **options) -> tuple:
    """(msc executable, msc SQNR dB, onnxruntime SQNR dB): ``model`` (input "x") quantized
    by ``ort_qdq`` calibrated on ``data[:4]``; both int8 runs compared with onnxruntime's
    float run on ``data[4:]``."""
    import onnxruntime as ort

    from msc.codegen import to_relax
    from msc.frontends.translate import from_onnx

    from .. import relax

    qdq = ort_qdq(model, data[:4], **options)
    ex = relax.build(to_relax(*from_onnx(qdq)))
    vm = relax.VirtualMachine(ex, relax.cpu())["main"]
    sessions = [ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
                for m in (model, qdq)]
    ref, theirs = ([s.run(None, {"x": x})[0] for x in data[4:]] for s in sessions)
    ours = [vm(x).numpy() for x in data[4:]]
    return ex, sqnr(ref, ours), sqnr(ref, theirs)
