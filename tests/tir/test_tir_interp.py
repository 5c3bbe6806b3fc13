"""The reference TIR interpreter computes what numpy computes for TVM's legalized prim funcs
(tiny shapes; float32 tolerance rtol=1e-5, atol=1e-6), binds symbolic dims from the inputs and
names the param when a shape or dtype does not fit."""

from __future__ import annotations

import math
import pathlib

import numpy as np
import pytest

from msc.errors import RuntimeCallError, ShapeError
from msc.tir import intrin
from msc.tir.interp import MATH, run_prim_func
from msc.tir.parser import parse_tir_text

DATA = pathlib.Path(__file__).parent / "data"
RTOL, ATOL = 1e-5, 1e-6
_erf = np.vectorize(math.erf, otypes=["float32"])


def _func(case: str, name: str | None = None):
    """The prim func of a golden file; ``"file:func"`` picks one of several."""
    case, _, name = case.partition(":") if name is None else (case, "", name)
    funcs = parse_tir_text((DATA / f"{case}.tvmscript").read_text())
    return funcs[name] if name else next(iter(funcs.values()))


def _rand(*shape, dtype="float32", seed=0):
    return np.random.default_rng(seed + len(shape)).standard_normal(shape).astype(dtype)


def _conv2d(x, w, pad):
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    kh, kw = w.shape[2:]
    oh, ow = xp.shape[2] - kh + 1, xp.shape[3] - kw + 1
    patches = np.stack([xp[:, :, i:i + oh, j:j + ow] for i in range(kh) for j in range(kw)], -1)
    return np.einsum("ncpqk,fck->nfpq", patches, w.reshape(*w.shape[:2], -1))


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _avg_pool_3x3_pad1(x):
    ones = np.pad(np.ones_like(x), ((0, 0), (0, 0), (1, 1), (1, 1)))
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = [(i, j) for i in range(3) for j in range(3)]
    total = sum(xp[:, :, i:i + 4, j:j + 4] for i, j in win)
    return total / sum(ones[:, :, i:i + 4, j:j + 4] for i, j in win)


