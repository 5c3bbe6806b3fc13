"""int8 GEMM alone, one thread: msc's AMX tile driver vs its VNNI driver vs onnxruntime's
MatMulInteger and QLinearMatMul on the same shapes, interleaved, thread CPU time.

    .venv/bin/python benchmarks/int8_gemm.py [--repeats 7] [--min-time 0.05]
                                             [--shapes vit,small] [--out u8|s32]

Shapes are the int8 transformer rows at the corpus's list batch (M = batch x tokens, the
QKV / projection / MLP GEMMs of ViT-S/B, BERT-like encoders and small decoders) plus small
M and K, where the tiles stop paying (the break-even int8/amx.py's MIN_ROWS is set from).

Every contender gets B as a constant: msc packs it once (the VNNI panels both of its drivers
read), onnxruntime gets an initializer (MLAS packs it once; on an AMX host MLAS runs its AMX
kernel too). msc's output is ``--out``: "u8" (requantized, as a folded QDQ MatMul writes;
compared with QLinearMatMul) or "s32" (compared with MatMulInteger). Before timing, msc's AMX
and VNNI outputs are checked byte-equal and the s32 output equal to MatMulInteger's.

``--models bert gpt2``: the whole int8 model instead (benchmarks/int8.py's BERT-base encoder,
sequence 128, and GPT-2 124M; onnxruntime's QDQ file for both runtimes): msc with AMX tiles,
the same executable's kernels built with AMX off (the VNNI drivers main runs) and onnxruntime,
interleaved in one process, at each ``--threads`` (thread CPU time at one thread, wall time
at more).

Each figure is the best of ``--repeats`` interleaved rounds, a round the mean of calls over
``--min-time`` s of the calling thread's CPU time (``time.thread_time``: other processes'
load does not count; every contender computes on the calling thread at one thread). Columns:
microseconds per call, and the ratios amx/vnni and amx/ORT (below 1: msc's AMX is faster).
Without AMX on the host (or under MSC_CPU_ISA=avx512 / avx2) the amx column is the VNNI driver.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import best_interleaved, per_call, print_table
from msc.backend.kernels.int8.gemm import QGemmConfig, host_amx, host_vnni, pack_vnni, qgemm_driver
from msc.backend.runtime.threads import num_threads

# family -> (name, M, K, N)
SHAPES = {
    "vit": [("vit-b qkv b1", 197, 768, 2304), ("vit-b proj b1", 197, 768, 768),
            ("vit-b fc1 b1", 197, 768, 3072), ("vit-b fc2 b1", 197, 3072, 768),
            ("vit-s qkv b4", 788, 384, 1152), ("vit-s fc2 b4", 788, 1536, 384)],
    "text": [("enc 128x512", 128, 512, 512), ("enc 512x256", 512, 256, 256),
             ("dec 1040x512", 1040, 512, 512), ("dec 256x128", 256, 128, 512)],
    "small": [("m16 k768", 16, 768, 768), ("m32 k768", 32, 768, 768),
              ("m48 k768", 48, 768, 768), ("m64 k768", 64, 768, 768),
              ("m197 k64", 197, 64, 256), ("m197 k32", 197, 32, 256),
              ("m197 n32", 197, 512, 32)],
}
ZERO, SCALE, OUT_SCALE, OUT_ZERO = 3, 0.002, 0.05, 128


def operands(m: int, k: int, n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    return (rng.integers(0, 256, (m, k), dtype=np.uint8),
            rng.integers(-128, 128, (k, n), dtype=np.int8))


def run_msc(amx: bool, out: str):
    """A maker: (a, b) -> no-argument call of msc's driver (AMX or VNNI) on one thread."""
    def make(a, b):
        (m, k), n = a.shape, b.shape[1]
        if k % 4:
            raise SystemExit(f"K={k}: msc's drivers read rows of whole 4-byte groups")
        cfg = QGemmConfig("col", out, host_vnni(), amx=amx)
        driver, packed = qgemm_driver(cfg), pack_vnni(b)
        comp = (ZERO * b.astype(np.int64).sum(axis=0)).astype(np.int32)
        scale, bias = np.full(n, SCALE, np.float32), np.zeros(n, np.float32)
        c = np.empty((m, n), np.int32 if out == "s32" else np.uint8)
        arrays = (comp.ctypes.data, scale.ctypes.data, bias.ctypes.data)
        epi = (*arrays, OUT_SCALE, OUT_ZERO, 0, scale.ctypes.data, bias.ctypes.data, 1.0, 0, 0)

        def call():
            driver(a.ctypes.data, packed.ctypes.data, c.ctypes.data, m, n, k // 4, k, n, *epi)
            return c
        call.keep = (packed, comp, scale, bias, a)
        return call
    return make


def _session(nodes, inputs, output, initializers):
    import onnxruntime as ort
    from onnx import helper

    graph = helper.make_graph(nodes, "int8_gemm", inputs, [output], initializer=initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])


