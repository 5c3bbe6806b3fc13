"""DeadCodeElimination: unused bindings and unreachable functions go; outputs and side
effects stay."""

from msc import relax
from msc.relax import op
from msc.relax.transform import DeadCodeElimination


def _tensor(name, shape=(2,), dtype="float32"):
    return relax.Var(name, relax.TensorStructInfo(shape, dtype))


def _bindings(func):
    return [b for blk in func.body.blocks for b in blk.bindings]


def _names(func):
    return [b.var.name_hint for b in _bindings(func)]


def _module():
    """helper (private, called), unused_private, unused_public, main (impure)."""
    bb = relax.BlockBuilder()
    a = _tensor("a")
    with bb.function("helper", [a], private=True):
        bb.emit_func_output(op.exp(a))
    b = _tensor("b")
    with bb.function("unused_private", [b], private=True):
        bb.emit_func_output(b)
    c = _tensor("c")
    with bb.function("unused_public", [c]):
        bb.emit_func_output(c)
    helper = bb.get().get_global_var("helper")
    x, y = _tensor("x"), _tensor("y")
    with bb.function("main", [x, y], pure=False):
        with bb.dataflow():
            live = bb.emit(op.add(x, y), "live")
            bb.emit(op.multiply(x, y), "dead_df")
            chain = bb.emit(op.exp(x), "dead_chain")
            bb.emit(op.log(chain), "dead_chain_end")
            out = bb.emit_output(op.negative(live), "out")
            bb.emit_output(op.sqrt(x), "dead_out")
        called = bb.emit(relax.Call(helper, [out]), "called")
        bb.emit(op.subtract(x, y), "dead_plain")
        bb.emit(op.print(x, format="{}"), "printed")
        bb.emit(op.call_pure_packed("f", x, ty_args=relax.TensorStructInfo((2,), "float32")),
                "dead_pure_packed")
        bb.emit_func_output(called)
    return bb.get()


def test_unused_bindings_go_outputs_and_side_effects_stay():
    mod = DeadCodeElimination()(_module())
    assert _names(mod["main"]) == ["live", "out", "called", "printed"]


def test_unreachable_private_functions_go_public_ones_stay():
    mod = DeadCodeElimination()(_module())
    assert [gv.name_hint for gv in mod.get_global_vars()] == ["helper", "unused_public", "main"]


def test_entry_functions_keep_private_functions_alive():
    mod = DeadCodeElimination(["unused_private"])(_module())
    assert "unused_private" in mod


def test_input_module_is_unchanged_and_pass_is_idempotent():
    original = _module()
    before = _names(original["main"])
    once = DeadCodeElimination()(original)
    assert _names(original["main"]) == before
    twice = DeadCodeElimination()(once)
    assert _names(twice["main"]) == _names(once["main"])
    assert twice["main"] is once["main"]


def test_impure_call_of_a_function_is_kept():
    bb = relax.BlockBuilder()
    a = _tensor("a")
    with bb.function("effect", [a], pure=False, private=True):
        p = bb.emit(op.print(a, format="{}"))
        bb.emit_func_output(relax.Tuple([p, a]))
    effect = bb.get().get_global_var("effect")
    x = _tensor("x")
    with bb.function("main", [x], pure=False):
        bb.emit(relax.Call(effect, [x]), "kept")
        bb.emit_func_output(x)
    mod = DeadCodeElimination()(bb.get())
    assert _names(mod["main"]) == ["kept"]
    assert "effect" in mod


def test_empty_blocks_are_dropped():
    x = _tensor("x")
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            bb.emit(op.exp(x))
            bb.emit_output(op.exp(x))
        bb.emit_func_output(x)
    mod = DeadCodeElimination()(bb.get())
    assert mod["main"].body.blocks == ()
    assert mod["main"].body.body is x


def test_uses_inside_nested_functions_count():
    x = _tensor("x")
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        captured = bb.emit(op.exp(x), "captured")
        z = _tensor("z")
        inner = relax.Function([z], relax.SeqExpr([], op.add(z, captured)))
        fn = bb.emit(inner, "fn")
        bb.emit_func_output(fn)
    mod = DeadCodeElimination()(bb.get())
    assert _names(mod["main"]) == ["captured", "fn"]


PRIM_FUNCS = '''
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tir as T

@I.ir_module
class Module:
    @T.prim_func(private=True)
    def add_one(A: T.Buffer((2,), "float32"), B: T.Buffer((2,), "float32")):
        for i in range(2):
            B[i] = A[i] + T.float32(1)

    @T.prim_func(private=True)
    def unused(A: T.Buffer((2,), "float32"), B: T.Buffer((2,), "float32")):
        for i in range(2):
            B[i] = A[i]

    @R.function
    def main(x: R.Tensor((2,), dtype="float32")) -> R.Tensor((2,), dtype="float32"):
        cls = Module
        c = R.call_tir(cls.add_one, (R.const([1.0, 2.0], "float32"),),
                       out_sinfo=R.Tensor((2,), dtype="float32"))
        y = R.call_tir(cls.add_one, (x,), out_sinfo=R.Tensor((2,), dtype="float32"))
        return R.add(y, c)
'''


def test_prim_funcs_called_through_call_tir_stay_and_are_never_folded():
    from msc.relax.transform import FoldConstant

    mod = DeadCodeElimination()(FoldConstant()(relax.from_script(PRIM_FUNCS)))
    assert [gv.name_hint for gv in mod.get_global_vars()] == ["add_one", "main"]
    assert [b.value.op.name for b in _bindings(mod["main"])] == ["relax.call_tir"] * 2
