"""Small float ONNX models to try int8 on, onnxruntime's ``quantize_static`` of them, and the
SQNR the int8 runs are compared by: what the tour's int8 steps and the tests share.

    from msc.compression.quantize.testing import ort_qdq, sqnr, tiny_conv_onnx
    model = tiny_conv_onnx()
    qdq = ort_qdq(model, calib)            # onnxruntime's QDQ model (per-channel weights)
"""

from __future__ import annotations

import tempfile
from pathlib import Path

__all__ = ["ort_qdq", "qdq_block", "sqnr", "tiny_conv_onnx"]


def tiny_conv_onnx(seed: int = 0):
    """conv -> relu -> conv -> + residual -> relu -> pool -> gemm, random weights, opset 13,
    input ``x`` [1, 3, 12, 12]."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)

    def init(name, shape, scale):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale)
                                       .astype(np.float32), name)
    inits = [init("w1", (8, 3, 3, 3), 0.3), init("b1", (8,), 0.1),
             init("w2", (8, 8, 3, 3), 0.15), init("b2", (8,), 0.1),
             init("wf", (10, 8), 0.4), init("bf", (10,), 0.1)]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c2", "r1"], ["s"]),
             helper.make_node("Relu", ["s"], ["r2"]),
             helper.make_node("GlobalAveragePool", ["r2"], ["p"]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1)]
    graph = helper.make_graph(
        nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 12, 12])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def qdq_block(seq: int = 16, dim: int = 32):
    """ONNX: q, k, v split from one projection; softmax(q k^T c + mask(x)) v + x -> layer
    norm. The mask is computed from x: a run-time value broadcast over the query rows, as
    BERT's attention mask."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    n, rng = helper.make_node, np.random.default_rng(1)
    nodes = [n("MatMul", ["x", "wqkv"], ["qkv"]),
             n("Split", ["qkv", "sizes"], ["q", "k", "v"], axis=2),
             n("Transpose", ["k"], ["kt"], perm=[0, 2, 1]), n("MatMul", ["q", "kt"], ["s0"]),
             n("Mul", ["s0", "c"], ["s"]), n("ReduceMean", ["x"], ["m0"], axes=[2]),
             n("Transpose", ["m0"], ["m1"], perm=[0, 2, 1]), n("Mul", ["m1", "big"], ["m"]),
             n("Add", ["s", "m"], ["a"]), n("Softmax", ["a"], ["p"], axis=-1),
             n("MatMul", ["p", "v"], ["o"]), n("Add", ["o", "x"], ["r"]),
             n("LayerNormalization", ["r", "gamma", "beta"], ["y"], axis=-1)]
    consts = {"wqkv": rng.standard_normal((dim, 3 * dim)) * dim ** -0.5,
              "c": dim ** -0.5, "big": -4.0, "gamma": rng.random(dim) + 0.5,
              "beta": rng.standard_normal(dim) * 0.1}
    inits = [numpy_helper.from_array(np.array(v, np.float32), k) for k, v in consts.items()]
    inits.append(numpy_helper.from_array(np.array([dim] * 3, np.int64), "sizes"))
    graph = helper.make_graph(nodes, "block", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, seq, dim])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


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
