"""Spellings TVM's own schedule tests use: ``B[i] += x``, ``T.cast(x, dtype)``,
``T.if_then_else(..., dtype=)``, TVM builtins carried opaquely (``T.tvm_fill_fragment(B.data,
...)``), prim funcs defined inside a function, ``tvm.script.from_source`` and the
structural-equality helpers of ``msc.testing``."""

from __future__ import annotations

import textwrap

import pytest

from msc import testing
from msc.errors import ParseError
from msc.script import from_source
from msc.script import tir as T
from msc.tir import expr as E
from msc.tir.function import BufferStore, Evaluate, walk_stmts
from msc.tir.parser import parse_tir_text

TEXT = '''
@T.prim_func(s_tir=True)
def f(a: T.handle, b: T.handle) -> None:
    A = T.match_buffer(a, (16, 16))
    B = T.match_buffer(b, (16,))
    for i, k in T.grid(16, 16):
        with T.sblock("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = 0.0
            B[vi] += T.if_then_else(vi < 3, A[vi, vk], T.cast(vk, "float32"), dtype="float32")
            T.evaluate(T.tvm_fill_fragment(B.data, 16, 16, 16, 0, vi * 16, dtype="handle"))
            T.evaluate(T.q_multiply_shift(vi, 3, 1, 2, dtype="int32"))
'''


def _parse(text: str):
    return next(iter(parse_tir_text(textwrap.dedent(text)).values()))


def test_aug_assign_is_a_store_of_the_sum():
    func = _parse(TEXT)
    store = next(s for s in walk_stmts(func.body)
                 if isinstance(s, BufferStore) and isinstance(s.value, E.BinaryOp))
    assert store.value.op == "Add"
    assert store.value.a.buffer.name == "B"
    assert "B[vi] = B[vi] + T.if_then_else(vi < 3, A[vi, vk], T.Cast(\"float32\", vk))" in \
        func.script()


def test_builtins_are_carried_and_print_back():
    func = _parse(TEXT)
    calls = [s.value for s in walk_stmts(func.body) if isinstance(s, Evaluate)]
    assert [c.name for c in calls] == ["tvm_fill_fragment", "q_multiply_shift"]
    assert calls[0].args[0].name == "B.data" and calls[0].dtype == "handle"
    assert calls[1].dtype == "int32"
    text = func.script()
    assert "T.tvm_fill_fragment(B.data, 16, 16, 16, 0, vi * 16)" in text
    assert _parse(text).script() == text


def test_builtin_with_other_dtype_keeps_it():
    func = _parse(TEXT.replace('q_multiply_shift(vi, 3, 1, 2, dtype="int32")',
                               'q_multiply_shift(vi, 3, 1, 2, dtype="int64")'))
    assert 'T.q_multiply_shift(vi, 3, 1, 2, dtype="int64")' in func.script()


@pytest.mark.parametrize("bad, message", [
    ("T.Cast(\"float32\", vk, dtype=\"float32\")", "no keyword argument .dtype."),
    ("T.if_then_else(vi < 3, 1.0, 2.0, kind=1)", "no keyword argument 'kind'"),
    ("A.shape", "B.data and B.elem_offset"),
])
def test_bad_spellings_are_parse_errors(bad, message):
    with pytest.raises(ParseError, match=message):
        _parse(TEXT.replace("T.cast(vk, \"float32\")", bad))


def test_prim_func_inside_a_function_is_parsed():
    def make():
        @T.prim_func(s_tir=True)
        def local(A: T.Buffer((4,), "float32")):
            for i in range(4):
                with T.sblock("a"):
                    vi = T.axis.S(4, i)
                    A[vi] = 1.0

        return local

    assert "A[vi] = T.float32(1.0)" in make().script()


def test_from_source_round_trips_a_prim_func():
    func = _parse(TEXT)
    again = from_source(func.script())
    testing.assert_structural_equal(func, again)


def test_structural_equal_ignores_var_names_not_structure():
    func = _parse(TEXT)
    renamed = _parse(TEXT.replace("vi", "x").replace("vk", "y"))
    testing.assert_structural_equal(func, renamed)
    other = _parse(TEXT.replace("vi * 16", "vi * 8"))
    with pytest.raises(ValueError, match="StructuralEqual"):
        testing.assert_structural_equal(func, other)
    # as TVM: a block's name_hint is not part of its structure
    testing.assert_structural_equal(func, _parse(TEXT.replace('T.sblock("B")',
                                                              'T.sblock("C")')))


def test_ignore_global_symbol():
    func = _parse(TEXT)
    named = func.with_attr("global_symbol", "other")
    with pytest.raises(ValueError):
        testing.assert_structural_equal(func, named)
    testing.assert_structural_equal_ignore_global_symbol(func, named)


