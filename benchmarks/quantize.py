"""msc's int8 QDQ quantization vs onnxruntime's ``quantize_static``: output SQNR against float.

    .venv/bin/python benchmarks/quantize.py                 # zoo subset + transformer, minmax
    .venv/bin/python benchmarks/quantize.py --quick         # squeezenet + transformer
    .venv/bin/python benchmarks/quantize.py --methods minmax percentile entropy --all

Every model is an ONNX model that both tools read: the onnx package's light zoo with random
weights (benchmarks/common.py's copies: the shipped weights are all 0.02) and a small
transformer encoder layer built here (attention with per-head MatMuls, Softmax, LayerNorm,
GELU-free MLP). Both quantize on the same calibration batches with the same method, per-channel
symmetric int8 weights and per-tensor asymmetric uint8 activations (onnxruntime: QDQ format,
``per_channel=True``, QUInt8 / QInt8, its default op set). Then both run held-out batches: the
QDQ graph from ``compression.quantize`` on the msc backend (relax.build + VirtualMachine), the
QDQ model from onnxruntime on onnxruntime; the SQNR (dB) of each against the float model's
output (onnxruntime, float) is printed side by side, with the number of Q/DQ pairs each
inserted. msc's default placement is onnxruntime's (QDQ on the chosen ops' inputs and outputs,
the output one after a following relu, batch norms folded first); ``--placements inputs``
adds a row with QDQ on the inputs only. onnxruntime's Entropy keeps its own default of 128
signed bins (quantize_static passes no ``num_bins``), which leaves one candidate, the whole
range; msc's entropy is the same search (``entropy_bins`` 128); ``--entropy-bins 2048`` opens
it, and ``--methods entropy_trt`` runs TensorRT's |x| search (compared with onnxruntime's
Entropy).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import (
    as_logits,
    batches,
    light_model,
    print_table,
    sqnr,
    with_random_weights,
)

ZOO = ["squeezenet", "resnet50", "inception_v1", "shufflenet", "bvlc_alexnet"]
ZOO_MORE = ["densenet121", "inception_v2", "zfnet512", "vgg19"]
ORT_METHODS = {"minmax": "MinMax", "percentile": "Percentile", "entropy": "Entropy",
               "entropy_trt": "Entropy"}


# ---------------------------------------------------------------------------------------------
# Models and data.

def transformer(seq: int = 16, dim: int = 64, heads: int = 4, ff: int = 128, seed: int = 0):
    """One post-norm encoder layer in ONNX: x + attn(x) -> LN -> + MLP -> LN."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    inits, nodes = [], []

    def init(name, shape, scale=None):
        scale = np.sqrt(1 / shape[0]) if scale is None else scale
        inits.append(numpy_helper.from_array(
            (rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def node(op, inputs, out, **attrs):
        nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    def linear(x, name, din, dout):
        return node("Add", [node("MatMul", [x, init(f"{name}_w", (din, dout))], f"{name}_mm"),
                            init(f"{name}_b", (dout,), 0.1)], name)

    def split_heads(x, name):
        inits.append(numpy_helper.from_array(np.array([1, seq, heads, dim // heads]),
                                             f"{name}_shape"))
        r = node("Reshape", [x, f"{name}_shape"], f"{name}_r")
        return node("Transpose", [r], f"{name}_t", perm=[0, 2, 1, 3])

    def layer_norm(x, name):
        inits.append(numpy_helper.from_array(np.ones(dim, np.float32), f"{name}_g"))
        return node("LayerNormalization", [x, f"{name}_g", init(f"{name}_beta", (dim,), 0.1)],
                    name, axis=-1)

    q, k, v = (split_heads(linear("x", n, dim, dim), n) for n in ("q", "k", "v"))
    kt = node("Transpose", [k], "kt", perm=[0, 1, 3, 2])
    inits.append(numpy_helper.from_array(np.array(1 / np.sqrt(dim // heads), np.float32), "c"))
    scores = node("Mul", [node("MatMul", [q, kt], "qk"), "c"], "scores")
    ctx = node("MatMul", [node("Softmax", [scores], "probs", axis=-1), v], "ctx")
    inits.append(numpy_helper.from_array(np.array([1, seq, dim]), "merge_shape"))
    merged = node("Reshape", [node("Transpose", [ctx], "ctx_t", perm=[0, 2, 1, 3]),
                              "merge_shape"], "merged")
    h = layer_norm(node("Add", ["x", linear(merged, "o", dim, dim)], "res1"), "ln1")
    up = node("Relu", [linear(h, "ff1", dim, ff)], "ff1_relu")
    out = layer_norm(node("Add", [h, linear(up, "ff2", ff, dim)], "res2"), "ln2")
    graph = helper.make_graph(
        nodes, "encoder", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq, dim])],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, seq, dim])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def model_and_input(name: str):
    """(ONNX model, input name, input shape)."""
    if name == "transformer":
        model = transformer()
    else:
        from onnx import version_converter

        # QDQ with per-channel axes needs opset >= 13; the light zoo ships opset 3 to 9
        model = version_converter.convert_version(
            with_random_weights(as_logits(light_model(name))), 13)
    x = model.graph.input[0]
    return model, x.name, [d.dim_value for d in x.type.tensor_type.shape.dim]


# ---------------------------------------------------------------------------------------------
# The two contenders.

def ort_float(model, input_name: str, data: list) -> list:
    import onnxruntime as ort

    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return [sess.run(None, {input_name: x})[0] for x in data]


def ort_quantized(model, input_name: str, calib: list, held_out: list, method: str):
    import onnx
    import onnxruntime as ort
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.items = iter([{input_name: x} for x in calib])

        def get_next(self):
            return next(self.items, None)

    with tempfile.TemporaryDirectory() as folder:
        src, dst = Path(folder) / "float.onnx", Path(folder) / "qdq.onnx"
        onnx.save(model, src)
        start = time.perf_counter()
        quantize_static(src, dst, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                        calibrate_method=getattr(CalibrationMethod, ORT_METHODS[method]))
        seconds = time.perf_counter() - start
        qmodel = onnx.load(dst)
        sess = ort.InferenceSession(str(dst), providers=["CPUExecutionProvider"])
        outputs = [sess.run(None, {input_name: x})[0] for x in held_out]
    pairs = sum(n.op_type == "QuantizeLinear" for n in qmodel.graph.node)
    return outputs, pairs, seconds


def msc_quantized(model, calib: list, held_out: list, method: str, args, outputs: bool):
    from msc import relax
    from msc.codegen import to_relax
    from msc.compression.quantize import quantize
    from msc.frontends.translate import from_onnx

    graph, weights = from_onnx(model)
    start = time.perf_counter()
    qgraph, qweights, _ = quantize(graph, weights, calib,
                              {"method": method, "per_layer": False, "quantize_outputs": outputs,
                               "executor": args.executor, "report_batches": 2,
                               "bins": args.bins, "entropy_bins": args.entropy_bins})
    seconds = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as folder:
        mod = to_relax(qgraph, qweights, build_folder=folder)
    vm = relax.VirtualMachine(relax.build(mod, target="llvm"), relax.cpu())
    outputs = [vm["main"](x).numpy() for x in held_out]
    pairs = sum(n.optype == "quantize" for n in qgraph.get_nodes())
    return outputs, pairs, seconds


def rows(name: str, method: str, args) -> list[dict]:
    """One row per msc QDQ placement, each against the same onnxruntime run."""
    model, input_name, shape = model_and_input(name)
    image = name != "transformer"
    calib = batches(shape, args.calib, 1, image)
    held_out = batches(shape, args.eval, 2, image)
    ref = ort_float(model, input_name, held_out)
    ort_out, ort_pairs, ort_s = ort_quantized(model, input_name, calib, held_out, method)
    ort_db = sqnr(ref, ort_out)
    out = []
    for placement in args.placements:
        msc_out, msc_pairs, msc_s = msc_quantized(model, calib, held_out, method, args,
                                                  placement == "inputs+outputs")
        msc_db = sqnr(ref, msc_out)
        out.append({"model": name, "method": method, "msc QDQ on": placement,
                    "msc dB": f"{msc_db:.2f}", "ORT dB": f"{ort_db:.2f}",
                    "msc - ORT dB": f"{msc_db - ort_db:+.2f}", "msc Q/DQ": str(msc_pairs),
                    "ORT Q/DQ": str(ort_pairs), "msc quantize s": f"{msc_s:.1f}",
                    "ORT quantize s": f"{ort_s:.1f}"})
    return out


COLUMNS = ["model", "method", "msc QDQ on", "msc dB", "ORT dB", "msc - ORT dB", "msc Q/DQ", "ORT Q/DQ",
           "msc quantize s", "ORT quantize s"]


def print_summary(rows: list[dict]) -> None:
    diffs = [float(r["msc - ORT dB"]) for r in rows]
    if diffs:
        wins = sum(d >= 0 for d in diffs)
        print(f"\nmsc >= onnxruntime on {wins} of {len(diffs)} rows; "
              f"mean difference {np.mean(diffs):+.2f} dB")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", help=f"models (zoo: {', '.join(ZOO + ZOO_MORE)}; "
                                               f"and transformer)")
    p.add_argument("--all", action="store_true", help="every zoo model plus the transformer")
    p.add_argument("--quick", action="store_true", help="squeezenet and the transformer only")
    p.add_argument("--methods", nargs="+", default=["minmax"], choices=list(ORT_METHODS))
    p.add_argument("--calib", type=int, default=8, help="calibration batches (default 8)")
    p.add_argument("--eval", type=int, default=4, help="held-out batches (default 4)")
    p.add_argument("--placements", nargs="+", default=["inputs+outputs"],
                   choices=["inputs", "inputs+outputs"],
                   help="where msc puts QDQ: the chosen ops' inputs and outputs (its default, "
                        "onnxruntime's placement) or their inputs only; one row each")
    p.add_argument("--bins", type=int, default=2048,
                   help="msc's |x| histogram bins per sign (percentile, entropy_trt)")
    p.add_argument("--entropy-bins", type=int, default=128,
                   help="msc's signed bins for entropy (128: onnxruntime's default, one "
                        "candidate; 2048: a KL search over 961 windows)")
    p.add_argument("--executor", default="torch", choices=["torch", "relax"],
                   help="what runs msc's float graph during calibration (default torch)")
    return p.parse_args(argv)


def main() -> None:
    args = parse_args()
    models = args.models or (["squeezenet", "transformer"] if args.quick else
                             ZOO + ZOO_MORE + ["transformer"] if args.all else
                             ZOO + ["transformer"])
    table = []

    def cells():
        for name in models:
            for method in args.methods:
                for r in rows(name, method, args):
                    table.append(r)
                    yield [r[c] for c in COLUMNS]
    print_table(COLUMNS, cells(), flush=True)
    print_summary(table)


if __name__ == "__main__":
    main()
