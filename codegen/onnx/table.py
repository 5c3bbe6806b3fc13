"""The ONNX codegen's rows: one per op of the table, attached as the op fact ``"onnx_codegen"``.

A row writes one joint as ONNX nodes (``codegen/onnx.rows.Row``): ``plain("Relu")`` for a one
to one op, a small function for the rest (ctx: ``codegen/onnx.context.OnnxContext``). This
module holds elementwise, reduction, manipulation, indexing and creation ops; the nn ones,
fused ``msc.*`` joints and QDQ are in ``codegen/onnx/nn.py``::

    load_facts("onnx_codegen")             # imports this module, which attaches the rows
    OPS["nn.relu"].facts["onnx_codegen"]   # Row(...)

Ops with no ONNX form are the known gaps of tests/relax/op/test_op_facts.py.
"""

from __future__ import annotations

import numpy as np

from msc.relax.op.registry import OPS, attach

from .context import onnx_dtype
from .indexing import INDEX, flat
from .integer import integer_operands
from .layout import LAYOUT
from .nbits import NBITS_ROWS
from .nn import NN_ROWS
from .rows import Row, axes_of, axis_of, plain

__all__ = ["ROWS", "attach_rows"]

_INT64_MAX = 2 ** 63 - 1

# --------------------------------------------------------------------------------------------
# Elementwise.

_UNARY = {
    "abs": "Abs", "acos": "Acos", "acosh": "Acosh", "asin": "Asin", "asinh": "Asinh",
    "atan": "Atan", "atanh": "Atanh", "ceil": "Ceil", "cos": "Cos", "cosh": "Cosh",
    "erf": "Erf", "exp": "Exp", "floor": "Floor", "log": "Log", "negative": "Neg",
    "round": "Round", "sigmoid": "Sigmoid", "sign": "Sign", "sin": "Sin", "sinh": "Sinh",
    "sqrt": "Sqrt", "tan": "Tan", "tanh": "Tanh", "logical_not": "Not", "isnan": "IsNaN",
    "isinf": "IsInf",
}
_BINARY = {
    "add": "Add", "subtract": "Sub", "multiply": "Mul", "divide": "Div", "power": "Pow",
    "maximum": "Max", "minimum": "Min", "equal": "Equal", "greater": "Greater",
    "greater_equal": "GreaterOrEqual", "less": "Less", "less_equal": "LessOrEqual",
    "logical_and": "And", "logical_or": "Or", "logical_xor": "Xor", "where": "Where",
}
_BITWISE = {"bitwise_and": ("BitwiseAnd", "And"), "bitwise_or": ("BitwiseOr", "Or"),
            "bitwise_xor": ("BitwiseXor", "Xor"), "bitwise_not": ("BitwiseNot", "Not")}


def _bitwise(op_type: str, logical: str) -> Row:
    """Bitwise ops on ints (opset 18); on bools they are the logical ones (any opset)."""
    def write(ctx):
        if ctx.out.dtype == "bool":
            return ctx.emit(logical, ctx.inputs)
        ctx.need(18, f"{op_type} on {ctx.out.dtype}")
        return ctx.emit(op_type, ctx.inputs)
    return Row(write)


def _is_int(dtype: str) -> bool:
    return dtype.startswith(("int", "uint"))


def _floor_divide(ctx):
    a, b = ctx.inputs
    if not _is_int(ctx.out.dtype):
        return ctx.emit("Floor", [ctx.emit("Div", [a, b])])
    b = _nonzero(ctx, b)
    # a - mod(a, b) (mod with the divisor's sign) is an exact multiple of b
    exact = ctx.emit("Sub", [a, ctx.emit("Mod", [a, b], fmod=0)])
    return ctx.emit("Div", [exact, b])


def _nonzero(ctx, b: str) -> str:
    """An integer divisor with 0 replaced by 1: a division by 0 is undefined (msc's kernels
    give some number, onnxruntime aborts the run), and graphs compute such quotients in
    branches that Where then drops (a Reshape's -1 over an empty tensor)."""
    data = ctx.const_of(b)
    if data is not None and np.all(data != 0):
        return b
    zero = ctx.scalar(0, ctx.in_tensor(1).dtype, "zero")
    one = ctx.scalar(1, ctx.in_tensor(1).dtype, "one")
    return ctx.emit("Where", [ctx.emit("Equal", [b, zero]), one, b])


