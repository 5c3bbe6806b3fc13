"""Reductions, scans, linear algebra, windows and losses."""

from __future__ import annotations

import math

from msc import relax
from msc.tir import expr as tir

from .common import call, norm_axis, scalar
from .context import Context, OnnxNode
from .converters_manipulate import axes_arg, axes_input, need_const
from .dtypes import relax_dtype
from .runtime_axes import ReductionView, axes_at_runtime

# --------------------------------------------------------------------------------------------
# Reductions: ONNX op -> (Relax reduction, elementwise op before it, op after it).

REDUCE = {
    "ReduceSum": ("sum", None, None), "ReduceMean": ("mean", None, None),
    "ReduceMax": ("max", None, None), "ReduceMin": ("min", None, None),
    "ReduceProd": ("prod", None, None), "ReduceL1": ("sum", "abs", None),
    "ReduceL2": ("sum", "square", "sqrt"), "ReduceSumSquare": ("sum", "square", None),
    "ReduceLogSum": ("sum", None, "log"),
}


def reduce(op_type: str):
    reduction, before, after = REDUCE[op_type]

    def convert(g: Context, node: OnnxNode):
        x = node.inputs[0]
        y = x if before is None else g.emit(call(before, x))
        y = _over_axes(g, node, y, lambda v, axes, keep: g.emit(call(reduction, v, axes, keep)))
        return y if after is None or y is x else g.emit(call(after, y))

    convert.__name__ = f"convert_{op_type}"
    return convert


def _over_axes(g: Context, node: OnnxNode, x, fn):
    """``fn(view, axes, keepdims)`` applied over the node's axes (constant, or known only at
    run time: then on the pair view of runtime_axes.ReductionView); ``x`` when the axes are
    empty and noop_with_empty_axes is set."""
    keep = bool(node.attrs["keepdims"])
    if axes_input(g, node) is not None:
        view = ReductionView(g, x, axes_at_runtime(g, node, node.inputs[1], g.ndim(x)))
        return view.finish(fn(view.x, view.axes, False), keep)
    axes = _reduce_axes(g, node)
    return x if axes == [] else fn(x, axes, keep)


def _reduce_axes(g: Context, node: OnnxNode):
    """The axes to reduce; [] means none (noop_with_empty_axes), None means all."""
    axes = axes_arg(node, g, 1)
    if axes:
        return [norm_axis(a, g.ndim(node.inputs[0])) for a in axes]
    return [] if node.attrs.get("noop_with_empty_axes") else None


def convert_reduce_log_sum_exp(g: Context, node: OnnxNode):
    return _over_axes(g, node, node.inputs[0], lambda x, axes, keep: _log_sum_exp(g, x, axes,
                                                                                  keep))


def _log_sum_exp(g: Context, x, axes, keep: bool):
    peak = g.emit(call("max", x, axes, True))
    safe = call("where", call("isinf", peak), scalar(g, 0, x), peak)
    total = call("sum", call("exp", call("subtract", x, safe)), axes, keep)
    shift = safe if keep else call("squeeze", safe, axes)
    return g.emit(call("add", call("log", total), shift))


def arg_reduce(op: str):
    def convert(g: Context, node: OnnxNode):
        x = node.inputs[0]
        axis, keep = norm_axis(node.attrs["axis"], g.ndim(x)), bool(node.attrs["keepdims"])
        if not node.attrs.get("select_last_index"):
            return g.emit(call(op, x, axis, keep))
        flipped = call(op, call("flip", x, axis), axis, keep)
        last = relax.const(int(need_const(node, g.shape(x), "the input shape")[axis]) - 1, "int64")
        return g.emit(call("subtract", last, flipped))

    convert.__name__ = f"convert_{op}"
    return convert


def scan(op: str):
    def along(g: Context, node: OnnxNode, x, axis: int):
        reverse = bool(node.attrs["reverse"])
        y = call("flip", x, axis) if reverse else x
        y = call(op, y, axis, None, bool(node.attrs["exclusive"]))
        return g.emit(call("flip", y, axis) if reverse else y)

    def convert(g: Context, node: OnnxNode):
        x, axis = node.inputs[:2]
        if g.ints(axis) is not None:
            return along(g, node, x, norm_axis(g.ints(axis)[0], g.ndim(x)))
        return _pick_axis_at_runtime(g, axis, [along(g, node, x, k) for k in range(g.ndim(x))])

    convert.__name__ = f"convert_{op}"
    return convert


def _pick_axis_at_runtime(g: Context, axis, candidates: list):
    """The candidate for the axis given at run time (shape-preserving ops only: every axis
    is computed, one is selected)."""
    axis = call("reshape", call("astype", axis, "int64"), [])
    rank = relax.const(len(candidates), "int64")
    axis = g.emit(call("where", call("less", axis, relax.const(0, "int64")),
                       call("add", axis, rank), axis))
    out = candidates[-1]
    for k in range(len(candidates) - 2, -1, -1):
        out = g.emit(call("where", call("equal", axis, relax.const(k, "int64")),
                          candidates[k], out))
    return out


def convert_topk_v1(g: Context, node: OnnxNode):
    """TopK-1: k as an attribute."""
    return _topk(g, node, node.inputs[0], node.attrs["k"])


