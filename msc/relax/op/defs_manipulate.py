"""Shape manipulation ops: casts, reshapes, permutations, joins and splits, layout transforms.

``OP_ALIASES`` maps the Relay-era names of the MSC optype vocabulary onto these ops::

    OP_ALIASES["transpose"]            # "permute_dims"
    TRILU[upper]                       # trilu(x, k, upper) -> "triu" / "tril"
"""

from __future__ import annotations

import inspect
from functools import partial

from ...errors import ValidationError
from ...tir import expr as tir
from ..expr import Call, ShapeExpr
from ..struct_info import ShapeStructInfo, TensorStructInfo, TupleStructInfo
from .infer import (
    INT_DTYPES,
    broadcast_sinfo,
    check_broadcastable,
    common_dtype,
    common_ndim,
    dims_str,
    exact_quotient,
    match_dims,
    normalize_axes,
    normalize_axis,
    prod,
    provably_differ,
    replace_dim,
    same_as_input,
    tensor,
    unknown,
    with_dtype,
)
from .registry import Arg, AttrDef, infer_struct_info, make_call, register

# Relay / MSC optype names -> Relax op names (one to one). "constant" is an expression kind
# (relax.Constant), not an op; "ones"/"zeros" keep their names.
OP_ALIASES = {"cast": "astype", "concatenate": "concat", "transpose": "permute_dims"}
# Relay's trilu(data, k, upper) is two Relax ops, picked by ``upper``.
TRILU = {True: "triu", False: "tril"}


# --------------------------------------------------------------------------------------------
# Casts, broadcasting, clipping.

def astype_infer(ctx):
    return with_dtype(ctx.tensor(0), ctx.attrs.dtype)


# Bytes per element of the dtypes reinterpret accepts (16-bit floats are left out: the numpy
# path computes them in float32, which would view the wrong bytes).
_ITEM_BYTES = {"bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4,
               "uint32": 4, "float32": 4, "int64": 8, "uint64": 8, "float64": 8}


def reinterpret_infer(ctx):
    """The same bytes read as another dtype of the same width (ONNX BitCast)."""
    data, dtype = ctx.tensor(0), ctx.attrs.dtype
    sizes = [_ITEM_BYTES.get(d) for d in (data.dtype, dtype)]
    if None in sizes or sizes[0] != sizes[1]:
        raise ctx.error(f"cannot reinterpret {data.dtype} as {dtype}",
                        hint="both dtypes must have the same width; supported: "
                             + ", ".join(_ITEM_BYTES))
    return with_dtype(data, dtype)


def broadcast_to_infer(ctx):
    data, target = ctx.tensor(0), ctx.shape_values(1)
    if target is None:
        return unknown(data.dtype, ctx.sinfo[1].ndim)
    if data.values is not None:
        check_broadcastable(ctx, data.values, target, 0)
    elif data.ndim > len(target):
        raise ctx.error(f"rank {data.ndim} input cannot broadcast to rank {len(target)}", 1)
    return tensor(target, data.dtype)


def where_infer(ctx):
    cond, a, b = ctx.tensor(0), ctx.tensor(1), ctx.tensor(2)
    if cond.dtype not in ("bool", "void"):
        raise ctx.error(f"condition must be bool, got {cond.dtype}", 0,
                        hint="compare first, e.g. R.greater(x, 0), or R.astype(c, 'bool')")
    return broadcast_sinfo(ctx, [cond, a, b], common_dtype(ctx, [a, b]))


# --------------------------------------------------------------------------------------------
# Reshapes.

def reshape_infer(ctx):
    data, new = ctx.tensor(0), ctx.shape_values(1)
    if new is None:
        return unknown(data.dtype, ctx.sinfo[1].ndim)
    holes = [k for k, d in enumerate(new) if d == -1]
    if len(holes) > 1 or any(d.is_const and d.value < -1 for d in new):
        raise ctx.error(f"new shape {dims_str(new)} may have one -1 and no other negative dim",
                        1)
    if data.values is None:
        return tensor(new, data.dtype) if not holes else unknown(data.dtype, len(new))
    return tensor(_resolve_shape(ctx, data.values, list(new), holes), data.dtype)


