"""Re-fusions of single ONNX ops that importers spell out, on the pipeline's graph (see
codegen/onnx/passes/pipeline.py). Each rule starts at the node that ends the spelling and walks
back through single-use values; it rewrites that node into the one op and drops the rest:

- ``Min(Max(x, lo), hi)`` with scalar bounds -> ``Clip``;
- ``Sub(n - 1, ArgMax(flip(x)))`` -> ``ArgMax`` / ``ArgMin`` with ``select_last_index``;
- ``flip(CumSum(flip(x)))`` -> ``CumSum`` / ``CumProd`` with ``reverse``;
- ``ReduceSum(Abs(x))`` -> ``ReduceL1``, ``Sqrt(ReduceSum(x * x))`` -> ``ReduceL2``,
  ``ReduceSum(x * x)`` -> ``ReduceSumSquare``, ``Log(ReduceSum(x))`` -> ``ReduceLogSum``;
- ``OneHot(ArgMax(x))`` over the whole axis -> ``Hardmax``;
- the Where / Exp spelling of ``Elu`` and the Relu / Min spelling of ``Celu``;
- ``Pow(AveragePool(Pow(Abs(x), p)) * k, 1 / p)`` -> ``LpPool``;
- ``Pow(x, Cast(y))`` of an integer exponent -> ``Pow(x, y)``;
- ``Gather(x, Squeeze(NonZero(c)))`` -> ``Compress``;
- ``Cast(Clip(x, -M, M))`` to a float8 type whose largest value is M -> a saturating ``Cast``;
- ``Reshape(Gather(Reshape(k, [1]), 0), [])`` of a scalar ``k`` -> ``k``.
"""

from __future__ import annotations

import numpy as np

from ..node import OnnxNode
from .walk import Walk

__all__ = ["Walk", "fold_single_ops"]

_FLOAT8 = {17: "float8_e4m3fn", 18: "float8_e4m3fnuz", 19: "float8_e5m2", 20: "float8_e5m2fnuz"}


def _flip_axis(w: Walk, node: OnnxNode | None) -> int | None:
    """The axis a Slice reverses whole (starts -1, ends past the front, step -1), else None."""
    if node is None or node.op_type != "Slice" or len(node.inputs) != 5:
        return None
    starts, ends, axes, steps = (w.const(v) for v in node.inputs[1:])
    shape = w.shape(node.inputs[0])
    if any(a is None or a.size != 1 for a in (starts, ends, axes, steps)) or shape is None:
        return None
    axis = int(axes.reshape(-1)[0]) % len(shape)
    whole = shape[axis] >= 0 and int(ends.reshape(-1)[0]) < -shape[axis]
    return axis if int(starts.reshape(-1)[0]) == -1 and int(steps.reshape(-1)[0]) == -1 \
        and whole else None


def _clip(w: Walk, node: OnnxNode) -> None:
    if len(node.inputs) != 2:
        return
    inner = w.back(node.inputs[0], "Max")
    if inner is None or len(inner.inputs) != 2:
        return
    x, lo, hi = inner.inputs[0], inner.inputs[1], node.inputs[1]
    if any(w.shape(v) != [] for v in (lo, hi)) or w.shape(x) is None:
        return
    w.rewrite(node, [inner], op_type="Clip", inputs=[x, lo, hi])


def _arg_last(w: Walk, node: OnnxNode) -> None:
    arg = next((w.back(node.inputs[1], op) for op in ("ArgMax", "ArgMin")
                if w.back(node.inputs[1], op)), None)
    flip = arg and w.made.get(arg.inputs[0])
    axis = arg and _flip_axis(w, flip)
    if axis is None or arg.attrs.get("select_last_index", 0) or \
            w.back(flip.outputs[0], "Slice") is None:
        return
    shape = w.shape(flip.inputs[0])
    last, first = w.scalar(node.inputs[0]), w.const(node.inputs[0])
    rank = len(shape) - (0 if arg.attrs.get("keepdims", 1) else 1)
    if arg.attrs.get("axis", 0) % len(shape) != axis or last != shape[axis] - 1 or \
            first.ndim > rank:
        return
    w.rewrite(node, [flip, arg], op_type=arg.op_type, inputs=[flip.inputs[0]],
              attrs={**arg.attrs, "select_last_index": 1})


def _reverse_scan(w: Walk, node: OnnxNode) -> None:
    axis = _flip_axis(w, node)
    scan = axis is not None and next(
        (w.back(node.inputs[0], op) for op in ("CumSum", "CumProd")
         if w.back(node.inputs[0], op)), None)
    flip = scan and w.back(scan.inputs[0], "Slice")
    if not flip or _flip_axis(w, flip) != axis or scan.attrs.get("reverse", 0) or \
            w.scalar(scan.inputs[1]) is None:
        return
    if int(w.scalar(scan.inputs[1])) % len(w.shape(flip.inputs[0])) != axis:
        return
    w.rewrite(node, [flip, scan], op_type=scan.op_type, inputs=[flip.inputs[0], scan.inputs[1]],
              attrs={**scan.attrs, "reverse": 1})


