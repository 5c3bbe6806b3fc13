"""Shape and data-movement ONNX ops: constants, shapes, reshapes, joins and splits, slicing,
gathers and scatters, creation ops.

Shape-valued inputs (a Reshape target, Expand shape, Slice bounds...) are read with
``g.known_values`` / ``g.ints``: constants, or values folded from shape subgraphs.
"""

from __future__ import annotations

import numpy as np

from msc import relax
from msc.tir import expr as tir

from . import runtime_axes
from .common import call, norm_axis, pad_axis, scalar
from .context import Context, OnnxNode
from .dtypes import relax_dtype

_INT64_MAX = np.iinfo(np.int64).max


def need_const(node: OnnxNode, value, what: str):
    """A constant the converter cannot do without."""
    if value is None:
        raise node.unsupported(f"{what} must be a constant (or computable from shapes)")
    return value


def axes_arg(node: OnnxNode, g: Context, index: int, attr: str = "axes"):
    """Axes from the attribute (older opsets) or from input ``index`` (newer ones)."""
    if attr in node.attrs and node.attrs[attr] is not None:
        return list(node.attrs[attr])
    x = node.inputs[index] if len(node.inputs) > index else None
    if x is not None and g.shape(x) is not None and any(tir.as_int(d) == 0
                                                         for d in g.shape(x)):
        return []  # an empty tensor, even one given at run time
    return None if x is None else need_const(node, g.ints(x), attr)


def axes_input(g: Context, node: OnnxNode, index: int = 1):
    """The axes input when its values are known only at run time (a non-empty tensor that
    is not a constant), else None."""
    x = node.inputs[index] if len(node.inputs) > index else None
    if x is None or node.attrs.get("axes") is not None or g.ints(x) is not None:
        return None
    dims = g.shape(x)
    return None if dims is not None and any(tir.as_int(d) == 0 for d in dims) else x


# --------------------------------------------------------------------------------------------
# Constants and shapes.

def convert_constant(g: Context, node: OnnxNode):
    for key, dtype in (("value", None), ("value_float", "float32"),
                       ("value_floats", "float32"), ("value_int", "int64"),
                       ("value_ints", "int64")):
        if node.attrs.get(key) is not None:
            return relax.Constant(np.asarray(node.attrs[key], dtype=dtype))
    raise node.unsupported("only tensor, float(s) and int(s) constants are supported")


def convert_shape(g: Context, node: OnnxNode):
    x = node.inputs[0]
    dims = g.shape(x)
    if dims is None:
        raise node.unsupported("the input's rank is unknown")
    start, end = node.attrs.get("start") or 0, node.attrs.get("end")
    picked = list(dims)[slice(start, end)]
    expr = call("shape_to_tensor", call("shape_of", x))
    if len(picked) != len(dims):
        expr = call("strided_slice", expr, [0], [norm_axis(start, len(dims))],
                    [len(dims) if end is None else norm_axis(end, len(dims))])
    return g.emit_known(expr, picked)


def convert_size(g: Context, node: OnnxNode):
    dims = g.shape(node.inputs[0])
    if dims is None:
        return g.emit(call("size", node.inputs[0]))
    total = 1
    for d in dims:
        total = total * d
    return g.emit_known(call("size", node.inputs[0]), np.asarray(total, dtype=object))


def convert_constant_of_shape(g: Context, node: OnnxNode):
    value = node.attrs["value"]
    fill = np.zeros((), "float32") if value is None else np.asarray(value).reshape(())
    shape = need_const(node, g.runtime_ints(node.inputs[0], "dim"), "shape")
    return g.emit(call("full", shape, relax.const(fill), fill.dtype.name))


def convert_range(g: Context, node: OnnxNode):
    dtype = g.dtype(node.inputs[0])
    bounds = [_scalar(g, x) for x in node.inputs[:3]]
    if any(b is None for b in bounds):
        return _range_at_runtime(g, node, *node.inputs[:3])
    return g.emit(call("arange", *bounds, dtype))


def _range_at_runtime(g: Context, node: OnnxNode, start, limit, delta):
    """start + arange(n) * delta with n = max(ceil((limit - start) / delta), 0) known only
    at run time."""
    span = call("astype", call("subtract", limit, start), "float64")
    count = call("ceil", call("divide", span, call("astype", delta, "float64")))
    count = g.emit(call("astype", call("maximum", count, relax.const(0.0, "float64")),
                        "int64"))
    n = need_const(node, g.runtime_ints(count, "range"), "the range length")[0]
    steps = call("astype", call("arange", 0, n, 1, "int64"), g.dtype(start))
    return g.emit(call("add", call("multiply", steps, delta), start))


