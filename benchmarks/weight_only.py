"""Weight-only int8 / int4 against float, onnxruntime's MatMulNBits, torch and the memory
bandwidth roofline, batch 1.

    .venv/bin/python benchmarks/weight_only.py [--threads 1,2] [--repeats 7] [--min-time 0.05]
                                               [--part matvec,model,sweep,corpus]
                                               [--layers 12]
                                               [--hidden 768]

(a) matvec: y = x @ W.T for one token (what decode does per linear layer) at LLM sizes.
Contenders, interleaved per round (benchmarks/common.py): msc float (the packed float GEMM the
backend runs for a dense), msc int8 per channel and int4 g128 (the matmul_nbits kernel,
msc/backend/kernels/nbits.py), onnxruntime MatMul (float initializer) and MatMulNBits (int4
g128; int8 g128), torch F.linear (float). The roofline of each is its weight bytes (codes +
scales) / the bandwidth of a large copy (numpy copyto of 512 MB: read + write bytes).

(b) model: a Llama decoder from a config (random weights; hidden ``--hidden``, ``--layers``
layers, vocabulary 8192, seq 1: the full-sequence forward at one token, no KV cache; the
roofline counts every weight but the embedding table, of which a token reads one row) through
msc's user path
(from_torch -> quantize_weights -> to_relax -> build), float, int8 and int4-g128, against
onnxruntime on to_onnx of the same graphs (MatMulNBits for the quantized ones) and torch eager.

(c) sweep: logits SQNR and top-1 agreement of int8 and int4 g128 / g64 / g32, symmetric and
asymmetric, RTN and AWQ, on held-out token sequences (quantize_weights' report).

(d) corpus: Llama, Qwen3, Mistral, Gemma-2, GPT-2 and OPT from tests/helpers/corpus.py, int4
g32 asymmetric AWQ, on msc's backend, onnxruntime and torch (agreement), and their logits.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
# As a script, this folder is sys.path[0]; benchmarks/transformers.py would shadow the package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]
sys.path.insert(0, str(ROOT))

from benchmarks.common import best_interleaved, per_call, print_table

SHAPES = [(768, 768), (3072, 768), (768, 3072), (4096, 4096), (11008, 4096)]  # (N, K)
GROUP = 128


def copy_bandwidth(megabytes: int = 512, repeats: int = 5) -> float:
    """Bytes per second of a large numpy copy (each byte read once and written once)."""
    src = np.ones(megabytes << 18, np.float32)
    dst = np.empty_like(src)
    best = min(per_call(lambda: np.copyto(dst, src), 0.0) for _ in range(repeats))
    return 2 * src.nbytes / best


def _msc_float(w: np.ndarray):
    from msc.backend.kernels.dense import GemmRunner

    runner = GemmRunner(np.ascontiguousarray(w.T), None, False)
    return runner, lambda x, out: runner.run(x.ctypes.data, 1, out.ctypes.data)


def _msc_nbits(w: np.ndarray, bits: int, group: int | None):
    from msc.backend.kernels.nbits import NbitsWeight
    from msc.compression.weight_only import quantize_rtn

    p = quantize_rtn(w, bits, group, True)
    weight = NbitsWeight(p.q, p.scales, p.zero_points, bits, p.group, p.k)
    return p, lambda x, out: weight.run(x, out)


def _ort(model, threads: int):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return lambda x: session.run(None, {"x": x})[0]


def _ort_matmul(w: np.ndarray, threads: int):
    from onnx import helper, numpy_helper

    node = helper.make_node("MatMul", ["x", "w"], ["y"])
    graph = helper.make_graph([node], "mm", [_info("x", w.shape[1])], [_info("y", None)],
                              [numpy_helper.from_array(np.ascontiguousarray(w.T), "w")])
    return _ort(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
                threads)


def _info(name, k):
    from onnx import TensorProto, helper

    return helper.make_tensor_value_info(name, TensorProto.FLOAT, None if k is None else [1, k])


def _ort_nbits(p, threads: int):
    """MatMulNBits on the packed bytes (the codegen's row writes the same node)."""
    from onnx import helper, numpy_helper

    from msc.codegen.onnx.nbits import _packed_zeros

    inits = [numpy_helper.from_array(a, n) for a, n in (
        (p.q, "b"), (p.scales.reshape(-1), "s"), (_packed_zeros(p.zero_points, p.bits), "z"))]
    node = helper.make_node("MatMulNBits", ["x", "b", "s", "z"], ["y"], domain="com.microsoft",
                            K=p.k, N=p.n, bits=p.bits, block_size=p.group)
    graph = helper.make_graph([node], "mmnb", [_info("x", p.k)], [_info("y", None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    return _ort(model, threads)


def _contenders(w: np.ndarray, threads: int) -> tuple[dict, dict]:
    """({who: fn()}, {who: weight bytes}) for y = x @ w.T on one token."""
    import torch

    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, w.shape[1])).astype(np.float32)
    out = np.empty((1, w.shape[0]), np.float32)
    _, f32 = _msc_float(w)
    p8, i8 = _msc_nbits(w, 8, None)
    p4, i4 = _msc_nbits(w, 4, GROUP)
    q8 = _msc_nbits(w, 8, GROUP)[0]
    ort_f32, ort8, ort4 = _ort_matmul(w, threads), _ort_nbits(q8, threads), _ort_nbits(
        p4, threads)
    tw, tx = torch.from_numpy(w), torch.from_numpy(x)
    fns = {"msc f32": lambda: f32(x, out), "msc int8": lambda: i8(x, out),
           "msc int4": lambda: i4(x, out), "ort f32": lambda: ort_f32(x),
           "ort nbits8": lambda: ort8(x), "ort nbits4": lambda: ort4(x),
           "torch f32": lambda: torch.nn.functional.linear(tx, tw)}
    size = {"msc f32": w.nbytes, "msc int8": p8.nbytes, "msc int4": p4.nbytes,
            "ort f32": w.nbytes, "ort nbits8": q8.nbytes, "ort nbits4": p4.nbytes,
            "torch f32": w.nbytes}
    return fns, size


def matvec(args, threads: int, bandwidth: float) -> None:
    import torch

    from msc.backend.runtime.threads import num_threads

    torch.set_num_threads(threads)
    rng = np.random.default_rng(0)
    rows = []
    for n, k in SHAPES:
        w = (rng.standard_normal((n, k)) * 0.02).astype(np.float32)
        fns, size = _contenders(w, threads)
        with num_threads(threads), torch.no_grad():
            best = best_interleaved(fns, args.repeats, lambda fn: per_call(fn, args.min_time))
        cells = [f"{best[who] * 1e6:.0f} ({size[who] / bandwidth / best[who]:.0%})"
                 for who in fns]
        rows.append([f"{n}x{k}", *cells, f"{best['ort nbits4'] / best['msc int4']:.2f}x",
                     f"{best['msc f32'] / best['msc int4']:.2f}x"])
    print(f"\n(a) matvec, batch 1, {threads} thread(s): us per call (% of roofline)\n")
    print_table(["N x K", *fns, "int4: ort / msc", "msc: f32 / int4"], rows, flush=True)


def _llama(hidden: int, layers: int):
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    config = transformers.LlamaConfig(
        hidden_size=hidden, intermediate_size=hidden * 8 // 3 // 64 * 64,
        num_hidden_layers=layers, num_attention_heads=hidden // 64,
        num_key_value_heads=hidden // 64, vocab_size=8192, max_position_embeddings=256,
        attn_implementation="eager", use_cache=False)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()

    class Logits(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, ids):
            return self.model(input_ids=ids, return_dict=False)[0]
    return Logits().eval()


def _sessions(variants: dict, ids: np.ndarray, threads: int, folder: str) -> tuple[dict, dict]:
    """({who: fn()}, {variant: weight bytes}): msc and onnxruntime on each variant's graph."""
    import onnxruntime as ort

    from msc import relax
    from msc.codegen import to_onnx, to_relax

    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    fns, size = {}, {}
    for label, (g, w, _) in variants.items():
        ex = relax.build(to_relax(g, w, build_folder=f"{folder}/{label}"), target="llvm")
        main = relax.VirtualMachine(ex, relax.cpu())["main"]
        fns[f"msc {label}"] = lambda f=main: f(ids)
        sess = ort.InferenceSession(to_onnx(g, w).SerializeToString(), options,
                                    providers=["CPUExecutionProvider"])
        name = sess.get_inputs()[0].name
        fns[f"ort {label}"] = lambda s=sess, n=name: s.run(None, {n: ids})
        tables = {t.name for n in g.get_nodes() if n.optype == "msc.embedding"
                  for t in n.weights.values()}  # a token reads one row of these
        size[label] = sum(np.asarray(v).nbytes for k, v in w.items() if k not in tables)
    return fns, size


def model_end_to_end(args, thread_counts: list, bandwidth: float) -> None:
    import torch

    from msc.backend.runtime.threads import num_threads
    from msc.compression.weight_only import quantize_weights
    from msc.frontends import translate

    model = _llama(args.hidden, args.layers)
    ids = np.array([[17]], np.int64)
    graph, weights = translate.from_torch(model, [([1, 1], "int64")], via="export")
    rng = np.random.default_rng(1)
    calib = [rng.integers(0, 8192, (1, 1)).astype(np.int64) for _ in range(2)]
    held = [rng.integers(0, 8192, (1, 1)).astype(np.int64) for _ in range(8)]
    variants = {"f32": (graph, weights, None)}
    for label, cfg in (("int8", {"bits": 8, "group_size": None}),
                       ("int4", {"bits": 4, "group_size": GROUP})):
        variants[label] = quantize_weights(graph, weights, calib, cfg, eval_data=held)
        out = variants[label][2].output
        print(f"{label}: logits SQNR {out['sqnr_db']:.2f} dB, top-1 agreement "
              f"{out['top1_agreement']:.3f} on {out['items']} held-out tokens")
    tid = torch.from_numpy(ids)
    for threads in thread_counts:
        torch.set_num_threads(threads)
        with tempfile.TemporaryDirectory() as folder:
            fns, size = _sessions(variants, ids, threads, folder)
            fns["torch f32"] = lambda: model(tid)
            with num_threads(threads), torch.no_grad():
                best = best_interleaved(fns, args.repeats,
                                        lambda fn: per_call(fn, args.min_time))
        print(f"\n(b) Llama hidden {args.hidden} x {args.layers} layers, 1 token, {threads} "
              f"thread(s): ms per forward (% of roofline: weight bytes / bandwidth)\n")
        rows = [[who, f"{t * 1e3:.3f}", f"{size[who.split()[-1]] / bandwidth / t:.0%}",
                 f"{size[who.split()[-1]] / 1e6:.1f}"] for who, t in best.items()]
        print_table(["contender", "ms", "% roofline", "weight MB"], rows, flush=True)


SWEEP = {"int8": {"bits": 8, "group_size": None}, **{
    f"int4-g{g} {'sym' if sym else 'asym'} {m}": {"bits": 4, "group_size": g, "symmetric": sym,
                                                 "method": m}
    for g in (128, 64, 32) for sym in (True, False) for m in ("rtn", "awq")}}


def sweep(args) -> None:
    """Logits SQNR and top-1 agreement of every format, RTN against AWQ, on held-out inputs:
    the corpus' Llama and GPT-2 (tests/helpers/corpus.py, 12 tokens) and a Llama at
    ``--hidden`` x 2 layers (8 tokens)."""
    from msc.compression.weight_only import quantize_weights
    from msc.frontends import translate
    from tests.helpers.corpus import MODELS

    cases = {}
    for name in ("llama", "gpt2"):
        model, info, _ = MODELS[name]()
        cases[f"{name} (corpus)"] = (model, info, 256, 12)
    cases[f"llama h{args.hidden}x2"] = (_llama(args.hidden, 2), [([1, 8], "int64")], 8192, 8)
    rows = {key: [key] for key in SWEEP}
    for model, info, vocab, seq in cases.values():
        graph, weights = translate.from_torch(model, info, via="export")
        rng = np.random.default_rng(7)
        calib = [rng.integers(0, vocab, (1, seq)).astype(np.int64) for _ in range(8)]
        held = [rng.integers(0, vocab, (1, seq)).astype(np.int64) for _ in range(8)]
        for key, config in SWEEP.items():
            out = quantize_weights(graph, weights, calib, config, held)[2].output
            rows[key].append(f"{out['sqnr_db']:.2f} / {out['top1_agreement']:.3f}")
    print("\n(c) logits SQNR dB / top-1 agreement against float, 8 held-out sequences "
          "(calibration: 8 others)\n")
    print_table(["format", *cases], rows.values(), flush=True)


DECODERS = ("llama", "qwen3", "mistral", "gemma2", "gpt2", "opt")


def corpus(args) -> None:
    """The six decoders of the test corpus through every path, int4 g32 asymmetric AWQ: how
    far msc's backend and onnxruntime (MatMulNBits) are from torch on the same quantized
    graph (max |diff| / max |torch|), and the logits against the float model."""
    import onnxruntime as ort
    import torch

    from msc import relax
    from msc.codegen import to_onnx, to_relax, to_torch
    from msc.compression.weight_only import quantize_weights
    from msc.frontends import translate
    from tests.helpers.corpus import MODELS

    rows = []
    config = {"bits": 4, "group_size": 32, "symmetric": False, "method": "awq"}
    for name in DECODERS:
        model, info, _ = MODELS[name]()
        graph, weights = translate.from_torch(model, info)
        rng = np.random.default_rng(3)
        calib = [rng.integers(0, 256, (1, 12)).astype(np.int64) for _ in range(4)]
        held = [rng.integers(0, 256, (1, 12)).astype(np.int64) for _ in range(4)]
        qgraph, qweights, report = quantize_weights(graph, weights, calib, config, held)
        x = held[0]
        with tempfile.TemporaryDirectory() as folder:
            ex = relax.build(to_relax(qgraph, qweights, build_folder=folder + "/r"))
            ours = relax.VirtualMachine(ex, relax.cpu())["main"](x).numpy()
            with torch.no_grad():
                ref = to_torch(qgraph, qweights, build_folder=folder + "/t")(
                    torch.from_numpy(x)).numpy()
        sess = ort.InferenceSession(to_onnx(qgraph, qweights).SerializeToString(),
                                    providers=["CPUExecutionProvider"])
        theirs = sess.run(None, {sess.get_inputs()[0].name: x})[0]
        scale = float(np.abs(ref).max())
        out = report.output
        rows.append([name, qgraph.inspect()["nodes"].get("matmul_nbits", 0),
                     ex.stats["ops"].get("matmul_nbits"),
                     f"{np.abs(ours - ref).max() / scale:.1e}",
                     f"{np.abs(theirs - ref).max() / scale:.1e}",
                     f"{out['sqnr_db']:.2f}", f"{out['top1_agreement']:.3f}"])
    print("\n(d) the corpus' decoders, int4 g32 asym AWQ, every path\n")
    print_table(["model", "matmul_nbits", "msc backend", "msc vs torch", "ort vs torch",
                 "logits dB", "top-1"], rows, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", default="1,2", help="thread counts, e.g. 1,2")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--min-time", type=float, default=0.05)
    parser.add_argument("--part", default="matvec,model,sweep,corpus")
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--layers", type=int, default=12)
    args = parser.parse_args()
    start = time.perf_counter()
    bandwidth = copy_bandwidth()
    print(f"copy bandwidth: {bandwidth / 1e9:.1f} GB/s (512 MB, read + write bytes)")
    thread_counts = [int(t) for t in args.threads.split(",")]
    if "matvec" in args.part:
        for threads in thread_counts:
            matvec(args, threads, bandwidth)
    if "model" in args.part:
        model_end_to_end(args, thread_counts, bandwidth)
    if "sweep" in args.part:
        sweep(args)
    if "corpus" in args.part:
        corpus(args)
    print(f"\n({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