def _adaptive_avg_pool_2x2(x):
    size = x.shape[-1]
    spans = [(i * size // 2, -(-(i + 1) * size // 2)) for i in range(2)]
    return np.stack([np.stack([x[..., a:b, c:d].mean((-1, -2)) for c, d in spans], -1)
                     for a, b in spans], -2)


def _conv2d_transpose(x, w, stride):
    n, _, h, wd = x.shape
    kh, kw = w.shape[2:]
    out = np.zeros((n, w.shape[1], (h - 1) * stride + kh, (wd - 1) * stride + kw), "float32")
    for i in range(h):
        for j in range(wd):
            patch = np.einsum("nc,cokl->nokl", x[:, :, i, j], w)
            out[:, :, i * stride:i * stride + kh, j * stride:j * stride + kw] += patch
    return out


def _attention(q, k, v):  # (batch, seq, heads, dim)
    scores = np.einsum("bqhd,bkhd->bhqk", q, k) / np.float32(np.sqrt(q.shape[-1]))
    return np.einsum("bhqk,bkhd->bqhd", _softmax(scores), v)


def _batch_norm_train(x, g, b, mu, va):
    mean, var = x.mean((0, 2, 3)), x.var((0, 2, 3))
    c = (slice(None), None, None)
    out = (x - mean[c]) / np.sqrt(var[c] + 1e-5) * g[c] + b[c]
    return out, 0.9 * mu + 0.1 * mean, 0.9 * va + 0.1 * var


def _scatter_rows(x, i, u):
    out = x.copy()
    np.put_along_axis(out, i, u, axis=0)
    return out


X23, Y23, C23 = _rand(2, 3), _rand(2, 3, seed=1), _rand(2, 3, seed=2) > 0
SHIFT = np.array([[0, 1, 2], [3, 4, 1]], dtype="int32")
INTS = (np.arange(6, dtype="int32").reshape(2, 3) - 2) * 7, np.array([[3, -2, 5], [-4, 2, 3]],
                                                                      dtype="int32")
# case name -> (inputs, numpy reference)
CASES = {
    "legalize_add": ((X23, _rand(1, 3)), lambda x, y: x + y),
    "legalize_matmul": ((_rand(2, 4), _rand(4, 3)), lambda x, y: x @ y),
    "legalize_conv2d": ((_rand(1, 2, 5, 5), _rand(3, 2, 3, 3)), lambda x, w: _conv2d(x, w, 1)),
    "legalize_reshape": ((_rand(2, 3, 4),), lambda x: x.reshape(6, 4)),
    "legalize_sum": ((_rand(2, 3, 4),), lambda x: x.sum(1)),
    "legalize_softmax": ((_rand(2, 5),), _softmax),
    "legalize_strided_slice": ((_rand(4, 6),), lambda x: x[1:4:2, 0:6:3]),
    "legalize_relu": ((X23,), lambda x: np.maximum(x, 0)),
    "legalize_sigmoid": ((X23,), lambda x: 1 / (1 + np.exp(-x))),
    "legalize_tanh": ((X23,), np.tanh),
    "legalize_sqrt": ((np.abs(X23),), np.sqrt),
    "legalize_erf": ((X23,), _erf),
    "legalize_gelu": ((X23,), lambda x: x * 0.5 * (1 + _erf(x / np.sqrt(2)))),
    "legalize_mean": ((_rand(2, 3, 4),), lambda x: x.mean((0, 2), keepdims=True)),
    "legalize_max": ((X23,), lambda x: x.max(1)),
    "legalize_argmax": ((X23,), lambda x: x.argmax(1)),
    "legalize_transpose": ((_rand(2, 3, 4),), lambda x: x.transpose(2, 0, 1)),
    "legalize_concat": ((X23, _rand(2, 2)), lambda x, y: np.concatenate([x, y], 1)),
    "legalize_astype": ((X23 * 4,), lambda x: x.astype("int32")),
    "legalize_where": ((C23, X23, Y23), np.where),
    "legalize_less": ((X23, Y23), np.less),
    "legalize_divide": ((X23, Y23), np.divide),
    "legalize_power": ((np.abs(X23), Y23), np.power),
    "legalize_floor_divide_int": (INTS, np.floor_divide),
    "legalize_clip": ((X23 * 5,), lambda x: np.clip(x, 0, 6)),
    "legalize_max_pool2d": ((_rand(1, 1, 4, 4),),
                            lambda x: x.reshape(1, 1, 2, 2, 2, 2).max((3, 5))),
    "legalize_avg_pool2d": ((_rand(1, 1, 4, 4),), _avg_pool_3x3_pad1),
    "legalize_layer_norm": ((_rand(2, 4), _rand(4), _rand(4, seed=3)), lambda x, g, b: (
        (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * g + b)),
    "legalize_take": ((_rand(4, 3), np.array([3, 1])), lambda x, i: x[i]),
    "legalize_resize2d": ((_rand(1, 1, 2, 2),), lambda x: x.repeat(2, 2).repeat(2, 3)),
    "legalize_adaptive_avg_pool2d": ((_rand(1, 2, 5, 5),), _adaptive_avg_pool_2x2),
    "legalize_pad": ((X23,), lambda x: np.pad(x, ((1, 1), (0, 2)))),
    "legalize_log_softmax": ((_rand(2, 5),), lambda x: np.log(_softmax(x))),
    "legalize_split": ((_rand(4, 6),), lambda x: tuple(np.split(x, 3, axis=1))),
    "legalize_tile": ((X23,), lambda x: np.tile(x, (2, 1))),
    "legalize_repeat": ((X23,), lambda x: np.repeat(x, 2, axis=1)),
    "legalize_flip": ((X23,), lambda x: x[:, ::-1]),
    "legalize_broadcast_to": ((_rand(1, 3),), lambda x: np.broadcast_to(x, (4, 3))),
    "legalize_triu": ((_rand(3, 3),), lambda x: np.triu(x, 1)),
    "legalize_einsum": ((X23, _rand(3, 4)), np.matmul),
    "legalize_variance": ((X23,), lambda x: x.var(1)),
    "legalize_conv2d_transpose": ((_rand(1, 2, 3, 3), _rand(2, 3, 3, 3)),
                                  lambda x, w: _conv2d_transpose(x, w, 2)),
    "legalize_attention": ((_rand(1, 2, 1, 4), _rand(1, 2, 1, 4, seed=1),
                            _rand(1, 2, 1, 4, seed=2)), _attention),
    "legalize_scatter_elements": ((_rand(3, 3), np.array([[0, 1, 2], [2, 0, 1]]), X23),
                                  _scatter_rows),
    "legalize_gather_nd": ((_rand(3, 3), np.array([[0, 2], [1, 0]])),
                           lambda x, i: x[i[:, 0], i[:, 1]]),
    "legalize_min_int8": (((X23 * 50).astype("int8"),), lambda x: x.min(1)),
    "legalize_bitwise:left_shift": ((INTS[0], SHIFT), np.left_shift),
    "legalize_bitwise:tir_bitwise_not": ((INTS[0],), np.invert),
    "legalize_bitwise:bitwise_xor": (INTS, np.bitwise_xor),
    "legalize_isnan": ((np.where(C23, X23, np.nan).astype("float32"),), np.isnan),
    "legalize_mod": ((X23 * 5, Y23), np.fmod),
    "legalize_logical:logical_and": ((C23, ~C23[::-1]), np.logical_and),
    "legalize_logical:tir_logical_not": ((C23,), np.logical_not),
    "legalize_float16_exp:tir_exp": ((X23.astype("float16"),), np.exp),
    "legalize_float16_exp:cast": ((X23.astype("float16"),), lambda x: x.astype("float32")),
    "legalize_prelu": ((_rand(1, 3, 2), _rand(3)),
                       lambda x, a: np.where(x > 0, x, x * a[None, :, None])),
    "legalize_leakyrelu": ((X23,), lambda x: np.where(x > 0, x, 0.1 * x)),
    "legalize_silu": ((X23,), lambda x: x / (1 + np.exp(-x))),
    "legalize_rms_norm": ((_rand(2, 4), _rand(4)), lambda x, g: (
        x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5) * g)),
    "legalize_round": ((X23 * 3,), np.rint),
    "legalize_rsqrt": ((np.abs(X23),), lambda x: 1 / np.sqrt(x)),
    "legalize_square": ((X23,), np.square),
    "legalize_batch_norm": ((_rand(1, 2, 2, 2), _rand(2), _rand(2, seed=1), _rand(2, seed=2),
                             np.abs(_rand(2, seed=3))), _batch_norm_train),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_legalized_func_matches_numpy(case):
    inputs, reference = CASES[case]
    outs = run_prim_func(_func(case), *inputs)
    expected = reference(*inputs)
    outs, expected = (outs, expected) if isinstance(expected, tuple) else ((outs,), (expected,))
    assert len(outs) == len(expected)
    for out, ref in zip(outs, expected):
        ref = np.asarray(ref)
        assert (out.shape, out.dtype) == (ref.shape, ref.dtype)
        rtol = 1e-3 if out.dtype == np.float16 else RTOL
        np.testing.assert_allclose(out, ref, rtol=rtol, atol=ATOL)


@pytest.mark.parametrize("case, inputs, reference", [
    ("legalize_dyn_add", (_rand(3, 3), _rand(3, 3, seed=4)), np.add),
    ("legalize_dyn_add", (_rand(5, 3), _rand(5, 3, seed=4)), np.add),
    ("legalize_dyn_matmul", (_rand(3, 4), _rand(4, 2)), np.matmul),
    ("legalize_dyn_softmax", (_rand(3, 4),), _softmax),
    ("legalize_dyn_reshape", (_rand(3, 4),), lambda x: x.reshape(6, 2)),
    ("legalize_dyn_strided_slice", (_rand(2, 6),), lambda x: x[:, 1:5:2]),
])
def test_dynamic_shapes_bind_from_inputs(case, inputs, reference):
    out = run_prim_func(_func(case), *inputs)
    np.testing.assert_allclose(out, reference(*inputs), rtol=RTOL, atol=ATOL)


def test_destination_passing_writes_in_place():
    x, y = _rand(2, 4), _rand(4, 3)
    out = np.zeros((2, 3), "float32")
    assert run_prim_func(_func("legalize_matmul"), x, y, out) is None
    np.testing.assert_allclose(out, x @ y, rtol=RTOL, atol=ATOL)


def test_module_with_two_prim_funcs():
    full = run_prim_func(_func("legalize_full", "full"))
    assert np.all(full == 1.5)
    np.testing.assert_allclose(run_prim_func(_func("legalize_full", "add"), X23, full),
                               X23 + 1.5)


@pytest.mark.parametrize("args, param, message", [
    ((_rand(2, 3, 1), _rand(1, 3)), "x", "expected rank 2"),
    ((X23, _rand(1, 3).astype("float64")), "y", "expected dtype float32, got float64"),
    ((_rand(3, 3), _rand(1, 3)), "x", "dim 0 is 3, expected 2"),
    ((X23, _rand(1, 3), np.zeros((2, 2), "float32")), "T_add", "dim 1 is 2, expected 3"),
    ((X23, [[1.0, 2.0, 3.0]]), "y", "expected a numpy array"),
])
def test_shape_errors_name_the_param(args, param, message):
    with pytest.raises(ShapeError, match=message) as info:
        run_prim_func(_func("legalize_add"), *args)
    assert info.value.context["param"] == param


def test_symbolic_dim_must_agree_across_params():
    with pytest.raises(ShapeError, match="dim 0 is 4, expected n = 3") as info:
        run_prim_func(_func("legalize_dyn_add"), _rand(3, 3), _rand(4, 3))
    assert info.value.context["param"] == "y"


def test_compound_output_dim_is_checked():
    with pytest.raises(ShapeError, match=r"dim 0 is 5, expected n \* 2 = 6") as info:
        run_prim_func(_func("legalize_dyn_reshape"), _rand(3, 4), np.zeros((5, 2), "float32"))
    assert info.value.context["param"] == "T_reshape"


def test_unbound_symbolic_dim_is_reported():
    func = parse_tir_text('''
@T.prim_func
def f(A: T.Buffer(("n * T.int64(2)",), "float32"), B: T.Buffer((T.int64(1),), "float32")):
    B[0] = A[0]
''')["f"]
    with pytest.raises(ShapeError, match="uses 'n', which no input shape binds") as info:
        run_prim_func(func, np.zeros(4, "float32"))
    assert info.value.context["param"] == "A"


def test_too_many_arguments():
    with pytest.raises(ShapeError, match="takes 3 arguments, got 4"):
        run_prim_func(_func("legalize_add"), X23, X23, X23, X23)


def test_out_of_bounds_load_is_an_error():
    with pytest.raises(RuntimeCallError, match=r"index \(7, 0\) out of bounds for buffer 'x'"):
        run_prim_func(_func("legalize_take"), _rand(4, 3), np.array([7, 0]))


CONSTRUCTS = '''
@T.prim_func
def constructs(a: T.handle, c: T.Buffer((8,), "int32"), k: T.int32):
    n = T.int64()
    A = T.match_buffer(a, (n,), "float32")
    tmp = T.alloc_buffer((8,), "int32")
    for i in T.parallel(8):
        y: T.int32 = i * 2 + k
        tmp[i] = T.shift_left(y, 1) + (y & 3) + (y | 2) + (y ^ 1) + (y >> 1) + ~y
    for i in range(1, 8):
        for j in T.unroll(i):
            if j % 2 == 0:
                c[i] = c[i] + T.truncdiv(tmp[j], -3) + T.truncmod(tmp[j], -3)
            else:
                c[i] = c[i] + tmp[j] // -3 + tmp[j] % -3
    c[0] = T.Select(not (c[1] > 1) and c[2] != 2, c[3] * -1, -c[4])
    while c[0] < 100:
        c[0] = c[0] * 2 + T.Cast("int32", T.floor(A[0]))
'''


def _constructs_reference(a, k):
    tmp = [0] * 8
    for i in range(8):
        y = i * 2 + k
        tmp[i] = (y << 1) + (y & 3) + (y | 2) + (y ^ 1) + (y >> 1) + ~y
    c = [0] * 8
    for i in range(1, 8):
        for j in range(i):
            t = tmp[j]
            trunc = int(t / -3)
            c[i] += trunc + (t - trunc * -3) if j % 2 == 0 else t // -3 + t % -3
    c[0] = c[3] * -1 if not c[1] > 1 and c[2] != 2 else -c[4]
    while c[0] < 100:
        c[0] = c[0] * 2 + math.floor(a[0])
    return c


def test_loops_lets_branches_and_integer_semantics():
    func = parse_tir_text(CONSTRUCTS)["constructs"]
    a = np.array([2.5, -1.0, 0.0], "float32")
    c = np.zeros(8, "int32")
    run_prim_func(func, a, c, 3)
    assert c.tolist() == _constructs_reference(a, 3)


def test_block_predicate_and_init_follow_tvm():
    func = _func("script_blocks")
    a = _rand(4, 4)
    b = np.full(4, -7.0, "float32")
    c = np.zeros((4, 4), "float32")
    run_prim_func(func, a, b, c)
    np.testing.assert_allclose(b[:3], a[:3].sum(1), rtol=RTOL, atol=ATOL)
    assert b[3] == -7.0  # T.where(i < 3) skips the block, init included
    assert np.array_equal(np.diag(c), np.diag(a))


def test_unsupported_intrinsic_is_reported():
    with pytest.raises(RuntimeCallError, match="no implementation of T.call_extern"):
        run_prim_func(_func("script_loops"), np.zeros(8, "float32"), np.zeros(8, "float32"),
                      np.zeros(8, "int32"))


def test_every_math_intrinsic_has_an_implementation():
    names = intrin.MATH_UNARY | intrin.MATH_BINARY | intrin.PREDICATES | set(intrin.BITWISE)
    assert sorted(names - set(MATH)) == []


def test_compiled_closures_are_reused():
    func = _func("legalize_dyn_add")
    run_prim_func(func, _rand(2, 3), _rand(2, 3))
    compiled = func.__dict__["_interp"]
    run_prim_func(func, _rand(4, 3), _rand(4, 3))
    assert func.__dict__["_interp"] is compiled
