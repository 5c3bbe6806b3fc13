"""numpy reference implementations of Relax ops, attached to the op table as the "numpy" fact.

Each fact is ``fn(args, attrs) -> np.ndarray | tuple``: ``args`` are the call's argument
values in the op's argument order (tensors as arrays, shapes as tuples of ints, prim values as
Python numbers, tuples of tensors as tuples of arrays), ``attrs`` the call's attrs with TVM's
names and semantics. The attached fact fills the op's AttrDef defaults in (``with_defaults``),
so a fact reads ``attrs["axis"]`` and never repeats a default. FoldConstant evaluates calls
through ``evaluate_call``::

    from msc.relax.op import numpy_ref
    numpy_ref.evaluate_call(call, [np.ones((2, 3), "float32"), (3, 2)])   # reshape

Loaded lazily (by FoldConstant and the tests), not by ``msc.relax.op``.
"""

from __future__ import annotations

import functools

import numpy as np

from ...errors import UnsupportedOpError, ValidationError
from ..expr import Attrs, Constant, DataTypeImm, PrimValue, ShapeExpr, StringImm, Tuple
from ..struct_info import PrimStructInfo, ShapeStructInfo, TensorStructInfo, TupleStructInfo
from . import numpy_ref_image, numpy_ref_nn
from .registry import OPS, attach

__all__ = ["FACTS", "NotConstant", "conform", "evaluate_call", "expr_value"]


# --------------------------------------------------------------------------------------------
# Value helpers shared by the facts.

def ints(value) -> tuple:
    """A shape / axes value (tuple, array, int) as a tuple of Python ints."""
    if value is None:
        return ()
    if np.ndim(value) == 0:
        return (int(value),)
    return tuple(int(v) for v in np.asarray(value).reshape(-1))


def axes_of(axis, ndim: int) -> tuple | None:
    """TVM's ``axis`` attr (None, int, list) as normalized axes; None means all axes."""
    if axis is None:
        return None
    return tuple(a % ndim for a in ints(axis)) if ndim else ()


def _sigmoid(x):
    return np.exp(-np.logaddexp(np.zeros_like(x), -x))


def _trunc_divide(a, b):
    """TVM's ``divide`` truncates on integers (TIR Div), divides on floats."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind in "iub" and b.dtype.kind in "iub":
        q = np.floor_divide(a, b)
        return q + ((np.mod(a, b) != 0) & ((a < 0) != (b < 0)))
    return np.true_divide(a, b)


def _same_dtype(fn):
    """Wrap ``fn`` so the result keeps the first input's dtype (numpy upcasts scalars)."""
    def apply(x, *rest):
        out = fn(x, *rest)
        return np.asarray(out).astype(np.asarray(x).dtype, copy=False)
    return apply


UNARY = {
    "abs": np.abs, "acos": np.arccos, "acosh": np.arccosh, "asin": np.arcsin,
    "asinh": np.arcsinh, "atan": np.arctan, "atanh": np.arctanh, "bitwise_not": np.invert,
    "ceil": np.ceil, "cos": np.cos, "cosh": np.cosh, "erf": _same_dtype(numpy_ref_nn.erf),
    "exp": np.exp, "floor": np.floor, "log": np.log, "negative": np.negative, "round": np.round,
    "rsqrt": _same_dtype(lambda x: 1 / np.sqrt(x)), "sigmoid": _sigmoid, "sign": np.sign,
    "sin": np.sin, "sinh": np.sinh, "square": np.square, "sqrt": np.sqrt, "tan": np.tan,
    "tanh": np.tanh, "trunc": np.trunc, "logical_not": np.logical_not,
    "isfinite": np.isfinite, "isinf": np.isinf, "isnan": np.isnan,
}

BINARY = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": _trunc_divide,
    "floor_divide": np.floor_divide, "floor_mod": np.mod, "mod": np.fmod, "power": np.power,
    "maximum": np.maximum, "minimum": np.minimum, "bitwise_and": np.bitwise_and,
    "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor, "left_shift": np.left_shift,
    "right_shift": np.right_shift, "log_add_exp": np.logaddexp, "atan2": np.arctan2,
    "equal": np.equal, "not_equal": np.not_equal, "less": np.less,
    "less_equal": np.less_equal, "greater": np.greater, "greater_equal": np.greater_equal,
    "logical_and": np.logical_and, "logical_or": np.logical_or,
    "logical_xor": np.logical_xor, "outer": np.multiply.outer,
}