def _floor_mod(ctx):
    """Mod(fmod=0), the floor form (ints; floats from opset 28, where runtimes take it). Before
    that a float one is fmod plus b where the remainder's sign differs from b's: IEEE's
    answers for infinities too (x mod inf is x or inf by the signs; a - floor(a / b) * b
    would give NaN)."""
    a, b = ctx.inputs
    if _is_int(ctx.out.dtype) or ctx.opset >= 28:
        return ctx.emit("Mod", [a, b], fmod=0)
    rem = ctx.emit("Mod", [a, b], fmod=1)
    # r * b < 0: the signs differ and r != 0 (0 * inf is NaN, not < 0)
    differ = ctx.emit("Less", [ctx.emit("Mul", [rem, b]), ctx.scalar(0, ctx.out.dtype, "zero")])
    return ctx.emit("Where", [differ, ctx.emit("Add", [rem, b]), rem])


def _log_add_exp(ctx):
    a, b = ctx.inputs  # max + log(exp(a - max) + exp(b - max)): no overflow
    top = ctx.emit("Max", [a, b])
    total = ctx.emit("Add", [ctx.emit("Exp", [ctx.emit("Sub", [a, top])]),
                             ctx.emit("Exp", [ctx.emit("Sub", [b, top])])])
    return ctx.emit("Add", [top, ctx.emit("Log", [total])])


def _trunc(ctx):
    x = ctx.input(0)
    return ctx.emit("Mul", [ctx.emit("Sign", [x]), ctx.emit("Floor", [ctx.emit("Abs", [x])])])


def _isfinite(ctx):
    x = ctx.input(0)
    return ctx.emit("Not", [ctx.emit("Or", [ctx.emit("IsInf", [x]), ctx.emit("IsNaN", [x])])])


def _matmul(ctx):
    operands = integer_operands(ctx)
    if operands is not None:  # 8-bit operands widened to int32: exact in MatMulInteger
        return ctx.emit("MatMulInteger", operands)
    out = ctx.emit("MatMul", ctx.inputs)
    return ctx.cast(out, ctx.in_tensor(0).dtype, ctx.attr("out_dtype"))


def _outer(ctx):
    a, b = ctx.inputs
    return ctx.emit("Mul", [ctx.unsqueeze(a, [1]), b])


ELEMENTWISE = {
    **{op: plain(onnx) for op, onnx in _UNARY.items()},
    **{op: plain(onnx) for op, onnx in _BINARY.items()},
    **{op: _bitwise(*names) for op, names in _BITWISE.items()},
    "not_equal": Row(lambda c: c.emit("Not", [c.emit("Equal", c.inputs)])),
    "rsqrt": Row(lambda c: c.emit("Reciprocal", [c.emit("Sqrt", c.inputs)])),
    "square": Row(lambda c: c.emit("Mul", [c.input(0), c.input(0)])),
    "trunc": Row(_trunc), "isfinite": Row(_isfinite),
    "floor_divide": Row(_floor_divide), "floor_mod": Row(_floor_mod),
    "mod": Row(lambda c: c.emit("Mod", c.inputs, fmod=1)),  # truncated, as TVM's mod
    "log_add_exp": Row(_log_add_exp),
    "det": plain("Det", since=11), "matmul": Row(_matmul), "msc.matmul": Row(_matmul), "outer": Row(_outer),
    "einsum": Row(lambda c: c.emit("Einsum", c.inputs, equation=c.attr("subscripts"))),
    "astype": Row(lambda c: c.cast(c.input(0), c.in_tensor(0).dtype, c.attr("dtype"))),
}

# --------------------------------------------------------------------------------------------
# Reductions, scans, sorting.

_REDUCE = {"sum": ("ReduceSum", 13), "mean": ("ReduceMean", 18), "max": ("ReduceMax", 18),
           "min": ("ReduceMin", 18), "prod": ("ReduceProd", 18)}


