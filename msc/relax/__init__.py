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

from . import op
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
    "op", "BlockBuilder", "Attrs", "Binding", "BindingBlock", "Call", "Constant",
    "DataflowBlock", "DataflowVar", "DataTypeImm", "Expr", "ExternFunc", "Function",
    "GlobalVar", "If", "MatchCast", "PrimValue", "SeqExpr", "ShapeExpr", "StringImm", "Tuple",
    "TupleGetItem", "Var", "VarBinding", "const", "convert_to_expr", "prim_value", "IRModule",
    "Op", "FuncStructInfo", "FuncType", "ObjectStructInfo", "ObjectType", "PrimStructInfo",
    "PrimType", "ShapeStructInfo", "ShapeType", "StructInfo", "TensorStructInfo", "TensorType",
    "TupleStructInfo", "TupleType",
]

from . import transform  # noqa: F401,E402
