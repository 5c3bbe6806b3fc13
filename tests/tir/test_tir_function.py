"""PrimFunc and the TIR statement IR built by hand: construction checks, printing, running."""

from __future__ import annotations

import numpy as np
import pytest

from msc.errors import ValidationError
from msc.tir import expr as E
from msc.tir import intrin
from msc.tir.function import (
    Buffer,
    BufferLoad,
    BufferStore,
    For,
    IterVar,
    PrimFunc,
    SBlock,
    StringImm,
    seq,
    walk_stmts,
)
from msc.tir.interp import run_prim_func
from msc.tir.parser import parse_tir_text
from msc.tir.printer import expr_to_script, prim_func_to_script

I64 = "int64"


def _copy_transpose() -> PrimFunc:
    n = E.Var("n", I64)
    x = Buffer("x", (n, E.IntImm(3, I64)))
    y = Buffer("y", (E.IntImm(3, I64), n))
    i, j = E.Var("i", I64), E.Var("j", I64)
    vi, vj = E.Var("vi", I64), E.Var("vj", I64)
    block = SBlock("copy", BufferStore(y, x[vi, vj], (vj, vi)),
                   (IterVar(vi, E.IntImm(0, I64), n, "spatial", i),
                    IterVar(vj, E.IntImm(0, I64), E.IntImm(3, I64), "spatial", j)))
    inner = For(j, E.IntImm(0, I64), E.IntImm(3, I64), "serial", block)
    body = SBlock("root", For(i, E.IntImm(0, I64), n, "serial", inner))
    return PrimFunc((x, y), body, name="copy_t", private=True, s_tir=True)


EXPECTED = '''
@T.prim_func(private=True, s_tir=True)
def copy_t(x: T.Buffer((n, T.int64(3)), "float32"), y: T.Buffer((T.int64(3), n), "float32")):
    # with T.sblock("root"):
    for i, j in T.grid(n, T.int64(3)):
        with T.sblock("copy"):
            vi, vj = T.axis.remap("SS", [i, j])
            y[vj, vi] = x[vi, vj]
'''


def test_hand_built_func_prints_parses_and_runs():
    func = _copy_transpose()
    assert func.script() == EXPECTED.strip()
    assert prim_func_to_script(parse_tir_text(EXPECTED)["copy_t"], "copy_t") == EXPECTED.strip()
    x = np.arange(6, dtype="float32").reshape(2, 3)
    np.testing.assert_array_equal(run_prim_func(func, x), x.T)


def test_signature_and_module_vars():
    func = _copy_transpose()
    assert [v.name for v in func.signature_vars()] == ["n"]
    assert [v.name for v in func.module_vars()] == ["n"]
    assert [b.name for b in func.buffers] == ["x", "y"]


def test_walk_visits_nested_statements():
    kinds = [type(s).__name__ for s in walk_stmts(_copy_transpose().body)]
    assert kinds == ["SBlock", "For", "For", "SBlock", "BufferStore"]


def test_buffer_load_checks_rank():
    x = Buffer("x", (E.IntImm(2), E.IntImm(3)))
    with pytest.raises(ValidationError, match="buffer 'x' has 2 dims, indexed with 1"):
        BufferLoad(x, (E.IntImm(0),))


def test_loop_kind_is_checked():
    i = E.Var("i")
    with pytest.raises(ValidationError, match="unknown loop kind 'sideways'"):
        For(i, E.IntImm(0), E.IntImm(4), "sideways", None)


def test_seq_of_one_is_the_statement():
    x = Buffer("x", (E.IntImm(1),))
    store = BufferStore(x, E.FloatImm(1.0), (E.IntImm(0),))
    assert seq([store]) is store
    assert len(seq([store, store]).stmts) == 2


@pytest.mark.parametrize("expr, text", [
    (E.IntImm(3, "int32"), "3"),
    (E.IntImm(-3, "int32"), "-3"),
    (E.IntImm(3, "int64"), "T.int64(3)"),
    (E.IntImm(1, "bool"), "T.bool(True)"),
    (E.FloatImm(0.5, "float16"), "T.float16(0.5)"),
    (E.Cast("float32", E.Var("i", "int32")), 'T.Cast("float32", i)'),
    (E.PrimCall("call_extern", [StringImm("f"), E.IntImm(1, "int32")], "int32"),
     'T.call_extern("int32", "f", 1)'),
    (E.BinaryOp("Div", E.FloatImm(1.0), E.FloatImm(2.0)), "T.float32(1.0) / T.float32(2.0)"),
    (E.BinaryOp("Div", E.Var("a", "int32"), E.IntImm(2, "int32")), "T.Div(a, 2)"),
])
def test_expr_to_script(expr, text):
    assert expr_to_script(expr) == text


def test_tir_names_table_covers_expression_names():
    assert intrin.EXPR_NAMES <= intrin.TIR_NAMES
    assert {"sblock", "block", "grid", "Buffer", "exp", "Select", "float32"} <= intrin.TIR_NAMES


def test_parsed_funcs_compare_and_hash_structurally():
    a, b = (parse_tir_text(EXPECTED)["copy_t"] for _ in range(2))
    run_prim_func(a, np.zeros((2, 3), "float32"))  # caches compiled closures on `a`
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
