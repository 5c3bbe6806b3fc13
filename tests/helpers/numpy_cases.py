"""The cases of the numpy reference facts, op by op, against torch (CPU) or, where torch has no
such op, against values worked out by hand (tests/relax/op/test_numpy_ref.py runs them; the
codegen tests reuse them). Every call goes through the op table (make_call + inference), so
the attrs are what a real module holds. float32: rtol 1e-5, atol 1e-6 unless a case says why.
"""

import warnings

import numpy as np
import torch
import torch.nn.functional as F

from msc import relax
from msc.relax.op import numpy_ref, registry

RNG = np.random.default_rng(0)


def _f(*shape, lo=-2.0, hi=2.0):
    return RNG.uniform(lo, hi, shape).astype("float32")


def _i(*shape, lo=-5, hi=5, dtype="int32"):
    return RNG.integers(lo, hi, shape).astype(dtype)


def _b(*shape):
    return RNG.random(shape) > 0.5


def _nonzero(*shape):
    return (RNG.uniform(0.5, 2.0, shape) * RNG.choice([-1, 1], shape)).astype("float32")


def run(name, *args, **kwargs):
    """Build the call as a module would hold it and evaluate it with its numpy fact."""
    call = relax.BlockBuilder().normalize(registry.make_call(name, *args, **kwargs))
    return numpy_ref.evaluate_call(call, [numpy_ref.expr_value(a) for a in call.args])


def _np(value):
    if isinstance(value, torch.Tensor):
        return value.detach().numpy()
    if isinstance(value, (tuple, list)):
        return tuple(_np(v) for v in value)
    return np.asarray(value)


def _torch(value):
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value.copy())
    if isinstance(value, list) and value and isinstance(value[0], np.ndarray):
        return [torch.from_numpy(v.copy()) for v in value]
    return value


def check(got, want, rtol=1e-5, atol=1e-6):
    want = _np(want)
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            check(g, w, rtol, atol)
        return
    got = np.asarray(got)
    assert got.shape == want.shape
    assert got.dtype.kind == want.dtype.kind or {got.dtype.kind, want.dtype.kind} <= {"i", "u"}
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                               rtol=rtol, atol=atol)


class Case:
    """``op(*args, **kwargs)`` compared with ``ref(*torch args)`` (or a value)."""

    def __init__(self, op, args, ref, rtol=1e-5, atol=1e-6, id=None, **kwargs):
        self.op, self.args, self.ref, self.kwargs = op, list(args), ref, kwargs
        self.rtol, self.atol, self.id = rtol, atol, id or op

    def expected(self):
        if not callable(self.ref):
            return self.ref
        return self.ref(*[_torch(a) for a in self.args])


# --------------------------------------------------------------------------------------------
# Elementwise.

ROUNDING = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.3, -0.7], "float32")
SPECIAL = np.array([1.0, -np.inf, np.inf, np.nan, 0.0], "float32")
UNARY = {  # op: (torch fn, input)
    "abs": (torch.abs, _f(3, 4)), "acos": (torch.acos, _f(3, 4, lo=-0.9, hi=0.9)),
    "acosh": (torch.acosh, _f(3, 4, lo=1.1, hi=3)), "asin": (torch.asin, _f(8, lo=-.9, hi=.9)),
    "asinh": (torch.asinh, _f(3, 4)), "atan": (torch.atan, _f(3, 4)),
    "atanh": (torch.atanh, _f(8, lo=-0.9, hi=0.9)), "bitwise_not": (torch.bitwise_not, _i(6)),
    "ceil": (torch.ceil, _f(3, 4)), "cos": (torch.cos, _f(3, 4)), "cosh": (torch.cosh, _f(6)),
    "erf": (torch.erf, _f(3, 4)), "exp": (torch.exp, _f(3, 4)), "floor": (torch.floor, _f(6)),
    "log": (torch.log, _f(3, 4, lo=0.1, hi=3)), "negative": (torch.neg, _f(3, 4)),
    "round": (torch.round, ROUNDING), "rsqrt": (torch.rsqrt, _f(3, 4, lo=0.1, hi=3)),
    "sigmoid": (torch.sigmoid, _f(3, 4, lo=-20, hi=20)), "sign": (torch.sign, _f(3, 4)),
    "sin": (torch.sin, _f(3, 4)), "sinh": (torch.sinh, _f(6)), "square": (torch.square, _f(6)),
    "sqrt": (torch.sqrt, _f(3, 4, lo=0, hi=3)), "tan": (torch.tan, _f(6, lo=-1.2, hi=1.2)),
    "tanh": (torch.tanh, _f(3, 4)), "trunc": (torch.trunc, _f(3, 4)),
    "logical_not": (torch.logical_not, _b(5)), "isfinite": (torch.isfinite, SPECIAL),
    "isinf": (torch.isinf, SPECIAL), "isnan": (torch.isnan, SPECIAL),
}
X34, Y4 = _f(3, 4), _nonzero(4)
I34, J34 = _i(3, 4, lo=-9, hi=9), (_i(3, 4, lo=1, hi=4) * RNG.choice([-1, 1], (3, 4))
                                    ).astype("int32")