def _reduce(op_type: str, since: int) -> Row:
    def write(ctx):
        axes = axes_of(ctx.attr("axis"), ctx.in_tensor(0).ndim)
        if axes == []:  # no axis reduced: the value itself
            return ctx.input(0)
        ndim = ctx.in_tensor(0).ndim
        if op_type == "ReduceMean" and ndim > 2 and axes == list(range(2, ndim)) and \
                ctx.in_tensor(0).dtype.startswith("float") and \
                ctx.attr("keepdims"):  # what CNN exporters write (and runtimes sum alike)
            return ctx.emit("GlobalAveragePool", [ctx.input(0)])
        out = ctx.reduce(op_type, ctx.input(0), axes, ctx.attr("keepdims"), since)
        return ctx.cast(out, ctx.in_tensor(0).dtype, ctx.out.dtype)
    return Row(write)


def _variance(std: bool) -> Row:
    def write(ctx):
        x, axes = ctx.input(0), axes_of(ctx.attr("axis"), ctx.in_tensor(0).ndim)
        mean = ctx.reduce("ReduceMean", x, axes, True)
        diff = ctx.emit("Sub", [x, mean])
        var = ctx.reduce("ReduceMean", ctx.emit("Mul", [diff, diff]), axes, ctx.attr("keepdims"))
        return ctx.emit("Sqrt", [var]) if std else var
    return Row(write)


def _arg_reduce(op_type: str) -> Row:
    def write(ctx):
        x, axis = ctx.input(0), ctx.attr("axis")
        keep = ctx.attr("keepdims")
        if axis is None:
            x, axis = flat(ctx, x), 0
        out = ctx.emit(op_type, [x], axis=int(axis), keepdims=int(keep))
        if ctx.attr("axis") is None:
            out = ctx.reshape(out, ctx.out)
        return ctx.cast(out, "int64", ctx.out.dtype)
    return Row(write)


def _cumulative(onnx_op: str):
    """cumsum / cumprod: CumSum / CumProd over the axis, the flat tensor when axis is None."""
    def write(ctx):
        x, axis = ctx.input(0), ctx.attr("axis")
        if axis is None:
            x, axis = flat(ctx, x), 0
        x = ctx.cast(x, ctx.in_tensor(0).dtype, ctx.attr("dtype"))
        return ctx.emit(onnx_op, [x, ctx.ints([axis], "axis")],
                        exclusive=int(ctx.attr("exclusive")))
    return write


def _topk_parts(ctx, k: int, axis: int, largest: bool):
    k_value = ctx.ints([k], "k")
    return ctx.emit("TopK", [ctx.input(0), k_value], n_out=2, axis=axis, largest=int(largest),
                    sorted=1)


def _topk(ctx):
    values, indices = _topk_parts(ctx, ctx.attr("k"), ctx.attr("axis"), ctx.attr("largest"))
    kind = ctx.attr("ret_type")
    if kind == "values":
        return values
    indices = ctx.cast(indices, "int64", ctx.attr("dtype"))
    return indices if kind == "indices" else [values, indices]


def _sort(want_indices: bool) -> Row:
    def write(ctx):
        tensor = ctx.in_tensor(0)
        axis = axis_of(ctx.attr("axis"), tensor.ndim)
        size = tensor.shape[axis]
        if size < 0:
            raise ctx.fail("a sort along a dynamic axis (TopK needs k)")
        values, indices = _topk_parts(ctx, size, axis, ctx.attr("descending"))
        return ctx.cast(indices, "int64", ctx.attr("dtype")) if want_indices else values
    return Row(write)


def _median(ctx):
    """The lower middle value: the last of the (n + 1) // 2 smallest (what TVM and torch
    give)."""
    x, axis, keep = ctx.input(0), ctx.attr("axis"), ctx.attr("keepdims")
    tensor = ctx.in_tensor(0)
    axes = axes_of(axis, tensor.ndim)
    if axes is None:
        x, axis, size = flat(ctx, x), 0, tensor.get_size()
    elif len(axes) == 1:
        axis, size = axes[0], tensor.shape[axes[0]]
    else:
        raise ctx.fail("a median over several axes")
    if size < 0:
        raise ctx.fail("a median along a dynamic axis")
    k = (size - 1) // 2 + 1
    parts = ctx.emit("TopK", [x, ctx.ints([k], "k")], n_out=2, axis=axis, largest=0, sorted=1)
    picked = [ctx.emit("Slice", [p, ctx.ints([k - 1], "start"), ctx.ints([k], "end"),
                                 ctx.ints([axis], "axis")]) for p in parts]
    if axes is None or not keep:
        picked = [ctx.reshape(p, t) for p, t in zip(picked, ctx.node.outputs)]
    return picked[0] if len(ctx.node.outputs) == 1 else picked


