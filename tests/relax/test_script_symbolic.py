"""Symbolic shape annotations: accepted when provably equal to the inferred shape, trusted when
neither equality nor difference can be proven (as TVM 0.27's parser does), rejected with the
dim that is provably different."""

import pytest

from msc import relax, tir
from msc.errors import ParseError
from msc.relax.arith import prove_equal, simplify

TEXT = '''# from tvm.script import ir as I
# from tvm.script import relax as R
# from tvm.script import tirx as T

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("bz", 4), dtype="float32"), y: R.Tensor((1, 4), dtype="float32"), z: R.Tensor(("m", 4), dtype="float32")) -> R.Tensor(RET, dtype="float32"):
        bz = T.int64()
        m = T.int64()
        gv: R.Tensor(ANN, dtype="float32") = EXPR
        return gv
'''


def _module(ann: str, expr: str, ret: str):
    return relax.from_script(TEXT.replace("RET", ret).replace("ANN", ann).replace("EXPR", expr))


@pytest.mark.parametrize("ann, expr, ret", [
    ("(T.min(1, bz), 4)", "R.add(y, y)", "(1, 4)"),       # cannot be disproven: trusted
    ("(T.max(bz, 0), 4)", "R.add(x, x)", "(bz, 4)"),      # provably equal (bz >= 0)
    ("(bz, 4)", "R.add(x, x)", "(T.max(bz, 0), 4)"),
    ("(bz * 2 - bz, 4)", "R.add(x, x)", "(bz, 4)"),
    ("(m, 4)", "R.add(x, x)", "(m, 4)"),                  # unrelated vars: trusted
])
def test_annotations_tvm_accepts_parse_and_keep_the_annotation(ann, expr, ret):
    mod = _module(ann, expr, ret)
    gv = mod["main"].body.blocks[0].bindings[0].var
    assert relax.from_script(mod.script()).script() == mod.script()
    assert tir.to_str(gv.struct_info.values[0]) in ann


@pytest.mark.parametrize("ann, expr, why", [
    ("(2, 4)", "R.add(y, y)", "dim 0: 2 == 1 is provably false"),
    ("(bz + 1, 4)", "R.add(x, x)", "dim 0: bz + 1 == bz is provably false"),
])
def test_provably_different_dims_are_named(ann, expr, why):
    with pytest.raises(ParseError, match="does not match the inferred") as err:
        _module(ann, expr, ann)
    assert why in str(err.value) and "line 11" in str(err.value)


def test_prover():
    n = tir.Var("n", "int64")
    assert prove_equal(n, tir.max(n, 0)) is True
    assert prove_equal(tir.min(n, n + 2), n) is True
    assert prove_equal(tir.floormod(n, 4) + 4, 2) is False
    assert prove_equal(tir.min(1, n), 1) is None
    assert prove_equal(n * 2, n) is None          # n may be 0
    assert tir.to_str(simplify(tir.max(n + 1, n))) == "n + 1"