BINARY = {  # op: (torch fn, a, b)
    "add": (torch.add, X34, Y4), "subtract": (torch.sub, X34, Y4),
    "multiply": (torch.mul, X34, Y4), "divide": (torch.div, X34, Y4),
    "floor_divide": (torch.floor_divide, X34, Y4), "floor_mod": (torch.remainder, X34, Y4),
    "mod": (torch.fmod, X34, Y4), "power": (torch.pow, _f(3, 4, lo=0.1, hi=2), Y4),
    "maximum": (torch.maximum, X34, Y4), "minimum": (torch.minimum, X34, Y4),
    "log_add_exp": (torch.logaddexp, X34, Y4), "equal": (torch.eq, I34, J34),
    "not_equal": (torch.ne, I34, J34), "less": (torch.lt, X34, Y4),
    "less_equal": (torch.le, I34, J34), "greater": (torch.gt, X34, Y4),
    "greater_equal": (torch.ge, I34, J34), "bitwise_and": (torch.bitwise_and, I34, J34),
    "bitwise_or": (torch.bitwise_or, I34, J34), "bitwise_xor": (torch.bitwise_xor, I34, J34),
    "left_shift": (torch.bitwise_left_shift, _i(6, lo=0, hi=9), _i(6, lo=0, hi=4)),
    "right_shift": (torch.bitwise_right_shift, _i(6, lo=0, hi=99), _i(6, lo=0, hi=4)),
    "logical_and": (torch.logical_and, _b(6), _b(6)),
    "logical_or": (torch.logical_or, _b(6), _b(6)),
    "logical_xor": (torch.logical_xor, _b(6), _b(6)), "outer": (torch.outer, _f(3), _f(4)),
}
CASES = [Case(name, [x], fn) for name, (fn, x) in UNARY.items()]
CASES += [Case(name, [a, b], fn) for name, (fn, a, b) in BINARY.items()]
CASES += [  # TVM's integer division truncates (TIR Div); floor_* round down; mod truncates.
    Case("divide", [I34, J34], lambda a, b: torch.div(a, b, rounding_mode="trunc"),
         id="divide-int"),
    Case("floor_divide", [I34, J34], torch.floor_divide, id="floor_divide-int"),
    Case("floor_mod", [I34, J34], torch.remainder, id="floor_mod-int"),
    Case("mod", [I34, J34], torch.fmod, id="mod-int"),
]

# --------------------------------------------------------------------------------------------
# Manipulation, indexing, creation, reductions.

