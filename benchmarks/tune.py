"""msc's tune_tir against the untuned kernels, msc's hand-written kernels and TVM 0.27.

    .venv/bin/python benchmarks/tune.py [--trials 64] [--per-iter 16] [--tvm-trials 16]
                                        [--workloads linear0,matmul512,conv3x3] [--no-tvm]

Workloads: the lesson's ``linear0`` (1x784 @ 784x128 + bias, two blocks), a 512x512x512
matmul, and a 3x3 conv2d of resnet50 (res2: 1x64x56x56, 64 filters, pad 1; msc's
LegalizeOps form). Per workload, one thread, best of several timed runs:

- untuned (as written): the prim func's loops in the order written (the reduction's init
  split off, nothing else), which is what TVM builds untuned;
- msc default: msc's own lowering of the untuned func (it picks the innermost loop for
  contiguous access, e.g. i-k-j for a matmul);
- tuned: the best schedule ``tune_tir`` found in ``--trials`` measured candidates, with the
  tuning wall time;
- ceiling: msc's hand-written kernel for the same math (the packed AVX-512 GEMM with B packed
  once; the native direct conv for the conv);
- TVM 0.27 in a child process (it can segfault): its untuned build, and its own tune_tir with
  ``--tvm-trials`` (the 0.26/0.27 wheels crash inside it on this machine: reported as is).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TVM_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse
import dataclasses
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import per_call

LINEAR0 = '''
@T.prim_func
def linear0(X: T.Buffer((1, 784), "float32"), W: T.Buffer((128, 784), "float32"),
            B: T.Buffer((128,), "float32"), Z: T.Buffer((1, 128), "float32")):
    T.func_attr({"global_symbol": "linear0", "tir.noalias": True})
    Y = T.alloc_buffer((1, 128), "float32")
    for i, j, k in T.grid(1, 128, 784):
        with T.block("Y"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                Y[vi, vj] = T.float32(0)
            Y[vi, vj] = Y[vi, vj] + X[vi, vk] * W[vj, vk]
    for i, j in T.grid(1, 128):
        with T.block("Z"):
            vi, vj = T.axis.remap("SS", [i, j])
            Z[vi, vj] = Y[vi, vj] + B[vj]
'''

MATMUL = '''
@T.prim_func
def matmul(A: T.Buffer((512, 512), "float32"), B: T.Buffer((512, 512), "float32"),
           C: T.Buffer((512, 512), "float32")):
    T.func_attr({"tir.noalias": True})
    for i, j, k in T.grid(512, 512, 512):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
'''

TVM_CHILD = r"""
import json, sys, tempfile, time
import numpy as np, tvm
from tvm.script import from_source
text, trials = open(sys.argv[1]).read(), int(sys.argv[2])
mod = tvm.IRModule({"main": from_source(text)})
dev = tvm.cpu()

def timed(m):
    lib = tvm.compile(m, target="llvm")
    args = [tvm.runtime.tensor(a, dev) for a in np.load(sys.argv[3]).values()]
    lib["main"](*args)
    best = 1e9
    for _ in range(5):
        start = time.perf_counter(); lib["main"](*args); best = min(best, time.perf_counter() - start)
    return best

print(json.dumps({"untuned": timed(mod)}), flush=True)
from tvm.s_tir import meta_schedule as ms
target = tvm.target.Target({"kind": "llvm", "num-cores": 1})
start = time.perf_counter()
with tempfile.TemporaryDirectory() as wd:
    db = ms.tune_tir(mod, target=target, work_dir=wd, max_trials_global=trials,
                     num_trials_per_iter=min(trials, 16), num_tuning_cores=1)
    sch = ms.tir_integration.compile_tir(db, mod, target)
