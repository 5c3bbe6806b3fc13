"""Demo step: onnxruntime's QDQ attention + GELU runs int8 end to end on msc (the attention's
matmuls of two activations on an int8 GEMM, the tanh GELU as one table lookup)."""

from __future__ import annotations

from .shared import banner


def _attention_gelu(seq: int = 16, dim: int = 32, heads: int = 4):
    """ONNX: softmax(q k^T / sqrt(d)) v per head, then GPT-2's tanh GELU."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng, n, hd = np.random.default_rng(0), helper.make_node, dim // heads
    consts = {"w_" + p: rng.standard_normal((dim, dim)).astype(np.float32) * dim ** -0.5
              for p in "qkv"}
    consts |= {"heads": np.array([1, seq, heads, hd]), "merge": np.array([1, seq, dim]),
               "c": np.float32(hd ** -0.5), "three": np.float32(3), "a": np.float32(0.044715),
               "r": np.float32(np.sqrt(2 / np.pi)), "one": np.float32(1),
               "half": np.float32(0.5)}
    nodes = [node for p in "qkv" for node in (
        n("MatMul", ["x", "w_" + p], [p + "0"]), n("Reshape", [p + "0", "heads"], [p + "1"]),
        n("Transpose", [p + "1"], [p], perm=[0, 2, 1, 3]))]
    chain = [("Transpose", ["k"], "kt", {"perm": [0, 1, 3, 2]}), ("MatMul", ["q", "kt"], "s0", {}),
             ("Mul", ["s0", "c"], "s", {}), ("Softmax", ["s"], "p", {"axis": -1}),
             ("MatMul", ["p", "v"], "o0", {}), ("Transpose", ["o0"], "o1", {"perm": [0, 2, 1, 3]}),
             ("Reshape", ["o1", "merge"], "h", {}), ("Pow", ["h", "three"], "h3", {}),
             ("Mul", ["h3", "a"], "h3a", {}), ("Add", ["h", "h3a"], "u", {}),
             ("Mul", ["u", "r"], "ur", {}), ("Tanh", ["ur"], "t", {}),
             ("Add", ["t", "one"], "t1", {}), ("Mul", ["h", "half"], "hh", {}),
             ("Mul", ["hh", "t1"], "y", {})]
    nodes += [n(op, ins, [out], **attrs) for op, ins, out, attrs in chain]
    graph = helper.make_graph(
        nodes, "attention", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq, dim])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array(v), k) for k, v in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def step_int8_attention(out: str) -> None:
    """quantize_static (QDQ) on an attention + GELU block -> msc folds every matmul and the
    GELU into int8 kernels; SQNR against float as onnxruntime's own int8 run."""
    import numpy as np

    from .qdq import quantized_run

    rng = np.random.default_rng(1)
    data = [rng.standard_normal((1, 16, 32)).astype(np.float32) for _ in range(6)]
    model = _attention_gelu()
    ex, ours, theirs = quantized_run(model, data)
    banner("QDQ attention + GELU -> int8 kernels")
    ops = ex.stats["ops"]
    print({k: v for k, v in ops.items() if k.startswith("int8.")})
    print(f"SQNR vs float: msc int8 {ours:.1f} dB, onnxruntime int8 {theirs:.1f} dB")
    if (ops.get("int8.batch_matmul") != {"native": 2} or "tanh" in ops or "matmul" in ops
            or ours < theirs - 0.5):
        raise SystemExit("demo: the QDQ attention did not run on int8 kernels as it should")