REDUCE = {
    "median": Row(_median), "cumprod": Row(_cumulative("CumProd"), since=26),
    **{op: _reduce(*spec) for op, spec in _REDUCE.items()},
    "variance": _variance(False), "std": _variance(True),
    "argmax": _arg_reduce("ArgMax"), "argmin": _arg_reduce("ArgMin"),
    "cumsum": Row(_cumulative("CumSum")), "topk": Row(_topk),
    "sort": _sort(False), "argsort": _sort(True),
    "nonzero": Row(lambda c: c.cast(c.emit("NonZero", c.inputs), "int64", c.out.dtype)),
}

# --------------------------------------------------------------------------------------------
# Manipulation.


def _reshape_dims(ctx, tensor) -> str:
    """The target shape; one dynamic dim is written as -1 (no shape arithmetic needed)."""
    prims = tensor.prims
    dynamic = [i for i, p in enumerate(prims) if not p.lstrip("-").isdigit()] if prims else []
    if len(dynamic) == 1 and 0 not in tensor.shape:
        dims = [int(p) if i not in dynamic else -1 for i, p in enumerate(prims)]
        return ctx.ints(dims, "shape")
    return ctx.dims(tensor)


def _reshape_zeros(ctx, dims: str) -> str:
    """Before ``allowzero`` (opset 14): reshape to the dims with each 0 read as 1, the data
    padded to that size, then sliced to the dims (an empty result when one is 0; no padding
    and a whole slice otherwise)."""
    from onnx import numpy_helper

    ones = ctx.emit("Max", [dims, ctx.ints([1], "one")])
    size = ctx.emit("Reshape", [ctx.emit("Size", [ctx.input(0)]), ctx.ints([1], "one")])
    short = ctx.emit("Sub", [ctx.emit("ReduceProd", [ones], keepdims=1), size])
    zero = numpy_helper.from_array(np.zeros(1, dtype=ctx.in_tensor(0).dtype))
    padded = ctx.emit("Concat", [flat(ctx, ctx.input(0)), ctx.emit(
        "ConstantOfShape", [short], value=zero)], axis=0)
    rank = ctx.out.ndim
    return ctx.emit("Slice", [ctx.emit("Reshape", [padded, ones]), ctx.ints([0] * rank, "starts"),
                              dims, ctx.ints(range(rank), "axes")])


def _reshape(ctx):
    run_time = ctx.prim_values("shape")
    if run_time is not None:  # a 0 read at run time is a 0 (Relax), not "copy" (ONNX)
        if ctx.opset >= 14:
            return ctx.emit("Reshape", [ctx.input(0), run_time], allowzero=1)
        if "-1" in ctx.node.attrs["shape.prims"].split(","):  # inferred: never 0 here
            return ctx.emit("Reshape", [ctx.input(0), run_time])
        return _reshape_zeros(ctx, run_time)
    if ctx.out.shape and all(d < 0 for d in ctx.out.shape) and not ctx.out.prims:
        # dims unknown to the graph: the op's own shape (its -1 is ONNX's -1)
        return ctx.emit("Reshape", [ctx.input(0), ctx.ints(ctx.raw("shape", "ints"), "shape")])
    return ctx.emit("Reshape", [ctx.input(0), _reshape_dims(ctx, ctx.out)])


def _expand_dims(ctx):
    return ctx.unsqueeze(ctx.input(0), sorted(axes_of(ctx.attr("axis"), ctx.out.ndim)))


def _squeeze(ctx):
    tensor = ctx.in_tensor(0)
    axes = axes_of(ctx.attr("axis"), tensor.ndim)
    if axes is None:
        axes = [i for i, d in enumerate(tensor.shape) if d == 1]
    if not axes:
        return ctx.input(0)
    extra = ctx.axes_input(axes, 13)
    if isinstance(extra, list):
        return ctx.emit("Squeeze", [ctx.input(0), *extra])
    return ctx.emit("Squeeze", [ctx.input(0)], **extra)