def _elementwise(fn):
    return lambda args, attrs: fn(*args)


# --------------------------------------------------------------------------------------------
# Manipulation.

def _reshape(args, attrs):
    return np.reshape(args[0], ints(args[1]))


def _permute_dims(args, attrs):
    axes = attrs["axes"]
    return np.transpose(args[0], None if axes is None else ints(axes))


def _expand_dims(args, attrs):
    return np.expand_dims(args[0], ints(attrs["axis"]))


def _squeeze(args, attrs):
    x = args[0]
    axis = attrs["axis"]
    if axis is None:
        return np.squeeze(x)
    return np.squeeze(x, tuple(a for a in axes_of(axis, x.ndim) if x.shape[a] == 1))


def _concat(args, attrs):
    axis = attrs["axis"]
    if axis is None:
        return np.concatenate([np.ravel(t) for t in args[0]])
    return np.concatenate(args[0], axis=axis)


def _split(args, attrs):
    x, axis = args[0], attrs["axis"]
    sections = attrs["indices_or_sections"]
    if np.ndim(sections) == 0:
        size = -(-x.shape[axis] // int(sections))
        sections = [min(size * i, x.shape[axis]) for i in range(1, int(sections))]
    return tuple(np.split(x, ints(sections), axis=axis))


def _strided_slice(args, attrs):
    x, axes, begin, end = args[0], ints(args[1]), ints(args[2]), ints(args[3])
    strides = ints(args[4]) if len(args) > 4 else (1,) * len(axes)
    index = [slice(None)] * x.ndim
    for axis, b, e, s in zip(axes, begin, end, strides):
        index[axis] = slice(b, e, s)
    return x[tuple(index)]


def _dynamic_strided_slice(args, attrs):
    x = args[0]
    begin, end, strides = ints(args[1]), ints(args[2]), ints(args[3])
    return x[tuple(slice(b, e, s) for b, e, s in zip(begin, end, strides))]


def _cumulative(ufunc):
    def apply(args, attrs):
        x, axis = np.asarray(args[0]), attrs["axis"]
        if axis is None:
            x, axis = np.ravel(x), 0
        out = ufunc.accumulate(x, axis=axis, dtype=_fill_dtype(attrs))
        return _shift_exclusive(out, axis, ufunc.identity) if attrs["exclusive"] else out
    return apply


def _shift_exclusive(out, axis: int, identity):
    """Exclusive scan: shift the inclusive scan by one along ``axis``."""
    pad = [(0, 0)] * out.ndim
    pad[axis] = (1, 0)
    shifted = np.pad(out, pad, constant_values=identity)
    return np.take(shifted, range(out.shape[axis]), axis=axis)


def _take(args, attrs):
    x, indices, axis = args[0], np.asarray(args[1]), attrs["axis"]
    mode = {"clip": "clip", "wrap": "wrap"}.get(attrs["mode"], "raise")
    if axis is None:
        x, axis = np.ravel(x), 0
    if mode == "wrap" and x.shape[axis]:
        # numpy's wrap mode steps by the dim (9e18 / 3 steps for int64 max: a hang)
        indices, mode = np.mod(indices, x.shape[axis]), "raise"
    return np.take(x, indices, axis=axis, mode=mode)


def _gather_nd(args, attrs):
    # ONNX / TVM Relax semantics: the LAST axis of indices holds the index tuple.
    data, indices = args[0], np.asarray(args[1])
    batch = int(attrs["batch_dims"])
    if batch == 0:
        return data[tuple(np.moveaxis(indices, -1, 0))]
    return np.stack([_gather_nd([d, i], Attrs({"batch_dims": batch - 1}))
                     for d, i in zip(data, indices)])


_SCATTER_UFUNCS = {"add": np.add, "mul": np.multiply, "min": np.minimum, "max": np.maximum}


def _scatter_elements(args, attrs):
    data, indices, updates = (np.asarray(a) for a in args[:3])
    axis = int(attrs["axis"]) % data.ndim
    out = data.copy()
    grid = list(np.indices(indices.shape, sparse=True))
    grid[axis] = indices
    _scatter(out, tuple(grid), updates, attrs["reduction"])
    return out


def _scatter_nd(args, attrs):
    data, indices, updates = (np.asarray(a) for a in args[:3])
    out = data.copy()
    index = tuple(np.moveaxis(indices, -1, 0))  # last axis = index tuple, as gather_nd
    _scatter(out, index, updates, attrs["reduction"])
    return out


def _scatter(out, index, updates, reduction: str) -> None:
    if reduction == "update":
        out[index] = updates
    else:
        _SCATTER_UFUNCS[reduction].at(out, index, updates)


def _one_hot(args, attrs):
    indices, on_value, off_value = np.asarray(args[0]), args[1], args[2]
    depth, axis = int(attrs["depth"]), int(attrs["axis"])
    hot = np.expand_dims(indices, -1) == np.arange(depth)
    out = np.where(hot, on_value, off_value)
    return np.moveaxis(out, -1, axis % out.ndim)


def _where(args, attrs):
    return np.where(*args)


def _clip(args, attrs):
    x = args[0]
    return np.clip(x, args[1], args[2]).astype(x.dtype)


def _collapse_sum_to(args, attrs):
    data, shape = args[0], ints(args[1])
    lead = data.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(shape)
                                      if d == 1 and data.shape[lead + i] != 1)
    return np.sum(data, axis=axes).reshape(shape)