X234 = _f(2, 3, 4)
IDX = np.array([[0, 2], [1, 1]], "int64")
CASES += [
    Case("reshape", [X234, (4, -1)], lambda x, s: x.reshape(4, -1)),
    Case("permute_dims", [X234], lambda x: x.permute(2, 1, 0)),
    Case("permute_dims", [X234], lambda x: x.permute(1, 2, 0), axes=[1, 2, 0], id="permute"),
    Case("expand_dims", [X234], lambda x: x[None, ..., None], axis=[0, -1]),
    Case("squeeze", [_f(1, 3, 1)], lambda x: x.squeeze(0), axis=[0]),
    Case("squeeze", [_f(1, 3, 1)], lambda x: x.squeeze(), id="squeeze-all"),
    Case("flatten", [X234], torch.flatten),
    Case("concat", [[_f(2, 3), _f(1, 3)]], lambda ts: torch.cat(ts, 0)),
    Case("concat", [[_f(2, 3), _f(2, 1)]], lambda ts: torch.cat(ts, 1), axis=1, id="concat1"),
    Case("split", [_f(7, 2)], lambda x: torch.chunk(x, 3), indices_or_sections=3),
    Case("split", [_f(2, 7)], lambda x: torch.tensor_split(x, [2, 5], 1),
         indices_or_sections=[2, 5], axis=1, id="split-indices"),
    Case("stack", [[_f(2, 3), _f(2, 3)]], lambda ts: torch.stack(ts, 1), axis=1),
    Case("broadcast_to", [_f(3, 1), (2, 3, 4)], lambda x, s: x.expand(2, 3, 4)),
    Case("strided_slice", [X234, [1, 2], [0, 1], [3, 4], [2, 2]], lambda x, *_: x[:, 0:3:2, 1::2]),
    Case("strided_slice", [X234, [2], [3], [-100], [-2]], lambda x, *_: x[..., [3, 1]],
         id="strided_slice-negative"),
    Case("dynamic_strided_slice", [X234, *(np.array(v, "int64") for v in
                                          ([1, 0, 0], [2, 3, 4], [1, 2, 3]))],
         lambda x, *_: x[1:2, 0:3:2, 0:4:3]),
    Case("take", [X234, IDX], lambda x, i: x.index_select(1, i.reshape(-1)).reshape(2, 2, 2, 4),
         axis=1),
    Case("take", [_f(6), IDX], lambda x, i: torch.take(x, i), id="take-flat"),
    Case("take", [_f(5), np.array([-1, 7], "int64")], lambda x, i: x[[0, 4]], axis=0,
         mode="clip", id="take-clip"),
    Case("gather_elements", [X234, _i(2, 3, 2, lo=0, hi=4, dtype="int64")],
         lambda x, i: torch.gather(x, 2, i), axis=2),
    # gather_nd / scatter_nd: the LAST axis of indices is the index tuple (ONNX, TVM Relax).
    Case("gather_nd", [X234, np.array([[0, 1], [1, 2]], "int64")],
         lambda x, i: x[i[:, 0], i[:, 1]]),
    Case("gather_nd", [X234, np.array([[1], [0]], "int64")],
         lambda x, i: torch.stack([x[0, 1], x[1, 0]]), batch_dims=1, id="gather_nd-batch"),
    Case("scatter_elements", [_f(3, 4), np.array([[1, 0, 2, 3]], "int64"), _f(1, 4)],
         lambda d, i, u: d.scatter(1, i, u), axis=1),
    Case("scatter_elements", [_f(3, 4), np.array([[1, 1, 2, 1]], "int64"), _f(1, 4)],
         lambda d, i, u: d.scatter_reduce(1, i, u, "sum"), axis=1, reduction="add",
         id="scatter_elements-add"),
    Case("scatter_nd", [_f(3, 4), np.array([[0], [2]], "int64"), _f(2, 4)],
         lambda d, i, u: d.index_put((i[:, 0],), u)),
    Case("scatter_nd", [_f(3, 4), np.array([[0], [0]], "int64"), _f(2, 4)],
         lambda d, i, u: d.index_put((i[:, 0],), u, accumulate=True), reduction="add",
         id="scatter_nd-add"),
    Case("one_hot", [np.array([0, 2, 1], "int32"), 5.0, -1.0],
         lambda i, on, off: F.one_hot(i.long(), 3).float().T * 6 - 1, depth=3, axis=0),
    Case("where", [_b(3, 4), X34, Y4], torch.where),
    Case("clip", [X34, -0.5, 0.5], torch.clamp),
    Case("astype", [X34 * 3], lambda x: x.to(torch.int32), dtype="int32"),
    Case("reinterpret", [X34], lambda x: x.view(torch.int32), dtype="int32"),
    Case("cumsum", [X234], lambda x: x.cumsum(1), axis=1),
    Case("cumsum", [I34], lambda x: x.flatten().cumsum(0) - x.flatten(), exclusive=True,
         id="cumsum-exclusive-flat"),
    # integers accumulate in their own dtype and wrap, as TVM's cumsum does (torch would
    # promote int32 to int64 unless told the dtype)
    Case("cumsum", [np.full((2, 5), 2**30, "int32")], lambda x: x.cumsum(1, dtype=torch.int32),
         axis=1, id="cumsum-int32-wraps"),
    Case("cumprod", [X234], lambda x: x.cumprod(2), axis=2),
    Case("collapse_sum_to", [X234, (3, 1)], lambda x, s: x.sum_to_size(3, 1)),
    Case("collapse_sum_like", [X234, _f(4)], lambda x, t: x.sum_to_size(4)),
    Case("tile", [_f(2, 3)], lambda x: x.tile(2, 1, 2), repeats=[2, 1, 2]),
    Case("repeat", [_f(2, 3)], lambda x: x.repeat_interleave(2, 1), repeats=2, axis=1),
    Case("repeat", [_f(2, 3)], lambda x: x.repeat_interleave(3), repeats=3, id="repeat-flat"),
    Case("flip", [X234], lambda x: x.flip(1), axis=1),
    Case("sort", [X34], lambda x: torch.sort(x, 0, descending=True)[0], axis=0,
         descending=True),
    Case("argsort", [X34], lambda x: torch.sort(x, dim=1, stable=True)[1]),
    Case("topk", [X34], lambda x: torch.topk(x, 2, 1), k=2, axis=1),
    Case("topk", [X34], lambda x: torch.topk(x, 2, 0, largest=False)[1], k=2, axis=0,
         ret_type="indices", largest=False, id="topk-indices"),
    Case("nonzero", [np.array([[0, 1], [2, 0]], "int32")], lambda x: torch.nonzero(x).T),
    Case("einsum", [[_f(2, 3), _f(3, 4)]], lambda ts: torch.einsum("ij,jk->ik", *ts),
         subscripts="ij,jk->ik"),
    Case("matmul", [_f(2, 2, 3), _f(3, 4)], torch.matmul),
    Case("tril", [X234, 1], lambda x, k: x.tril(1)),
    Case("triu", [X234, -1], lambda x, k: x.triu(-1)),
    Case("shape_of", [X234], (2, 3, 4)),
    Case("shape_to_tensor", [relax.ShapeExpr([2, 5])], np.array([2, 5], "int64")),
    Case("tensor_to_shape", [np.array([3, 1], "int64")], (3, 1)),
    Case("size", [X234], lambda x: torch.tensor(x.numel())),
    Case("meshgrid", [[_f(2), _f(3)]], lambda ts: torch.meshgrid(*ts, indexing="xy"),
         indexing="xy"),
    Case("index_tensor", [X234, [np.array([0, 1], "int64"), np.array([2, 0], "int64")]],
         lambda x, i: x[i[0], i[1]]),
    Case("index_put", [_f(3, 4), [np.array([0, 0], "int64"), np.array([1, 1], "int64")],
                       _f(2)],
         lambda x, i, v: x.index_put(tuple(i), v, accumulate=True), accumulate=True),
    Case("index_copy", [_f(2, 5, 3), np.array([4, 1], "int64"), _f(2, 2, 3)],
         lambda x, i, s: torch.index_copy(x, 1, i, s), axis=1),
    Case("slice_scatter", [_f(6, 2), _f(2, 2), 1, 5, 2],
         lambda x, s, *_: torch.slice_scatter(x, s, 0, 1, 5, 2)),
    Case("reverse_sequence", [np.arange(12, dtype="int32").reshape(3, 4),
                              np.array([2, 3, 1], "int32")],
         np.array([[1, 0, 2, 3], [6, 5, 4, 7], [8, 9, 10, 11]]), seq_axis=1, batch_axis=0),
    Case("bucketize", [X34, np.array([-1, 0, 1], "float32")],
         lambda x, b: torch.bucketize(x, b, right=True), right=True),
    Case("hamming_window", [5, 1, 0.54, 0.46],
         lambda *_: torch.hamming_window(5, True, 0.54, 0.46), dtype="float32"),
    Case("unique", [np.array([3, 1, 3, 2, 1], "int32")],
         lambda x: torch.unique(x, return_inverse=True, return_counts=True),
         return_inverse=True, return_counts=True),
    Case("unique", [np.array([3, 1, 3, 2, 1], "int32"), False, True],
         (np.array([3, 1, 2]), np.array([0, 1, 3])), id="unique-unsorted-index"),
    Case("layout_transform", [_f(1, 2, 3, 4)], lambda x: x.permute(0, 2, 3, 1),
         index_map=lambda n, c, h, w: (n, h, w, c)),
    Case("layout_transform", [_f(2, 6)], lambda x: F.pad(x, (0, 2)).reshape(2, 2, 4),
         index_map=lambda n, c: (n, c // 4, c % 4), id="layout_transform-split"),
    Case("full", [(2, 3), np.array(1.5, "float32")], lambda *_: torch.full((2, 3), 1.5)),
    Case("full_like", [I34, np.array(7, "int32")], lambda x, v: torch.full_like(x, 7)),
    Case("ones", [(2, 3)], lambda s: torch.ones(2, 3, dtype=torch.int64), dtype="int64"),
    Case("zeros", [(2, 3)], lambda s: torch.zeros(2, 3), dtype="float32"),
    Case("ones_like", [X34], torch.ones_like), Case("zeros_like", [I34], torch.zeros_like),
    Case("arange", [1, 10, 3], lambda *_: torch.arange(1, 10, 3), dtype="int64"),
    Case("eye", [3, 4, 1], np.eye(3, 4, 1, dtype="float32")),
    Case("eye_like", [_f(2, 3), 0], lambda x, k: torch.eye(2, 3)),
]
REDUCE = {"sum": torch.sum, "mean": torch.mean, "max": torch.amax, "min": torch.amin,
          "std": lambda x, dim, keepdim: torch.std(x, dim, correction=0, keepdim=keepdim),
          "variance": lambda x, dim, keepdim: torch.var(x, dim, correction=0, keepdim=keepdim)}
for _name, _fn in REDUCE.items():
    CASES += [Case(_name, [X234], lambda x, fn=_fn: fn(x, (0, 2), keepdim=True), axis=[0, 2],
                   keepdims=True),
              Case(_name, [X234], lambda x, fn=_fn: fn(x, (0, 1, 2), keepdim=False),
                   id=_name + "-all")]
CASES += [
    Case("prod", [X234], lambda x: x.prod(1), axis=[1]),
    Case("argmax", [X234], lambda x: x.argmax(2), axis=2),
    Case("argmin", [X234], lambda x: x.argmin(keepdim=True).reshape(1, 1, 1), keepdims=True),
    Case("median", [X234], lambda x: torch.median(x, 1), axis=[1]),
    Case("median", [_f(2, 4)], lambda x: torch.median(x), id="median-all"),
]

# --------------------------------------------------------------------------------------------
# nn, image, quantization, msc.

X = _f(2, 4, 7, 6)
W_CONV = _f(6, 2, 3, 3)
GAMMA, BETA, MEAN, VAR = _f(4), _f(4), _f(4), _f(4, lo=0.5, hi=1.5)
Q, K, V = _f(2, 5, 3, 4), _f(2, 6, 3, 4), _f(2, 6, 3, 5)


def _bsnh(fn):
    """torch's attention takes [b, heads, seq, dim]; Relax's nn.attention [b, seq, heads, dim]."""
    return lambda q, k, v, *rest: fn(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                     *rest).transpose(1, 2)


CASES += [
    Case("nn.conv2d", [X, W_CONV],
         lambda x, w: F.conv2d(F.pad(x, (2, 1, 1, 0)), w, stride=(2, 1), dilation=(1, 2),
                               groups=2),
         strides=(2, 1), padding=(1, 2, 0, 1), dilation=(1, 2), groups=2),
    Case("nn.conv2d", [X.transpose(0, 2, 3, 1), _f(6, 4, 3, 3).transpose(2, 3, 1, 0)],
         lambda x, w: F.conv2d(x.permute(0, 3, 1, 2), w.permute(3, 2, 0, 1), padding=1
                               ).permute(0, 2, 3, 1),
         padding=1, data_layout="NHWC", kernel_layout="HWIO", id="conv2d-nhwc"),
    Case("nn.conv1d", [_f(2, 4, 9), _f(3, 4, 3)],
         lambda x, w: F.conv1d(x, w, stride=2, padding=1, dilation=2), strides=2, padding=1,
         dilation=2),
    Case("nn.conv3d", [_f(1, 2, 5, 5, 5), _f(3, 2, 2, 2, 2)],
         lambda x, w: F.conv3d(x, w, stride=2, padding=1), strides=2, padding=1),
    Case("nn.conv2d_transpose", [X, _f(4, 3, 3, 3)],
         lambda x, w: F.conv_transpose2d(x, w, stride=(2, 3), padding=(0, 2), output_padding=1,
                                         groups=2, dilation=2),
         strides=(2, 3), padding=(0, 2), output_padding=1, groups=2, dilation=2),
    Case("nn.conv1d_transpose", [_f(2, 4, 9), _f(4, 2, 3)],
         lambda x, w: F.conv_transpose1d(x, w, stride=2, padding=1, output_padding=1),
         strides=2, padding=1, output_padding=1),
    Case("nn.conv3d_transpose", [_f(1, 2, 3, 3, 3), _f(2, 3, 2, 2, 2)],
         lambda x, w: F.conv_transpose3d(x, w, stride=2), strides=2),
    Case("nn.max_pool2d", [X], lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True),
         pool_size=3, strides=2, padding=1, ceil_mode=True),
    Case("nn.max_pool2d", [X], lambda x: F.max_pool2d(x, 2, 1, dilation=2), pool_size=2,
         dilation=2, id="max_pool2d-dilation"),
    Case("nn.max_pool1d", [_f(2, 4, 9)], lambda x: F.max_pool1d(x, 3, 2), pool_size=3,
         strides=2),
    Case("nn.max_pool3d", [_f(1, 2, 5, 5, 5)], lambda x: F.max_pool3d(x, 2, 2), pool_size=2,
         strides=2),
    Case("nn.avg_pool2d", [X],
         lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=True),
         pool_size=3, strides=2, padding=1, ceil_mode=True, count_include_pad=True),
    Case("nn.avg_pool2d", [X], lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
         pool_size=3, strides=2, padding=1, id="avg_pool2d-exclude-pad"),
    Case("nn.avg_pool1d", [_f(2, 4, 9)], lambda x: F.avg_pool1d(x, 2, 2), pool_size=2,
         strides=2),
    Case("nn.avg_pool3d", [_f(1, 2, 5, 5, 5)], lambda x: F.avg_pool3d(x, 2, 1, 1), pool_size=2,
         padding=1),
    Case("nn.adaptive_avg_pool2d", [X], lambda x: F.adaptive_avg_pool2d(x, (3, 4)),
         output_size=(3, 4)),
    Case("nn.adaptive_avg_pool1d", [_f(2, 4, 9)], lambda x: F.adaptive_avg_pool1d(x, 4),
         output_size=4),
    Case("nn.adaptive_avg_pool3d", [_f(1, 2, 5, 5, 5)],
         lambda x: F.adaptive_avg_pool3d(x, (2, 3, 1)), output_size=(2, 3, 1)),
    Case("nn.batch_norm", [X, GAMMA, BETA, MEAN, VAR],
         lambda x, g, b, m, v: (F.batch_norm(x, m, v, g, b, eps=1e-3), m, v), axis=1,
         epsilon=1e-3, training=False),
    Case("nn.layer_norm", [X, _f(7, 6), _f(7, 6)],
         lambda x, g, b: F.layer_norm(x, (7, 6), g, b), axes=[-2, -1]),
    Case("nn.group_norm", [X, GAMMA, BETA], lambda x, g, b: F.group_norm(x, 2, g, b),
         num_groups=2, channel_axis=1, axes=[2, 3]),
    Case("nn.instance_norm", [X, GAMMA, BETA],
         lambda x, g, b: F.instance_norm(x, weight=g, bias=b), channel_axis=1, axes=[2, 3]),
    Case("nn.rms_norm", [X, _f(6)], lambda x, w: F.rms_norm(x, (6,), w, eps=1e-5)),
    Case("nn.softmax", [X], lambda x: F.softmax(x, 1), axis=1),
    Case("nn.log_softmax", [X], lambda x: F.log_softmax(x, -1)),
    Case("nn.relu", [X], F.relu), Case("nn.gelu", [X], F.gelu),
    Case("nn.gelu_tanh", [X], lambda x: F.gelu(x, approximate="tanh")),
    Case("nn.silu", [X], F.silu), Case("nn.selu", [X], F.selu),
    Case("nn.softplus", [X * 10], lambda x: F.softplus(x, 2.0, 5.0), beta=2.0, threshold=5.0),
    Case("nn.leakyrelu", [X], lambda x: F.leaky_relu(x, 0.2), alpha=0.2),
    Case("nn.prelu", [X, GAMMA], F.prelu),
    Case("nn.pad", [X], lambda x: F.pad(x, (3, 0, 1, 2), value=1.5),
         pad_width=[0, 0, 0, 0, 1, 2, 3, 0], pad_value=1.5),
    Case("nn.pad", [X], lambda x: F.pad(x, (3, 0, 1, 2), mode="reflect"),
         pad_width=[0, 0, 0, 0, 1, 2, 3, 0], pad_mode="reflect", id="pad-reflect"),
    Case("nn.pixel_shuffle", [_f(1, 8, 3, 3)], lambda x: F.pixel_shuffle(x, 2),
         upscale_factor=2),
    Case("nn.batch_flatten", [X], lambda x: x.flatten(1)),
    Case("nn.attention", [Q, K, V], _bsnh(F.scaled_dot_product_attention)),
    Case("nn.attention", [Q, K, V],
         _bsnh(lambda q, k, v: F.scaled_dot_product_attention(
             q, k, v, attn_mask=torch.ones(5, 6, dtype=torch.bool).tril(1))),
         causal_mask="BottomRight", id="attention-causal"),
    Case("nn.attention_bias", [Q, K, V, _f(2, 3, 5, 6)],
         _bsnh(lambda q, k, v, b: F.scaled_dot_product_attention(q, k, v, b, scale=0.3)),
         scale=0.3),
    Case("nn.attention_var_len", [_f(1, 5, 2, 4), _f(1, 5, 2, 4), _f(1, 5, 2, 3),
                                  np.array([0, 2, 5], "int32"), np.array([0, 2, 5], "int32"),
                                  np.array(3, "int32"), np.array(3, "int32")],
         lambda q, k, v, *_: torch.cat([_bsnh(F.scaled_dot_product_attention)(
             q[:, a:b], k[:, a:b], v[:, a:b]) for a, b in ((0, 2), (2, 5))], 1)),
    Case("nn.nll_loss", [_f(4, 5), np.array([1, 0, -100, 4], "int64"), _f(5, lo=0.1, hi=1)],
         F.nll_loss),
    Case("nn.nll_loss", [_f(4, 5), np.array([1, 0, 3, 4], "int64")],
         lambda p, t: F.nll_loss(p, t, reduction="none"), reduction="none", id="nll-none"),
    Case("nn.cross_entropy_with_logits", [_f(3, 4), _f(3, 4, lo=0, hi=1)],
         lambda x, y: -(x * y).sum() / 3),
    Case("nn.dense", [_f(2, 3), _f(4, 3)], F.linear),
    Case("nn.batch_matmul", [_f(2, 3, 4), _f(2, 5, 4)], lambda x, y: x @ y.transpose(1, 2)),
    Case("nn.bias_add", [X, GAMMA], lambda x, b: x + b[:, None, None]),
    Case("msc.linear", [_f(2, 3), _f(4, 3)], F.linear),
    Case("msc.linear_bias", [_f(2, 3), _f(4, 3), _f(4)], F.linear),
    Case("msc.conv1d_bias", [_f(2, 4, 9), _f(3, 4, 3), _f(3)],
         lambda x, w, b: F.conv1d(x, w, b, padding=1), padding=1),
    Case("msc.conv2d_bias", [X, _f(3, 4, 3, 3), _f(3)],
         lambda x, w, b: F.conv2d(x, w, b, stride=2), strides=2),
    Case("msc.embedding", [np.array([[0, 2], [1, 0]], "int32"), _f(3, 4)],
         lambda i, w: F.embedding(i.long(), w)),
    Case("msc.attention", [_f(2, 3, 5, 4), _f(2, 3, 6, 4), _f(2, 3, 6, 5)],
         F.scaled_dot_product_attention),
    Case("msc.gelu", [X], F.gelu),
    Case("msc.matmul", [_f(2, 2, 3), _f(2, 3, 4)], torch.matmul),
]
XI = _f(1, 2, 4, 5)
GRID = _f(1, 2, 3, 4, lo=-1.2, hi=1.2)
CASES += [
    Case("image.resize2d", [XI, (7, 3)],
         lambda x, s: F.interpolate(x, (7, 3), mode="bilinear", align_corners=False)),
    Case("image.resize2d", [XI, (7, 3)],
         lambda x, s: F.interpolate(x, (7, 3), mode="bilinear", align_corners=True),
         coordinate_transformation_mode="align_corners", id="resize2d-align-corners"),
    # bicubic: torch sums the 4 taps in float32 in another order (1e-4 is ~ulps of 4 terms).
    Case("image.resize2d", [XI, (7, 9)],
         lambda x, s: F.interpolate(x, (7, 9), mode="bicubic", align_corners=False),
         method="cubic", rtol=1e-4, atol=1e-5, id="resize2d-cubic"),
    Case("image.resize2d", [XI, (7, 9)], lambda x, s: F.interpolate(x, (7, 9), mode="nearest"),
         method="nearest_neighbor", coordinate_transformation_mode="asymmetric",
         rounding_method="floor", id="resize2d-nearest"),
    Case("image.resize3d", [_f(1, 1, 2, 3, 4), (3, 4, 6)],
         lambda x, s: F.interpolate(x, (3, 4, 6), mode="trilinear", align_corners=False)),
    Case("image.affine_grid", [_f(2, 2, 3), (4, 5)],
         lambda t, s: F.affine_grid(t, (2, 1, 4, 5), align_corners=True).permute(0, 3, 1, 2)),
    Case("image.affine_grid", [_f(2, 2, 3), (4, 5)],
         lambda t, s: F.affine_grid(t, (2, 1, 4, 5), align_corners=False).permute(0, 3, 1, 2),
         align_corners=False, id="affine_grid-no-align"),
] + [
    Case("image.grid_sample", [XI, GRID],
         lambda x, g, m=m, p=p, a=a: F.grid_sample(x, g.permute(0, 2, 3, 1), mode=m,
                                                   padding_mode=p, align_corners=a),
         method=m, padding_mode=p, align_corners=a, id=f"grid_sample-{m}-{p}-{a}")
    for m in ("bilinear", "nearest") for p in ("zeros", "border", "reflection")
    for a in (True, False)
]
QX = _f(3, 4)


