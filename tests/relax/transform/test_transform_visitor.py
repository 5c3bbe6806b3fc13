"""ExprVisitor / ExprMutator and the var helpers (free_vars, bound_vars, used_vars, ...)."""

import numpy as np

from msc import relax, tir
from msc.relax import op
from msc.relax.visitor import (
    ExprMutator,
    ExprVisitor,
    all_global_vars,
    all_vars,
    bound_vars,
    free_vars,
    post_order_rewrite,
    post_order_visit,
    used_vars,
)


def _tensor(name, shape, dtype="float32"):
    return relax.Var(name, relax.TensorStructInfo(shape, dtype))


def _mlp():
    """main(x, w): relu(matmul(x, w)) + 1, then exp; one dataflow block."""
    x, w = _tensor("x", (2, 4)), _tensor("w", (4, 3))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            mm = bb.emit(op.matmul(x, w))
            act = bb.emit(op.nn.relu(mm))
            add = bb.emit(op.add(act, relax.const(np.ones((3,), "float32"))))
            gv = bb.emit_output(op.exp(add))
        bb.emit_func_output(gv)
    return bb.get()


def _bindings(func):
    return [b for blk in func.body.blocks for b in blk.bindings]


def _op_names(func):
    return [b.value.op.name for b in _bindings(func) if isinstance(b.value, relax.Call)]


class _Recorder(ExprVisitor):
    def __init__(self):
        self.calls, self.defs, self.consts = [], [], 0

    def visit_call_(self, call):
        self.calls.append(call.op.name)
        super().visit_call_(call)

    def visit_var_def_(self, var):
        self.defs.append(var.name_hint)

    def visit_dataflow_var_def_(self, var):
        self.defs.append("df:" + var.name_hint)

    def visit_constant_(self, const):
        self.consts += 1


def test_visitor_sees_every_call_binding_and_def_in_order():
    rec = _Recorder()
    rec.visit_expr(_mlp()["main"])
    assert rec.calls == ["relax.matmul", "relax.nn.relu", "relax.add", "relax.exp"]
    assert rec.defs == ["x", "w", "df:lv", "df:lv1", "df:lv2", "gv"]
    assert rec.consts == 1


def test_post_order_visit_goes_children_first():
    seen = []
    post_order_visit(_mlp()["main"], lambda e: seen.append(type(e).__name__))
    assert seen.index("Constant") < seen.index("Call") or "Call" in seen
    assert seen[-1] == "Function"
    assert seen[-2] == "SeqExpr"


def test_identity_mutator_returns_the_same_objects():
    func = _mlp()["main"]
    assert ExprMutator().visit_expr(func) is func


class _ReluToSigmoid(ExprMutator):
    def visit_call_(self, call):
        call = self.visit_expr_post_order(call)
        if call.op.name == "relax.nn.relu":
            return op.sigmoid(call.args[0])
        return call


def test_mutator_rewrites_and_reinfers_struct_info():
    func = _mlp()["main"]
    new = _ReluToSigmoid().visit_expr(func)
    assert new is not func
    assert _op_names(new) == ["relax.matmul", "relax.sigmoid", "relax.add", "relax.exp"]
    sig = _bindings(new)[1]
    assert sig.value.struct_info == relax.TensorStructInfo((2, 3), "float32")
    # Unchanged bindings are reused as they were.
    assert _bindings(new)[0] is _bindings(func)[0]
    assert _op_names(func)[1] == "relax.nn.relu"  # the input is untouched


class _CastAdd(ExprMutator):
    """add -> astype(add, float16): the struct info of the following bindings changes."""

    def visit_call_(self, call):
        call = self.visit_expr_post_order(call)
        if call.op.name == "relax.add":
            return op.astype(call, "float16")
        return call