def _tile(args, attrs):
    return np.tile(args[0], ints(attrs["repeats"]))


def _repeat(args, attrs):
    return np.repeat(args[0], int(attrs["repeats"]), axis=attrs["axis"])


def _flip(args, attrs):
    return np.flip(args[0], axis=ints(attrs["axis"]))


def _sort(args, attrs):
    x, axis = args[0], attrs["axis"]
    out = np.sort(x, axis=axis, kind="stable")
    return np.flip(out, axis=axis) if attrs["descending"] else out


def _argsort(args, attrs):
    x, axis = args[0], attrs["axis"]
    key = -x if attrs["descending"] and x.dtype.kind != "b" else x
    return np.argsort(key, axis=axis, kind="stable")


def _topk(args, attrs):
    x, axis, k = args[0], int(attrs["axis"]), int(attrs["k"])
    largest = attrs["largest"]
    order = np.argsort(-x if largest else x, axis=axis, kind="stable")
    dim = x.shape[axis]
    k = dim if k < 1 else min(k, dim)  # as topk_infer (and TVM): k past the end is clipped
    indices = np.take(order, range(k), axis=axis)
    values = np.take_along_axis(x, indices, axis=axis)
    ret = attrs["ret_type"]
    return {"both": (values, indices), "values": values, "indices": indices}[ret]


def _index_put(args, attrs):
    out = np.array(args[0], copy=True)
    index = tuple(np.asarray(i) for i in args[1])
    if attrs["accumulate"]:
        np.add.at(out, index, args[2])
    else:
        out[index] = args[2]
    return out


def _slice_scatter(args, attrs):
    out, axis = np.array(args[0], copy=True), int(attrs["axis"])
    index = [slice(None)] * out.ndim
    index[axis] = slice(int(args[2]), int(args[3]), int(args[4]))
    out[tuple(index)] = args[1]
    return out


def _index_copy(args, attrs):
    out, axis = np.array(args[0], copy=True), int(attrs["axis"]) % np.ndim(args[0])
    at = (slice(None),) * axis + (np.asarray(args[1]),)
    out[at] = args[2]
    return out


def _reverse_sequence(args, attrs):
    out = np.array(args[0], copy=True)
    seq, batch = int(attrs["seq_axis"]), int(attrs["batch_axis"])
    for b, length in enumerate(np.asarray(args[1]).reshape(-1)):
        index = [slice(None)] * out.ndim
        index[batch], index[seq] = b, slice(0, int(length))
        out[tuple(index)] = np.flip(out[tuple(index)], axis=seq - (seq > batch))
    return out