def _quiet(fn):
    """torch deprecates its quantized tensors (with a warning) but still has the ops."""
    def call(*args):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return fn(*args)
    return call


CASES += [
    Case("quantize", [QX, np.array(0.02, "float32"), np.array(3, "int8")],
         _quiet(lambda x, s, z: torch.quantize_per_tensor(x, 0.02, 3, torch.qint8).int_repr())),
    Case("quantize", [QX, np.array([0.01, 0.02, 0.03, 0.04], "float32"),
                      np.array([0, 1, 2, 3], "int8")],
         _quiet(lambda x, s, z: torch.quantize_per_channel(x, s.double(), z.long(), 1,
                                                           torch.qint8).int_repr()),
         axis=1, id="quantize-per-channel"),
    Case("dequantize", [_i(3, 4, lo=-100, hi=100, dtype="int8"), np.array(0.5, "float32"),
                        np.array(2, "int8")],
         _quiet(lambda x, s, z: torch._make_per_tensor_quantized_tensor(x, 0.5, 2).dequantize())),
    # int4 codes two per byte (element 2j low), 2 groups of 16 for K = 30 (2 padding codes)
    Case("matmul_nbits", [_f(2, 30), _i(3, 2, 8, lo=0, hi=256, dtype="uint8"), _f(3, 2),
                          _i(3, 2, lo=0, hi=16, dtype="uint8")],
         lambda x, w, s, z: F.linear(x, ((torch.stack((w & 15, w >> 4), -1).flatten(-2).float()
                                          - z.float()[..., None]) * s[..., None]).flatten(1)[:, :30]),
         in_features=30, bits=4, block_size=16, rtol=1e-5, atol=1e-5),
    Case("matmul_nbits", [_f(1, 2, 20), _i(4, 1, 20, lo=0, hi=256, dtype="uint8"), _f(4, 1),
                          _i(4, 1, lo=0, hi=256, dtype="uint8")],
         lambda x, w, s, z: F.linear(x, (w.float() - z.float()[..., None]).flatten(1) * s),
         in_features=20, bits=8, block_size=20, id="matmul_nbits-int8-per-channel",
         rtol=1e-5, atol=1e-4),
]


