"""Creation, dtype casts, reductions, sorting and scans.

Dtypes follow torch: creation defaults to float32 (int64 for integer ranges and fills), sums of
bool/int tensors accumulate in int64, ``var``/``std`` are unbiased unless asked otherwise::

    zeros(ctx, 2, 3)                    # -> R.zeros(R.shape([2, 3]), "float32")
    var(ctx, x, 1)                      # -> R.variance(x, [1]) * n / (n - 1)
"""

from __future__ import annotations

import functools
import math

import numpy as np

from msc import relax
from msc.tir import expr as tir

from .common import dtype_of, is_tensor, ndim_of, shape_of, to_dtype, unsupported
from .convert_elementwise import emit_op
from .convert_tensor import sizes

__all__ = ["ATEN", "FUNCTIONS"]

DEFAULT_FLOAT = "float32"
_INTEGRAL = ("bool", "int8", "int16", "int32", "uint8", "uint16", "uint32")


def _fill_dtype(value, dtype) -> str:
    if dtype is not None:
        return to_dtype(dtype)
    if isinstance(value, bool):
        return "bool"
    return "int64" if isinstance(value, (int, tir.PrimExpr)) else DEFAULT_FLOAT


# --------------------------------------------------------------------------------------------
# Creation.

def arange(ctx, start, end=None, step=1, *, dtype=None):
    if end is None:
        start, end = 0, start
    if dtype is None:
        dtype = DEFAULT_FLOAT if any(isinstance(v, float) for v in (start, end, step)) \
            else "int64"
    return ctx.emit(relax.op.arange(start, end, step, dtype=to_dtype(dtype)))


def full(ctx, size, fill_value, *, dtype=None):
    dtype = _fill_dtype(fill_value, dtype)
    return ctx.emit(relax.op.full(list(size), relax.const(fill_value, dtype), dtype))


def _filled(value):
    def convert(ctx, *size, dtype=None):
        dtype = to_dtype(dtype) or DEFAULT_FLOAT
        return ctx.emit(relax.op.full(sizes(size), relax.const(value, dtype), dtype))

    return convert


def _new_filled(value):
    def convert(ctx, input, *size, dtype=None):
        dtype = to_dtype(dtype) or dtype_of(input)
        return ctx.emit(relax.op.full(sizes(size), relax.const(value, dtype), dtype))

    return convert


def new_full(ctx, input, size, fill_value, *, dtype=None):
    return full(ctx, size, fill_value, dtype=dtype or dtype_of(input))


def _like(op_name: str):
    def convert(ctx, input, *, dtype=None, memory_format=None):
        return emit_op(ctx, op_name, input, to_dtype(dtype))

    convert.__name__ = op_name

    return convert


def full_like(ctx, input, fill_value, *, dtype=None, memory_format=None):
    dtype = to_dtype(dtype) or dtype_of(input)
    return ctx.emit(relax.op.full_like(input, relax.const(fill_value, dtype), dtype))


def fill(ctx, input, value):
    """``full(x.shape, value)``: it folds to a constant when the shape is static."""
    dtype = dtype_of(input)
    fill_value = value if is_tensor(value) else relax.const(value, dtype)
    return ctx.emit(relax.op.full(input.struct_info.shape, fill_value, dtype))


def tensor(ctx, data, *, dtype=None):
    value = np.asarray(data)
    if dtype is None and value.dtype == np.float64:
        dtype = DEFAULT_FLOAT
    return relax.const(value, to_dtype(dtype))


def eye(ctx, n, m=None, *, dtype=None):
    return ctx.emit(relax.op.eye(n, n if m is None else m, dtype=to_dtype(dtype) or
                                 DEFAULT_FLOAT))


def linspace(ctx, start, end, steps, *, dtype=None):
    dtype = to_dtype(dtype) or DEFAULT_FLOAT
    if steps == 1:
        return relax.const(np.asarray([start], dtype))
    index = ctx.emit(relax.op.arange(0, steps, 1, dtype=dtype))
    step = relax.const((end - start) / (steps - 1), dtype)
    return ctx.emit(relax.op.add(relax.op.multiply(index, step), relax.const(start, dtype)))


# --------------------------------------------------------------------------------------------
# Casts.

def _cast(ctx, x, dtype):
    """An explicit cast (``x.float()``, ``x.to(dtype)``) is an astype even to the same dtype,
    as TVM imports it; no dtype (``x.to("cpu")``) is no cast."""
    return x if dtype is None else ctx.emit(relax.op.astype(x, to_dtype(dtype)))


