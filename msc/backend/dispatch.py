"""How each op call runs: a table lookup of the op's facts, resolved once at build time.

1. ``"kernel"`` (native): a :class:`KernelFact` attached by ``msc/backend/kernels/*``. It sees
   the call site (arg struct info, constant args such as weights, the fused epilogue) and
   returns a :class:`Kernel` made once per site: weights are packed there, not per call.
2. ``"numpy"``: the op's numpy reference ``fn(args, attrs)`` from ``msc/relax/op/numpy_ref``.
   float16 / bfloat16 tensors are computed in float32 and the result cast back.
   (``"legalize"``: the op's TIR PrimFunc compiled to native code, before numpy by default,
   ``legalize="prefer"``, except the free views and slow kernels of :data:`NUMPY_FIRST`;
   ``"fallback"`` only for ops without a numpy fact.)
3. none of these: the op is reported, with every other such op, in one MissingKernelError.

The calls into the runtime (``call_tir``, ``call_dps_packed``, ``call_pure_packed``, a call
of an ExternFunc) are rows of :data:`SPECIAL`, keyed by op name like everything else::

    attach("nn.dense", "kernel", DenseFact())      # from a kernels module
    impl = resolve(site)                           # Impl(fn, inputs, dps, path, aliases)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import BuildError, MSCError, RuntimeCallError, ShapeError, UnsupportedOpError
from ..relax.expr import Attrs, ExternFunc, GlobalVar, Tuple
from ..relax.struct_info import (
    ObjectStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    TensorStructInfo,
    TupleStructInfo,
)
from . import packed
from .plan import NOVALUE
from .runtime import np_dtype, to_numpy

__all__ = ["EPILOGUE_OPS", "NUMPY_FIRST", "SPECIAL", "Impl", "Kernel", "KernelFact",
           "MissingKernelError", "Site", "load_facts", "resolve"]

_LOW_PRECISION = ("float16", "bfloat16")  # computed in float32 on the numpy path


class MissingKernelError(BuildError, UnsupportedOpError):
    """Ops that have neither a native kernel nor a numpy reference (all listed at once)."""


@dataclass
class Site:
    """One call as a kernel fact sees it at build time.

    ``args`` are the program's Values (``.sinfo``, ``.const``); ``epilogue`` is what fusion
    folded into the call: ``("bias", b)``, ``("scale", s)`` (per-channel 1-D arrays) and
    ``("relu",)`` entries, in order.
    """

    op: str
    attrs: Attrs
    args: list
    out: Any
    epilogue: tuple = ()
    call: Any = None  # the Relax Call (legalization reads it)

    def tensor(self, i: int) -> TensorStructInfo | None:
        s = self.args[i].sinfo if i < len(self.args) else None
        return s if isinstance(s, TensorStructInfo) else None

    def const(self, i: int) -> np.ndarray | None:
        value = self.args[i].const if i < len(self.args) else NOVALUE
        return value if isinstance(value, np.ndarray) else None

    def attr(self, name: str, default=None):
        return self.attrs.get(name, default) if self.attrs is not None else default


class Kernel:
    """A native kernel made for one site: ``kernel(*arrays, out) -> out``.

    ``inputs`` are the indices of the call's args passed at run time (constants consumed at
    build time, such as packed weights, are left out). A kernel checks the shapes and dtypes
    it is given before native code runs, and raises ShapeError.
    """

    inputs: tuple = (0,)
    allocates: bool = False  # True: returns a fresh output (data-dependent shape), no buffer

    def __call__(self, *arrays):
        raise NotImplementedError


class KernelFact:
    """The "kernel" fact of an op. ``epilogues`` lists what fusion may fold into it; ``path``
    is what ``ex.stats`` counts it as ("numpy" for a numpy kernel that writes into a planned
    buffer, so the numbers stay honest about what runs natively)."""

    epilogues: frozenset = frozenset()
    path: str = "native"

    def match(self, site: Site) -> bool:
        """Whether :meth:`make` handles this site (dtypes, constant weights, attrs)."""
        raise NotImplementedError

    def epilogues_for(self, site: Site) -> frozenset:
        """The epilogue kinds this site can absorb (by default, ``epilogues``)."""
        return self.epilogues

    def channel_axis(self, site: Site) -> int | None:
        """The output axis a fused per-channel bias runs along."""
        return None

    def make(self, site: Site) -> Kernel:
        raise NotImplementedError


@dataclass
class Impl:
    """How a call node runs: ``fn(*inputs values, *dps buffers)``."""

    fn: Callable
    inputs: list             # value ids
    dps: tuple = ()          # TensorStructInfo of each output buffer
    path: str = "numpy"      # native | numpy | packed | tir | tir_interp
    aliases: bool = False    # the result may be a view of an input
    extra: dict = field(default_factory=dict)  # "func": packed / TIR name, "tir": the
    # CompiledPrimFunc when fn(*inputs, *buffers) is that kernel on the tuple-flattened inputs
    # and the buffers, returning the buffers: plans then call it natively


# ---------------------------------------------------------------------------------------------
# Epilogues: elementwise ops that a kernel with a per-channel epilogue can absorb. Entries:
# ("bias", b[C]) adds, ("scale", s[C]) multiplies (weights and bias so far), ("relu",).


def _channel_const(values: list, producer_out: int, axis: int, rank: int) -> np.ndarray | None:
    """The constant operand of a binary op as a per-channel vector [C] (or [1]), or None."""
    other = [v for v in values if v.id != producer_out]
    if len(other) != 1 or not isinstance(other[0].const, np.ndarray):
        return None
    c = other[0].const
    if c.ndim > rank or c.dtype != np.float32:
        return None
    full = (1,) * (rank - c.ndim) + c.shape
    if any(d != 1 for k, d in enumerate(full) if k != axis):
        return None
    return np.ascontiguousarray(c.reshape(-1), np.float32)


def _add_rule(values, attrs, producer_out, axis, rank):
    c = _channel_const(values, producer_out, axis, rank)
    return None if c is None else [("bias", c)]


def _subtract_rule(values, attrs, producer_out, axis, rank):
    c = _channel_const(values, producer_out, axis, rank)
    return None if c is None or values[0].id != producer_out else [("bias", -c)]


def _multiply_rule(values, attrs, producer_out, axis, rank):
    c = _channel_const(values, producer_out, axis, rank)
    return None if c is None else [("scale", c)]


def _divide_rule(values, attrs, producer_out, axis, rank):
    c = _channel_const(values, producer_out, axis, rank)
    if c is None or values[0].id != producer_out or not np.all(c):
        return None
    return [("scale", (1.0 / c.astype(np.float64)).astype(np.float32))]


def _bias_add_rule(values, attrs, producer_out, axis, rank):
    """nn.bias_add: a 1-D bias along ``attrs.axis`` (not numpy broadcasting)."""
    c = values[1].const
    ok = (values[0].id == producer_out and int(attrs.get("axis", 1)) % rank == axis
          and isinstance(c, np.ndarray) and c.ndim == 1 and c.dtype == np.float32)
    return [("bias", np.ascontiguousarray(c))] if ok else None


def _batch_norm_rule(values, attrs, producer_out, axis, rank):
    """Inference batch_norm with constant statistics: y * s + t per channel."""
    stats = [v.const for v in values[1:5]]
    if (values[0].id != producer_out or attrs.get("training", True)
            or int(attrs.get("axis", 1)) % rank != axis
            or not all(isinstance(a, np.ndarray) and a.ndim == 1 for a in stats)):
        return None
    gamma, beta, mean, var = (a.astype(np.float64) for a in stats)
    s = 1.0 / np.sqrt(var + float(attrs.get("epsilon", 1e-5)))
    if attrs.get("scale", True):
        s = s * gamma
    t = -mean * s + (beta if attrs.get("center", True) else 0.0)
    return [("scale", s.astype(np.float32)), ("bias", t.astype(np.float32))]


def _relu_rule(values, attrs, producer_out, axis, rank):
    return [("relu",)]


# op -> fn(arg values, attrs, producer value id, channel axis, rank) -> entries or None
EPILOGUE_OPS = {
    "add": _add_rule,
    "subtract": _subtract_rule,
    "multiply": _multiply_rule,
    "divide": _divide_rule,
    "nn.bias_add": _bias_add_rule,
    "nn.batch_norm": _batch_norm_rule,
    "nn.relu": _relu_rule,
}


def epilogue_entries(site: Site, op: str, values: list, attrs, producer_out: int):
    """What a consumer call adds to ``site``'s epilogue, or None when it cannot be fused."""
    fact = kernel_fact(site.op)
    rule = EPILOGUE_OPS.get(op)
    if fact is None or rule is None or not isinstance(site.out, TensorStructInfo):
        return None
    axis = fact.channel_axis(site)
    if axis is None or site.out.ndim <= 0:
        return None
    entries = rule(values, attrs if attrs is not None else Attrs(), producer_out, axis,
                   site.out.ndim)
    if not entries or any(e[0] not in fact.epilogues_for(site) for e in entries):
        return None
    if any(e[0] == "relu" for e in site.epilogue):
        return None  # nothing runs after the relu in a kernel epilogue
    return tuple(entries)


