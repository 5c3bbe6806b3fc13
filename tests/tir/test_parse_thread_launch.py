"""TVM's GPU thread launches read by the parser: ``with T.launch_thread(tag, n) as x`` is the
thread loop TVM makes of it, ``x = T.launch_thread(tag, n)`` an opaque call bound to ``x``;
``T.ceildiv`` is ``(a + b - 1) // b``. msc schedules such functions; it compiles no GPU code."""

import numpy as np
import pytest

from msc import s_tir
from msc.errors import ParseError, RuntimeCallError
from msc.script import tir as T
from msc.tir import expr as E
from msc.tir.interp import run_prim_func
from msc.tir.parser import parse_tir_text


@T.prim_func(s_tir=True)
def launched(A: T.Buffer((64,), "int32"), B: T.Buffer((64,), "int32")):
    with T.sblock("copy"):  # noqa: SIM117 - TVMScript nests its with statements
        with T.launch_thread("threadIdx.x", 16) as tx:
            bx = T.launch_thread("blockIdx.x", T.ceildiv(64, 16))
            B[bx * 16 + tx] = A[bx * 16 + tx]


def test_the_with_form_is_a_thread_loop():
    loop = launched.body.body  # the root block "copy", then the thread loop
    assert loop.kind == "thread_binding" and loop.thread == "threadIdx.x"
    assert E.as_int(loop.extent) == 16
    assert "T.launch_thread(\"blockIdx.x\"" in launched.script()
    assert parse_tir_text(launched.script())  # the printed text reads back


def test_ceildiv_is_the_rounded_up_quotient():
    value = E.evaluate(E.ceildiv(E.Var("n", "int32"), 16), {"n": 65})
    assert value == int(np.ceil(65 / 16))


def test_a_launch_without_a_name_is_refused():
    text = ('@T.prim_func\ndef f(A: T.Buffer((4,), "int32")):\n'
            '    with T.launch_thread("threadIdx.x", 4):\n        A[0] = 1\n')
    with pytest.raises(ParseError, match="launch_thread"):
        parse_tir_text(text)


def test_scheduled_but_not_run():
    sch = s_tir.Schedule(launched)
    assert sch.mod["main"] is launched
    with pytest.raises(RuntimeCallError, match="no implementation of T.launch_thread"):
        run_prim_func(launched, np.arange(64, dtype="int32"), np.zeros(64, "int32"))
