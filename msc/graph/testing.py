"""Small hand-built graphs for tests, docs and benchmarks (no frontend involved).

    >>> from msc.graph.testing import conv_relu_graph
    >>> conv_relu_graph().inspect()["nodes"]
    {'total': 3, 'input': 1, 'msc.conv2d_bias': 1, 'nn.relu': 1}

Each builder returns a fresh graph; names, aliases and layouts follow what the Relax builder
produces (conventions 4.4): tensors ``<node>:<i>``, weights ``const``, ``const_1``..., input
aliases = node names, a graph output's alias = its producer's name.
"""

from __future__ import annotations

from collections.abc import Sequence

from .graph import MSCGraph
from .joint import MSCJoint, MSCPrim
from .tensor import MSCTensor

__all__ = ["CONV_ATTRS", "conv_graph", "conv_relu_graph", "dynamic_graph", "prune_graph",
           "residual_graph", "shared_weight_graph", "synthetic_chain"]

# Attrs of a Conv2d(3, 6, 7) as the Relax builder records them (conventions 2.1).
CONV_ATTRS = {"strides": "1,1", "padding": "0,0,0,0", "dilation": "1,1", "groups": "1",
              "data_layout": "NCHW", "kernel_layout": "OIHW", "out_layout": "NCHW"}


class _Builder:
    """Appends joints with consecutive indices; ``op`` takes input *tensor names*."""

    def __init__(self) -> None:
        self.nodes: list[MSCJoint] = []
        self.by_name: dict[str, MSCJoint] = {}

    def op(self, name: str, optype: str, inputs: Sequence[str], shapes: Sequence[list],
           layout: str = "NCHW", attrs: dict | None = None, weights: dict | None = None,
           alias: str = "", prims: Sequence[list] | None = None, scope: bool = True,
           shared_ref: str = "") -> MSCJoint:
        outputs = [MSCTensor(f"{name}:{i}", "float32", layout, shape,
                             alias if len(shapes) == 1 else "",
                             prims[i] if prims else None) for i, shape in enumerate(shapes)]
        pairs = [self._pair(ref) for ref in inputs]
        node = MSCJoint(len(self.nodes), name, shared_ref, optype, attrs, pairs, outputs,
                        weights, scope=["block"] if scope else None)
        self.nodes.append(node)
        self.by_name[name] = node
        return node

    def _pair(self, ref: str) -> tuple[MSCJoint, int]:
        host, _, idx = ref.rpartition(":")
        return self.by_name[host], int(idx)

    def input(self, name: str, shape: list, layout: str = "NCHW",
              prims: list | None = None) -> MSCJoint:
        return self.op(name, "input", [], [shape], layout, alias=name,
                       prims=[prims] if prims else None, scope=False)


def _weight(name: str, alias: str, layout: str, shape: list) -> MSCTensor:
    return MSCTensor(name, "float32", layout, shape, alias)


def _conv_weights(node: str, first: int, out_c: int, in_c: int, k: int,
                  with_alias: bool = True) -> dict:
    def alias(role: str) -> str:
        return f"{node}.{role}" if with_alias else ""
    suffix = [f"_{first}" if first else "", f"_{first + 1}"]
    return {"weight": _weight(f"const{suffix[0]}", alias("weight"), "OIHW", [out_c, in_c, k, k]),
            "bias": _weight(f"const{suffix[1]}", alias("bias"), "O", [out_c])}


def conv_graph() -> MSCGraph:
    """torch ``Conv2d(3, 6, 7)`` on ``[1, 3, 10, 10]``: the JSON example of conventions 2.1."""
    b = _Builder()
    b.input("inp_0", [1, 3, 10, 10])
    b.op("conv2d", "msc.conv2d_bias", ["inp_0:0"], [[1, 6, 4, 4]], attrs=CONV_ATTRS,
         weights=_conv_weights("conv2d", 0, 6, 3, 7), alias="conv2d")
    return MSCGraph("main", b.nodes, ["inp_0:0"], ["conv2d:0"])


def conv_relu_graph() -> MSCGraph:
    """input ``[1, 3, 10, 10]`` -> msc.conv2d_bias (weight + bias) -> nn.relu."""
    b = _Builder()
    b.input("inp_0", [1, 3, 10, 10])
    b.op("conv2d", "msc.conv2d_bias", ["inp_0:0"], [[1, 6, 4, 4]], attrs=CONV_ATTRS,
         weights=_conv_weights("conv2d", 0, 6, 3, 7))
    b.op("relu", "nn.relu", ["conv2d:0"], [[1, 6, 4, 4]], alias="relu")
    return MSCGraph("main", b.nodes, ["inp_0:0"], ["relu:0"])


def residual_graph() -> MSCGraph:
    """A residual block with a tuple output: conv -> split (2 outputs) -> get_item x2 ->
    relu / concat -> add with the input; a sigmoid reads ``split:1`` directly (two outputs)."""
    b = _Builder()
    b.input("inp_0", [1, 8, 4, 4])
    conv_attrs = {**CONV_ATTRS, "padding": "1,1,1,1"}
    b.op("conv2d", "msc.conv2d_bias", ["inp_0:0"], [[1, 8, 4, 4]], attrs=conv_attrs,
         weights=_conv_weights("conv2d", 0, 8, 8, 3))
    b.op("split", "split", ["conv2d:0"], [[1, 4, 4, 4], [1, 4, 4, 4]],
         attrs={"indices_or_sections": "2", "axis": "1"})
    for i in range(2):  # a get_item reads the whole tuple, as the Relax builder makes it
        b.op(f"split.{i}", "get_item", ["split:0", "split:1"], [[1, 4, 4, 4]],
             attrs={"index": str(i)})
    b.op("relu", "nn.relu", ["split.0:0"], [[1, 4, 4, 4]])
    b.op("concat", "concat", ["relu:0", "split.1:0"], [[1, 8, 4, 4]], attrs={"axis": "1"})
    b.op("add", "add", ["concat:0", "inp_0:0"], [[1, 8, 4, 4]], alias="add")
    b.op("sigmoid", "sigmoid", ["split:1"], [[1, 4, 4, 4]], alias="sigmoid")
    return MSCGraph("main", b.nodes, ["inp_0:0"], ["add:0", "sigmoid:0"])


