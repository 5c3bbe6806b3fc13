"""timm's blocks that transformers lacks, written here at small sizes for the real-model
corpus (tests/helpers/corpus.py): Inception-v3 (BatchNorm eps 1e-3, count_include_pad=False
pooling), GhostNet (ghost modules, hard-sigmoid SE), NFNet (ScaledStdConv2d), RepVGG,
MobileNetV3 (hard-swish) and TF EfficientNet ("same" padding). The activations live inside
``BatchNormAct2d`` (an ``nn.BatchNorm2d`` subclass applying them in ``forward``) as in timm:
a converter that takes a subclass for its base drops them.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

# --------------------------------------------------------------------------------------------
# Own blocks: timm's patterns at toy sizes (written here, not copied).

def conv_bn(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1, eps: float = 1e-5,
            pad: int | None = None) -> nn.Sequential:
    pad = k // 2 if pad is None else pad
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride, pad, groups=groups, bias=False),
                         nn.BatchNorm2d(cout, eps=eps))


class BatchNormAct2d(nn.BatchNorm2d):
    """A batch norm whose forward also applies the activation (timm's fused norm-act)."""

    def __init__(self, c: int, act: type = nn.SiLU, eps: float = 1e-3):
        super().__init__(c, eps=eps)
        self.act = act()

    def forward(self, x):
        x = F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                         False, 0., self.eps)
        return self.act(x)


def conv_bn_act(cin, cout, k, stride=1, groups=1, act=nn.ReLU, eps=1e-5, pad=None):
    """timm's ConvNormAct: the activation inside a BatchNormAct2d (inception, ghostnet, ...)."""
    return nn.Sequential(conv_bn(cin, cout, k, stride, groups, eps, pad)[0],
                         BatchNormAct2d(cout, act=act, eps=eps))


def head(cin: int, classes: int = 10) -> nn.Sequential:
    """Global average pool + classifier, the end of every CNN here."""
    return nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes))


class InceptionA(nn.Module):
    """Four branches (1x1, 5x5, double 3x3, avg-pool 1x1), concatenated; the avg pool does
    not count padding, which a converter must carry through."""

    def __init__(self, cin: int, width: int = 8):
        super().__init__()
        bn = {"eps": 1e-3}  # Inception-v3's BatchNorm eps, not the default 1e-5
        self.b1 = conv_bn_act(cin, width, 1, **bn)
        self.b5 = nn.Sequential(conv_bn_act(cin, 6, 1, **bn), conv_bn_act(6, width, 5, **bn))
        self.b3 = nn.Sequential(conv_bn_act(cin, 8, 1, **bn), conv_bn_act(8, 12, 3, **bn),
                                conv_bn_act(12, 12, 3, **bn))
        self.pool = nn.AvgPool2d(3, 1, 1, count_include_pad=False)
        self.bp = conv_bn_act(cin, width, 1, **bn)

    def forward(self, x):
        return torch.cat([self.b1(x), self.b5(x), self.b3(x), self.bp(self.pool(x))], 1)


class InceptionB(nn.Module):
    """Grid reduction (15 -> 7): unpadded strided 3x3, double 3x3, max pool, concatenated."""

    def __init__(self, cin: int):
        super().__init__()
        self.b3 = conv_bn_act(cin, 16, 3, 2, eps=1e-3, pad=0)
        self.bd = nn.Sequential(conv_bn_act(cin, 8, 1, eps=1e-3), conv_bn_act(8, 12, 3, eps=1e-3),
                                conv_bn_act(12, 12, 3, 2, eps=1e-3, pad=0))

    def forward(self, x):
        return torch.cat([self.b3(x), self.bd(x), F.max_pool2d(x, 3, 2)], 1)


def inception_v3() -> nn.Module:
    stem = nn.Sequential(conv_bn_act(3, 16, 3, 2, eps=1e-3), conv_bn_act(16, 16, 3, eps=1e-3))
    return nn.Sequential(stem, InceptionA(16), InceptionB(36), head(64))


