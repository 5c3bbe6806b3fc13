"""Native kernels through relax.build: GEMM ops and conv2d against numpy / torch.

GEMM results accumulate in a different order than numpy's BLAS, hence rtol/atol 1e-4.
"""

import numpy as np
import pytest

from msc import relax
from msc.errors import ShapeError
from msc.relax import op as R

F32 = "float32"
RNG = np.random.default_rng(0)
TOL = {"rtol": 1e-4, "atol": 1e-4}


def _tensor(shape, dtype=F32):
    return relax.TensorStructInfo(shape, dtype)


def _build(params, body, **kw):
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(body(bb, *params))
        bb.emit_func_output(out)
    ex = relax.build(bb.get(), **kw)
    return relax.VirtualMachine(ex, relax.cpu())["main"], ex


def _rand(*shape):
    return RNG.standard_normal(shape).astype(F32)


# ---------------------------------------------------------------------------------------------
# GEMM family.

GEMM_CASES = [  # op, x shape, weight shape, reference
    ("matmul", (5, 7), (7, 3), lambda x, w: x @ w),
    ("matmul", (2, 3, 70), (70, 65), lambda x, w: x @ w),
    ("matmul", (7,), (7, 3), lambda x, w: x @ w),
    ("msc.matmul", (13, 17), (17, 130), lambda x, w: x @ w),
    ("nn.dense", (4, 33), (9, 33), lambda x, w: x @ w.T),
    ("msc.linear", (1, 2048), (100, 2048), lambda x, w: x @ w.T),
    ("msc.linear", (3, 2, 16), (5, 16), lambda x, w: x @ w.T),
]


@pytest.mark.parametrize("op, xs, ws, ref", GEMM_CASES)
def test_gemm_ops_with_constant_weight(op, xs, ws, ref):
    w = _rand(*ws)
    x = relax.Var("x", _tensor(xs))
    run, ex = _build([x], lambda bb, x: relax.op.make_call(op, x, relax.const(w)))
    assert ex.stats["ops"][op] == {"native": 1}
    xv = _rand(*xs)
    np.testing.assert_allclose(run(xv).numpy(), ref(xv, w), **TOL)


@pytest.mark.parametrize("op, xs, ws, ref", GEMM_CASES[:1] + GEMM_CASES[4:5])
def test_gemm_ops_with_runtime_weight(op, xs, ws, ref):
    x, w = relax.Var("x", _tensor(xs)), relax.Var("w", _tensor(ws))
    run, ex = _build([x, w], lambda bb, x, w: relax.op.make_call(op, x, w))
    assert ex.stats["ops"][op] == {"native": 1}
    xv, wv = _rand(*xs), _rand(*ws)
    np.testing.assert_allclose(run(xv, wv).numpy(), ref(xv, wv), **TOL)


def test_linear_bias_with_fused_add_and_relu():
    w, b, extra = _rand(6, 10), _rand(6), _rand(1, 6)
    x = relax.Var("x", _tensor((3, 10)))

    def body(bb, x):
        y = bb.emit(relax.op.make_call("msc.linear_bias", x, relax.const(w), relax.const(b)))
        return R.nn.relu(bb.emit(R.add(relax.const(extra), y)))

    run, ex = _build([x], body)
    assert ex.stats["fused"] == {"msc.linear_bias+add+nn.relu": 1}
    xv = _rand(3, 10)
    np.testing.assert_allclose(run(xv).numpy(), np.maximum(xv @ w.T + b + extra, 0), **TOL)


def test_relu_then_bias_is_not_fused():
    w, b = _rand(4, 4), _rand(4)
    x = relax.Var("x", _tensor((2, 4)))
    run, ex = _build([x], lambda bb, x: R.add(
        bb.emit(R.nn.relu(bb.emit(R.matmul(x, relax.const(w))))), relax.const(b)))
    assert ex.stats["fused"] == {"matmul+nn.relu": 1}
    assert ex.stats["ops"]["add"] == {"native": 1}  # a per-channel affine kernel of its own
    xv = _rand(2, 4)
    np.testing.assert_allclose(run(xv).numpy(), np.maximum(xv @ w, 0) + b, **TOL)


