"""What every torch converter shares: the conversion context, dtypes, scalars and shapes.

A converter is a plain function with the torch target's own signature, preceded by the
context: ``def conv2d(ctx, input, weight, bias=None, stride=1, ...)``. The translator binds
the node's arguments (fx nodes already replaced by Relax values) to that signature once and
calls it; the converter emits Relax calls through ``ctx.emit`` and returns the result. Shapes
are never computed here: ``shape_of`` reads what the BlockBuilder inferred::

    def relu6(ctx, input, inplace=False):
        return ctx.emit(relax.op.clip(input, 0, 6))
"""

from __future__ import annotations

import numpy as np

from msc import relax
from msc.errors import UnsupportedOpError, ValidationError
from msc.relax.expr import Expr
from msc.relax.struct_info import TensorStructInfo, TupleStructInfo
from msc.tir import expr as tir

__all__ = [
    "Context",
    "ParamTable",
    "dtype_of",
    "input_vars",
    "is_tensor",
    "ndim_of",
    "shape_of",
    "to_dtype",
    "unsupported",
]

# torch dtype name -> Relax dtype (torch's names are Relax's, except the aliases).
_DTYPE_ALIASES = {"float": "float32", "double": "float64", "half": "float16", "long": "int64",
                  "int": "int32", "short": "int16", "bool": "bool"}


def to_dtype(dtype) -> str | None:
    """A torch dtype (``torch.float32``), its name or a Relax dtype string -> Relax dtype."""
    if dtype is None:
        return None
    name = str(dtype).removeprefix("torch.")
    return _DTYPE_ALIASES.get(name, name)


def torch_dtype(dtype: str):
    import torch

    return getattr(torch, dtype)


def is_tensor(value) -> bool:
    return isinstance(value, Expr) and isinstance(value.struct_info, TensorStructInfo)


def is_tuple(value) -> bool:
    return isinstance(value, Expr) and isinstance(value.struct_info, TupleStructInfo)


def dtype_of(x: Expr) -> str:
    return x.struct_info.dtype


def ndim_of(x: Expr) -> int:
    return x.struct_info.ndim


def shape_of(x: Expr) -> list:
    """The inferred dims of ``x``: ints where static, PrimExprs where symbolic."""
    values = x.struct_info.values
    if values is None:
        raise ValidationError("the shape of this tensor is unknown", hint="give static or "
                              "named dims in input_info")
    return [v.value if isinstance(v, tir.IntImm) else v for v in values]


def promote(a: str, b: str) -> str:
    """torch's type promotion of two tensor dtypes."""
    import torch

    return to_dtype(torch.promote_types(torch_dtype(a), torch_dtype(b)))


def scalar_dtype(value, like: str) -> str:
    """The dtype of a Python scalar combined with a tensor of dtype ``like`` (torch rules:
    the tensor's dtype wins within its category, a float scalar lifts ints to float32)."""
    if isinstance(value, bool) or like == "bool":
        return like if isinstance(value, bool) else ("float32" if isinstance(value, float)
                                                    else "int64")
    if isinstance(value, float) and not like.startswith(("float", "bfloat")):
        return "float32"
    return like


def unsupported(what: str, hint: str = "", **context) -> UnsupportedOpError:
    """An error for an argument combination a converter does not handle."""
    return UnsupportedOpError(what, hint=hint or "register your own converter with "
                              "custom_convert_map={target: fn}", **context)


# --------------------------------------------------------------------------------------------
# Inputs and parameters.

def input_vars(input_info) -> list:
    """``[(shape, dtype), ...]`` -> Relax params ``inp_0``, ``inp_1``...; a dim given as a string
    is a named symbolic dim, the same name giving the same ``tir.Var``."""
    dims: dict[str, tir.Var] = {}
    params = []
    for idx, (shape, dtype) in enumerate(input_info):
        values = [dims.setdefault(d, tir.Var(d, "int64")) if isinstance(d, str) else int(d)
                  for d in shape]
        params.append(relax.Var(f"inp_{idx}", relax.TensorStructInfo(values, to_dtype(dtype))))
    return params


class ParamTable:
    """Model tensors as Relax constants: one constant per tensor object, named by the first
    key it is reached under (so tied weights stay one shared constant). ``names`` keeps the
    keys of the model's own parameters and buffers; other tensors (constants fx or export
    lifted out of forward) get a constant but no key."""

    def __init__(self, keys=None):
        self._by_tensor: dict[int, relax.Constant] = {}
        self._keep: list = []  # keeps tensors alive so their ids stay unique
        self.keys = None if keys is None else set(keys)
        self.names: dict[relax.Constant, str] = {}

    def get(self, tensor, name: str) -> relax.Constant:
        key = id(tensor)
        if key not in self._by_tensor:
            const = relax.const(_to_numpy(tensor))
            self._by_tensor[key] = const
            self._keep.append(tensor)
            if self.keys is None or name in self.keys:
                self.names[const] = name
        return self._by_tensor[key]


def _to_numpy(tensor) -> np.ndarray:
    import torch

    tensor = tensor.detach().cpu()
    if tensor.dtype == torch.bfloat16:
        raise UnsupportedOpError("bfloat16 weights cannot be held as numpy constants",
                                 hint="convert the model with model.float() first")
    return np.array(tensor.numpy(), copy=True)


# --------------------------------------------------------------------------------------------
# The context converters receive.

class Context:
    """What a converter may use: ``emit``, ``const``, ``param`` and the node being converted
    (``node``, and ``module`` for module calls). One per translation."""

    def __init__(self, bb: relax.BlockBuilder, params: ParamTable):
        self.bb = bb
        self.params = params
        self.node = None
        self.module = None
        self.module_name = ""

    def emit(self, expr) -> Expr:
        return self.bb.emit(expr)

    def const(self, value, dtype: str | None = None) -> relax.Constant:
        return relax.const(value, to_dtype(dtype))

    def tensor(self, value, like: Expr | None = None) -> Expr:
        """A Relax value for ``value``: tensors pass, scalars become constants of the dtype
        torch would give them next to ``like``."""
        if is_tensor(value):
            return value
        if isinstance(value, tir.PrimExpr) and not value.is_const:
            raise unsupported("a symbolic size used as a tensor operand",
                              hint="give that dim a static size in input_info")
        if isinstance(value, tir.PrimExpr):
            value = value.value
        dtype = scalar_dtype(value, dtype_of(like)) if like is not None else None
        return relax.const(value, dtype)

    def param(self, tensor, attr: str = "") -> relax.Constant | None:
        """A module tensor as a constant named ``<module>.<attr>`` (its state_dict key)."""
        if tensor is None:
            return None
        name = f"{self.module_name}.{attr}" if self.module_name else attr
        return self.params.get(tensor, name)

    def cast(self, x: Expr, dtype: str) -> Expr:
        return x if dtype_of(x) == dtype else self.emit(relax.op.astype(x, dtype))
