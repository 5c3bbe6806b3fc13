"""The prim funcs the search benchmarks tune: the issue's three (``matmul512``, ``conv3x3``:
resnet50's res2 conv, ``softmax``), smaller twins for a loaded machine, and a training pool
of other shapes of work (a batch matmul, a depthwise conv, a layer norm, a dense with bias and
relu) so a cost model has more than two other workloads to learn what carries over.

Each is the function a user's model gives the tuner: the legalized Relax op (LegalizeOps'
TIR), or a TVMScript prim func as written in the lessons::

    funcs = dict(load_workloads(["matmul256", "softmax"]))
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

DENSE_BIAS_RELU = '''
@T.prim_func
def dense(X: T.Buffer((64, 256), "float32"), W: T.Buffer((128, 256), "float32"),
          B: T.Buffer((128,), "float32"), Z: T.Buffer((64, 128), "float32")):
    T.func_attr({"tir.noalias": True})
    Y = T.alloc_buffer((64, 128), "float32")
    for i, j, k in T.grid(64, 128, 256):
        with T.block("Y"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                Y[vi, vj] = T.float32(0)
            Y[vi, vj] = Y[vi, vj] + X[vi, vk] * W[vj, vk]
    for i, j in T.grid(64, 128):
        with T.block("Z"):
            vi, vj = T.axis.remap("SS", [i, j])
            Z[vi, vj] = T.max(Y[vi, vj] + B[vj], T.float32(0))
'''


def legalized(build, *shapes):
    """The prim func LegalizeOps makes of ``build(*vars)`` on float32 inputs of ``shapes``."""
    from msc import relax

    params = [relax.Var(f"x{k}", relax.TensorStructInfo(s, "float32"))
              for k, s in enumerate(shapes)]
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            gv = bb.emit_output(build(*params))
        bb.emit_func_output(gv)
    mod = relax.transform.LegalizeOps()(bb.get())
    return next(mod[g] for g in mod.get_global_vars() if g.name_hint != "main")


def softmax():
    """The legalized softmax of a (256, 1024) tensor (max, exp, sum, divide blocks)."""
    from msc.relax import op as R

    return legalized(lambda x: R.nn.softmax(x, axis=-1), (256, 1024))


def matmul256():
    from tune import MATMUL

    from msc.tir.parser import parse_tir_text

    return parse_tir_text(MATMUL.replace("512", "256"))["matmul"]


def conv_small():
    """A 3x3 conv of 32 channels on 28x28 (pad 1): the resnet conv's loop structure at 1/16
    of its work."""
    from tune import conv_func

    return conv_func(32, 28)[0]


def batch_matmul():
    from msc.relax import op as R

    return legalized(R.matmul, (8, 64, 128), (8, 128, 64))


def depthwise_conv():
    """A 3x3 depthwise conv (pad 1) of 64 channels on 28x28, as in MobileNet blocks."""
    from msc.relax import op as R

    return legalized(lambda x, w: R.nn.conv2d(x, w, padding=(1, 1), groups=64),
                     (1, 64, 28, 28), (64, 1, 3, 3))


def layer_norm():
    from msc.relax import op as R

    return legalized(lambda x, g, b: R.nn.layer_norm(x, g, b, axes=[-1]),
                     (128, 768), (768,), (768,))


def dense_bias_relu():
    from msc.tir.parser import parse_tir_text

    return parse_tir_text(DENSE_BIAS_RELU)["dense"]


BUILDERS = {"softmax": softmax, "matmul256": matmul256, "conv3x3_small": conv_small,
            "batch_matmul": batch_matmul, "depthwise_conv": depthwise_conv,
            "layer_norm": layer_norm, "dense_bias_relu": dense_bias_relu}
POOL = ("batch_matmul", "depthwise_conv", "layer_norm", "dense_bias_relu")


def load_workloads(names: list) -> list:
    """(name, prim func) in the order of ``names``: the builders here, the rest from
    benchmarks/tune.py (``matmul512``, ``conv3x3``, ``linear0``)."""
    from tune import workloads

    out = {n: f for n, f, _ in workloads([n for n in names if n not in BUILDERS])}
    return [(n, out[n] if n in out else BUILDERS[n]()) for n in names]
