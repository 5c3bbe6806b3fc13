"""TIR dtypes as LLVM types, and the tables the expression and operator emitters share.

Values are held in a dtype's *compute* type (float for float16/bfloat16/float32, i1 for bool,
iN for ints) and converted to the *storage* type only at loads and stores (:class:`Types`).
Integer conditions become facts ``e < 0`` (:data:`AS_LT`); libm and libc symbols the kernels
may call are listed here, so the JIT can register them (:data:`EXTERNAL_SYMBOLS`).
"""


from __future__ import annotations

import math

from llvmlite import ir

from ...errors import BuildError
from ...tir import expr as E
from ...tir.function import BufferLoad, expr_children
from . import math as M

I1, I8, I16, I32, I64 = (ir.IntType(b) for b in (1, 8, 16, 32, 64))
F32, F64 = ir.FloatType(), ir.DoubleType()
FM = ("reassoc", "nsz", "contract")  # no nnan/ninf: NaN and inf keep their meaning

INT_BITS = {"bool": 1, "int8": 8, "uint8": 8, "int16": 16, "uint16": 16, "int32": 32,
             "uint32": 32, "int64": 64, "uint64": 64}
FLOATS = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}
COMPARE = {"EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">="}

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

INLINE_F32 = {
    "exp": M.exp_f32, "exp2": M.exp2_f32, "log": M.log_f32, "tanh": M.tanh_f32,
    "erf": M.erf_f32, "sigmoid": M.sigmoid_f32,
    "log2": lambda b, x: b.fmul(M.log_f32(b, x), M.fconst(1 / math.log(2))),
    "log10": lambda b, x: b.fmul(M.log_f32(b, x), M.fconst(1 / math.log(10))),
    "exp10": lambda b, x: M.exp_f32(b, b.fmul(x, M.fconst(math.log(10)))),
}
LLVM_UNARY = {"sqrt": "llvm.sqrt", "fabs": "llvm.fabs", "abs": "llvm.fabs",
               "floor": "llvm.floor", "ceil": "llvm.ceil", "trunc": "llvm.trunc",
               "round": "llvm.roundeven", "nearbyint": "llvm.roundeven"}
INT_BITWISE = {"bitwise_and": "and_", "bitwise_or": "or_", "bitwise_xor": "xor"}


def is_float(dtype: str) -> bool:
    return dtype in FLOATS


def is_signed(dtype: str) -> bool:
    return dtype.startswith("int")


class Types:
    """Storage and compute LLVM types of TIR dtypes."""

    def __init__(self, native_f16: bool | None = None):
        if native_f16 is None:
            from ..llvm.jit import host_target

            native_f16 = host_target().has("f16c")
        self.native_f16 = native_f16

    def check(self, dtype: str) -> None:
        if dtype not in FLOATS and dtype not in INT_BITS:
            raise BuildError(f"dtype {dtype!r} is not supported by the TIR compiler",
                             hint="supported: " + ", ".join([*FLOATS, *INT_BITS]))

    def compute(self, dtype: str) -> ir.Type:
        self.check(dtype)
        if dtype in FLOATS:
            return F64 if dtype == "float64" else F32
        return ir.IntType(INT_BITS[dtype])

    def storage(self, dtype: str) -> ir.Type:
        if dtype == "float16":
            return ir.HalfType() if self.native_f16 else I16
        if dtype == "bfloat16":
            return I16
        return I8 if dtype == "bool" else self.compute(dtype)

    def size(self, dtype: str) -> int:
        self.check(dtype)
        return FLOATS.get(dtype) or max(INT_BITS[dtype] // 8, 1)

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


def lt_key(a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr:
    """The canonical ``e`` with ``a < b  <=>  e < 0`` (integers)."""
    return E.sub(a, b)


# Integer comparisons as "e < 0" facts.
AS_LT = {
    "LT": lambda a, b: lt_key(a, b),
    "LE": lambda a, b: E.sub(lt_key(a, b), 1),
    "GT": lambda a, b: lt_key(b, a),
    "GE": lambda a, b: E.sub(lt_key(b, a), 1),
}


def has_load(e: E.PrimExpr) -> bool:
    return isinstance(e, BufferLoad) or any(has_load(c) for c in expr_children(e))


def is_int_expr(e: E.PrimExpr) -> bool:
    return e.dtype in INT_BITS and e.dtype != "bool" and not has_load(e)
