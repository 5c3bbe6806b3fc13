"""The ``T.*`` names msc's TIR understands, as tables shared by parser, printer and interpreter.

Adding an intrinsic is one row here plus, for the interpreter, one numpy function in
``interp.MATH``; a test checks the two tables agree.
"""

from __future__ import annotations

# dtype constructors: T.float32(0.5) is a constant, T.int64() declares a symbolic var.
DTYPES = frozenset(
    ["bool"]
    + [f"int{b}" for b in (8, 16, 32, 64)]
    + [f"uint{b}" for b in (8, 16, 32, 64)]
    + ["float16", "float32", "float64", "bfloat16", "float8_e4m3fn", "float8_e5m2"]
)

# T.<name>(a, b) that build a BinaryOp of the given kind (see expr.BINARY_KINDS).
BINARY_FUNCS = {
    "min": "Min",
    "max": "Max",
    "floordiv": "FloorDiv",
    "floormod": "FloorMod",
    "truncdiv": "Div",
    "Div": "Div",
    "truncmod": "Mod",
}

# Bitwise intrinsics: TVM prints them as Python operators. name -> (symbol, precedence).
BITWISE = {
    "bitwise_or": ("|", 5),
    "bitwise_xor": ("^", 6),
    "bitwise_and": ("&", 7),
    "shift_left": ("<<", 8),
    "shift_right": (">>", 8),
}
BITWISE_BY_SYMBOL = {sym: name for name, (sym, _) in BITWISE.items()}

# Math intrinsics whose result has the dtype of their first argument.
MATH_UNARY = frozenset([
    "exp", "exp2", "exp10", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "sigmoid", "erf",
    "tanh", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh",
    "atanh", "fabs", "floor", "ceil", "trunc", "round", "nearbyint", "abs", "bitwise_not",
    "likely", "popcount",
])
MATH_BINARY = frozenset(["pow", "atan2", "fmod", "hypot", "copysign", "nextafter", "ldexp"])
PREDICATES = frozenset(["isnan", "isinf", "isfinite"])  # bool result

# Calls whose first argument is the result dtype: T.call_extern("int32", "f", x).
TYPED_CALLS = frozenset(["call_extern", "call_pure_extern", "call_intrin",
                         "call_llvm_intrin", "call_llvm_pure_intrin"])

# TVM builtins msc carries through parse, schedule and print but does not compute: name ->
# result dtype when the call gives none (``dtype=`` overrides it). The interpreter and the
# backend refuse them by name.
OPAQUE_CALLS = {
    "tvm_fill_fragment": "handle", "tvm_load_matrix_sync": "handle",
    "tvm_store_matrix_sync": "handle", "tvm_mma_sync": "handle", "tvm_bmma_sync": "handle",
    "tvm_access_ptr": "handle", "type_annotation": "handle", "address_of": "handle",
    "q_multiply_shift": "int32", "q_multiply_shift_per_axis": "int32", "assume": "bool",
    "vscale": "int32", "tvm_thread_allreduce": "handle", "tvm_storage_sync": "int32",
    "launch_thread": "int32",  # x = T.launch_thread("blockIdx.x", n): a GPU thread index
}

# Value-level names with their own syntax in the parser.
SPECIAL_EXPRS = frozenset(["Cast", "cast", "Select", "if_then_else", "max_value",
                           "min_value", "ceildiv"])

LOOP_KINDS = {"serial": "serial", "parallel": "parallel", "vectorized": "vectorized",
              "unroll": "unroll", "thread_binding": "thread_binding"}

# Statement-level and structural names (the script helper's T namespace may list these).
STRUCTURE = frozenset([
    "prim_func", "Buffer", "handle", "grid", "sblock", "block", "init", "reads", "writes",
    "where", "func_attr", "sblock_attr", "block_attr", "match_buffer", "alloc_buffer",
    "sblock_alloc_buffer", "alloc_shared", "alloc_local", "evaluate", "axis", "let", "attr",
    *LOOP_KINDS,
])

EXPR_NAMES = (DTYPES | set(BINARY_FUNCS) | set(BITWISE) | MATH_UNARY | MATH_BINARY
              | PREDICATES | TYPED_CALLS | SPECIAL_EXPRS | set(OPAQUE_CALLS))
# Every T.<name> the parser accepts.
TIR_NAMES = frozenset(EXPR_NAMES | STRUCTURE)


def call_dtype(name: str, args) -> str:
    """Result dtype of the math/bitwise intrinsic ``name`` applied to ``args``."""
    if name in PREDICATES:
        return "bool"
    return args[0].dtype if args else "int32"