def _resolve_shape(ctx, old: tuple, new: list, holes: list) -> list:
    """Fill reshape's -1 and check the element count when it is decidable."""
    known = [d for d in new if d != -1]
    if holes:
        total, part = prod(old), prod(known)
        if total.is_const and part.is_const and (part.value == 0 or total.value % part.value):
            raise ctx.error(f"cannot reshape {dims_str(old)} ({total} elements) to "
                            f"{dims_str(new)}: {total} is not a multiple of {part}", 1)
        new[holes[0]] = exact_quotient(old, known)
    if provably_differ(prod(old), prod(new)):
        raise ctx.error(f"cannot reshape {dims_str(old)} ({prod(old)} elements) to "
                        f"{dims_str(new)} ({prod(new)} elements)", 1,
                        hint="the new shape must hold the same number of elements")
    return new


def reshape(x, shape):
    """``R.reshape(x, shape)``; like TVM, a -1 is resolved when ``x``'s shape is known."""
    call = make_call("reshape", x, shape)
    data, new = call.args
    if not (isinstance(new, ShapeExpr) and any(d == -1 for d in new.values)
            and isinstance(data.struct_info, TensorStructInfo)):
        return call
    out = infer_struct_info(call)
    return call if out.values is None else Call(call.op, [data, ShapeExpr(out.values)], call.attrs)


def flatten_infer(ctx):
    data = ctx.tensor(0)
    if data.values is None:
        return unknown(data.dtype, 1)
    return tensor([prod(data.values)], data.dtype)


def expand_dims_infer(ctx):
    data = ctx.tensor(0)
    if data.ndim < 0:
        return unknown(data.dtype)
    out_ndim = data.ndim + len(ctx.attrs.axis)
    axes = normalize_axes(ctx, ctx.attrs.axis, out_ndim)
    if data.values is None:
        return unknown(data.dtype, out_ndim)
    rest = iter(data.values)
    return tensor([tir.IntImm(1) if k in axes else next(rest) for k in range(out_ndim)],
                  data.dtype)


def squeeze_infer(ctx):
    data, axis = ctx.tensor(0), ctx.attrs.axis
    if data.ndim < 0:
        return data
    if axis is None:
        if not data.is_static:  # a symbolic dim may be 1: the rank is unknown (as in TVM)
            return unknown(data.dtype)
        return tensor([d for d in data.values if d != 1], data.dtype)
    axes = normalize_axes(ctx, axis, data.ndim)
    if data.values is None:
        return unknown(data.dtype, data.ndim - len(axes))
    # Like TVM (and torch.squeeze(x, dim)), a given axis whose static dim is not 1 stays.
    return tensor([d for k, d in enumerate(data.values)
                   if k not in axes or (d.is_const and d != 1)], data.dtype)


def collapse_sum_like_infer(ctx):
    data, target = ctx.tensor(0), ctx.tensor(1)
    if data.values is not None and target.values is not None:
        check_broadcastable(ctx, target.values, data.values, 1)
    return with_dtype(target, data.dtype)


def collapse_sum_to_infer(ctx):
    data, target = ctx.tensor(0), ctx.shape_values(1)
    if target is None:
        return unknown(data.dtype, ctx.sinfo[1].ndim)
    if data.values is not None:
        check_broadcastable(ctx, target, data.values, 1)
    return tensor(target, data.dtype)


# --------------------------------------------------------------------------------------------
# Permutations, flips, repeats.

def permute_dims_infer(ctx):
    data, axes = ctx.tensor(0), ctx.attrs.axes
    if axes is not None and data.ndim >= 0 and len(axes) != data.ndim:
        raise ctx.error(f"axes {list(axes)} must list each of the {data.ndim} dims once", 0)
    ndim = data.ndim if axes is None else len(axes)
    if ndim < 0:
        return data
    axes = list(range(ndim))[::-1] if axes is None else normalize_axes(ctx, axes, ndim)
    if data.values is None:
        return unknown(data.dtype, ndim)
    return tensor([data.values[a] for a in axes], data.dtype)


def flip_infer(ctx):
    data = ctx.tensor(0)
    normalize_axis(ctx, ctx.attrs.axis, data.ndim)
    return data


def repeat_infer(ctx):
    data, repeats, axis = ctx.tensor(0), ctx.attrs.repeats, ctx.attrs.axis
    if axis is None:
        if data.values is None:
            return unknown(data.dtype, 1)
        return tensor([prod(data.values) * repeats], data.dtype)
    axis = normalize_axis(ctx, axis, data.ndim)
    if data.values is None:
        return data
    return tensor(replace_dim(data.values, axis, data.values[axis] * repeats), data.dtype)


