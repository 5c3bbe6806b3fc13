"""LegalizeOps: op calls become R.call_tir to generated PrimFuncs printed like TVM's (several
byte-identical to TVM 0.27's golden output), print -> parse -> print is a fixed point,
identical funcs are shared, unknown shapes and ops without rules are left alone; the zero
pipeline; the compiled-call entry point the VM uses."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from msc.backend.legalize import legalized_ops, tir_kernel
from msc.backend.legalize.testing import kernel_jit
from msc.errors import ValidationError
from msc.relax.block_builder import BlockBuilder
from msc.relax.expr import Attrs, Call, Tuple, Var
from msc.relax.op.registry import OPS, make_call
from msc.relax.parser import from_script
from msc.relax.struct_info import ShapeStructInfo, TensorStructInfo, TupleStructInfo
from msc.relax.transform.base import Sequential
from msc.relax.transform.legalize_ops import LegalizeOps, get_pipeline
from msc.tir import expr as E
from msc.tir.function import PrimFunc
from msc.tir.parser import parse_tir_text

DATA = pathlib.Path(__file__).parents[2] / "tir" / "data"


def _module(params, *calls):
    """main(params) applying each ``(op, args, attrs)`` in turn to the previous result."""
    bb = BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            value = None
            for op, args, attrs in calls:
                inputs = [value if a is None else a for a in args]
                value = bb.emit(make_call(op, *inputs, **attrs))
            out = bb.emit_output(value)
        bb.emit_func_output(out)
    return bb.get()


def _tensor(name, shape, dtype="float32"):
    return Var(name, TensorStructInfo(shape, dtype))


def _prims(mod) -> dict:
    return {gv.name_hint: f for gv, f in mod.functions.items() if isinstance(f, PrimFunc)}


def _calls(mod) -> list:
    return [b.value for blk in mod["main"].body.blocks for b in blk.bindings
            if isinstance(b.value, Call)]


# Golden files whose prim func msc prints exactly as TVM 0.27 does: (op, extra args, attrs).
SAME_AS_TVM = {
    "add": ("add", (), {}), "matmul": ("matmul", (), {}), "sum": ("sum", ([1],), {}),
    "dyn_add": ("add", (), {}), "dyn_matmul": ("matmul", (), {}),
    "mean": ("mean", ([0, 2], True), {}), "relu": ("nn.relu", (), {}),
    "transpose": ("permute_dims", ([2, 0, 1],), {}), "astype": ("astype", ("int32",), {}),
    "less": ("less", (), {}), "divide": ("divide", (), {}), "power": ("power", (), {}),
    "sigmoid": ("sigmoid", (), {}), "tanh": ("tanh", (), {}), "sqrt": ("sqrt", (), {}),
}
# Same signature and block structure, different expressions on purpose (e.g. -inf inits,
# fused stages, negative take indices, padding read in place).
LIKE_TVM = {
    "softmax": ("nn.softmax", (), {"axis": -1}), "max": ("max", ([1],), {}),
    "max_pool2d": ("nn.max_pool2d", (), {"pool_size": (2, 2), "strides": (2, 2)}),
    "layer_norm": ("nn.layer_norm", ([-1],), {}), "take": ("take", (), {"axis": 0}),
    "argmax": ("argmax", (1,), {}), "reshape": ("reshape", ((6, 4),), {}),
    "where": ("where", (), {}), "gelu": ("nn.gelu", (), {}),
    "dyn_softmax": ("nn.softmax", (), {"axis": -1}),
}


def _legalize_golden(stem: str, case):
    text = (DATA / f"legalize_{stem}.tvmscript").read_text()
    params = list(from_script(text)["main"].params)
    op, args, attrs = case
    ours = list(_prims(LegalizeOps()(_module(params, (op, params + list(args), attrs))))
                .values())
    golden = list(parse_tir_text(text).values())
    assert len(ours) == 1 and len(golden) == 1
    return ours[0], golden[0]


@pytest.mark.parametrize("stem", sorted(SAME_AS_TVM))
def test_prim_func_text_is_tvms(stem):
    ours, golden = _legalize_golden(stem, SAME_AS_TVM[stem])
    assert ours.script("f") == golden.script("f")


@pytest.mark.parametrize("stem", sorted(LIKE_TVM))
def test_prim_func_reads_like_tvms(stem):
    ours, golden = _legalize_golden(stem, LIKE_TVM[stem])
    assert [(p.name, p.shape, p.dtype) for p in ours.params[:-1]] == \
        [(p.name, p.shape, p.dtype) for p in golden.params[:-1]]
    assert ours.params[-1].shape == golden.params[-1].shape
    assert ours.s_tir and ours.private and ours.attrs == {"tirx.noalias": True}
    text = ours.script("f")
    assert text.splitlines()[0] == "@T.prim_func(private=True, s_tir=True)"
    assert "T.axis.remap(" in text and "T.sblock(" in text


def _zoo():
    n = E.Var("n")
    x, y, w = _tensor("x", (n, 4, 6, 6)), _tensor("y", (1, 4, 1, 1)), _tensor("w", (8, 4, 3, 3))
    g, b = _tensor("g", (72,)), _tensor("b", (72,))
    return _module([x, y, w, g, b],
                   ("add", [x, y], {}),
                   ("nn.conv2d", [None, w], {"padding": (1, 1)}),
                   ("nn.relu", [None], {}),
                   ("nn.max_pool2d", [None], {"pool_size": (3, 3), "strides": (2, 2),
                                              "padding": (1, 1)}),
                   ("nn.batch_flatten", [None], {}),
                   ("nn.layer_norm", [None, g, b], {"axes": [-1]}),
                   ("nn.softmax", [None], {"axis": -1}),
                   ("argmax", [None], {"axis": 1}))


def test_every_op_call_becomes_call_tir():
    mod = LegalizeOps()(_zoo())
    calls = _calls(mod)
    assert calls and all(c.op.name == "relax.call_tir" for c in calls)
    assert len(_prims(mod)) == len(calls)
    assert "R.call_tir(cls.conv2d, " in mod.script()


def test_print_parse_print_is_a_fixed_point():
    text = LegalizeOps()(_zoo()).script()
    assert from_script(text).script() == text


def test_identical_prim_funcs_are_shared_and_names_are_unique():
    x, y = _tensor("x", (2, 3)), _tensor("y", (2, 3))
    mod = LegalizeOps()(_module([x, y], ("add", [x, y], {}), ("add", [None, y], {}),
                                ("sum", [None], {"axis": [1]}), ("add", [None, None], {})))
    assert sorted(_prims(mod)) == ["add", "add1", "sum"]
    assert [c.args[0].name_hint for c in _calls(mod)] == ["add", "add", "sum", "add1"]


def test_unknown_shapes_and_ops_without_rules_are_left_alone():
    x = Var("x", TensorStructInfo(dtype="float32", ndim=2))
    z = _tensor("z", (2, 3))
    mod = _module([x, z], ("nn.relu", [x], {}), ("nonzero", [z], {}), ("nn.relu", [z], {}))
    names = [c.op.name for c in _calls(LegalizeOps()(mod))]
    assert names == ["relax.nn.relu", "relax.nonzero", "relax.call_tir"]


def test_customize_legalize_map_overrides_a_rule():
    x = _tensor("x", (2, 3))
    mod = LegalizeOps({"relax.nn.relu": _relu_as_exp})(_module([x], ("nn.relu", [x], {})))
    assert "def relu_as_exp(" in mod.script() and "T.exp(" in mod.script()


def _relu_as_exp(call):
    from msc.backend.legalize.common import inputs, output
    from msc.tir import expr as TE

    b, (x,) = inputs(call)
    y = b.compute(output(call).values, lambda *i: TE.PrimCall("exp", [x[i]], "float32"),
                  "compute", axis="i")
    return b.prim_func([y], "relu_as_exp")


def test_tuple_inputs_and_outputs():
    x, y = _tensor("x", (2, 3)), _tensor("y", (2, 5))
    bb = BlockBuilder()
    with bb.function("main", [x, y]):
        with bb.dataflow():
            pair = bb.emit(Tuple([x, y]))
            cat = bb.emit(make_call("concat", pair, axis=1))
            parts = bb.emit(make_call("split", cat, 2, axis=1))
            out = bb.emit_output(parts)
        bb.emit_func_output(out)
    mod = LegalizeOps()(bb.get())
    calls = [c for c in _calls(mod) if c.op.name == "relax.call_tir"]
    assert len(calls) == 2
    assert isinstance(calls[1].sinfo_args[0], TupleStructInfo)
    assert from_script(mod.script()).script() == mod.script()


def test_zero_pipeline():
    pipeline = get_pipeline("zero")
    assert isinstance(pipeline, Sequential)
    assert pipeline(_zoo()).script() == LegalizeOps()(_zoo()).script()
    with pytest.raises(ValidationError, match="zero"):
        get_pipeline("o3")


def test_every_rule_is_its_ops_legalize_fact():
    """(Which ops have a rule: tests/relax/op/test_op_facts.py.)"""
    assert all("legalize" in OPS[name].facts for name in legalized_ops())


def test_tir_kernel_runs_a_call_for_the_vm():
    n = E.Var("n")
    k = tir_kernel("nn.softmax", Attrs({"axis": -1}), [TensorStructInfo((n, 5), "float32")],
                   TensorStructInfo((n, 5), "float32"), jit=kernel_jit())
    assert k.inputs == (0,)
    for rows in (1, 4, 9):
        x = np.random.default_rng(rows).standard_normal((rows, 5)).astype("float32")
        out = k(x, np.empty_like(x))
        np.testing.assert_allclose(out.sum(1), 1, rtol=1e-6)
    r = tir_kernel("reshape", None, [TensorStructInfo((2, 6), "float32"), ShapeStructInfo((3, 4))],
                   TensorStructInfo((3, 4), "float32"), jit=kernel_jit())
    x = np.arange(12, dtype="float32").reshape(2, 6)
    np.testing.assert_array_equal(r(x, np.empty((3, 4), "float32")), x.reshape(3, 4))
    assert tir_kernel("nonzero", Attrs({}), [TensorStructInfo((3,), "float32")],
                      TensorStructInfo(dtype="int64", ndim=2)) is None


def _run(mod, inputs: dict):
    """A tiny interpreter for main's dataflow: op calls through their numpy facts, call_tir
    through the compiled prim funcs."""
    from msc.backend.legalize.testing import reference
    from msc.backend.lowering.compile import compile_prim_func

    env = dict(inputs)
    main = mod["main"]
    for block in main.body.blocks:
        for binding in block.bindings:
            call = binding.value
            if isinstance(call, Var):
                env[binding.var.name_hint] = env[call.name_hint]
            elif call.op.name == "relax.call_tir":
                args = [env[a.name_hint] for a in call.args[1].fields]
                kernel = compile_prim_func(mod[call.args[0]], jit=kernel_jit())
                env[binding.var.name_hint] = kernel(*args)
            else:
                env[binding.var.name_hint] = reference(call, [env[a.name_hint] for a in call.args
                                                              if isinstance(a, Var)])
    return env[main.body.body.name_hint]


@pytest.mark.parametrize("batch", [1, 3])
def test_legalized_module_computes_what_the_ops_do(batch):
    rng = np.random.default_rng(batch)
    mod = _zoo()
    inputs = {p.name_hint: rng.standard_normal([int(d.value) if d.is_const else batch
                                                for d in p.struct_info.values])
              .astype("float32") for p in mod["main"].params}
    np.testing.assert_array_equal(_run(LegalizeOps()(mod), inputs), _run(mod, inputs))
