"""ONNX rows of the indexing ops (gather / scatter / slices, advanced indexing)."""

from __future__ import annotations

import numpy as np

from .context import onnx_dtype
from .rows import Row, axes_of, plain

__all__ = ["INDEX", "flat"]

_INT64_MAX = 2 ** 63 - 1


def flat(ctx, x: str) -> str:
    return ctx.emit("Reshape", [x, ctx.ints([-1], "flat")])


# --------------------------------------------------------------------------------------------
# Indexing.


def _strided_slice(ctx):
    ndim = ctx.in_tensor(0).ndim
    axes = axes_of(ctx.arg_value("axes", []), ndim)
    begin, end = ctx.arg_value("begin", []), ctx.arg_value("end", [])
    strides = ctx.arg_value("strides", []) or [1] * len(axes)
    if not axes:
        return ctx.input(0)
    run_time = [ctx.prim_values(k) for k in ("begin", "end", "strides")]
    if any(run_time):  # read from tensors at run time (an ONNX Slice's inputs)
        starts, ends, steps = (v or ctx.ints(c, k) for v, c, k in zip(run_time, (
            begin, [min(max(int(e), -_INT64_MAX), _INT64_MAX) for e in end], strides),
            ("starts", "ends", "steps")))
        return ctx.emit("Slice", [ctx.input(0), starts, ends, ctx.ints(axes, "axes"), steps])
    ends = [_slice_end(ctx, a, int(b), int(e), int(s))
            for a, b, e, s in zip(axes, begin, end, strides)]
    if all(isinstance(e, int) for e in ends):
        ends = ctx.ints(ends, "ends")
    else:
        ends = ctx.emit("Concat", [ctx.ints([e], "end") if isinstance(e, int) else e
                                   for e in ends], axis=0)
    return ctx.emit("Slice", [ctx.input(0), ctx.ints(begin, "starts"), ends,
                              ctx.ints(axes, "axes"), ctx.ints(strides, "steps")])


def _slice_end(ctx, axis: int, begin: int, end: int, stride: int):
    """The end of one sliced axis. A symbolic end reaches the graph as a placeholder, but the
    output's length along the axis is known (a prim): from a begin >= 0 with a step > 0 the
    end is begin + length * step, exactly."""
    prims = ctx.out.prims
    if not prims or prims[axis].lstrip("-").isdigit() or begin < 0 or stride <= 0:
        return min(max(end, -_INT64_MAX), _INT64_MAX)
    length = ctx.writer.shapes.dim(ctx, ctx.out, axis)
    if stride != 1:
        length = ctx.emit("Mul", [length, ctx.ints([stride], "step")])
    return length if begin == 0 else ctx.emit("Add", [length, ctx.ints([begin], "begin")])


def _dynamic_slice(ctx):
    x, begin, end, strides = ctx.inputs
    n = ctx.in_tensor(1).shape[0]
    parts = [ctx.cast(v, ctx.in_tensor(i + 1).dtype, "int64")
             for i, v in enumerate((begin, end, strides))]
    return ctx.emit("Slice", [x, parts[0], parts[1], ctx.ints(range(n), "axes"), parts[2]])


def _take(ctx):
    x, indices = ctx.inputs
    axis = ctx.attr("axis")
    if axis is None:
        x, axis = flat(ctx, x), 0
    if ctx.attr("mode") == "clip":  # out-of-range indices read the first / last element
        size = ctx.emit("Gather", [ctx.emit("Shape", [x]), ctx.ints([axis], "axis")], axis=0)
        last = ctx.emit("Sub", [ctx.cast(size, "int64", ctx.in_tensor(1).dtype),
                                ctx.scalar(1, ctx.in_tensor(1).dtype, "one")])
        indices = ctx.emit("Min", [ctx.emit("Max", [indices, ctx.scalar(
            0, ctx.in_tensor(1).dtype, "zero")]), ctx.emit("Reshape", [last, ctx.const(
                np.zeros(0, dtype=np.int64), "scalar")])])
    if ctx.attr("mode") == "wrap":
        size = ctx.emit("Gather", [ctx.emit("Shape", [x]), ctx.ints([axis], "axis")], axis=0)
        size = ctx.cast(size, "int64", ctx.in_tensor(1).dtype)
        indices = ctx.emit("Mod", [indices, size], fmod=0)
    return ctx.emit("Gather", [x, indices], axis=int(axis))


def _scatter_reduction(ctx, attrs: dict) -> dict:
    kind = ctx.attr("reduction")
    if kind == "update":
        return attrs
    names = {"add": "add", "mul": "mul", "max": "max", "min": "min"}
    if kind not in names:
        raise ctx.fail(f"reduction {kind!r} has no ONNX form")
    ctx.need(16 if kind in ("add", "mul") else 18, f"scatter reduction {kind!r}")
    return {**attrs, "reduction": names[kind]}