def _scalar(g: Context, x):
    """A scalar input's value: a constant's number, or a known (maybe symbolic) int."""
    value = g.value(x)
    if value is not None:
        return value.reshape(-1)[0].item()
    known = g.known_values(x)
    return None if known is None else known[0]


def convert_eye_like(g: Context, node: OnnxNode):
    x, dtype = node.inputs[0], node.attrs["dtype"]
    dtype = g.dtype(x) if dtype is None else relax_dtype(dtype)
    return g.emit(call("eye_like", x, relax.PrimValue(node.attrs["k"]), dtype))


def convert_trilu(g: Context, node: OnnxNode):
    x, k = node.inputs[:2]
    k = 0 if k is None else need_const(node, g.runtime_ints(k, "k"), "k")[0]
    return g.emit(call("triu" if node.attrs["upper"] else "tril", x, relax.PrimValue(k)))


# --------------------------------------------------------------------------------------------
# Reshapes.

def convert_reshape_v1(g: Context, node: OnnxNode):
    """Reshape-1: the target as an attribute."""
    x = node.inputs[0]
    return g.emit(call("reshape", x, _copy_zero_dims(node, g, x, list(node.attrs["shape"]))))


def convert_reshape(g: Context, node: OnnxNode):
    """Reshape-5+: the target as an input (folded, symbolic, or resolved at run time)."""
    x = node.inputs[0]
    target = g.known_values(node.inputs[1])
    if target is None:
        return _reshape_at_runtime(node, g, x, node.inputs[1])
    if not node.attrs.get("allowzero"):
        target = _copy_zero_dims(node, g, x, target)
    return g.emit(call("reshape", x, target))


def _reshape_at_runtime(node: OnnxNode, g: Context, x, shape):
    """Reshape to a target known only at run time: its 0s (unless allowzero) and -1 are
    resolved there, and its values bound to symbolic dims (R.match_cast)."""
    dims = g.shape(shape)
    length = tir.as_int(dims[0]) if dims is not None and len(dims) == 1 else None
    if length is None:
        return g.emit(call("reshape", x, call("tensor_to_shape", shape)))
    t = shape if g.dtype(shape) == "int64" else call("astype", shape, "int64")
    if not node.attrs.get("allowzero"):
        own = call("shape_to_tensor", call("shape_of", x))
        if length > g.ndim(x):
            own = call("concat", [own, relax.const(np.zeros(length - g.ndim(x), "int64"))])
        own = call("strided_slice", own, [0], [0], [length])
        t = call("where", call("equal", t, relax.const(0, "int64")), own, t)
    t = g.emit(t)
    hole = g.emit(call("equal", t, relax.const(-1, "int64")))
    known = call("prod", call("where", hole, relax.const(1, "int64"), t))
    t = g.emit(call("where", hole, call("floor_divide", call("size", x), known), t))
    return g.emit(call("reshape", x, g.runtime_ints(t, "dim")))


def _copy_zero_dims(node: OnnxNode, g: Context, x, target: list) -> list:
    """ONNX Reshape: a 0 in the target copies the input's dim at that position."""
    if not any(isinstance(d, int) and d == 0 for d in target):
        return target
    dims = need_const(node, g.shape(x), "the input shape (for 0 dims)")
    return [dims[k] if isinstance(d, int) and d == 0 else d for k, d in enumerate(target)]


def convert_flatten(g: Context, node: OnnxNode):
    x = node.inputs[0]
    dims = need_const(node, g.shape(x), "the input shape")
    axis = norm_axis(node.attrs["axis"], len(dims))
    lead = 1
    for d in dims[:axis]:
        lead = lead * d
    return g.emit(call("reshape", x, [lead, -1]))


def convert_transpose(g: Context, node: OnnxNode):
    perm = node.attrs["perm"]
    return g.emit(call("permute_dims", node.inputs[0], list(perm) if perm else None))


