"""msc's Relax-style IR: a faithful, pure-Python subset of TVM Relax.

    from msc import relax
    x = relax.Var("x", relax.TensorStructInfo((1, 784), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            gv = bb.emit_output(relax.op.nn.relu(x))
        bb.emit_func_output(gv)
    bb.get().show()
"""

from . import op, text_form
from .block_builder import BlockBuilder
from .expr import (
    Attrs,
    Binding,
    BindingBlock,
    Call,
    Constant,
    DataflowBlock,
    DataflowVar,
    DataTypeImm,
    Expr,
    ExternFunc,
    Function,
    GlobalVar,
    If,
    MatchCast,
    PrimValue,
    SeqExpr,
    ShapeExpr,
    Span,
    StringImm,
    Tuple,
    TupleGetItem,
    Var,
    VarBinding,
    const,
    convert_to_expr,
    prim_value,
)
from .module import IRModule
from .op.registry import Op
from .parser import from_script
from .printer import expr_to_str, sinfo_to_str
from .struct_info import (
    FuncStructInfo,
    FuncType,
    ObjectStructInfo,
    ObjectType,
    PrimStructInfo,
    PrimType,
    ShapeStructInfo,
    ShapeType,
    StructInfo,
    TensorStructInfo,
    TensorType,
    TupleStructInfo,
    TupleType,
)

__all__ = [
    "Attrs",
    "Binding",
    "BindingBlock",
    "BlockBuilder",
    "Call",
    "Constant",
    "DataTypeImm",
    "DataflowBlock",
    "DataflowVar",
    "Expr",
    "ExternFunc",
    "FuncStructInfo",
    "FuncType",
    "Function",
    "GlobalVar",
    "IRModule",
    "If",
    "MatchCast",
    "ObjectStructInfo",
    "ObjectType",
    "Op",
    "PrimStructInfo",
    "PrimType",
    "PrimValue",
    "SeqExpr",
    "ShapeExpr",
    "ShapeStructInfo",
    "ShapeType",
    "Span",
    "StringImm",
    "StructInfo",
    "TensorStructInfo",
    "TensorType",
    "Tuple",
    "TupleGetItem",
    "TupleStructInfo",
    "TupleType",
    "Var",
    "VarBinding",
    "const",
    "convert_to_expr",
    "from_script",
    "op",
    "prim_value",
]

# Exprs and struct infos print through this hook: the printer imports them, not they it.
text_form.install(expr_to_str, sinfo_to_str)

from . import transform  # noqa: F401  (transforms use the whole IR, so they load last)

# The backend (llvmlite) loads on first use: `relax.build`, `relax.VirtualMachine`, ...
_BACKEND = {"build": "build", "VirtualMachine": "runtime.vm", "cpu": "runtime.arrays",
            "register_func": "runtime.packed", "get_global_func": "runtime.packed"}


def __getattr__(name):
    if name == "get_pipeline":  # TVM spells it relax.get_pipeline("zero")
        from .transform import get_pipeline

        return get_pipeline
    from importlib import import_module

    if name == "vm":  # TVM's lessons: relax.vm.build(mod, target="llvm")
        return import_module(".vm", __name__)
    if name in _BACKEND:
        return getattr(import_module(f"..backend.{_BACKEND[name]}", __name__), name)
    raise AttributeError(f"module 'msc.relax' has no attribute {name!r}")
