"""msc's backend (relax.build + VirtualMachine) vs onnxruntime and torch: whole-model latency.

    .venv/bin/python benchmarks/backend.py [--repeats 7] [--min-time 0.2]

Every contender runs on one thread and gets the same weights as constants (ORT initializers,
torch module parameters under inference_mode). Models are built from one layer list, so the
three are the same network; outputs are checked against each other before timing. Each figure
is the best of ``--repeats`` interleaved runs of at least ``--min-time`` seconds.

``--zoo`` adds the onnx package's light model zoo (resnet50, densenet121, ...; weights are
generated constants) through frontends/onnx_api.py, against onnxruntime only (no torch
twin), and the geomean ratio over the zoo.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse
import itertools
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.gemm import timed
from msc import relax
from msc.relax import op as R

RNG = np.random.default_rng(0)


# ---------------------------------------------------------------------------------------------
# Models as layer lists: ("dense", w[K, N], b), ("conv", w[O, I, kh, kw], b, stride, pad),
# ("relu",), ("maxpool", k, stride), ("gap",) (global average pool + flatten).


def _weight(*shape):
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
    return (RNG.standard_normal(shape) * np.sqrt(2 / fan_in)).astype(np.float32)


def mlp(widths=(784, 512, 512, 10)):
    layers = []
    for k, n in itertools.pairwise(widths):
        layers += [("dense", _weight(n, k).T.copy(), _weight(n) * 0.1), ("relu",)]
    return layers[:-1]


def convnet():
    def conv(cin, cout, k, stride=1):
        return [("conv", _weight(cout, cin, k, k), _weight(cout) * 0.1, stride, k // 2),
                ("relu",)]
    return (conv(3, 32, 3, 2) + conv(32, 32, 3) + [("maxpool", 2, 2)] + conv(32, 64, 3)
            + conv(64, 64, 3) + [("maxpool", 2, 2)] + conv(64, 128, 3) + conv(128, 128, 1)
            + [("gap",), ("dense", _weight(10, 128).T.copy(), _weight(10) * 0.1)])


MODELS = {  # name: (layers, input shape)
    "mlp b1": (mlp(), (1, 784)),
    "mlp b64": (mlp(), (64, 784)),
    "convnet 1x3x112x112": (convnet(), (1, 3, 112, 112)),
    "convnet 8x3x112x112": (convnet(), (8, 3, 112, 112)),
}


# ---------------------------------------------------------------------------------------------
# The three builders.


def _msc_layer(bb, h, layer):
    kind = layer[0]
    if kind == "dense":
        h = bb.emit(R.matmul(h, relax.const(layer[1])))
        return bb.emit(R.add(h, relax.const(layer[2])))
    if kind == "conv":
        _, w, b, stride, pad = layer
        h = bb.emit(R.nn.conv2d(h, relax.const(w), strides=stride, padding=pad))
        return bb.emit(R.add(h, relax.const(b.reshape(1, -1, 1, 1))))
    if kind == "relu":
        return bb.emit(R.nn.relu(h))
    if kind == "maxpool":
        return bb.emit(R.nn.max_pool2d(h, layer[1], layer[2]))
    if kind == "gap":
        h = bb.emit(R.mean(h, axis=[2, 3]))
        return h
    raise ValueError(kind)


def build_msc(layers, shape):
    x = relax.Var("x", relax.TensorStructInfo(shape, "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            h = x
            for layer in layers:
                h = _msc_layer(bb, h, layer)
            out = bb.emit_output(h)
        bb.emit_func_output(out)
    start = time.perf_counter()
    ex = relax.build(bb.get())
    build_s = time.perf_counter() - start
    f = relax.VirtualMachine(ex, relax.cpu())["main"]
    return (lambda x: f(x).numpy()), ex, build_s


def build_onnxruntime(layers, shape):
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits, name = [], [], "x"

    def add(op, inputs, **attrs):
        out = f"t{len(nodes)}"
        nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    for i, layer in enumerate(layers):
        kind = layer[0]
        if kind in ("dense", "conv"):
            inits += [numpy_helper.from_array(layer[1], f"w{i}"),
                      numpy_helper.from_array(layer[2], f"b{i}")]
        if kind == "dense":
            name = add("Gemm", [name, f"w{i}", f"b{i}"])
        elif kind == "conv":
            k, pad = layer[1].shape[2], layer[4]
            name = add("Conv", [name, f"w{i}", f"b{i}"], kernel_shape=[k, k],
                       strides=[layer[3]] * 2, pads=[pad] * 4)
        elif kind == "relu":
            name = add("Relu", [name])
        elif kind == "maxpool":
            name = add("MaxPool", [name], kernel_shape=[layer[1]] * 2, strides=[layer[2]] * 2)
        elif kind == "gap":
            name = add("Flatten", [add("GlobalAveragePool", [name])])
    graph = helper.make_graph(
        nodes, "model", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, None)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return lambda x: session.run(None, {"x": x})[0]


def build_torch(layers, shape):
    import torch

    torch.set_num_threads(1)
    mods = []
    for layer in layers:
        kind = layer[0]
        if kind == "dense":
            lin = torch.nn.Linear(*layer[1].shape)
            lin.weight.data = torch.from_numpy(layer[1].T.copy())
            lin.bias.data = torch.from_numpy(layer[2])
            mods.append(lin)
        elif kind == "conv":
            w = layer[1]
            conv = torch.nn.Conv2d(w.shape[1], w.shape[0], w.shape[2], layer[3], layer[4])
            conv.weight.data, conv.bias.data = torch.from_numpy(w), torch.from_numpy(layer[2])
            mods.append(conv)
        elif kind == "relu":
            mods.append(torch.nn.ReLU())
        elif kind == "maxpool":
            mods.append(torch.nn.MaxPool2d(layer[1], layer[2]))
        elif kind == "gap":
            mods += [torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten()]
    model = torch.nn.Sequential(*mods).eval()

    def run(x):
        with torch.inference_mode():
            return model(torch.from_numpy(x)).numpy()
    return run


# ---------------------------------------------------------------------------------------------


ZOO = ["resnet50", "densenet121", "inception_v1", "squeezenet", "shufflenet", "bvlc_alexnet",
       "vgg19"]


def zoo_contenders(name):
    import onnx
    import onnxruntime as ort

    from frontends.onnx_api import from_onnx

    folder = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    model = onnx.load(folder / f"light_{name}.onnx")
    inits = {i.name for i in model.graph.initializer}
    data = next(i for i in model.graph.input if i.name not in inits)
    shape = [d.dim_value for d in data.type.tensor_type.shape.dim]
    mod, _ = from_onnx(model, as_msc=False)
    start = time.perf_counter()
    ex = relax.build(mod)
    build_s = time.perf_counter() - start
    f = relax.VirtualMachine(ex, relax.cpu())["main"]
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    fns = {"msc": lambda x: f(x).numpy(),
           "onnxruntime": lambda x: session.run(None, {data.name: x})[0]}
    return fns, ex, build_s, shape


def model_contenders(name):
    layers, shape = MODELS[name]
    msc_fn, ex, build_s = build_msc(layers, shape)
    fns = {"msc": msc_fn, "onnxruntime": build_onnxruntime(layers, shape),
           "torch": build_torch(layers, shape)}
    return fns, ex, build_s, shape


def measure(name, args) -> dict:
    make = zoo_contenders if name in ZOO else model_contenders
    fns, ex, build_s, shape = make(name)
    x = RNG.random(shape, dtype=np.float32)
    ref = fns["onnxruntime"](x)
    for who, fn in fns.items():
        np.testing.assert_allclose(fn(x), ref, rtol=1e-3, atol=1e-3, err_msg=who)
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(args.repeats):
        for who, fn in fns.items():
            best[who] = min(best[who], timed(lambda fn=fn: fn(x), args.min_time))
    k = ex.stats["kernels"]
    return {"seconds": best, "build": build_s,
            "kernels": f"{k['native']} native / {k['numpy']} numpy",
            "peak_mb": ex.stats["memory"].get("peak_bytes", 0) / 2 ** 20}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--min-time", type=float, default=0.2)
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    parser.add_argument("--zoo", action="store_true", help="add the onnx light model zoo")
    args = parser.parse_args()
    print("| model | msc ms | onnxruntime ms | torch ms | msc / ORT | msc / torch | kernels "
          "| build s | planned MB |")
    print("|---|---|---|---|---|---|---|---|---|")
    zoo_ratios = []
    for name in args.models + (ZOO if args.zoo else []):
        r = measure(name, args)
        s = {k: v * 1e3 for k, v in r["seconds"].items()}
        torch_ms = f"{s['torch']:.3f}" if "torch" in s else "-"
        vs_torch = f"{s['msc'] / s['torch']:.2f}x" if "torch" in s else "-"
        ratio = s["msc"] / s["onnxruntime"]
        if name in ZOO:
            zoo_ratios.append(ratio)
        print(f"| {name} | {s['msc']:.3f} | {s['onnxruntime']:.3f} | {torch_ms} | "
              f"{ratio:.2f}x | {vs_torch} | {r['kernels']} | {r['build']:.2f} | "
              f"{r['peak_mb']:.1f} |", flush=True)
    if zoo_ratios:
        geomean = float(np.exp(np.mean(np.log(zoo_ratios))))
        print(f"\nzoo geomean msc / onnxruntime: {geomean:.2f}x")


if __name__ == "__main__":
    main()
