"""Calls into other functions (call_tir, packed functions) and the side-effect builtins.

Their output struct info is given by the caller, not inferred: it is stored in
``call.sinfo_args`` as TVM does, and printed under the keyword in ``facts["sinfo_kw"]``::

    relax.op.call_tir(gv, [x], relax.TensorStructInfo((n, 3), "float32"))
    relax.op.call_pure_packed("my_func", x, ty_args=relax.TensorStructInfo((n,), "int64"))
"""

from __future__ import annotations

from ...errors import ValidationError
from ..expr import Attrs, Call, ExternFunc, ShapeExpr, StringImm, Tuple, convert_to_expr
from ..struct_info import ObjectStructInfo, StructInfo, TupleStructInfo
from .registry import Arg, AttrDef, Op, attach, register


def _sinfo_list(op: str, sinfo) -> list:
    items = list(sinfo) if isinstance(sinfo, (list, tuple)) else [sinfo]
    if not items or not all(isinstance(s, StructInfo) for s in items):
        raise ValidationError(f"output struct info must be a StructInfo or a list of them, "
                              f"got {sinfo!r}", op=op,
                              hint="e.g. relax.TensorStructInfo((n, 3), 'float32')")
    return items


def _dps_out(op: str, out_ty, out_sinfo) -> tuple:
    """call_tir / call_dps_packed keep one sinfo arg: the tensor, or a tuple of several."""
    items = _sinfo_list(op, out_ty if out_ty is not None else out_sinfo)
    return (items[0] if len(items) == 1 else TupleStructInfo(items),)


def _func(func):
    return ExternFunc(func) if isinstance(func, str) else func


def _args(args):
    """The callee's arguments as one tuple expression; a lone tensor is wrapped (as TVM)."""
    if isinstance(args, (list, tuple)):
        return Tuple(args)
    is_tuple = isinstance(args, Tuple) or isinstance(args.struct_info, TupleStructInfo)
    return args if is_tuple else Tuple([args])


def _string(text) -> StringImm:
    """The format of print / assert_op: a str, or the R.str(...) a parser read."""
    return text if isinstance(text, StringImm) else StringImm(text)


# --------------------------------------------------------------------------------------------
# Builders with TVM's Python signatures (TVM 0.27 says out_ty; older TVMScript out_sinfo).

def call_tir(gvar, args, out_ty=None, tir_vars=None, *, out_sinfo=None) -> Call:
    """``R.call_tir(gvar, (x, ...), out_ty)``: call a TIR PrimFunc in destination-passing
    style; ``tir_vars`` (older TVM) passes symbolic values as a trailing shape. A function
    *name* (Relax of 2022: ``R.call_tir("env.relu", (x,), ...)``) calls that registered packed
    function, as ``R.call_dps_packed`` does today."""
    if isinstance(gvar, (str, StringImm)) and tir_vars is None:
        return call_dps_packed(gvar, args, out_ty, out_sinfo=out_sinfo)
    extra = [ShapeExpr(tir_vars)] if tir_vars is not None else []
    return Call(Op.get("call_tir"), [gvar, _args(args), *extra], None,
                _dps_out("call_tir", out_ty, out_sinfo))


def call_tir_inplace(gvar, args, inplace_indices, out_ty=None, *, out_sinfo=None) -> Call:
    """``R.call_tir_inplace(gvar, args, inplace_indices, out_ty)``: outputs overwrite
    ``args[i]`` for each index i (-1: a fresh output)."""
    indices = [inplace_indices] if isinstance(inplace_indices, int) else list(inplace_indices)
    return Call(Op.get("call_tir_inplace"), [gvar, _args(args)],
                Attrs({"inplace_indices": tuple(indices)}),
                _dps_out("call_tir_inplace", out_ty, out_sinfo))


def call_dps_packed(func, args, out_ty=None, *, out_sinfo=None) -> Call:
    """``R.call_dps_packed("symbol", (x, ...), out_ty)``: a packed function in DPS."""
    return Call(Op.get("call_dps_packed"), [_func(func), _args(args)], None,
                _dps_out("call_dps_packed", out_ty, out_sinfo))


def call_pure_packed(func, *args, ty_args=None, sinfo_args=None) -> Call:
    """``R.call_pure_packed("symbol", x, y, ty_args=...)``: a packed call known to be pure."""
    sinfo = _sinfo_list("call_pure_packed", ty_args if ty_args is not None else sinfo_args)
    return Call(Op.get("call_pure_packed"), [_func(func), *map(convert_to_expr, args)], None,
                sinfo)


def call_inplace_packed(func, *args, inplace_indices, ty_args=None, sinfo_args=None) -> Call:
    """``R.call_inplace_packed("symbol", x, inplace_indices=[0], ty_args=...)``."""
    indices = [inplace_indices] if isinstance(inplace_indices, int) else list(inplace_indices)
    sinfo = _sinfo_list("call_inplace_packed", ty_args if ty_args is not None else sinfo_args)
    return Call(Op.get("call_inplace_packed"), [_func(func), *map(convert_to_expr, args)],
                Attrs({"inplace_indices": tuple(indices)}), sinfo)


