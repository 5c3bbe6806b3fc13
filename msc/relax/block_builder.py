"""BlockBuilder: build Relax functions binding by binding, with inference on emit.

Same interface as TVM's::

    bb = BlockBuilder()
    x = Var("x", TensorStructInfo((1, 784), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            lv = bb.emit(op.nn.relu(x))
            gv = bb.emit_output(lv)
        bb.emit_func_output(gv)
    mod = bb.get()
"""

from __future__ import annotations

from contextlib import contextmanager

from ..errors import ValidationError
from .expr import (
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
)
from .module import IRModule
from .op.registry import Op, infer_struct_info
from .struct_info import FuncStructInfo, ObjectStructInfo, TupleStructInfo

_LEAVES = (Var, Constant, ShapeExpr, PrimValue, StringImm, DataTypeImm, GlobalVar, ExternFunc,
           Op)


class _FuncScope:
    def __init__(self, name: str, params, attrs, pure: bool):
        self.name = name
        self.params = list(params) if params is not None else None
        self.attrs = dict(attrs or {})
        self.pure = pure
        self.blocks: list = []


class BlockBuilder:
    """Builds functions into an IRModule; ``emit`` infers struct info once per binding."""

    def __init__(self, mod: IRModule | None = None):
        self._mod = mod.copy() if mod is not None else IRModule()
        self._func: _FuncScope | None = None
        self._bindings: list | None = None
        self._is_dataflow = False
        self._names: set[str] = set()
        self._next: dict[str, int] = {}  # hint -> the first suffix not yet known taken
        self._span = None  # given to every var bound inside ``with bb.span(...)``

    # ---- scopes ---------------------------------------------------------------------------
    @contextmanager
    def function(self, name: str, params=None, attrs=None, pure: bool = True,
                 private: bool = False):
        if self._func is not None:
            raise ValidationError(f"function {name!r} opened inside {self._func.name!r}",
                                  hint="finish the current function first")
        attrs = dict(attrs or {})
        if not private:
            attrs.setdefault("global_symbol", name)
        self._func = _FuncScope(name, params, attrs, pure)
        self._names = {p.name_hint for p in (params or [])}
        self._next = {}
        self._start_block(False)
        try:
            yield self
            if self._func is not None:
                raise ValidationError(f"function {name!r} has no output",
                                      hint="call bb.emit_func_output(value) inside the scope")
        finally:
            self._func = None
            self._bindings = None

    @contextmanager
    def dataflow(self):
        if self._func is None:
            raise ValidationError("bb.dataflow() must be used inside bb.function(...)")
        if self._is_dataflow:
            raise ValidationError("dataflow blocks cannot be nested")
        self._end_block()
        self._start_block(True)
        yield self
        self._end_block()
        self._start_block(False)

    def _start_block(self, dataflow: bool) -> None:
        self._bindings = []
        self._is_dataflow = dataflow

    def _end_block(self) -> None:
        if self._bindings:
            block_type = DataflowBlock if self._is_dataflow else BindingBlock
            self._func.blocks.append(block_type(self._bindings))
        self._bindings = []

    @contextmanager
    def span(self, span):
        """Every var bound inside gets ``span`` (a ``relax.Span``: the frontend node and its
        module scope); ``None`` leaves them without one. Nests: the inner span wins.

            with bb.span(Span("/layer1/conv1/Conv", ("layer1", "conv1"))):
                y = bb.emit(op.nn.conv2d(x, w))      # y.span.scope == ("layer1", "conv1")
        """
        outer, self._span = self._span, span
        try:
            yield self
        finally:
            self._span = outer

    def current_block_is_dataflow(self) -> bool:
        return self._is_dataflow

    # ---- emitting -------------------------------------------------------------------------
    def emit(self, expr: Expr, name_hint: str = "") -> Var:
        """Bind ``expr`` to a new var (a DataflowVar inside a dataflow block)."""
        value = self.normalize(expr)
        var_type = DataflowVar if self._is_dataflow else Var
        default = "lv" if self._is_dataflow else "gv"
        var = var_type(self._fresh(name_hint or default), value.struct_info, self._span)
        return self._bind(var, value)

    def emit_output(self, expr: Expr, name_hint: str = "") -> Var:
        """Inside a dataflow block: bind ``expr`` to a var visible after the block."""
        if not self._is_dataflow:
            raise ValidationError("emit_output is only valid inside bb.dataflow()")
        if isinstance(expr, (list, tuple)):
            expr = Tuple(expr)
        value = self.normalize(expr)
        return self._bind(Var(self._fresh(name_hint or "gv"), value.struct_info, self._span),
                          value)

    def match_cast(self, value: Expr, struct_info, name_hint: str = "") -> Var:
        value = self.normalize(value)
        var_type = DataflowVar if self._is_dataflow else Var
        var = var_type(self._fresh(name_hint or ("lv" if self._is_dataflow else "gv")),
                       struct_info, self._span)
        self._require_scope()
        self._bindings.append(MatchCast(var, value, struct_info))
        return var

    def emit_normalized(self, binding) -> None:
        self._require_scope()
        self._bindings.append(binding)

    def _bind(self, var: Var, value: Expr) -> Var:
        self._require_scope()
        self._bindings.append(VarBinding(var, value))
        return var

    def _require_scope(self) -> None:
        if self._bindings is None:
            raise ValidationError("emit outside of bb.function(...)",
                                  hint="open a function scope with `with bb.function(name):`")

    def _fresh(self, hint: str) -> str:
        """``hint``, else ``hint1``, ``hint2``, ...: the first one not taken. Names are never
        released, so the search resumes where it stopped for this hint (linear, not quadratic,
        in the number of bindings)."""
        k = self._next.get(hint, 0)
        name = hint if k == 0 else f"{hint}{k}"
        while name in self._names:
            k += 1
            name = f"{hint}{k}"
        self._names.add(name)
        self._next[hint] = k + 1
        return name

    def emit_func_output(self, output, params=None) -> GlobalVar:
        scope = self._func
        if scope is None:
            raise ValidationError("emit_func_output outside of bb.function(...)")
        if self._is_dataflow:
            raise ValidationError("emit_func_output must be called after the dataflow block",
                                  hint="close `with bb.dataflow():` and emit outputs with "
                                       "bb.emit_output inside it")
        if params is not None:
            if scope.params is not None:
                raise ValidationError("params given both to bb.function and emit_func_output")
            scope.params = list(params)
        if isinstance(output, (list, tuple)):
            output = Tuple(output)
        body = self.normalize(output)
        self._end_block()
        func = Function(scope.params or [], SeqExpr(scope.blocks, body), body.struct_info,
                        scope.pure, scope.attrs)
        self._func = None
        self._bindings = None
        return self.add_func(func, scope.name)

    # ---- module ---------------------------------------------------------------------------
    def add_func(self, func, name: str) -> GlobalVar:
        self._mod[name] = func
        return self._mod.get_global_var(name)

    def update_func(self, gv: GlobalVar, func) -> None:
        self._mod.update_func(gv, func)

    def get(self) -> IRModule:
        return self._mod.copy()

    finalize = get

    # ---- normalization --------------------------------------------------------------------
    def normalize(self, expr) -> Expr:
        """Fill struct info bottom-up; nested calls inside a scope are bound to vars first."""
        if is_normal(expr):  # most emits: a leaf, or a call on leaves inferred already
            return expr
        if isinstance(expr, (list, tuple)):
            expr = Tuple(expr)
        if not isinstance(expr, Expr):
            raise ValidationError(f"cannot emit {type(expr).__name__} {expr!r}",
                                  hint="emit Relax expressions (relax.op.* calls, vars, ...)")
        handler = _NORMALIZERS.get(type(expr))
        if handler is None:
            for base, fn in _NORMALIZERS.items():
                if isinstance(expr, base):
                    handler = fn
                    break
        return handler(self, expr) if handler else expr

    def _normalize_arg(self, arg: Expr) -> Expr:
        arg = self.normalize(arg)
        if isinstance(arg, (Call, If)) and self._bindings is not None:
            return self.emit(arg)
        return arg

    def _normalize_call(self, call: Call) -> Call:
        args = [self._normalize_arg(a) for a in call.args]
        if any(a is not b for a, b in zip(args, call.args)):
            call = Call(call.op, args, call.attrs, call.sinfo_args, call.span)
        if call.struct_info is None:
            call._set_struct_info(self._call_sinfo(call))
        return call

    def _call_sinfo(self, call: Call):
        if isinstance(call.op, Op):
            return infer_struct_info(call)
        if call.sinfo_args:  # packed calls: several sinfo_args mean a tuple result (as TVM)
            args = call.sinfo_args
            return args[0] if len(args) == 1 else TupleStructInfo(args)
        callee = self._mod[call.op] if isinstance(call.op, GlobalVar) else call.op
        sinfo = getattr(callee, "struct_info", None)
        return sinfo.ret if isinstance(sinfo, FuncStructInfo) else ObjectStructInfo()

    def _normalize_tuple(self, tup: Tuple) -> Tuple:
        fields = [self._normalize_arg(f) for f in tup.fields]
        if any(a is not b for a, b in zip(fields, tup.fields)) or tup.struct_info is None:
            return Tuple(fields, tup.span)
        return tup

    def _normalize_get_item(self, item: TupleGetItem) -> TupleGetItem:
        inner = self._normalize_arg(item.tuple_value)
        if inner is item.tuple_value and item.struct_info is not None:
            return item
        if not isinstance(inner.struct_info, TupleStructInfo):
            raise ValidationError(f"indexing [{item.index}] a non-tuple value of type "
                                  f"{inner.struct_info}")
        return TupleGetItem(inner, item.index, item.span)

    def lookup_binding(self, var: Var) -> Expr | None:
        for block in list(self._func.blocks if self._func else []) + [
                BindingBlock(self._bindings or [])]:
            for b in block.bindings:
                if b.var is var:
                    return b.value
        return None


# Expressions ``normalize`` returns as they are: leaves, and calls with struct info whose
# arguments are all leaves (the common binding; mutators check this instead of normalizing).
_NORMAL_LEAVES = frozenset({Var, DataflowVar, Constant, ShapeExpr, PrimValue, StringImm,
                            DataTypeImm, GlobalVar, ExternFunc, Op})


def is_normal(expr) -> bool:
    kind = type(expr)
    if kind in _NORMAL_LEAVES:
        return True
    return kind is Call and expr.struct_info is not None and all(
        type(a) in _NORMAL_LEAVES for a in expr.args)


_NORMALIZERS = {
    Call: BlockBuilder._normalize_call,
    Tuple: BlockBuilder._normalize_tuple,
    TupleGetItem: BlockBuilder._normalize_get_item,
}
for _leaf in _LEAVES:
    _NORMALIZERS[_leaf] = lambda bb, e: e