def run_matmul_integer(a, b):
    from onnx import TensorProto, helper, numpy_helper

    (m, _), n = a.shape, b.shape[1]
    session = _session(
        [helper.make_node("MatMulInteger", ["A", "B", "za"], ["C"])],
        [helper.make_tensor_value_info("A", TensorProto.UINT8, list(a.shape))],
        helper.make_tensor_value_info("C", TensorProto.INT32, [m, n]),
        [numpy_helper.from_array(b, "B"), numpy_helper.from_array(np.uint8(ZERO), "za")])
    return lambda: session.run(None, {"A": a})[0]


def run_qlinear_matmul(a, b):
    from onnx import TensorProto, helper, numpy_helper

    (m, _), n = a.shape, b.shape[1]
    consts = {"sa": np.float32(1.0), "za": np.uint8(ZERO), "B": b, "sb": np.float32(SCALE),
              "zb": np.int8(0), "sy": np.float32(OUT_SCALE), "zy": np.uint8(OUT_ZERO)}
    session = _session(
        [helper.make_node("QLinearMatMul", ["A", "sa", "za", "B", "sb", "zb", "sy", "zy"],
                          ["C"])],
        [helper.make_tensor_value_info("A", TensorProto.UINT8, list(a.shape))],
        helper.make_tensor_value_info("C", TensorProto.UINT8, [m, n]),
        [numpy_helper.from_array(np.asarray(v), name) for name, v in consts.items()])
    return lambda: session.run(None, {"A": a})[0]


def contenders(out: str) -> dict:
    return {"msc amx": run_msc(True, out), "msc vnni": run_msc(False, out),
            "ort": run_matmul_integer if out == "s32" else run_qlinear_matmul}


def check(fns: dict, a, b, out: str) -> None:
    """AMX and VNNI give the same bytes; s32 equals MatMulInteger's (exact integers)."""
    amx, vnni = fns["msc amx"]().copy(), fns["msc vnni"]().copy()
    if amx.tobytes() != vnni.tobytes():
        raise SystemExit(f"AMX and VNNI outputs differ on {a.shape} @ {b.shape}")
    if out == "s32" and not np.array_equal(amx, fns["ort"]()):
        raise SystemExit(f"msc's int32 sums differ from MatMulInteger on {a.shape} @ {b.shape}")


def measure(shape, args) -> list:
    name, m, k, n = shape
    a, b = operands(m, k, n)
    fns = {who: make(a, b) for who, make in contenders(args.out).items()}
    check(fns, a, b, args.out)
    seconds = best_interleaved(fns, args.repeats,
                               lambda fn: per_call(fn, args.min_time, time.thread_time))
    us = {who: s * 1e6 for who, s in seconds.items()}
    gops = 2 * m * k * n / seconds["msc amx"] / 1e9
    return [name, m, k, n, *(f"{us[who]:.1f}" for who in fns), f"{gops:.0f}",
            f"{us['msc amx'] / us['msc vnni']:.2f}", f"{us['msc amx'] / us['ort']:.2f}"]


