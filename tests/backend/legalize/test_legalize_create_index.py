"""Legalized creation ops (full, ones, zeros, *_like, tril, triu, arange, eye), indexing and
scans (gather_elements, gather_nd, one_hot, cumsum, cumprod, collapse_sum_*), quantize /
dequantize and msc's fused ops, against the numpy reference and the TIR interpreter."""

from __future__ import annotations

import numpy as np
import pytest

from msc.backend.legalize.testing import check_call, check_op
from msc.relax.block_builder import BlockBuilder
from msc.relax.expr import Var
from msc.relax.op.registry import make_call
from msc.relax.struct_info import TensorStructInfo

RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 3, 4)).astype("float32")


def _var(name, a):
    return Var(name, TensorStructInfo(a.shape, str(a.dtype)))


def _call(op, *args, **attrs):
    return BlockBuilder().normalize(make_call(op, *args, **attrs))


@pytest.mark.parametrize("dtype", ["float32", "int32", "float16"])
def test_full_ones_zeros(dtype):
    fill = np.array(2.5, "float32")
    check_call(_call("full", (2, 3), _var("v", fill), dtype=dtype), [fill])
    check_call(_call("ones", (3, 2), dtype), [])
    check_call(_call("zeros", (4,), dtype), [])
    x = X.astype(dtype)
    check_op("full_like", [x, fill], dtype=dtype)
    check_op("ones_like", [x])
    check_op("zeros_like", [x])


@pytest.mark.parametrize("op", ["tril", "triu"])
@pytest.mark.parametrize("k", [0, 1, -2])
def test_tril_triu(op, k):
    check_op(op, [X], k)


@pytest.mark.parametrize("start, end, step, dtype", [(0, 5, 1, "int64"), (1, 10, 3, "int32"),
                                                     (0.5, 3.0, 0.25, "float32"),
                                                     (5, -3, -2, "int64")])
def test_arange(start, end, step, dtype):
    check_call(_call("arange", start, end, step, dtype=dtype), [])


@pytest.mark.parametrize("k", [0, 1, -1])
def test_eye(k):
    check_call(_call("eye", 3, 4, k, dtype="float32"), [])
    check_op("eye_like", [X[0]], k)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_elements(axis):
    n = X.shape[axis]
    shape = list(X.shape)
    shape[axis] = 2
    idx = RNG.integers(-n, n, shape).astype("int64")
    check_op("gather_elements", [X, idx], axis)


def _gather_nd(data, indices, batch):
    """TVM's gather_nd (index tuples along the last axis of ``indices``)."""
    if batch:
        return np.stack([_gather_nd(d, i, batch - 1) for d, i in zip(data, indices)])
    return data[tuple(np.moveaxis(indices, -1, 0))]


@pytest.mark.parametrize("batch_dims, idx_shape", [(0, (5, 2)), (0, (2, 2, 3)), (1, (2, 3, 1))])
def test_gather_nd(batch_dims, idx_shape):
    """msc's numpy fact reads index tuples along the first axis, unlike the op's inference
    and TVM; compared with TVM's semantics and the TIR interpreter instead."""
    from msc.backend.legalize import legalize_call
    from msc.backend.legalize.testing import assert_close, build_call, kernel_jit
    from msc.backend.lowering.compile import compile_prim_func
    from msc.tir.interp import run_prim_func

    m = idx_shape[-1]
    bound = X.shape[batch_dims:batch_dims + m]
    idx = np.stack([RNG.integers(-bound[j], bound[j], idx_shape[:-1]) for j in range(m)],
                   -1).astype("int64")
    func = legalize_call(build_call("gather_nd", [X, idx], batch_dims))
    got = compile_prim_func(func, jit=kernel_jit())(X, idx)
    assert_close(got, _gather_nd(X, idx, batch_dims), "float32")
    assert_close(got, run_prim_func(func, X, idx), "float32")


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_one_hot(axis):
    idx = np.array([[0, 2], [3, 1]], "int32")
    check_call(_call("one_hot", _var("i", idx), 1.0, 0.0, 4, axis), [idx])


@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
@pytest.mark.parametrize("axis", [0, 1, -1, None])
@pytest.mark.parametrize("exclusive", [False, True])
def test_scans(op, axis, exclusive):
    check_op(op, [X], axis, exclusive=exclusive, scale=5)


@pytest.mark.parametrize("target", [(3, 4), (1, 4), (2, 1, 4), (3, 1)], ids=str)
def test_collapse_sum(target):
    check_call(_call("collapse_sum_to", _var("x", X), target), [X], scale=5)
    t = np.zeros(target, "float32")
    check_op("collapse_sum_like", [X, t], scale=5)


@pytest.mark.parametrize("out_dtype", ["int8", "uint8", "int16"])
@pytest.mark.parametrize("per_channel", [False, True])
def test_quantize_dequantize(out_dtype, per_channel):
    x = (X * 40).astype("float32")
    scale = np.array([0.5, 0.25, 1.0], "float32") if per_channel else np.array(0.3, "float32")
    zero = np.array([1, -2, 0] if per_channel else 3).astype("int32")
    if out_dtype == "uint8":
        zero = np.asarray(np.abs(zero) + 100, "int32")
    q, _ = check_op("quantize", [x, scale, zero], out_dtype=out_dtype, axis=1)
    check_op("dequantize", [q, scale, zero], axis=1)


def test_msc_fused_ops():
    w, bias = RNG.standard_normal((5, 4)).astype("float32"), RNG.standard_normal(5)
    bias = bias.astype("float32")
    check_op("msc.linear", [X, w], scale=10)
    check_op("msc.linear_bias", [X, w, bias], scale=10)
    check_op("msc.matmul", [X, RNG.standard_normal((4, 3)).astype("float32")], scale=10)
    check_op("msc.gelu", [X])
    ids = np.array([[0, 4], [-1, 2]], "int64")
    check_op("msc.embedding", [ids, w])
    x4, w4 = RNG.standard_normal((1, 3, 6, 6)), RNG.standard_normal((4, 3, 3, 3))
    check_op("msc.conv2d_bias", [x4.astype("float32"), w4.astype("float32"),
                                 RNG.standard_normal(4).astype("float32")], padding=1,
             scale=10)
