"""Compiled TIR kernels (LegalizeOps rule -> llvmlite) vs numpy and onnxruntime, one thread.

    .venv/bin/python benchmarks/kernels.py [--repeats 9] [--min-time 0.05]

Each op is legalized from a Relax call, compiled by ``msc.backend.lowering.compile`` and called
through its checked Python entry (argument checks included, outputs preallocated). numpy runs
the op's plain formula; onnxruntime runs a one-node model (intra/inter-op threads = 1, output
bound once with IO binding). Figures are microseconds, best of ``--repeats`` rounds that
interleave the contenders (the machine is shared), each at least ``--min-time`` seconds.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import best_interleaved, per_call, print_table
from msc.backend.legalize import legalize_call
from msc.backend.legalize.testing import build_call
from msc.backend.lowering.compile import compile_prim_func

RNG = np.random.default_rng(0)


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _layer_norm(x, g, b, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * g + b


def _max_pool(x, k=3, s=2, p=1):
    xp = np.pad(x, [(0, 0), (0, 0), (p, p), (p, p)], constant_values=-np.inf)
    win = np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(2, 3))[:, :, ::s, ::s]
    return win.max(axis=(-1, -2))


# name: (relax op, inputs, op args, op attrs, numpy fn, onnx node (op_type, attrs))
CASES = {
    "add 1x256x56x56": ("add", [_f32(1, 256, 56, 56), _f32(1, 256, 56, 56)], (), {},
                        np.add, ("Add", {})),
    "add+bias 1x64x112x112": ("add", [_f32(1, 64, 112, 112), _f32(1, 64, 1, 1)], (), {},
                              np.add, ("Add", {})),
    "add 1x2048x7x7": ("add", [_f32(1, 2048, 7, 7), _f32(1, 2048, 7, 7)], (), {}, np.add,
                       ("Add", {})),
    "softmax 1x1000": ("nn.softmax", [_f32(1, 1000)], (), {"axis": -1}, _softmax,
                       ("Softmax", {"axis": -1})),
    "softmax 12x128x128": ("nn.softmax", [_f32(12, 128, 128)], (), {"axis": -1}, _softmax,
                           ("Softmax", {"axis": -1})),
    "layer_norm 128x768": ("nn.layer_norm", [_f32(128, 768), _f32(768), _f32(768)], ([-1],),
                           {}, _layer_norm, ("LayerNormalization", {"axis": -1})),
    "layer_norm 197x768": ("nn.layer_norm", [_f32(197, 768), _f32(768), _f32(768)], ([-1],),
                           {}, _layer_norm, ("LayerNormalization", {"axis": -1})),
    "max_pool2d 1x64x112x112": ("nn.max_pool2d", [_f32(1, 64, 112, 112)], (),
                                {"pool_size": (3, 3), "strides": (2, 2), "padding": (1, 1)},
                                _max_pool, ("MaxPool", {"kernel_shape": [3, 3],
                                                        "strides": [2, 2],
                                                        "pads": [1, 1, 1, 1]})),
    "relu 1x64x112x112": ("nn.relu", [_f32(1, 64, 112, 112)], (), {},
                          lambda x: np.maximum(x, 0), ("Relu", {})),
    "gelu 128x3072": ("nn.gelu", [_f32(128, 3072)], (), {}, None, ("Gelu", {})),
}


def msc_kernel(op, inputs, args, attrs):
    func = legalize_call(build_call(op, inputs, *args, **attrs))
    start = time.perf_counter()
    kernel = compile_prim_func(func)
    compile_ms = (time.perf_counter() - start) * 1e3
    out = kernel(*inputs)
    outs = out if isinstance(out, tuple) else (out,)
    return (lambda: kernel(*inputs, *outs)), out, compile_ms


def ort_kernel(node, inputs, out_shape):
    try:
        import onnxruntime as ort
        from onnx import TensorProto, helper
    except ImportError:
        return None
    op_type, attrs = node
    names = [f"i{k}" for k in range(len(inputs))]
    opset = 20 if op_type == "Gelu" else 17
    graph = helper.make_graph(
        [helper.make_node(op_type, names, ["o"], **attrs)], "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, a.shape) for n, a in
         zip(names, inputs)],
        [helper.make_tensor_value_info("o", TensorProto.FLOAT, out_shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    try:
        sess = ort.InferenceSession(model.SerializeToString(), opts,
                                    providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001 - an op this ORT build lacks is just not compared
        return None
    binding = sess.io_binding()
    for n, a in zip(names, inputs):
        binding.bind_cpu_input(n, a)
    binding.bind_output("o", "cpu")
    sess.run_with_iobinding(binding)
    out = binding.copy_outputs_to_cpu()[0]
    return (lambda: sess.run_with_iobinding(binding)), out


def best_us(fns: dict, repeats: int, min_time: float) -> dict:
    """Best microseconds per call of each contender, rounds interleaved."""
    best = best_interleaved(fns, repeats, lambda fn: per_call(fn, min_time), warm=False)
    return {name: seconds * 1e6 for name, seconds in best.items()}


COLUMNS = ["kernel", "msc us", "numpy us", "onnxruntime us", "msc / numpy", "msc / ORT",
           "compile ms", "max abs err"]


def kernel_row(name: str, case: tuple, args) -> list[str]:
    """One kernel: msc vs numpy vs onnxruntime, interleaved, and msc's error against ORT."""
    op, inputs, op_args, attrs, np_fn, node = case
    run, out, compile_ms = msc_kernel(op, inputs, op_args, attrs)
    fns = {"msc": run}
    if np_fn is not None:
        fns["numpy"] = lambda: np_fn(*inputs)
    ort = ort_kernel(node, inputs, out.shape)
    err = ""
    if ort is not None:
        fns["ort"] = ort[0]
        err = f"{np.abs(ort[1] - out).max():.1e}"
    t = best_us(fns, args.repeats, args.min_time)
    numpy_t, ort_t = t.get("numpy"), t.get("ort")
    return [name, f"{t['msc']:.1f}", f"{numpy_t:.1f}" if numpy_t else "-",
            f"{ort_t:.1f}" if ort_t else "-", f"{t['msc'] / numpy_t:.2f}x" if numpy_t else "-",
            f"{t['msc'] / ort_t:.2f}x" if ort_t else "-", f"{compile_ms:.0f}", err]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--min-time", type=float, default=0.05)
    args = parser.parse_args()
    print_table(COLUMNS, (kernel_row(name, case, args) for name, case in CASES.items()),
                flush=True)

if __name__ == "__main__":
    main()
