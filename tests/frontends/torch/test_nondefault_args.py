"""Every converter reads every argument it is given: each op here runs with arguments away
from their defaults (eps, momentum, padding modes, ceil_mode, count_include_pad, slopes,
approximations, dims, groups, dilation, ...) through from_torch (fx and export) -> to_relax ->
relax.build -> VM and must equal torch eager (float32: max error <= 1e-4 of the output's
scale). A converter that ignored one would differ."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from msc import relax
from msc.codegen import to_relax
from msc.frontends.torch.api import from_torch
from tests.helpers.torch_cases import Fn, bn_stats

CASES = {
    "batch_norm_eps_momentum": lambda: bn_stats(nn.BatchNorm2d(4, eps=0.3, momentum=0.01)),
    "batch_norm_affine_false": lambda: bn_stats(nn.BatchNorm2d(4, affine=False, eps=0.1)),
    "batch_norm_no_running_stats": lambda: nn.BatchNorm2d(4, track_running_stats=False),
    "F.batch_norm_eps": lambda: Fn(lambda x: F.batch_norm(
        x, torch.linspace(-1, 1, 4), torch.linspace(0.5, 2, 4), eps=0.25)),
    "layer_norm_eps_no_bias": lambda: nn.LayerNorm(15, eps=0.5, bias=False),
    "group_norm_eps": lambda: nn.GroupNorm(2, 4, eps=0.5),
    "instance_norm_affine_eps": lambda: nn.InstanceNorm2d(4, affine=True, eps=0.2),
    "conv_reflect_dilation_groups": lambda: nn.Conv2d(4, 8, 3, padding=2, dilation=2, groups=2,
                                                      padding_mode="reflect"),
    "conv_circular_stride": lambda: nn.Conv2d(4, 4, 3, stride=2, padding=1,
                                              padding_mode="circular"),
    "conv_same_even_kernel": lambda: nn.Conv2d(4, 4, 4, padding="same", dilation=2),
    "conv_transpose_output_padding": lambda: nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1,
                                                                output_padding=1, groups=2),
    "max_pool_ceil_dilation": lambda: nn.MaxPool2d(3, 2, 1, dilation=2, ceil_mode=True),
    "avg_pool_ceil_exclude_pad": lambda: nn.AvgPool2d(3, 2, 1, ceil_mode=True,
                                                      count_include_pad=False),
    "avg_pool_stride1_exclude_pad": lambda: nn.AvgPool2d(3, 1, 1, count_include_pad=False),
    "adaptive_avg_pool_uneven": lambda: nn.AdaptiveAvgPool2d((4, 3)),
    "gelu_tanh": lambda: nn.GELU(approximate="tanh"),
    "leaky_relu_slope": lambda: nn.LeakyReLU(0.3),
    "elu_alpha": lambda: nn.ELU(alpha=0.4),
    "celu_alpha": lambda: nn.CELU(alpha=0.6),
    "softplus_beta_threshold": lambda: nn.Softplus(beta=2.0, threshold=1.0),
    "hardtanh_bounds": lambda: nn.Hardtanh(-0.5, 0.7),
    "softmax_dim": lambda: nn.Softmax(dim=2),
    "log_softmax_dim": lambda: nn.LogSoftmax(dim=1),
    "threshold": lambda: nn.Threshold(0.2, -3.0),
    "F.pad_reflect": lambda: Fn(lambda x: F.pad(x, [1, 2, 2, 0], mode="reflect")),
    "F.pad_replicate": lambda: Fn(lambda x: F.pad(x, [0, 2, 1, 0], mode="replicate")),
    "F.pad_value": lambda: Fn(lambda x: F.pad(x, [2, 0, 1, 3], value=-1.5)),
    "interpolate_bilinear_align": lambda: Fn(lambda x: F.interpolate(
        x, scale_factor=2, mode="bilinear", align_corners=True)),
    "interpolate_nearest_exact": lambda: Fn(lambda x: F.interpolate(x, size=(7, 9),
                                                                    mode="nearest-exact")),
    "std_unbiased_false": lambda: Fn(lambda x: x.std(dim=(2, 3), unbiased=False, keepdim=True)),
    "var_correction": lambda: Fn(lambda x: torch.var(x, dim=1, correction=0)),
    "mean_keepdim": lambda: Fn(lambda x: x.mean(dim=-1, keepdim=True)),
    "cumsum_dim": lambda: Fn(lambda x: torch.cumsum(x, dim=2)),
    "clamp_bounds": lambda: Fn(lambda x: x.clamp(min=-0.3, max=0.4)),
    "prelu_channels": lambda: nn.PReLU(4, init=0.1),
    "dropout_eval": lambda: nn.Dropout(p=0.9),
    "pixel_shuffle": lambda: Fn(lambda x: F.pixel_shuffle(torch.cat([x] * 4, 1), 2)),
    "roll_shifts": lambda: Fn(lambda x: torch.roll(x, shifts=(2, -1), dims=(2, 3))),
    "flip_dims": lambda: Fn(lambda x: torch.flip(x, dims=(1, 3))),
    "topk_values": lambda: Fn(lambda x: torch.topk(x, 3, dim=2, largest=False).values),
}


def _random(model):
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.rand(p.shape, generator=generator) - 0.5)
    return model.eval()


@pytest.mark.parametrize("via", ["fx", "export"])
@pytest.mark.parametrize("name", list(CASES))
def test_nondefault_arguments_equal_torch(name, via):
    model = _random(nn.Sequential(CASES[name]()))  # a submodule: its converter, not a trace
    x = torch.randn(1, 4, 13, 15, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = model(x.clone()).numpy()
    graph, weights = from_torch(model, [((1, 4, 13, 15), "float32")], via=via)
    vm = relax.VirtualMachine(relax.build(to_relax(graph, weights), target="llvm"), relax.cpu())
    got = vm["main"](x.numpy())
    got = np.asarray(got.numpy() if hasattr(got, "numpy") else got)
    assert got.shape == want.shape, f"shape {got.shape} vs torch {want.shape}"
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * max(np.abs(want).max(), 1e-6))
