"""Small torch models for the pruning tests and benchmark, each with its width knobs and a
*by-hand* pruner: ``reference(full_model, keep)`` builds the narrower model and copies each
parameter by torch indexing, from one kept-index set per channel group that the test names
itself (so a wrong grouping in msc shows up as different outputs, not as a matching error).

Groups are named after a torch parameter whose output channels they are; ``group_weights``
says which parameter's ``out_indices`` in msc's plan gives each group's kept channels.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

# --------------------------------------------------------------------------------------------
# ResNet-style: two residual blocks (identity, then strided with a 1x1 downsample).


class Block(nn.Module):
    def __init__(self, cin: int, mid: int, cout: int, stride: int = 1):
        super().__init__()
        self.c1 = nn.Conv2d(cin, mid, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(mid)
        self.c2 = nn.Conv2d(mid, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                      nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.b2(self.c2(F.relu(self.b1(self.c1(x)))))
        return F.relu(y + (x if self.down is None else self.down(x)))


class ResNet(nn.Module):
    def __init__(self, w=(16, 16, 32, 32)):
        super().__init__()
        stem, mid1, mid2, out2 = w
        self.stem = nn.Conv2d(3, stem, 3, 1, 1)
        self.bn = nn.BatchNorm2d(stem)
        self.l1 = Block(stem, mid1, stem)
        self.l2 = Block(stem, mid2, out2, 2)
        self.fc = nn.Linear(out2, 10)

    def forward(self, x):
        x = self.l2(self.l1(F.relu(self.bn(self.stem(x)))))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


# --------------------------------------------------------------------------------------------
# MobileNet-style: depthwise-separable, then a grouped conv with GroupNorm.


class Mobile(nn.Module):
    def __init__(self, w=(16, 32, 32), groups: int = 4):
        super().__init__()
        c1, c2, c3 = w
        self.stem = nn.Conv2d(3, c1, 3, 2, 1)
        self.dw = nn.Conv2d(c1, c1, 3, 1, 1, groups=c1)
        self.bn = nn.BatchNorm2d(c1)
        self.pw = nn.Conv2d(c1, c2, 1)
        self.g = nn.Conv2d(c2, c3, 3, 1, 1, groups=groups)
        self.gn = nn.GroupNorm(groups, c3)
        self.fc = nn.Linear(c3, 10)

    def forward(self, x):
        x = F.relu(self.bn(self.dw(F.relu6(self.stem(x)))))
        x = self.gn(self.g(self.pw(x)))
        return self.fc(x.mean((2, 3)))


# --------------------------------------------------------------------------------------------
# DenseNet-style: concats that grow the width, a split whose halves swap, flatten -> linear.


class Dense(nn.Module):
    def __init__(self, w=(16, 8, 8, 16)):
        super().__init__()
        stem, g1, g2, t = w
        self.stem = nn.Conv2d(3, stem, 3, 1, 1)
        self.c1 = nn.Conv2d(stem, g1, 3, 1, 1)
        self.b1 = nn.BatchNorm2d(stem + g1)
        self.c2 = nn.Conv2d(stem + g1, g2, 3, 1, 1)
        self.t = nn.Conv2d(stem + g1 + g2, t, 1)
        self.fc = nn.Linear(t * 16, 10)
        self.half = t // 2

    def forward(self, x):
        x = self.stem(x)
        x = torch.cat([x, F.relu(self.c1(x))], 1)
        x = torch.cat([x, self.c2(F.relu(self.b1(x)))], 1)
        a, b = torch.split(F.avg_pool2d(self.t(x), 2), [self.half, self.half], 1)
        return self.fc(torch.cat([b, a], 1).flatten(1))


# --------------------------------------------------------------------------------------------
# Transformer encoder layer: q/k/v/out by heads (matmul softmax, or SDPA), LayerNorm, FFN.


class Encoder(nn.Module):
    def __init__(self, d: int = 32, heads: int = 4, head_dim: int = 8, hidden: int = 64,
                 sdpa: bool = False):
        super().__init__()
        self.heads, self.head_dim, self.sdpa = heads, head_dim, sdpa
        inner = heads * head_dim
        self.q, self.k, self.v = (nn.Linear(d, inner) for _ in range(3))
        self.o = nn.Linear(inner, d)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ff1, self.ff2 = nn.Linear(d, hidden), nn.Linear(hidden, d)

    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = (m(x).reshape(b, n, self.heads, self.head_dim).permute(0, 2, 1, 3)
                   for m in (self.q, self.k, self.v))
        if self.sdpa:
            a = F.scaled_dot_product_attention(q, k, v)
        else:
            a = torch.softmax(q @ k.transpose(-1, -2) * self.head_dim ** -0.5, -1) @ v
        a = a.permute(0, 2, 1, 3).reshape(b, n, self.heads * self.head_dim)
        x = self.ln1(x + self.o(a))
        return self.ln2(x + self.ff2(F.gelu(self.ff1(x))))


# --------------------------------------------------------------------------------------------
# By-hand pruning: the narrow model, its parameters indexed from the full one.


def _take(tensor: torch.Tensor, index: dict[int, torch.Tensor]) -> torch.Tensor:
    for dim, idx in index.items():
        tensor = tensor.index_select(dim, idx)
    return tensor


def _copy(small: nn.Module, full: nn.Module, spec: dict) -> nn.Module:
    """``spec``: parameter/buffer name -> {dim: kept indices}; the rest is copied whole."""
    state = {}
    for name, value in full.state_dict().items():
        state[name] = _take(value, spec.get(name, {})) if value.ndim else value
    small.load_state_dict(state)
    return small.eval()


def _t(values) -> torch.Tensor:
    return torch.as_tensor(sorted(int(v) for v in values), dtype=torch.long)


def _bn(prefix: str, idx) -> dict:
    return {f"{prefix}.{k}": {0: idx} for k in ("weight", "bias", "running_mean",
                                               "running_var")}


def resnet_reference(full: ResNet, keep: dict) -> nn.Module:
    a, m1, m2, d = (_t(keep[k]) for k in ("stem", "l1.c1", "l2.c1", "l2.c2"))
    spec = {"stem.weight": {0: a}, "stem.bias": {0: a}, **_bn("bn", a),
            "l1.c1.weight": {0: m1, 1: a}, **_bn("l1.b1", m1), "l1.c2.weight": {0: a, 1: m1},
            **_bn("l1.b2", a), "l2.c1.weight": {0: m2, 1: a}, **_bn("l2.b1", m2),
            "l2.c2.weight": {0: d, 1: m2}, **_bn("l2.b2", d), "l2.down.0.weight": {0: d, 1: a},
            **_bn("l2.down.1", d), "fc.weight": {1: d}}
    return _copy(ResNet((len(a), len(m1), len(m2), len(d))), full, spec)


def mobile_reference(full: Mobile, keep: dict, groups: int = 4) -> nn.Module:
    a = _t(keep["stem"])
    g_in, g_out = _t(keep["g.in"]), _t(keep["g.out"])  # relative indices inside each group
    c2, c3 = full.pw.out_channels, full.g.out_channels
    b = torch.cat([g * (c2 // groups) + g_in for g in range(groups)])
    c = torch.cat([g * (c3 // groups) + g_out for g in range(groups)])
    spec = {"stem.weight": {0: a}, "stem.bias": {0: a}, "dw.weight": {0: a},
            "dw.bias": {0: a}, **_bn("bn", a), "pw.weight": {0: b, 1: a}, "pw.bias": {0: b},
            "g.weight": {0: c, 1: g_in}, "g.bias": {0: c}, "gn.weight": {0: c},
            "gn.bias": {0: c}, "fc.weight": {1: c}}
    return _copy(Mobile((len(a), len(b), len(c)), groups), full, spec)


def dense_reference(full: Dense, keep: dict) -> nn.Module:
    a, g1, g2 = _t(keep["stem"]), _t(keep["c1"]), _t(keep["c2"])
    t1, t2 = _t(keep["t.0"]), _t(keep["t.1"])  # the two halves of t's output (split)
    stem, n1, half = full.stem.out_channels, full.c1.out_channels, full.half
    cat1 = torch.cat([a, stem + g1])
    cat2 = torch.cat([cat1, stem + n1 + g2])
    swapped = torch.cat([t2, half + t1])  # cat([b, a]): channel j of b is t's half + j
    fc_in = (swapped[:, None] * 16 + torch.arange(16)[None, :]).reshape(-1)
    spec = {"stem.weight": {0: a}, "stem.bias": {0: a}, "c1.weight": {0: g1, 1: a},
            "c1.bias": {0: g1}, **_bn("b1", cat1), "c2.weight": {0: g2, 1: cat1},
            "c2.bias": {0: g2}, "t.weight": {0: torch.cat([t1, half + t2]), 1: cat2},
            "t.bias": {0: torch.cat([t1, half + t2])}, "fc.weight": {1: fc_in}}
    widths = (len(a), len(g1), len(g2), len(t1) + len(t2))
    return _copy(Dense(widths), full, spec)


def encoder_reference(full: Encoder, keep: dict) -> nn.Module:
    heads, hidden = _t(keep["heads"]), _t(keep["ff1"])
    hd = full.head_dim
    rows = (heads[:, None] * hd + torch.arange(hd)[None, :]).reshape(-1)
    spec = {f"{m}.{p}": {0: rows} for m in "qkv" for p in ("weight", "bias")}
    spec.update({"o.weight": {1: rows}, "ff1.weight": {0: hidden}, "ff1.bias": {0: hidden},
                 "ff2.weight": {1: hidden}})
    d = full.q.in_features
    small = Encoder(d, len(heads), hd, len(hidden), full.sdpa)
    return _copy(small, full, spec)


def randomize_norms(model: nn.Module, seed: int = 0) -> nn.Module:
    """Random BN statistics and affine params, so norms are not the identity."""
    gen = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, (nn.BatchNorm2d, nn.GroupNorm, nn.LayerNorm)):
            with torch.no_grad():
                m.weight.copy_(torch.rand(m.weight.shape, generator=gen) + 0.5)
                m.bias.copy_(torch.randn(m.bias.shape, generator=gen) * 0.1)
                if isinstance(m, nn.BatchNorm2d):
                    m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=gen))
                    m.running_var.copy_(torch.rand(m.running_var.shape, generator=gen) + 0.5)
    return model.eval()


class _Functional(nn.Module):
    """A torch reference written with F.* over indexed tensors (registered as buffers, so
    ``state_dict`` counts them)."""

    def __init__(self, forward, tensors: dict, modules: dict):
        super().__init__()
        self._forward = forward
        for name, value in tensors.items():
            self.register_buffer(name, value.detach().clone())
        for name, module in modules.items():
            self.add_module(name, module)

    def forward(self, x):
        return self._forward(self, x)


def encoder_layer_reference(full: nn.TransformerEncoderLayer, keep: dict) -> nn.Module:
    """``nn.TransformerEncoderLayer`` (packed q/k/v ``in_proj``) with whole heads removed:
    nn.MultiheadAttention cannot hold fewer heads of the same size, so the reference is the
    layer's math over the indexed weights."""
    attn = full.self_attn
    d, hd = attn.embed_dim, attn.embed_dim // attn.num_heads
    heads, hidden = _t(keep["heads"]), _t(keep["ff1"])
    rows = (heads[:, None] * hd + torch.arange(hd)[None, :]).reshape(-1)
    packed = torch.cat([t * d + rows for t in range(3)])
    tensors = {"w_in": attn.in_proj_weight[packed], "b_in": attn.in_proj_bias[packed],
               "w_out": attn.out_proj.weight[:, rows], "b_out": attn.out_proj.bias,
               "w1": full.linear1.weight[hidden], "b1": full.linear1.bias[hidden],
               "w2": full.linear2.weight[:, hidden], "b2": full.linear2.bias}

    def forward(m, x):
        b, n, _ = x.shape
        q, k, v = (t.reshape(b, n, len(heads), hd).transpose(1, 2)
                   for t in F.linear(x, m.w_in, m.b_in).chunk(3, -1))
        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, -1)
        x = m.norm1(x + F.linear(a, m.w_out, m.b_out))
        return m.norm2(x + F.linear(F.relu(F.linear(x, m.w1, m.b1)), m.w2, m.b2))

    return _Functional(forward, tensors, {"norm1": full.norm1, "norm2": full.norm2}).eval()


def torch_encoder_layer() -> nn.TransformerEncoderLayer:
    return nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