def tile_infer(ctx):
    data, repeats = ctx.tensor(0), list(ctx.attrs.repeats)
    if data.ndim < 0:
        return data
    ndim = max(data.ndim, len(repeats))
    if data.values is None:
        return unknown(data.dtype, ndim)
    dims = [tir.IntImm(1)] * (ndim - data.ndim) + list(data.values)
    reps = [1] * (ndim - len(repeats)) + repeats
    return tensor([d * r for d, r in zip(dims, reps)], data.dtype)


# --------------------------------------------------------------------------------------------
# Joins and splits.

def concat_infer(ctx):
    fields = _fields(ctx)
    dtype, ndim, axis = common_dtype(ctx, fields), common_ndim(ctx, fields), ctx.attrs.axis
    if axis is None:  # TVM: concat without an axis joins 1-D tensors
        if ndim not in (-1, 1):
            raise ctx.error(f"axis=None needs 1-D inputs, got rank {ndim}", 0,
                            hint="pass an axis, or flatten the inputs first")
        axis = 0
    if ndim < 0:
        return unknown(dtype)
    axis = normalize_axis(ctx, axis, ndim)
    if any(f.values is None for f in fields):
        return unknown(dtype, ndim)
    dims = match_dims(ctx, [f.values for f in fields], skip=axis)
    if dims is None:
        return unknown(dtype, ndim)
    return tensor(replace_dim(dims, axis, sum((f.values[axis] for f in fields), tir.IntImm(0))),
                  dtype)


def stack_infer(ctx):
    fields = _fields(ctx)
    dtype, ndim = common_dtype(ctx, fields), common_ndim(ctx, fields)
    if ndim < 0:
        return unknown(dtype)
    axis = normalize_axis(ctx, ctx.attrs.axis, ndim + 1)
    if any(f.values is None for f in fields):
        return unknown(dtype, ndim + 1)
    dims = match_dims(ctx, [f.values for f in fields])
    if dims is None:
        return unknown(dtype, ndim + 1)
    return tensor(dims[:axis] + [tir.IntImm(len(fields))] + dims[axis:], dtype)


def _fields(ctx) -> list:
    fields = ctx.tensors(0)
    if not fields:
        raise ctx.error("needs at least one tensor", 0)
    return fields


def split_normalize(attrs: dict, exprs: list) -> dict:
    spec = attrs["indices_or_sections"]
    if isinstance(spec, (int, tir.IntImm)):
        spec = int(spec)
    else:
        spec = tuple(int(v) for v in spec)
    return {**attrs, "indices_or_sections": spec}


def split_infer(ctx):
    data, spec = ctx.tensor(0), ctx.attrs.indices_or_sections
    if isinstance(spec, int) and spec <= 0:
        raise ctx.error(f"indices_or_sections={spec} must be a positive number of sections", 0)
    count = spec if isinstance(spec, int) else len(spec) + 1
    if count == 1:  # TVM returns the input itself, not a 1-tuple
        return data
    if data.ndim < 0:
        return TupleStructInfo([unknown(data.dtype)] * count)
    axis = normalize_axis(ctx, ctx.attrs.axis, data.ndim)
    if data.values is None:
        return TupleStructInfo([unknown(data.dtype, data.ndim)] * count)
    dim = data.values[axis]
    sizes = _section_sizes(dim, spec) if isinstance(spec, int) else _index_sizes(dim, spec)
    return TupleStructInfo([tensor(replace_dim(data.values, axis, s), data.dtype)
                            for s in sizes])


def _section_sizes(dim, sections: int) -> list:
    each = tir.ceildiv(dim, sections)
    if dim.is_const:  # the last sections may be short or empty
        return _index_sizes(dim, [each.value * k for k in range(1, sections)])
    return [each] * (sections - 1) + [dim - each * (sections - 1)]


def _index_sizes(dim, indices) -> list:
    """numpy.split sizes: pieces [0, i0), [i0, i1), ..., [ik, dim); out-of-range clamps."""
    bounds = [tir.min(i, dim) if dim.is_const else tir.convert(i) for i in indices] + [dim]
    sizes, start = [], tir.IntImm(0)
    for b in bounds:
        size = b - start
        sizes.append(tir.max(size, 0) if size.is_const else size)
        start = b
    return sizes