def _scatter_elements(ctx):
    attrs = _scatter_reduction(ctx, {"axis": ctx.attr("axis")})
    return ctx.emit("ScatterElements", ctx.inputs, **attrs)


def _scatter_nd(ctx):
    data, indices, updates = ctx.inputs
    indices = ctx.cast(indices, ctx.in_tensor(1).dtype, "int64")
    return ctx.emit("ScatterND", [data, indices, updates], **_scatter_reduction(ctx, {}))


def _one_hot(ctx):
    dtype = ctx.out.dtype
    values = ctx.const(np.asarray([ctx.arg_value("off_value"), ctx.arg_value("on_value")],
                                  dtype=dtype), "values")
    indices = ctx.cast(ctx.input(0), ctx.in_tensor(0).dtype, "int64")  # what runtimes take
    return ctx.emit("OneHot", [indices, ctx.ints([ctx.attr("depth")], "depth"), values],
                    axis=ctx.attr("axis"))


def _gather_nd(ctx):
    data, indices = ctx.inputs
    indices = ctx.cast(indices, ctx.in_tensor(1).dtype, "int64")
    return ctx.emit("GatherND", [data, indices], batch_dims=ctx.attr("batch_dims"))


def _bucketize(ctx):
    x, bounds = ctx.inputs
    op_type = "GreaterOrEqual" if ctx.attr("right") else "Greater"
    above = ctx.emit(op_type, [ctx.unsqueeze(x, [-1]), bounds])
    count = ctx.reduce("ReduceSum", ctx.emit("Cast", [above], to=onnx_dtype("int64")), [-1],
                       False, 13)
    return ctx.cast(count, "int64", ctx.out.dtype)


def _stacked_indices(ctx, first: int, count: int, rank: int | None = None) -> str:
    """Index tensors (inputs first..first+count) broadcast and stacked on a last axis, as
    GatherND / ScatterND take them. ``rank``: their common rank when the output's leading
    dims are that common shape (then dynamic index shapes come from the output's prims)."""
    shapes = [ctx.in_tensor(first + i).shape for i in range(count)]
    if not any(d < 0 for s in shapes for d in s):
        common = list(np.broadcast_shapes(*[tuple(s) for s in shapes]))
        target = ctx.ints(common, "shape")
    elif rank is not None:
        common = [None] * rank
        target = ctx.emit("Concat", [ctx.writer.shapes.dim(ctx, ctx.out, i)
                                     for i in range(rank)], axis=0)
    else:
        raise ctx.fail("index_put with dynamic index shapes")
    parts = []
    for i in range(count):
        index = ctx.cast(ctx.input(first + i), ctx.in_tensor(first + i).dtype, "int64")
        parts.append(ctx.unsqueeze(ctx.emit("Expand", [index, target]), [len(common)]))
    return parts[0] if count == 1 else ctx.emit("Concat", parts, axis=-1)


def _index_tensor(ctx):
    count = len(ctx.node.inputs) - 1
    if count == 1:
        return ctx.emit("Gather", [ctx.input(0), ctx.input(1)], axis=0)
    rank = ctx.out.ndim - (ctx.in_tensor(0).ndim - count)
    return ctx.emit("GatherND", [ctx.input(0), _stacked_indices(ctx, 1, count, rank)])


def _index_put(ctx):
    count = len(ctx.node.inputs) - 2
    stacked = _stacked_indices(ctx, 1, count)
    data = ctx.in_tensor(0)
    shapes = [tuple(ctx.in_tensor(1 + i).shape) for i in range(count)]
    target = list(np.broadcast_shapes(*shapes)) + list(data.shape[count:])
    values = ctx.emit("Expand", [ctx.input(count + 1), ctx.ints(target, "values")])
    attrs = {}
    if ctx.attr("accumulate"):
        ctx.need(16, "index_put with accumulate")
        attrs["reduction"] = "add"
    return ctx.emit("ScatterND", [ctx.input(0), stacked, values], **attrs)


def _slice_scatter(ctx):
    src = ctx.in_tensor(1)
    axis = axes_of(ctx.attr("axis"), src.ndim)[0]
    if any(d < 0 for d in src.shape):
        raise ctx.fail("slice_scatter with a dynamic source shape")
    start, step = (int(ctx.arg_value(n, d) or d) for n, d in (("start", 0), ("step", 1)))
    shape = [1] * src.ndim
    shape[axis] = -1
    positions = np.arange(src.shape[axis], dtype=np.int64) * step + start
    index = np.broadcast_to(positions.reshape(shape), src.shape)
    return ctx.emit("ScatterElements", [ctx.input(0), ctx.const(index, "index"), ctx.input(1)],
                    axis=axis)


