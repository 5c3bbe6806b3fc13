"""Fuzzing the TVMScript TIR reader (issue #20): TVM's golden prim funcs with tokens deleted,
duplicated, swapped or replaced, random unicode inserted, or cut short either parse, or raise an
msc error with a non-empty message. A function that parses also prints.

Long run: ``MSC_FUZZ_EXAMPLES=5000 python -m pytest tests/tir/test_tir_fuzz.py -q``.
"""

from __future__ import annotations

import pathlib

import pytest
from hypothesis import given

from msc.errors import ParseError
from msc.tir.parser import parse_tir_text
from msc.tir.printer import prim_func_to_script
from tests.helpers.fuzz import FUZZ_SETTINGS, loads_or_refuses, mutated_text

DATA = pathlib.Path(__file__).parent / "data"
GOLDEN = [p.read_text() for p in sorted(DATA.glob("*.tvmscript"))]


def _parse_and_print(text: str):
    return [prim_func_to_script(f, name) for name, f in parse_tir_text(text).items()]


@FUZZ_SETTINGS
@given(mutated_text(GOLDEN))
def test_fuzz_tir_script_text(text):
    loads_or_refuses(_parse_and_print, text)


# ---- crashes the fuzzer found, kept as plain tests ------------------------------------------

BARE = '''@T.prim_func
def f(a: T.Buffer((2,), "float32")):
    {line}
    a[0] = T.float32(1)
'''


@pytest.mark.parametrize("line", ["T", "a", "1 + 2", "T.float32"])
def test_bare_expression_statement_is_a_parse_error(line):
    """Was AttributeError ('Name' object has no attribute 'func')."""
    with pytest.raises(ParseError, match="expected a statement") as info:
        parse_tir_text(BARE.format(line=line))
    assert info.value.context["line"] == 3


@pytest.mark.parametrize("op, depth", [("+", 900), ("+", 3000), ("-", 3000), ("*", 20000)])
def test_deep_expression_is_a_parse_error(op, depth):
    """Was RecursionError (or MemoryError from Python's parser)."""
    term = "a[0]"
    line = "a[1] = " + f" {op} ".join([term] * depth) if op != "-" else \
        "a[1] = " + "-" * depth + term
    try:
        parse_tir_text(BARE.format(line=line))
    except ParseError as err:
        assert "deep" in str(err)


SHAPED = '''@T.prim_func
def f(a: T.Buffer(({dim},), "float32")):
    a[0] = T.float32(1)
'''


@pytest.mark.parametrize("dim, words", [
    ("-5", "out of range"), (str(10 ** 30), "out of range"),
    ("T.int64(99999999999999999999999)", "out of range"), ("T.float32(2)", "integer")])
def test_bad_buffer_dims_are_refused(dim, words):
    """Were accepted: negative, int64-overflowing and float buffer dims."""
    with pytest.raises(ParseError, match=words) as info:
        parse_tir_text(SHAPED.format(dim=dim))
    assert info.value.context["line"] == 2


@pytest.mark.parametrize("dim", ["0", "7", "n", "T.int64(3)", str(2 ** 63 - 1)])
def test_good_buffer_dims_parse(dim):
    assert parse_tir_text(SHAPED.format(dim=dim))
