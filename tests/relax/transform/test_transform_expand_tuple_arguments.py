"""ExpandTupleArguments: private functions take tuple fields as separate params."""

from msc import relax
from msc.relax import op
from msc.relax.transform import ExpandTupleArguments


def _sinfo():
    return relax.TensorStructInfo((2,), "float32")


def _bindings(func):
    return [b for blk in func.body.blocks for b in blk.bindings]


def _module(nested=False):
    """f(t: (A, B) [or ((A, B), C)], y) private; g(t) public; main calls f three ways."""
    field = relax.TupleStructInfo([_sinfo(), _sinfo()])
    t_sinfo = relax.TupleStructInfo([field, _sinfo()]) if nested else field
    bb = relax.BlockBuilder()
    t, y = relax.Var("t", t_sinfo), relax.Var("y", _sinfo())
    with bb.function("f", [t, y], private=True):
        pair = bb.emit(relax.TupleGetItem(t, 0), "a") if nested else t
        a = bb.emit(relax.TupleGetItem(pair, 0), "a0")
        b = bb.emit(relax.TupleGetItem(pair, 1), "b")
        c = bb.emit(op.add(a, b), "c")
        bb.emit_func_output(op.add(c, y))
    g_t = relax.Var("t", t_sinfo)
    with bb.function("g", [g_t]):
        bb.emit_func_output(g_t)
    f = bb.get().get_global_var("f")
    x, y = relax.Var("x", _sinfo()), relax.Var("y", _sinfo())
    with bb.function("main", [x, y]):
        lit = relax.Tuple([x, y])
        arg = relax.Tuple([lit, x]) if nested else lit
        tup = bb.emit(arg, "tup")
        r1 = bb.emit(relax.Call(f, [tup, y]), "r1")
        r2 = bb.emit(relax.Call(f, [arg, r1]), "r2")
        bb.emit_func_output(r2)
    return bb.get()


def test_params_are_flattened_and_uses_rewritten():
    mod = ExpandTupleArguments()(_module())
    f = mod["f"]
    assert [p.name_hint for p in f.params] == ["t_0", "t_1", "y"]
    assert [p.struct_info for p in f.params] == [_sinfo()] * 3
    c = _bindings(f)[0]
    assert c.var.name_hint == "c"
    assert c.value.args[0] is f.params[0] and c.value.args[1] is f.params[1]


def test_callers_pass_the_fields():
    mod = ExpandTupleArguments()(_module())
    main = mod["main"]
    x, y = main.params
    r1, r2 = _bindings(main)  # the tuple binding is no longer used, so it is removed
    assert list(r1.value.args) == [x, y, y]
    assert list(r2.value.args) == [x, y, r1.var]
    assert r2.var.struct_info == _sinfo()


def test_public_functions_keep_their_signature():
    before = _module()
    mod = ExpandTupleArguments()(before)
    assert mod["g"] is before["g"]


def test_nested_tuples_flatten_recursively():
    mod = ExpandTupleArguments()(_module(nested=True))
    assert [p.name_hint for p in mod["f"].params] == ["t_0_0", "t_0_1", "t_1", "y"]
    x, y = mod["main"].params
    assert list(_bindings(mod["main"])[0].value.args) == [x, y, x, y]


def test_tuple_from_a_call_is_indexed():
    bb = relax.BlockBuilder()
    t = relax.Var("t", relax.TupleStructInfo([_sinfo(), _sinfo()]))
    with bb.function("f", [t], private=True):
        bb.emit_func_output(op.add(relax.TupleGetItem(t, 0), relax.TupleGetItem(t, 1)))
    f = bb.get().get_global_var("f")
    x = relax.Var("x", relax.TensorStructInfo((4,), "float32"))
    with bb.function("main", [x]):
        parts = bb.emit(op.split(x, 2), "parts")
        bb.emit_func_output(bb.emit(relax.Call(f, [parts]), "r"))
    mod = ExpandTupleArguments()(bb.get())
    call = _bindings(mod["main"])[1].value
    assert [(type(a).__name__, a.index) for a in call.args] == [("TupleGetItem", 0),
                                                                ("TupleGetItem", 1)]
    assert all(a.tuple_value is _bindings(mod["main"])[0].var for a in call.args)


def test_no_tuple_params_is_a_no_op_and_pass_is_idempotent():
    once = ExpandTupleArguments()(_module())
    twice = ExpandTupleArguments()(once)
    assert twice is once