# ---------------------------------------------------------------------------------------------
# Resolution.

_FACTS_LOADED = False


def load_facts() -> None:
    """Import the modules that attach the "numpy" and "kernel" facts (once)."""
    global _FACTS_LOADED
    if not _FACTS_LOADED:
        from ..relax.op import numpy_ref  # noqa: F401
        from .kernels import (  # noqa: F401
            conv,
            dense,
            elementwise,
            layout,
            nonzero,
            pool,
            unique,
        )

        _FACTS_LOADED = True


def kernel_fact(op: str) -> KernelFact | None:
    from ..relax.op.registry import OPS

    op_def = OPS.get(op)
    return op_def.facts.get("kernel") if op_def is not None else None


LEGALIZE_MODES = ("never", "fallback", "prefer")

# Free view ops: numpy gives a view of the input at no cost; TIR copies every element (with
# div / mod index math). Static ones run as one bound ndarray.reshape (static_view).
VIEW_OPS = frozenset({"reshape", "flatten", "expand_dims", "squeeze", "nn.batch_flatten"})


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
NUMPY_FIRST = {**dict.fromkeys(VIEW_OPS, lambda site: True), "power": _power_on_numpy}


def _numpy_first(site: Site) -> bool:
    when = NUMPY_FIRST.get(site.op)
    return when is not None and when(site)