def test_non_channel_bias_is_not_fused():
    w, b = _rand(4, 3), _rand(2, 1)  # broadcasts along rows, not channels
    x = relax.Var("x", _tensor((2, 4)))
    run, ex = _build([x], lambda bb, x: R.add(bb.emit(R.matmul(x, relax.const(w))),
                                              relax.const(b)))
    assert ex.stats["fused"] == {}
    xv = _rand(2, 4)
    np.testing.assert_allclose(run(xv).numpy(), xv @ w + b, **TOL)


def test_subtract_bias_is_fused():
    w, b = _rand(4, 3), _rand(3)
    x = relax.Var("x", _tensor((2, 4)))
    run, ex = _build([x], lambda bb, x: R.subtract(bb.emit(R.matmul(x, relax.const(w))),
                                                   relax.const(b)))
    assert ex.stats["fused"] == {"matmul+subtract": 1}
    xv = _rand(2, 4)
    np.testing.assert_allclose(run(xv).numpy(), xv @ w - b, **TOL)


def test_shared_result_is_not_fused():
    w = _rand(4, 4)
    x = relax.Var("x", _tensor((2, 4)))

    def body(bb, x):
        y = bb.emit(R.matmul(x, relax.const(w)))
        return R.add(bb.emit(R.nn.relu(y)), y)

    run, ex = _build([x], body)
    assert ex.stats["fused"] == {}
    xv = _rand(2, 4)
    y = xv @ w
    np.testing.assert_allclose(run(xv).numpy(), np.maximum(y, 0) + y, **TOL)


@pytest.mark.parametrize("op, ref", [
    ("add", np.add), ("subtract", np.subtract), ("multiply", np.multiply),
    ("divide", np.divide), ("maximum", np.maximum), ("minimum", np.minimum),
])
def test_elementwise_with_fused_relu(op, ref):
    x, y = relax.Var("x", _tensor((3, 50))), relax.Var("y", _tensor((3, 50)))
    run, ex = _build([x, y], lambda bb, x, y: R.nn.relu(bb.emit(relax.op.make_call(op, x, y))))
    assert ex.stats["fused"] == {f"{op}+nn.relu": 1}
    assert ex.stats["kernels"] == {"native": 1, "numpy": 0, "packed": 0, "tir": 0}
    xv, yv = _rand(3, 50), _rand(3, 50) + 3
    xv[0, :3] = [np.nan, -np.inf, np.inf]
    np.testing.assert_allclose(run(xv, yv).numpy(), np.maximum(ref(xv, yv), 0), rtol=1e-6)


def test_residual_block_add_relu():
    w1, w2 = _rand(8, 8, 3, 3), _rand(8, 8, 1, 1)
    x = relax.Var("x", _tensor((1, 8, 6, 6)))

    def body(bb, x):
        h = bb.emit(R.nn.relu(bb.emit(R.nn.conv2d(x, relax.const(w1), padding=1))))
        h = bb.emit(R.nn.conv2d(h, relax.const(w2)))
        return R.nn.relu(bb.emit(R.add(h, x)))

    run, ex = _build([x], body)
    # the 1x1 conv's short sum (K = 8) on a 6x6 plane takes the direct conv, whose tile
    # stores add the shortcut and apply the relu
    assert ex.stats["fused"] == {"nn.conv2d+nn.relu": 1, "nn.conv2d+add+nn.relu": 1}
    assert ex.stats["kernels"]["numpy"] == 0
    xv = _rand(1, 8, 6, 6)
    h = _torch_conv(np.maximum(_torch_conv(xv, w1, padding=1), 0), w2)
    np.testing.assert_allclose(run(xv).numpy(), np.maximum(h + xv, 0), **TOL)


def _bn_params(c):
    return [relax.const(v) for v in (_rand(c), _rand(c), _rand(c), np.abs(_rand(c)) + 0.5)]


def _bn_ref(x, params, axis=1, eps=1e-5):
    g, b, m, v = (p.data.reshape([-1 if k == axis else 1 for k in range(x.ndim)])
                  for p in params)
    return (x - m) / np.sqrt(v + eps) * g + b