def dynamic_graph() -> MSCGraph:
    """A dynamic batch ``bz``: shape prim ``bz``, ``INT_1`` = 6 and ``MUL_2`` = bz * 6; conv ->
    reshape to ``[bz*6, 16]`` -> add with a constant node ``const_2``."""
    bz = MSCPrim(0, "bz", "shape", {"producer": "inp_0", "out_idx": "0", "dim": "0"})
    six = MSCPrim(1, "INT_1", "Int", {"value": "6"})
    mul = MSCPrim(2, "MUL_2", "Mul", {}, [bz, six])
    b = _Builder()
    b.input("inp_0", [-1, 3, 10, 10], prims=["bz", "3", "10", "10"])
    b.op("conv2d", "msc.conv2d_bias", ["inp_0:0"], [[-1, 6, 4, 4]], attrs=CONV_ATTRS,
         weights=_conv_weights("conv2d", 0, 6, 3, 7, with_alias=False),
         prims=[["bz", "6", "4", "4"]])
    b.op("reshape", "reshape", ["conv2d:0"], [[-1, 16]], layout="", attrs={"shape": "-1,16"},
         prims=[["MUL_2", "16"]])
    b.op("const_2", "constant", [], [[16]], layout="O", scope=False,
         weights={"const": _weight("const_2", "", "O", [16])})
    b.op("add", "add", ["reshape:0", "const_2:0"], [[-1, 16]], layout="", alias="add",
         prims=[["MUL_2", "16"]])
    return MSCGraph("main", b.nodes, ["inp_0:0"], ["add:0"], [bz, six, mul])


def shared_weight_graph() -> MSCGraph:
    """Two msc.linear nodes holding the same weight ``const``; the second has a shared_ref."""
    b = _Builder()
    b.input("inp_0", [1, 8], layout="NC")
    weight = {"weight": _weight("const", "matmul.weight", "OI", [8, 8])}
    b.op("matmul", "msc.linear", ["inp_0:0"], [[1, 8]], layout="NC", weights=weight)
    b.op("matmul_1", "msc.linear", ["matmul:0"], [[1, 8]], layout="NC", weights=weight,
         alias="matmul_1", shared_ref="matmul")
    return MSCGraph("main", b.nodes, ["inp_0:0"], ["matmul_1:0"])


def prune_graph() -> MSCGraph:
    """conv -> batch_norm -> get_item -> relu -> conv_1 -> add(conv_1, bn) -> conv_2: the
    shape the pruner meets (main, follow, residual friends, relation output)."""
    b = _Builder()
    b.input("inp_0", [1, 3, 8, 8])
    pad = {**CONV_ATTRS, "padding": "1,1,1,1"}
    b.op("conv2d", "msc.conv2d_bias", ["inp_0:0"], [[1, 4, 8, 8]], attrs=pad,
         weights=_conv_weights("conv2d", 0, 4, 3, 3))
    roles = ["gamma", "beta", "mean", "var"]
    bn_weights = {r: _weight(f"const_{2 + i}", "", "O", [4]) for i, r in enumerate(roles)}
    b.op("batch_norm", "nn.batch_norm", ["conv2d:0"], [[1, 4, 8, 8]], weights=bn_weights,
         attrs={"axis": "1", "epsilon": "0.000010"})
    b.op("batch_norm.0", "get_item", ["batch_norm:0"], [[1, 4, 8, 8]], attrs={"index": "0"})
    b.op("relu", "nn.relu", ["batch_norm.0:0"], [[1, 4, 8, 8]])
    b.op("conv2d_1", "msc.conv2d_bias", ["relu:0"], [[1, 4, 8, 8]], attrs=pad,
         weights=_conv_weights("conv2d_1", 6, 4, 4, 3))
    b.op("add", "add", ["conv2d_1:0", "batch_norm.0:0"], [[1, 4, 8, 8]])
    b.op("conv2d_2", "msc.conv2d_bias", ["add:0"], [[1, 2, 8, 8]], attrs=CONV_ATTRS,
         weights=_conv_weights("conv2d_2", 8, 2, 4, 1), alias="conv2d_2")
    return MSCGraph("main", b.nodes, ["inp_0:0"], ["conv2d_2:0"])


def synthetic_chain(size: int) -> MSCGraph:
    """``size`` joints: an input, then repeating conv / relu / add(residual) blocks."""
    b = _Builder()
    b.input("inp_0", [1, 16, 32, 32])
    last, n_weights = "inp_0:0", 0
    while len(b.nodes) < size:
        i, kind = len(b.nodes), len(b.nodes) % 3
        if kind == 1:
            b.op(f"conv2d_{i}", "msc.conv2d_bias", [last], [[1, 16, 32, 32]], attrs=CONV_ATTRS,
                 weights=_conv_weights(f"conv2d_{i}", n_weights + 1, 16, 16, 3))
            n_weights += 2
        elif kind == 2:
            b.op(f"relu_{i}", "nn.relu", [last], [[1, 16, 32, 32]])
        else:
            b.op(f"add_{i}", "add", [last, f"conv2d_{i - 2}:0"], [[1, 16, 32, 32]])
        last = f"{b.nodes[-1].name}:0"
    return MSCGraph("main", b.nodes, ["inp_0:0"], [last])
