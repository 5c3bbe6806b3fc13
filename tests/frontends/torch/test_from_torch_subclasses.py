"""No silent wrong answer from the torch frontend on the blocks real models are made of.

Each case is a block from timm / transformers written small here: subclasses of torch modules
that override ``forward`` (BatchNormAct2d, Conv2dSame, ScaledStdConv2d, LayerNorm2d), in-place
writes and what shares their storage, and functional arguments the ATen forms pass
positionally. Through ``from_torch`` -> ``to_relax`` -> ``relax.build`` -> VM (the user's path),
each equals torch eager (float32: max error <= 1e-4 of the output's scale) or is refused with an
UnsupportedOpError naming the op.
"""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from msc import relax
from msc.codegen import to_relax
from msc.errors import UnsupportedOpError
from msc.frontends.torch.api import from_torch
from tests.helpers.torch_cases import Fn, bn_stats


class BatchNormAct2d(nn.BatchNorm2d):
    """timm's: a BatchNorm2d that applies its activation in its own forward."""

    def __init__(self, channels, act=nn.ReLU6, eps=1e-3):
        super().__init__(channels, eps=eps)
        self.act = act()

    def forward(self, x):
        return self.act(super().forward(x))


class Conv2dSame(nn.Conv2d):
    """TF "same" padding: asymmetric, computed from the input size."""

    def forward(self, x):
        ih, iw = x.shape[-2:]
        kh, kw = self.weight.shape[-2:]
        ph = max((-(-ih // self.stride[0]) - 1) * self.stride[0] + kh - ih, 0)
        pw = max((-(-iw // self.stride[1]) - 1) * self.stride[1] + kw - iw, 0)
        x = F.pad(x, [pw // 2, pw - pw // 2, ph // 2, ph - ph // 2])
        return F.conv2d(x, self.weight, self.bias, self.stride, 0, self.dilation, self.groups)


class ScaledStdConv2d(nn.Conv2d):
    """NFNet's weight-standardized conv with a learned gain."""

    def __init__(self, cin, cout, k, eps=1e-6):
        super().__init__(cin, cout, k, padding=k // 2)
        self.gain = nn.Parameter(torch.rand(cout, 1, 1, 1) + 0.5)
        self.scale, self.eps = (cin * k * k) ** -0.5, eps

    def forward(self, x):
        w = F.batch_norm(self.weight.reshape(1, self.out_channels, -1), None, None,
                         weight=(self.gain * self.scale).view(-1), training=True, momentum=0.,
                         eps=self.eps).reshape_as(self.weight)
        return F.conv2d(x, w, self.bias, self.stride, self.padding)


class LayerNorm2d(nn.LayerNorm):
    """ConvNeXt's channels-first layer norm."""

    def forward(self, x):
        x = x.permute(0, 2, 3, 1)
        return super().forward(x).permute(0, 3, 1, 2)


class Configured(nn.Conv2d):
    """A subclass that only configures its base: still converted as one conv."""

    def __init__(self):
        super().__init__(4, 8, 3, padding=1)


class Block(nn.Module):
    def __init__(self, body, pre=None):
        super().__init__()
        self.body, self.pre = body, pre or (lambda x: x)

    def forward(self, x):
        return self.body(self.pre(x))


class InplaceAlias(nn.Module):
    """``z = relu_(y)`` then ``y + z``: y is z afterwards, in torch."""

    def __init__(self, functional):
        super().__init__()
        self.conv, self.functional, self.act = nn.Conv2d(4, 4, 1), functional, nn.ReLU(True)

    def forward(self, x):
        y = self.conv(x)
        z = F.relu(y, inplace=True) if self.functional else self.act(y)
        return y + z


CASES = {
    "BatchNormAct2d": lambda: Block(BatchNormAct2d(4)),
    "BatchNormAct2d_silu": lambda: Block(BatchNormAct2d(4, nn.SiLU, eps=1e-3)),
    "Conv2dSame": lambda: Conv2dSame(4, 8, 3, stride=2),
    "Conv2dSame_depthwise": lambda: Conv2dSame(4, 4, 5, stride=2, groups=4),
    "ScaledStdConv2d": lambda: ScaledStdConv2d(4, 8, 3),
    "LayerNorm2d": lambda: LayerNorm2d(4),
    "Configured": Configured,
    "relu_inplace_module_alias": lambda: InplaceAlias(False),
    "relu_inplace_functional_alias": lambda: InplaceAlias(True),
    "addcmul": lambda: Fn(lambda x: torch.addcmul(x, x.sin(), x.cos(), value=0.5)),
    "addcdiv": lambda: Fn(lambda x: torch.addcdiv(x, x.sin(), x.cos().abs() + 1, value=2)),
    "grn": lambda: Fn(lambda x: torch.addcmul(x, x, F.normalize(x, dim=1))),
    "adaptive_avg_pool_none": lambda: Fn(lambda x: F.adaptive_avg_pool2d(x, (1, None))),
    "normalize_p1": lambda: Fn(lambda x: F.normalize(x, p=1.0, dim=2)),
    "instance_norm_affine": lambda: nn.InstanceNorm2d(4, affine=True),
    "softmax_float64": lambda: Fn(lambda x: F.softmax(x, dim=1, dtype=torch.float64)),
    "meshgrid_xy": lambda: Fn(lambda x: sum(torch.meshgrid(x[0, 0, 0], x[0, 1, :, 0],
                                                               indexing="xy"))),
    "meshgrid_ij": lambda: Fn(lambda x: torch.stack(torch.meshgrid(
        x[0, 0, 0], x[0, 1, :3, 0], indexing="ij")).sum(0)),
    "weight_norm": lambda: nn.utils.parametrizations.weight_norm(nn.Conv2d(4, 8, 3), dim=0),
    "hardswish_se": lambda: Fn(lambda x: F.hardswish(x) * F.hardsigmoid(x.mean((2, 3),
                                                                               True))),
}


def _init(model):
    torch.manual_seed(0)
    for p in model.parameters():
        p.data.uniform_(-0.5, 0.5)
    return model.eval()


def _run(model, via):
    x = torch.randn(1, 4, 15, 15, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = model(x.clone()).numpy()
    graph, weights = from_torch(model, [((1, 4, 15, 15), "float32")], via=via)
    vm = relax.VirtualMachine(relax.build(to_relax(graph, weights), target="llvm"), relax.cpu())
    got = vm["main"](x.numpy())
    return np.asarray(got.numpy() if hasattr(got, "numpy") else got), want


@pytest.mark.parametrize("via", [None, "export"])
@pytest.mark.parametrize("name", list(CASES))
def test_block_equals_torch_eager(name, via):
    torch.manual_seed(0)
    model = bn_stats(CASES[name]())
    got, want = _run(_init(model) if name != "BatchNormAct2d" else model.eval(), via)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * max(np.abs(want).max(), 1e-6))


def test_a_subclass_that_only_configures_stays_one_joint():
    graph, _ = from_torch(_init(Configured()), [((1, 4, 8, 8), "float32")], via="fx")
    assert graph.inspect()["nodes"]["total"] == 2  # the input and one conv


def test_subclass_overriding_forward_is_not_converted_as_its_base():
    # fx traces into it (BatchNorm2d's own forward then stops fx; export takes over)
    graph, _ = from_torch(_init(Block(bn_stats(BatchNormAct2d(4)))), [((1, 4, 8, 8), "float32")])
    assert "clip" in graph.inspect()["nodes"]  # the ReLU6 inside its forward
    graph, _ = from_torch(_init(LayerNorm2d(4)), [((1, 4, 8, 8), "float32")], via="fx")
    assert graph.inspect()["nodes"].get("permute_dims") == 2


class ViewWrite(nn.Module):
    def forward(self, x):
        y = x * 2
        y[:, :2].relu_()  # writes y through a view; y is read afterwards
        return y


def test_inplace_write_through_a_view_is_refused_by_fx_and_exact_through_export():
    with pytest.raises(UnsupportedOpError, match="shares its storage"):
        from_torch(ViewWrite(), [((1, 4, 15, 15), "float32")], via="fx")
    got, want = _run(ViewWrite(), "export")  # export functionalizes it: slice_scatter
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)


@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
@pytest.mark.parametrize("via", ["fx", "export"])
def test_interpolate_with_a_fractional_output_is_refused(mode, via):
    model = Fn(lambda x: F.interpolate(x, scale_factor=1.5, mode=mode))
    with pytest.raises(UnsupportedOpError, match="recompute_scale_factor"):
        from_torch(model, [((1, 4, 15, 15), "float32")], via=via)
    recomputed = Fn(lambda x: F.interpolate(x, scale_factor=1.5, mode=mode,
                                                recompute_scale_factor=True))
    got, want = _run(recomputed, via)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
