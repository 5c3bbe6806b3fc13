"""Regenerate the golden TVM 0.27 texts in this folder (data for tests/tir/ and tests/backend/).

Run with the venv's TVM: ``.venv/bin/python tests/tir/data/gen_golden.py``. Each legalize case
is a tiny Relax module run through ``relax.transform.LegalizeOps``; each ``script_*`` case is a
hand-written TVMScript prim func that TVM parses and re-prints in its own style.
"""

from __future__ import annotations

import pathlib

import tvm
from tvm import relax

HERE = pathlib.Path(__file__).parent
F32 = "float32"


def _module(params, body):
    bb = relax.BlockBuilder()
    args = [relax.Var(name, relax.TensorType(shape, dtype)) for name, shape, dtype in params]
    with bb.function("main", args):
        with bb.dataflow():
            out = bb.emit_output(bb.emit(body(*args)))
        bb.emit_func_output(out)
    return bb.get()


def _legalize_cases():
    n, m = tvm.tirx.Var("n", "int64"), tvm.tirx.Var("m", "int64")
    op = relax.op
    return {
        "add": ([("x", (2, 3), F32), ("y", (1, 3), F32)], op.add),
        "matmul": ([("x", (2, 4), F32), ("y", (4, 3), F32)], op.matmul),
        "conv2d": ([("x", (1, 2, 5, 5), F32), ("w", (3, 2, 3, 3), F32)],
                   lambda x, w: op.nn.conv2d(x, w, strides=1, padding=1)),
        "reshape": ([("x", (2, 3, 4), F32)], lambda x: op.reshape(x, (6, 4))),
        "sum": ([("x", (2, 3, 4), F32)], lambda x: op.sum(x, axis=[1])),
        "softmax": ([("x", (2, 5), F32)], lambda x: op.nn.softmax(x, axis=-1)),
        "strided_slice": ([("x", (4, 6), F32)], lambda x: op.strided_slice(
            x, axes=[0, 1], begin=[1, 0], end=[4, 6], strides=[2, 3])),
        "dyn_add": ([("x", (n, 3), F32), ("y", (n, 3), F32)], op.add),
        "dyn_matmul": ([("x", (n, 4), F32), ("y", (4, m), F32)], op.matmul),
        "dyn_softmax": ([("x", (n, m), F32)], lambda x: op.nn.softmax(x, axis=-1)),
        "dyn_reshape": ([("x", (n, 4), F32)], lambda x: op.reshape(x, (n * 2, 2))),
        "dyn_strided_slice": ([("x", (n, 6), F32)], lambda x: op.strided_slice(
            x, axes=[1], begin=[1], end=[5], strides=[2])),
        "relu": ([("x", (2, 3), F32)], op.nn.relu),
        "sigmoid": ([("x", (2, 3), F32)], op.sigmoid),
        "tanh": ([("x", (2, 3), F32)], op.tanh),
        "sqrt": ([("x", (2, 3), F32)], op.sqrt),
        "erf": ([("x", (2, 3), F32)], op.erf),
        "gelu": ([("x", (2, 3), F32)], op.nn.gelu),
        "mean": ([("x", (2, 3, 4), F32)], lambda x: op.mean(x, axis=[0, 2], keepdims=True)),
        "max": ([("x", (2, 3), F32)], lambda x: op.max(x, axis=[1])),
        "argmax": ([("x", (2, 3), F32)], lambda x: op.argmax(x, axis=1)),
        "transpose": ([("x", (2, 3, 4), F32)], lambda x: op.permute_dims(x, [2, 0, 1])),
        "concat": ([("x", (2, 3), F32), ("y", (2, 2), F32)],
                   lambda x, y: op.concat([x, y], axis=1)),
        "astype": ([("x", (2, 3), F32)], lambda x: op.astype(x, "int32")),
        "where": ([("c", (2, 3), "bool"), ("x", (2, 3), F32), ("y", (2, 3), F32)], op.where),
        "less": ([("x", (2, 3), F32), ("y", (2, 3), F32)], op.less),
        "divide": ([("x", (2, 3), F32), ("y", (2, 3), F32)], op.divide),
        "power": ([("x", (2, 3), F32), ("y", (2, 3), F32)], op.power),
        "floor_divide_int": ([("x", (2, 3), "int32"), ("y", (2, 3), "int32")],
                             op.floor_divide),
        "clip": ([("x", (2, 3), F32)], lambda x: op.clip(x, 0.0, 6.0)),
        "max_pool2d": ([("x", (1, 1, 4, 4), F32)],
                       lambda x: op.nn.max_pool2d(x, pool_size=2, strides=2)),
        "avg_pool2d": ([("x", (1, 1, 4, 4), F32)],
                       lambda x: op.nn.avg_pool2d(x, pool_size=3, strides=1, padding=1)),
        "layer_norm": ([("x", (2, 4), F32), ("g", (4,), F32), ("b", (4,), F32)],
                       lambda x, g, b: op.nn.layer_norm(x, g, b, axes=[-1])),
        "take": ([("x", (4, 3), F32), ("i", (2,), "int64")],
                 lambda x, i: op.take(x, i, axis=0)),
        "resize2d": ([("x", (1, 1, 2, 2), F32)], lambda x: op.image.resize2d(
            x, (4, 4), method="nearest_neighbor")),
        "full": ([("x", (2, 3), F32)],
                 lambda x: op.add(x, op.full((2, 3), relax.const(1.5, F32)))),
        **_more_cases(n),
    }


