"""Struct info checks of runtime values: VM arguments and ``R.match_cast`` at run time.

    env = {}
    x = match_value(x, TensorStructInfo([n, 4], "float32"), env, "x")   # binds env["n"]

Symbolic dims are bound from the first value that has them; a later value with another
value for the same dim raises a ShapeError naming both parameters.
"""

from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from ...relax.struct_info import (
    ObjectStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    TensorStructInfo,
    TupleStructInfo,
)
from ...tir import expr as tir
from .arrays import np_dtype, to_numpy

__all__ = ["match_value"]


def _fmt_dims(values) -> str:
    return "(" + ", ".join(tir.to_str(v) for v in values) + ")" if values is not None else "?"


def match_value(value, sinfo, env: dict, param: str, owners: dict | None = None):
    """Check ``value`` against ``sinfo``, binding symbolic dims into ``env``; returns the
    value as the VM holds it (tensors as C-contiguous numpy arrays). ``owners`` remembers
    which parameter bound each dim, for the error message when another one disagrees."""
    handler = _MATCH.get(type(sinfo))
    return handler(value, sinfo, env, param, owners if owners is not None else {}) \
        if handler else value


def _match_tensor(value, sinfo: TensorStructInfo, env, param, owners):
    arr = to_numpy(value, param, contiguous=False)  # checked before any copy is made
    if sinfo.dtype != "void" and arr.dtype != np_dtype(sinfo.dtype):
        raise ShapeError(f"expected dtype {sinfo.dtype}, got {arr.dtype} (shape {arr.shape})",
                         param=param, hint=f"convert with .astype('{sinfo.dtype}')")
    if sinfo.ndim >= 0 and arr.ndim != sinfo.ndim:
        raise ShapeError(f"expected shape {_fmt_dims(sinfo.values)} (rank {sinfo.ndim}), got "
                         f"{arr.shape}", param=param)
    if sinfo.values is not None:
        _match_dims(sinfo.values, arr.shape, env, param, owners, "shape")
    return arr if arr.flags.c_contiguous else np.ascontiguousarray(arr)


def _match_dims(values, shape, env, param, owners, what: str) -> None:
    later = []
    for dim, size in zip(values, shape):
        if isinstance(dim, tir.Var):
            bound = env.get(dim.name)
            if bound is None:
                env[dim.name] = int(size)
                owners[dim.name] = param
            elif bound != size:
                other = owners.get(dim.name, "an earlier binding")
                raise ShapeError(
                    f"dim {dim.name} is {size} here (shape {tuple(shape)}), but {other!r} "
                    f"set {dim.name} = {bound}", param=param,
                    hint=f"{what} {_fmt_dims(values)}: every use of {dim.name} must agree")
        elif dim.is_const:
            if int(dim.value) != size:
                raise ShapeError(f"expected {what} {_fmt_dims(values)}, got {tuple(shape)}",
                                 param=param)
        else:
            later.append((dim, size))
    for dim, size in later:  # compound dims (n * 2): check once every var is bound
        free = [v.name for v in tir.free_vars(dim) if v.name not in env]
        if not free and tir.evaluate(dim, env) != size:
            raise ShapeError(f"expected {what} {_fmt_dims(values)} = "
                             f"{tuple(_eval_or(d, env) for d in values)}, got {tuple(shape)}",
                             param=param)


def _eval_or(dim, env):
    return tir.evaluate(dim, env) if all(v.name in env for v in tir.free_vars(dim)) else str(dim)


def _match_tuple(value, sinfo: TupleStructInfo, env, param, owners):
    if not isinstance(value, (tuple, list)) or len(value) != len(sinfo.fields):
        raise ShapeError(f"expected a tuple of {len(sinfo.fields)} values, got "
                         f"{type(value).__name__}", param=param)
    return tuple(match_value(v, f, env, f"{param}[{i}]", owners)
                 for i, (v, f) in enumerate(zip(value, sinfo.fields)))


def _match_shape(value, sinfo: ShapeStructInfo, env, param, owners):
    dims = tuple(value.numpy() if hasattr(value, "numpy") else value)
    if not all(isinstance(d, (int, np.integer)) for d in dims):
        raise ShapeError(f"expected a shape (tuple of ints), got {value!r}", param=param)
    dims = tuple(int(d) for d in dims)
    if sinfo.ndim >= 0 and len(dims) != sinfo.ndim:
        raise ShapeError(f"expected a shape of {sinfo.ndim} dims, got {dims}", param=param)
    if sinfo.values is not None:
        _match_dims(sinfo.values, dims, env, param, owners, "shape value")
    return dims


def _match_prim(value, sinfo: PrimStructInfo, env, param, owners):
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    if not isinstance(value, (int, float, bool, np.generic)):
        raise ShapeError(f"expected a {sinfo.dtype} scalar, got {type(value).__name__}",
                         param=param)
    if sinfo.value is not None and sinfo.dtype.startswith(("int", "uint")):
        _match_dims((sinfo.value,), (int(value),), env, param, owners, "value")
    return value


_MATCH = {
    TensorStructInfo: _match_tensor,
    TupleStructInfo: _match_tuple,
    ShapeStructInfo: _match_shape,
    PrimStructInfo: _match_prim,
    ObjectStructInfo: lambda value, sinfo, env, param, owners: value,
}