def to(ctx, input, *args, dtype=None, **_):
    """``x.to(dtype)``, ``x.to(other)``, ``x.to(device, dtype)``: only the dtype matters."""
    import torch

    for arg in args:
        if isinstance(arg, torch.dtype):
            dtype = arg
        elif is_tensor(arg):
            dtype = dtype_of(arg)
    return _cast(ctx, input, dtype)


_TENSOR_TYPES = {"torch.FloatTensor": "float32", "torch.DoubleTensor": "float64",
                 "torch.HalfTensor": "float16", "torch.LongTensor": "int64",
                 "torch.IntTensor": "int32", "torch.BoolTensor": "bool"}


def type_(ctx, input, dtype=None, non_blocking=False):
    if dtype is None:
        raise unsupported("Tensor.type() without a dtype (returns a string)")
    return _cast(ctx, input, _TENSOR_TYPES.get(dtype, dtype))


def type_as(ctx, input, other):
    return _cast(ctx, input, dtype_of(other))


def _cast_to(dtype: str):
    def convert(ctx, input, memory_format=None):
        return _cast(ctx, input, dtype)

    return convert


def to_copy(ctx, input, *, dtype=None, **_):
    """export's ``_to_copy``/``to``: a cast only where the dtype changes (export writes one
    after most metadata checks)."""
    return input if dtype is None or to_dtype(dtype) == dtype_of(input) else \
        _cast(ctx, input, dtype)


def aten_to(ctx, input, *args, dtype=None, **_):
    import torch

    for arg in args:
        if isinstance(arg, torch.dtype):
            dtype = arg
    return to_copy(ctx, input, dtype=dtype)


# --------------------------------------------------------------------------------------------
# Reductions.

def _axes(dim):
    if dim is None or (isinstance(dim, (list, tuple)) and not dim):
        return None
    return list(dim) if isinstance(dim, (list, tuple)) else [dim]


def _accumulate(ctx, x, dtype):
    """A reduction's input in its accumulation dtype (bool/int sums go int64, as torch)."""
    if dtype is None and dtype_of(x) in _INTEGRAL:
        dtype = "int64"
    return x if dtype is None or to_dtype(dtype) == dtype_of(x) else _cast(ctx, x, dtype)


def sum_(ctx, input, dim=None, keepdim=False, *, dtype=None):
    return ctx.emit(relax.op.sum(_accumulate(ctx, input, dtype), _axes(dim), keepdim))


def mean(ctx, input, dim=None, keepdim=False, *, dtype=None):
    x = input if dtype is None else _cast(ctx, input, dtype)
    return ctx.emit(relax.op.mean(x, _axes(dim), keepdim))


def prod(ctx, input, dim=None, keepdim=False, *, dtype=None):
    return ctx.emit(relax.op.prod(_accumulate(ctx, input, dtype), _axes(dim), keepdim))


def _correction(dim, unbiased, correction):
    """torch.var's overloads: (x, unbiased), (x, dim, unbiased, keepdim), correction=..."""
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    if correction is None:
        correction = 1 if unbiased in (None, True) else 0
    return dim, correction