def _more_cases(n):
    op = relax.op
    x23 = [("x", (2, 3), F32)]
    return {
        "adaptive_avg_pool2d": ([("x", (1, 2, 5, 5), F32)],
                                lambda x: op.nn.adaptive_avg_pool2d(x, (2, 2))),
        "pad": (x23, lambda x: op.nn.pad(x, [1, 1, 0, 2])),
        "resize_linear": ([("x", (1, 1, 2, 2), F32)],
                          lambda x: op.image.resize2d(x, (3, 5), method="linear")),
        "log_softmax": ([("x", (2, 5), F32)], op.nn.log_softmax),
        "split": ([("x", (4, 6), F32)], lambda x: op.split(x, 3, axis=1)),
        "tile": (x23, lambda x: op.tile(x, (2, 1))),
        "repeat": (x23, lambda x: op.repeat(x, 2, axis=1)),
        "flip": (x23, lambda x: op.flip(x, axis=1)),
        "broadcast_to": ([("x", (1, 3), F32)], lambda x: op.broadcast_to(x, (4, 3))),
        "triu": ([("x", (3, 3), F32)], lambda x: op.triu(x, 1)),
        "einsum": ([("x", (2, 3), F32), ("y", (3, 4), F32)],
                   lambda x, y: op.einsum([x, y], "ij,jk->ik")),
        "dyn_sum": ([("x", (n, 4), F32)], lambda x: op.sum(x, axis=[0])),
        "dyn_mean": ([("x", (n, 4), F32)], lambda x: op.mean(x, axis=[0])),
        "dyn_conv2d": ([("x", (n, 2, 4, 4), F32), ("w", (3, 2, 3, 3), F32)], op.nn.conv2d),
        "variance": (x23, lambda x: op.variance(x, axis=[1])),
        "conv2d_transpose": ([("x", (1, 2, 3, 3), F32), ("w", (2, 3, 3, 3), F32)],
                             lambda x, w: op.nn.conv2d_transpose(x, w, strides=2)),
        "attention": ([(name, (1, 2, 1, 4), F32) for name in "qkv"], op.nn.attention),
        "scatter_elements": ([("x", (3, 3), F32), ("i", (2, 3), "int64"), ("u", (2, 3), F32)],
                             op.scatter_elements),
        "gather_nd": ([("x", (3, 3), F32), ("i", (2, 2), "int64")], op.gather_nd),
        "min_int8": ([("x", (2, 3), "int8")], lambda x: op.min(x, axis=[1])),
        "bitwise": ([("x", (2, 3), "int32"), ("y", (2, 3), "int32")],
                    lambda x, y: op.bitwise_xor(op.left_shift(x, y), op.bitwise_not(y))),
        "isnan": (x23, op.isnan),
        "mod": ([("x", (2, 3), F32), ("y", (2, 3), F32)], op.mod),
        "logical": ([("x", (2, 3), "bool"), ("y", (2, 3), "bool")],
                    lambda x, y: op.logical_and(x, op.logical_not(y))),
        "float16_exp": ([("x", (2, 3), "float16")], lambda x: op.astype(op.exp(x), F32)),
        "prelu": ([("x", (1, 3, 2), F32), ("a", (3,), F32)], op.nn.prelu),
        "leakyrelu": (x23, lambda x: op.nn.leakyrelu(x, 0.1)),
        "silu": (x23, op.nn.silu),
        "rms_norm": ([("x", (2, 4), F32), ("g", (4,), F32)],
                     lambda x, g: op.nn.rms_norm(x, g, axes=[-1])),
        "round": (x23, op.round),
        "rsqrt": (x23, op.rsqrt),
        "square": (x23, op.square),
        "batch_norm": ([("x", (1, 2, 2, 2), F32)] + [(k, (2,), F32) for k in ("g", "b", "mu", "va")],
                       lambda x, g, b, mu, va: op.nn.batch_norm(x, g, b, mu, va, axis=1)),
    }


