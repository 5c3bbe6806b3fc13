"""Hostile TVMScript (issue #20): a decorator or module-level name msc does not know is refused
with a ParseError naming the line and the name; the text is read with ``ast``, never run."""

from __future__ import annotations

import pathlib
import re

import pytest

from msc import relax
from msc.errors import ParseError
from msc.tir.parser import parse_tir_text

ROOT = pathlib.Path(__file__).parents[2]

MAIN = '''{outer}
def main(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
    return x
'''

MODULE = '''@I.ir_module
class Module:
{inner}
    def main(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        return x
'''


@pytest.mark.parametrize("decorators, name", [
    ('@__import__("os").system("echo pwned")\n@R.function', "__import__"),
    ('@R.function\n@__import__("os").system("echo pwned")', "__import__"),
    ("@R.function\n@print", "print"),
    ("@R.function\n@functools.lru_cache", "functools.lru_cache"),
    ("@R.function\n@R.no_such_decorator", "R.no_such_decorator"),
])
def test_unknown_decorator_on_a_function_is_refused(decorators, name):
    with pytest.raises(ParseError, match="unknown decorator") as info:
        relax.from_script(MAIN.format(outer=decorators))
    assert name in str(info.value) and info.value.context["line"] in (1, 2)


@pytest.mark.parametrize("inner", [
    '    @R.function\n    @__import__("os").system("x")',
    '    @exec("print(1)")\n    @R.function'])
def test_unknown_decorator_inside_a_module_is_refused(inner):
    with pytest.raises(ParseError, match="unknown decorator"):
        relax.from_script(MODULE.format(inner=inner))


def test_unknown_class_decorator_is_refused():
    text = '@__import__("os").getcwd\n' + MODULE.format(inner="    @R.function")
    with pytest.raises(ParseError, match="unknown decorator.*__import__") as info:
        relax.from_script(text)
    assert info.value.context["line"] == 1


@pytest.mark.parametrize("decorators", ['@__import__("os").getcwd\n@T.prim_func',
                                        "@T.prim_func\n@T.no_such_thing"])
def test_unknown_decorator_on_a_prim_func_is_refused(decorators):
    text = decorators + "\ndef f(a: T.Buffer((2,), \"float32\")):\n    a[0] = T.float32(1)\n"
    with pytest.raises(ParseError, match="unknown decorator"):
        parse_tir_text(text)
    with pytest.raises(ParseError, match="unknown decorator"):
        relax.from_script(MODULE.format(inner="    @R.function").replace(
            "class Module:\n", "class Module:\n" + _indent(text)))


def _indent(text: str) -> str:
    return "".join("    " + line + "\n" for line in text.splitlines())


@pytest.mark.parametrize("line", ['x = __import__("os")', 'print("hi")', "os.system('x')",
                                  "del metadata", "exec('1')"])
def test_module_level_code_is_refused(line):
    with pytest.raises(ParseError):
        relax.from_script(line + "\n" + MAIN.format(outer="@R.function"))


def test_printed_spellings_still_parse():
    for outer in ("@R.function", "@R.function(private=True)", "@R.function(pure=False)"):
        assert relax.from_script(MAIN.format(outer=outer)) is not None


_RUNS = re.compile(r"(?<![.\w])(exec|eval|compile|__import__)\s*\(|\b(pickle|marshal|importlib)\b")


@pytest.mark.parametrize("folder", ["msc/relax/parser", "msc/tir", "msc/graph"])
def test_no_code_execution_on_the_input_path(folder):
    """The readers of text and JSON never hand input to exec/eval/pickle."""
    for path in sorted((ROOT / folder).glob("*.py")):
        code = "\n".join(line.split("#")[0] for line in path.read_text().splitlines())
        assert not _RUNS.search(code), path


@pytest.mark.parametrize("expr", ["-" * 5000 + "x", "-" * 50000 + "x", "x + " * 5000 + "x"])
def test_deeply_nested_expression_is_a_parse_error(expr):
    """Was RecursionError / MemoryError from Python's own parser."""
    with pytest.raises(ParseError, match="nested too deeply"):
        relax.from_script(MAIN.format(outer="@R.function").replace("    return x",
                                                                   f"    y = {expr}\n    return x"))


SHAPED = '''@R.function
def main(x: R.Tensor(({dim}, 3), "float32")) -> R.Tensor(({dim}, 3), "float32"):
    return x
'''


@pytest.mark.parametrize("dim, words", [
    ("1.5", "integer"), ("True", "integer"), ("-5", "out of range"),
    (str(10 ** 30), "out of range"), ('"n * 0.5"', "integer")])
def test_bad_tensor_dims_are_refused(dim, words):
    """Were accepted: a float, bool, negative or int64-overflowing dim."""
    with pytest.raises(ParseError, match=words) as info:
        relax.from_script(SHAPED.format(dim=dim))
    assert info.value.context["line"] == 2


@pytest.mark.parametrize("dim", ["0", "7", '"n"', '"n * 2"', str(2 ** 63 - 1)])
def test_good_tensor_dims_parse(dim):
    assert relax.from_script(SHAPED.format(dim=dim)) is not None
