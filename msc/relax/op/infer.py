"""Shared struct-info inference helpers for op families (broadcasting, axes, reductions).

Inference functions take an ``InferContext`` (see registry.py) and return a StructInfo. They
raise ``ctx.error(...)`` (a ShapeError naming the op and argument) on mismatch.
"""

from __future__ import annotations

from ...tir import expr as tir
from ..struct_info import TensorStructInfo

FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")


def tensor(shape, dtype: str, ndim: int = -1) -> TensorStructInfo:
    """TensorStructInfo from dims (or None for unknown shape with known ``ndim``)."""
    if shape is None:
        return TensorStructInfo(None, dtype, ndim)
    return TensorStructInfo(list(shape), dtype)


def normalize_axis(ctx, axis: int, ndim: int, i: int = 0) -> int:
    if ndim < 0:
        return axis
    if not -ndim <= axis < ndim:
        raise ctx.error(f"axis {axis} is out of range for rank {ndim}", i)
    return axis % ndim


def normalize_axes(ctx, axes, ndim: int, i: int = 0) -> list[int]:
    axes = [axes] if isinstance(axes, int) else list(axes)
    out = [normalize_axis(ctx, a, ndim, i) for a in axes]
    if len(set(out)) != len(out):
        raise ctx.error(f"axes {list(axes)} repeat an axis", i)
    return out


def broadcast_dims(ctx, a: tuple, b: tuple) -> list:
    """numpy broadcasting over PrimExpr dims; a symbolic dim broadcasts against 1 or itself."""
    out = []
    for k in range(max(len(a), len(b))):
        da = a[len(a) - 1 - k] if k < len(a) else tir.IntImm(1)
        db = b[len(b) - 1 - k] if k < len(b) else tir.IntImm(1)
        out.append(_broadcast_dim(ctx, da, db))
    return out[::-1]


def _broadcast_dim(ctx, da, db):
    if da == 1:
        return db
    if db == 1 or da == db:
        return da
    if da.is_const and db.is_const:
        raise ctx.error(f"shapes do not broadcast: dim {da} vs {db}",
                        hint="the two inputs' dims must be equal or 1")
    # A static dim other than 1 wins: the symbolic one must be 1 or equal to it at run time.
    # Symbolic vs symbolic: assume they match, as TVM does, and keep the first.
    return db if db.is_const else da


def broadcast_sinfo(ctx, sinfos: list, dtype: str | None = None) -> TensorStructInfo:
    dtype = dtype or sinfos[0].dtype
    if any(s.values is None for s in sinfos):
        return TensorStructInfo(None, dtype, max(s.ndim for s in sinfos))
    shape = sinfos[0].values
    for s in sinfos[1:]:
        shape = broadcast_dims(ctx, shape, s.values)
    for s in sinfos:  # most often an input's shape: share its (immutable) ShapeExpr
        if len(s.values) == len(shape) and all(a == b for a, b in zip(s.values, shape)):
            return TensorStructInfo(s.shape, dtype)
    return tensor(shape, dtype)


def common_dtype(ctx, sinfos: list) -> str:
    dtypes = {s.dtype for s in sinfos if s.dtype != "void"}
    if len(dtypes) > 1:
        raise ctx.error(f"inputs have different dtypes {sorted(dtypes)}",
                        hint="insert R.astype so both inputs have the same dtype")
    return dtypes.pop() if dtypes else "void"


def same_as_input(ctx) -> TensorStructInfo:
    return ctx.tensor(0)


def reduce_shape(values, axes: list[int], keepdims: bool) -> list:
    if keepdims:
        return [tir.IntImm(1) if i in axes else d for i, d in enumerate(values)]
    return [d for i, d in enumerate(values) if i not in axes]


def reduced(ctx, data: TensorStructInfo, axis, keepdims: bool, dtype: str | None = None):
    """Struct info of a reduction over ``axis`` (None: all axes)."""
    dtype = dtype or data.dtype
    if data.ndim < 0:
        return TensorStructInfo(None, dtype)
    axes = list(range(data.ndim)) if axis is None else normalize_axes(ctx, axis, data.ndim)
    if data.values is None:
        return TensorStructInfo(None, dtype, data.ndim if keepdims else data.ndim - len(axes))
    return tensor(reduce_shape(data.values, axes, keepdims), dtype)


def prod(values) -> tir.PrimExpr:
    out = tir.IntImm(1)
    for v in values:
        out = out * v
    return out


def conv_out_dim(size, kernel, stride: int, pad_before: int, pad_after: int, dilation: int,
                 ceil_mode: bool = False):
    """Output length of a convolution / pooling window along one axis."""
    effective = (kernel - 1) * dilation + 1
    span = size + pad_before + pad_after - effective
    if ceil_mode:
        return tir.floordiv(span + stride - 1, stride) + 1
    return tir.floordiv(span, stride) + 1


