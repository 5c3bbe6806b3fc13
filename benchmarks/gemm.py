"""fp32 GEMM throughput, one thread: msc's llvmlite kernel vs numpy, onnxruntime and torch.

    .venv/bin/python benchmarks/gemm.py [--repeats 7] [--min-time 0.1] [--threads N]
                                        [--shapes square,fc]

``--threads N`` adds msc on N threads (msc/backend/runtime/threads.py) as one more contender,
interleaved with the others; they all stay on one thread.

Every contender gets B as a constant, the way a model's weight arrives: msc packs it once
(Gemm), onnxruntime gets it as an initializer (MLAS prepacks it), numpy and torch use it as is.
Each figure is the best of ``--repeats`` runs, each run at least ``--min-time`` seconds.

Peak: the formula 2 FMA pipes x 16 lanes x 2 flop x clock (clock from /proc/cpuinfo, which on
a VM is the nominal clock) assumes full-width 512-bit FMA pipes. Not every AVX-512 core has
them (Zen 4 splits a 512-bit FMA into two 256-bit halves), and the real clock can differ from
the nominal one, so the script also measures peak with an FMA-throughput loop (12 independent
vector accumulators) and reports % of that measured peak.
"""

from __future__ import annotations

import os

# Before numpy/torch load their BLAS: every contender runs on exactly one thread.
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import best_interleaved, per_call
from benchmarks.peak import cpuinfo_mhz, fma_probe
from msc.backend import JIT, KernelCache, vector_lanes
from msc.backend.kernels import Gemm, GemmConfig, build_gemm_module
from msc.backend.runtime.threads import num_threads

# name, M, K, N: resnet50 convolutions as pixels x (kh*kw*cin) x cout, and its classifier.
SHAPES = [
    ("square", 1024, 1024, 1024),
    ("res2 3x3", 3136, 576, 64),
    ("res3 3x3", 784, 1152, 128),
    ("res4 3x3", 196, 2304, 256),
    ("res5 3x3", 49, 4608, 512),
    ("fc", 1, 2048, 1000),
]


# ---------------------------------------------------------------------------------------------
# Contenders: each returns a no-argument callable computing A @ B.


def run_msc(a, b):
    g, out = Gemm(b), np.empty((a.shape[0], b.shape[1]), np.float32)
    got = g(a, out)
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    return lambda: g(a, out)


def run_msc_threads(threads: int):
    def make(a, b):
        one = run_msc(a, b)
        g, out = Gemm(b), np.empty((a.shape[0], b.shape[1]), np.float32)
        with num_threads(threads):
            assert np.array_equal(g(a, out), one()), "threads changed the result"

        def call():
            with num_threads(threads):
                return g(a, out)
        return call
    return make


def run_numpy(a, b):
    out = np.empty((a.shape[0], b.shape[1]), np.float32)
    return lambda: np.matmul(a, b, out=out)


def run_onnxruntime(a, b):
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("MatMul", ["A", "B"], ["C"])], "gemm",
        [helper.make_tensor_value_info("A", TensorProto.FLOAT, list(a.shape))],
        [helper.make_tensor_value_info("C", TensorProto.FLOAT, [a.shape[0], b.shape[1]])],
        initializer=[numpy_helper.from_array(b, "B")])
    # IR version 8 is what every onnxruntime since 1.10 accepts; onnx now writes newer ones.
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    onnx.checker.check_model(model)
    return lambda: session.run(None, {"A": a})


def run_torch(a, b):
    import torch

    torch.set_num_threads(1)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    out = torch.empty(a.shape[0], b.shape[1])
    return lambda: torch.matmul(ta, tb, out=out)


CONTENDERS = {"msc": run_msc, "numpy": run_numpy, "onnxruntime": run_onnxruntime,
              "torch": run_torch}


# ---------------------------------------------------------------------------------------------
# Peak


