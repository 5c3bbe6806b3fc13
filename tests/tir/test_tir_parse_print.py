"""TVMScript prim funcs: TVM 0.27's printed text parses and prints back unchanged, print ->
parse -> print is a fixed point, the older spelling parses, and bad input is a ParseError with a
caret. Golden texts in tests/tir/data/ come from tests/tir/data/gen_golden.py."""

from __future__ import annotations

import ast
import pathlib
import re
import textwrap

import pytest

from msc.errors import ParseError
from msc.tir import expr as E
from msc.tir.function import SBlock, walk_stmts
from msc.tir.parser import parse_prim_func, parse_tir_text
from msc.tir.printer import format_float, module_var_decls, prim_func_to_script

DATA = pathlib.Path(__file__).parent / "data"
GOLDEN = sorted(DATA.glob("*.tvmscript"))


def _golden_funcs():
    """(file, func name, TVM's text of that func) for every prim func in the golden files."""
    cases = []
    for path in GOLDEN:
        text = path.read_text()
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef) and "T.prim_func" in ast.unparse(
                    node.decorator_list[0]):
                start = node.decorator_list[0].lineno - 1
                segment = textwrap.dedent("\n".join(lines[start:node.end_lineno]))
                cases.append(pytest.param(path, node.name, segment,
                                          id=f"{path.stem}.{node.name}"))
    return cases


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip().splitlines()]


def _reparse(text: str, name: str):
    return parse_tir_text(text)[name]


def test_golden_files_exist():
    assert len(GOLDEN) >= 30
    assert {"legalize_add", "legalize_matmul", "legalize_conv2d", "legalize_softmax",
            "legalize_dyn_add"} <= {p.stem for p in GOLDEN}


@pytest.mark.parametrize("path, name, expected", _golden_funcs())
def test_tvm_text_prints_back_unchanged(path, name, expected):
    func = parse_tir_text(path.read_text())[name]
    assert _lines(prim_func_to_script(func, name)) == _lines(expected)


@pytest.mark.parametrize("path, name, expected", _golden_funcs())
def test_print_parse_print_is_fixed_point(path, name, expected):
    func = parse_tir_text(path.read_text())[name]
    first = prim_func_to_script(func, name)
    again = _reparse(first, name)
    assert prim_func_to_script(again, name) == first
    assert again == _reparse(prim_func_to_script(again, name), name)


def test_indent_for_embedding_in_a_module():
    func = parse_tir_text((DATA / "legalize_add.tvmscript").read_text())["add"]
    text = prim_func_to_script(func, "add", indent=4)
    assert text.startswith("    @T.prim_func(private=True, s_tir=True)\n    def add(")
    assert all(line.startswith("    ") for line in text.splitlines())


def test_dynamic_func_declares_module_vars():
    func = parse_tir_text((DATA / "legalize_dyn_matmul.tvmscript").read_text())["matmul"]
    assert [v.name for v in func.signature_vars()] == ["n", "m"]
    assert module_var_decls(func) == ['n = TypeVar("n")', 'm = TypeVar("m")']


def test_int32_symbolic_var_is_quoted_then_declared():
    text = (DATA / "script_symbolic.tvmscript").read_text()
    func = parse_tir_text(text)["symbolic"]
    (m,) = func.sym_vars
    assert (m.name, m.dtype) == ("m", "int32")
    assert func.module_vars() == []
    assert 'A: T.Buffer(("m", 4), "float32")' in prim_func_to_script(func, "symbolic")


def test_parse_prim_func_takes_ctx_mapping_or_object():
    text = (DATA / "legalize_dyn_add.tvmscript").read_text()
    node = next(n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.FunctionDef))

    class Ctx:
        def __init__(self):
            self.tir_vars = {"n": E.Var("n", "int64")}

    for ctx in (None, {"n": E.Var("n", "int64")}, Ctx()):
        func = parse_prim_func(node, text, ctx)
        assert func.buffers[0].shape[0] == E.Var("n")