# ============================================================================================
# op-nn helpers (conv / pool / norm / image families): layout strings, window attributes,
# window output sizes, dtype rules.

from ...errors import ValidationError  # (imported here: this file is append-only for helpers)

SPATIAL_LETTERS = {1: "W", 2: "HW", 3: "DHW"}


def is_float(dtype: str) -> bool:
    return dtype == "void" or dtype.startswith(("float", "bfloat"))


def require_float(ctx, sinfo: TensorStructInfo, i: int = 0) -> None:
    if not is_float(sinfo.dtype):
        raise ctx.error(f"needs a float tensor, got {sinfo.dtype}", i,
                        hint=f"cast it first: R.astype({ctx.arg_name(i)}, 'float32')")


def provably_differ(a, b) -> bool:
    """True when two dims are known to differ (constants, or a constant difference)."""
    diff = tir.sub(a, b)
    return diff.is_const and diff.value != 0


def shapes_differ(a, b) -> bool:
    """True when two dim lists (None: unknown) provably differ somewhere."""
    if a is None or b is None:
        return False
    return len(a) != len(b) or any(provably_differ(x, y) for x, y in zip(a, b))


def check_dim(ctx, got, want, i: int, what: str, hint: str | None = None) -> None:
    if provably_differ(got, want):
        raise ctx.error(f"{what} is {got}, expected {want}", i, hint=hint)


def check_rank(ctx, sinfo: TensorStructInfo, rank: int, i: int, why: str) -> None:
    if sinfo.ndim >= 0 and sinfo.ndim != rank:
        raise ctx.error(f"has rank {sinfo.ndim}, but {why} needs rank {rank}", i,
                        hint=f"pass a {rank}-D tensor")


def layout_positions(ctx, layout, letters: str, i: int | None, attr: str) -> dict:
    """Letter -> axis of ``layout``, which must be a permutation of ``letters``."""
    if isinstance(layout, str) and sorted(layout) == sorted(letters):
        return {c: k for k, c in enumerate(layout)}
    if isinstance(layout, str) and any(c.islower() or c.isdigit() for c in layout):
        hint = f"packed layouts are not supported; use a primal layout such as {letters!r}"
    else:
        hint = f"use a permutation of the letters {letters!r}"
    raise ctx.error(f"{attr}={layout!r} is not a layout of {letters!r}", i, hint=hint)


def by_letter(values, layout: str) -> dict:
    return dict(zip(layout, values))


def result_dtype(ctx, sinfos: list, out_dtype) -> str:
    """``out_dtype`` when given (inputs may then differ), else the inputs' common dtype."""
    if out_dtype not in (None, "void"):
        return out_dtype
    return common_dtype(ctx, sinfos)


