"""Symbolic scalars (a TIR PrimExpr subset): size vars and the arithmetic TVM prints.

    from msc import tir
    n = tir.Var("n", "int64")
    tir.min(n, 4) * 2          # prints as T.min(n, 4) * 2
"""

from .expr import (
    BINARY_KINDS,
    BinaryOp,
    Cast,
    FloatImm,
    IntImm,
    Not,
    PrimCall,
    PrimExpr,
    Select,
    SizeVar,
    Var,
    add,
    as_int,
    binary,
    canonicalize,
    ceildiv,
    const,
    convert,
    evaluate,
    floordiv,
    floormod,
    free_vars,
    if_then_else,
    max,
    min,
    mul,
    sub,
    substitute,
    to_str,
    truncdiv,
    truncmod,
)
from .function import (
    AllocBuffer,
    Block,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IterVar,
    PrimFunc,
    SBlock,
    SBlockRealize,
    StringImm,
    install_printer,
)
from .index_map import IndexMap
from .printer import prim_func_to_script

__all__ = [
    "BINARY_KINDS",
    "AllocBuffer",
    "BinaryOp",
    "Block",
    "Buffer",
    "BufferLoad",
    "BufferRegion",
    "BufferStore",
    "Cast",
    "Evaluate",
    "Expr",
    "FloatImm",
    "For",
    "ForKind",
    "IndexMap",
    "IntImm",
    "IterVar",
    "Not",
    "PrimCall",
    "PrimExpr",
    "PrimFunc",
    "SBlock",
    "SBlockRealize",
    "Select",
    "SizeVar",
    "StringImm",
    "Var",
    "add",
    "as_int",
    "binary",
    "canonicalize",
    "ceildiv",
    "const",
    "convert",
    "decl_buffer",
    "evaluate",
    "floordiv",
    "floormod",
    "free_vars",
    "if_then_else",
    "max",
    "min",
    "mul",
    "sub",
    "substitute",
    "to_str",
    "truncdiv",
    "truncmod",
]

Expr = PrimExpr  # TVM 0.27's tirx.Expr (the annotation of scalar expressions)


def decl_buffer(shape, dtype: str = "float32", name: str = "buffer", strides=None,
                elem_offset=None, scope: str = "global") -> Buffer:
    """TVM's ``tirx.decl_buffer``: a Buffer (int dims become int32 IntImms, as TVM's)."""
    dims = [IntImm(d, "int32") if isinstance(d, int) else d for d in shape]
    return Buffer(name, tuple(dims), dtype, strides, elem_offset, scope)

# PrimFunc.script() prints through this hook: the printer imports function.py, not the reverse.
install_printer(prim_func_to_script)

# TVM spells the scheduler tir.Schedule (s_tir.Schedule since 0.27). It lives in msc/s_tir,
# above the IR, and loads on first use, so msc.tir keeps importing nothing but the IR.
_SCHEDULE = {"Schedule", "Trace", "BlockRV", "LoopRV", "ExprRV"}


def __getattr__(name):
    if name in _SCHEDULE:
        from ..s_tir import schedule

        return getattr(schedule, name)
    if name == "TensorIntrin":  # tvm.tir.TensorIntrin, registered in msc/s_tir
        from ..s_tir import tensor_intrin

        return tensor_intrin.TensorIntrin
    raise AttributeError(f"module 'msc.tir' has no attribute {name!r}")
