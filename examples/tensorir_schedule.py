"""MLC lesson "TensorIR" with msc imports: mm_relu transformed with a Schedule.

The lesson's steps as written (split j by 4, reorder, reverse_compute_at the relu,
decompose_reduction), checked against numpy, with the trace saved as JSON and replayed.
The lesson uses 128x128; CI runs it as is (the interpreter is not involved: msc compiles).

    python examples/tensorir_schedule.py
"""

import json
import time

import numpy as np

from msc import tir  # TVM: import tvm; from tvm import tir (tvm.s_tir in 0.27)
from msc.backend.lowering.compile import compile_prim_func  # TVM: tvm.build(mod, target="llvm")
from msc.script import ir as I
from msc.script import tir as T


@I.ir_module
class MyModule:
    @T.prim_func
    def mm_relu(A: T.Buffer((128, 128), "float32"),
                B: T.Buffer((128, 128), "float32"),
                C: T.Buffer((128, 128), "float32")):
        T.func_attr({"global_symbol": "mm_relu", "tir.noalias": True})
        Y = T.alloc_buffer((128, 128), dtype="float32")
        for i, j, k in T.grid(128, 128, 128):
            with T.block("Y"):
                vi = T.axis.spatial(128, i)
                vj = T.axis.spatial(128, j)
                vk = T.axis.reduce(128, k)
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        for i, j in T.grid(128, 128):
            with T.block("C"):
                vi = T.axis.spatial(128, i)
                vj = T.axis.spatial(128, j)
                C[vi, vj] = T.max(Y[vi, vj], T.float32(0))


def transform(mod, jfactor: int):
    sch = tir.Schedule(mod)
    block_Y = sch.get_block("Y", func_name="mm_relu")
    _, j, k = sch.get_loops(block_Y)
    j0, j1 = sch.split(j, factors=[None, jfactor])
    sch.reorder(j0, k, j1)
    block_C = sch.get_block("C", "mm_relu")
    sch.reverse_compute_at(block_C, j0)
    sch.decompose_reduction(block_Y, k)
    return sch


def evaluate(func, a, b, number: int = 20) -> tuple:
    kernel = compile_prim_func(func)
    c = np.zeros((128, 128), "float32")
    kernel(a, b, c)
    start = time.perf_counter()
    for _ in range(number):
        kernel(a, b, c)
    return c, (time.perf_counter() - start) / number


def main() -> dict:
    rng = np.random.default_rng(0)
    a, b = rng.random((128, 128), "float32"), rng.random((128, 128), "float32")
    expected = np.maximum(a @ b, 0)
    sch = transform(MyModule, jfactor=4)
    sch.mod.show()
    print(sch.trace)
    results = {}
    for name, func in (("original", MyModule["mm_relu"]), ("transformed", sch.mod["mm_relu"])):
        c, secs = evaluate(func, a, b)
        results[name] = secs
        print(f"Time cost of {name} mm_relu: {secs * 1e3:.3f} ms")
        if not np.allclose(c, expected, rtol=1e-4):
            raise SystemExit(f"{name} mm_relu differs from numpy")
    saved = json.dumps(sch.trace.as_json())  # a trace is data: save, load, replay
    replay = tir.Schedule(MyModule)
    tir.Trace.from_json(saved).apply_to_schedule(replay)
    if replay.mod.script() != sch.mod.script():
        raise SystemExit("the replayed trace gives another module")
    return results


if __name__ == "__main__":
    main()