def convert_squeeze(g: Context, node: OnnxNode):
    x = node.inputs[0]
    if axes_input(g, node) is not None:
        axes = runtime_axes.axes_at_runtime(g, node, node.inputs[1], g.ndim(x))
        dims = need_const(node, g.shape(x), "the input shape")
        hit = [runtime_axes.listed(axes, d) for d in range(len(dims))]
        return g.emit(call("reshape", x, runtime_axes.squeeze_dims(dims, hit,
                                                                   len(dims) - len(axes))))
    axes = axes_arg(node, g, 1)
    if axes is not None:
        axes = [norm_axis(a, g.ndim(x)) for a in axes]
    return g.emit(call("squeeze", x, axes))


def convert_unsqueeze(g: Context, node: OnnxNode):
    x = node.inputs[0]
    if axes_input(g, node) is not None:
        axes = runtime_axes.axes_at_runtime(g, node, node.inputs[1], None)
        axes = runtime_axes.wrap(axes, g.ndim(x) + len(axes))
        dims = need_const(node, g.shape(x), "the input shape")
        return g.emit(call("reshape", x, runtime_axes.unsqueeze_dims(dims, axes)))
    axes = need_const(node, axes_arg(node, g, 1), "axes")
    rank = g.ndim(x) + len(axes)
    return g.emit(call("expand_dims", x, sorted(norm_axis(a, rank) for a in axes)))


def convert_expand(g: Context, node: OnnxNode):
    x, shape = node.inputs[:2]
    target = g.runtime_ints(shape, "dim")
    dims = g.shape(x)
    if target is None or dims is None:
        raise node.unsupported("Expand needs a shape of static length and a known input "
                               "shape")
    return g.emit(call("broadcast_to", x, _bidirectional(list(dims), target)))


def _bidirectional(dims: list, target: list) -> list:
    """numpy broadcasting of two shapes (Expand broadcasts both ways); a symbolic target dim
    against a static input dim other than 1 must be 1 or equal to it."""
    n = max(len(dims), len(target))
    dims, target = [1] * (n - len(dims)) + dims, [1] * (n - len(target)) + list(target)
    return [d if _is_one(t) or (not _is_one(d) and tir.as_int(tir.convert(d)) is not None)
            else t for d, t in zip(dims, target)]


def _is_one(d) -> bool:
    return tir.as_int(tir.convert(d)) == 1


def convert_tile(g: Context, node: OnnxNode):
    x, repeats = node.inputs[:2]
    if g.ints(repeats) is not None:
        return g.emit(call("tile", x, g.ints(repeats)))
    counts = need_const(node, g.runtime_ints(repeats, "repeat"), "repeats (static length)")
    dims = need_const(node, g.shape(x), "the input shape")
    # tile = broadcast over a new leading axis per dim, then merge each pair of axes.
    y = call("expand_dims", x, list(range(0, 2 * len(dims), 2)))
    y = call("broadcast_to", y, [v for pair in zip(counts, dims) for v in pair])
    return g.emit(call("reshape", y, [r * d for r, d in zip(counts, dims)]))


def convert_depth_to_space(g: Context, node: OnnxNode):
    x, bs = node.inputs[0], node.attrs["blocksize"]
    if node.attrs["mode"] == "CRD":
        return g.emit(call("nn.pixel_shuffle", x, bs))
    b, c, h, w = need_const(node, g.shape(x), "the input shape")
    y = call("reshape", x, [b, bs, bs, tir.floordiv(c, bs * bs), h, w])
    y = call("permute_dims", y, [0, 3, 4, 1, 5, 2])
    return g.emit(call("reshape", y, [b, tir.floordiv(c, bs * bs), h * bs, w * bs]))


def convert_space_to_depth(g: Context, node: OnnxNode):
    x, bs = node.inputs[0], node.attrs["blocksize"]
    b, c, h, w = need_const(node, g.shape(x), "the input shape")
    hb, wb = tir.floordiv(h, bs), tir.floordiv(w, bs)
    y = call("reshape", x, [b, c, hb, bs, wb, bs])
    crd = node.attrs.get("mode") == "CRD"
    y = call("permute_dims", y, [0, 1, 3, 5, 2, 4] if crd else [0, 3, 5, 1, 2, 4])
    return g.emit(call("reshape", y, [b, c * bs * bs, hb, wb]))


# --------------------------------------------------------------------------------------------
# Joins, splits, slices.

def convert_concat(g: Context, node: OnnxNode):
    xs = [x for x in node.inputs if x is not None]
    axis = norm_axis(node.attrs["axis"], g.ndim(xs[0]))
    return g.emit(call("concat", xs, axis))