def resolve(site: Site, *, native: bool = True, legalize: str = "prefer") -> Impl | None:
    """The implementation of an op call: native kernel, else numpy, else None (missing).

    ``legalize`` places the op's "legalize" fact (a TIR PrimFunc compiled to native code by
    msc/backend/tir_compile.py) in that order: "prefer" before numpy (except the ops of
    :data:`NUMPY_FIRST`), "fallback" only for ops without a numpy fact, "never" not at all.
    """
    fact = kernel_fact(site.op) if native else None
    if fact is not None and fact.match(site):
        kernel = fact.make(site)
        dps = () if kernel.allocates else (site.out,)
        return Impl(kernel, [site.args[i].id for i in kernel.inputs], dps, fact.path)
    if site.epilogue:
        return None
    if legalize == "prefer" and not _numpy_first(site) and (
            impl := legalized(site)) is not None:
        return impl
    from ..relax.op.registry import OPS

    op_def = OPS.get(site.op)
    fn = op_def.facts.get("numpy") if op_def is not None else None
    if fn is None:
        return legalized(site) if legalize != "never" else None
    if (view := static_view(site)) is not None:
        return Impl(view, [v.id for v in site.args], (), "numpy", aliases=True)
    fresh = op_def.family in FRESH_FAMILIES
    return Impl(numpy_caller(fn, site, fresh), [v.id for v in site.args], (), "numpy",
                aliases=not fresh)


def legalized(site: Site) -> Impl | None:
    """The op's TIR legalization compiled to native code, or None when there is no rule,
    the call cannot be legalized, or the PrimFunc does not compile."""
    try:
        from .legalize import legalize_call
        from .tir_compile import compile_prim_func
    except ImportError:
        return None
    try:
        func = legalize_call(site.call) if site.call is not None else None
        kernel = compile_prim_func(func) if func is not None else None
        outs = _tensor_fields(site.out, site.op)
    except MSCError:
        return None
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
        kernel(*flat, *args[n_in:], known=env)  # env: dims only expressions use (bz * 5)
        return args[n_in] if single else tuple(args[n_in:])

    return Impl(run, [site.args[i].id for i in tensors], outs, "tir",
                extra={"tir": kernel, "env": True})


