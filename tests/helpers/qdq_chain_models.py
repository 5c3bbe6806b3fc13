"""QDQ models whose int8 programs use every int8 kernel kind that is a native chain step, and
the run that compares a build's plans (chains, every kernel from Python) with onnxruntime:
what tests/backend/vm/test_vm_int8_chain.py checks in this process and in children with
``$MSC_CPU_ISA`` set."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import numpy as np

__all__ = ["block_model", "cnn_float_onnx", "compare", "python_calls", "quantized",
           "rows_float_onnx"]


def cnn_float_onnx(batch: int = 1):
    """conv 3x3 -> relu -> pad -> depthwise 3x3 -> sigmoid -> conv 1x1 + residual -> max
    pool, concat with a 1x1 conv of it (6 x 6 planes) -> global average pool -> 1x1 conv of
    1 x 1 planes -> flatten -> gemm; input ``x`` [batch, 8, 12, 12], opset 13, random weights.
    Quantized, it runs on QConv2d, QDepthwise, QLut, QAdd, QMaxPool, QConcat, QAvgPool and
    QDense, the pad taken into the depthwise conv's padding."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(5)

    def init(name, shape, scale):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale)
                                       .astype(np.float32), name)
    inits = [init("w1", (16, 8, 3, 3), 0.2), init("b1", (16,), 0.1),
             init("wd", (16, 1, 3, 3), 0.4), init("bd", (16,), 0.1),
             init("w2", (16, 16, 1, 1), 0.3), init("b2", (16,), 0.1),
             init("w3", (8, 16, 1, 1), 0.3), init("b3", (8,), 0.1),
             init("w4", (16, 24, 1, 1), 0.3), init("b4", (16,), 0.1),
             init("wf", (10, 16), 0.3), init("bf", (10,), 0.1),
             numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads")]
    n = helper.make_node
    nodes = [n("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]), n("Relu", ["c1"], ["r1"]),
             n("Pad", ["r1", "pads"], ["r1p"]),
             n("Conv", ["r1p", "wd", "bd"], ["d"], group=16),
             n("Sigmoid", ["d"], ["g"]), n("Conv", ["g", "w2", "b2"], ["c2"]),
             n("Add", ["c2", "r1"], ["s"]),
             n("MaxPool", ["s"], ["m"], kernel_shape=[2, 2], strides=[2, 2]),
             n("Conv", ["m", "w3", "b3"], ["c3"]), n("Concat", ["m", "c3"], ["cat"], axis=1),
             n("GlobalAveragePool", ["cat"], ["p"]), n("Conv", ["p", "w4", "b4"], ["c4"]),
             n("Relu", ["c4"], ["r4"]), n("Flatten", ["r4"], ["f"]),
             n("Gemm", ["f", "wf", "bf"], ["y"], transB=1)]
    graph = helper.make_graph(
        nodes, "int8_kinds",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 8, 12, 12])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def block_model():
    """compression's qdq_block (q / k / v split from one projection, masked softmax, residual
    layer norm), [1, 16, 32]: QDense, QBatchMatmul, QSoftmax and QLayerNorm."""
    from msc.compression.quantize.testing import qdq_block

    return qdq_block(16, 32)


def rows_float_onnx(batch: int = 24):
    """MobileBERT's NoNorm (``x * w + b``, per channel on the last axis), a sigmoid of x and
    the first half of x's last axis (a decoder's rotary slice), concatenated along the last
    axis as MobileBERT's embeddings are, then a matmul; input ``x`` [batch, 12, 16], opset 13.
    At batch 24: 288 runs per concat input and per slice (one strided call each) and tables
    of one byte per row (QLut's channel-last rows)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(6)
    inits = [numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32),
                                     name)
             for name, shape, scale in (("w", (16,), 0.8), ("b", (16,), 0.3),
                                        ("wm", (40, 8), 0.3))]
    inits += [numpy_helper.from_array(np.array(v, np.int64), k)
              for k, v in (("s0", [0]), ("s8", [8]), ("ax", [2]))]
    n = helper.make_node
    nodes = [n("Mul", ["x", "w"], ["xw"]), n("Add", ["xw", "b"], ["h"]),
             n("Sigmoid", ["x"], ["g"]), n("Slice", ["x", "s0", "s8", "ax"], ["lo"]),
             n("Concat", ["h", "g", "lo"], ["cat"], axis=2), n("MatMul", ["cat", "wm"], ["y"])]
    graph = helper.make_graph(
        nodes, "int8_rows",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 12, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 12, 8])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def quantized(model, shape: tuple, seed: int = 0):
    """(onnxruntime's quantize_static QDQ model of ``model``, calibrated on four random
    inputs of ``shape``, those inputs)."""
    from onnxruntime.quantization import QuantType

    from msc.compression.quantize.testing import ort_qdq

    rng = np.random.default_rng(seed)
    calib = [rng.standard_normal(shape).astype(np.float32) for _ in range(4)]
    return ort_qdq(model, calib, activation_type=QuantType.QUInt8,
                   weight_type=QuantType.QInt8), calib


def python_calls(plan) -> int:
    """Instructions a plan's run function hands to Python (free views riding along a chain
    and a split-size step's kernel object excepted)."""
    return len(re.findall(r"regs\[\d+\] = F\d+\(", plan.runner.source)) - sum(
        1 for i in plan.instructions if getattr(i[0], "free_view", None) is not None)


def compare(qdq, x: np.ndarray, threads: int = 1) -> dict:
    """Runs ``qdq`` on ``x``: msc's chained plan, the same plan with every kernel called from
    Python, and onnxruntime. {"chain", "python", "ort": outputs, "kinds": the int8 kernel
    kinds of the chain steps, "python_calls", "scale": the output's quantization step,
    "plan": the chained plan}."""
    import onnxruntime as ort
    from onnx import numpy_helper

    from msc import relax
    from msc.backend.runtime import plan as plan_mod
    from msc.backend.runtime.threads import num_threads
    from msc.codegen import to_relax
    from msc.frontends.translate import from_onnx

    with tempfile.TemporaryDirectory() as folder:
        mod = to_relax(*from_onnx(qdq), build_folder=str(Path(folder)))
    ex = relax.build(mod)
    with num_threads(threads):
        fn = relax.VirtualMachine(ex)["main"]
        chain = fn(x).numpy()
        plan = fn.entry({}).plan
        python = plan_mod.make_plan(ex.programs["main"], {}, native=False)
        regs = python.new_registers()
        regs[plan_mod.REGS], regs[plan_mod.ENV] = regs, {}
        regs[python.params[0]] = x
        python.runner.fn(regs)
        unchained = np.asarray(regs[python.result])
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(qdq.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    want = session.run(None, {qdq.graph.input[0].name: x})[0]
    last = [node for node in qdq.graph.node if node.op_type == "DequantizeLinear"][-1]
    scale = next(float(numpy_helper.to_array(i)) for i in qdq.graph.initializer
                 if i.name == last.input[1])
    kinds = sorted({type(i[4].step.kernel).__name__ for i in plan.instructions
                    if hasattr(getattr(i[4], "step", None), "kernel")
                    and type(i[4].step.kernel).__module__.startswith(
                        "msc.backend.kernels.int8")})
    return {"chain": chain, "python": unchained, "ort": want, "kinds": kinds,
            "python_calls": python_calls(plan), "scale": scale, "fused": ex.stats["fused"],
            "plan": plan}


def masked_softmax_infinite_scale():
    """GPT-Neo's attention scores as onnxruntime's quantize_static writes them: a causal
    ``where`` to float32's lowest value, plus an additive mask of the same value. The sum
    overflows to -inf, calibration takes it in, and the quantize before the softmax gets an
    infinite scale (gpt_neo's QDQ file has exactly this chain)."""
    from onnx import TensorProto, helper, numpy_helper

    tri = np.tril(np.ones((8, 8), bool))[None, None]
    lowest = np.float32(np.finfo(np.float32).min)
    big = np.float32(-lowest / 255)
    consts = {"s0": np.float32(0.05), "z0": np.uint8(128), "tri": tri, "low": lowest,
              "s1": big, "z1": np.uint8(255), "mq": np.where(tri, 255, 0).astype(np.uint8),
              "s2": np.float32(np.inf), "z2": np.uint8(0), "s3": np.float32(1 / 255),
              "z3": np.uint8(0)}
    n = helper.make_node
    nodes = [n("QuantizeLinear", ["x", "s0", "z0"], ["xq"]),
             n("DequantizeLinear", ["xq", "s0", "z0"], ["xf"]),
             n("Where", ["tri", "xf", "low"], ["w"]),
             n("QuantizeLinear", ["w", "s1", "z1"], ["wq"]),
             n("DequantizeLinear", ["wq", "s1", "z1"], ["wf"]),
             n("DequantizeLinear", ["mq", "s1", "z1"], ["mf"]), n("Add", ["wf", "mf"], ["a"]),
             n("QuantizeLinear", ["a", "s2", "z2"], ["aq"]),
             n("DequantizeLinear", ["aq", "s2", "z2"], ["af"]),
             n("Softmax", ["af"], ["p"], axis=-1),
             n("QuantizeLinear", ["p", "s3", "z3"], ["pq"]),
             n("DequantizeLinear", ["pq", "s3", "z3"], ["y"])]
    shape = [2, 2, 8, 8]
    return helper.make_model(helper.make_graph(
        nodes, "neo", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in consts.items()]),
        opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def dequantized_matmul(seed: int = 0):
    """(model, x, the model's exact value at x): ``MatMul(x, DequantizeLinear(w int8, per
    channel along axis 1))``, x float [1, 4, 32]. onnxruntime's optimized session fuses the
    pair into an int8 kernel whose answer is off the model's (1.32: ~0.06 of values ~1); run
    as written (graph optimizations off) it is the model's value."""
    from onnx import TensorProto, checker, helper, numpy_helper

    rng = np.random.default_rng(seed)
    w = rng.integers(-127, 127, (32, 32)).astype(np.int8)
    s = rng.uniform(0.001, 0.01, 32).astype(np.float32)
    nodes = [helper.make_node("DequantizeLinear", ["w", "s", "z"], ["wf"], axis=1),
             helper.make_node("MatMul", ["x", "wf"], ["y"])]
    model = helper.make_model(helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 32])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(s, "s"),
         numpy_helper.from_array(np.zeros(32, np.int8), "z")]),
        opset_imports=[helper.make_opsetid("", 17)])
    checker.check_model(model)
    x = rng.standard_normal((1, 4, 32)).astype(np.float32)
    return model, x, x @ (w.astype(np.float32) * s)