def _bucketize(args, attrs):
    side = "right" if attrs["right"] else "left"
    out = np.searchsorted(np.asarray(args[1]), args[0], side=side)
    return out.astype(np.int32 if attrs["out_int32"] else np.int64)


def _hamming_window(args, attrs):
    size, periodic, alpha, beta = int(args[0]), bool(args[1]), float(args[2]), float(args[3])
    if size == 1:
        return np.ones(1)
    n = size if periodic else size - 1
    return alpha - beta * np.cos(2 * np.pi * np.arange(size) / n)


def _unique(args, attrs):
    """TVM's unique: values (sorted, or in order of first occurrence) and, per flag, the
    first indices, the inverse and the counts (all int64)."""
    x, is_sorted, flags = args[0], bool(args[1]), [bool(f) for f in args[2:5]]
    axis = args[5] if len(args) > 5 else None
    values, first, inverse, counts = np.unique(x, True, True, True, axis=axis)
    if not is_sorted:
        order = np.argsort(first, kind="stable")
        rank = np.argsort(order)
        values = np.take(values, order, axis=axis or 0)
        first, inverse, counts = first[order], rank[np.reshape(inverse, -1)], counts[order]
    extra = [v.astype(np.int64) for v, f in zip((first, inverse, counts), flags) if f]
    return (values, *extra) if extra else values


_INDEX_OPS = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "FloorDiv": np.floor_divide,
              "FloorMod": np.mod, "Min": np.minimum, "Max": np.maximum}


def _index_value(e, env: dict):
    """A layout_transform index expression evaluated on arrays of the input indices."""
    if e.is_const:
        return e.value
    if e.kind == "Var":
        return env[e.name]
    if e.kind not in _INDEX_OPS:
        raise UnsupportedOpError(f"index expression {e} has no numpy reference",
                                 op="layout_transform")
    return _INDEX_OPS[e.kind](_index_value(e.a, env), _index_value(e.b, env))


def _layout_transform(args, attrs):
    """Scatter every element to its new index; the rest (padding) is ``pad_value``."""
    x, index_map = np.asarray(args[0]), attrs["index_map"]
    env = dict(zip((v.name for v in index_map.initial_indices), np.indices(x.shape)))
    index = [np.broadcast_to(_index_value(e, env), x.shape) for e in index_map.final_indices]
    shape = tuple(int(i.max()) + 1 if i.size else 0 for i in index)
    pad = attrs["pad_value"]
    out = np.full(shape, getattr(pad, "value", pad) or 0, x.dtype)
    out[tuple(index)] = x
    return out


MANIPULATE = {
    "reshape": _reshape, "permute_dims": _permute_dims, "expand_dims": _expand_dims,
    "squeeze": _squeeze, "flatten": lambda args, attrs: np.ravel(args[0]),
    "concat": _concat, "split": _split, "stack": lambda a, t: np.stack(a[0], t["axis"]),
    "broadcast_to": lambda args, attrs: np.broadcast_to(args[0], ints(args[1])).copy(),
    "strided_slice": _strided_slice, "dynamic_strided_slice": _dynamic_strided_slice,
    "take": _take, "gather_elements": lambda a, t: np.take_along_axis(a[0], a[1],
                                                                      t["axis"]),
    "gather_nd": _gather_nd, "scatter_elements": _scatter_elements,
    "scatter_nd": _scatter_nd, "one_hot": _one_hot, "where": _where, "clip": _clip,
    "astype": lambda args, attrs: np.asarray(args[0]).astype(attrs["dtype"]),
    "reinterpret": lambda args, attrs: _contiguous(args[0]).view(attrs["dtype"]),
    "cumsum": _cumulative(np.add), "cumprod": _cumulative(np.multiply),
    "collapse_sum_to": _collapse_sum_to,
    "collapse_sum_like": lambda a, t: _collapse_sum_to([a[0], np.shape(a[1])], t),
    "tile": _tile, "repeat": _repeat, "flip": _flip, "sort": _sort, "argsort": _argsort,
    "det": lambda args, attrs: np.linalg.det(args[0]).astype(args[0].dtype),
    "topk": _topk, "nonzero": lambda args, attrs: np.stack(np.nonzero(args[0])),
    "einsum": lambda args, attrs: np.einsum(attrs["subscripts"], *args[0]),
    "matmul": lambda args, attrs: np.matmul(args[0], args[1]),
    "tril": lambda args, attrs: np.tril(args[0], _k(args, attrs)),
    "triu": lambda args, attrs: np.triu(args[0], _k(args, attrs)),
    "shape_of": lambda args, attrs: tuple(np.shape(args[0])),
    "shape_to_tensor": lambda args, attrs: np.asarray(args[0], dtype=np.int64),
    "tensor_to_shape": lambda args, attrs: ints(args[0]),
    "size": lambda args, attrs: np.asarray(np.size(args[0]), dtype=np.int64),
    "meshgrid": lambda a, t: tuple(np.meshgrid(*a[0], indexing=t["indexing"])),
    "index_tensor": lambda args, attrs: args[0][tuple(np.asarray(i) for i in args[1])],
    "index_put": _index_put, "slice_scatter": _slice_scatter, "index_copy": _index_copy,
    "reverse_sequence": _reverse_sequence, "bucketize": _bucketize,
    "hamming_window": _hamming_window, "unique": _unique,
    "layout_transform": _layout_transform,
}