def test_math_dtype_keyword_is_checked():
    func = _parse(TEXT.replace("T.cast(vk, \"float32\")",
                               "T.floor(A[vi, vk], dtype=\"float32\")"))
    assert "T.floor(A[vi, vk])" in func.script()
    with pytest.raises(ParseError, match="gives float32, not dtype='int32'"):
        _parse(TEXT.replace("T.cast(vk, \"float32\")", "T.floor(A[vi, vk], dtype=\"int32\")"))


MATCH = '''
@T.prim_func(s_tir=True)
def m(a: T.handle, b: T.handle) -> None:
    A = T.match_buffer(a, (8, 8))
    B = T.match_buffer(b, (8, 8))
    for i, j in T.grid(8, 8):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B_sub = T.match_buffer(B[vi, vj], [], offset_factor=1)
            A_sub = T.match_buffer(A[vi, vj:vj + 1], (1,), "float32")
            B_sub[()] = A_sub[0] * 2.0
'''


def test_block_match_buffer_parses_prints_and_survives_a_split():
    from msc import s_tir
    from msc.tir.function import SBlock

    func = _parse(MATCH)
    block = next(s for s in walk_stmts(func.body) if isinstance(s, SBlock) and s.name == "B")
    (b_sub, b_region), (a_sub, a_region) = block.match_buffers
    assert (b_sub.name, b_sub.shape, b_region.buffer.name) == ("B_sub", (), "B")
    assert a_sub.shape == (E.IntImm(1),) and a_region.buffer.name == "A"
    text = func.script()
    # TVM's parser simplifies the extent of vj:vj + 1 to 1, a point; an offset factor gives
    # the buffer a var offset, <name>_elem_offset
    assert "A_sub = T.match_buffer(A[vi, vj], (1,))" in text
    assert "B_sub = T.match_buffer(B[vi, vj], (), elem_offset=B_sub_elem_offset)" in text
    assert _parse(text).script() == text
    sch = s_tir.Schedule(func)
    sch.split(sch.get_loops("B")[1], [None, 4])
    assert "B_sub = T.match_buffer(B[vi, vj], (), elem_offset=B_sub_elem_offset)" in \
        sch.mod["main"].script()


def test_block_match_buffer_is_refused_by_the_interpreter():
    import numpy as np

    from msc.errors import ValidationError
    from msc.tir.interp import run_prim_func

    a, b = np.ones((8, 8), "float32"), np.zeros((8, 8), "float32")
    with pytest.raises(ValidationError, match="matches a buffer region"):
        run_prim_func(_parse(MATCH), a, b)


def test_buffer_elem_offset_is_an_expression():
    func = _parse(TEXT.replace("vi * 16, dtype=\"handle\"", "B.elem_offset, dtype=\"handle\""))
    assert "T.tvm_fill_fragment(B.data, 16, 16, 16, 0, B.elem_offset)" in func.script()


def test_buffer_strides_are_expressions():
    func = _parse(TEXT.replace("vi * 16, dtype=\"handle\"", "B.strides[0], dtype=\"handle\""))
    text = func.script()
    assert "T.tvm_fill_fragment(B.data, 16, 16, 16, 0, B.strides[0])" in text
    assert _parse(text).script() == text
    with pytest.raises(ParseError, match="constant dim below 1"):
        _parse(TEXT.replace("vi * 16, dtype=\"handle\"", "B.strides[3], dtype=\"handle\""))


def test_region_slices_default_to_the_whole_dim():
    func = _parse(TEXT.replace('vi, vk = T.axis.remap("SR", [i, k])',
                               'vi, vk = T.axis.remap("SR", [i, k])\n'
                               '            T.reads(A[:4, 2:])\n            T.writes(B[:])'))
    assert "T.reads(A[0:4, 2:16])" in func.script()
    assert "T.writes(B[0:16])" in func.script()


def test_call_extern_with_dtype_keyword_and_void():
    func = _parse(TEXT.replace('T.q_multiply_shift(vi, 3, 1, 2, dtype="int32")',
                               'T.call_extern("call_impl", B.data, dtype="")'))
    text = func.script()
    assert 'T.call_extern("void", "call_impl", B.data)' in text
    assert _parse(text).script() == text


_LOWER = -2.0


def _clip(x, lo, hi):
    from msc.script import tir as T

    return T.min(T.max(x, lo), hi)


def test_prim_func_reads_python_names_of_its_scope():
    """Numbers, dtype strings and functions of the enclosing scope, as TVM's parser reads
    them: a closure float, a dtype held in a variable, a Python function called on values."""
    from msc.script import tir as T

    upper, dtype = 3.0, "float32"

    @T.prim_func(s_tir=True)
    def clipped(A: T.Buffer((4,), dtype), B: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.sblock("B"):
                vi = T.axis.remap("S", [i])
                B[vi] = _clip(A[vi], T.float32(_LOWER), T.float32(upper))

    text = clipped.script()
    assert "B[vi] = T.min(T.max(A[vi], T.float32(-2.0)), T.float32(3.0))" in text