def convert_split(g: Context, node: OnnxNode):
    x = node.inputs[0]
    axis = norm_axis(node.attrs["axis"], g.ndim(x))
    split = node.inputs[1] if len(node.inputs) > 1 else None
    if split is not None and g.value(split) is None:
        return _split_at_runtime(node, g, x, axis, split)
    sizes = axes_arg(node, g, 1, "split")
    count = node.attrs.get("num_outputs") or node.num_outputs
    dims = g.shape(x)
    if sizes is None and (dims is None or tir.as_int(dims[axis]) is None):
        return _split_symbolic(g, x, axis, _axis_size(node, g, x, axis), count)
    if sizes is None:
        sizes = _even_sizes(node, g, x, axis, count)
    points = list(np.cumsum(sizes[:-1])) if sizes else []
    parts = g.emit(call("split", x, [int(p) for p in points] if sizes else count, axis))
    return [g.emit(relax.TupleGetItem(parts, i)) for i in range(len(sizes))]


def _split_at_runtime(node: OnnxNode, g: Context, x, axis: int, split):
    """Parts of sizes known only at run time: slices between symbolic offsets."""
    sizes = need_const(node, g.runtime_ints(split, "split"), "split (static length)")
    parts, start = [], 0
    for size in sizes:
        parts.append(g.emit(call("strided_slice", x, [axis], [start], [start + size])))
        start = start + size
    return parts


def _axis_size(node: OnnxNode, g: Context, x, axis: int):
    """The size of ``x``'s axis: from its struct info, else read at run time."""
    dims = g.shape(x)
    if dims is not None:
        return dims[axis]
    whole = call("shape_to_tensor", call("shape_of", x))
    size = g.emit(call("reshape", call("take", whole, relax.const(axis, "int64"), 0), [1]))
    return need_const(node, g.runtime_ints(size, "size"), "the split axis' size")[0]


def _split_symbolic(g: Context, x, axis: int, dim, count: int) -> list:
    """``count`` parts of ceil(dim / count) (the last one shorter) of a symbolic dim."""
    size = tir.ceildiv(dim, count)
    return [g.emit(call("strided_slice", x, [axis], [tir.min(size * k, dim)],
                        [tir.min(size * (k + 1), dim)])) for k in range(count)]


