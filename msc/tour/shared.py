"""What the tour's steps share: the banner that opens each step, the ``msc`` command run as a
user runs it, and small models built in code (so the tour needs no files)."""

from __future__ import annotations

import subprocess
import sys


def banner(title: str) -> None:
    """The line that opens a step: ``======== title ====...``, 80 columns for short titles."""
    print(f"\n{'=' * 8} {title} {'=' * max(4, 70 - len(title))}")


def run_msc(argv: list[str]) -> subprocess.CompletedProcess:
    """``msc ARGV`` in a child process, as typed in a shell: its exit status, stdout, stderr.

    The tour sits above the command line (``msc demo`` is one of its commands), so it runs the
    command rather than importing it."""
    return subprocess.run([sys.executable, "-m", "msc", *argv], capture_output=True,
                          text=True, check=False, timeout=600)


def tiny_cnn_onnx():
    """A small conv net as ONNX (dynamic batch N), built in code so the demo needs no files."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(shape).astype("float32"), name)
             for name, shape in (("w", (8, 3, 3, 3)), ("b", (8,)), ("fc", (10, 8)))]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["p"]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "fc"], ["y"], transB=1)]
    graph = helper.make_graph(
        nodes, "tiny_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def small_cnn():
    """conv 3x3 + relu, max pool, 1x1 conv, residual add + relu, channel shuffle: the kernels
    that split across threads (direct conv, pool, elementwise, permute)."""
    import numpy as np

    from .. import relax
    from ..relax import op as R

    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((32, 16, 3, 3)).astype("float32") * 0.1
    w2 = rng.standard_normal((32, 32, 1, 1)).astype("float32") * 0.1
    x = relax.Var("x", relax.TensorStructInfo((1, 16, 64, 64), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            h = bb.emit(R.nn.relu(bb.emit(R.nn.conv2d(x, relax.const(w1), padding=1))))
            h = bb.emit(R.nn.max_pool2d(h, 3, 2, 1))
            h = bb.emit(R.nn.relu(bb.emit(R.add(h, bb.emit(R.nn.conv2d(h, relax.const(w2)))))))
            h = bb.emit(R.reshape(h, (1, 4, 8, 32, 32)))
            gv = bb.emit_output(R.permute_dims(h, (0, 2, 1, 3, 4)))
        bb.emit_func_output(gv)
    return bb.get(), rng.random((1, 16, 64, 64), dtype="float32")