def convert_topk(g: Context, node: OnnxNode):
    """TopK-10+: k as an input; known only at run time, it slices a full sort."""
    x, k = node.inputs[:2]
    if g.ints(k) is not None:
        return _topk(g, node, x, g.ints(k)[0])
    axis = norm_axis(node.attrs["axis"], g.ndim(x))
    size = tir.as_int(need_const(node, g.shape(x), "the input shape")[axis])
    count = need_const(node, g.runtime_ints(k, "k"), "k")[0]
    whole = _topk(g, node, x, need_const(node, size, "the sorted axis' size"))
    return [g.emit(call("strided_slice", y, [axis], [0], [count])) for y in whole]


def _topk(g: Context, node: OnnxNode, x, k: int):
    axis = norm_axis(node.attrs["axis"], g.ndim(x))
    largest = bool(node.attrs.get("largest", 1))
    out = g.emit(call("topk", x, k, axis, "both", largest, "int64"))
    return [g.emit(relax.TupleGetItem(out, i)) for i in range(2)]


# --------------------------------------------------------------------------------------------
# Linear algebra.

def convert_matmul(g: Context, node: OnnxNode):
    return g.emit(call("matmul", *node.inputs[:2]))


def convert_gemm(g: Context, node: OnnxNode):
    a, b, c = node.inputs[:3]
    if node.attrs["transA"]:
        a = call("permute_dims", a, [1, 0])
    if node.attrs["transB"]:
        b = call("permute_dims", b, [1, 0])
    y = g.emit(call("matmul", a, b))
    if node.attrs["alpha"] != 1.0:
        y = g.emit(call("multiply", y, scalar(g, node.attrs["alpha"], y)))
    if c is None:
        return y
    if node.attrs["beta"] != 1.0:
        c = call("multiply", c, scalar(g, node.attrs["beta"], c))
    return g.emit(call("add", y, c))


def convert_einsum(g: Context, node: OnnxNode):
    equation = node.attrs["equation"].replace(" ", "")
    return g.emit(call("einsum", [x for x in node.inputs if x is not None], equation))


# --------------------------------------------------------------------------------------------
# Windows (constants when the size is).

_WINDOWS = {
    "HannWindow": (0.5, 0.5, 0.0),
    "HammingWindow": (25 / 46, 21 / 46, 0.0),
    "BlackmanWindow": (0.42, 0.5, 0.08),
}


def window(op_type: str):
    a0, a1, a2 = _WINDOWS[op_type]

    def convert(g: Context, node: OnnxNode):
        size = need_const(node, g.runtime_ints(node.inputs[0], "size"), "size")[0]
        n = size if node.attrs["periodic"] else size - 1
        phase = call("multiply", call("arange", 0, size, 1, "float64"), _two_pi_over(n))
        w = call("subtract", _f64(a0), call("multiply", _f64(a1), call("cos", phase)))
        if a2:
            twice = call("multiply", phase, _f64(2.0))
            w = call("add", w, call("multiply", _f64(a2), call("cos", twice)))
        return g.emit(call("astype", w, relax_dtype(node.attrs["output_datatype"])))

    convert.__name__ = f"convert_{op_type}"
    return convert


def _f64(value: float) -> relax.Constant:
    return relax.const(value, "float64")


def _two_pi_over(n):
    """2*pi / max(n, 1) as a float64 scalar (n may be symbolic)."""
    if isinstance(n, int):
        return _f64(2 * math.pi / max(n, 1))
    count = call("reshape", call("shape_to_tensor", relax.ShapeExpr([n])), [])
    count = call("maximum", call("astype", count, "float64"), _f64(1.0))
    return call("divide", _f64(2 * math.pi), count)


# --------------------------------------------------------------------------------------------
# Losses.

def _nll(g: Context, node: OnnxNode, log_prob, target, weight):
    ignore = node.attrs.get("ignore_index")
    reduction = node.attrs["reduction"]
    args = [log_prob, target] + ([weight] if weight is not None else [])
    return g.emit(call("nn.nll_loss", *args, reduction=reduction,
                       ignore_index=-100 if ignore is None else ignore))


def convert_nll_loss(g: Context, node: OnnxNode):
    return _nll(g, node, *node.inputs[:3])


def convert_softmax_cross_entropy(g: Context, node: OnnxNode):
    scores, labels, weight = node.inputs[:3]
    log_prob = g.emit(call("nn.log_softmax", scores, 1))
    loss = _nll(g, node, log_prob, labels, weight)
    return [loss, log_prob]


CONVERTERS = {
    **{op: {1: reduce(op)} for op in REDUCE},
    "ReduceLogSumExp": {1: convert_reduce_log_sum_exp},
    "ArgMax": {1: arg_reduce("argmax")}, "ArgMin": {1: arg_reduce("argmin")},
    "TopK": {1: convert_topk_v1, 10: convert_topk},
    "Det": {11: lambda g, node: g.emit(call("det", node.inputs[0]))}, "CumSum": {11: scan("cumsum")},
    "CumProd": {26: scan("cumprod")},
    "MatMul": {1: convert_matmul}, "Gemm": {1: convert_gemm}, "Einsum": {12: convert_einsum},
    **{op: {17: window(op)} for op in _WINDOWS},
    "NegativeLogLikelihoodLoss": {12: convert_nll_loss},
    "SoftmaxCrossEntropyLoss": {12: convert_softmax_cross_entropy},
}