def _permute(ctx):
    ndim = ctx.in_tensor(0).ndim
    axes = axes_of(ctx.attr("axes"), ndim)
    return ctx.emit("Transpose", [ctx.input(0)], perm=axes if axes is not None
                    else list(range(ndim))[::-1])


def _split(ctx):
    tensor = ctx.in_tensor(0)
    axis = axis_of(ctx.attr("axis"), tensor.ndim)
    sizes = [t.shape[axis] for t in ctx.node.outputs]
    if any(s < 0 for s in sizes):
        raise ctx.fail("a split along a dynamic axis")
    if len(sizes) == 1:
        return [ctx.input(0)]
    return ctx.emit("Split", [ctx.input(0), ctx.ints(sizes, "split")], n_out=len(sizes),
                    axis=axis)


def _stack(ctx):
    axis = axis_of(ctx.attr("axis"), ctx.out.ndim)
    parts = [ctx.unsqueeze(x, [axis]) for x in ctx.inputs]
    return ctx.emit("Concat", parts, axis=axis)


def _clip(ctx):
    dtype = ctx.in_tensor(0).dtype
    low, high = ctx.arg_value("min"), ctx.arg_value("max")
    bounds = [ctx.scalar(v, dtype, k) if v is not None else "" for k, v in (("min", low),
                                                                         ("max", high))]
    while bounds and bounds[-1] == "":
        bounds.pop()
    return ctx.emit("Clip", [ctx.input(0), *bounds])


def _tile(ctx):
    x, reps = ctx.input(0), list(ctx.attr("repeats"))
    ndim = ctx.in_tensor(0).ndim
    if len(reps) > ndim:  # TVM adds leading axes to the data
        x = ctx.unsqueeze(x, list(range(len(reps) - ndim)))
    reps = [1] * (ndim - len(reps)) + reps
    return ctx.emit("Tile", [x, ctx.ints(reps, "repeats")])


def _repeat(ctx):
    x, axis, reps = ctx.input(0), ctx.attr("axis"), int(ctx.attr("repeats"))
    if axis is None:
        x, axis, ndim = flat(ctx, x), 0, 1
    else:
        ndim = ctx.in_tensor(0).ndim
        axis = axis_of(axis, ndim)
    tiles = [1] * (ndim + 1)
    tiles[axis + 1] = reps
    tiled = ctx.emit("Tile", [ctx.unsqueeze(x, [axis + 1]), ctx.ints(tiles, "repeats")])
    return ctx.emit("Reshape", [tiled, _reshape_dims(ctx, ctx.out)])


def _flip(ctx):
    axes = axes_of(ctx.attr("axis"), ctx.in_tensor(0).ndim)
    n = len(axes)
    return ctx.emit("Slice", [ctx.input(0), ctx.ints([-1] * n, "starts"),
                              ctx.ints([-_INT64_MAX] * n, "ends"), ctx.ints(axes, "axes"),
                              ctx.ints([-1] * n, "steps")])


def _broadcast_to(ctx):
    return ctx.emit("Expand", [ctx.input(0), ctx.dims(ctx.out)])


def _collapse_sum(ctx):
    src, out = ctx.in_tensor(0), ctx.out
    lead = src.ndim - out.ndim
    axes = list(range(lead)) + [lead + i for i, d in enumerate(out.shape)
                                if d == 1 and src.shape[lead + i] != 1]
    if any(d < 0 for d in src.shape):
        raise ctx.fail("collapse_sum over dynamic dims")
    summed = ctx.reduce("ReduceSum", ctx.input(0), axes, True, 13) if axes else ctx.input(0)
    return ctx.emit("Reshape", [summed, ctx.dims(out)])