def var(ctx, input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Relax's variance is biased; torch's default divides by n - 1 (Bessel)."""
    dim, correction = _correction(dim, unbiased, correction)
    out = ctx.emit(relax.op.variance(input, _axes(dim), keepdim))
    if correction == 0:
        return out
    count = 1
    axes = _axes(dim) or range(ndim_of(input))
    for a in axes:
        count = count * shape_of(input)[a]
    if not isinstance(count, int):
        raise unsupported("var/std with a correction over a symbolic dim",
                          hint="give the reduced dims static sizes")
    scale = count / (count - correction) if count > correction else float("nan")
    return ctx.emit(relax.op.multiply(out, relax.const(scale, dtype_of(input))))


def std(ctx, input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return ctx.emit(relax.op.sqrt(var(ctx, input, dim, unbiased, keepdim,
                                      correction=correction)))


def _arg_reduce(op_name: str):
    def convert(ctx, input, dim=None, keepdim=False):
        return emit_op(ctx, op_name, input, dim, keepdim)

    return convert


def norm(ctx, input, p="fro", dim=None, keepdim=False, dtype=None):
    """Vector p-norms: 2 (and "fro"), inf / -inf (max / min of |x|), any other p > 0."""
    axes = _axes(dim)
    if p in ("fro", 2, 2.0):
        squared = relax.op.multiply(input, input)
        return ctx.emit(relax.op.sqrt(relax.op.sum(squared, axes, keepdim)))
    if not isinstance(p, (int, float)) or p <= 0 and p != -math.inf:
        raise unsupported(f"norm with p={p!r}", hint="p-norms with p > 0 or p = +-inf convert")
    magnitude = relax.op.abs(input)
    if math.isinf(p):
        return ctx.emit((relax.op.max if p > 0 else relax.op.min)(magnitude, axes, keepdim))
    if p == 1:
        return ctx.emit(relax.op.sum(magnitude, axes, keepdim))
    const = functools.partial(relax.const, dtype=dtype_of(input))
    total = relax.op.sum(relax.op.power(magnitude, const(p)), axes, keepdim)
    return ctx.emit(relax.op.power(total, const(1.0 / p)))


def linalg_vector_norm(ctx, input, ord=2, dim=None, keepdim=False, *, dtype=None):
    return norm(ctx, input, ord, dim, keepdim, dtype)


def _any_all(reduce: str):
    """any/all as max/min over the values cast to bool."""
    def convert(ctx, input, dim=None, keepdim=False):
        flags = input if dtype_of(input) == "bool" else _cast(ctx, input, "bool")
        return emit_op(ctx, reduce, flags, _axes(dim), keepdim)

    return convert


def logsumexp(ctx, input, dim, keepdim=False):
    axes = _axes(dim)
    peak = ctx.emit(relax.op.max(input, axes, True))
    shifted = relax.op.exp(relax.op.subtract(input, peak))
    out = ctx.emit(relax.op.add(relax.op.log(relax.op.sum(shifted, axes, True)), peak))
    return out if keepdim else ctx.emit(relax.op.squeeze(out, axes))


# --------------------------------------------------------------------------------------------
# Sorting and scans.

def topk(ctx, input, k, dim=-1, largest=True, sorted=True):
    if not sorted:
        raise unsupported("topk with sorted=False")
    return ctx.emit(relax.op.topk(input, k, dim, "both", largest, "int64"))


def sort(ctx, input, dim=-1, descending=False, stable=False):
    indices = ctx.emit(relax.op.argsort(input, dim, descending, "int64"))
    values = ctx.emit(relax.op.gather_elements(input, indices, axis=dim))
    return ctx.emit(relax.Tuple([values, indices]))


def aten_sort_stable(ctx, input, *, stable=False, dim=-1, descending=False):
    return sort(ctx, input, dim, descending)


def argsort(ctx, input, dim=-1, descending=False, stable=False):
    return ctx.emit(relax.op.argsort(input, dim, descending, "int64"))


def _scan(op_name: str):
    def convert(ctx, input, dim, *, dtype=None):
        if dtype is None and dtype_of(input) in _INTEGRAL:
            dtype = "int64"
        return emit_op(ctx, op_name, input, dim, to_dtype(dtype))

    return convert


FUNCTIONS = {
    "arange": arange, "full": full, "zeros": _filled(0), "ones": _filled(1),
    "empty": _filled(0), "new_ones": _new_filled(1), "new_zeros": _new_filled(0),
    "new_empty": _new_filled(0), "new_full": new_full, "zeros_like": _like("zeros_like"),
    "ones_like": _like("ones_like"), "empty_like": _like("zeros_like"), "full_like": full_like,
    "fill": fill, "zero": _like("zeros_like"), "tensor": tensor, "scalar_tensor": tensor,
    "eye": eye, "linspace": linspace, "to": to, "type": type_, "type_as": type_as,
    "astype": to, "float": _cast_to("float32"), "half": _cast_to("float16"),
    "double": _cast_to("float64"), "int": _cast_to("int32"), "long": _cast_to("int64"),
    "bool": _cast_to("bool"), "short": _cast_to("int16"), "byte": _cast_to("uint8"),
    "sum": sum_, "mean": mean, "prod": prod, "var": var, "std": std,
    "argmax": _arg_reduce("argmax"), "argmin": _arg_reduce("argmin"), "norm": norm,
    "any": _any_all("max"), "all": _any_all("min"), "logsumexp": logsumexp, "topk": topk,
    "sort": sort, "argsort": argsort, "cumsum": _scan("cumsum"), "cumprod": _scan("cumprod"),
}

ATEN = {
    "_to_copy": to_copy, "to": aten_to, "sort.stable": aten_sort_stable,
    "linalg_vector_norm": linalg_vector_norm,
    # aten.var.default(self, unbiased): the functional form has dim second
    "var.default": lambda ctx, input, unbiased=True: var(ctx, input, None, unbiased),
    "std.default": lambda ctx, input, unbiased=True: std(ctx, input, None, unbiased),
}