def expand_window(values, n: int, op: str, name: str) -> tuple:
    """strides / dilation / pool_size given as 1 or ``n`` values -> ``n`` values."""
    values = tuple(values)
    if len(values) in (1, n):
        return values * (n // len(values))
    raise ValidationError(f"{name} needs 1 or {n} values, got {list(values)}", op=op,
                          param=name, hint=f"give one value per spatial axis ({n})")


def expand_padding(values, n: int, op: str, name: str = "padding") -> tuple:
    """1 value (every side), ``n`` (before = after) or ``2n`` (all befores, then all afters)."""
    values = tuple(values)
    if len(values) == 1:
        return values * (2 * n)
    if len(values) in (n, 2 * n):
        return values * (2 * n // len(values))
    raise ValidationError(f"{name} needs 1, {n} or {2 * n} values, got {list(values)}",
                          op=op, param=name, hint="give (before..., after...) per spatial axis")


def pool_out_dim(size, kernel, stride: int, pad_before: int, pad_after: int, dilation: int,
                 ceil_mode: bool):
    """Pooling output length; in ceil mode a last window starting in the padding is dropped."""
    out = conv_out_dim(size, kernel, stride, pad_before, pad_after, dilation, ceil_mode)
    if not ceil_mode:
        return out
    # out - 1 == (size + pad_before + slack) // stride with this slack: the last window starts
    # at or after size + pad_before never (slack < 0), always (slack >= stride - 1), or by value.
    slack = stride - 1 + pad_after - ((kernel - 1) * dilation + 1)
    if slack < 0:
        return out
    if slack >= stride - 1:
        return out - 1
    starts_in_pad = tir.binary("GE", (out - 1) * stride, size + pad_before)
    return tir.if_then_else(starts_in_pad, out - 1, out)


def conv_transpose_out_dim(size, kernel, stride: int, pad_before: int, pad_after: int,
                           dilation: int, output_padding: int):
    return ((size - 1) * stride - pad_before - pad_after + (kernel - 1) * dilation
            + output_padding + 1)


# ============================================================================================
# Helpers for the tensor families (defs_manipulate, defs_create, defs_reduce, defs_index,
# defs_linalg, defs_quant; helper "op-tensor").

from ..struct_info import PrimStructInfo, ShapeStructInfo, TupleStructInfo

INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


def with_dtype(sinfo: TensorStructInfo, dtype: str) -> TensorStructInfo:
    """``sinfo`` with another dtype; the shape (or only the rank) is kept."""
    return TensorStructInfo(sinfo.shape, dtype, sinfo.ndim)


def unknown(dtype: str, ndim: int = -1) -> TensorStructInfo:
    """A tensor whose dims are unknown (rank too when ``ndim`` is -1)."""
    return TensorStructInfo(None, dtype, ndim)


def dims_str(values) -> str:
    """``(n, 4)`` for error messages."""
    inner = ", ".join(tir.to_str(tir.convert(v)) for v in values)
    return f"({inner},)" if len(values) == 1 else f"({inner})"


def replace_dim(values, axis: int, dim) -> list:
    return [tir.convert(dim) if k == axis else v for k, v in enumerate(values)]


def nonneg(e) -> tir.PrimExpr:
    """``max(e, 0)``, folded when ``e`` is a constant."""
    return tir.max(e, 0)


def int_attr_values(ctx, i: int, what: str):
    """Values of arg ``i`` given as a tuple of PrimValues or a shape; None when unknown."""
    s = ctx.sinfo[i]
    if isinstance(s, ShapeStructInfo):
        return None if s.values is None else list(s.values)
    if isinstance(s, TupleStructInfo) and all(isinstance(f, PrimStructInfo) for f in s.fields):
        values = [f.value for f in s.fields]
        return None if any(v is None for v in values) else values
    raise ctx.error(f"{what} must be a tuple of integers", i,
                    hint="pass a list of ints, e.g. [0, 1]")


def const_ints(ctx, values, i: int, what: str) -> list[int]:
    """Require constant integers (axes, static attrs)."""
    if values is None or not all(isinstance(v, tir.IntImm) for v in values):
        raise ctx.error(f"{what} must be constant integers, got {values}", i)
    return [v.value for v in values]


def common_ndim(ctx, sinfos: list, i: int = 0) -> int:
    """The rank all ``sinfos`` share (-1 if none is known); ShapeError if two differ."""
    ranks = sorted({s.ndim for s in sinfos if s.ndim >= 0})
    if len(ranks) > 1:
        raise ctx.error(f"inputs have different ranks {ranks}", i,
                        hint="reshape or expand_dims the inputs to one rank first")
    return ranks[0] if ranks else -1


def match_dims(ctx, shapes: list, skip: int | None = None, i: int = 0):
    """Dims that equal-rank ``shapes`` agree on (axis ``skip`` excluded, left None).

    A static disagreement is a ShapeError; a symbolic one (n vs 3, n vs m) cannot be decided
    here, so the result is None (unknown shape), as TVM does.
    """
    out, decided = [], True
    for k, column in enumerate(zip(*shapes)):
        consts = {d.value for d in column if d.is_const}
        if k != skip and len(consts) > 1:
            raise ctx.error(f"dim {k} differs between inputs: {sorted(consts)}", i,
                            hint="all inputs must have the same dims except the joined axis")
        same = all(d == column[0] for d in column)
        decided = decided and (same or k == skip)
        out.append(column[0] if k != skip else None)
    return out if decided else None


def mul_factors(e) -> list:
    """The factors of a product expression: ``n * m * 4`` -> [n, m, 4]."""
    e = tir.convert(e)
    if isinstance(e, tir.BinaryOp) and e.op == "Mul":
        return mul_factors(e.a) + mul_factors(e.b)
    return [e]


def exact_quotient(numerator: list, denominator: list) -> tir.PrimExpr:
    """prod(numerator) // prod(denominator) after cancelling equal factors (reshape's -1)."""
    num = [f for d in numerator for f in mul_factors(d)]
    den = [f for d in denominator for f in mul_factors(d)]
    for f in list(den):
        if not f.is_const and f in num:
            num.remove(f)
            den.remove(f)
    return tir.floordiv(prod(num), prod(den))


def check_broadcastable(ctx, src, target, i: int = 0) -> None:
    """ShapeError unless dims ``src`` broadcast to ``target`` (symbolic dims are accepted)."""
    if len(src) > len(target):
        raise ctx.error(f"shape {dims_str(src)} has more dims than {dims_str(target)}", i,
                        hint="the target shape needs at least as many dims")
    for d, t in zip(reversed(src), reversed(target)):
        if d.is_const and t.is_const and d.value not in (1, t.value):
            raise ctx.error(f"shape {dims_str(src)} does not broadcast to {dims_str(target)}",
                            i, hint="each dim must be 1 or equal the target dim")