def test_batch_norm_chain_is_one_affine_kernel():
    """Pre-activation (DenseNet): batch_norm, [0], multiply, add, relu -> one native call."""
    params, s, t = _bn_params(6), _rand(6, 1, 1), _rand(1, 6, 1, 1)
    x = relax.Var("x", _tensor((2, 6, 5, 4)))

    def body(bb, x):
        bn = bb.emit(R.nn.batch_norm(x, *params, axis=1, training=False))
        y = bb.emit(R.multiply(bb.emit(relax.TupleGetItem(bn, 0)), relax.const(s)))
        return R.nn.relu(bb.emit(R.add(y, relax.const(t))))

    run, ex = _build([x], body)
    assert ex.stats["fused"] == {"nn.batch_norm+multiply+add+nn.relu": 1}
    assert ex.stats["kernels"] == {"native": 1, "numpy": 0, "packed": 0, "tir": 0}
    xv = _rand(2, 6, 5, 4)
    np.testing.assert_allclose(run(xv).numpy(), np.maximum(_bn_ref(xv, params) * s + t, 0),
                               **TOL)


def test_conv_absorbs_batch_norm():
    w, params = _rand(6, 3, 3, 3), _bn_params(6)
    x = relax.Var("x", _tensor((1, 3, 8, 8)))

    def body(bb, x):
        bn = bb.emit(R.nn.batch_norm(bb.emit(R.nn.conv2d(x, relax.const(w), padding=1)),
                                     *params, axis=1, training=False))
        return R.nn.relu(bb.emit(relax.TupleGetItem(bn, 0)))

    run, ex = _build([x], body)
    assert ex.stats["fused"] == {"nn.conv2d+nn.batch_norm+nn.relu": 1}
    xv = _rand(1, 3, 8, 8)
    ref = np.maximum(_bn_ref(_torch_conv(xv, w, padding=1), params), 0)
    np.testing.assert_allclose(run(xv).numpy(), ref, **TOL)


def test_batch_norm_with_used_statistics_stays_numpy():
    params = _bn_params(3)
    x = relax.Var("x", _tensor((2, 3)))
    run, ex = _build([x], lambda bb, x: R.nn.batch_norm(x, *params, axis=1, training=False),
                     legalize="fallback")
    assert ex.stats["ops"]["nn.batch_norm"] == {"numpy": 1}
    out = run(xv := _rand(2, 3))
    np.testing.assert_allclose(out[0].numpy(), _bn_ref(xv, params), **TOL)


@pytest.mark.parametrize("op, c_shape, ref", [
    ("add", (7,), np.add), ("multiply", (), np.multiply), ("subtract", (3, 1), np.subtract),
    ("divide", (1, 7), np.divide),
])
def test_per_channel_constant_operand(op, c_shape, ref):
    c = _rand(*c_shape) + 2
    x = relax.Var("x", _tensor((2, 3, 7)))
    run, ex = _build([x], lambda bb, x: relax.op.make_call(op, x, relax.const(c)))
    assert ex.stats["ops"][op] == {"native": 1}
    xv = _rand(2, 3, 7)
    np.testing.assert_allclose(run(xv).numpy(), ref(xv, c), rtol=1e-5, atol=1e-6)


def test_constant_first_operand():
    c = _rand(3, 1)
    x = relax.Var("x", _tensor((3, 4)))
    run, ex = _build([x], lambda bb, x: R.subtract(relax.const(c), x))
    assert ex.stats["ops"]["subtract"] == {"native": 1}
    np.testing.assert_allclose(run(xv := _rand(3, 4)).numpy(), c - xv, rtol=1e-6)


def test_float64_matmul_falls_back_to_numpy():
    w = RNG.standard_normal((3, 2))
    x = relax.Var("x", _tensor((2, 3), "float64"))
    run, ex = _build([x], lambda bb, x: R.matmul(x, relax.const(w)), legalize="fallback")
    assert ex.stats["ops"]["matmul"] == {"numpy": 1}
    xv = RNG.standard_normal((2, 3))
    np.testing.assert_allclose(run(xv).numpy(), xv @ w)