SCRIPTS = {
    "script_loops": '''
@T.prim_func
def loops(a: T.handle, b: T.Buffer((8,), "float32"), c: T.Buffer((8,), "int32")):
    T.func_attr({"global_symbol": "loops", "tir.noalias": True, "note": "x", "n": 3})
    A = T.match_buffer(a, (8,), "float32")
    tmp = T.alloc_buffer((8,), "float32")
    for i in T.serial(8):
        tmp[i] = A[i] * T.float32(2)
    for i in T.parallel(8):
        b[i] = tmp[i]
    for i in T.vectorized(4):
        b[i] = b[i] + T.float32(0.5)
    for i in T.unroll(2, 6):
        if i > 3:
            b[i] = T.float32(0.25)
        else:
            b[i] = T.float32(-0.25)
    for i in T.serial(8, annotations={"pragma_unroll_explicit": 1}):
        y: T.int32 = i * 2 + 1
        c[i] = T.shift_left(y, 1) + T.bitwise_and(y, 3) + (y | 2) + (y ^ 1) + (y >> 1)
    for i in range(1, 8):
        for j in range(i):
            c[i] = c[i] + T.truncdiv(c[j], 2) + T.truncmod(c[j], 3) + T.min(c[j], 1)
    c[0] = T.Select(not (c[1] > 1) and c[2] != 2, c[3] * -1, -c[4])
    c[1] = T.if_then_else(c[0] >= 0 or c[2] < 3, c[5] // 2 + c[6] % 3, c[7])
    T.evaluate(T.call_extern("int32", "msc_debug", c[0], 1))
    b[0] = T.exp(b[1]) + T.log(b[2]) + T.sqrt(b[3]) + T.fabs(b[4]) + T.floor(b[5])
    b[1] = T.Cast("float32", c[1]) / T.float32(3) - (b[2] - b[3]) * (b[4] + b[5])
    while c[0] > 100:
        c[0] = c[0] - 1
''',
    "script_symbolic": '''
@T.prim_func
def symbolic(a: T.handle, b: T.handle, k: T.int32):
    m = T.int32()
    A = T.match_buffer(a, (m, 4), "float32")
    B = T.match_buffer(b, (m, 4), "float32")
    for i, j in T.grid(m, 4):
        B[i, j] = A[i, j] + T.Cast("float32", k)
''',
    "script_blocks": '''
@T.prim_func(s_tir=True)
def blocks(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4,), "float32"),
           C: T.Buffer((4, 4), "float32")):
    for i, j in T.grid(4, 4):
        with T.sblock("rowsum"):
            vi = T.axis.spatial(4, i)
            vj = T.axis.reduce(4, j)
            T.where(i < 3)
            T.reads(A[vi, 0:4])
            T.writes(B[vi])
            T.sblock_attr({"meta": 1})
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vj]
    for i in range(4):
        with T.sblock("copy"):
            vi = T.axis.spatial(4, i)
            vj = T.axis.spatial((1, 3), i)
            T.reads()
            T.writes()
            C[vi, vj] = A[vi, vj]
''',
}


def main() -> None:
    for name, (params, body) in _legalize_cases().items():
        text = relax.transform.LegalizeOps()(_module(params, body)).script()
        (HERE / f"legalize_{name}.tvmscript").write_text(text)
    for name, source in SCRIPTS.items():
        text = tvm.script.from_source(source.strip()).script()
        (HERE / f"{name}.tvmscript").write_text(text)


if __name__ == "__main__":
    main()
