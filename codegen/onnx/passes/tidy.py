"""Small clean-ups of a written ONNX node list, so that a model read into msc comes back no
larger than it went in: importers spell out what ONNX ops do implicitly (negative indices
wrapped by hand, a layout permuted there and back), and those spellings fold away here.

Each rule works on the one graph of the pipeline (``passes/pipeline.py`` runs them in order)
and keeps the graph outputs; what they leave unread is dropped as dead."""

from __future__ import annotations

import numpy as np

from ..node import OnnxNode
from .forms import scalar_const
from .walk import Walk

__all__ = ["drop_dead", "fold_gemm", "fold_transposes", "unwrap_indices"]

# Ops whose index input (position 1) takes negative indices as counted from the end.
_NEGATIVE_OK = {"Gather", "GatherElements", "ScatterElements"}


def _is_const(consts: dict, value: str, test) -> bool:
    data = consts.get(value)
    return data is not None and data.size == 1 and bool(test(np.asarray(data).reshape(-1)[0]))


def _wraps(reader: OnnxNode, index: int, size, shapes: dict) -> bool:
    """Whether adding ``size`` to a negative index is what ``reader`` does itself."""
    shape = shapes.get(reader.inputs[0])
    axis = reader.attrs.get("axis", 0)
    return index == 1 and shape is not None and shape[axis] == size


def unwrap_indices(w: Walk) -> None:
    """``Where(Less(i, 0), Add(i, n), i)`` read only as an index by ops that count negative
    indices from the end (along an axis of size n): the ops read ``i`` itself."""
    made, users, consts, shapes = w.made, w.graph.slots, w.consts, w.shapes
    for node in w.nodes():
        if node.op_type != "Where" or len(node.inputs) != 3:
            continue
        cond, wrapped, index = node.inputs
        less, add = made.get(cond), made.get(wrapped)
        if not (less and add and less.op_type == "Less" and add.op_type == "Add"):
            continue
        if less.inputs[0] != index or not _is_const(consts, less.inputs[1],
                                                       lambda v: v == 0):
            continue
        if index not in add.inputs:
            continue
        size = consts.get(add.inputs[1 - add.inputs.index(index)])
        if size is None or size.size != 1:
            continue
        size = int(np.asarray(size).reshape(-1)[0])
        readers = users.get(node.outputs[0], [])
        if readers and all(n.op_type in _NEGATIVE_OK and _wraps(n, i, size, shapes)
                           for n, i in readers):
            for reader, i in list(readers):
                w.graph.set_input(reader, i, index)


def fold_transposes(w: Walk) -> None:
    """``Transpose(Transpose(x, p), q)`` -> one Transpose (none when the two cancel)."""
    for node in w.nodes():
        if node.op_type != "Transpose":
            continue
        inner = w.made.get(node.inputs[0])
        if inner is None or inner.op_type != "Transpose":
            continue
        p, q = inner.attrs["perm"], node.attrs["perm"]
        w.rewrite(node, inputs=inner.inputs, attrs={"perm": [p[a] for a in q]})
    for node in w.nodes():  # an identity Transpose: its readers read its input
        perm = node.attrs.get("perm") if node.op_type == "Transpose" else None
        if perm is not None and perm == sorted(perm) and node.outputs[0] not in w.keep:
            w.graph.replace_uses(node.outputs[0], node.inputs[0])


def _shape(value: str, consts: dict, shapes: dict):
    if value in consts:
        return list(np.shape(consts[value]))
    return shapes.get(value)


_GEMM_TYPES = {"float16", "float32", "float64", "int32", "int64", "uint32", "uint64"}


def _product_shape(product: OnnxNode, consts: dict, shapes: dict):
    """[M, N] of a 2-D MatMul / Gemm (its trans flags read), else None."""
    a, b = (_shape(v, consts, shapes) for v in product.inputs[:2])
    if a is None or b is None or len(a) != 2 or len(b) != 2:
        return None
    attrs = product.attrs
    return [a[1] if attrs.get("transA") else a[0], b[0] if attrs.get("transB") else b[1]]


def _scaled(value: str, made: dict, users: dict, consts: dict, keep: set):
    """(c, beta): ``Mul(c, s)`` of a constant scalar s read only here, else (value, 1)."""
    mul = made.get(value)
    if mul is None or mul.op_type != "Mul" or value in keep or len(users[value]) != 1:
        return value, 1.0
    for i in (0, 1):
        scale = scalar_const(consts, mul.inputs[1 - i])
        if scale is not None:
            return mul.inputs[i], scale
    return value, 1.0


def fold_gemm(w: Walk) -> None:
    """``Add(MatMul(a, b), c)`` on 2-D a, b (of a type Gemm takes), or of a Gemm without C,
    with c broadcast to the product: one Gemm (a constant factor of c is its beta; the
    product left unread, dropped as dead)."""
    made, users, consts, keep = w.made, w.graph.slots, w.consts, w.keep
    shapes, dtypes = w.shapes, w.dtypes
    for node in w.nodes():
        if node.op_type != "Add":
            continue
        for side in (0, 1):
            product = made.get(node.inputs[side])
            if product is None or product.op_type not in ("MatMul", "Gemm") or \
                    product.domain or len(product.inputs) != 2:
                continue
            out = product.outputs[0]
            dims = _product_shape(product, consts, shapes)
            c, beta = _scaled(node.inputs[1 - side], made, users, consts, keep)
            c_shape = _shape(c, consts, shapes)
            if dims is None or c_shape is None or dtypes.get(out) not in _GEMM_TYPES or \
                    out in keep or len(users.get(out, [])) != 1 or len(c_shape) > 2:
                continue
            try:
                if list(np.broadcast_shapes(tuple(c_shape), tuple(dims))) != dims:
                    continue
            except ValueError:
                continue
            attrs = dict(product.attrs) if product.op_type == "Gemm" else {}
            if beta != 1.0:
                attrs["beta"] = beta
            w.rewrite(node, op_type="Gemm", attrs=attrs, inputs=[*product.inputs, c])
            break


def drop_dead(w: Walk) -> None:
    """Nodes whose outputs nobody reads and the graph does not return go."""
    w.graph.drop_dead()
