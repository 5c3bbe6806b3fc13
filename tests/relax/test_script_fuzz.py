"""Fuzzing the TVMScript Relax reader (issue #20): golden scripts with tokens deleted,
duplicated, swapped or replaced, random unicode inserted, or cut short either parse, or raise an
msc error with a non-empty message (a ParseError naming the line where it knows one). A module
that parses also prints without any other exception.

Long run: ``MSC_FUZZ_EXAMPLES=5000 python -m pytest tests/relax/test_script_fuzz.py -q``.
"""

from __future__ import annotations

import pathlib

from hypothesis import given
from hypothesis import strategies as st

from msc import relax
from tests.helpers.fuzz import FUZZ_SETTINGS, loads_or_refuses, mutated_text

DATA = pathlib.Path(__file__).parent / "data" / "script"
TIR_DATA = pathlib.Path(__file__).parents[1] / "tir" / "data"
GOLDEN = [p.read_text() for p in sorted(DATA.glob("*.tvmscript"))]
# Modules with prim funcs next to Relax functions (TVM 0.27's legalized text), a few of them
WITH_TIR = [p.read_text() for p in sorted(TIR_DATA.glob("legalize_*.tvmscript"))[::6]]


def _parse_and_print(text: str):
    mod = relax.from_script(text)
    return mod.script()


@FUZZ_SETTINGS
@given(mutated_text(GOLDEN))
def test_fuzz_relax_script_text(text):
    loads_or_refuses(_parse_and_print, text)


@FUZZ_SETTINGS
@given(mutated_text(WITH_TIR))
def test_fuzz_relax_script_with_prim_funcs(text):
    loads_or_refuses(_parse_and_print, text)


@FUZZ_SETTINGS
@given(st.text(max_size=80))
def test_fuzz_relax_script_random_text(text):
    loads_or_refuses(_parse_and_print, text)


@FUZZ_SETTINGS
@given(st.sampled_from(GOLDEN),
       st.sampled_from([("(", ")"), ("[", "]"), ("R.nn.relu(", ")"), ("-", ""), ("x + ", ""),
                        ("(", ""), ("R.add(x, ", ")")]),
       st.integers(50, 6000))
def test_fuzz_relax_script_deep_nesting(text, pair, depth):
    """Deep expressions: a clean error (or a parse), never a RecursionError or a crash."""
    opener, closer = pair
    line = "        with R.dataflow():"
    deep = text.replace(line, f"        y = {opener * depth}x{closer * depth}\n{line}", 1)
    loads_or_refuses(_parse_and_print, deep)