def call_builtin_with_ctx(func, args, *, ty_args=None, sinfo_args=None) -> Call:
    """``R.call_builtin_with_ctx("vm.builtin.x", (x,), ty_args=...)``: a VM builtin."""
    given = ty_args if ty_args is not None else sinfo_args
    sinfo = _sinfo_list("call_builtin_with_ctx", given) if given is not None else []
    return Call(Op.get("call_builtin_with_ctx"), [_func(func), _args(args)], None, sinfo)


def null_value() -> Call:
    """``R.null_value()``: a null object."""
    return Call(Op.get("null_value"), [])


def print(*values, format: str = "") -> Call:
    """``R.print(x, format="x={}")``: prints at run time (impure)."""
    return Call(Op.get("print"), [_string(format), *map(convert_to_expr, values)])


def assert_op(condition, format_args=None, format: str = "") -> Call:
    """``R.assert_op(cond, [x], format="bad {}")``: fails at run time when cond is false."""
    if format_args is None:
        format_args = []
    elif not isinstance(format_args, (list, tuple)):
        format_args = [format_args]
    args = [convert_to_expr(condition), _string(format), *map(convert_to_expr, format_args)]
    return Call(Op.get("assert_op"), args)


# --------------------------------------------------------------------------------------------
# Inference: the given struct info.

def given_sinfo_infer(ctx):
    """call_tir & co: the (single) sinfo arg given by the caller."""
    if not ctx.call.sinfo_args:
        raise ctx.error("has no output struct info", hint="pass out_ty=relax.TensorStructInfo"
                        "(shape, dtype)")
    return ctx.call.sinfo_args[0]


def packed_sinfo_infer(ctx):
    """call_pure_packed / call_inplace_packed / call_builtin_with_ctx: ty_args, a tuple when
    several; an opaque object when none were given."""
    sinfo = ctx.call.sinfo_args
    if not sinfo:
        return ObjectStructInfo()
    return sinfo[0] if len(sinfo) == 1 else TupleStructInfo(sinfo)


def void_infer(ctx):
    if ctx.op_def.name == "assert_op":
        cond = ctx.tensor(0)
        if cond.ndim > 0 or cond.dtype not in ("bool", "void"):
            raise ctx.error(f"condition must be a bool scalar, got rank {cond.ndim} "
                            f"{cond.dtype}", 0)
    return TupleStructInfo([])


def object_infer(ctx):
    return ObjectStructInfo()


_FUNC = Arg("func", "any")
# Every special op is runtime plumbing (no graph op); the calls reach code outside the op
# table (runtime_call); the effects are impure. Outputs may alias inputs (the in-place calls).
_CALL = {"runtime_call": True}
_EFFECT = {"pure": False}
_SPECIALS = [
    # name, args, attrs, infer, builder, keyword that carries the output struct info, traits
    ("call_tir", [Arg("gvar", "any"), Arg("args", "tensors"), Arg("tir_vars", "shape", None)],
     [], given_sinfo_infer, call_tir, "out_ty", _CALL),
    ("call_tir_inplace", [Arg("gvar", "any"), Arg("args", "tensors")],
     [AttrDef("inplace_indices", "ints")], given_sinfo_infer, call_tir_inplace, "out_ty", _CALL),
    ("call_dps_packed", [_FUNC, Arg("args", "tensors")], [], given_sinfo_infer,
     call_dps_packed, "out_ty", _CALL),
    ("call_pure_packed", [_FUNC, Arg("args", "any")], [], packed_sinfo_infer,
     call_pure_packed, "ty_args", _CALL),
    ("call_inplace_packed", [_FUNC, Arg("args", "any")], [AttrDef("inplace_indices", "ints")],
     packed_sinfo_infer, call_inplace_packed, "ty_args", _CALL),
    ("call_builtin_with_ctx", [_FUNC, Arg("args", "tensors")], [], packed_sinfo_infer,
     call_builtin_with_ctx, "ty_args", {**_CALL, **_EFFECT}),
    ("null_value", [], [], object_infer, null_value, None, {}),
    ("print", [Arg("format", "any"), Arg("values", "any")], [], void_infer, print, None, _EFFECT),
    ("assert_op", [Arg("condition"), Arg("format", "any"), Arg("format_args", "any")], [],
     void_infer, assert_op, None, _EFFECT),
]
for _name, _args_, _attrs_, _infer, _builder, _kw, _traits in _SPECIALS:
    register(_name, _args_, _attrs_, infer=_infer, family="special", builder=_builder,
             runtime=True, may_alias=True, **_traits)
    if _kw is not None:
        attach(_name, "sinfo_kw", _kw)