def _onnx_reference(op_type: str, opset: int, **attrs):
    """Where torch has no such op: onnx's own reference evaluator on a one-node model."""
    def ref(*args):
        from msc.frontends.onnx.testing import node_model, run_reference

        feeds = {f"in{k}": _np(a) for k, a in enumerate(args)}
        return torch.from_numpy(np.asarray(run_reference(
            node_model(op_type, feeds, opset=opset, **attrs), feeds)[0]))
    return ref


_BOXES = np.concatenate([RNG.uniform(0, 3, (1, 6, 2)), RNG.uniform(3, 5, (1, 6, 2))],
                        -1).astype("float32")
_DEFORM = [_f(1, 2, 5, 5, lo=0, hi=1), _f(3, 2, 2, 2), _f(1, 8, 4, 4, lo=-1, hi=1)]
CASES += [
    Case("det", [_f(2, 3, 3)], torch.linalg.det),
    Case("col2im", [_f(1, 2 * 4, 12), np.array([5, 6], "int64"), np.array([2, 2], "int64")],
         lambda x, i, b: F.fold(x, (5, 6), (2, 2), padding=(1, 1), stride=(2, 2)),
         pads=[1, 1, 1, 1], strides=[2, 2]),
    Case("image.deform_conv2d", [*_DEFORM, np.zeros(0, "float32"), np.zeros(0, "float32")],
         lambda x, w, o, b, m: _onnx_reference("DeformConv", 19)(x, w, o), rtol=1e-4,
         atol=1e-5),
    Case("vision.non_max_suppression",
         [_BOXES, _f(1, 2, 6, lo=0, hi=1), np.array([3], "int64"), np.array([0.2], "float32"),
          np.array([0.1], "float32")], _onnx_reference("NonMaxSuppression", 11)),
]
