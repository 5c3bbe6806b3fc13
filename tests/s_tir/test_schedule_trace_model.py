"""The trace as TVM models it: instructions of registered kinds holding the RVs themselves,
names given when printed or saved, dead pure instructions dropped by ``simplified``, and a
hand-built trace replayed (Python and JSON) onto a schedule computing what numpy does."""

import json

import numpy as np
import pytest

from msc import s_tir
from msc.errors import ScheduleError
from msc.s_tir.schedule import Instruction, InstructionKind, LoopRV, SBlockRV, Trace
from msc.script import tir as T
from msc.tir.interp import run_prim_func


@T.prim_func(s_tir=True)
def scale_shift(A: T.Buffer((8, 8), "float32"), C: T.Buffer((8, 8), "float32")):
    B = T.sblock_alloc_buffer((8, 8), "float32")
    for i, j in T.grid(8, 8):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * 2.0
    for i, j in T.grid(8, 8):
        with T.sblock("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] - 1.0


def _inst(kind, inputs, attrs, outputs):
    return Instruction(InstructionKind.get(kind), inputs, attrs, outputs)


def _hand_trace():
    b0, b1, l2, l3 = SBlockRV(), SBlockRV(), LoopRV(), LoopRV()
    return Trace([
        _inst("GetSBlock", [], ["B", "main"], [b0]),
        _inst("ComputeInline", [b0], [], []),
        _inst("GetSBlock", [], ["C", "main"], [b1]),
        _inst("GetLoops", [b1], [], [l2, l3]),
        _inst("EnterPostproc", [], [], []),
        _inst("Parallel", [l2], [], []),
    ], {})


def _check_values(sch):
    a = np.random.default_rng(0).standard_normal((8, 8)).astype("float32")
    c = np.zeros((8, 8), "float32")
    run_prim_func(sch.mod["main"], a, c)
    np.testing.assert_allclose(c, a * 2.0 - 1.0, rtol=1e-6)


def test_kinds_know_their_purity():
    assert InstructionKind.get("GetLoops").is_pure
    assert not InstructionKind.get("ComputeInline").is_pure
    assert InstructionKind.get("Split") == "Split"
    with pytest.raises(ScheduleError, match="unknown schedule instruction kind"):
        InstructionKind.get("NoSuchKind")


def test_an_instruction_alone_prints_with_placeholders():
    inst = _inst("GetLoops", [SBlockRV()], [], [LoopRV()])
    assert str(inst) == "_, = sch.get_loops(block=_)"


def test_names_are_given_in_order_of_definition():
    lines = _hand_trace().as_python()
    assert lines[:4] == ['b0 = sch.get_sblock(name="B", func_name="main")',
                         "sch.compute_inline(block=b0)",
                         'b1 = sch.get_sblock(name="C", func_name="main")',
                         "l2, l3 = sch.get_loops(block=b1)"]


def test_simplified_drops_unused_pure_instructions_and_postprocs():
    trace = _hand_trace().simplified(remove_postproc=True)
    assert [i.kind for i in trace.insts] == ["GetSBlock", "ComputeInline"]
    assert len(_hand_trace().simplified(remove_postproc=False).insts) == 6


def test_pop_and_decisions():
    sch = s_tir.Schedule(scale_shift)
    (i, _) = sch.get_loops(sch.get_sblock("C"))
    sch.sample_perfect_tile(i, n=2, decision=[2, 4])
    sample = sch.trace.insts[-1]
    assert sch.trace.get_decision(sample) == [2, 4]
    assert sch.trace.pop() is sample
    assert sch.trace.get_decision(sch.trace.insts[-1]) is None


@pytest.mark.parametrize("form", ["python", "json"])
def test_a_hand_built_trace_replays(form):
    trace = _hand_trace()
    sch = s_tir.Schedule(scale_shift)
    if form == "json":
        Trace.apply_json_to_schedule(json.loads(json.dumps(trace.as_json())), sch)
    else:
        trace.apply_to_schedule(sch, remove_postproc=False)
    assert [b.name for b in _blocks(sch)] == ["C"]
    assert sch.get(sch.get_loops(sch.get_sblock("C"))[0]).kind == "parallel"
    _check_values(sch)


def test_replay_stops_at_postproc_when_asked():
    sch = s_tir.Schedule(scale_shift)
    _hand_trace().apply_to_schedule(sch, remove_postproc=True)
    assert sch.get(sch.get_loops(sch.get_sblock("C"))[0]).kind == "serial"


def test_annotation_value_is_an_input():
    sch = s_tir.Schedule(scale_shift)
    sch.annotate(sch.get_sblock("C"), "note", "SSR")
    (_, inst) = sch.trace.insts
    assert inst.attrs == ["note"] and inst.inputs[1] == "SSR"
    replayed = s_tir.Schedule(scale_shift)
    Trace.apply_json_to_schedule(sch.trace.as_json(), replayed)
    assert replayed.get(replayed.get_sblock("C")).annotations == {"note": "SSR"}


def _blocks(sch):
    from msc.s_tir.schedule.tree import child_blocks

    return child_blocks(sch.mod["main"].body.body)


def test_tir_constants_in_attrs_print_as_tvm_prints_them():
    from msc.tir import expr as E

    v = E.Var("v", "int32")
    trace = Trace([_inst("SampleCategorical", [],
                         [[E.IntImm(3, "int32")], [E.FloatImm(1.0, "float32")]], [v])], {})
    assert str(trace.as_json()) == \
        "[[['SampleCategorical', [], [[3], [T.float32(1.0)]], ['v0']]], []]"
    sch = s_tir.Schedule(scale_shift)
    Trace.apply_json_to_schedule(trace.as_json(), sch)
    assert sch.trace.as_python() == \
        ["v0 = sch.sample_categorical(candidates=[3], probs=[1], decision=0)"]
