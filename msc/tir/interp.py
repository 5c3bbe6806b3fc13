"""A slow reference interpreter for PrimFuncs on numpy arrays.

Each expression and statement is compiled once into a Python closure over an environment dict
(vars by name, buffers under ``"@name"``); scalars are numpy scalars of the node's dtype, so
float32 math stays float32. Symbolic shape vars are bound from the arrays::

    out = np.empty((2, 3), "float32")
    run_prim_func(func, x, y, out)          # destination passing, as TVM calls it
    out = run_prim_func(func, x, y)         # missing trailing outputs are allocated and returned
"""

from __future__ import annotations

import math
import operator

import numpy as np

from ..errors import RuntimeCallError, ShapeError, ValidationError
from . import expr as E
from .function import (
    AllocBuffer,
    AttrStmt,
    Buffer,
    BufferLoad,
    BufferStore,
    Evaluate,
    For,
    IfThenElse,
    LetStmt,
    PrimFunc,
    SBlock,
    SeqStmt,
    StringImm,
    While,
)

__all__ = ["MATH", "np_dtype", "run_prim_func"]


def np_dtype(dtype: str) -> np.dtype:
    """numpy dtype of a TIR dtype (``bfloat16``/``float8`` via ml_dtypes when installed)."""
    try:
        return np.dtype(dtype)
    except TypeError:
        pass
    try:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, dtype))
    except (ImportError, AttributeError):
        raise RuntimeCallError(f"dtype {dtype!r} is not supported by the TIR interpreter",
                               hint="install ml_dtypes for bfloat16/float8") from None


def _same_type(fn):
    """Apply a Python float function and keep the argument's numpy type."""
    return lambda x: type(x)(fn(float(x)))


def _round(x):
    # Half to even, like numpy and TVM's T.round.
    return type(x)(round(float(x)))


def _truncdiv(a, b):
    if isinstance(a, np.floating) or isinstance(b, np.floating):
        return a / b
    q = abs(int(a)) // abs(int(b))
    return type(a)(q if (a >= 0) == (b >= 0) else -q)


def _floordiv(a, b):
    if isinstance(a, np.floating) or isinstance(b, np.floating):
        return np.floor(a / b)
    return a // b


# Intrinsic name -> numpy implementation (on numpy scalars).
MATH = {
    "exp": np.exp, "exp2": np.exp2, "exp10": lambda x: np.power(type(x)(10), x),
    "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p,
    "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "erf": _same_type(math.erf), "tanh": np.tanh, "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh,
    "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh, "fabs": np.abs,
    "abs": np.abs, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "round": _round,
    "nearbyint": np.rint, "bitwise_not": np.invert, "likely": lambda x: x,
    "popcount": lambda x: type(x)((int(x) & 0xFFFFFFFFFFFFFFFF).bit_count()),
    "pow": np.power, "atan2": np.arctan2, "fmod": np.fmod, "hypot": np.hypot,
    "copysign": np.copysign, "nextafter": np.nextafter, "ldexp": np.ldexp,
    "isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite,
    "shift_left": np.left_shift, "shift_right": np.right_shift, "bitwise_and": np.bitwise_and,
    "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor,
}

_BINARY = {
    "Add": operator.add, "Sub": operator.sub, "Mul": operator.mul, "Div": _truncdiv,
    "FloorDiv": _floordiv, "FloorMod": np.mod, "Mod": np.fmod, "Min": np.minimum,
    "Max": np.maximum, "EQ": operator.eq, "NE": operator.ne, "LT": operator.lt,
    "LE": operator.le, "GT": operator.gt, "GE": operator.ge,
}


def run_prim_func(func: PrimFunc, *args):
    """Run ``func`` on numpy arrays (scalars for scalar params), writing outputs in place.

    Pass every param for destination passing (returns None), or leave trailing output buffers
    out: they are allocated from the bound shapes and returned (one array or a tuple).
    Raises ShapeError naming the param when a shape or dtype does not fit.
    """
    if len(args) > len(func.params):
        raise ShapeError(f"prim func {func.name!r} takes {len(func.params)} arguments, got "
                         f"{len(args)}")
    env: dict = {}
    _bind_params(func, args, env)
    outputs = [_allocate(p, env) for p in func.params[len(args):]]
    for param, value in zip(func.params[len(args):], outputs):
        env["@" + param.name] = value
    with np.errstate(all="ignore"):
        _compiled(func)(env)
    if not outputs:
        return None
    return outputs[0] if len(outputs) == 1 else tuple(outputs)


