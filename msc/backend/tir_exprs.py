"""TIR expressions -> LLVM values, for ``tir_codegen``: dtypes, casts, arithmetic, intrinsics,
buffer addressing and the facts that let padded loads go unchecked.

Values are held in a dtype's *compute* type (float for float16/bfloat16/float32, i1 for bool,
iN for ints) and converted to the *storage* type only at loads and stores. Facts are integer
conditions known to hold, each kept as a canonical ``e`` meaning ``e < 0`` (lets expanded to
loop vars): a loop's range, and in the main range of a split loop the conditions that bound it.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir

from ..errors import BuildError
from ..tir import expr as E
from ..tir.function import BufferLoad, expr_children
from . import tir_math as M

I1, I8, I16, I32, I64 = (ir.IntType(b) for b in (1, 8, 16, 32, 64))
F32, F64 = ir.FloatType(), ir.DoubleType()
_FM = ("reassoc", "nsz", "contract")  # no nnan/ninf: NaN and inf keep their meaning

_INT_BITS = {"bool": 1, "int8": 8, "uint8": 8, "int16": 16, "uint16": 16, "int32": 32,
             "uint32": 32, "int64": 64, "uint64": 64}
_FLOATS = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}
_COMPARE = {"EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">="}

# name -> (f32 symbol, f64 symbol) of libm functions the kernels may call (registered in the JIT).
LIBM = {
    "sin": ("sinf", "sin"), "cos": ("cosf", "cos"), "tan": ("tanf", "tan"),
    "asin": ("asinf", "asin"), "acos": ("acosf", "acos"), "atan": ("atanf", "atan"),
    "sinh": ("sinhf", "sinh"), "cosh": ("coshf", "cosh"), "asinh": ("asinhf", "asinh"),
    "acosh": ("acoshf", "acosh"), "atanh": ("atanhf", "atanh"), "log1p": ("log1pf", "log1p"),
    "pow": ("powf", "pow"), "atan2": ("atan2f", "atan2"), "fmod": ("fmodf", "fmod"),
    "hypot": ("hypotf", "hypot"), "nextafter": ("nextafterf", "nextafter"),
    "exp": ("expf", "exp"), "log": ("logf", "log"), "tanh": ("tanhf", "tanh"),
    "erf": ("erff", "erf"), "exp2": ("exp2f", "exp2"), "log2": ("log2f", "log2"),
    "log10": ("log10f", "log10"),
}
LIBC = {"malloc": (I8.as_pointer(), [I64]), "free": (ir.VoidType(), [I8.as_pointer()])}
# Every external symbol generated code may reference (LLVM may also emit the mem* calls).
EXTERNAL_SYMBOLS = sorted({s for pair in LIBM.values() for s in pair} | set(LIBC)
                          | {"memset", "memcpy", "memmove", "ldexpf", "ldexp"})

_INLINE_F32 = {
    "exp": M.exp_f32, "exp2": M.exp2_f32, "log": M.log_f32, "tanh": M.tanh_f32,
    "erf": M.erf_f32, "sigmoid": M.sigmoid_f32,
    "log2": lambda b, x: b.fmul(M.log_f32(b, x), M.fconst(1 / math.log(2))),
    "log10": lambda b, x: b.fmul(M.log_f32(b, x), M.fconst(1 / math.log(10))),
    "exp10": lambda b, x: M.exp_f32(b, b.fmul(x, M.fconst(math.log(10)))),
}
_LLVM_UNARY = {"sqrt": "llvm.sqrt", "fabs": "llvm.fabs", "abs": "llvm.fabs",
               "floor": "llvm.floor", "ceil": "llvm.ceil", "trunc": "llvm.trunc",
               "round": "llvm.roundeven", "nearbyint": "llvm.roundeven"}
_INT_BITWISE = {"bitwise_and": "and_", "bitwise_or": "or_", "bitwise_xor": "xor"}


def is_float(dtype: str) -> bool:
    return dtype in _FLOATS


def _signed(dtype: str) -> bool:
    return dtype.startswith("int")


class Types:
    """Storage and compute LLVM types of TIR dtypes."""

    def __init__(self, native_f16: bool | None = None):
        if native_f16 is None:
            from .jit import host_target

            native_f16 = host_target().has("f16c")
        self.native_f16 = native_f16

    def check(self, dtype: str) -> None:
        if dtype not in _FLOATS and dtype not in _INT_BITS:
            raise BuildError(f"dtype {dtype!r} is not supported by the TIR compiler",
                             hint="supported: " + ", ".join([*_FLOATS, *_INT_BITS]))

    def compute(self, dtype: str) -> ir.Type:
        self.check(dtype)
        if dtype in _FLOATS:
            return F64 if dtype == "float64" else F32
        return ir.IntType(_INT_BITS[dtype])

    def storage(self, dtype: str) -> ir.Type:
        if dtype == "float16":
            return ir.HalfType() if self.native_f16 else I16
        if dtype == "bfloat16":
            return I16
        return I8 if dtype == "bool" else self.compute(dtype)

    def size(self, dtype: str) -> int:
        self.check(dtype)
        return _FLOATS.get(dtype) or max(_INT_BITS[dtype] // 8, 1)

    align = size

    def load_value(self, b: ir.IRBuilder, v: ir.Value, dtype: str) -> ir.Value:
        if dtype == "float16":
            return b.fpext(v, F32) if self.native_f16 else M.f16_to_f32(b, v)
        if dtype == "bfloat16":
            return M.bf16_to_f32(b, v)
        if dtype == "bool":
            return b.icmp_unsigned("!=", v, ir.Constant(I8, 0))
        return v

    def store_value(self, b: ir.IRBuilder, v: ir.Value, dtype: str) -> ir.Value:
        if dtype == "float16":
            return b.fptrunc(v, ir.HalfType()) if self.native_f16 else M.f32_to_f16(b, v)
        if dtype == "bfloat16":
            return M.f32_to_bf16(b, v)
        if dtype == "bool":
            return b.zext(v, I8)
        return v

    def round_to(self, b: ir.IRBuilder, v: ir.Value, dtype: str) -> ir.Value:
        """A float32 value rounded to float16 / bfloat16 precision (a cast's rounding)."""
        if dtype in ("float16", "bfloat16"):
            return self.load_value(b, self.store_value(b, v, dtype), dtype)
        return v


def _lt_key(a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr:
    """The canonical ``e`` with ``a < b  <=>  e < 0`` (integers)."""
    return E.sub(a, b)


# Integer comparisons as "e < 0" facts.
_AS_LT = {
    "LT": lambda a, b: _lt_key(a, b),
    "LE": lambda a, b: E.sub(_lt_key(a, b), 1),
    "GT": lambda a, b: _lt_key(b, a),
    "GE": lambda a, b: E.sub(_lt_key(b, a), 1),
}


def has_load(e: E.PrimExpr) -> bool:
    return isinstance(e, BufferLoad) or any(has_load(c) for c in expr_children(e))


def _int_expr(e: E.PrimExpr) -> bool:
    return e.dtype in _INT_BITS and e.dtype != "bool" and not has_load(e)


class ExprEmitter:
    """Expression emission state: bound vars and buffers, facts, the speculation depth."""

    def __init__(self, builder: ir.IRBuilder, types: Types):
        self.b = builder
        self.types = types
        self.vars: dict = {}
        self.var_exprs: dict = {}   # int let vars -> their value in loop vars
        self.bufs: dict = {}        # name -> (pointer, dims, strides)
        self.known: set = set()     # keys of canonical e with e < 0
        self.spec = 0               # > 0 while emitting a speculated if_then_else side
        self.in_index = 0

    # -- scopes ---------------------------------------------------------------------------
    def save_scope(self):
        return dict(self.vars), dict(self.var_exprs), dict(self.bufs), set(self.known)

    def restore_scope(self, saved) -> None:
        self.vars, self.var_exprs, self.bufs, self.known = (
            dict(saved[0]), dict(saved[1]), dict(saved[2]), set(saved[3]))

    def bind_var(self, var: E.Var, value: ir.Value, expr: E.PrimExpr | None = None) -> None:
        self.vars[var.name] = value
        if expr is not None and _int_expr(expr):
            self.var_exprs[var.name] = self.expand(expr)
        else:
            self.var_exprs.pop(var.name, None)

    def bind_loop_var(self, var: E.Var, value: ir.Value, lo: E.PrimExpr,
                      stop: E.PrimExpr) -> None:
        self.vars[var.name] = value
        self.var_exprs.pop(var.name, None)
        self.assume([_AS_LT["GE"](var, self.expand(lo)), _lt_key(var, self.expand(stop))])

    def bind_buffer(self, buf, ptr: ir.Value) -> None:
        dims = [self.index(d) for d in buf.shape]
        if buf.strides is not None:
            strides = [self.index(s) for s in buf.strides]
        else:
            strides, step = [], ir.Constant(I64, 1)
            for d in reversed(dims):
                strides.insert(0, step)
                step = self.b.mul(step, d, flags=("nsw",))
        for v in E.free_vars(buf.elem_offset) if buf.elem_offset is not None else ():
            # A symbolic offset is TVM's DLTensor byte_offset; arrays here start at their data.
            self.vars.setdefault(v.name, ir.Constant(self.types.compute(v.dtype), 0))
        if buf.elem_offset is not None:
            ptr = self.b.gep(ptr, [self.index(buf.elem_offset)], inbounds=True)
        self.bufs[buf.name] = (ptr, dims, strides)

    def assume(self, facts) -> None:
        self.known.update(E.canonicalize(f)._key for f in facts)

    def expand(self, e: E.PrimExpr) -> E.PrimExpr:
        return E.substitute(e, self.var_exprs) if self.var_exprs else e

    def proven(self, fact: E.PrimExpr) -> bool:
        """Whether ``fact < 0`` holds (a constant, or a known fact)."""
        fact = E.canonicalize(self.expand(fact))
        if isinstance(fact, E.IntImm):
            return fact.value < 0
        return fact._key in self.known

    # -- entry points ---------------------------------------------------------------------
    def expr(self, e: E.PrimExpr, index: bool = False) -> ir.Value:
        handler = _EXPRS.get(type(e))
        if handler is None:
            raise BuildError(f"the TIR compiler cannot evaluate {type(e).__name__}")
        if not index:
            return handler(self, e)
        self.in_index += 1
        try:
            return handler(self, e)
        finally:
            self.in_index -= 1

    def index(self, e: E.PrimExpr) -> ir.Value:
        return self.coerce(self.expr(e, index=True), e.dtype, "int64")

    def cond(self, e: E.PrimExpr) -> ir.Value:
        return self.coerce(self.expr(e), e.dtype, "bool")

    # -- casts ----------------------------------------------------------------------------
    def coerce(self, v: ir.Value, src: str, dst: str) -> ir.Value:
        if src == dst:
            return v
        b, types = self.b, self.types
        dty = types.compute(dst)
        if is_float(src) and is_float(dst):
            if v.type != dty:
                v = b.fpext(v, dty) if dty == F64 else b.fptrunc(v, dty)
            return types.round_to(b, v, dst)
        if is_float(src):
            if dst == "bool":
                return b.fcmp_unordered("!=", v, ir.Constant(v.type, 0.0))
            return b.fptosi(v, dty) if _signed(dst) else b.fptoui(v, dty)
        if is_float(dst):
            v = b.sitofp(v, dty) if _signed(src) else b.uitofp(v, dty)
            return types.round_to(b, v, dst)
        if dst == "bool":
            return b.icmp_unsigned("!=", v, ir.Constant(v.type, 0))
        width, have = dty.width, v.type.width
        if width > have:
            return b.sext(v, dty) if _signed(src) else b.zext(v, dty)
        return b.trunc(v, dty) if width < have else v

    # -- leaves ---------------------------------------------------------------------------
    def _int_imm(self, e: E.IntImm) -> ir.Value:
        if is_float(e.dtype):
            return ir.Constant(self.types.compute(e.dtype), float(e.value))
        return ir.Constant(self.types.compute(e.dtype), e.value)

    def _float_imm(self, e: E.FloatImm) -> ir.Value:
        value = e.value
        if e.dtype in ("float16", "bfloat16") and math.isfinite(value):
            from ..tir.interp import np_dtype

            value = float(np.asarray(value, np_dtype(e.dtype)).astype(np.float32))
        if e.dtype in _INT_BITS:
            return ir.Constant(self.types.compute(e.dtype), int(value))
        return ir.Constant(self.types.compute(e.dtype), value)

    def _var(self, e: E.Var) -> ir.Value:
        try:
            return self.vars[e.name]
        except KeyError:
            raise BuildError(f"unbound variable {e.name!r} in prim func",
                             hint="every var must be a param, a dim, a loop var or a let") from None

    # -- buffers --------------------------------------------------------------------------
    def address(self, buf, indices) -> ir.Value:
        try:
            ptr, dims, strides = self.bufs[buf.name]
        except KeyError:
            raise BuildError(f"buffer {buf.name!r} is used but not declared",
                             hint="buffers are params or T.alloc_buffer / sblock allocations") from None
        flat = None
        for k, (i, stride) in enumerate(zip(indices, strides)):
            v = self.index(i)
            if self._needs_clamp(i, buf.shape[k]):
                v = self._clamp(v, dims[k])
            term = v if (isinstance(stride, ir.Constant) and stride.constant == 1) else \
                self.b.mul(v, stride, flags=("nsw",))
            flat = term if flat is None else self.b.add(flat, term, flags=("nsw",))
        if flat is None:
            return ptr
        return self.b.gep(ptr, [flat], inbounds=True)

    def _needs_clamp(self, i: E.PrimExpr, dim: E.PrimExpr) -> bool:
        if has_load(i):
            return True  # an index read from data (take, gather) is never trusted
        if not self.spec:
            return False
        return not (self.proven(_AS_LT["LE"](E.IntImm(0), i)) and self.proven(_lt_key(i, dim)))

    def _clamp(self, v: ir.Value, dim: ir.Value) -> ir.Value:
        zero = ir.Constant(I64, 0)
        hi = self.b.sub(dim, ir.Constant(I64, 1))
        v = self.b.select(self.b.icmp_signed(">", v, hi), hi, v)
        return self.b.select(self.b.icmp_signed("<", v, zero), zero, v)

    def _load(self, e: BufferLoad) -> ir.Value:
        ptr = self.address(e.buffer, e.indices)
        v = self.b.load(ptr, align=self.types.align(e.dtype))
        return self.types.load_value(self.b, v, e.dtype)

    # -- libraries ------------------------------------------------------------------------
    def _declare(self, name: str, ret: ir.Type, args: list) -> ir.Function:
        module = self.b.module
        fn = module.globals.get(name)
        if fn is None:
            fn = ir.Function(module, ir.FunctionType(ret, args), name)
        return fn

    def libc(self, name: str) -> ir.Function:
        ret, args = LIBC[name]
        return self._declare(name, ret, args)

    def libm(self, name: str, args: list) -> ir.Value:
        ty = args[0].type
        symbol = LIBM[name][0 if ty == F32 else 1]
        return self.b.call(self._declare(symbol, ty, [ty] * len(args)), args)

    def intrinsic(self, name: str, *args: ir.Value) -> ir.Value:
        fn = M.declare(self.b, name, args)
        return self.b.call(fn, args, fastmath=_FM if args[0].type in (F32, F64) else ())


from . import tir_ops

_EXPRS = {
    E.IntImm: ExprEmitter._int_imm,
    E.FloatImm: ExprEmitter._float_imm,
    E.Var: ExprEmitter._var,
    BufferLoad: ExprEmitter._load,
    **tir_ops.HANDLERS,
}