def hard_sigmoid(x):
    return F.relu6(x + 3.) / 6.


class SqueezeExcite(nn.Module):
    """Channel gate: pool, reduce, ReLU, expand, gate (GhostNet's hard sigmoid by default)."""

    def __init__(self, c: int, gate: Callable = hard_sigmoid):
        super().__init__()
        self.reduce, self.expand = nn.Conv2d(c, max(c // 4, 4), 1), nn.Conv2d(max(c // 4, 4), c, 1)
        self.gate = gate

    def forward(self, x):
        s = self.expand(F.relu(self.reduce(x.mean((2, 3), keepdim=True))))
        return x * self.gate(s)


class GhostModule(nn.Module):
    """Half the channels from a 1x1 conv, the other half from a cheap depthwise conv of those,
    concatenated and cut to ``cout`` (the slice a converter must keep)."""

    def __init__(self, cin: int, cout: int, relu: bool = True):
        super().__init__()
        self.cout, init = cout, math.ceil(cout / 2)
        act = nn.ReLU if relu else nn.Identity
        self.primary = conv_bn_act(cin, init, 1, act=act)
        self.cheap = conv_bn_act(init, init, 3, groups=init, act=act)

    def forward(self, x):
        y = self.primary(x)
        return torch.cat([y, self.cheap(y)], 1)[:, :self.cout]


class GhostBottleneck(nn.Module):
    def __init__(self, cin: int, mid: int, cout: int, stride: int):
        super().__init__()
        self.ghost1, self.ghost2 = GhostModule(cin, mid), GhostModule(mid, cout, relu=False)
        self.dw = conv_bn(mid, mid, 3, stride, groups=mid) if stride > 1 else nn.Identity()
        self.se = SqueezeExcite(mid)
        self.short = nn.Identity() if cin == cout and stride == 1 else nn.Sequential(
            conv_bn(cin, cin, 3, stride, groups=cin), conv_bn(cin, cout, 1))

    def forward(self, x):
        return self.ghost2(self.se(self.dw(self.ghost1(x)))) + self.short(x)


def ghostnet() -> nn.Module:
    return nn.Sequential(conv_bn_act(3, 8, 3, 2), GhostBottleneck(8, 16, 16, 1),
                         GhostBottleneck(16, 24, 16, 2), head(16))


class ScaledStdConv2d(nn.Conv2d):
    """NFNet's weight-standardized conv: the weight is normalized per output channel on every
    call, so the parent's plain conv would give a wrong answer, not an error."""

    def __init__(self, cin: int, cout: int, k: int, stride: int = 1, eps: float = 1e-6):
        super().__init__(cin, cout, k, stride, k // 2)
        self.gain = nn.Parameter(torch.ones(cout, 1, 1, 1))
        self.scale, self.eps = (cin * k * k) ** -0.5, eps

    def forward(self, x):
        w = F.batch_norm(self.weight.reshape(1, self.out_channels, -1), None, None,
                         training=True, momentum=0., eps=self.eps)
        w = w.reshape_as(self.weight) * self.gain * self.scale
        return F.conv2d(x, w, self.bias, self.stride, self.padding, self.dilation, self.groups)


class NFBlock(nn.Module):
    """Normalizer-free residual block: pre-activation scaled by beta, a learned skip gain."""

    def __init__(self, c: int, act: type, beta: float = 0.9, alpha: float = 0.2):
        super().__init__()
        self.act, self.beta, self.alpha = act(), beta, alpha
        self.conv1, self.conv2 = ScaledStdConv2d(c, c, 1), ScaledStdConv2d(c, c, 3)
        self.conv3 = ScaledStdConv2d(c, c, 1)
        self.skip_gain = nn.Parameter(torch.tensor(0.5))

    def forward(self, x):
        out = self.act(x) * self.beta
        out = self.conv3(self.act(self.conv2(self.act(self.conv1(out)))))
        return out * self.alpha * self.skip_gain + x


def nfnet() -> nn.Module:
    return nn.Sequential(ScaledStdConv2d(3, 16, 3, 2), NFBlock(16, nn.GELU),
                         NFBlock(16, nn.SiLU), head(16))


class RepVGGBlock(nn.Module):
    """Training-time RepVGG: 3x3 conv-bn + 1x1 conv-bn (+ identity bn), summed, ReLU."""

    def __init__(self, cin: int, cout: int, stride: int = 1):
        super().__init__()
        self.dense, self.one = conv_bn(cin, cout, 3, stride), conv_bn(cin, cout, 1, stride)
        self.identity = nn.BatchNorm2d(cin) if cin == cout and stride == 1 else None

    def forward(self, x):
        out = self.dense(x) + self.one(x)
        if self.identity is not None:
            out = out + self.identity(x)
        return F.relu(out)


def repvgg() -> nn.Module:
    return nn.Sequential(RepVGGBlock(3, 16, 2), RepVGGBlock(16, 16), RepVGGBlock(16, 24, 2),
                         RepVGGBlock(24, 24), head(24))


class InvertedResidual(nn.Module):
    """MobileNetV3: expand, depthwise, hard-sigmoid SE, project, residual; hard-swish."""

    def __init__(self, c: int, mid: int, k: int = 3):
        super().__init__()
        self.expand = conv_bn_act(c, mid, 1, act=nn.Hardswish)
        self.dw = conv_bn_act(mid, mid, k, groups=mid, act=nn.Hardswish)
        self.se = SqueezeExcite(mid, gate=nn.Hardsigmoid())
        self.project = conv_bn(mid, c, 1)

    def forward(self, x):
        return x + self.project(self.se(self.dw(self.expand(x))))


def mobilenetv3() -> nn.Module:
    return nn.Sequential(conv_bn_act(3, 16, 3, 2, act=nn.Hardswish), InvertedResidual(16, 32),
                         InvertedResidual(16, 24, k=5), head(16))


class Conv2dSame(nn.Conv2d):
    """TensorFlow "SAME" padding: asymmetric, computed from the input size on each call
    (the extra row/column goes bottom/right), then an unpadded conv."""

    def forward(self, x):
        ih, iw = x.shape[-2:]
        pad_h = _same_pad(ih, self.kernel_size[0], self.stride[0], self.dilation[0])
        pad_w = _same_pad(iw, self.kernel_size[1], self.stride[1], self.dilation[1])
        x = F.pad(x, [pad_w // 2, pad_w - pad_w // 2, pad_h // 2, pad_h - pad_h // 2])
        return F.conv2d(x, self.weight, self.bias, self.stride, 0, self.dilation, self.groups)


def _same_pad(size: int, k: int, s: int, d: int) -> int:
    return max((math.ceil(size / s) - 1) * s + (k - 1) * d + 1 - size, 0)


class DepthwiseSeparable(nn.Module):
    """EfficientNet's first MBConv: depthwise "same" conv, norm-act, SE (SiLU, sigmoid),
    pointwise conv, norm, residual."""

    def __init__(self, c: int, stride: int = 1):
        super().__init__()
        self.dw = Conv2dSame(c, c, 3, stride, groups=c, bias=False)
        self.bn1 = BatchNormAct2d(c)
        self.se = SqueezeExcite(c, gate=torch.sigmoid)
        self.pw = nn.Conv2d(c, c, 1, bias=False)
        self.bn2 = BatchNormAct2d(c, act=nn.Identity)
        self.residual = stride == 1

    def forward(self, x):
        out = self.bn2(self.pw(self.se(self.bn1(self.dw(x)))))
        return out + x if self.residual else out


def tf_efficientnet() -> nn.Module:
    stem = nn.Sequential(Conv2dSame(3, 16, 3, 2, bias=False), BatchNormAct2d(16))
    return nn.Sequential(stem, DepthwiseSeparable(16), DepthwiseSeparable(16, 2), head(16))


OWN = {"inception_v3": inception_v3, "ghostnet": ghostnet, "nfnet": nfnet,
       "repvgg": repvgg, "mobilenetv3": mobilenetv3, "tf_efficientnet": tf_efficientnet}
