"""Demo step: between the int8 GEMMs of onnxruntime's QDQ transformer block, the split of a
fused q / k / v projection, the masked softmax and the residual add + layer norm run on the
bytes (one kernel per Q/DQ chain: qdq_rows.py), not as float passes between dequantize and
quantize."""

from __future__ import annotations

from .shared import banner


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


def step_int8_rows(out: str) -> None:
    """quantize_static (QDQ) on the block -> msc runs the split, the masked softmax and the
    layer norm as kernels on bytes; SQNR against float as onnxruntime's own int8 run."""
    import numpy as np
    from onnxruntime.quantization import QuantType

    from .qdq import quantized_run

    rng = np.random.default_rng(2)
    data = [rng.random((1, 16, 32), dtype=np.float32) * 2 - 0.5 for _ in range(6)]
    model = qdq_block()
    ex, ours, theirs = quantized_run(model, data, activation_type=QuantType.QUInt8,
                                     weight_type=QuantType.QInt8)
    banner("QDQ split / masked softmax / layer norm -> kernels on bytes")
    fused, ops = ex.stats["fused"], ex.stats["ops"]
    names = ("qdq:split", "qdq:softmax", "qdq:add->layer_norm")
    print({k: v for k, v in fused.items() if k in names})
    print(f"SQNR vs float: msc int8 {ours:.1f} dB, onnxruntime int8 {theirs:.1f} dB")
    if (any(fused.get(k) != 1 for k in names)
            or "nn.softmax" in ops or "nn.layer_norm" in ops
            or ours < theirs - 0.5):
        raise SystemExit("demo: the QDQ softmax / layer norm did not run on bytes as it should")
