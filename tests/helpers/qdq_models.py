"""onnxruntime's QDQ quantization of a float ONNX model, as the int8 tests use it, the small
float models they quantize, and the SQNR they compare by."""

from __future__ import annotations

from pathlib import Path


def ort_quantize(model, inputs: list, folder: Path, input_name: str = "x",
                 method: str = "MinMax"):
    """``quantize_static`` in QDQ format (per-channel int8 weights, uint8 activations)
    calibrated on ``inputs`` by ``method`` (onnxruntime's CalibrationMethod name); the
    quantized ModelProto."""
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
    quantize_static(str(src), str(dst), Reader(), quant_format=QuantFormat.QDQ,
                    per_channel=True, activation_type=QuantType.QUInt8,
                    weight_type=QuantType.QInt8,
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


def sqnr(ref: list, got: list) -> float:
    """Signal to quantization noise of ``got`` against ``ref`` (lists of arrays), in dB."""
    import numpy as np

    ref = np.concatenate([np.ravel(r) for r in ref]).astype(np.float64)
    got = np.concatenate([np.ravel(g) for g in got]).astype(np.float64)
    return float(10 * np.log10((ref ** 2).sum() / max(((ref - got) ** 2).sum(), 1e-300)))


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
