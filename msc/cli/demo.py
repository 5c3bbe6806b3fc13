"""``msc demo``: a short end-to-end tour that grows with every capability msc gains."""

from __future__ import annotations

import json
import os
from importlib import resources


def _banner(title: str) -> None:
    print(f"\n{'=' * 8} {title} {'=' * max(4, 70 - len(title))}")


def step_graph_from_json(out: str) -> None:
    """An MSCGraph from the packaged conv-relu JSON: printed form, inspect(), prototxt."""
    from ..graph import MSCGraph

    text = resources.files("msc").joinpath("data/conv_relu.json").read_text()
    graph = MSCGraph.from_json(text)
    graph.check()
    _banner("MSCGraph from JSON (msc/data/conv_relu.json)")
    print(graph)
    _banner("graph.inspect()")
    print(json.dumps(graph.inspect()))
    _banner("graph.visualize() -> prototxt (open it in Netron)")
    path = os.path.join(out, "conv_relu.prototxt")
    print(graph.visualize(path))
    graph.to_json(os.path.join(out, "conv_relu.json"))
    print(f"(wrote {path} and conv_relu.json)")


def step_relax_builder(out: str) -> None:
    """A Relax module built with the BlockBuilder, with shapes inferred on emit."""
    from .. import relax, tir

    n = tir.Var("n", "int64")
    x = relax.Var("x", relax.TensorStructInfo((n, 784), "float32"))
    y = relax.Var("y", relax.TensorStructInfo((784,), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, y]):
        with bb.dataflow():
            lv = bb.emit(relax.op.add(x, y))
            gv = bb.emit_output(relax.op.sigmoid(lv))
        bb.emit_func_output(gv)
    mod = bb.get()
    _banner("Relax BlockBuilder: dynamic batch n, struct info inferred on emit")
    for block in mod["main"].body.blocks:
        for b in block.bindings:
            sinfo = b.var.struct_info
            dims = ", ".join(str(d) for d in sinfo.values)
            print(f"{b.var.name_hint}: ({dims}) {sinfo.dtype} = {b.value.op.name}")


def step_tvmscript(out: str) -> None:
    """Print the MLP as TVMScript, parse it back (ast only), fold a bound weight."""
    import numpy as np

    from .. import relax, tir

    x = relax.Var("x", relax.TensorStructInfo((tir.Var("n", "int64"), 784), "float32"))
    w = relax.Var("w", relax.TensorStructInfo((784, 128), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            lv = bb.emit(relax.op.matmul(x, w))
            gv = bb.emit_output(relax.op.nn.relu(lv))
        bb.emit_func_output(gv)
    text = bb.get().script()
    _banner("TVMScript (mod.script()), parsed back with relax.from_script")
    print(text)
    assert relax.from_script(text).script() == text
    params = {"w": np.ones((784, 128), "float32")}
    bound = relax.transform.BindParams("main", params)(relax.from_script(text))
    path = os.path.join(out, "mlp.py")
    with open(path, "w") as f:
        f.write(bound.script(show_meta=True))
    print(f"(BindParams turned w into a constant; wrote {path} with its metadata section)")


STEPS = [step_graph_from_json, step_relax_builder, step_tvmscript]


def run_demo(out: str) -> int:
    os.makedirs(out, exist_ok=True)
    for step in STEPS:
        step(out)
    _banner("done")
    return 0
