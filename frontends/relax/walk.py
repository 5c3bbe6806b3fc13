"""Reading a Relax function the way the graph builder needs it: its bindings in order, what
each var is bound to, how often a var is used, and the constants a value mentions.

    fn = FunctionView(mod["main"])
    for block, binding in fn.bindings:
        fn.value_of(binding.var)          # the bound value (following var-to-var bindings)
"""

from __future__ import annotations

from collections import Counter

from msc.relax.expr import (
    Call,
    Constant,
    DataTypeImm,
    Expr,
    ExternFunc,
    Function,
    PrimValue,
    SeqExpr,
    ShapeExpr,
    StringImm,
    Tuple,
    TupleGetItem,
    Var,
)
from msc.relax.op.registry import Op

__all__ = ["FunctionView", "callee_name", "constants_in", "op_name"]

_LEAF_VALUES = (Constant, ShapeExpr, PrimValue, StringImm, DataTypeImm)


def op_name(call: Call) -> str | None:
    """The Relax op name without ``relax.`` (``"nn.conv2d"``), or None for non-op calls."""
    op = call.op
    return op.op_def.name if isinstance(op, Op) else None  # full_name is "relax." + name


def callee_name(call: Call) -> str:
    """A readable name of what ``call`` calls (for error messages)."""
    op = call.op
    if isinstance(op, Op):
        return op.name.removeprefix("relax.")
    if isinstance(op, ExternFunc):
        return op.global_symbol
    return getattr(op, "name_hint", type(op).__name__)


def _children(expr: Expr) -> tuple:
    if isinstance(expr, Call):
        return expr.args
    if isinstance(expr, Tuple):
        return expr.fields
    if isinstance(expr, TupleGetItem):
        return (expr.tuple_value,)
    return ()


def constants_in(expr: Expr) -> list[Constant]:
    """The constants of ``expr`` in pre-order, left to right (each object once)."""
    if _flat_call(expr):  # most bindings: no walk needed
        found = {id(a): a for a in expr.args if isinstance(a, Constant)}
        return list(found.values())
    found: dict[int, Constant] = {}
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, Constant):
            found.setdefault(id(node), node)
        stack.extend(reversed(_children(node)))
    return list(found.values())


_NESTING = (Call, Tuple, TupleGetItem)


def _flat_call(expr) -> bool:
    if type(expr) is not Call:
        return False
    for arg in expr.args:  # (a loop, not any(genexpr): once per binding)
        if isinstance(arg, _NESTING):
            return False
    return True


def _vars_in(expr: Expr):
    if _flat_call(expr):  # the vars in the order the walk below finds them
        return [a for a in reversed(expr.args) if isinstance(a, Var)]
    return _walk_vars(expr)


def _walk_vars(expr: Expr):
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, Var):
            yield node
        stack.extend(_children(node))


class FunctionView:
    """The top-level bindings of a function (``(block_index, binding)`` in order), the value
    bound to each var and the number of uses of each var (the function result counts)."""

    def __init__(self, func: Function):
        self.func = func
        self.bindings: list = []
        self.blocks: list = []
        body = func.body
        if isinstance(body, SeqExpr):
            for index, block in enumerate(body.blocks):
                self.blocks.append(block)
                self.bindings.extend((index, b) for b in block.bindings)
            self.result = body.body
        else:
            self.result = body
        self._values = {b.var: b.value for _, b in self.bindings}
        self._position = {b.var: i for i, (_, b) in enumerate(self.bindings)}
        self._block = {b.var: k for k, b in self.bindings}
        self.uses: Counter = Counter()
        for _, b in self.bindings:
            self.uses.update(_vars_in(b.value))
        self.uses.update(_vars_in(self.result))

    def bound_value(self, var: Var) -> Expr | None:
        """The value ``var`` is bound to in this function (None for params)."""
        return self._values.get(var)

    def value_of(self, expr: Expr) -> Expr:
        """``expr`` resolved through var-to-var bindings; a var bound to a leaf value (a
        constant, shape, scalar, string or dtype) gives that value."""
        while isinstance(expr, Var):
            value = self._values.get(expr)
            if isinstance(value, _LEAF_VALUES):
                return value
            if not isinstance(value, Var):
                return expr
            expr = value
        return expr

    def position(self, var: Var) -> int:
        """The index of ``var``'s binding (-1 for params)."""
        return self._position.get(var, -1)

    def block_of(self, var: Var) -> int:
        """The index of the block binding ``var`` (-1 for params)."""
        return self._block.get(var, -1)