def _even_sizes(node: OnnxNode, g: Context, x, axis: int, count: int) -> list:
    dims = g.shape(x)
    dim = tir.as_int(dims[axis]) if dims is not None else None
    dim = need_const(node, dim, "the split axis' size")
    size = -(-dim // count)
    return [min(size, dim - size * k) for k in range(count)]


def convert_slice_v1(g: Context, node: OnnxNode):
    """Slice-1: starts, ends, axes as attributes."""
    at = node.attrs
    return _slice(g, node.inputs[0], at["starts"], at["ends"], at["axes"], None)


def convert_slice(g: Context, node: OnnxNode):
    """Slice-10+: inputs; starts / ends / steps may be known only at run time."""
    x = node.inputs[0]
    starts, ends, steps = (g.runtime_ints(v, "slice") if v is not None else None
                           for v in (node.inputs[1], node.inputs[2], node.inputs[4]))
    if starts is None or ends is None:
        raise node.unsupported("starts and ends must have a static length")
    if axes_input(g, node, 3) is not None:
        return _slice_runtime_axes(g, node, x, starts, ends, steps)
    axes = node.inputs[3] and need_const(node, g.ints(node.inputs[3]), "axes")
    return _slice(g, x, starts, ends, axes, steps)


def _slice_runtime_axes(g: Context, node: OnnxNode, x, starts, ends, steps):
    """Slice every dim, each by the bounds given for it (axes known only at run time)."""
    rank = g.ndim(x)
    axes = runtime_axes.axes_at_runtime(g, node, node.inputs[3], rank)
    steps = [1] * len(starts) if steps is None else steps
    per_dim = [runtime_axes.pick_per_dim(axes, [_clamp_int64(v) for v in values], rank,
                                         default)
               for values, default in ((starts, 0), (ends, _INT64_MAX), (steps, 1))]
    return g.emit(call("strided_slice", x, list(range(rank)), *per_dim))


def _slice(g: Context, x, starts, ends, axes, steps):
    axes = list(range(len(starts))) if axes is None else [norm_axis(a, g.ndim(x))
                                                            for a in axes]
    steps = [1] * len(starts) if steps is None else steps
    ends = [_clamp_int64(e) for e in ends]
    return g.emit(call("strided_slice", x, axes, list(starts), ends, list(steps)))


def _clamp_int64(v):
    return min(max(v, -_INT64_MAX), _INT64_MAX) if isinstance(v, int) else v


# --------------------------------------------------------------------------------------------
# Gathers and scatters.

def _positive_indices(g: Context, indices, dim):
    """ONNX indices may be negative (counted from the end): add ``dim`` to those."""
    values = g.value(indices)
    if values is not None:
        if not (values < 0).any():
            return indices
        if tir.as_int(dim) is not None:
            return relax.const(np.where(values < 0, values + tir.as_int(dim), values))
    if tir.as_int(dim) is None:
        return indices
    shifted = call("add", indices, scalar(g, tir.as_int(dim), indices))
    return g.emit(call("where", call("less", indices, scalar(g, 0, indices)), shifted,
                       indices))


def _dim(g: Context, x, axis: int):
    dims = g.shape(x)
    return tir.convert(dims[axis]) if dims is not None else tir.Var("unknown", "int64")


def convert_gather(g: Context, node: OnnxNode):
    x, indices = node.inputs[:2]
    axis = norm_axis(node.attrs["axis"], g.ndim(x))
    indices = _positive_indices(g, indices, _dim(g, x, axis))
    return g.emit(call("take", x, indices, axis))


def convert_gather_elements(g: Context, node: OnnxNode):
    x, indices = node.inputs[:2]
    axis = norm_axis(node.attrs["axis"], g.ndim(x))
    indices = _positive_indices(g, indices, _dim(g, x, axis))
    return g.emit(call("gather_elements", x, indices, axis))


def convert_gather_nd(g: Context, node: OnnxNode):
    x, indices = node.inputs[:2]
    return g.emit(call("gather_nd", x, indices, node.attrs["batch_dims"]))


_REDUCTIONS = {"none": "update", "add": "add", "mul": "mul", "max": "max", "min": "min"}


def convert_scatter_elements(g: Context, node: OnnxNode):
    x, indices, updates = node.inputs[:3]
    axis = norm_axis(node.attrs["axis"], g.ndim(x))
    indices = _positive_indices(g, indices, _dim(g, x, axis))
    reduction = _REDUCTIONS[node.attrs.get("reduction") or "none"]
    return g.emit(call("scatter_elements", x, indices, updates, axis, reduction))


def convert_scatter_nd(g: Context, node: OnnxNode):
    x, indices, updates = node.inputs[:3]
    reduction = _REDUCTIONS[node.attrs.get("reduction") or "none"]
    return g.emit(call("scatter_nd", x, indices, updates, reduction))


def convert_one_hot(g: Context, node: OnnxNode):
    indices, depth, values = node.inputs[:3]
    off_on = g.value(values)
    if g.ints(depth) is None or off_on is None:
        return _one_hot_at_runtime(node, g, indices, depth, values)
    depth = g.ints(depth)[0]
    indices = _positive_indices(g, indices, tir.IntImm(depth))
    if g.dtype(indices) not in ("int32", "int64"):
        indices = g.emit(call("astype", indices, "int64"))
    on, off = (relax.PrimValue(_prim(off_on, i)) for i in (1, 0))
    return g.emit(call("one_hot", indices, on, off, depth, node.attrs["axis"]))


def _one_hot_at_runtime(node: OnnxNode, g: Context, indices, depth, values):
    """where(indices == arange(depth), on, off) with the depth and values given at run time
    (the depth becomes a symbolic dim)."""
    if g.dtype(depth) != "int64":
        depth = g.emit(call("astype", depth, "int64"))
    n = need_const(node, g.runtime_ints(depth, "depth"), "depth")[0]
    idx = g.emit(call("astype", indices, "int64"))
    count = call("reshape", call("shape_to_tensor", relax.ShapeExpr([n])), [])
    idx = g.emit(call("where", call("less", idx, relax.const(0, "int64")),
                      call("add", idx, count), idx))
    rank = g.ndim(idx) + 1
    axis = norm_axis(node.attrs["axis"], rank)
    hot = call("equal", call("expand_dims", idx, [axis]),
               call("reshape", call("arange", 0, n, 1, "int64"),
                    [-1 if k == axis else 1 for k in range(rank)]))
    off, on = (call("take", values, relax.const(k, "int64"), 0) for k in (0, 1))
    return g.emit(call("where", hot, on, off))


def _prim(values: np.ndarray, i: int):
    v = values.reshape(-1)[i]
    return tir.FloatImm(float(v), values.dtype.name) if values.dtype.kind == "f" else \
        tir.IntImm(int(v), values.dtype.name)


def convert_nonzero(g: Context, node: OnnxNode):
    return g.emit(call("nonzero", node.inputs[0]))


def convert_compress(g: Context, node: OnnxNode):
    x, cond = node.inputs[:2]
    axis = node.attrs["axis"]
    if axis is None:
        x, axis = g.emit(call("reshape", x, [-1])), 0
    picked = call("squeeze", call("nonzero", cond), [0])
    return g.emit(call("take", x, picked, norm_axis(axis, g.ndim(x))))


def convert_reverse_sequence(g: Context, node: OnnxNode):
    x, lengths = node.inputs[:2]
    return g.emit(call("reverse_sequence", x, lengths, node.attrs["time_axis"],
                       node.attrs["batch_axis"]))


def convert_unique(g: Context, node: OnnxNode):
    x, axis = node.inputs[0], node.attrs["axis"]
    flags = [relax.PrimValue(bool(f)) for f in (node.attrs["sorted"], True, True, True)]
    axis_value = relax.PrimValue(norm_axis(axis, g.ndim(x))) if axis is not None else None
    args = [x, *flags] + ([axis_value] if axis_value is not None else [])
    return g.emit(call("unique", *args))


def convert_center_crop_pad(g: Context, node: OnnxNode):
    x, shape = node.inputs[:2]
    target = need_const(node, g.runtime_ints(shape, "size"), "shape (static length)")
    dims = need_const(node, g.shape(x), "the input shape")
    axes = node.attrs["axes"] or list(range(len(dims)))
    axes = [norm_axis(a, len(dims)) for a in axes]
    for axis, size in zip(axes, target):
        if isinstance(size, int) and tir.as_int(dims[axis]) is not None:
            x = _crop_or_pad(g, x, axis, tir.as_int(dims[axis]), size)
        else:  # centred: pad (size - dim) // 2 before, or crop (dim - size) // 2
            diff = tir.convert(size) - dims[axis]
            before = tir.floordiv(tir.max(diff, 0), 2) - tir.floordiv(tir.max(-diff, 0), 2)
            x = pad_axis(g, x, axis, before, diff - before, scalar(g, 0, x))
    return x


def _crop_or_pad(g: Context, x, axis: int, dim: int, size: int):
    if size < dim:
        start = (dim - size) // 2
        return g.emit(call("strided_slice", x, [axis], [start], [start + size]))
    if size > dim:
        width = [0] * (2 * g.ndim(x))
        width[2 * axis], width[2 * axis + 1] = (size - dim) // 2, size - dim - (size - dim) // 2
        return g.emit(call("nn.pad", x, width, 0.0, "constant"))
    return x


CONVERTERS = {
    "Constant": {1: convert_constant}, "Shape": {1: convert_shape}, "Size": {1: convert_size},
    "ConstantOfShape": {9: convert_constant_of_shape}, "Range": {11: convert_range},
    "EyeLike": {9: convert_eye_like}, "Trilu": {14: convert_trilu},
    "Reshape": {1: convert_reshape_v1, 5: convert_reshape}, "Flatten": {1: convert_flatten},
    "Transpose": {1: convert_transpose}, "Squeeze": {1: convert_squeeze},
    "Unsqueeze": {1: convert_unsqueeze}, "Expand": {8: convert_expand},
    "Tile": {6: convert_tile}, "DepthToSpace": {1: convert_depth_to_space},
    "SpaceToDepth": {1: convert_space_to_depth}, "Concat": {1: convert_concat},
    "Split": {1: convert_split}, "Slice": {1: convert_slice_v1, 10: convert_slice},
    "Gather": {1: convert_gather}, "GatherElements": {11: convert_gather_elements},
    "GatherND": {11: convert_gather_nd}, "Scatter": {9: convert_scatter_elements},
    "ScatterElements": {11: convert_scatter_elements}, "ScatterND": {11: convert_scatter_nd},
    "OneHot": {9: convert_one_hot}, "NonZero": {9: convert_nonzero},
    "Compress": {9: convert_compress}, "ReverseSequence": {10: convert_reverse_sequence},
    "Unique": {11: convert_unique}, "CenterCropPad": {18: convert_center_crop_pad},
}