tune_s = time.perf_counter() - start
print(json.dumps({"tuned": timed(sch.mod), "tune_s": tune_s}), flush=True)
"""


def conv_func(channels: int = 64, size: int = 56):
    """The legalized 3x3 conv (pad 1) of ``channels`` in and out on ``size`` x ``size``, and its
    Relax module (default: resnet50's res2 conv)."""
    from msc import relax
    from msc.relax import op as R

    x = relax.Var("x", relax.TensorStructInfo((1, channels, size, size), "float32"))
    w = relax.Var("w", relax.TensorStructInfo((channels, channels, 3, 3), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            gv = bb.emit_output(R.nn.conv2d(x, w, padding=(1, 1)))
        bb.emit_func_output(gv)
    mod = relax.transform.LegalizeOps()(bb.get())
    return mod["conv2d"], bb.get()


def workloads(names: list) -> list:
    """(name, prim func, flops, ceiling callable factory)."""
    from msc.tir.parser import parse_tir_text

    table = {
        "linear0": lambda: (parse_tir_text(LINEAR0)["linear0"], 2 * 784 * 128 + 128),
        "matmul512": lambda: (parse_tir_text(MATMUL)["matmul"], 2 * 512 ** 3),
        "conv3x3": lambda: (conv_func()[0], 2 * 64 * 56 * 56 * 64 * 9),
    }
    return [(n, *table[n]()) for n in names]


def best_time(fn, repeats: int = 7, min_time: float = 0.05) -> float:
    """Best seconds per call over ``repeats`` chunks of >= ``min_time`` s, after a warm call."""
    fn()
    return min(per_call(fn, min_time) for _ in range(repeats))


def as_written(func):
    """The untuned func with only its reduction inits split off (loops kept as written)."""
    from msc import meta_schedule as ms
    from msc import tir
    from msc.s_tir import Schedule

    sch = Schedule(func)
    for name, kind in ms.tunable_blocks(func):
        if kind == "reduce":
            block = sch.get_block(name)
            loops = sch.get_loops(block)
            blk = sch.get(block)
            reduce = {v.name for iv in blk.iter_vars if iv.kind == "reduce"
                      for v in tir.free_vars(iv.binding)}
            first = next(lp for lp in loops if sch.get(lp).var.name in reduce)
            sch.decompose_reduction(block, first)
    return sch.mod["main"]


def ceiling(name: str, args: list):
    """msc's hand-written kernel for the same math, as a no-argument callable."""
    from msc.backend.kernels import Gemm

    if name == "linear0":
        gemm = Gemm(np.ascontiguousarray(args[1].T), bias=args[2])
        return lambda: gemm(args[0])
    if name == "matmul512":
        gemm = Gemm(args[1])
        return lambda: gemm(args[0])
    from msc import relax

    ex = relax.build(conv_func()[1], target="llvm")
    vm = relax.VirtualMachine(ex, relax.cpu())
    return lambda: vm["main"](args[0], args[1])


def run_tvm(func, args: list, trials: int, timeout: float) -> dict:
    """TVM's untuned and tuned seconds (or its failure) from a child process."""
    with tempfile.TemporaryDirectory() as wd:
        src, npz = Path(wd) / "func.py", Path(wd) / "args.npz"
        # TVM compiles a private func without its packed API: print it public.
        src.write_text(dataclasses.replace(func, private=False).script("main"))
        np.savez(npz, **{f"a{k:02d}": a for k, a in enumerate(args)})
        try:
            proc = subprocess.run([sys.executable, "-c", TVM_CHILD, str(src), str(trials),
                                   str(npz)], capture_output=True, text=True, timeout=timeout,
                                  check=False)
            out, code = proc.stdout, proc.returncode
        except subprocess.TimeoutExpired as exc:
            out, code = exc.stdout or "", "timeout"
    found = {}
    for line in (out.decode() if isinstance(out, bytes) else out).splitlines():
        if line.startswith("{"):
            found.update(json.loads(line))
    found["status"] = "ok" if code == 0 else "timeout" if code == "timeout" else \
        "crash" if isinstance(code, int) and code < 0 or code == 139 else "error"
    return found


def model_check(db, func) -> float | None:
    """Rank correlation between the GBT cost model's predictions and the measured times of
    held-out candidates (trained on the first 2/3 of the records, tested on the rest), on the
    per-store features of each candidate's scheduled code."""
    from msc import meta_schedule as ms
    from msc.meta_schedule.features import per_store_features

    rows = [(per_store_features(_replayed(func, r.trace)), -np.log(r.mean_secs))
            for r in db.records_of(func) if r.valid and r.trace.insts]
    if len(rows) < 9:
        return None
    cut = len(rows) * 2 // 3

    def stack(part):
        return (np.concatenate([f for f, _ in part]),
                np.concatenate([np.full(len(f), k) for k, (f, _) in enumerate(part)]))

    x, groups = stack(rows[:cut])
    model = ms.GBTModel().fit(x, np.array([t for _, t in rows[:cut]]), groups)
    pred = model.predict(*stack(rows[cut:]))
    ranks = [np.argsort(np.argsort(v)) for v in (pred, [t for _, t in rows[cut:]])]
    return float(np.corrcoef(*ranks)[0, 1])


def _replayed(func, trace):
    from msc.s_tir import Schedule

    sch = Schedule(func)
    trace.apply_to_schedule(sch)
    return sch.mod["main"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=64, help="msc tune_tir trials per kernel")
    parser.add_argument("--per-iter", type=int, default=16, help="num_trials_per_iter")
    parser.add_argument("--tvm-trials", type=int, default=16, help="TVM tune_tir trials")
    parser.add_argument("--tvm-timeout", type=float, default=900.0)
    parser.add_argument("--no-tvm", action="store_true", help="skip TVM's child process")
    parser.add_argument("--workloads", default="linear0,matmul512,conv3x3")
    parser.add_argument("--work-dir", default=None, help="tuning database (default: temp)")
    args = parser.parse_args()

    from msc import meta_schedule as ms
    from msc.backend.lowering.compile import compile_prim_func
    from msc.meta_schedule.runner import Workload

    print_header()
    scratch = tempfile.TemporaryDirectory(prefix="msc_tune_bench_")
    for name, func, flops in workloads(args.workloads.split(",")):
        task = Workload(func)
        call = task.fresh_args()

        def timed(f, call=call):
            kernel = compile_prim_func(f)
            return best_time(lambda: kernel(*call))

        work = args.work_dir or scratch.name
        start = time.perf_counter()
        db = ms.tune_tir(func, "llvm --num-cores=1", os.path.join(work, name),
                         max_trials_global=args.trials, num_trials_per_iter=args.per_iter,
                         seed=0)
        tune_s = time.perf_counter() - start
        tuned = ms.tir_integration.compile_tir(db, func).mod["main"]
        row = {"name": name, "flops": flops, "written": timed(as_written(func)),
               "default": timed(func), "tuned": timed(tuned), "tune_s": tune_s,
               "trials": db.results[0].trials, "failures": db.results[0].failures,
               "ceiling": best_time(ceiling(name, call)), "model": model_check(db, func)}
        row["tvm"] = {} if args.no_tvm else run_tvm(func, task.args, args.tvm_trials,
                                                    args.tvm_timeout)
        print_row(row)
    scratch.cleanup()
    print("\nOne thread; best of 7 timed runs of at least 50 ms. ceiling: msc's packed GEMM "
          "(B packed once) for linear0/matmul, its native conv kernel for the conv. GBT rank "
          "corr: the cost model's rank correlation with measured speed on held-out candidates "
          "(random ranking: about 0).")


HEAD = ["kernel", "untuned (as written) ms", "msc default ms", "tuned ms", "tuned GFLOP/s",
        "tuned / as written", "tuned / default", "ceiling ms", "tuned / ceiling",
        "tune s (trials, failed)", "GBT rank corr", "TVM untuned ms", "TVM tune_tir"]


def print_header() -> None:
    print("| " + " | ".join(HEAD) + " |")
    print("|" + "---|" * len(HEAD), flush=True)


def print_row(r: dict) -> None:
    tvm = r["tvm"]
    tvm_untuned = f"{tvm['untuned'] * 1e3:.3f}" if "untuned" in tvm else "-"
    tvm_tuned = (f"{tvm['tuned'] * 1e3:.3f} ms in {tvm['tune_s']:.0f} s" if "tuned" in tvm
                 else tvm.get("status", "-"))
    cells = [r["name"], f"{r['written'] * 1e3:.3f}", f"{r['default'] * 1e3:.3f}",
             f"{r['tuned'] * 1e3:.3f}", f"{r['flops'] / r['tuned'] / 1e9:.1f}",
             f"{r['written'] / r['tuned']:.1f}x", f"{r['default'] / r['tuned']:.2f}x",
             f"{r['ceiling'] * 1e3:.3f}", f"{r['tuned'] / r['ceiling']:.2f}x",
             f"{r['tune_s']:.0f} ({r['trials']}, {r['failures']})",
             "-" if r["model"] is None else f"{r['model']:.2f}", tvm_untuned, tvm_tuned]
    print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
