"""``layout_transform`` as ONNX: any index map over a static shape is one Gather.

The index map is evaluated at export time on every input index (numpy), which gives, for
each output element, the input element it holds or the pad value. The model gathers from the
flattened input (with the pad value appended) by that constant table, shaped as the output::

    layout_transform(x, lambda n, c: (n, c // 4, c % 4))   # x: [2, 6] -> [2, 2, 4]
        -> Gather(Concat(Reshape(x, [-1]), [pad]), table[2, 2, 4])
"""

from __future__ import annotations

import ast

import numpy as np

from ..attrs import index_map
from .rows import Row

__all__ = ["LAYOUT"]

_BINOPS = {ast.Add: np.add, ast.Sub: np.subtract, ast.Mult: np.multiply,
           ast.FloorDiv: np.floor_divide, ast.Mod: np.mod}


def _evaluate(e, env: dict):
    if isinstance(e, ast.Name):
        return env[e.id]
    if isinstance(e, ast.Constant):
        return e.value
    if isinstance(e, ast.UnaryOp):
        return -_evaluate(e.operand, env)
    return _BINOPS[type(e.op)](_evaluate(e.left, env), _evaluate(e.right, env))


def _table(mapping: ast.Lambda, shape: list[int], out_shape: list[int]) -> np.ndarray:
    """Output element -> flat input index (``size``, one past the input: the pad value)."""
    names = [a.arg for a in mapping.args.args]
    env = dict(zip(names, np.indices(shape, dtype=np.int64)))
    finals = [np.broadcast_to(_evaluate(e, env), shape) for e in mapping.body.elts]
    size = int(np.prod(shape, dtype=np.int64))
    table = np.full(int(np.prod(out_shape, dtype=np.int64)), size, dtype=np.int64)
    table[np.ravel_multi_index(finals, out_shape).reshape(-1)] = np.arange(size)
    return table.reshape(out_shape)


def _layout_transform(ctx):
    data, out = ctx.in_tensor(0), ctx.out
    if min(list(data.shape) + list(out.shape) + [0]) < 0:
        raise ctx.fail("a layout_transform over dynamic dims (the index table is built at "
                       "export time)")
    table = _table(index_map(ctx.node.attrs.get("index_map", "")), data.shape, out.shape)
    flat = ctx.emit("Reshape", [ctx.input(0), ctx.ints([-1], "flat")])
    if (table == data.get_size()).any():  # padded elements read the pad value
        pad = ctx.attr("pad_value")
        pad = ctx.const(np.asarray([pad or 0], dtype=out.dtype), "pad")
        flat = ctx.emit("Concat", [flat, pad], axis=0)
    return ctx.emit("Gather", [flat, ctx.const(table, "table")], axis=0)


LAYOUT = {"layout_transform": Row(_layout_transform)}