def _compiled(func: PrimFunc):
    fn = func.__dict__.get("_interp")
    if fn is None:
        fn = _stmt(func.body)
        object.__setattr__(func, "_interp", fn)
    return fn


def _bind_params(func: PrimFunc, args, env: dict) -> None:
    for param, value in zip(func.params, args):
        if isinstance(param, E.Var):
            env[param.name] = np_dtype(param.dtype).type(value)
            continue
        _check_array(param, value)
        for dim, size in zip(param.shape, value.shape):
            if isinstance(dim, E.Var) and dim.name not in env:
                env[dim.name] = np.int64(size)
        env["@" + param.name] = value
    for param, value in zip(func.params, args):
        if isinstance(param, Buffer):
            _check_dims(param, value.shape, env)


def _check_array(buf: Buffer, value) -> None:
    if not isinstance(value, np.ndarray):
        raise ShapeError(f"expected a numpy array, got {type(value).__name__}", param=buf.name)
    if value.ndim != buf.ndim:
        raise ShapeError(f"expected rank {buf.ndim}, got shape {value.shape}", param=buf.name)
    if value.dtype != np_dtype(buf.dtype):
        raise ShapeError(f"expected dtype {buf.dtype}, got {value.dtype}", param=buf.name,
                         hint=f"convert with .astype({buf.dtype!r})")


def _check_dims(buf: Buffer, shape, env: dict) -> None:
    for axis, (dim, size) in enumerate(zip(buf.shape, shape)):
        expected = _dim_value(dim, env, buf)
        if expected != size:
            raise ShapeError(f"dim {axis} is {size}, expected {E.to_str(dim)} = {expected} "
                             f"(buffer shape {tuple(E.to_str(d) for d in buf.shape)})",
                             param=buf.name)


def _dim_value(dim: E.PrimExpr, env: dict, buf: Buffer) -> int:
    try:
        return int(_expr(dim)(env))
    except KeyError as err:
        raise ShapeError(f"symbolic dim {E.to_str(dim)} uses {err.args[0]!r}, which no input "
                         "shape binds", param=buf.name,
                         hint="pass that input, or use a plain var as some input's dim") from None


def _allocate(param, env: dict) -> np.ndarray:
    if not isinstance(param, Buffer):
        raise ShapeError("only buffer params can be left out (as outputs)", param=param.name)
    shape = tuple(_dim_value(d, env, param) for d in param.shape)
    return np.zeros(shape, np_dtype(param.dtype))


# ------------------------------------------------------------------------------ expressions

def _expr(e: E.PrimExpr):
    compiler = _EXPR_COMPILERS.get(type(e))
    if compiler is None:
        raise RuntimeCallError(f"the TIR interpreter cannot evaluate {type(e).__name__}")
    return compiler(e)


def _imm(e):
    value = np_dtype(e.dtype).type(e.value)
    return lambda env: value


def _var(e: E.Var):
    name = e.name
    return lambda env: env[name]


def _binary(e: E.BinaryOp):
    fa, fb = _expr(e.a), _expr(e.b)
    if e.op == "And":
        return lambda env: np.bool_(bool(fa(env)) and bool(fb(env)))
    if e.op == "Or":
        return lambda env: np.bool_(bool(fa(env)) or bool(fb(env)))
    fn = _BINARY[e.op]
    return lambda env: fn(fa(env), fb(env))


def _not(e: E.Not):
    fa = _expr(e.a)
    return lambda env: np.bool_(not fa(env))


def _select(e: E.Select):
    fc, ft, ff = _expr(e.cond), _expr(e.true_value), _expr(e.false_value)

    def select(env):
        t, f = ft(env), ff(env)  # Select evaluates both sides, as in TIR
        return t if fc(env) else f
    return select


def _cast(e: E.Cast):
    fv, to = _expr(e.value), np_dtype(e.dtype).type
    return lambda env: to(fv(env))


def _call(e: E.PrimCall):
    if e.name == "if_then_else":
        fc, ft, ff = (_expr(a) for a in e.args)
        return lambda env: ft(env) if fc(env) else ff(env)  # lazy: guards padded loads
    fn = MATH.get(e.name)
    if fn is None:
        raise RuntimeCallError(f"the TIR interpreter has no implementation of T.{e.name}",
                               hint=f"supported: {', '.join(sorted(MATH))}")
    args = [_expr(a) for a in e.args]
    if len(args) == 1:
        (fa,) = args
        return lambda env: fn(fa(env))
    return lambda env: fn(*(f(env) for f in args))