OLD_STYLE = '''
@T.prim_func
def main(a: T.handle, b: T.handle, c: T.handle):
    T.func_attr({"global_symbol": "main", "tir.noalias": T.bool(True)})
    n = T.int64()
    A = T.match_buffer(a, (n, T.int64(8)), "float32")
    B = T.match_buffer(b, [T.int64(8), T.int64(4)], dtype="float32")
    C = T.match_buffer(c, (n, T.int64(4)))
    D = T.alloc_buffer((n, T.int64(4)))
    for i, j, k in T.grid(n, T.int64(4), T.int64(8)):
        with T.block("matmul"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            T.reads([A[vi, vk], B[vk, vj]])
            T.writes([D[vi, vj]])
            with T.init():
                D[vi, vj] = T.float32(0)
            D[vi, vj] = D[vi, vj] + A[vi, vk] * B[vk, vj]
    for i in T.serial(n):
        for j in T.vectorized(4):
            with T.block("relu"):
                vi = T.axis.spatial(n, i)
                vj = T.axis.S(4, j)
                C[vi, vj] = T.max(D[vi, vj], 0.0)

@T.prim_func
def elementwise(A: T.Buffer[(2, 3), "float32"], B: T.Buffer((2, 3), "float32")):
    for i in T.parallel(2):
        for j in T.unroll(3):
            B[i, j] = T.if_then_else(A[i, j] > 0, T.exp(A[i, j]), T.Select(
                A[i, j] < -1, T.tanh(A[i, j]), T.sqrt(T.Cast("float32", j) + 1)))
'''

