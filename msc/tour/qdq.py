"""What the int8 demo steps share: onnxruntime's quantize_static of a float ONNX model, msc's
build of the QDQ model, and both int8 runs' SQNR against the float model."""

from __future__ import annotations

from msc.compression.quantize.testing import ort_qdq, sqnr

__all__ = ["ort_qdq", "quantized_run", "sqnr"]


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