def _load(e: BufferLoad):
    key, index = "@" + e.buffer.name, _index(e.buffer, e.indices)
    return lambda env: env[key][index(env)]


def _index(buf: Buffer, indices):
    fs = [_expr(i) for i in indices]
    name = buf.name

    def index(env):
        idx = tuple(int(f(env)) for f in fs)
        shape = env["@" + name].shape
        if any(not 0 <= i < n for i, n in zip(idx, shape)):
            raise RuntimeCallError(f"index {idx} out of bounds for buffer {name!r} of shape "
                                   f"{shape}")
        return idx
    return index


_EXPR_COMPILERS = {
    E.IntImm: _imm, E.FloatImm: _imm, E.Var: _var, E.BinaryOp: _binary, E.Not: _not,
    E.Select: _select, E.Cast: _cast, E.PrimCall: _call, BufferLoad: _load,
    StringImm: lambda e: (lambda env: e.value),
}


# ------------------------------------------------------------------------------ statements

def _stmt(s):
    compiler = _STMT_COMPILERS.get(type(s))
    if compiler is None:
        raise RuntimeCallError(f"the TIR interpreter cannot run {type(s).__name__}")
    return compiler(s)


def _seq(s: SeqStmt):
    fs = [_stmt(c) for c in s.stmts]

    def run(env):
        for f in fs:
            f(env)
    return run


def _store(s: BufferStore):
    key, index, fv = "@" + s.buffer.name, _index(s.buffer, s.indices), _expr(s.value)

    def store(env):
        env[key][index(env)] = fv(env)
    return store


def _evaluate(s: Evaluate):
    fv = _expr(s.value)

    def run(env):
        fv(env)
    return run


def _let(s: LetStmt):
    name, fv, to = s.var.name, _expr(s.value), np_dtype(s.var.dtype).type

    def let(env):
        env[name] = to(fv(env))
    return let


def _alloc_buffer(buf: Buffer):
    key = "@" + buf.name
    dims = [_expr(d) for d in buf.shape]
    dtype = np_dtype(buf.dtype)

    def alloc(env):
        env[key] = np.zeros(tuple(int(f(env)) for f in dims), dtype)
    return alloc


def _if(s: IfThenElse):
    fc, ft = _expr(s.cond), _stmt(s.then_case)
    fe = _stmt(s.else_case) if s.else_case is not None else None

    def run(env):
        if fc(env):
            ft(env)
        elif fe is not None:
            fe(env)
    return run


def _while(s: While):
    fc, fb = _expr(s.cond), _stmt(s.body)

    def run(env):
        while fc(env):
            fb(env)
    return run


def _for(s: For):
    name, flo, fext, fb = s.var.name, _expr(s.min), _expr(s.extent), _stmt(s.body)
    to = np_dtype(s.var.dtype).type

    def run(env):
        lo = int(flo(env))
        for i in range(lo, lo + int(fext(env))):
            env[name] = to(i)
            fb(env)
    return run


def _block(s: SBlock):
    if s.match_buffers:
        raise ValidationError(f"block {s.name!r} matches a buffer region (T.match_buffer in a "
                              "block), which msc's TIR interpreter does not run",
                              hint="schedules and prints it; run it through TVM")
    binds = [(iv.var.name, _expr(iv.binding)) for iv in s.iter_vars]
    reduce_axes = [(iv.var.name, _expr(iv.min)) for iv in s.iter_vars if iv.kind == "reduce"]
    allocs = [_alloc_buffer(b) for b in s.alloc_buffers]
    pred = _expr(s.predicate) if s.predicate is not None else None
    init = _stmt(s.init) if s.init is not None else None
    body = _stmt(s.body)

    def run(env):
        for name, f in binds:
            env[name] = f(env)
        if pred is not None and not pred(env):
            return
        for alloc in allocs:
            alloc(env)
        if init is not None and all(env[n] == f(env) for n, f in reduce_axes):
            init(env)
        body(env)
    return run


def _noop(env) -> None:
    return None


_STMT_COMPILERS = {
    SeqStmt: _seq, BufferStore: _store, Evaluate: _evaluate, LetStmt: _let,
    AllocBuffer: lambda s: _alloc_buffer(s.buffer), AttrStmt: lambda s: _noop, IfThenElse: _if, While: _while, For: _for,
    SBlock: _block,
}