def _index_copy(ctx):
    """ScatterElements with the index laid along the axis and expanded to source's shape."""
    source = ctx.in_tensor(2)
    axis = axes_of(ctx.attr("axis"), source.ndim)[0]
    shape = [1] * source.ndim
    shape[axis] = -1
    index = ctx.cast(ctx.input(1), ctx.in_tensor(1).dtype, "int64")
    index = ctx.emit("Reshape", [index, ctx.ints(shape, "index_shape")])
    index = ctx.emit("Expand", [index, ctx.emit("Shape", [ctx.input(2)])])
    return ctx.emit("ScatterElements", [ctx.input(0), index, ctx.input(2)], axis=axis)


def _unique(ctx):
    flags = [bool(ctx.arg_value(n, False)) for n in ("sorted", "return_index",
                                                      "return_inverse", "return_counts")]
    axis = ctx.arg_value("axis")
    attrs = {"sorted": int(flags[0])}
    if axis is not None:
        attrs["axis"] = int(axis)
    dtype = ctx.in_tensor(0).dtype
    wide = "int64" if dtype.startswith(("int", "uint")) else dtype  # onnxruntime's types
    outs = ctx.emit("Unique", [ctx.cast(ctx.input(0), dtype, wide)], n_out=4, **attrs)
    chosen = [ctx.cast(outs[0], wide, dtype)] + [o for o, f in zip(outs[1:], flags[1:]) if f]
    return chosen[0] if len(ctx.node.outputs) == 1 else chosen


def _meshgrid(ctx):
    sizes = [ctx.in_tensor(i).shape[0] for i in range(len(ctx.node.inputs))]
    xy = ctx.attr("indexing") == "xy" and len(sizes) > 1
    order = list(range(len(sizes)))
    if xy:
        order[0], order[1] = 1, 0
    full = [sizes[i] for i in order]
    target = ctx.ints(full, "shape")
    outs = []
    for i, x in enumerate(ctx.inputs):
        shape = [1] * len(sizes)
        shape[order.index(i)] = -1
        outs.append(ctx.emit("Expand", [ctx.emit("Reshape", [x, ctx.ints(shape, "shape")]),
                                        target]))
    return outs


# ONNX NonMaxSuppression takes float32 boxes / scores / thresholds and an int64 box count.
_NMS_DTYPES = ("float32", "float32", "int64", "float32", "float32")


def _nms(ctx):
    inputs = [ctx.cast(ctx.input(i), ctx.in_tensor(i).dtype, d) for i, d in enumerate(_NMS_DTYPES)]
    return ctx.emit("NonMaxSuppression", inputs, center_point_box=ctx.attr("center_point_box"))


def _col2im(ctx):
    attrs = {k: ctx.attr(k) for k in ("dilations", "pads", "strides") if ctx.attr(k)}
    ints = [ctx.cast(ctx.input(i), ctx.in_tensor(i).dtype, "int64") for i in (1, 2)]
    return ctx.emit("Col2Im", [ctx.input(0), *ints], **attrs)


def _deform_conv(ctx):
    """Empty bias / mask tensors mean absent: ONNX leaves those inputs out."""
    inputs = [ctx.input(i) for i in range(3)]
    for i in (3, 4):
        inputs.append("" if 0 in list(ctx.in_tensor(i).shape) else ctx.input(i))
    while not inputs[-1]:
        inputs.pop()
    attrs = {"group": ctx.attr("groups"), "offset_group": ctx.attr("offset_groups"),
             **{k: ctx.attr(k) for k in ("strides", "pads", "dilations") if ctx.attr(k)}}
    return ctx.emit("DeformConv", inputs, **attrs)


INDEX = {
    "image.deform_conv2d": Row(_deform_conv, since=19),
    "col2im": Row(_col2im, since=18),
    "index_put": Row(_index_put), "slice_scatter": Row(_slice_scatter),
    "index_copy": Row(_index_copy),
    "unique": Row(_unique), "meshgrid": Row(_meshgrid),
    "strided_slice": Row(_strided_slice), "dynamic_strided_slice": Row(_dynamic_slice),
    "take": Row(_take), "gather_elements": plain("GatherElements", {"axis": "axis"}),
    "gather_nd": Row(_gather_nd), "scatter_elements": Row(_scatter_elements),
    "scatter_nd": Row(_scatter_nd), "one_hot": Row(_one_hot),
    "index_tensor": Row(_index_tensor), "bucketize": Row(_bucketize),
    "reverse_sequence": Row(lambda c: c.emit(
        "ReverseSequence", [c.input(0), c.cast(c.input(1), c.in_tensor(1).dtype, "int64")],
        batch_axis=c.attr("batch_axis"), time_axis=c.attr("seq_axis"))),
    "vision.non_max_suppression": Row(_nms, since=10),
}

