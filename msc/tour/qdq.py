"""What the int8 demo steps share: onnxruntime's quantize_static of a float ONNX model, msc's
build of the QDQ model, and both int8 runs' SQNR against the float model."""

from __future__ import annotations

import tempfile
from pathlib import Path


def quantized_run(model, data: list, **options) -> tuple:
    """(msc executable, msc SQNR dB, onnxruntime SQNR dB): ``model`` (input "x") quantized
    by quantize_static (QDQ, per channel, ``options`` on top) calibrated on ``data[:4]``;
    both int8 runs compared with onnxruntime's float run on ``data[4:]``."""
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

    from msc.codegen import to_relax
    from msc.frontends.translate import from_onnx

    from .. import relax

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.items = iter([{"x": x} for x in data[:4]])

        def get_next(self):
            return next(self.items, None)

    with tempfile.TemporaryDirectory() as folder:
        src, dst = Path(folder) / "float.onnx", Path(folder) / "qdq.onnx"
        onnx.save(model, src)
        quantize_static(str(src), str(dst), Reader(), quant_format=QuantFormat.QDQ,
                        per_channel=True, **options)
        qdq = onnx.load(dst)
    ex = relax.build(to_relax(*from_onnx(qdq)))
    vm = relax.VirtualMachine(ex, relax.cpu())["main"]
    sessions = [ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
                for m in (model, qdq)]
    ref, theirs = ([s.run(None, {"x": x})[0] for x in data[4:]] for s in sessions)
    ours = [vm(x).numpy() for x in data[4:]]

    def sqnr(got):
        r, g = np.concatenate(ref).astype(np.float64), np.concatenate(got)
        return 10 * np.log10((r ** 2).sum() / ((r - g) ** 2).sum())
    return ex, sqnr(ours), sqnr(theirs)
