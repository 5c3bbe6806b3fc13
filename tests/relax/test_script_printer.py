"""TVMScript printer: golden text for representative modules, literals and struct info.

Golden files live in tests/relax/data/script/; regenerate with MSC_UPDATE_GOLDEN=1 after a reviewed
change of the printed form.
"""

import os
from pathlib import Path

import numpy as np
import pytest

from msc import relax, tir
from msc.relax import op
from msc.relax.printer import expr_to_str, format_float, sinfo_to_str

GOLDEN = Path(__file__).parent / "data" / "script"
F32 = "float32"


def tensor(shape, dtype=F32):
    return relax.TensorStructInfo(shape, dtype)


def seed_mlp():
    """The seed example: matmul + relu in a dataflow block."""
    x = relax.Var("x", tensor((1, 784)))
    w = relax.Var("w", tensor((784, 128)))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            lv = bb.emit(op.matmul(x, w))
            gv = bb.emit_output(op.nn.relu(lv))
        bb.emit_func_output(gv)
    return bb.get()


def conv_net():
    """Conv + batch norm + linear with constants (printed through the metadata section)."""
    rng = np.random.default_rng(0)
    weights = {name: rng.standard_normal(shape).astype(F32) for name, shape in [
        ("w", (6, 3, 3, 3)), ("b", (1, 6, 1, 1)), ("gamma", (6,)), ("beta", (6,)),
        ("mean", (6,)), ("var", (6,)), ("fc", (4, 6))]}
    c = {k: relax.const(v) for k, v in weights.items()}
    x = relax.Var("inp_0", tensor((1, 3, 10, 10)))
    bb = relax.BlockBuilder()
    with bb.function("main", [x], attrs={"num_input": 1}):
        with bb.dataflow():
            lv = bb.emit(op.nn.conv2d(x, c["w"], out_dtype=F32))
            lv1 = bb.emit(op.add(lv, c["b"]))
            bn = bb.emit(op.nn.batch_norm(lv1, c["gamma"], c["beta"], c["mean"], c["var"], 1,
                                          training=False))
            lv2 = bb.emit(op.nn.relu(bb.emit(bn[0])))
            lv3 = bb.emit(op.mean(lv2, axis=[-1, -2], keepdims=False))
            lv4 = bb.emit(op.matmul(lv3, op.permute_dims(c["fc"], [1, 0])))
            lv5 = bb.emit(op.clip(lv3, 0, 6))
            lv6 = bb.emit(op.multiply(lv5, relax.const(0.5, F32)))
            gv = bb.emit_output(relax.Tuple([lv4, lv6]))
        bb.emit_func_output(gv)
    return bb.get()


def dynamic_batch():
    """A symbolic batch dim: module-level TypeVar, shapes with ``n``."""
    n = tir.Var("n", "int64")
    x = relax.Var("x", tensor((n, 3, 4)))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            lv = bb.emit(op.reshape(x, [n, 12]))
            lv1 = bb.emit(op.nn.softmax(lv, axis=-1))
            gv = bb.emit_output(op.reshape(lv1, relax.ShapeExpr([n * 2, 6])))
        bb.emit_func_output(gv)
    return bb.get()


def tuple_return():
    """Split into a tuple, index it, return a nested tuple; two params share a name."""
    x = relax.Var("x", tensor((4, 6)))
    y = relax.Var("x", tensor((4, 3)))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, y]):
        with bb.dataflow():
            parts = bb.emit(op.split(x, 2, axis=1))
            a = bb.emit(parts[0])
            b = bb.emit(op.add(parts[1], y))
            gv = bb.emit_output(relax.Tuple([a, relax.Tuple([b, y])]))
        bb.emit_func_output(gv)
    return bb.get()


MODELS = {"seed_mlp": seed_mlp, "conv_net": conv_net, "dynamic_batch": dynamic_batch,
          "tuple_return": tuple_return}


def golden(name: str, text: str) -> str:
    path = GOLDEN / f"{name}.tvmscript"
    if os.environ.get("MSC_UPDATE_GOLDEN"):
        path.write_text(text + "\n")
    return path.read_text().rstrip("\n")


@pytest.mark.parametrize("name", sorted(MODELS))
def test_golden_text(name):
    text = MODELS[name]().script(show_meta=True)
    assert text == golden(name, text)


