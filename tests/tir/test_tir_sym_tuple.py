"""``m, n = T.int64(), T.int64()``: tuple declarations of symbolic vars parse and print back."""

import numpy as np
import pytest

from msc import relax
from msc.errors import ParseError
from msc.tir.parser import parse_tir_text

MM = '''
@T.prim_func
def mm(a: T.handle, b: T.handle, c: T.handle):
    m, n, k = T.int64(), T.int64(), T.int64()
    A = T.match_buffer(a, (m, k), "float32")
    B = T.match_buffer(b, (k, n), "float32")
    C = T.match_buffer(c, (m, n), "float32")
    for i, j, kk in T.grid(m, n, k):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, kk])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
'''

I32 = '''
@T.prim_func
def fill(a: T.handle):
    p, q = T.int32(), T.int32()
    A = T.match_buffer(a, (p, q), "float32")
    for i, j in T.grid(p, q):
        A[i, j] = T.float32(1)
'''


def test_tuple_decl_declares_each_var():
    func = parse_tir_text(MM)["mm"]
    assert [(v.name, v.dtype) for v in func.sym_vars] == [("m", "int64"), ("n", "int64"),
                                                           ("k", "int64")]
    assert [str(d) for d in func.params[0].shape] == ["m", "k"]


def test_int32_tuple_decl_prints_back_and_is_a_fixed_point():
    func = parse_tir_text(I32)["fill"]
    text = func.script()
    assert "p = T.int32()" in text and "q = T.int32()" in text
    again = parse_tir_text(text)["fill"]
    assert again.script() == text


def test_module_with_tuple_decl_round_trips_and_runs():
    text = "@I.ir_module\nclass Module:\n" + "\n".join("    " + line for line in
                                                     MM.splitlines()) + '''
    @R.function
    def main(x: R.Tensor(("m", "k"), "float32"), w: R.Tensor(("k", "n"), "float32")):
        m, n, k = T.int64(), T.int64(), T.int64()
        lv = R.call_tir(Module.mm, (x, w), R.Tensor((m, n), dtype="float32"))
        return lv
'''
    mod = relax.from_script(text)
    printed = mod.script()
    assert relax.from_script(printed).script() == printed
    vm = relax.VirtualMachine(relax.build(mod), relax.cpu())
    rng = np.random.default_rng(0)
    x, w = rng.random((3, 5), "float32"), rng.random((5, 4), "float32")
    np.testing.assert_allclose(vm["main"](x, w).numpy(), x @ w, rtol=1e-5)


def test_mismatched_tuple_decl_is_a_parse_error():
    bad = MM.replace("m, n, k = T.int64(), T.int64(), T.int64()",
                     "m, n, k = T.int64(), T.int64()")
    with pytest.raises(ParseError, match="line"):
        parse_tir_text(bad)