def _dim_vars(sinfo) -> set:
    """Names of the symbolic vars in a tensor (or tuple) struct info's dims."""
    from ..tir import expr as tir

    if isinstance(sinfo, TupleStructInfo):
        return set().union(*(_dim_vars(f) for f in sinfo.fields))
    if isinstance(sinfo, (TensorStructInfo, ShapeStructInfo)) and sinfo.values is not None:
        return {v.name for d in sinfo.values for v in tir.free_vars(d)}
    if isinstance(sinfo, PrimStructInfo) and sinfo.value is not None:  # R.prim_value(n)
        return {v.name for v in tir.free_vars(sinfo.value)}
    return set()


# Op families whose numpy facts compute new arrays. Their results are treated as not aliasing
# their inputs (so the memory planner may reuse input buffers); a result that does overlap an
# input anyway is copied. Every other family (reshape, slicing, ...) may return views.
FRESH_FAMILIES = frozenset({
    "unary", "binary", "compare", "conv", "pool", "norm", "activation", "pad", "reduce",
    "linalg", "attention", "loss", "image", "scan", "sort", "create", "relay", "msc", "quant",
})


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
    return view


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
        return lambda v: v if type(v) is np.ndarray and v.dtype == dtype else (
            np.asarray(v).astype(dtype))
    if isinstance(sinfo, TupleStructInfo):
        fields = [conformer(f) for f in sinfo.fields]
        return lambda v: tuple(f(x) for f, x in zip(fields, v))
    if isinstance(sinfo, ShapeStructInfo):
        return lambda v: tuple(int(x) for x in np.asarray(v).reshape(-1))
    if isinstance(sinfo, PrimStructInfo):
        dtype = np_dtype(sinfo.dtype) if sinfo.dtype not in ("void", "handle") else None
        return lambda v: np.asarray(v).astype(dtype).item() if dtype is not None else v
    return lambda v: v


# ---------------------------------------------------------------------------------------------
# Calls into the runtime: packed functions and TIR.


def _tensor_fields(sinfo, what: str) -> tuple:
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
    outs = _tensor_fields(_out_sinfo(call, "call_dps_packed"), "call_dps_packed")
    single = isinstance(call.sinfo_args[0], TensorStructInfo)
    inputs = _flat_args(call.args[1:], lower)
    n_in = len(inputs)

    def run(*args):
        _call_packed(name, args)
        return args[n_in] if single else tuple(args[n_in:])

    return Impl(run, inputs, outs, "packed", extra={"func": name})


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
    from ..tir.function import PrimFunc

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
    outs = _tensor_fields(_out_sinfo(call, "call_tir"), "call_tir")
    single = isinstance(call.sinfo_args[0], TensorStructInfo)
    inputs = _flat_args(call.args[1:2], lower)
    n_in = len(inputs)
    if len(call.args) > 2:  # tir_vars: a shape whose values follow the outputs
        inputs.append(lower(call.args[2]))
    n_all = len(inputs)
    kernel, path = _tir_kernel(func, name)
    extra = {"func": name}
    if path == "tir" and n_all == n_in:  # plans call it natively (msc/backend/native_run.py)
        extra["tir"] = kernel

    def run(*args):
        bufs = args[n_all:]
        scalars = tuple(args[n_in]) if n_all > n_in else ()
        kernel(*args[:n_in], *bufs, *scalars)
        return bufs[0] if single else tuple(bufs)

    return Impl(run, inputs, outs, path, extra=extra)


def _tir_kernel(func, name: str):
    """The PrimFunc compiled to native code (msc/backend/tir_compile.py) when it compiles,
    else msc/tir/interp.py's interpreter; BuildError when neither exists."""
    try:
        from .tir_compile import compile_prim_func
    except ImportError:
        compile_prim_func = None
    if compile_prim_func is not None:
        try:
            return compile_prim_func(func), "tir"
        except BuildError:
            pass  # a construct the compiler does not handle yet: interpret it
    try:
        from ..tir.interp import run_prim_func
    except ImportError:
        raise BuildError("TIR compilation isn't available yet for this function",
                         op="call_tir", key=name) from None
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
    outs = _tensor_fields(_out_sinfo(call, "call_tir_inplace"), "call_tir_inplace")
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


SPECIAL = {
    "call_dps_packed": _packed_dps,
    "call_pure_packed": _packed_pure,
    "call_packed": _packed_pure,
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

