"""Calls into the runtime, rows of :data:`SPECIAL` keyed by op name: ``call_tir`` and
``call_tir_inplace`` (a PrimFunc of the module, compiled, else interpreted), the packed calls
(``call_dps_packed``, ``call_pure_packed``, ``call_inplace_packed``, ``call_builtin_with_ctx``,
a call of an ExternFunc), ``print``, ``assert_op`` and ``null_value``. Each handler turns the
call into an :class:`~msc.backend.kernels.base.Impl` at build time::

    impl = special(call, lower, module)            # None for ordinary ops
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...errors import BuildError, RuntimeCallError, ShapeError
from ...relax.expr import ExternFunc, GlobalVar, Tuple
from ...relax.struct_info import ObjectStructInfo, TensorStructInfo, TupleStructInfo
from ...tir.function import PrimFunc
from ...tir.interp import run_prim_func
from ..kernels.base import Impl
from ..lowering.compile import compile_prim_func
from ..runtime import packed
from ..runtime.arrays import np_dtype, to_numpy

__all__ = ["SPECIAL", "special", "tensor_fields"]


def tensor_fields(sinfo, what: str) -> tuple:
    """The output tensor struct infos of a call (a tensor, or a tuple of tensors)."""
    if isinstance(sinfo, TensorStructInfo):
        return (sinfo,)
    if isinstance(sinfo, TupleStructInfo) and all(
            isinstance(f, TensorStructInfo) for f in sinfo.fields):
        return sinfo.fields
    raise BuildError(f"{what} needs tensor (or tuple of tensor) out_sinfo, got {sinfo}")


def _out_sinfo(call, what: str):
    if not call.sinfo_args:
        raise BuildError(f"{what} without out_sinfo", op=what,
                         hint="pass out_sinfo=R.Tensor(shape, dtype)")
    return call.sinfo_args[0]


def _flat_args(args, lower: Callable) -> list:
    ids = []
    for arg in args:
        fields = arg.fields if isinstance(arg, Tuple) else (arg,)
        ids.extend(lower(f) for f in fields)
    return ids


def _extern_name(expr, what: str) -> str:
    if isinstance(expr, ExternFunc):
        return expr.global_symbol
    value = getattr(expr, "value", None)
    if isinstance(value, str):
        return value
    raise BuildError(f"{what}: the callee must be an extern function name", op=what)


def _dps_result(outs: tuple):
    return outs[0] if len(outs) == 1 else outs


def _packed_dps(call, lower, module) -> Impl:
    name = _extern_name(call.args[0], "call_dps_packed")
    outs = tensor_fields(_out_sinfo(call, "call_dps_packed"), "call_dps_packed")
    single = isinstance(call.sinfo_args[0], TensorStructInfo)
    inputs = _flat_args(call.args[1:], lower)
    n_in = len(inputs)
    own = _own_prim_func(module, name)
    call_it, path = (_call_packed, "packed") if own is None else _prefer_registered(own, name)

    def run(*args):
        call_it(name, args)
        return args[n_in] if single else tuple(args[n_in:])

    return Impl(run, inputs, outs, path, extra={"func": name})


def _own_prim_func(module, name: str):
    """The module's PrimFunc called ``name`` (by global var or global_symbol), or None: TVM's
    built library exports its prim funcs by name, so ``call_dps_packed("linear0", ...)``
    reaches the module's ``linear0``."""
    for gvar in module.get_global_vars() if module is not None else ():
        func = module[gvar]
        if isinstance(func, PrimFunc) and name in (gvar.name_hint,
                                                   func.attrs.get("global_symbol")):
            return func
    return None


def _prefer_registered(func: PrimFunc, name: str):
    """(caller, path): a function registered under ``name`` wins, as in TVM, looked up on
    every call so a later registration takes over; else the module's compiled PrimFunc."""
    kernel, path = _tir_kernel(func, name)

    def call_it(_, args):
        if packed.lookup(name) is not None:
            return _call_packed(name, args)
        return kernel(*args)

    return call_it, path


def _packed_pure(call, lower, module, start: int = 1, args=None) -> Impl:
    """A packed call returning its result; ``args``: the value ids passed (default: the
    call's args from ``start``)."""
    what = getattr(call.op, "name", "call_pure_packed").removeprefix("relax.")
    name = _extern_name(call.args[0] if start else call.op, what)
    sinfo = call.struct_info or (call.sinfo_args[0] if call.sinfo_args else ObjectStructInfo())
    check = _result_checker(sinfo, name)

    def run(*values):
        return check(_call_packed(name, values))

    ids = args if args is not None else [lower(a) for a in call.args[start:]]
    return Impl(run, ids, (), "packed", aliases=True, extra={"func": name})


def _packed_extern(call, lower, module) -> Impl:
    return _packed_pure(call, lower, module, start=0)