def model_rows(name: str, threads: list, args) -> list[list]:
    """msc (tiles), msc (AMX off: every int8 kernel built while host_amx() says no) and
    onnxruntime on one int8 model, interleaved."""
    from unittest import mock

    from benchmarks.common import msc_executable, msc_runner, ort_qdq, ort_session
    from benchmarks.int8 import inputs, model_and_input, preprocessed
    from msc.backend.kernels.int8 import gemm

    model, shape = model_and_input(name, False)
    model = preprocessed(model)
    qmodel = ort_qdq(model, model.graph.input[0].name, inputs(name, shape, 4, 1))
    x = inputs(name, shape, 1, 2)[0]
    ex_amx = msc_executable(qmodel)
    with mock.patch.object(gemm, "host_amx", lambda: False):
        ex_vnni = msc_executable(qmodel)
        vnni_runs = {n: msc_runner(ex_vnni, n) for n in threads}
        for run in vnni_runs.values():
            run(x)  # kernel objects made on the first call stay VNNI
    rows = []
    for count in threads:
        fns = {"msc amx": msc_runner(ex_amx, count), "msc vnni": vnni_runs[count],
               "ort": ort_session(qmodel, count)}
        same = np.array_equal(fns["msc amx"](x), fns["msc vnni"](x))
        clock = time.thread_time if count == 1 else time.perf_counter
        seconds = best_interleaved({k: (lambda f=f: f(x)) for k, f in fns.items()},
                                   args.repeats,
                                   lambda fn, clock=clock: per_call(fn, args.min_time, clock))
        ms = {k: v * 1e3 for k, v in seconds.items()}
        rows.append([name, count, *(f"{ms[k]:.2f}" for k in fns),
                     f"{ms['msc amx'] / ms['msc vnni']:.2f}", f"{ms['msc amx'] / ms['ort']:.2f}",
                     f"{ms['msc vnni'] / ms['ort']:.2f}", "yes" if same else "NO"])
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--min-time", type=float, default=0.05)
    parser.add_argument("--shapes", default="vit,text,small",
                        help=f"comma-separated families of {sorted(SHAPES)}")
    parser.add_argument("--out", choices=("u8", "s32"), default="u8")
    parser.add_argument("--models", nargs="*", default=[], help="whole int8 models instead: "
                        "bert (BERT-base, sequence 128), gpt2")
    parser.add_argument("--threads", nargs="+", type=int, default=[1])
    args = parser.parse_args(argv)
    if args.models:
        print(f"host AMX: {host_amx()}; load {os.getloadavg()[0]:.2f} (1 min)\n")
        print_table(["model", "threads", "msc amx ms", "msc vnni ms", "ORT ms", "amx/vnni",
                     "amx/ORT", "vnni/ORT", "same output"],
                    (row for name in args.models
                     for row in model_rows(name, args.threads, args)), flush=True)
        return
    families = [f.strip() for f in args.shapes.split(",") if f.strip()]
    unknown = set(families) - set(SHAPES)
    if unknown:
        parser.error(f"unknown shape families {sorted(unknown)}; known: {sorted(SHAPES)}")
    print(f"host AMX (int8 tiles, permission granted, not capped): {host_amx()}; "
          f"AVX-512 VNNI: {host_vnni()}; one thread, thread CPU time\n")
    ort_name = "ORT MatMulInteger" if args.out == "s32" else "ORT QLinearMatMul"
    columns = ["shape", "M", "K", "N", "msc amx us", "msc vnni us", f"{ort_name} us",
               "amx GOP/s", "amx/vnni", "amx/ORT"]
    with num_threads(1):
        print_table(columns, (measure(shape, args) for family in families
                              for shape in SHAPES[family]), flush=True)


if __name__ == "__main__":
    main()