def meshgrid_infer(ctx):
    fields = _fields(ctx)
    if any(f.ndim not in (-1, 1) for f in fields):
        raise ctx.error("inputs must be 1-D tensors", 0)
    dtype = common_dtype(ctx, fields)
    if any(f.values is None for f in fields):
        return TupleStructInfo([unknown(dtype, len(fields))] * len(fields))
    dims = [f.values[0] for f in fields]
    if ctx.attrs.indexing == "xy" and len(dims) > 1:
        dims[0], dims[1] = dims[1], dims[0]
    return TupleStructInfo([tensor(dims, dtype)] * len(fields))


# --------------------------------------------------------------------------------------------
# Shapes as values.

def shape_of_infer(ctx):
    data = ctx.tensor(0)
    return ShapeStructInfo(data.values) if data.values is not None else \
        ShapeStructInfo(ndim=data.ndim)


def tensor_to_shape_infer(ctx):
    data = ctx.tensor(0)
    if data.ndim not in (-1, 1) or data.dtype not in INT_DTYPES + ("void",):
        raise ctx.error(f"needs a 1-D integer tensor, got rank {data.ndim} {data.dtype}", 0)
    length = data.values[0] if data.values is not None else None
    return ShapeStructInfo(ndim=length.value if length is not None and length.is_const else -1)


def shape_to_tensor_infer(ctx):
    s = ctx.sinfo[0]
    if not isinstance(s, ShapeStructInfo):
        raise ctx.error("needs a shape value, e.g. R.shape_of(x)", 0)
    return tensor([s.ndim], "int64") if s.ndim >= 0 else unknown("int64", 1)


def size_infer(ctx):
    ctx.tensor(0)
    return tensor([], "int64")


# --------------------------------------------------------------------------------------------
# layout_transform: the index map is kept as an opaque attr; its simple forms are inferred.

class IndexMap:
    """``T.index_map(lambda a, b: (b, a))``: new indices as expressions of the old ones.

        IndexMap.from_func(lambda n, c, h, w: (n, h, w, c))
    """

    __slots__ = ("final_indices", "initial_indices")

    def __init__(self, initial_indices, final_indices):
        object.__setattr__(self, "initial_indices", tuple(initial_indices))
        object.__setattr__(self, "final_indices", tuple(tir.convert(e) for e in final_indices))

    def __setattr__(self, name, value):
        raise AttributeError("IndexMap is immutable")

    @staticmethod
    def from_func(func) -> IndexMap:
        names = list(inspect.signature(func).parameters)
        variables = [tir.Var(name, "int64") for name in names]
        final = func(*variables)
        return IndexMap(variables, final if isinstance(final, (list, tuple)) else [final])

    def _key(self) -> tuple:
        return (tuple(v.name for v in self.initial_indices),
                tuple(e._key for e in self.final_indices))

    def __eq__(self, other) -> bool:
        return isinstance(other, IndexMap) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __str__(self) -> str:
        params = ", ".join(v.name for v in self.initial_indices)
        body = ", ".join(tir.to_str(e) for e in self.final_indices)
        body += "," if len(self.final_indices) == 1 else ""
        return f"T.index_map(lambda {params}: ({body}))"

    __repr__ = __str__


def layout_transform_normalize(attrs: dict, exprs: list) -> dict:
    index_map = attrs["index_map"]
    if callable(index_map) and not isinstance(index_map, IndexMap):
        index_map = IndexMap.from_func(index_map)
    if not isinstance(index_map, IndexMap):
        raise ValidationError(f"index_map must be a function or an IndexMap, got {index_map!r}",
                              op="layout_transform", param="index_map",
                              hint="e.g. lambda n, c, h, w: (n, h, w, c)")
    return {**attrs, "index_map": index_map}


def layout_transform_infer(ctx):
    data, index_map = ctx.tensor(0), ctx.attrs.index_map
    ndim = len(index_map.final_indices)
    if data.ndim >= 0 and data.ndim != len(index_map.initial_indices):
        raise ctx.error(f"index map takes {len(index_map.initial_indices)} indices but the "
                        f"input has rank {data.ndim}", 0)
    if data.values is None:
        return unknown(data.dtype, ndim)
    extents = dict(zip((v.name for v in index_map.initial_indices), data.values))
    dims = [_index_extent(e, extents) for e in index_map.final_indices]
    return unknown(data.dtype, ndim) if None in dims else tensor(dims, data.dtype)


