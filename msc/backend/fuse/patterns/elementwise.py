"""Chains of elementwise ops on one shape as one expression kernel (kernels/activation.py).

Exporters spell activations out: GPT-2's tanh-gelu reaches msc as power, multiply, add,
multiply, tanh, add, multiply (eight passes over a [seq, 3072] tensor); hard-swish as
multiply, add, clip, multiply (MobileNetV3: three passes, now one). A region is grown
backwards from its last op over producers whose results are used only inside the region;
its ops must be float32 elementwise ops of :data:`~msc.backend.kernels.activation.EXPR_OPS`
on the region's shape, with scalar constants or tensors of that shape as other operands.
Regions of two ops or more become one ``elementwise`` call, one read of each input and one
write (a clip alone stays on TIR: on 1.2M elements both take ~125 us, as onnxruntime). Residual ``add`` + ``layer_norm`` (post-norm blocks) becomes one
layer-norm call that adds first (kernels/norm.py).
"""

from __future__ import annotations

import math

import numpy as np

from ...kernels.activation import EXPR_OPS, ExprKernel, check_expr
from ...kernels.norm import LayerNormFact, LayerNormKernel, norm_row
from ...runtime.program import Node
from .views import Graph

__all__ = ["fuse_elementwise", "fuse_residual_norm"]

MAX_INPUTS = 4  # tensors one expression reads; more would rarely pay for a new kernel
# Below this many elements a region stays op by op: the plan already runs consecutive TIR
# kernels as one native chain call, and a new expression kernel would cost a compile.
MIN_ELEMENTS = 4096


def _scalar(graph: Graph, vid: int) -> float | None:
    """A float32 scalar constant, or a float prim value (clip's bounds) that is one."""
    c = graph.const(vid)
    if isinstance(c, np.ndarray) and c.size == 1 and c.dtype == np.float32:
        return float(c.reshape(-1)[0])
    if (isinstance(c, float) and getattr(graph.values[vid].sinfo, "dtype", None) == "float32"
            and float(np.float32(c)) == c):
        return c
    return None


def _eligible(graph: Graph, node: Node, shape: tuple) -> bool:
    """An EXPR_OPS call on float32 ``shape`` whose operands are scalars or of that shape."""
    if node.kind != "call" or node.site is None or node.op not in EXPR_OPS:
        return False
    out = graph.values[node.out].sinfo
    if getattr(out, "dtype", None) != "float32" or graph.shape(node.out) != shape:
        return False
    if EXPR_OPS[node.op][0] != len(node.ins):
        return False
    for i, vid in enumerate(node.ins):
        scalar = _scalar(graph, vid)
        if scalar is None and (graph.const(vid) is not None or graph.shape(vid) != shape
                               or graph.values[vid].sinfo.dtype != "float32"):
            return False
        if (node.op == "power" and i == 1 or node.op == "clip" and i > 0) and scalar is None:
            return False
    return True


def _region(graph: Graph, root: Node, shape: tuple, taken: set) -> list:
    region = [root]
    members = {id(root)}
    grew = True
    while grew:
        grew = False
        for node in list(region):
            for vid in node.ins:
                producer = graph.producer.get(vid)
                if (producer is None or id(producer) in members or id(producer) in taken
                        or not _eligible(graph, producer, shape) or vid == graph.program.result):
                    continue
                if all(id(user) in members for user in graph.users.get(vid, ())):
                    region.append(producer)
                    members.add(id(producer))
                    grew = True
    return region


def _expression(graph: Graph, node: Node, members: set, inputs: list) -> tuple:
    operands = []
    for vid in node.ins:
        producer = graph.producer.get(vid)
        scalar = _scalar(graph, vid)
        if producer is not None and id(producer) in members:
            operands.append(_expression(graph, producer, members, inputs))
        elif scalar is not None:
            operands.append(("const", scalar))
        else:
            if vid not in inputs:
                inputs.append(vid)
            operands.append(("in", inputs.index(vid)))
    return (node.op, *operands)


def fuse_elementwise(graph: Graph) -> int:
    """Replace every region of two or more elementwise ops by one expression call."""
    taken, count = set(), 0
    for root in graph.nodes(reverse=True):
        shape = graph.shape(root.out)
        if id(root) in taken or shape is None or not _eligible(graph, root, shape) or (
                math.prod(shape) < MIN_ELEMENTS):
            continue
        region = _region(graph, root, shape, taken)
        if len(region) < 2:
            continue
        inputs: list = []
        expr = _expression(graph, root, {id(n) for n in region}, inputs)
        if not check_expr(expr) or len(inputs) > MAX_INPUTS:
            continue
        taken.update(id(n) for n in region)
        kernel = ExprKernel(expr, shape, op=f"elementwise ({root.name})")
        graph.replace(root.out, inputs, kernel, "elementwise", root.name)
        count += 1
    return count


def fuse_residual_norm(graph: Graph) -> int:
    """``layer_norm(a + b)`` with the sum used nowhere else: one call adding, then norming."""
    fact, count = LayerNormFact(), 0
    for node in graph.nodes():
        if node.kind != "call" or node.op != "nn.layer_norm" or not fact.match(node.site):
            continue
        x = node.ins[0]
        add = graph.call(x, "add")
        shape = graph.shape(x)
        if add is None or not graph.single_use(x) or any(
                graph.shape(v) != shape or graph.const(v) is not None
                or graph.values[v].sinfo.dtype != "float32" for v in add.ins):
            continue
        base = fact.make(node.site)
        kernel = LayerNormKernel(shape, norm_row(node.site), base.gamma, base.beta,
                                 base.eps.value, residual=True, op=f"add+layer_norm ({node.name})")
        graph.replace(node.out, add.ins, kernel, "add+layer_norm", node.name,
                      dps=(node.site.out,))
        count += 1
    return count