def test_kernel_checks_its_arguments():
    from msc.backend.dispatch.resolve import load_facts
    from msc.backend.kernels.base import Site
    from msc.backend.runtime.program import Value
    from msc.relax.op.registry import OPS

    load_facts()
    w = _rand(4, 3)
    site = Site("matmul", relax.Attrs({"out_dtype": None}),
                [Value(0, _tensor((2, 4))), Value(1, _tensor((4, 3)), const=w)],
                _tensor((2, 3)))
    kernel = OPS["matmul"].facts["kernel"].make(site)
    out = np.empty((2, 3), F32)
    with pytest.raises(ShapeError, match="float32"):
        kernel(np.ones((2, 4)), out)
    with pytest.raises(ShapeError, match=r"\[\.\.\., 4\]"):
        kernel(np.ones((2, 5), F32), out)
    with pytest.raises(ShapeError, match="output buffer"):
        kernel(np.ones((3, 4), F32), out)


# ---------------------------------------------------------------------------------------------
# conv2d.

CONV_CASES = [  # x shape (NCHW), weight (OIHW), attrs
    ((1, 3, 9, 9), (8, 3, 3, 3), {}),
    ((2, 16, 12, 10), (20, 16, 3, 3), {"strides": 2, "padding": 1}),
    ((1, 8, 11, 11), (4, 8, 3, 3), {"padding": (1, 2, 0, 1), "dilation": 2}),
    ((1, 32, 7, 7), (64, 32, 1, 1), {}),
    ((1, 6, 8, 8), (5, 6, 1, 1), {"strides": 2}),
    ((1, 4, 5, 6), (3, 4, 5, 2), {"padding": (2, 1)}),
]


def _torch_conv(x, w, b=None, strides=1, padding=0, dilation=1):
    torch = pytest.importorskip("torch")
    pad = (padding,) * 4 if isinstance(padding, int) else (
        padding * 2 if len(padding) == 2 else padding)
    t = torch.nn.functional.pad(torch.from_numpy(x), (pad[1], pad[3], pad[0], pad[2]))
    out = torch.conv2d(t, torch.from_numpy(w), None if b is None else torch.from_numpy(b),
                       stride=strides, dilation=dilation)
    return out.numpy()


@pytest.mark.parametrize("xs, ws, attrs", CONV_CASES)
def test_conv2d_matches_torch(xs, ws, attrs):
    w = _rand(*ws)
    x = relax.Var("x", _tensor(xs))
    run, ex = _build([x], lambda bb, x: R.nn.conv2d(x, relax.const(w), **attrs))
    assert ex.stats["ops"]["nn.conv2d"] == {"native": 1}
    xv = _rand(*xs)
    np.testing.assert_allclose(run(xv).numpy(), _torch_conv(xv, w, **attrs), **TOL)


def _conv_bias_relu(fuse: bool, w, b):
    x = relax.Var("x", _tensor((2, 8, 10, 10)))

    def body(bb, x):
        y = bb.emit(R.nn.conv2d(x, relax.const(w), padding=1))
        return R.nn.relu(bb.emit(R.add(y, relax.const(b))))

    return _build([x], body, fuse=fuse)


def test_fused_conv_bias_relu_equals_unfused():
    w, b = _rand(16, 8, 3, 3), _rand(1, 16, 1, 1)
    fused, ex_f = _conv_bias_relu(True, w, b)
    unfused, ex_u = _conv_bias_relu(False, w, b)
    assert ex_f.stats["fused"] == {"nn.conv2d+add+nn.relu": 1}
    assert ex_f.stats["kernels"] == {"native": 1, "numpy": 0, "packed": 0, "tir": 0}
    assert ex_u.stats["kernels"]["native"] == 3 and ex_u.stats["fused"] == {}
    xv = _rand(2, 8, 10, 10)
    got = fused(xv).numpy()
    np.testing.assert_allclose(got, unfused(xv).numpy(), rtol=1e-5, atol=1e-5)
    ref = np.maximum(_torch_conv(xv, w, b.reshape(-1), padding=1), 0)
    np.testing.assert_allclose(got, ref, **TOL)


def test_conv2d_bias_op_and_bias_add():
    w, b, b2 = _rand(6, 4, 3, 3), _rand(6), _rand(6)
    x = relax.Var("x", _tensor((1, 4, 7, 7)))

    def body(bb, x):
        y = bb.emit(relax.op.make_call("msc.conv2d_bias", x, relax.const(w), relax.const(b),
                                       padding=1))
        return relax.op.make_call("nn.bias_add", y, relax.const(b2), axis=1)

    run, ex = _build([x], body)
    assert ex.stats["fused"] == {"msc.conv2d_bias+nn.bias_add": 1}
    xv = _rand(1, 4, 7, 7)
    np.testing.assert_allclose(run(xv).numpy(),
                               _torch_conv(xv, w, b + b2, padding=1), **TOL)


