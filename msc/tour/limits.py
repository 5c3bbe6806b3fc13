"""``msc demo`` step: large models and resource limits (issue #20). ONNX external data is
memory-mapped, not read (and must stay in the model's folder); a small file declaring sixteen
million joints is refused before unrolling, with the setting that raises the limit."""

from __future__ import annotations

import os
import time

import numpy as np

from .shared import banner


def _info(name: str, elem: int, dims):
    from onnx import helper
    return helper.make_tensor_value_info(name, elem, dims)


def _external_model(out: str) -> tuple[str, dict]:
    """y = x @ w0 @ w1 with the weights in weights.bin next to model.onnx."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weights = {f"w{k}": rng.standard_normal((64, 64)).astype("float32") for k in range(2)}
    nodes = [helper.make_node("MatMul", ["x", "w0"], ["h"]),
             helper.make_node("MatMul", ["h", "w1"], ["y"])]
    graph = helper.make_graph(nodes, "ext", [_info("x", TensorProto.FLOAT, [1, 64])],
                              [_info("y", TensorProto.FLOAT, [1, 64])],
                              [numpy_helper.from_array(v, k) for k, v in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    path = os.path.join(out, "model.onnx")
    onnx.save_model(model, path, save_as_external_data=True, location="weights.bin",
                    size_threshold=0)
    return path, weights


def _loop_nest(trips: int):
    """Loop(trips) { Loop(trips) { s + 1 } }: trips^2 steps in a few hundred bytes."""
    from onnx import TensorProto as T
    from onnx import helper, numpy_helper

    def body(name, extra=()):
        return helper.make_graph(
            [helper.make_node("Identity", [f"{name}c"], [f"{name}co"]), *extra] if extra else
            [helper.make_node("Identity", [f"{name}c"], [f"{name}co"]),
             helper.make_node("Add", [f"{name}s", "one"], [f"{name}so"])], name,
            [_info(f"{name}i", T.INT64, []), _info(f"{name}c", T.BOOL, []),
             _info(f"{name}s", T.FLOAT, [1])],
            [_info(f"{name}co", T.BOOL, []), _info(f"{name}so", T.FLOAT, [1])])

    inner = helper.make_node("Loop", ["M", "", "os"], ["oso"], name="inner", body=body("i"))
    outer = helper.make_node("Loop", ["M", "", "x"], ["y"], name="outer",
                             body=body("o", [inner]))
    inits = [numpy_helper.from_array(np.array(trips, "int64"), "M"),
             numpy_helper.from_array(np.ones(1, "float32"), "one")]
    graph = helper.make_graph([outer], "nest", [_info("x", T.FLOAT, [1])],
                              [_info("y", T.FLOAT, [1])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def step_limits(out: str) -> None:
    """External weights stay memory-mapped (and inside the model's folder); a 16-million
    joint Loop nest is refused up front."""
    from msc.frontends.onnx.api import from_onnx
    from msc.frontends.relax.weights import is_mapped

    from ..errors import ResourceLimitError, ValidationError

    os.makedirs(out, exist_ok=True)
    banner("large models: external data memory-mapped; limits checked before the work")
    path, want = _external_model(out)
    _graph, weights = from_onnx(path)
    for name, array in weights.items():
        original = want["w0" if np.array_equal(array.T, want["w0"]) else "w1"]
        if not is_mapped(array) or not np.array_equal(array.T, original):
            raise SystemExit(f"weight {name} was copied or read back wrong")
        print(f"{name}: {array.shape} mapped from weights.bin, offset {array.base.offset}")
    _refused(from_onnx, path, ValidationError)
    start = time.perf_counter()
    try:
        from_onnx(_loop_nest(4096))
    except ResourceLimitError as err:
        print(f"refused in {time.perf_counter() - start:.2f} s: {str(err)[:150]}")
    else:
        raise SystemExit("the 4096 x 4096 Loop nest was not refused")


def _refused(from_onnx, path: str, error) -> None:
    """The same model with its data file named ../../etc/passwd is refused."""
    import onnx

    model = onnx.load(path, load_external_data=False)
    for entry in model.graph.initializer[0].external_data:
        if entry.key == "location":
            entry.value = "../../etc/passwd"
    onnx.save_model(model, path)
    try:
        from_onnx(path)
    except error as err:
        print(f"refused: {str(err)[:150]}")
    else:
        raise SystemExit("a data file outside the model's folder was read")
