"""The transformer kernels against numpy references on small shapes: fused attention
(grouped heads, broadcast bias, both causal modes, value dims over one GEMM panel, fully
masked rows), layer norm (with the residual add), elementwise expressions (gelu, tanh-gelu,
silu, a chain) and the dense + activation kernel; each also bitwise equal on 1 and 2 threads.

Tolerances: 1e-5 relative + absolute for the float32 kernels against float64 numpy (the GEMMs
sum in another order, exp / erf / tanh are <= 2 ulp)."""

import math

import numpy as np
import pytest

from msc.backend.kernels.activation import ExprKernel, evaluate
from msc.backend.kernels.attention import AttentionKernel, AttentionLayout
from msc.backend.kernels.dense import GemmRunner
from msc.backend.kernels.dense_act import DenseActKernel
from msc.backend.kernels.norm import LayerNormKernel
from msc.backend.runtime.threads import num_threads
from msc.errors import ShapeError
from msc.relax.op.numpy_ref_nn import ACTIVATIONS

RNG = np.random.default_rng(0)
TOL = {"rtol": 1e-5, "atol": 1e-5}


def _randn(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def _attention_ref(q, k, v, bias, scale, causal, nan_to_zero=False):
    """float64 BSNH attention; key / value heads repeat for grouped queries."""
    rep = q.shape[2] // k.shape[2]
    q, k, v = (x.astype(np.float64).swapaxes(1, 2) for x in (q, np.repeat(k, rep, 2),
                                                             np.repeat(v, rep, 2)))
    s = q @ k.swapaxes(-1, -2) * scale + (0 if bias is None else bias)
    n_q, n_k = s.shape[-2:]
    if causal:
        offset = 0 if causal == "TopLeft" else n_k - n_q
        s = np.where(np.arange(n_k)[None] <= np.arange(n_q)[:, None] + offset, s, -np.inf)
    with np.errstate(invalid="ignore"):
        p = np.exp(s - s.max(-1, keepdims=True))
        out = (p / p.sum(-1, keepdims=True)) @ v
    out = out.swapaxes(1, 2)
    return np.nan_to_num(out, nan=0.0) if nan_to_zero else out


ATTENTION_CASES = {  # (b, s, t, heads, kv heads, h, hv, bias shape, causal)
    "plain": (1, 16, 16, 4, 4, 8, 8, None, None),
    "grouped_bias_per_head": (2, 7, 9, 4, 2, 5, 3, (1, 4, 1, 9), None),
    "full_bias_top_left": (1, 20, 20, 2, 2, 16, 16, (1, 1, 20, 20), "TopLeft"),
    "wide_values_bottom_right": (1, 5, 9, 3, 3, 70, 70, None, "BottomRight"),
    "long_causal_blocks": (1, 80, 80, 2, 2, 8, 8, None, "TopLeft"),
    # rows of 39 / 33 keys: the softmax's vector passes end in a masked tail
    "wav2vec2_rows_key_bias": (1, 39, 39, 4, 4, 8, 8, (1, 1, 1, 39), None),
    "one_key_tail": (1, 3, 33, 2, 2, 8, 8, None, "BottomRight"),
}


def _attention_case(name):
    b, s, t, n, nk, h, hv, bias_shape, causal = ATTENTION_CASES[name]
    q, k, v = _randn(b, s, n, h), _randn(b, t, nk, h), _randn(b, t, nk, hv)
    bias = _randn(*bias_shape) if bias_shape else None
    layout = AttentionLayout.bsnh(q.shape, k.shape, v.shape, bias_shape)
    args = [q, k, v] + ([bias] if bias is not None else [])
    return layout, args, causal, (b, s, n, hv)


@pytest.mark.parametrize("name", list(ATTENTION_CASES))
def test_attention_matches_numpy(name):
    layout, args, causal, out_shape = _attention_case(name)
    kernel = AttentionKernel(layout, 0.3, causal)
    out = kernel(*args, np.empty(out_shape, np.float32))
    bias = args[3] if len(args) > 3 else None
    np.testing.assert_allclose(out, _attention_ref(*args[:3], bias, 0.3, causal), **TOL)


@pytest.mark.parametrize("nan_to_zero", [False, True])
def test_attention_rows_without_keys(nan_to_zero):
    """BottomRight with more queries than keys: the first rows see no key at all."""
    q, k, v = _randn(1, 12, 2, 8), _randn(1, 3, 2, 8), _randn(1, 3, 2, 8)
    kernel = AttentionKernel(AttentionLayout.bsnh(q.shape, k.shape, v.shape), 0.5,
                             "BottomRight", nan_to_zero=nan_to_zero)
    out = kernel(q, k, v, np.empty((1, 12, 2, 8), np.float32))
    ref = _attention_ref(q, k, v, None, 0.5, "BottomRight", nan_to_zero)
    assert np.isnan(ref).any() != nan_to_zero
    np.testing.assert_array_equal(np.isnan(out), np.isnan(ref))
    np.testing.assert_allclose(np.nan_to_num(out), np.nan_to_num(ref), **TOL)


def test_attention_checks_its_arrays():
    layout, args, causal, out_shape = _attention_case("plain")
    kernel = AttentionKernel(layout, 0.3, causal)
    with pytest.raises(ShapeError, match="query"):
        kernel(args[0][:, :8], *args[1:], np.empty(out_shape, np.float32))


@pytest.mark.parametrize("residual", [False, True])
def test_layer_norm_matches_numpy(residual):
    x, r = _randn(3, 5, 40), _randn(3, 5, 40)
    gamma, beta = _randn(40), _randn(40)
    kernel = LayerNormKernel(x.shape, 40, gamma, beta, 1e-5, residual=residual)
    out = kernel(*([x, r] if residual else [x]), np.empty_like(x))
    s = (x + r if residual else x).astype(np.float64)
    mean, var = s.mean(-1, keepdims=True), s.var(-1, keepdims=True)
    np.testing.assert_allclose(out, (s - mean) / np.sqrt(var + 1e-5) * gamma + beta, **TOL)


GELU_TANH_CHAIN = ("multiply", ("multiply", ("in", 0), ("const", 0.5)), (
    "add", ("tanh", ("multiply", ("add", ("in", 0), ("multiply", ("power", ("in", 0), (
        "const", 3.0)), ("const", 0.044715))), ("const", math.sqrt(2 / math.pi)))),
    ("const", 1.0)))


@pytest.mark.parametrize("expr, ref", [
    (("nn.gelu", ("in", 0)), ACTIVATIONS["nn.gelu"]),
    (("nn.gelu_tanh", ("in", 0)), ACTIVATIONS["nn.gelu_tanh"]),
    (("nn.silu", ("in", 0)), ACTIVATIONS["nn.silu"]),
    (GELU_TANH_CHAIN, ACTIVATIONS["nn.gelu_tanh"]),
    (("subtract", ("exp", ("in", 0)), ("divide", ("in", 1), ("const", 4.0))),
     lambda x, y: np.exp(x) - y / 4),
], ids=["gelu", "gelu_tanh", "silu", "tanh_chain", "two_inputs"])
def test_expressions_match_numpy(expr, ref):
    xs = [_randn(7, 33, scale=3.0) for _ in range(2)]
    kernel = ExprKernel(expr, xs[0].shape)
    args = xs[: len(kernel.inputs)]
    out = kernel(*args, np.empty_like(xs[0]))
    np.testing.assert_allclose(out, ref(*(a.astype(np.float64) for a in args)), **TOL)
    if expr[0] in ("multiply", "subtract"):  # ops with a numpy form: evaluate() agrees
        np.testing.assert_allclose(out, evaluate(expr, args), **TOL)


@pytest.mark.parametrize("shape", [(5,), (64,), (3, 67), (2, 16, 16)])
def test_expression_sizes_whole_unrolled_and_tail_vectors(shape):
    """The vector loop's parts: fewer floats than a vector (the masked tail alone), whole
    unrolled steps only, and every part; silu and a clip (hard-swish) expression."""
    x = _randn(*shape, scale=4.0)
    for expr, ref in ((("nn.silu", ("in", 0)), ACTIVATIONS["nn.silu"]),
                      (("multiply", ("in", 0), ("clip", ("add", ("in", 0), ("const", 3.0)),
                                                ("const", 0.0), ("const", 6.0))),
                       lambda v: v * np.clip(v + 3, 0, 6))):
        out = ExprKernel(expr, shape)(x, np.full(shape, np.nan, np.float32))
        np.testing.assert_allclose(out, ref(x.astype(np.float64)), **TOL)


def test_dense_act_matches_numpy():
    x, w, b = _randn(2, 9, 48), _randn(48, 300, scale=0.2), _randn(300)
    kernel = DenseActKernel(GemmRunner(w, b, relu=False), ("nn.gelu", ("in", 0)))
    out = kernel(x, np.empty((2, 9, 300), np.float32))
    ref = ACTIVATIONS["nn.gelu"](x.astype(np.float64) @ w + b)
    np.testing.assert_allclose(out, ref, **TOL)


def _threaded_cases():
    """(name, kernel, args, out shape) big enough that each kernel splits on 2 threads."""
    layout, args, causal, out_shape = _attention_case("grouped_bias_per_head")
    yield "attention", AttentionKernel(layout, 0.3, causal), args, out_shape
    x, r = _randn(512, 512), _randn(512, 512)
    yield "layer_norm", LayerNormKernel(x.shape, 512, _randn(512), _randn(512), 1e-5,
                                        residual=True), [x, r], x.shape
    yield "gelu", ExprKernel(("nn.gelu", ("in", 0)), x.shape), [x], x.shape
    a, w = _randn(64, 256), _randn(256, 1024, scale=0.1)
    yield "dense_act", DenseActKernel(GemmRunner(w, _randn(1024), relu=False),
                                      ("nn.gelu_tanh", ("in", 0))), [a], (64, 1024)


@pytest.mark.parametrize("case", list(_threaded_cases()), ids=lambda c: c[0])
def test_one_and_two_threads_bitwise_equal(case):
    _, kernel, args, shape = case
    one = kernel(*args, np.empty(shape, np.float32)).copy()
    with num_threads(2):
        two = kernel(*args, np.full(shape, np.nan, np.float32))
    np.testing.assert_array_equal(one, two)


def test_attention_and_layer_norm_on_the_avx2_path(tmp_path):
    """8-lane vectors (``MSC_CPU_ISA=avx2``, a fresh kernel cache): the softmax's masked
    vector passes and tree reductions, the expression loops' whole and tail vectors, match
    numpy as the 16-lane ones do."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, MSC_CPU_ISA="avx2", MSC_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-m", "pytest", "-o", "addopts=", "-q", "-p",
                          "no:cacheprovider", __file__, "-k",
                          "(attention or layer_norm or expression or dense_act) and not avx2"],
                         check=False, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:]
    assert " passed" in out.stdout and "failed" not in out.stdout