def _k(args, attrs) -> int:
    # k is an expression argument of tril/triu (Arg default 0), not an attribute.
    return int(args[1]) if len(args) > 1 else 0


# --------------------------------------------------------------------------------------------
# Creation.

def _fill_dtype(attrs, like=None):
    dtype = attrs.get("dtype")  # ones/zeros declare dtype REQUIRED: no default fills it
    return dtype if dtype not in (None, "", "void") else getattr(like, "dtype", None)


CREATE = {
    "full": lambda a, t: np.full(ints(a[0]), a[1], _fill_dtype(t, np.asarray(a[1]))),
    "full_like": lambda a, t: np.full_like(a[0], a[1], _fill_dtype(t, a[0])),
    "ones": lambda a, t: np.ones(ints(a[0]), _fill_dtype(t)),
    "zeros": lambda a, t: np.zeros(ints(a[0]), _fill_dtype(t)),
    "ones_like": lambda a, t: np.ones_like(a[0], _fill_dtype(t, a[0])),
    "zeros_like": lambda a, t: np.zeros_like(a[0], _fill_dtype(t, a[0])),
    "arange": lambda a, t: np.arange(*a[:3], dtype=_fill_dtype(t)),
    "eye": lambda a, t: np.eye(int(a[0]), int(a[1]), int(a[2]), _fill_dtype(t)),
    "eye_like": lambda a, t: np.eye(*np.shape(a[0]), int(a[1]), _fill_dtype(t, a[0])),
}


# --------------------------------------------------------------------------------------------
# Reductions.

def _reduce(fn, **extra):
    def apply(args, attrs):
        x = np.asarray(args[0])
        axis = axes_of(attrs["axis"], x.ndim)
        return fn(x, axis=axis, keepdims=bool(attrs["keepdims"]), **extra)
    return apply


def _arg_reduce(fn):
    def apply(args, attrs):
        x, axis = np.asarray(args[0]), attrs["axis"]
        keepdims = bool(attrs["keepdims"])
        if axis is None:
            out = fn(x.reshape(-1))
            return np.reshape(out, (1,) * x.ndim) if keepdims else np.asarray(out)
        return fn(x, axis=int(axis), keepdims=keepdims)
    return apply