@pytest.mark.parametrize("data_layout, kernel_layout, out_layout", [
    ("NHWC", "OIHW", "NHWC"), ("NCHW", "HWIO", "NCHW"), ("NHWC", "HWIO", "NCHW"),
    ("NCHW", "OIHW", "NHWC"),
])
def test_conv2d_layouts(data_layout, kernel_layout, out_layout):
    w_oihw, x_nchw = _rand(8, 5, 3, 3), _rand(2, 5, 6, 7)
    w = np.ascontiguousarray(np.transpose(w_oihw, ["OIHW".index(c) for c in kernel_layout]))
    xv = np.ascontiguousarray(np.transpose(x_nchw, ["NCHW".index(c) for c in data_layout]))
    x = relax.Var("x", _tensor(xv.shape))
    run, ex = _build([x], lambda bb, x: R.nn.conv2d(
        x, relax.const(w), padding=1, data_layout=data_layout, kernel_layout=kernel_layout,
        out_layout=out_layout))
    assert ex.stats["ops"]["nn.conv2d"] == {"native": 1}
    ref = np.transpose(_torch_conv(x_nchw, w_oihw, padding=1),
                       ["NCHW".index(c) for c in out_layout])
    np.testing.assert_allclose(run(xv).numpy(), ref, **TOL)


@pytest.mark.parametrize("cin, cout, groups, attrs", [
    (4, 6, 2, {}),                                   # grouped
    (9, 6, 3, {"strides": 2, "padding": 1}),
    (8, 8, 8, {"padding": 1}),                       # depthwise
    (6, 12, 6, {"strides": 2, "padding": (0, 1, 1, 0)}),  # depthwise, channel multiplier 2
    (5, 5, 5, {"dilation": 2, "padding": 2}),
    (4, 4, 4, {"strides": 3}),                       # scalar-stride window loop
])
def test_grouped_and_depthwise_conv(cin, cout, groups, attrs):
    torch = pytest.importorskip("torch")
    w, b = _rand(cout, cin // groups, 3, 3), _rand(1, cout, 1, 1)
    x = relax.Var("x", _tensor((2, cin, 9, 10)))
    run, ex = _build([x], lambda bb, x: R.nn.relu(R.add(
        bb.emit(R.nn.conv2d(x, relax.const(w), groups=groups, **attrs)), relax.const(b))))
    assert ex.stats["ops"]["nn.conv2d"] == {"native": 1}
    assert ex.stats["fused"] == {"nn.conv2d+add+nn.relu": 1}
    xv = _rand(2, cin, 9, 10)
    pad = attrs.get("padding", 0)
    pad = (pad,) * 4 if isinstance(pad, int) else pad
    t = torch.nn.functional.pad(torch.from_numpy(xv), (pad[1], pad[3], pad[0], pad[2]))
    ref = torch.conv2d(t, torch.from_numpy(w), torch.from_numpy(b.reshape(-1)), groups=groups,
                       stride=attrs.get("strides", 1), dilation=attrs.get("dilation", 1))
    np.testing.assert_allclose(run(xv).numpy(), np.maximum(ref.numpy(), 0), **TOL)


def test_conv_net_dynamic_batch():
    w1, w2 = _rand(8, 3, 3, 3), _rand(4, 8, 1, 1)
    from msc.tir import expr as tir

    n = tir.Var("n", "int64")
    x = relax.Var("x", _tensor((n, 3, 8, 8)))

    def body(bb, x):
        h = bb.emit(R.nn.relu(bb.emit(R.nn.conv2d(x, relax.const(w1), padding=1))))
        return R.nn.conv2d(h, relax.const(w2))

    run, _ = _build([x], body)
    for batch in (1, 2, 5):
        xv = _rand(batch, 3, 8, 8)
        ref = _torch_conv(np.maximum(_torch_conv(xv, w1, padding=1), 0), w2)
        np.testing.assert_allclose(run(xv).numpy(), ref, **TOL)