OLD_STYLE_PRINTED = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((n, T.int64(8)), "float32"), B: T.Buffer((T.int64(8), T.int64(4)), \
"float32"), C: T.Buffer((n, T.int64(4)), "float32")):
    T.func_attr({"tir.noalias": True})
    # with T.sblock("root"):
    D = T.sblock_alloc_buffer((n, T.int64(4)))
    for i, j, k in T.grid(n, T.int64(4), T.int64(8)):
        with T.sblock("matmul"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            T.reads(A[vi, vk], B[vk, vj])
            T.writes(D[vi, vj])
            with T.init():
                D[vi, vj] = T.float32(0.0)
            D[vi, vj] = D[vi, vj] + A[vi, vk] * B[vk, vj]
    for i in range(n):
        for j in T.vectorized(4):
            with T.sblock("relu"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = T.max(D[vi, vj], T.float32(0.0))
'''


def test_old_style_parses_and_prints_in_tvm_027_style():
    func = parse_tir_text(OLD_STYLE)["main"]
    assert func.s_tir and isinstance(func.body, SBlock) and func.body.is_implicit_root
    assert [b.name for b in func.params] == ["A", "B", "C"]
    blocks = [s.name for s in walk_stmts(func.body) if isinstance(s, SBlock)]
    assert blocks == ["root", "matmul", "relu"]
    assert prim_func_to_script(func, "main") == OLD_STYLE_PRINTED.strip()


def test_old_style_literals_take_the_dtype_beside_them():
    text = prim_func_to_script(parse_tir_text(OLD_STYLE)["elementwise"], "elementwise")
    assert "A[i, j] > T.float32(0.0)" in text
    assert "A[i, j] < T.float32(-1.0)" in text
    assert 'T.Cast("float32", j) + T.float32(1.0)' in text


@pytest.mark.parametrize("name", ["main", "elementwise"])
def test_old_style_fixed_point(name):
    first = prim_func_to_script(parse_tir_text(OLD_STYLE)[name], name)
    assert prim_func_to_script(_reparse(first, name), name) == first


@pytest.mark.parametrize("value, text", [
    (0.0, "0.0"), (-0.0, "-0.0"), (3.0, "3.0"), (0.5, "0.5"), (0.1, "0.10000000000000001"),
    (1e-5, "1.0000000000000001e-05"), (1e-7, "9.9999999999999995e-08"),
    (1 / 3, "0.33333333333333331"), (1e30, "1000000000000000019884624838656.0"),
    (-3.4028234663852886e38, "-340282346638528859811704183484516925440.0"),
    (float("inf"), '"inf"'), (float("nan"), '"nan"'),
])
def test_float_literals_match_tvm(value, text):
    assert format_float(value) == text


@pytest.mark.parametrize("line", [
    "c[0] = c[1] - (c[2] - c[3]) * (c[1] + c[2])",
    "c[0] = (c[1] << 1) + (c[1] & 3) + ~c[2]",
    "c[0] = T.Select(not c[1] > 1 and c[2] != 2 or c[3] == 0, c[0] * -1, T.min(c[1], 2))",
    "c[0] = T.Select(not (c[1] > 1 and c[2] != 2), c[0] // 2 % 3, c[1] // (2 % 3))",
    "c[0] = T.Div(c[1], 2) + T.truncmod(c[1], 3) + T.if_then_else(c[1] < 0, 1, c[2])",
])
def test_expression_precedence_round_trips(line):
    source = f'''
@T.prim_func
def f(c: T.Buffer((4,), "int32")):
    {line}
'''
    text = prim_func_to_script(parse_tir_text(source)["f"], "f")
    assert text.splitlines()[-1].strip() == line


def test_min_max_value_and_special_floats():
    source = '''
@T.prim_func
def f(b: T.Buffer((3,), "float32"), c: T.Buffer((1,), "int32")):
    c[0] = T.max_value("int32")
    b[0] = T.min_value("float32")
    b[1] = T.float32("inf")
    b[2] = T.float32(-2)
'''
    lines = _lines(prim_func_to_script(parse_tir_text(source)["f"], "f"))[2:]
    assert lines == ["    c[0] = 2147483647",
                     "    b[0] = T.float32(-340282346638528859811704183484516925440.0)",
                     '    b[1] = T.float32("inf")', "    b[2] = T.float32(-2.0)"]


# ------------------------------------------------------------------------------ errors

def _func(body: str, params: str = 'A: T.Buffer((4,), "float32")') -> str:
    return f"@T.prim_func\ndef f({params}):\n" + textwrap.indent(textwrap.dedent(body), "    ")


@pytest.mark.parametrize("source, message, line, col", [
    (_func("A[0] = T.frobnicate(A[0])"), "unknown TIR intrinsic T.frobnicate", 3, 12),
    (_func("T.bogus(1)"), "unknown TIR intrinsic T.bogus", 3, 5),
    (_func("A[0] = B[0]"), "undefined name 'B'", 3, 12),
    (_func("try:\n    pass\nexcept Exception:\n    pass"), "unsupported statement `Try`", 3, 5),
    (_func("T.reads(A[0])"), "only allowed directly inside a T.sblock", 3, 5),
    (_func("A[0] = A[0, 1]"), "has 1 dims, indexed with 2", 3, 12),
    (_func("A[0] = A[0] ** 2"), "operator Pow is not supported", 3, 12),
    (_func("A[0] = foo(1)"), "unknown function foo", 3, 12),
    (_func("A[0] = A"), "buffer 'A' used as a value", 3, 12),
    (_func("for i in T.grid(4, 4):\n    pass"), "expected 2 loop variable", 3, 9),
    (_func("for i in iter(4):\n    pass"), "expected range(...)", 3, 14),
    (_func("A[0] = T.exp(A[0], A[1])"), "T.exp takes 1 argument(s), got 2", 3, 12),
    (_func("A[0] = 1", 'A: T.Buffer((4,), "float33")'), "unknown dtype 'float33'", 2, 25),
    (_func("A[0] = 1", "A"), "param 'A' needs a type", 2, 7),
    (_func("with T.sblock('b'):\n    v = T.axis.weird(4, 0)"), "unknown block axis", 4, 13),
    (_func("for i in range(4):\n    with T.sblock('b'):\n        vi = T.axis.remap('X', [i])"),
     "remap needs kinds S/R", 5, 37),
    (_func("if True:\n    T.func_attr({})"), "T.func_attr must be at the top", 4, 9),
    (_func("A[0:2] = 1"), "slices are only allowed in T.reads/T.writes", 3, 5),
])
def test_errors_name_the_place(source, message, line, col):
    with pytest.raises(ParseError, match=re.escape(message)) as info:
        parse_tir_text(source)
    err = info.value
    assert (err.context["line"], err.col) == (line, col)
    caret_line = str(err).splitlines()[-1]
    assert caret_line.index("^") == col + 1  # two leading spaces before the source line


def test_syntax_error_is_a_parse_error():
    with pytest.raises(ParseError, match="invalid Python syntax"):
        parse_tir_text("@T.prim_func\ndef f(:\n    pass\n")