def test_changed_struct_info_makes_new_vars_and_remaps_uses():
    func = _mlp()["main"]
    binds = _bindings(func)
    new = _CastAdd().visit_expr(func)
    nb = _bindings(new)
    # astype(add) nests a call: normalization binds the add first, under a fresh name.
    assert _op_names(new) == ["relax.matmul", "relax.nn.relu", "relax.add", "relax.astype",
                              "relax.exp"]
    assert nb[2].var.name_hint not in {b.var.name_hint for b in binds}
    cast_var = nb[3].var
    assert cast_var is not binds[2].var and cast_var.name_hint == "lv2"
    assert cast_var.struct_info.dtype == "float16"
    # exp now reads the new var; its own var (the output) follows with float16, and the
    # function body returns the new output var.
    assert nb[4].value.args[0] is cast_var
    assert nb[4].var.struct_info.dtype == "float16"
    assert new.body.body is nb[4].var
    assert new.ret_struct_info == relax.TensorStructInfo((2, 3), "float16")


class _DropExp(ExprMutator):
    """Replace the exp binding's uses by its argument and drop the binding."""

    def visit_var_binding_(self, binding):
        value = binding.value
        if isinstance(value, relax.Call) and value.op.name == "relax.exp":
            self.set_var_remap(binding.var, self.visit_expr(value.args[0]))
            return
        super().visit_var_binding_(binding)


def test_var_remap_replaces_uses_in_the_body():
    new = _DropExp().visit_expr(_mlp()["main"])
    assert _op_names(new) == ["relax.matmul", "relax.nn.relu", "relax.add"]
    assert new.body.body is _bindings(new)[-1].var


def test_symbolic_substitution_through_tir_var_map():
    n = tir.Var("n")
    x = _tensor("x", (n, 4))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            gv = bb.emit_output(op.reshape(x, relax.ShapeExpr([n * 4])))
        bb.emit_func_output(gv)
    mutator = ExprMutator()
    mutator.tir_var_map = {"n": 3}
    new = mutator.visit_expr(bb.get()["main"])
    assert new.params[0].struct_info == relax.TensorStructInfo((3, 4), "float32")
    assert _bindings(new)[0].value.args[1] == relax.ShapeExpr([12])
    assert new.ret_struct_info == relax.TensorStructInfo((12,), "float32")


def test_post_order_rewrite_with_a_function():
    def double_consts(e):
        if isinstance(e, relax.Constant):
            return relax.const(e.data * 2)
        return e

    new = post_order_rewrite(_mlp()["main"], double_consts)
    const = _bindings(new)[2].value.args[1]
    np.testing.assert_array_equal(const.data, np.full((3,), 2, "float32"))


def test_lookup_binding_gives_the_emitted_value():
    seen = {}

    class Look(ExprMutator):
        def visit_var_(self, var):
            bound = self.lookup_binding(var)
            if bound is not None:
                seen[var.name_hint] = bound.op.name
            return super().visit_var_(var)

    Look().visit_expr(_mlp()["main"])
    assert seen == {"lv": "relax.matmul", "lv1": "relax.nn.relu", "lv2": "relax.add",
                    "gv": "relax.exp"}


def _names(vs):
    return [v.name_hint for v in vs]


def test_var_helpers():
    func = _mlp()["main"]
    names = _names
    assert names(bound_vars(func)) == ["x", "w", "lv", "lv1", "lv2", "gv"]
    assert names(used_vars(func)) == ["x", "w", "lv", "lv1", "lv2", "gv"]
    assert free_vars(func) == []
    assert names(free_vars(func.body)) == ["x", "w"]
    assert names(all_vars(func)) == ["x", "w", "lv", "lv1", "lv2", "gv"]
    assert names(used_vars(_bindings(func)[2].value)) == ["lv1"]


def test_all_global_vars_lists_callees():
    x = _tensor("x", (2,))
    bb = relax.BlockBuilder()
    with bb.function("helper", [x], private=True):
        bb.emit_func_output(op.exp(x))
    y = _tensor("y", (2,))
    with bb.function("main", [y]):
        out = bb.emit(relax.Call(bb.get().get_global_var("helper"), [y]))
        bb.emit_func_output(out)
    mod = bb.get()
    assert [gv.name_hint for gv in all_global_vars(mod["main"])] == ["helper"]
    assert _bindings(mod["main"])[0].var.struct_info == relax.TensorStructInfo((2,), "float32")
