"""relax.build's pattern pass (msc/backend/fuse/patterns): transformer blocks written the way the
frontends write them build into the fused kernels (ex.stats names them), read heads through
views (no transposes left), and compute what the ops' numpy references compute, op by op
(tolerance 1e-5 relative + absolute: the fused kernels sum in another order)."""

import math

import numpy as np
import pytest

from msc import relax
from msc.relax import op as R
from tests.helpers.relax_modules import one_function_module as _module
from tests.helpers.relax_modules import tensor as _tensor
from tests.helpers.torch_tools import run_relax

RNG = np.random.default_rng(0)
TOL = {"rtol": 1e-5, "atol": 1e-5}
S, N, H = 24, 4, 8
D = N * H


def _const(*shape, scale=0.3):
    return relax.const((RNG.standard_normal(shape) * scale).astype(np.float32))


def _heads(bb, x, w, axes):
    """A projection split into heads: matmul, reshape to [1, S, N, H], permute_dims."""
    y = bb.emit(R.reshape(bb.emit(R.matmul(x, w)), (1, S, N, H)))
    return bb.emit(R.permute_dims(y, axes))


def _exported_attention(bb, x, mask):
    """The decomposed attention of an ONNX export (torch.onnx.export of BERT / GPT-2)."""
    q = _heads(bb, x, _const(D, D), [0, 2, 1, 3])
    k = _heads(bb, x, _const(D, D), [0, 2, 3, 1])
    v = _heads(bb, x, _const(D, D), [0, 2, 1, 3])
    c = relax.const(np.float32(H ** -0.25))
    scores = bb.emit(R.matmul(bb.emit(R.multiply(q, c)), bb.emit(R.multiply(k, c))))
    p = bb.emit(R.nn.softmax(bb.emit(R.add(scores, relax.const(mask))), axis=3))
    p = bb.emit(R.where(bb.emit(R.isnan(p)), relax.const(np.float32(0)), p))
    o = bb.emit(R.permute_dims(bb.emit(R.matmul(p, v)), [0, 2, 1, 3]))
    return bb.emit(R.matmul(bb.emit(R.reshape(o, (1, S, D))), _const(D, D)))


def _sdpa_attention(bb, x):
    """from_torch's form: BSNH views (permute pairs around the heads), nn.attention_bias with
    an all-zero constant mask."""
    q, k, v = (bb.emit(R.permute_dims(_heads(bb, x, _const(D, D), [0, 2, 1, 3]),
                                      [0, 2, 1, 3])) for _ in range(3))
    zeros = relax.const(np.zeros((1, 1, S, S), np.float32))
    o = bb.emit(R.nn.attention(q, k, v, zeros, scale=0.3))
    return bb.emit(R.matmul(bb.emit(R.reshape(o, (1, S, D))), _const(D, D)))


def _causal_mask(fill):
    keep = np.arange(S)[None] <= np.arange(S)[:, None]
    return np.where(keep, 0, fill).astype(np.float32).reshape(1, 1, S, S)


def _build_both(body, shape=(1, S, D)):
    x = relax.Var("x", _tensor(shape))
    mod = _module([x], lambda bb, x: body(bb, x))
    xv = RNG.standard_normal(shape).astype(np.float32)
    fused = relax.build(mod)
    (ref,) = run_relax(mod, [xv])
    out = relax.VirtualMachine(fused)["main"](xv).numpy()
    np.testing.assert_allclose(out, ref, **TOL)
    return fused


def _fused_node(ex, op):
    (node,) = [n for n in ex.programs["main"].nodes if n.op == op]
    return node


@pytest.mark.parametrize("fill", [-np.inf, np.finfo(np.float32).min, 0.5],
                         ids=["causal_inf", "causal_min", "dense_mask"])
def test_exported_attention_is_one_call(fill):
    mask = _causal_mask(fill)
    ex = _build_both(lambda bb, x: _exported_attention(bb, x, mask))
    assert ex.stats["fused"]["attention"] == 1
    ops = ex.stats["ops"]
    assert ops["attention"] == {"native": 1}
    assert not {"nn.softmax", "permute_dims", "where", "isnan", "multiply"} & set(ops)
    node = _fused_node(ex, "attention")
    # a causal mask becomes the kernel's key limit, a dense one stays an input (a constant)
    assert node.fn.bias_const is None if fill != 0.5 else node.fn.bias_const.shape == (
        1, 1, S, S)
    assert len(node.ins) == 3  # q, k, v read from the projections' outputs


def test_sdpa_attention_reads_heads_in_place_and_drops_a_zero_mask():
    ex = _build_both(_sdpa_attention)
    assert ex.stats["ops"]["attention"] == {"native": 1}
    assert "permute_dims" not in ex.stats["ops"] and "nn.attention_bias" not in ex.stats["ops"]
    node = _fused_node(ex, "attention")
    assert node.fn.bias_const is None and node.fn.layout.bias is None


def _gelu_tanh_chain(bb, y):
    """GPT-2's gelu as exporters write it: eight elementwise ops."""
    c = relax.const
    half = bb.emit(R.multiply(y, c(np.float32(0.5))))
    cube = bb.emit(R.multiply(bb.emit(R.power(y, c(np.float32(3.0)))), c(np.float32(0.044715))))
    inner = bb.emit(R.multiply(bb.emit(R.add(y, cube)), c(np.float32(math.sqrt(2 / math.pi)))))
    return bb.emit(R.multiply(half, bb.emit(R.add(bb.emit(R.tanh(inner)),
                                                   c(np.float32(1.0))))))


def test_dense_bias_gelu_chain_is_one_dense_call():
    def body(bb, x):
        y = bb.emit(R.add(bb.emit(R.matmul(x, _const(D, 256))), _const(256)))
        return _gelu_tanh_chain(bb, bb.emit(R.reshape(y, (1, 64, 256))))

    ex = _build_both(body, shape=(64, D))
    assert ex.stats["ops"] == {"dense+act": {"native": 1}}


def test_residual_add_layer_norm_is_one_call():
    def body(bb, x):
        y = bb.emit(R.add(bb.emit(R.matmul(x, _const(D, D))), x))
        return bb.emit(R.nn.layer_norm(y, _const(D), _const(D), axes=[-1]))

    ex = _build_both(body)
    assert ex.stats["ops"]["add+layer_norm"] == {"native": 1}
    assert "add" not in ex.stats["ops"] and "nn.layer_norm" not in ex.stats["ops"]


def test_attention_op_without_fusion_runs_its_native_kernel_fact():
    x = relax.Var("x", _tensor((1, S, D)))
    mod = _module([x], _sdpa_attention)
    ex = relax.build(mod, fuse=False)
    assert ex.stats["ops"]["nn.attention_bias"] == {"native": 1}
    xv = RNG.standard_normal((1, S, D)).astype(np.float32)
    (ref,) = run_relax(mod, [xv])
    np.testing.assert_allclose(relax.VirtualMachine(ex)["main"](xv).numpy(), ref, **TOL)


def test_transposed_weight_is_packed_once_at_build():
    """x @ W.T (a torch Linear through from_torch): the transpose folds into a constant at
    build, the GEMM packs it there, and a call passes only x."""
    w = _const(48, D)
    ex = _build_both(lambda bb, x: bb.emit(R.matmul(x, bb.emit(R.permute_dims(w)))))
    assert ex.stats["ops"] == {"matmul": {"native": 1}}
    node = _fused_node(ex, "matmul")
    assert node.fn.runner is not None and node.fn.runner.n == 48 and len(node.ins) == 1
