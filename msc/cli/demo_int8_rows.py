"""Demo step: between the int8 GEMMs of onnxruntime's QDQ transformer block, the split of a
fused q / k / v projection, the masked softmax and the residual add + layer norm run on the
bytes (one kernel per Q/DQ chain: qdq_rows.py), not as float passes between dequantize and
quantize."""

from __future__ import annotations

import tempfile
from pathlib import Path


def _banner(title: str) -> None:
    print(f"\n{'=' * 8} {title} {'=' * max(4, 70 - len(title))}")


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
    import onnx
    import onnxruntime as ort
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    from codegen import to_relax
    from frontends.translate import from_onnx

    from .. import relax

    rng = np.random.default_rng(2)
    data = [rng.random((1, 16, 32), dtype=np.float32) * 2 - 0.5 for _ in range(6)]

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.items = iter([{"x": x} for x in data[:4]])

        def get_next(self):
            return next(self.items, None)

    model = qdq_block()
    with tempfile.TemporaryDirectory() as folder:
        src, dst = Path(folder) / "float.onnx", Path(folder) / "qdq.onnx"
        onnx.save(model, src)
        quantize_static(str(src), str(dst), Reader(), quant_format=QuantFormat.QDQ,
                        per_channel=True, activation_type=QuantType.QUInt8,
                        weight_type=QuantType.QInt8)
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
    _banner("QDQ split / masked softmax / layer norm -> kernels on bytes")
    fused, ops = ex.stats["fused"], ex.stats["ops"]
    names = ("qdq:split", "qdq:softmax", "qdq:add->layer_norm")
    print({k: v for k, v in fused.items() if k in names})
    print(f"SQNR vs float: msc int8 {sqnr(ours):.1f} dB, onnxruntime int8 {sqnr(theirs):.1f} dB")
    if (any(fused.get(k) != 1 for k in names)
            or "nn.softmax" in ops or "nn.layer_norm" in ops
            or sqnr(ours) < sqnr(theirs) - 0.5):
        raise SystemExit("demo: the QDQ softmax / layer norm did not run on bytes as it should")