MANIPULATE = {
    "reshape": Row(_reshape), "flatten": Row(lambda c: flat(c, c.input(0))),
    "nn.batch_flatten": Row(lambda c: c.emit("Flatten", c.inputs, axis=1)),
    "expand_dims": Row(_expand_dims), "squeeze": Row(_squeeze),
    "permute_dims": Row(_permute), "concat": Row(lambda c: c.emit(
        "Concat", c.inputs, axis=axis_of(c.attr("axis"), c.out.ndim))),
    "split": Row(_split), "stack": Row(_stack), "clip": Row(_clip),
    "tile": Row(_tile), "repeat": Row(_repeat), "flip": Row(_flip),
    "broadcast_to": Row(_broadcast_to), "collapse_sum_to": Row(_collapse_sum),
    "collapse_sum_like": Row(_collapse_sum),
}

# --------------------------------------------------------------------------------------------
# Creation and shapes.


def _fill(value) -> Row:
    def write(ctx):
        tensor = np.asarray([value], dtype=ctx.out.dtype)
        from onnx import numpy_helper

        return ctx.emit("ConstantOfShape", [ctx.dims(ctx.out)],
                        value=numpy_helper.from_array(tensor))
    return Row(write)


def _fill_like(value) -> Row:
    def write(ctx):
        from onnx import numpy_helper

        tensor = np.asarray([value], dtype=ctx.out.dtype)
        return ctx.emit("ConstantOfShape", [ctx.emit("Shape", [ctx.input(0)])],
                        value=numpy_helper.from_array(tensor))
    return Row(write)


def _full(ctx):
    fill, dtype = ctx.tensor_arg("fill_value"), ctx.out.dtype
    data = ctx.const_of(fill)
    if data is not None:  # a known value (a weight, or an attr of numpy's default dtype)
        fill = ctx.const(data.astype(dtype), "fill")
    elif ctx.node.inputs:
        fill = ctx.cast(fill, ctx.node.input_at(0).dtype, dtype)
    return ctx.emit("Expand", [fill, ctx.dims(ctx.out)])


def _full_like(ctx):
    x, fill = ctx.inputs
    out = ctx.emit("Expand", [fill, ctx.emit("Shape", [x])])
    return ctx.cast(out, ctx.in_tensor(1).dtype, ctx.out.dtype)


def _arange(ctx):
    """Range; a symbolic end reaches the graph as a placeholder, so with a dynamic length the
    end is start + length * step (the length is the output's prim)."""
    # dtype None: what the bounds are (ints here: a float bound is never symbolic)
    dtype = ctx.out.dtype if ctx.out.dtype != "void" else "int64"
    run_time = [ctx.prim_values(k) for k in ("start", "end", "step")]
    if any(run_time):
        bounds = [_scalar_of(ctx, ctx.cast(v, "int64", dtype)) if v else
                  ctx.scalar(ctx.arg_value(k), dtype, k)
                  for v, k in zip(run_time, ("start", "end", "step"))]
        return ctx.emit("Range", bounds)
    first, by = ctx.arg_value("start"), ctx.arg_value("step")
    start, step = ctx.scalar(first, dtype, "start"), ctx.scalar(by, dtype, "step")
    prims = ctx.out.prims
    if not prims or prims[0].lstrip("-").isdigit():
        return ctx.emit("Range", [start, ctx.scalar(ctx.arg_value("end"), dtype, "end"), step])
    length = ctx.cast(ctx.writer.shapes.dim(ctx, ctx.out, 0), "int64", dtype)
    span = ctx.emit("Mul", [length, ctx.const(np.asarray([by], dtype=dtype), "step")])
    end = ctx.emit("Add", [span, ctx.const(np.asarray([first], dtype=dtype), "start")])
    end = ctx.emit("Reshape", [end, ctx.const(np.zeros(0, dtype=np.int64), "scalar")])
    return ctx.emit("Range", [start, end, step])


def _scalar_of(ctx, value: str) -> str:
    """A 1-element value as a 0-D one."""
    return ctx.emit("Reshape", [value, ctx.const(np.zeros(0, dtype=np.int64), "scalar")])


def _trilu_k(ctx, k_name: str) -> str:
    run_time = ctx.prim_values(k_name)
    if run_time is not None:
        return _scalar_of(ctx, run_time)
    return ctx.const(np.asarray(int(ctx.arg_value(k_name, 0) or 0), dtype=np.int64), "k")


def _tri(upper: bool) -> Row:
    def write(ctx):
        return ctx.emit("Trilu", [ctx.input(0), _trilu_k(ctx, "k")], upper=int(upper))
    return Row(write)


