"""How each op call runs: a table lookup of the op's facts, resolved once at build time.

1. ``"kernel"`` (native): the op's :class:`~msc.backend.kernels.base.KernelFact`, attached by
   ``msc/backend/kernels/*``; it makes a Kernel once per call site.
2. ``"numpy"``: the op's numpy reference ``fn(args, attrs)`` from ``msc/relax/op/numpy_ref``.
   float16 / bfloat16 tensors are computed in float32 and the result cast back.
   (``"legalize"``: the op's TIR PrimFunc compiled to native code, before numpy by default,
   ``legalize="prefer"``, except the free views and slow kernels of :data:`NUMPY_FIRST`;
   ``"fallback"`` only for ops without a numpy fact.)
3. none of these: the op is reported, with every other such op, in one MissingKernelError.

The calls into the runtime (``call_tir``, packed calls, ``print``, ...) are resolved by
callouts.py instead::

    load_facts()
    impl = resolve(site)                           # Impl(fn, inputs, dps, path, aliases)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...errors import BuildError, MSCError, ShapeError, UnsupportedOpError
from ...relax.expr import Attrs, Call, Tuple, Var
from ...relax.op.facts import load_facts as load_op_facts
from ...relax.op.registry import OPS, ops_with
from ...relax.struct_info import (
    PrimStructInfo,
    ShapeStructInfo,
    TensorStructInfo,
    TupleStructInfo,
)
from ...tir import expr as tir
from ..kernels.base import Impl, Site, kernel_fact
from ..lowering.compile import compile_prim_func
from ..runtime.arrays import np_dtype
from .callouts import tensor_fields

__all__ = ["LEGALIZE_MODES", "NUMPY_FIRST", "VIEW_OPS", "MissingKernelError",
           "conformer", "legalized", "load_facts", "numpy_caller", "resolve", "static_slice",
           "static_view"]

_LOW_PRECISION = ("float16", "bfloat16")  # computed in float32 on the numpy path


class MissingKernelError(BuildError, UnsupportedOpError):
    """Ops that have neither a native kernel nor a numpy reference (all listed at once)."""


def load_facts() -> None:
    """Attach the facts the backend reads: numpy references and native kernels (once)."""
    for kind in ("numpy", "kernel"):
        load_op_facts(kind)


LEGALIZE_MODES = ("never", "fallback", "prefer")

# Free view ops: numpy gives a view of the input at no cost; TIR copies every element (with
# div / mod index math). Static ones run as one bound ndarray.reshape (static_view).
VIEW_OPS = ops_with("view")


def _power_on_numpy(site: Site) -> bool:
    """power compiles for a float one-element exponent (0.2-0.9x numpy's time: LRN's x**0.75,
    x**2, sqrt); tensor exponents stay on numpy (its vectorized powf is ~2x faster), integer
    powers too (numpy raises on negative exponents, a kernel cannot)."""
    s, out = site.tensor(1), site.out
    if not (isinstance(out, TensorStructInfo) and out.dtype.startswith(("float", "bfloat"))):
        return True
    return not (s is not None and s.values is not None
                and all(getattr(d, "value", None) == 1 for d in s.values))


# Ops whose numpy fact stays first under legalize="prefer": op -> whether it does for a site.
# A speed choice of this backend (measured per op), not a fact of the op.
NUMPY_FIRST = {**dict.fromkeys(VIEW_OPS, lambda site: True), "power": _power_on_numpy}


def _numpy_first(site: Site) -> bool:
    when = NUMPY_FIRST.get(site.op)
    return when is not None and when(site)


def resolve(site: Site, *, native: bool = True, legalize: str = "prefer",
            schedules: Callable | None = None) -> Impl | None:
    """The implementation of an op call: native kernel, else numpy, else None (missing).

    ``legalize`` places the op's "legalize" fact (a TIR PrimFunc compiled to native code by
    msc/backend/lowering/compile.py) in that order: "prefer" before numpy (except the ops of
    :data:`NUMPY_FIRST`), "fallback" only for ops without a numpy fact, "never" not at all.
    ``schedules``: see :func:`legalized`.
    """
    fact = kernel_fact(site.op) if native else None
    if fact is not None and fact.match(site):
        kernel = fact.make(site)
        dps = () if kernel.allocates else (site.out,)
        return Impl(kernel, [site.args[i].id for i in kernel.inputs], dps, fact.path)
    if site.epilogue:
        return None
    if legalize == "prefer" and not _numpy_first(site) and (
            impl := legalized(site, schedules)) is not None:
        return impl
    op_def = OPS.get(site.op)
    fn = op_def.facts.get("numpy") if op_def is not None else None
    if fn is None:
        return legalized(site, schedules) if legalize != "never" else None
    if (view := static_view(site) or static_slice(site)) is not None:
        return Impl(view, [v.id for v in site.args], (), "numpy", aliases=True)
    fresh = not op_def.may_alias  # its numpy fact computes a new array
    return Impl(numpy_caller(fn, site, fresh), [v.id for v in site.args], (), "numpy",
                aliases=not fresh)


def _positional(call: Call) -> tuple[Call, dict]:
    """``call`` with its tensor Vars (tuple fields too) renamed by position (arg0, arg1, ...),
    and the new names' program names. The legalization names its buffers after the vars, so
    without this every site of an op got its own kernel text: a 4,000-op chain compiled 2,000
    identical kernels (130 s). Equal calls now share one compiled kernel; errors still name
    the program's values. Positions count tensors as the legalization's flat list does."""
    flat, names = 0, {}

    def rename(expr):
        nonlocal flat
        name, flat = f"arg{flat}", flat + 1
        if not isinstance(expr, Var):
            return expr
        names[name] = expr.name_hint
        return Var(name, expr.struct_info)

    def is_tensor(expr) -> bool:
        return isinstance(expr.struct_info, TensorStructInfo)

    args = []
    for arg in call.args:
        sinfo = arg.struct_info
        if isinstance(arg, Tuple):
            arg = Tuple([rename(f) if is_tensor(f) else f for f in arg.fields])
        elif isinstance(sinfo, TupleStructInfo):  # a tuple var: its fields have no names
            flat += sum(isinstance(f, TensorStructInfo) for f in sinfo.fields)
        elif is_tensor(arg):
            arg = rename(arg)
        args.append(arg)
    renamed = Call(call.op, args, call.attrs, call.sinfo_args, call.span)
    renamed._set_struct_info(call.struct_info)
    return renamed, names


def legalized(site: Site, schedules: Callable | None = None) -> Impl | None:
    """The op's TIR legalization compiled to native code, or None when there is no rule,
    the call cannot be legalized, or the PrimFunc does not compile.

    ``schedules(func)`` (a tuning database's lookup, ``meta_schedule.compile_relax``) gives
    the tuned form of the legalized PrimFunc, or None for a workload it does not know: that
    one, and a tuned form that does not compile, get the default lowering of ``func``. The
    Impl's ``extra["tuned"]`` says which one runs."""
    from ..legalize import legalize_call  # importing attaches the rules: on first use

    try:
        call, names = _positional(site.call) if site.call is not None else (None, {})
        func = legalize_call(call) if call is not None else None
        outs = tensor_fields(site.out, site.op)
    except MSCError:
        return None
    if func is None:
        return None
    kernel, tuned = _compiled(func, schedules)
    if kernel is None:
        return None
    # the args as the legalization saw them (a program value's sinfo may be unknown: an If)
    arg_sinfos = [a.struct_info for a in site.call.args]
    tensors = [i for i, s in enumerate(arg_sinfos)
               if isinstance(s, (TensorStructInfo, TupleStructInfo))]
    n_flat = sum(len(arg_sinfos[i].fields) if isinstance(arg_sinfos[i], TupleStructInfo) else 1
                 for i in tensors)
    if n_flat + len(outs) != len(func.params):
        return None  # not the buffers-then-outputs form this runner passes
    if not _dim_vars(site.out) <= set().union(*(_dim_vars(v.sinfo) for v in site.args)):
        return None  # output dims the inputs do not bind: the buffer could not be sized
    n_in, single = len(tensors), isinstance(site.out, TensorStructInfo)

    def run(env, *args):  # the PrimFunc takes the tensor args, tuples flattened, then outputs
        flat = []
        for a in args[:n_in]:
            flat.extend(a if isinstance(a, tuple) else (a,))
        try:
            kernel(*flat, *args[n_in:], known=env)  # env: dims only expressions use (bz * 5)
        except ShapeError as e:  # name the program's value, not the shared kernel's param
            param = e.context.get("param")
            if param not in names:
                raise
            raise ShapeError(e.message, hint=e.hint, **{**e.context, "param": names[param]}) \
                from None
        return args[n_in] if single else tuple(args[n_in:])

    return Impl(run, [site.args[i].id for i in tensors], outs, "tir",
                extra={"tir": kernel, "env": True, "tuned": tuned})


def _compiled(func, schedules: Callable | None) -> tuple:
    """(the native kernel of ``func``'s tuned form, True), else (its default lowering's,
    False), else (None, False) when ``func`` does not compile."""
    tuned = schedules(func) if schedules is not None else None
    for candidate in (tuned, func) if tuned is not None else (func,):
        try:
            return compile_prim_func(candidate), candidate is tuned
        except MSCError:
            continue
    return None, False


def _dim_vars(sinfo) -> set:
    """Names of the symbolic vars in a tensor (or tuple) struct info's dims."""
    if isinstance(sinfo, TupleStructInfo):
        return set().union(*(_dim_vars(f) for f in sinfo.fields))
    if isinstance(sinfo, (TensorStructInfo, ShapeStructInfo)) and sinfo.values is not None:
        return {v.name for d in sinfo.values for v in tir.free_vars(d)}
    if isinstance(sinfo, PrimStructInfo) and sinfo.value is not None:  # R.prim_value(n)
        return {v.name for v in tir.free_vars(sinfo.value)}
    return set()


def _owned(value, args: tuple):
    """``value`` if it cannot share memory with ``args``; else a copy of it."""
    if type(value) is np.ndarray:
        if value.base is not None and any(
                type(a) is np.ndarray and np.may_share_memory(value, a) for a in args):
            return value.copy()
        return value
    if type(value) is tuple:
        return tuple(_owned(v, args) for v in value)
    return value


def static_view(site: Site) -> Callable | None:
    """A free view op whose output shape is static as one bound ``ndarray.reshape``: its
    numpy fact gives the same array (a view, or a copy of a non-contiguous input), and
    numpy_caller's list, errstate and conform cost ~5 us per call (33 of them in
    shufflenet). Counted as numpy in ``ex.stats``, as it is."""
    out, x = site.out, site.tensor(0)
    if site.op not in VIEW_OPS or not isinstance(out, TensorStructInfo) or x is None:
        return None
    if out.values is None or not all(d.is_const for d in out.values) or x.dtype != out.dtype:
        return None
    shape = tuple(int(d.value) for d in out.values)
    reshape = np.ndarray.reshape

    def view(x, *_):
        return reshape(x, shape)
    view.free_view = shape  # plans let it ride along a native chain (runtime/plan_code.py)
    return view


def static_slice(site: Site) -> Callable | None:
    """strided_slice of a static input by constant axes / begins / ends / strides as one
    bound index: its numpy fact re-reads four tuples through ``ints`` and numpy_caller adds
    errstate and conform, ~40 us a call (Llama's rotary halves: 8 a forward, 3x the whole
    of onnxruntime's time on a small config). The same slice, C-contiguous as conform made
    it; counted as numpy in ``ex.stats``."""
    if site.op != "strided_slice" or site.call is None or len(site.args) < 4:
        return None
    x, out = site.tensor(0), site.out
    x_shape, out_shape = _static(x), _static(out)
    parts = [_const_ints(a.struct_info) for a in site.call.args[1:5]]
    if x_shape is None or out_shape is None or any(p is None for p in parts):
        return None
    axes, begins, ends = parts[:3]
    strides = parts[3] if len(parts) > 3 else (1,) * len(axes)
    if not len(axes) == len(begins) == len(ends) == len(strides) or 0 in strides:
        return None
    index = [slice(None)] * len(x_shape)
    for axis, b, e, step in zip(axes, begins, ends, strides):
        if not -len(x_shape) <= axis < len(x_shape):
            return None
        index[axis] = slice(b, e, step)
    index = tuple(index)
    if np.empty(x_shape, np.bool_)[index].shape != out_shape or x.dtype != out.dtype:
        return None
    contiguous = np.ascontiguousarray

    def sliced(x, *_):
        return contiguous(x[index])
    return sliced


def _static(sinfo) -> tuple | None:
    if not isinstance(sinfo, TensorStructInfo) or sinfo.values is None:
        return None
    if not all(d.is_const for d in sinfo.values):
        return None
    return tuple(int(d.value) for d in sinfo.values)


def _const_ints(sinfo) -> tuple | None:
    """The values of a constant shape or tuple-of-ints argument, else None."""
    if isinstance(sinfo, ShapeStructInfo) and sinfo.values is not None:
        values = sinfo.values
    elif isinstance(sinfo, TupleStructInfo) and all(
            isinstance(f, PrimStructInfo) for f in sinfo.fields):
        values = [f.value for f in sinfo.fields]
    else:
        return None
    if not all(isinstance(v, tir.IntImm) for v in values):
        return None
    return tuple(int(v.value) for v in values)


def numpy_caller(fn: Callable, site: Site, fresh: bool = False) -> Callable:
    """``fn(args, attrs)`` as a positional callable, low precision computed in float32;
    ``fresh`` results never share memory with the arguments."""
    attrs = site.attrs if site.attrs is not None else Attrs()
    conform = conformer(site.out)
    upcast = [i for i, v in enumerate(site.args)
              if isinstance(v.sinfo, TensorStructInfo) and v.sinfo.dtype in _LOW_PRECISION]

    if not upcast and fresh:
        def call_fresh(*args):
            with np.errstate(all="ignore"):
                return _owned(conform(fn(list(args), attrs)), args)
        return call_fresh

    if not upcast:
        def call(*args):
            with np.errstate(all="ignore"):
                return conform(fn(list(args), attrs))
        return call

    def call_f32(*args):
        cast = list(args)
        for i in upcast:
            cast[i] = np.asarray(cast[i]).astype(np.float32)
        with np.errstate(all="ignore"):
            value = conform(fn(cast, attrs))
        return _owned(value, args) if fresh else value
    return call_f32


def conformer(sinfo) -> Callable:
    """A function casting a computed value to what ``sinfo`` says (numpy may upcast)."""
    if isinstance(sinfo, TensorStructInfo):
        if sinfo.dtype == "void":
            return np.asarray
        dtype = np_dtype(sinfo.dtype)
        # C-contiguous too: a numpy view (strided_slice's) may feed a native kernel next
        return lambda v: v if type(v) is np.ndarray and v.dtype == dtype and (
            v.flags.c_contiguous) else np.require(np.asarray(v).astype(dtype, copy=False),
                                                  requirements="C")
    if isinstance(sinfo, TupleStructInfo):
        fields = [conformer(f) for f in sinfo.fields]
        return lambda v: tuple(f(x) for f, x in zip(fields, v))
    if isinstance(sinfo, ShapeStructInfo):
        return lambda v: tuple(int(x) for x in np.asarray(v).reshape(-1))
    if isinstance(sinfo, PrimStructInfo):
        dtype = np_dtype(sinfo.dtype) if sinfo.dtype not in ("void", "handle") else None
        return lambda v: np.asarray(v).astype(dtype).item() if dtype is not None else v
    return lambda v: v


