"""int8 on msc's backend vs float, and vs onnxruntime on the same QDQ model, in one run.

    .venv/bin/python benchmarks/int8.py                    # resnet50 + BERT-base, 1 and 2 threads
    .venv/bin/python benchmarks/int8.py --models resnet50 --threads 1 --repeats 3
    .venv/bin/python benchmarks/int8.py --quick            # small shapes, a smoke run
    .venv/bin/python benchmarks/int8.py --before           # + the QDQ model built without the
                                                           #   QDQ pass (fake quantization)
    .venv/bin/python benchmarks/int8.py --zoo              # the light zoo + BERT-base + GPT-2,
                                                           #   geomeans per thread count
    .venv/bin/python benchmarks/int8.py --models shufflenet --threads 1 --profile

``--zoo``: every light-zoo model (benchmarks/quantize.py's ZOO and ZOO_MORE, random weights,
those that do not import are reported and skipped), the BERT-base encoder below and GPT-2 (124M,
benchmarks/transformers.py's random-weight Hugging Face model exported by torch.onnx, sequence
128, calibrated on random token ids), then the geomean of msc int8 / onnxruntime int8 and of
msc float / msc int8 per thread count. "unfolded" counts the dequantize calls left in msc's
int8 build (QDQ nodes computed as fake quantization in float); ``--profile`` prints msc int8's
slowest joints (``vm.profile``) and onnxruntime's slowest node types (its own profiler).

Models (random weights, no downloads): resnet50 from the onnx package's light zoo (weights
randomized as in benchmarks/quantize.py: the shipped ones are all 0.02), and a BERT-base-sized
encoder built here in ONNX (12 post-norm layers, hidden 768, 12 heads, MLP 3072 with ReLU,
sequence 128, batch 1). Each is quantized once by onnxruntime's ``quantize_static`` (QDQ
format, per-channel int8 weights, uint8 activations, MinMax on 4 calibration batches) after
its recommended ``quant_pre_process`` (which folds BatchNormalization into Conv); the
same QDQ model then runs on onnxruntime and, imported with ``from_onnx``, on msc, where
``relax.build`` folds its QDQ convs / matmuls into int8 kernels (ex.stats["fused"]).

Columns: the fastest single call per contender (rounds of at least ``--min-time`` s each,
interleaved, so load from other sessions hits all alike; a chunk's mean would count other
processes' time), msc int8 speed-up over msc float, msc int8 / onnxruntime int8, and the SQNR (dB)
of both int8 outputs against the float model's (onnxruntime float) on held-out inputs.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
# benchmarks/transformers.py would shadow the transformers package GPT-2 comes from
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]
sys.path.insert(0, str(ROOT))

from benchmarks.common import (
    batches,
    best_call_seconds,
    msc_executable,
    msc_runner,
    ort_qdq,
    ort_session,
    print_table,
    sqnr,
)
from benchmarks.quantize import ZOO, ZOO_MORE
from msc.progress import progress


def bert(layers: int = 12, seq: int = 128, dim: int = 768, heads: int = 12, ff: int = 3072,
         seed: int = 0):
    """A BERT-base-sized post-norm encoder in ONNX (opset 17): per layer, Q/K/V/O linears,
    per-head attention, LayerNorm, ReLU MLP, LayerNorm."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    inits, nodes = [], []

    def const(name, array):
        inits.append(numpy_helper.from_array(array, name))
        return name

    def init(name, shape, scale=None):
        scale = np.sqrt(1 / shape[0]) if scale is None else scale
        return const(name, (rng.standard_normal(shape) * scale).astype(np.float32))

    def node(op, inputs, out, **attrs):
        nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    def linear(x, name, din, dout):
        mm = node("MatMul", [x, init(f"{name}_w", (din, dout))], f"{name}_mm")
        return node("Add", [mm, init(f"{name}_b", (dout,), 0.1)], name)

    const("heads_shape", np.array([1, seq, heads, dim // heads]))
    const("merge_shape", np.array([1, seq, dim]))
    const("c", np.array(1 / np.sqrt(dim // heads), np.float32))

    def layer(x, p):
        q, k, v = (node("Transpose", [node("Reshape", [linear(x, f"{p}{n}", dim, dim),
                                                       "heads_shape"], f"{p}{n}_r")],
                        f"{p}{n}_t", perm=[0, 2, 1, 3]) for n in "qkv")
        kt = node("Transpose", [k], f"{p}kt", perm=[0, 1, 3, 2])
        scores = node("Mul", [node("MatMul", [q, kt], f"{p}qk"), "c"], f"{p}scores")
        ctx = node("MatMul", [node("Softmax", [scores], f"{p}probs", axis=-1), v], f"{p}ctx")
        merged = node("Reshape", [node("Transpose", [ctx], f"{p}ctx_t", perm=[0, 2, 1, 3]),
                                  "merge_shape"], f"{p}merged")
        h = norm(node("Add", [x, linear(merged, f"{p}o", dim, dim)], f"{p}res1"), f"{p}ln1")
        up = node("Relu", [linear(h, f"{p}ff1", dim, ff)], f"{p}ff1_relu")
        return norm(node("Add", [h, linear(up, f"{p}ff2", ff, dim)], f"{p}res2"), f"{p}ln2")

    def norm(x, name):
        const(f"{name}_g", np.ones(dim, np.float32))
        return node("LayerNormalization", [x, f"{name}_g", init(f"{name}_beta", (dim,), 0.1)],
                    name, axis=-1)

    x = "x"
    for i in range(layers):
        x = layer(x, f"l{i}_")
    graph = helper.make_graph(
        nodes, "bert", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq, dim])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, seq, dim])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def gpt2(quick: bool):
    """(GPT-2 ONNX model, input ids shape): benchmarks/transformers.py's random-weight model
    and its cached torch.onnx export (``quick``: 2 layers, hidden 32)."""
    import onnx
    import transformers

    from benchmarks import transformers as bench

    transformers.logging.set_verbosity_error()
    model = bench.make_model(bench.configs(transformers, quick)["gpt2"])
    ids = bench.input_ids(model)
    return onnx.load(bench.onnx_file("gpt2" + ("-tiny" if quick else ""), model, ids)), ids


def model_and_input(name: str, quick: bool):
    if name == "gpt2":
        model, ids = gpt2(quick)
        return model, list(ids.shape)
    if name == "bert":
        model = bert(layers=2, seq=32, dim=128, heads=4, ff=512) if quick else bert()
        return model, [int(d.dim_value) for d in model.graph.input[0].type.tensor_type.shape.dim]
    from benchmarks.quantize import model_and_input as zoo

    model, _, shape = zoo(name)
    return model, shape


def preprocessed(model):
    """onnxruntime's recommended pre-processing (``quant_pre_process``: shape inference and
    its graph optimizations, e.g. BatchNormalization folded into Conv), the float model that
    both the float and the int8 contenders then run."""
    import onnx
    from onnxruntime.quantization.shape_inference import quant_pre_process

    with tempfile.TemporaryDirectory() as folder:
        src, dst = Path(folder) / "float.onnx", Path(folder) / "pre.onnx"
        onnx.save(model, src)
        quant_pre_process(str(src), str(dst), skip_symbolic_shape=True)
        return onnx.load(dst)


def print_profiles(name: str, ex, qmodel, x, top: int = 12) -> None:
    """msc int8's slowest joints and onnxruntime int8's slowest node types, one thread."""
    import json

    import onnxruntime as ort

    from msc import relax

    vm = relax.VirtualMachine(ex, relax.cpu(), num_threads=1)
    report = vm.profile(x)
    print(f"\n{name}: msc int8 per joint (1 thread)")
    print("\n".join(report.table().splitlines()[:top + 3]))
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.enable_profiling = 1, True
    with tempfile.TemporaryDirectory() as folder:
        options.profile_file_prefix = str(Path(folder) / "ort")
        session = ort.InferenceSession(qmodel.SerializeToString(), options,
                                       providers=["CPUExecutionProvider"])
        for _ in range(3):
            session.run(None, {session.get_inputs()[0].name: x})
        events = json.loads(Path(session.end_profiling()).read_text())
    per_op: dict = {}
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            op = e.get("args", {}).get("op_name", "?")
            per_op[op] = per_op.get(op, 0) + e["dur"] / 3e3
    print(f"{name}: onnxruntime int8 per op type (1 thread, ms)")
    for op, ms in sorted(per_op.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {op:24s} {ms:8.2f}")


def inputs(name: str, shape: list, count: int, seed: int) -> list[np.ndarray]:
    """Images in [0, 1), BERT's hidden states N(0, 1), GPT-2's token ids."""
    if name == "gpt2":
        rng = np.random.default_rng(seed)
        return [rng.integers(0, 100, shape, dtype=np.int64) for _ in range(count)]
    return batches(shape, count, seed, name != "bert")


def rows(name: str, args) -> list[dict]:
    model, shape = model_and_input(name, args.quick)
    model = preprocessed(model)
    calib, held_out = inputs(name, shape, 4, 1), inputs(name, shape, args.eval, 2)
    qmodel = ort_qdq(model, model.graph.input[0].name, calib)
    ex_f, ex_q = msc_executable(model), msc_executable(qmodel)
    ex_fake = msc_executable(qmodel, fold=False) if args.before else None
    folded = sum(ex_q.stats["fused"].get(k, 0) for k in ex_q.stats["fused"] if k[:4] == "qdq:")
    unfolded = sum(ex_q.stats["ops"].get("dequantize", {}).values())
    if args.profile:
        print_profiles(name, ex_q, qmodel, held_out[0])
    ref = [ort_session(model, 1)(x) for x in held_out]
    db = {"msc": sqnr(ref, [msc_runner(ex_q, 1)(x) for x in held_out]),
          "ort": sqnr(ref, [ort_session(qmodel, 1)(x) for x in held_out])}
    out = []
    for threads in args.threads:
        x = held_out[0]
        fns = {"msc f32": msc_runner(ex_f, threads), "msc int8": msc_runner(ex_q, threads),
               "ORT f32": ort_session(model, threads), "ORT int8": ort_session(qmodel, threads)}
        if ex_fake is not None:
            fns["msc QDQ unfolded"] = msc_runner(ex_fake, threads)
        best = best_call_seconds({k: (lambda f=f, x=x: f(x)) for k, f in fns.items()},
                                 args.repeats, args.min_time)
        ms = {k: v * 1e3 for k, v in best.items()}
        out.append({"model": name, "threads": str(threads),
                    **{k: f"{v:.2f}" for k, v in ms.items()},
                    "msc f32/int8": f"{ms['msc f32'] / ms['msc int8']:.2f}x",
                    "msc int8/ORT int8": f"{ms['msc int8'] / ms['ORT int8']:.2f}",
                    "msc f32/ORT f32": f"{ms['msc f32'] / ms['ORT f32']:.2f}",
                    "SQNR msc dB": f"{db['msc']:.2f}", "SQNR ORT dB": f"{db['ort']:.2f}",
                    "folded": str(folded), "unfolded": str(unfolded)})
        if ex_fake is not None:
            out[-1]["before: QDQ unfolded / int8"] = (
                f"{ms['msc QDQ unfolded'] / ms['msc int8']:.2f}x")
    return out


def print_rows(table: list[dict]) -> None:
    cols = list(table[0])
    print_table(cols, ([row[c] for c in cols] for row in table))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["resnet50", "bert"])
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--min-time", type=float, default=0.3)
    parser.add_argument("--eval", type=int, default=4, help="held-out inputs for the SQNR")
    parser.add_argument("--quick", action="store_true", help="a 2-layer small BERT / GPT-2")
    parser.add_argument("--zoo", action="store_true",
                        help="the light zoo + BERT-base + GPT-2 and the geomeans")
    parser.add_argument("--profile", action="store_true",
                        help="msc int8 and onnxruntime int8 per-op profiles (1 thread)")
    parser.add_argument("--before", action="store_true",
                        help="also time the QDQ model built without the QDQ pass (as before it)")
    args = parser.parse_args(argv)
    names = ZOO + ZOO_MORE + ["bert", "gpt2"] if args.zoo else args.models
    table = []
    for name in progress(names, desc="models"):
        try:
            done = rows(name, args)
            table += done
            for row in done:  # as it goes: a zoo run takes a while
                print(" | ".join(f"{k} {v}" for k, v in row.items()), file=sys.stderr, flush=True)
        except Exception as err:  # a zoo model msc or onnxruntime cannot import: say so
            if not args.zoo:
                raise
            print(f"{name}: skipped ({type(err).__name__}: {str(err)[:200]})", file=sys.stderr)
    print(f"load: {os.getloadavg()[0]:.2f} (1 min)")
    print_rows(table)
    print_geomeans(table)


def print_geomeans(table: list[dict]) -> None:
    for threads in sorted({r["threads"] for r in table}):
        sel = [r for r in table if r["threads"] == threads]
        ratio = np.exp(np.mean([np.log(float(r["msc int8/ORT int8"])) for r in sel]))
        speed = np.exp(np.mean([np.log(float(r["msc f32/int8"][:-1])) for r in sel]))
        print(f"geomean {threads} thread(s) over {len(sel)} models: msc int8 / onnxruntime int8 "
              f"{ratio:.2f}, msc float / msc int8 {speed:.2f}x")


if __name__ == "__main__":
    main()