def compile_times() -> tuple[float, float]:
    """Seconds to build the GEMM kernel cold (codegen) and warm (object from the disk cache)."""
    module = build_gemm_module(GemmConfig(vector_lanes()))
    symbol = [GemmConfig(vector_lanes()).symbol]
    with tempfile.TemporaryDirectory() as tmp:
        times = []
        for _ in range(2):
            jit, start = JIT(KernelCache(tmp)), time.perf_counter()
            jit.compile(module, symbol)
            times.append(time.perf_counter() - start)
    return times[0], times[1]


# ---------------------------------------------------------------------------------------------


def measure(shape, probe, probe_flops: float, args) -> tuple[tuple, dict[str, float]]:
    """GFLOP/s of every contender, and of the peak probe, on one shape."""
    _, m, k, n = shape
    rng = np.random.default_rng(0)
    a, b = rng.random((m, k), dtype=np.float32), rng.random((k, n), dtype=np.float32)
    contenders = dict(CONTENDERS)
    if args.threads > 1:
        contenders[f"msc x{args.threads}"] = run_msc_threads(args.threads)
    fns = {who: make(a, b) for who, make in contenders.items()}
    flops = dict.fromkeys(fns, 2.0 * m * k * n)
    fns["peak"], flops["peak"] = probe, probe_flops
    seconds = best_interleaved(fns, args.repeats, lambda fn: per_call(fn, args.min_time))
    return shape, {who: flops[who] / seconds[who] / 1e9 for who in fns}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--min-time", type=float, default=0.1)
    parser.add_argument("--threads", type=int, default=1, help="also run msc on N threads")
    parser.add_argument("--shapes", default="", help="comma-separated shape names (all)")
    args = parser.parse_args()
    wanted = [name.strip() for name in args.shapes.split(",") if name.strip()]
    unknown = set(wanted) - {shape[0] for shape in SHAPES}
    if unknown:
        parser.error(f"unknown shapes {sorted(unknown)}; known: {[s[0] for s in SHAPES]}")

    lanes, mhz = vector_lanes(), cpuinfo_mhz()
    probe = fma_probe(lanes=lanes)
    cold, warm = compile_times()
    rows = [measure(shape, probe.run, probe.flops, args) for shape in SHAPES
            if not wanted or shape[0] in wanted]
    # The probe ran interleaved with every row; its best run is the least disturbed peak.
    peak = max(rate["peak"] for _, rate in rows)
    formula = 2 * 16 * 2 * mhz / 1e3 if mhz else float("nan")
    print(f"host: {lanes} fp32 lanes; /proc/cpuinfo clock {mhz} MHz")
    print(f"peak: formula 2 pipes x 16 lanes x 2 flop x clock = {formula:.1f} GFLOP/s; "
          f"measured FMA throughput = {peak:.1f} GFLOP/s (% peak below uses the measured one)")
    print(f"kernel build: cold {cold * 1e3:.0f} ms, from disk cache {warm * 1e3:.1f} ms\n")
    names = [who for who in rows[0][1] if who != "peak"]
    threaded = names[-1] if args.threads > 1 else None
    head = f"{'shape':<9} {'M':>5} {'K':>5} {'N':>5} | " + " ".join(
        f"{name:>11}" for name in names) + " | msc %peak | msc/ORT" + (
        f" | x{args.threads}/x1" if threaded else "")
    print(head + "\n" + "-" * len(head))
    for (name, m, k, n), rate in rows:
        cells = " ".join(f"{rate[who]:>11.1f}" for who in names)
        speedup = f" | {rate[threaded] / rate['msc']:>6.2f}x" if threaded else ""
        print(f"{name:<9} {m:>5} {k:>5} {n:>5} | {cells} | {100 * rate['msc'] / peak:>8.0f}% "
              f"| {rate['msc'] / rate['onnxruntime']:>6.2f}x{speedup}")
    print("\nGFLOP/s, higher is better; one thread each" + (
        f" except {threaded}." if threaded else "."))


if __name__ == "__main__":
    main()