def _index_extent(e, extents: dict):
    """Extent of an output index: ``a`` -> dim, ``a // 4`` -> ceil(dim / 4), ``a % 4`` -> 4."""
    if isinstance(e, tir.Var):
        return extents.get(e.name)
    if isinstance(e, tir.BinaryOp) and isinstance(e.a, tir.Var) and e.b.is_const:
        rule = _SPLIT_EXTENTS.get(e.op)
        dim = extents.get(e.a.name)
        return rule(dim, e.b) if rule and dim is not None else None
    return None


_SPLIT_EXTENTS = {
    "FloorDiv": tir.ceildiv,
    "FloorMod": lambda dim, factor: factor,
}


# --------------------------------------------------------------------------------------------
# The records.

# Manipulations may return views of their input (reshape, permute_dims, broadcast_to...):
# may_alias, conservatively. The pure reshapes are views: the same data, a new shape.
_manipulate = partial(register, family="manipulate", may_alias=True)
_view = partial(_manipulate, view=True)
_shape = partial(register, family="shape", may_alias=True)
_X = [Arg("x")]
_manipulate("astype", _X, [AttrDef("dtype", "dtype")], infer=astype_infer)
_manipulate("reinterpret", _X, [AttrDef("dtype", "dtype")], infer=reinterpret_infer)
_manipulate("broadcast_to", [Arg("x"), Arg("shape", "shape")], infer=broadcast_to_infer,
            shape_is_output=True)
_manipulate("clip", [Arg("x"), Arg("min", "prim"), Arg("max", "prim")], infer=same_as_input)
_manipulate("where", [Arg("condition"), Arg("x1"), Arg("x2")], infer=where_infer)
_view("reshape", [Arg("x"), Arg("shape", "shape")], infer=reshape_infer, builder=reshape,
      shape_is_output=True)
_view("flatten", _X, infer=flatten_infer)
_view("expand_dims", _X, [AttrDef("axis", "ints")], infer=expand_dims_infer)
_view("squeeze", _X, [AttrDef("axis", "ints", None)], infer=squeeze_infer)
_manipulate("collapse_sum_like", [Arg("data"), Arg("collapse_target")],
            infer=collapse_sum_like_infer)
_manipulate("collapse_sum_to", [Arg("data"), Arg("shape", "shape")],
            infer=collapse_sum_to_infer, shape_is_output=True)
_manipulate("permute_dims", _X, [AttrDef("axes", "ints", None)], infer=permute_dims_infer,
            movement=True)
_manipulate("flip", [Arg("data")], [AttrDef("axis", "int")], infer=flip_infer)
_manipulate("repeat", [Arg("data")], [AttrDef("repeats", "int"), AttrDef("axis", "int", None)],
            infer=repeat_infer)
_manipulate("tile", [Arg("data")], [AttrDef("repeats", "ints")], infer=tile_infer)
_manipulate("concat", [Arg("tensors", "tensors")], [AttrDef("axis", "int", 0)],
            infer=concat_infer)
_manipulate("stack", [Arg("tensors", "tensors")], [AttrDef("axis", "int", 0)],
            infer=stack_infer)
_manipulate("split", _X, [AttrDef("indices_or_sections", "any"), AttrDef("axis", "int", 0)],
            infer=split_infer, normalize=split_normalize)
_manipulate("meshgrid", [Arg("tensors", "tensors")], [AttrDef("indexing", "str", "ij")],
            infer=meshgrid_infer)
_manipulate("layout_transform", _X,
            [AttrDef("index_map", "any"), AttrDef("pad_value", "any", None)],
            infer=layout_transform_infer, normalize=layout_transform_normalize)
_shape("shape_of", [Arg("expr")], infer=shape_of_infer)
_shape("tensor_to_shape", [Arg("expr")], infer=tensor_to_shape_infer)
_shape("shape_to_tensor", [Arg("expr", "any")], infer=shape_to_tensor_infer)
_shape("size", [Arg("expr")], infer=size_infer)