def _eye_like(ctx):
    k = int(ctx.arg_value("k", 0) or 0)
    return ctx.emit("EyeLike", [ctx.input(0)], k=k, dtype=onnx_dtype(ctx.out.dtype))


def _eye(ctx):
    zeros = _fill(0).write_fn(ctx)
    k = int(ctx.arg_value("k", 0) or 0)
    return ctx.emit("EyeLike", [zeros], k=k)


def _hamming(ctx):
    """A window of known size: its numbers (alpha / beta are free here, fixed in ONNX's
    HammingWindow)."""
    size, periodic, alpha, beta = (ctx.arg_value(n) for n in ("window_size", "periodic",
                                                             "alpha", "beta"))
    n = np.arange(int(size))
    period = int(size) if periodic else max(int(size) - 1, 1)
    window = float(alpha) - float(beta) * np.cos(2 * np.pi * n / period)
    return ctx.emit("Identity", [ctx.const(window.astype(ctx.out.dtype), "window")])


def _shift(direction: str) -> Row:
    """BitShift (unsigned ints; signed ones from opset 28). Before that a signed shift is a
    product with 2^b (left) or its floor division (right, arithmetic) in int64, which is what
    a two's-complement shift of an in-range amount is."""
    def write(ctx):
        dtype = ctx.out.dtype
        if dtype.startswith("uint") or ctx.opset >= 28:
            return ctx.emit("BitShift", ctx.inputs, direction=direction)
        a, b = (ctx.cast(v, dtype, "int64") for v in ctx.inputs)
        power = ctx.emit("Pow", [ctx.scalar(2, "int64", "two"), b])
        if direction == "LEFT":
            return ctx.cast(ctx.emit("Mul", [a, power]), "int64", dtype)
        exact = ctx.emit("Sub", [a, ctx.emit("Mod", [a, power], fmod=0)])
        return ctx.cast(ctx.emit("Div", [exact, power]), "int64", dtype)
    return Row(write)


def _shape_to_tensor(ctx):
    run_time = ctx.prim_values("expr")
    if run_time is not None:
        return run_time
    value = ctx.tensor_arg("expr")
    if value is None:
        raise ctx.fail("shape_to_tensor without a shape value")
    source = ctx.node.input_at(0).dtype if ctx.node.inputs else "int64"
    return ctx.cast(value, source, "int64") if ctx.node.inputs else \
        ctx.emit("Identity", [ctx.cast(value, str(ctx.const_of(value).dtype), "int64")])


def _size(ctx):
    return ctx.cast(ctx.emit("Size", ctx.inputs), "int64", ctx.out.dtype)


CREATE = {
    "full": Row(_full), "full_like": Row(_full_like),
    "ones": _fill(1), "zeros": _fill(0), "ones_like": _fill_like(1), "zeros_like": _fill_like(0),
    "tril": _tri(False), "triu": _tri(True), "arange": Row(_arange),
    "eye_like": Row(_eye_like), "eye": Row(_eye), "hamming_window": Row(_hamming),
    "left_shift": _shift("LEFT"), "right_shift": _shift("RIGHT"),
    "shape_to_tensor": Row(_shape_to_tensor), "size": Row(_size),
    "shape_of": Row(lambda c: c.emit("Shape", c.inputs)),
    "tensor_to_shape": Row(lambda c: c.cast(c.input(0), c.in_tensor(0).dtype, "int64")),
    # the same bytes read as another dtype of the same width: ONNX's BitCast (opset 26)
    "reinterpret": Row(lambda c: c.emit("BitCast", c.inputs, to=onnx_dtype(c.attr("dtype"))),
                       since=26),
}

ROWS: dict[str, Row] = {**ELEMENTWISE, **REDUCE, **MANIPULATE, **INDEX, **CREATE, **NN_ROWS,
                        **LAYOUT, **NBITS_ROWS}


def attach_rows() -> None:
    """Attach every row to its op record (the op fact ``"onnx_codegen"``)."""
    for name, row in ROWS.items():
        if name in OPS:
            attach(name, "onnx_codegen", row)


attach_rows()  # the op fact "onnx_codegen" is attached on import (msc/relax/op/facts.py)