def _median(args, attrs):
    """The lower median (as torch and TVM); along one axis also its index."""
    x, axis = np.asarray(args[0]), attrs["axis"]
    keepdims = bool(attrs["keepdims"])
    if axis is None:
        value = np.sort(x, axis=None)[(x.size - 1) // 2]
        return np.reshape(value, (1,) * x.ndim) if keepdims else np.asarray(value)
    axis = axes_of(axis, x.ndim)[0]
    order = np.take(np.argsort(x, axis=axis, kind="stable"), [(x.shape[axis] - 1) // 2], axis)
    values = np.take_along_axis(x, order, axis=axis)
    if not keepdims:
        values, order = values.squeeze(axis), order.squeeze(axis)
    return values, order


REDUCE = {
    "sum": _reduce(np.sum), "mean": _reduce(np.mean), "max": _reduce(np.max),
    "min": _reduce(np.min), "prod": _reduce(np.prod), "std": _reduce(np.std),
    "variance": _reduce(np.var), "median": _median,
    "argmax": _arg_reduce(np.argmax), "argmin": _arg_reduce(np.argmin),
}


# --------------------------------------------------------------------------------------------
# The fact table and evaluation.

FACTS: dict = {
    **{name: _elementwise(fn) for name, fn in UNARY.items()},
    **{name: _elementwise(fn) for name, fn in BINARY.items()},
    **MANIPULATE, **CREATE, **REDUCE, **numpy_ref_nn.FACTS, **numpy_ref_image.FACTS,
}


def with_defaults(fn, defaults: dict):
    """``fn`` reading the op's AttrDef defaults under the call's attrs: the one place the
    facts get their defaults, so a partial attrs (a hand-built call, a test) sees what the op
    declares and no fact repeats a default. Callers keep calling ``fn(args, attrs)``."""
    if not defaults:
        return fn

    @functools.wraps(fn)
    def apply(args, attrs):
        merged = defaults.copy()
        if attrs is not None:
            merged.update(attrs.items())  # items(): a C-level merge for Attrs and dicts
        return fn(args, merged)
    return apply


def _attach_all() -> None:
    for name, fn in FACTS.items():
        if name in OPS:
            attach(name, "numpy", with_defaults(fn, OPS[name].optional_defaults))


_attach_all()


class NotConstant(ValidationError):
    """An argument whose value is not known at compile time."""


def _prim_value(expr: PrimValue):
    if not expr.value.is_const:
        raise NotConstant("symbolic prim value")
    return expr.value.value


def _shape_value(expr: ShapeExpr) -> tuple:
    if not all(v.is_const for v in expr.values):
        raise NotConstant("symbolic shape")
    return tuple(int(v.value) for v in expr.values)


_VALUE_OF = {
    Constant: lambda e: e.data,
    ShapeExpr: _shape_value,
    PrimValue: _prim_value,
    StringImm: lambda e: e.value,
    DataTypeImm: lambda e: e.value,
    Tuple: lambda e: tuple(expr_value(f) for f in e.fields),
}


def _contiguous(x) -> np.ndarray:
    """``x`` as a C-contiguous array of the same rank (ascontiguousarray makes 0-d 1-d)."""
    x = np.asarray(x)
    return x if x.flags.c_contiguous else x.copy(order="C")


def expr_value(expr):
    """The compile-time value of a constant-like expr; NotConstant for anything else."""
    handler = _VALUE_OF.get(type(expr))
    if handler is None:
        raise NotConstant(f"{type(expr).__name__} is not a constant")
    return handler(expr)


def conform(value, sinfo):
    """Cast ``value`` to what struct info says (numpy may upcast: int mean, scalar ops)."""
    if isinstance(sinfo, TensorStructInfo):
        arr = np.asarray(value)
        return arr if sinfo.dtype == "void" else arr.astype(sinfo.dtype, copy=False)
    if isinstance(sinfo, TupleStructInfo):
        return tuple(conform(v, f) for v, f in zip(value, sinfo.fields))
    if isinstance(sinfo, ShapeStructInfo):
        return ints(value)
    if isinstance(sinfo, PrimStructInfo):
        return np.asarray(value).astype(sinfo.dtype).item()
    return value


def evaluate_call(call, arg_values):
    """Run the numpy fact of ``call.op`` on ``arg_values``; the result follows the call's
    struct info (dtype) when the call has been normalized."""
    op_def = call.op.op_def
    fn = op_def.facts.get("numpy")
    if fn is None:
        raise UnsupportedOpError("op has no numpy reference implementation", op=op_def.name,
                                 hint="attach one in msc/relax/op/numpy_ref.py")
    attrs = call.attrs if call.attrs is not None else Attrs()
    with np.errstate(all="ignore"):
        value = fn(list(arg_values), attrs)
    return conform(value, call.struct_info)
