"""A Reshape to a shape given at run time, back to ``Reshape(x, shape)``: the importer resolves
ONNX's 0 (copy the input's dim, unless allowzero) and -1 (the dim left over) itself
(``frontends/onnx/converters_manipulate.py``), spelled exactly as

    t = shape                                   (allowzero=1)
    t = Where(Equal(shape, 0), Slice(Cast(Shape(x)), [0], [n]), shape)   (allowzero=0)
    hole = Equal(t, -1);  known = ReduceProd(Where(hole, 1, t))
    Reshape[allowzero=1](x, Where(hole, floor_divide(Size(x), known), t))

with ``floor_divide(a, b)`` as ``Div(Sub(a, Mod(a, d)), d)``, ``d = Where(Equal(b, 0), 1, b)``
(the -1 step may be absent, Reshape then infers it itself; the own dims padded with zeros
when the shape is longer than x's rank; an identity ``Gather`` of the target).
For every shape ONNX's Reshape accepts, the dims computed are the ones it computes itself;
anything else stays spelled out.
"""

from __future__ import annotations

from ..node import OnnxNode
from .walk import Walk

__all__ = ["fold_runtime_reshape"]


def fold_runtime_reshape(w: Walk) -> None:
    for node in w.nodes():
        if node.op_type == "Reshape" and not node.domain and \
                node.attrs.get("allowzero") == 1:
            _reshape_at(w, node)


def _op(w: Walk, value: str, op_type: str, arity: int) -> OnnxNode | None:
    node = w.made.get(value)
    if node is None or node.op_type != op_type or node.domain or \
            len(node.inputs) != arity:
        return None
    return node


def _is(w: Walk, value: str, number: int) -> bool:
    data = w.const(value)
    return data is not None and data.size == 1 and data.dtype.kind in "iu" and \
        int(data.reshape(-1)[0]) == number


def _floor_divide(w: Walk, value: str, x: str, known: str) -> bool:
    """``value`` is floor_divide(Size(x), known) as the writer spells it."""
    div = _op(w, value, "Div", 2)
    sub = div and _op(w, div.inputs[0], "Sub", 2)
    mod = sub and _op(w, sub.inputs[1], "Mod", 2)
    size = sub and _op(w, sub.inputs[0], "Size", 1)
    guard = div and _op(w, div.inputs[1], "Where", 3)
    zero = guard and _op(w, guard.inputs[0], "Equal", 2)
    return bool(mod and size and zero) and size.inputs[0] == x and \
        mod.inputs == [sub.inputs[0], div.inputs[1]] and \
        mod.attrs.get("fmod", 0) == 0 and zero.inputs[0] == known and \
        _is(w, zero.inputs[1], 0) and _is(w, guard.inputs[1], 1) and \
        guard.inputs[2] == known


def _copied_zeros(w: Walk, t: str, x: str) -> str | None:
    """``shape`` of ``Where(Equal(shape, 0), Slice(Cast(Shape(x)), [0], [n]), shape)``."""
    where = _op(w, t, "Where", 3)
    equal = where and _op(w, where.inputs[0], "Equal", 2)
    cut = where and _op(w, where.inputs[1], "Slice", 5)
    shape = where and where.inputs[2]
    length = shape and w.shape(shape)
    rank = w.shape(x)
    if not (equal and cut and length and rank is not None):
        return None
    own = cut.inputs[0]
    if length[0] > len(rank):  # the importer pads the own dims with zeros (0 stays 0)
        pad = _op(w, own, "Concat", 2)
        zeros = pad and w.const(pad.inputs[1])
        if zeros is None or zeros.shape != (length[0] - len(rank),) or zeros.any():
            return None
        own = pad.inputs[0]
    cast = _op(w, own, "Cast", 1)
    dims = cast and _op(w, cast.inputs[0], "Shape", 1)
    if not dims or dims.inputs[0] != x or dims.attrs or \
            cast.attrs.get("to") != 7 or equal.inputs[0] != shape or \
            not _is(w, equal.inputs[1], 0):
        return None
    starts, ends, axes, steps = (w.const(v) for v in cut.inputs[1:])
    if any(a is None or a.size != 1 for a in (starts, ends, axes, steps)) or \
            [int(a.reshape(-1)[0]) for a in (starts, ends, axes, steps)] != [0, length[0], 0, 1]:
        return None
    return shape


def _reshape_at(w: Walk, node: OnnxNode) -> None:
    x, target = node.inputs[0], _whole(w, node.inputs[1])
    t = _resolved_hole(w, target, x) or target  # without it, the Reshape infers -1 itself
    shape, allowzero = _copied_zeros(w, t, x), 0
    if shape is None:
        shape, allowzero = t, 1
    length = w.shape(shape)
    if shape == node.inputs[1] or w.dtypes.get(shape) != "int64" or not length or \
            len(length) != 1:
        return
    w.rewrite(node, inputs=[x, shape], attrs={"allowzero": allowzero})


def _whole(w: Walk, value: str) -> str:
    """``v`` of ``Gather(v, [0, 1, ..., n - 1])`` over all of a 1-D ``v``, else ``value``."""
    gather = _op(w, value, "Gather", 2)
    index = gather and w.const(gather.inputs[1])
    shape = gather and w.shape(gather.inputs[0])
    if index is None or not shape or len(shape) != 1 or gather.attrs.get("axis", 0) or \
            index.tolist() != list(range(shape[0])):
        return value
    return gather.inputs[0]


def _resolved_hole(w: Walk, target: str, x: str) -> str | None:
    """``t`` of ``Where(hole, floor_divide(Size(x), known), t)`` (the -1 filled in)."""
    last = _op(w, target, "Where", 3)
    hole = last and _op(w, last.inputs[0], "Equal", 2)
    t = hole and hole.inputs[0]
    prod = last and _op(w, _floor_input(w, last.inputs[1]) or "", "ReduceProd", 1)
    filled = prod and _op(w, prod.inputs[0], "Where", 3)
    if not (hole and prod and filled) or last.inputs[2] != t or \
            not _is(w, hole.inputs[1], -1) or prod.attrs.get("keepdims", 1) != 0 or \
            filled.inputs != [hole.outputs[0], filled.inputs[1], t] or \
            not _is(w, filled.inputs[1], 1) or \
            not _floor_divide(w, last.inputs[1], x, prod.outputs[0]):
        return None
    return t


def _floor_input(w: Walk, value: str) -> str | None:
    """The divisor ``b`` of the floor_divide making ``value``."""
    div = _op(w, value, "Div", 2)
    guard = div and _op(w, div.inputs[1], "Where", 3)
    return guard.inputs[2] if guard else None
