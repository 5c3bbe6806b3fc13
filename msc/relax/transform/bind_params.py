"""BindParams: turn some parameters of a function into constants.

    mod = relax.transform.BindParams("main", {"weight": w_array})(mod)

Keys are parameter names or the parameter Vars themselves; values are numpy arrays (or
Constants, or anything with ``.numpy()``). The bound params leave the signature, symbolic dims
they fix (``R.Tensor(("n", 3))`` bound to a (2, 3) array gives n = 2) are substituted in the
whole function, and a ``num_input`` attr shrinks by the number of bound inputs.
"""

from __future__ import annotations

import numpy as np

from ...errors import ShapeError, ValidationError
from ...tir import expr as tir
from ..expr import Constant, Function, Var, const
from ..module import IRModule
from ..struct_info import TensorStructInfo
from ..visitor import ExprMutator
from .base import ModulePass, PassContext

__all__ = ["BindParams", "bind_params"]


def _to_constant(value) -> Constant:
    if isinstance(value, Constant):
        return value
    if not isinstance(value, np.ndarray) and hasattr(value, "numpy"):
        value = value.numpy()
    return const(np.asarray(value))


def _resolve(func: Function, params: dict) -> dict:
    """{param Var: Constant} from keys that are names or Vars."""
    by_name: dict = {}
    for p in func.params:
        by_name.setdefault(p.name_hint, []).append(p)
    resolved = {}
    for key, value in params.items():
        var = key if isinstance(key, Var) else _param_by_name(by_name, str(key))
        if var is not None:
            resolved[var] = _to_constant(_raw_as_declared(var, value))
    return resolved


def _raw_as_declared(var: Var, value):
    """Raw bytes read as the parameter's dtype: ``np.savez`` keeps bfloat16 / float8 arrays
    (ml_dtypes) as untyped void items, which load back as ``V2`` / ``V1``."""
    sinfo = var.struct_info
    if not (isinstance(value, np.ndarray) and value.dtype.kind == "V" and value.dtype.names
            is None and isinstance(sinfo, TensorStructInfo) and sinfo.dtype != "void"):
        return value
    from ...tir.interp import np_dtype

    declared = np_dtype(sinfo.dtype)
    return value.view(declared) if declared.itemsize == value.dtype.itemsize else value


def _param_by_name(by_name: dict, name: str) -> Var:
    found = by_name.get(name)
    if not found:
        raise ValidationError(f"function has no parameter named {name!r}", param=name,
                              hint=f"parameters: {', '.join(by_name) or '(none)'}")
    if len(found) > 1:
        raise ValidationError(f"several parameters are named {name!r}", param=name,
                              hint="bind by Var instead of by name")
    return found[0]


def _match_shape(var: Var, value: Constant, symbols: dict) -> None:
    """Check ``value`` against ``var``'s struct info; record symbolic dims it fixes."""
    sinfo = var.struct_info
    if not isinstance(sinfo, TensorStructInfo):
        raise ShapeError(f"cannot bind a tensor to a parameter of type {sinfo}",
                         param=var.name_hint)
    shape, dtype = value.data.shape, value.struct_info.dtype
    if sinfo.dtype not in ("void", dtype):
        raise ShapeError(f"expects dtype {sinfo.dtype}, got {dtype}", param=var.name_hint,
                         hint=f"cast the array with .astype('{sinfo.dtype}')")
    if sinfo.ndim not in (-1, len(shape)):
        raise ShapeError(f"expects rank {sinfo.ndim}, got shape {shape}", param=var.name_hint)
    for axis, (dim, size) in enumerate(zip(sinfo.values or (), shape)):
        _match_dim(var, axis, tir.substitute(dim, symbols), size, symbols)


def _match_dim(var: Var, axis: int, dim, size: int, symbols: dict) -> None:
    if isinstance(dim, tir.Var):
        symbols[dim.name] = tir.IntImm(size)
    elif dim.is_const and dim.value != size:
        expected = ", ".join(str(d) for d in var.struct_info.values)
        raise ShapeError(f"dim {axis} is {dim}, the array has {size}", param=var.name_hint,
                         hint=f"the parameter has shape ({expected})")


def bind_params(func: Function, params: dict) -> Function:
    """``func`` with the given params replaced by constants (see BindParams)."""
    bound = _resolve(func, params)
    if not bound:
        return func
    symbols: dict = {}
    for var, value in bound.items():
        _match_shape(var, value, symbols)
    mutator = ExprMutator()
    mutator.tir_var_map = symbols
    for var, value in bound.items():
        mutator.set_var_remap(var, value)
    kept = [p for p in func.params if p not in bound]
    return mutator.visit_expr(Function(kept, func.body, func.ret_struct_info, func.is_pure,
                                       _updated_attrs(func, bound), func.span))


def _updated_attrs(func: Function, bound: dict) -> dict:
    attrs = dict(func.attrs)
    if "num_input" in attrs:
        num_input = int(attrs["num_input"])
        attrs["num_input"] = num_input - sum(p in bound for p in func.params[:num_input])
    return attrs


class BindParams(ModulePass):
    """Bind ``params`` (name or Var -> array) of function ``func_name`` as constants."""

    def __init__(self, func_name: str, params: dict):
        super().__init__()
        self.func_name = func_name
        self.params = dict(params)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        if self.func_name not in mod or not isinstance(mod[self.func_name], Function):
            names = ", ".join(gv.name_hint for gv in mod.get_global_vars())
            raise ValidationError(f"module has no Relax function {self.func_name!r}",
                                  key=self.func_name, hint=f"functions: {names or '(none)'}")
        out = mod.copy()
        out[self.func_name] = bind_params(mod[self.func_name], self.params)
        return out