def _squared(w: Walk, value: str) -> OnnxNode | None:
    mul = w.back(value, "Mul")
    return mul if mul is not None and len(set(mul.inputs)) == 1 else None


def _reduce_sum(w: Walk, node: OnnxNode) -> None:
    """ReduceL1 / ReduceSumSquare at the ReduceSum (ReduceL2 and ReduceLogSum end later)."""
    if any(n.op_type in ("Sqrt", "Log") for n in w.users.get(node.outputs[0], [])):
        return
    inner = w.back(node.inputs[0], "Abs") or _squared(w, node.inputs[0])
    form = inner and _reduce_form(w, [inner.inputs[0], *node.inputs[1:]], node.attrs)
    if form:
        op = "ReduceL1" if inner.op_type == "Abs" else "ReduceSumSquare"
        w.rewrite(node, [inner], op_type=op, inputs=form[0], attrs=form[1])


def _reduce_form(w: Walk, inputs: list[str], attrs: dict) -> tuple | None:
    """(inputs, attrs) of a Reduce* other than ReduceSum: axes as an attr, and no
    noop_with_empty_axes, before opset 18."""
    if w.opset >= 18:
        return inputs, dict(attrs)
    if attrs.get("noop_with_empty_axes", 0):
        return None
    attrs = {k: v for k, v in attrs.items() if k != "noop_with_empty_axes"}
    if len(inputs) < 2 or not inputs[1]:
        return inputs[:1], attrs
    axes = w.const(inputs[1])
    if axes is None:
        return None
    return inputs[:1], {**attrs, "axes": [int(a) for a in axes.reshape(-1)]}


def _reduce_after(op: str, squared: bool):
    def rule(w: Walk, node: OnnxNode) -> None:
        total = w.back(node.inputs[0], "ReduceSum")
        inner = total and (_squared(w, total.inputs[0]) if squared else total)
        form = inner and _reduce_form(w, [inner.inputs[0], *total.inputs[1:]],
                                      total.attrs)
        if not form:
            return
        w.rewrite(node, [total, inner], op_type=op, inputs=form[0], attrs=form[1])
    return rule


def _hardmax(w: Walk, node: OnnxNode) -> None:
    arg = w.back(node.inputs[0], "ArgMax")
    depth, values = w.scalar(node.inputs[1]), w.const(node.inputs[2])
    shape = arg and w.shape(arg.inputs[0])
    if not shape or depth is None or values is None or \
            values.reshape(-1).tolist() != [0, 1] or arg.attrs.get("keepdims", 1) or \
            arg.attrs.get("select_last_index", 0):
        return
    axis = arg.attrs.get("axis", 0) % len(shape)
    dtype = w.dtypes.get(arg.inputs[0])
    if node.attrs.get("axis", -1) % len(shape) != axis or depth != shape[axis] or \
            dtype not in ("float16", "float32", "float64") or values.dtype.name != dtype:
        return
    w.rewrite(node, [arg], op_type="Hardmax", inputs=[arg.inputs[0]], attrs={"axis": axis})


def _elu(w: Walk, node: OnnxNode) -> None:
    test = w.back(node.inputs[0], "Greater")
    scaled = w.back(node.inputs[2], "Mul")
    minus = scaled and w.back(scaled.inputs[0], "Sub")
    exp = minus and w.back(minus.inputs[0], "Exp")
    if not exp or test is None:
        return
    x, alpha = node.inputs[1], w.scalar(scaled.inputs[1])
    if test.inputs[0] != x or exp.inputs[0] != x or w.scalar(test.inputs[1]) != 0 or \
            w.scalar(minus.inputs[1]) != 1 or alpha is None or \
            w.dtypes.get(x) not in ("float16", "float32", "float64"):
        return
    w.rewrite(node, [test, scaled, minus, exp], op_type="Elu", inputs=[x], attrs={"alpha": alpha})


def _celu(w: Walk, node: OnnxNode) -> None:
    relu, low = (w.back(v, op) for v, op in zip(node.inputs, ("Relu", "Min")))
    scaled = low and w.back(low.inputs[1], "Mul")
    minus = scaled and w.back(scaled.inputs[0], "Sub")
    exp = minus and w.back(minus.inputs[0], "Exp")
    shrunk = exp and w.back(exp.inputs[0], "Mul")
    if not shrunk or relu is None:
        return
    x, alpha = relu.inputs[0], w.scalar(scaled.inputs[1])
    inv = w.scalar(shrunk.inputs[1])
    if shrunk.inputs[0] != x or alpha is None or inv is None or \
            np.float32(inv) != np.float32(1 / alpha) or w.scalar(low.inputs[0]) != 0 or \
            w.scalar(minus.inputs[1]) != 1 or w.dtypes.get(x) != "float32":
        return
    w.rewrite(node, [relu, low, scaled, minus, exp, shrunk], op_type="Celu", inputs=[x],
              attrs={"alpha": alpha})