SEED_TEXT = """# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 784), dtype="float32"), w: R.Tensor((784, 128), dtype="float32")) -> R.Tensor((1, 128), dtype="float32"):
        with R.dataflow():
            lv: R.Tensor((1, 128), dtype="float32") = R.matmul(x, w, out_dtype=None)
            gv: R.Tensor((1, 128), dtype="float32") = R.nn.relu(lv)
            R.output(gv)
        return gv"""


def test_seed_mlp_reads_like_tvm():
    assert seed_mlp().script() == SEED_TEXT


def test_constants_go_to_metadata_and_note_is_printed():
    text = conv_net().script()
    assert 'R.nn.conv2d(inp_0, metadata["ir.GenericConst"][0], strides=[1, 1]' in text
    assert 'R.const(0.5, "float32")' in text
    assert text.endswith("# Metadata omitted. Use show_meta=True in script() method to show it.")
    assert 'R.func_attr({"num_input": 1})' in text


def test_dynamic_batch_declares_type_var():
    text = dynamic_batch().script()
    assert text.startswith("# from typing import TypeVar\n")
    assert '\nn = TypeVar("n")\n@I.ir_module\n' in text
    assert "R.shape([n * 2, 6])" in text


def test_duplicate_names_are_suffixed():
    text = tuple_return().script()
    assert "def main(x: R.Tensor((4, 6), dtype=\"float32\"), x_1: R.Tensor((4, 3)" in text
    assert "= lv1, (lv2, x_1)" in text


@pytest.mark.parametrize("value, text", [
    (1.0, "1.0"), (0.1, "0.10000000000000001"), (1e-5, "1.0000000000000001e-05"),
    (1e20, "100000000000000000000.0"), (0.5, "0.5"), (-6.0, "-6.0"),
])
def test_format_float_matches_tvm(value, text):
    assert format_float(value) == text


@pytest.mark.parametrize("sinfo, text", [
    (relax.TensorStructInfo((2, 3), F32), 'R.Tensor((2, 3), dtype="float32")'),
    (relax.TensorStructInfo((5,), "int64"), 'R.Tensor((5,), dtype="int64")'),
    (relax.TensorStructInfo(None, F32, 2), 'R.Tensor(dtype="float32", ndim=2)'),
    (relax.TensorStructInfo(None, "void"), "R.Tensor"),
    (relax.TupleStructInfo([]), "R.Tuple"),
    (relax.ShapeStructInfo([2, 3]), "R.Shape([2, 3])"),
    (relax.ShapeStructInfo(ndim=-1), "R.Shape(ndim=-1)"),
    (relax.PrimStructInfo("int64"), "T.int64"),
    (relax.ObjectStructInfo(), "R.Any"),
    (relax.FuncStructInfo([relax.TensorStructInfo((2,), F32)], relax.ObjectStructInfo()),
     'R.Callable((R.Tensor((2,), dtype="float32"),), R.Any, True)'),
])
def test_struct_info_text(sinfo, text):
    assert sinfo_to_str(sinfo) == text


def test_compound_dims_are_strings_in_signatures():
    n = tir.Var("n", "int64")
    sinfo = relax.TensorStructInfo((n * 3, n), F32)
    assert sinfo_to_str(sinfo) == 'R.Tensor((n * 3, n), dtype="float32")'
    assert sinfo_to_str(sinfo, signature=True) == 'R.Tensor(("n * 3", n), dtype="float32")'


def test_expressions():
    x = relax.Var("x", tensor((2, 3)))
    assert expr_to_str(op.nn.softmax(x, axis=1)) == "R.nn.softmax(x, axis=1)"
    assert expr_to_str(relax.const(True, "bool")) == 'R.const(True, "bool")'
    assert expr_to_str(relax.const(float("-inf"), F32)) == 'R.const(float("-inf"), "float32")'
    assert expr_to_str(relax.ShapeExpr([1, 2])) == "R.shape([1, 2])"
    assert expr_to_str(relax.StringImm("a\"b")) == 'R.str("a\\"b")'
    assert expr_to_str(relax.PrimValue(tir.FloatImm(0.5, "float64"))) == "T.float64(0.5)"
    assert expr_to_str(relax.Tuple([x])) == "(x,)"


def test_function_order_is_tvms():
    mod = relax.from_script((GOLDEN / "features.tvmscript").read_text())
    names = [line.split("def ")[1].split("(")[0] for line in mod.script().splitlines()
             if line.startswith("    def ")]
    assert names[-1] == "main" and names[:-1] == sorted(names[:-1])