def _call_packed(name: str, args: tuple):
    func = packed.lookup(name)
    if func is None:
        raise packed.missing_error(name)
    try:
        return func(*args)
    except Exception as exc:  # a user function: report it with its name, keep the cause
        raise RuntimeCallError(f"packed function raised {type(exc).__name__}: {exc}",
                               key=name) from exc


def _result_checker(sinfo, name: str) -> Callable:
    """Packed results become numpy and must match their declared struct info."""
    if isinstance(sinfo, TensorStructInfo):
        return lambda v: _check_tensor(to_numpy(v, name), sinfo, name)
    if isinstance(sinfo, TupleStructInfo):
        fields = [_result_checker(f, name) for f in sinfo.fields]
        return lambda v: tuple(f(x) for f, x in zip(fields, _as_tuple(v, len(fields), name)))
    return lambda v: v


def _as_tuple(v, n: int, name: str) -> tuple:
    if not isinstance(v, (tuple, list)) or len(v) != n:
        raise RuntimeCallError(f"expected a tuple of {n} results, got {type(v).__name__}",
                               key=name)
    return tuple(v)


def _check_tensor(arr: np.ndarray, sinfo: TensorStructInfo, name: str) -> np.ndarray:
    if sinfo.dtype != "void" and arr.dtype != np_dtype(sinfo.dtype):
        raise RuntimeCallError(f"returned dtype {arr.dtype}, declared {sinfo.dtype}", key=name)
    if sinfo.ndim >= 0 and arr.ndim != sinfo.ndim:
        raise RuntimeCallError(f"returned shape {arr.shape}, declared rank {sinfo.ndim}",
                               key=name)
    dims = sinfo.values or ()
    if any(d.is_const and int(d.value) != s for d, s in zip(dims, arr.shape)):
        raise RuntimeCallError(f"returned shape {arr.shape}, declared "
                               f"{tuple(str(d) for d in dims)}", key=name)
    return arr


def _module_prim_func(call, module, what: str):
    """(PrimFunc, name) of the module function a call_tir(_inplace) calls; BuildError else."""
    gvar = call.args[0]
    func = module[gvar] if isinstance(gvar, GlobalVar) and gvar in module else None
    name = getattr(gvar, "name_hint", "?")
    if not isinstance(func, PrimFunc):
        names = [g.name_hint for g in module.get_global_vars()]
        raise BuildError(f"{what} needs a TIR PrimFunc of the module", op=what, key=name,
                         hint=f"module functions: {names}")
    return func, name


def _call_tir(call, lower, module) -> Impl:
    func, name = _module_prim_func(call, module, "call_tir")
    outs = tensor_fields(_out_sinfo(call, "call_tir"), "call_tir")
    single = isinstance(call.sinfo_args[0], TensorStructInfo)
    inputs = _flat_args(call.args[1:2], lower)
    n_in = len(inputs)
    if len(call.args) > 2:  # tir_vars: a shape whose values follow the outputs
        inputs.append(lower(call.args[2]))
    n_all = len(inputs)
    kernel, path = _tir_kernel(func, name)
    extra = {"func": name}
    if path == "tir" and n_all == n_in:  # plans call it natively (runtime/native_run.py)
        extra["tir"] = kernel

    def run(*args):
        bufs = args[n_all:]
        scalars = tuple(args[n_in]) if n_all > n_in else ()
        kernel(*args[:n_in], *bufs, *scalars)
        return bufs[0] if single else tuple(bufs)

    return Impl(run, inputs, outs, path, extra=extra)


def _tir_kernel(func, name: str):
    """The PrimFunc compiled to native code (msc/backend/lowering/compile.py) when it compiles,
    else msc/tir/interp.py's interpreter; BuildError when neither exists."""
    try:
        return compile_prim_func(func), "tir"
    except BuildError:
        pass  # a construct the compiler does not handle yet: interpret it
    return (lambda *args: run_prim_func(func, *args)), "tir_interp"


# -- in-place calls: the VM copies the operands a callee overwrites first, so the caller's
# arrays (inputs, weights) are never changed; the copies are the results.

def _inplace_indices(call, n_args: int, what: str) -> tuple:
    indices = tuple(int(i) for i in (call.attrs or {}).get("inplace_indices", ()))
    bad = [i for i in indices if not -1 <= i < n_args]
    if not indices or bad:
        raise BuildError(f"inplace_indices {indices} must name arguments (0..{n_args - 1}) "
                         "or be -1 (a fresh output)", op=what)
    return indices


def _copy_inplace(args: tuple, indices) -> list:
    args = list(args)
    for i in set(indices):
        if i >= 0:
            args[i] = np.array(args[i], copy=True)
    return args