def _lp_pool(w: Walk, node: OnnxNode) -> None:
    scaled = w.back(node.inputs[0], "Mul")
    pool = scaled and w.back(scaled.inputs[0], "AveragePool")
    power = pool and w.back(pool.inputs[0], "Pow")
    mag = power and w.back(power.inputs[0], "Abs")
    if not mag:
        return
    p, inv, k = (w.scalar(v) for v in (power.inputs[1], node.inputs[1],
                                       scaled.inputs[1]))
    attrs = pool.attrs
    if p is None or p != int(p) or p < 1 or inv is None or np.float32(inv) != np.float32(1 / p) \
            or k != float(np.prod(attrs.get("kernel_shape", [0]))) or \
            attrs.get("count_include_pad", 0) != 1 or attrs.get("ceil_mode", 0):
        return
    kept = {a: v for a, v in attrs.items() if a in ("kernel_shape", "strides", "pads",
                                                    "auto_pad", "dilations")}
    w.rewrite(node, [scaled, pool, power, mag], op_type="LpPool", inputs=[mag.inputs[0]],
              attrs={**kept, "p": int(p)})


def _pow_int(w: Walk, node: OnnxNode) -> None:
    cast = w.back(node.inputs[1], "Cast")
    if cast is not None and w.dtypes.get(cast.inputs[0]) in ("int32", "int64") and \
            cast.attrs.get("to") in (1, 11) and \
            w.dtypes.get(node.inputs[0]) in ("float32", "float64"):
        w.rewrite(node, [cast], inputs=[node.inputs[0], cast.inputs[0]])


def _compress(w: Walk, node: OnnxNode) -> None:
    squeeze = w.back(node.inputs[1], "Squeeze")
    nonzero = squeeze and w.back(squeeze.inputs[0], "NonZero")
    axes = squeeze and len(squeeze.inputs) > 1 and w.const(squeeze.inputs[1])
    if not nonzero or axes is None or axes.reshape(-1).tolist() != [0] or \
            w.shape(nonzero.inputs[0]) is None or len(w.shape(nonzero.inputs[0])) != 1 \
            or w.dtypes.get(nonzero.inputs[0]) != "bool":
        return
    w.rewrite(node, [squeeze, nonzero], op_type="Compress",
              inputs=[node.inputs[0], nonzero.inputs[0]], attrs={"axis": node.attrs.get("axis", 0)})


def _saturating_cast(w: Walk, node: OnnxNode) -> None:
    clip = w.back(node.inputs[0], "Clip")
    to = node.attrs.get("to")
    if clip is None or to not in _FLOAT8 or node.attrs.get("saturate", 1) != 0 or \
            len(clip.inputs) != 3:
        return
    import ml_dtypes

    top = float(ml_dtypes.finfo(getattr(ml_dtypes, _FLOAT8[to])).max)
    if w.scalar(clip.inputs[1]) != -top or w.scalar(clip.inputs[2]) != top:
        return
    w.rewrite(node, [clip], inputs=[clip.inputs[0]], attrs={"to": to})


def _scalar_unwrap(w: Walk, node: OnnxNode) -> None:
    """Reshape(Gather(Reshape(k, [1]), [0]), []) -> its readers read k."""
    gather = w.back(node.inputs[0], "Gather")
    wrap = gather and w.back(gather.inputs[0], "Reshape")
    target, index = w.const(node.inputs[1]), gather and w.const(gather.inputs[1])
    if not wrap or target is None or target.size != 0 or index is None or \
            index.reshape(-1).tolist() != [0] or w.shape(wrap.inputs[0]) != [] or \
            node.outputs[0] in w.keep:
        return
    w.graph.replace_uses(node.outputs[0], wrap.inputs[0])
    w.graph.remove(node, gather, wrap)


# op type of the node that ends a spelling -> its rules
RULES = {
    "Min": (_clip,), "Sub": (_arg_last,), "Slice": (_reverse_scan,),
    "ReduceSum": (_reduce_sum,), "Sqrt": (_reduce_after("ReduceL2", True),),
    "Log": (_reduce_after("ReduceLogSum", False),), "OneHot": (_hardmax,),
    "Where": (_elu,), "Add": (_celu,), "Pow": (_lp_pool, _pow_int), "Gather": (_compress,),
    "Cast": (_saturating_cast,), "Reshape": (_scalar_unwrap,),
}


def fold_single_ops(w: Walk, rules: dict | None = None) -> None:
    """``rules`` (op type of the last node -> rules; default RULES) applied in node order."""
    for node in w.nodes():
        if node.domain:
            continue
        for rule in (RULES if rules is None else rules).get(node.op_type, ()):
            op_type = node.op_type
            rule(w, node)
            if node.op_type != op_type or node not in w.graph:
                break
