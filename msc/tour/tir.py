"""``msc demo`` step: TensorIR lessons -- a Schedule applied to a prim func, its trace
replayed, and tune_tir searching a small matmul."""

from __future__ import annotations

import json
import os

import numpy as np

from .shared import banner

MM = '''
@T.prim_func
def main(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32"),
         C: T.Buffer((64, 64), "float32")):
    for i, j, k in T.grid(64, 64, 64):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
'''


def _matmul(func, a, b) -> np.ndarray:
    from ..backend.lowering.compile import compile_prim_func

    c = np.zeros((a.shape[0], b.shape[1]), "float32")
    compile_prim_func(func)(a, b, c)
    return c


def step_tir(out: str) -> None:
    """Schedule a matmul by hand (split, reorder, decompose_reduction), save and replay its
    trace, then let tune_tir search it with a few trials (database under ``out``)."""
    from .. import meta_schedule as ms
    from .. import tir
    from ..tir.parser import parse_tir_text

    func = parse_tir_text(MM)["main"]
    rng = np.random.default_rng(0)
    a, b = rng.random((64, 64), "float32"), rng.random((64, 64), "float32")
    banner("tir.Schedule: split j by 16, reorder (i, j_0, k, j_1), decompose_reduction")
    sch = tir.Schedule(func)
    block = sch.get_block("C")
    _, j, k = sch.get_loops(block)
    j0, j1 = sch.split(j, factors=[None, 16])
    sch.reorder(j0, k, j1)
    sch.vectorize(j1)
    sch.decompose_reduction(block, k)
    print(sch.mod["main"].script())
    path = os.path.join(out, "matmul_trace.json")
    with open(path, "w") as f:
        json.dump(sch.trace.as_json(), f)
    replay = tir.Schedule(func)
    with open(path) as f:
        tir.Trace.from_json(json.load(f)).apply_to_schedule(replay)
    if replay.mod["main"].script() != sch.mod["main"].script():
        raise SystemExit("demo: the replayed trace gives another function")
    if not np.allclose(_matmul(sch.mod["main"], a, b), a @ b, rtol=1e-4):
        raise SystemExit("demo: the scheduled matmul differs from numpy")
    print(f"(trace of {len(sch.trace.insts)} steps saved to {path} and replayed)")
    banner("meta_schedule.tune_tir: 4 measured candidates, database in out/tune")
    db = ms.tune_tir(func, "llvm --num-cores=1", os.path.join(out, "tune"), max_trials_global=4,
                     num_trials_per_iter=4, min_repeat_ms=2.0, seed=0)
    result = db.results[0]
    best = ms.tir_integration.compile_tir(db, func)
    if not np.allclose(_matmul(best.mod["main"], a, b), a @ b, rtol=1e-4):
        raise SystemExit("demo: the tuned matmul differs from numpy")
    print(f"untuned {result.untuned_secs * 1e6:.1f} us, best of {result.trials} trials "
          f"{result.best_secs * 1e6:.1f} us ({result.failures} failed); "
          f"{len(db)} records in {db.path_tuning_record}")