def _call_tir_inplace(call, lower, module) -> Impl:
    func, name = _module_prim_func(call, module, "call_tir_inplace")
    outs = tensor_fields(_out_sinfo(call, "call_tir_inplace"), "call_tir_inplace")
    single = isinstance(call.sinfo_args[0], TensorStructInfo)
    inputs = _flat_args(call.args[1:2], lower)
    n_in = len(inputs)
    indices = _inplace_indices(call, n_in, "call_tir_inplace")
    if len(indices) != len(outs):
        raise BuildError(f"{len(indices)} inplace_indices for {len(outs)} outputs",
                         op="call_tir_inplace", key=name)
    fresh = tuple(o for o, i in zip(outs, indices) if i < 0)
    kernel, path = _tir_kernel(func, name)

    def run(*args):
        ins = _copy_inplace(args[:n_in], indices)
        bufs = iter(args[n_in:])
        kernel(*ins, *args[n_in:])  # the PrimFunc takes the args, then the fresh outputs
        results = tuple(ins[i] if i >= 0 else next(bufs) for i in indices)
        return results[0] if single else results

    return Impl(run, inputs, fresh, path, extra={"func": name})


def _packed_inplace(call, lower, module) -> Impl:
    name = _extern_name(call.args[0], "call_inplace_packed")
    args = call.args[1:]
    indices = _inplace_indices(call, len(args), "call_inplace_packed")
    sinfo = call.struct_info or ObjectStructInfo()
    check = _result_checker(sinfo, name)
    single = not isinstance(sinfo, TupleStructInfo)

    def run(*values):
        ins = _copy_inplace(values, indices)
        result = _call_packed(name, tuple(ins))
        mutated = tuple(ins[i] if i >= 0 else r for i, r in zip(
            indices, _as_tuple(result, len(indices), name) if len(indices) > 1 else (result,)))
        return check(mutated[0] if single else mutated)

    return Impl(run, [lower(a) for a in args], (), "packed", extra={"func": name})


def _builtin_with_ctx(call, lower, module) -> Impl:
    """A VM builtin by name: msc has no VM context object, so the function registered under
    that name (relax.register_func) is called with the args."""
    return _packed_pure(call, lower, module, args=_flat_args(call.args[1:2], lower))


def _format_string(expr, what: str) -> str:
    value = getattr(expr, "value", None)
    if not isinstance(value, str):
        raise BuildError(f"{what}: the format must be a string", op=what)
    return value


def _show(value) -> str:
    if isinstance(value, np.ndarray):
        return np.array2string(value, threshold=64) if value.ndim else str(value.item())
    if isinstance(value, tuple):
        return "(" + ", ".join(_show(v) for v in value) + ")"
    return str(value)


def _formatted(fmt: str, values, what: str) -> str:
    texts = [_show(v) for v in values]
    if not fmt:
        return " ".join(texts)
    try:
        return fmt.format(*texts)
    except (IndexError, KeyError, ValueError) as exc:
        raise RuntimeCallError(f"format {fmt!r} does not fit {len(texts)} values: {exc}",
                               op=what) from exc


def _print(call, lower, module) -> Impl:
    fmt = _format_string(call.args[0], "print")

    def run(*values):
        print(_formatted(fmt, values, "print"), flush=True)
        return ()

    return Impl(run, _flat_args(call.args[1:], lower), (), "builtin")


def _assert(call, lower, module) -> Impl:
    fmt = _format_string(call.args[1], "assert_op")

    def run(cond, *values):
        if np.ndim(cond) != 0:
            raise ShapeError(f"the condition must be a scalar, got shape {np.shape(cond)}",
                             op="assert_op", param="condition")
        if not bool(cond):
            message = _formatted(fmt, values, "assert_op") or "assertion failed"
            raise RuntimeCallError(message, op="assert_op")
        return ()

    return Impl(run, [lower(call.args[0]), *_flat_args(call.args[2:], lower)], (), "builtin")


def _null(call, lower, module) -> Impl:
    return Impl(lambda: None, [], (), "builtin")


# The VM's handler of each runtime op (OpDef.runtime): tests/ check the keys are exactly those.
SPECIAL = {
    "call_dps_packed": _packed_dps,
    "call_pure_packed": _packed_pure,
    "call_tir": _call_tir,
    "call_tir_inplace": _call_tir_inplace,
    "call_inplace_packed": _packed_inplace,
    "call_builtin_with_ctx": _builtin_with_ctx,
    "print": _print,
    "assert_op": _assert,
    "null_value": _null,
}


def special(call, lower: Callable, module) -> Impl | None:
    """The Impl of a runtime call (packed / TIR), or None for ordinary ops."""
    if isinstance(call.op, ExternFunc):
        return _packed_extern(call, lower, module)
    name = getattr(call.op, "name", "").removeprefix("relax.")
    handler = SPECIAL.get(name)
    return handler(call, lower, module) if handler else None

