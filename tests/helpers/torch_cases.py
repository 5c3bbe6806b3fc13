"""The converter cases of the from_torch tests (this file holds no tests).

A case is a small torch model plus its inputs. The tests translate it (static and with a
dynamic batch), run the Relax module and compare with torch, and compare its op sequence and
struct info with TVM's ``from_fx`` (see tests/helpers/torch_tools.py).
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

# --------------------------------------------------------------------------------------------
# Inputs.


@dataclass
class Inp:
    shape: tuple
    dtype: str = "float32"
    high: int = 10
    dyn: tuple = (0,)  # dims made dynamic in the dynamic variant

    def make(self, gen: torch.Generator) -> torch.Tensor:
        if self.dtype.startswith("float"):
            return torch.randn(self.shape, generator=gen).to(getattr(torch, self.dtype))
        if self.dtype == "bool":
            return torch.rand(self.shape, generator=gen) > 0.5
        return torch.randint(0, self.high, self.shape, generator=gen).to(
            getattr(torch, self.dtype))


def f(*shape, dyn=(0,)):
    return Inp(shape, dyn=dyn)


def i(*shape, high=10, dtype="int64", dyn=(0,)):
    return Inp(shape, dtype, high, dyn=dyn)


def b(*shape, dyn=(0,)):
    return Inp(shape, "bool", dyn=dyn)


# --------------------------------------------------------------------------------------------
# Models.


class Fn(nn.Module):
    """A model whose forward is ``fn`` (one to three inputs)."""

    def __init__(self, fn, arity: int = 1):
        super().__init__()
        self.fn = fn
        self.arity = arity

    def forward(self, x):
        return self.fn(x)


class Fn2(Fn):
    def forward(self, x, y):
        return self.fn(x, y)


class Fn3(Fn):
    def forward(self, x, y, z):
        return self.fn(x, y, z)


@dataclass
class Case:
    name: str
    build: object  # () -> nn.Module
    inputs: list
    dyn: bool = True  # also test with the dynamic dims named
    # "full": ops and struct info equal TVM's; "ops": op names only; "static": full, static
    # shapes only (TVM fails on the dynamic variant); "": TVM does not convert it (right)
    tvm: str = "full"
    atol: float = 1e-5
    note: str = ""

    def model(self) -> nn.Module:
        torch.manual_seed(0)
        return self.build().eval()

    def tensors(self) -> list:
        gen = torch.Generator().manual_seed(1)
        return [inp.make(gen) for inp in self.inputs]

    def input_info(self, dynamic: bool) -> list:
        info = []
        for k, inp in enumerate(self.inputs):
            shape = [f"d{k}_{d}" if dynamic and d in inp.dyn else n
                     for d, n in enumerate(inp.shape)]
            if dynamic and 0 in inp.dyn:
                shape[0] = "bz"
            info.append((shape, inp.dtype))
        return info


def fn(f_, *inputs, **kw) -> dict:
    arity = len(inputs)
    cls = {1: Fn, 2: Fn2, 3: Fn3}[arity]
    return custom(lambda: cls(f_, arity), *inputs, **kw)


def custom(build, *inputs, **kw) -> dict:
    return {"build": build, "inputs": list(inputs), **kw}


def mod(make, *inputs, **kw) -> dict:
    return custom(lambda: nn.Sequential(make()), *inputs, **kw)


X4 = f(2, 3, 8, 8)
X3 = f(2, 4, 16)
X2 = f(4, 8)


def _cases() -> dict:
    c = {
        # ---- unary math -------------------------------------------------------------------
        **{f"torch.{n}": fn(getattr(torch, n), X4) for n in (
            "abs", "ceil", "cos", "erf", "exp", "floor", "neg", "relu", "round", "sigmoid",
            "sign", "sin", "tanh", "sqrt", "rsqrt", "square", "trunc", "log")},
        "Tensor.exp_log": fn(lambda x: x.exp().log1p(), X4, tvm="ops"),
        "torch.isnan": fn(torch.isnan, X4),
        "torch.logical_not": fn(torch.logical_not, b(2, 5)),
        "torch.reciprocal": fn(torch.reciprocal, X4),
        "torch.round_decimals": fn(lambda x: torch.round(x, decimals=2), X4, tvm="ops"),
        # ---- activations ------------------------------------------------------------------
        "nn.ReLU": mod(nn.ReLU, X4),
        "nn.ReLU6": mod(nn.ReLU6, X4),
        "nn.LeakyReLU": mod(lambda: nn.LeakyReLU(0.2), X4),
        "nn.PReLU": mod(lambda: nn.PReLU(3), X4),
        "nn.ELU": mod(lambda: nn.ELU(0.5), X4),
        "nn.SELU": mod(nn.SELU, X4),
        "nn.GELU": mod(nn.GELU, X4),
        "nn.GELU_tanh": mod(lambda: nn.GELU("tanh"), X4, tvm=""),
        "nn.SiLU": mod(nn.SiLU, X4),
        "nn.Mish": mod(nn.Mish, X4, tvm=""),
        "nn.Hardswish": mod(nn.Hardswish, X4),
        "nn.Hardsigmoid": mod(nn.Hardsigmoid, X4),
        "nn.Hardtanh": mod(lambda: nn.Hardtanh(-0.5, 0.5), X4),
        "nn.Sigmoid": mod(nn.Sigmoid, X4),
        "nn.Tanh": mod(nn.Tanh, X4),
        "nn.Softplus": mod(lambda: nn.Softplus(2.0, 10.0), X4),
        "nn.Softmax": mod(lambda: nn.Softmax(1), X4),
        "nn.LogSoftmax": mod(lambda: nn.LogSoftmax(-1), X4),
        "nn.CELU": mod(lambda: nn.CELU(0.7), X4, tvm="", note="TVM computes exp(x) / alpha"),
        "nn.Dropout": mod(lambda: nn.Dropout(0.3), X4),
        "nn.Identity": mod(nn.Identity, X4, tvm="ops"),
        "F.gelu_tanh": fn(lambda x: F.gelu(x, approximate="tanh"), X4),
        "F.leaky_relu": fn(lambda x: F.leaky_relu(x, 0.1), X4),
        "F.softmax": fn(lambda x: F.softmax(x, dim=-1), X4),
        "F.log_softmax": fn(lambda x: F.log_softmax(x, 1), X4),
        "F.silu": fn(F.silu, X4),
        "F.hardswish": fn(F.hardswish, X4),
        "F.elu": fn(F.elu, X4),
        "F.mish": fn(F.mish, X4, tvm=""),
        "F.relu6": fn(F.relu6, X4),
        "F.softplus": fn(F.softplus, X4),
        "F.prelu": fn(lambda x: F.prelu(x, torch.full((3,), 0.25)), X4, tvm=""),
        "F.dropout": fn(lambda x: F.dropout(x, 0.5, training=False), X4),
        "torch.clamp": fn(lambda x: torch.clamp(x, -0.5, 0.5), X4),
        "torch.clamp_min": fn(lambda x: x.clamp(min=0.1), X4),
        "torch.clamp_tensor": fn(lambda x, y: torch.clamp(x, min=y), X4, f(2, 3, 8, 8), tvm=""),
        # ---- binary -----------------------------------------------------------------------
        **{f"operator.{n}": fn(getattr(operator, n), X4, f(2, 3, 8, 8))
           for n in ("add", "sub", "mul", "truediv")},
        "operator.add_scalar": fn(lambda x: x + 1.5, X4),
        "operator.radd_scalar": fn(lambda x: 2 + x, X4),
        "operator.rsub_scalar": fn(lambda x: 1 - x, X4),
        "operator.mul_scalar": fn(lambda x: x * 3, X4),
        "operator.truediv_scalar": fn(lambda x: x / 4, X4),
        "operator.pow_scalar": fn(lambda x: x ** 2, X4),
        "operator.broadcast": fn(lambda x, y: x * y, X4, f(1, 3, 1, 8, dyn=())),
        "operator.floordiv": fn(lambda x, y: x // (y + 1), i(2, 6, high=50),
                                i(2, 6, high=9) , tvm=""),
        "operator.mod": fn(lambda x: x % 3, i(2, 6, high=50), tvm="ops"),
        "operator.neg": fn(operator.neg, X4),
        **{f"operator.{n}": fn(getattr(operator, n), X4, f(2, 3, 8, 8))
           for n in ("lt", "le", "gt", "ge", "eq", "ne")},
        "operator.gt_scalar": fn(lambda x: x > 0, X4),
        "operator.and": fn(operator.and_, b(2, 5), b(2, 5)),
        "operator.or": fn(operator.or_, b(2, 5), b(2, 5)),
        "torch.add_alpha": fn(lambda x, y: torch.add(x, y, alpha=2), X4, f(2, 3, 8, 8),
                              tvm=""),
        "torch.sub": fn(torch.sub, X4, f(2, 3, 8, 8)),
        "torch.mul": fn(torch.mul, X4, f(2, 3, 8, 8)),
        "torch.div_floor": fn(lambda x, y: torch.div(x, y, rounding_mode="floor"), X4,
                              f(2, 3, 8, 8), tvm="ops"),
        "torch.div_trunc": fn(lambda x, y: torch.div(x, y, rounding_mode="trunc"), X4,
                              f(2, 3, 8, 8), tvm="ops"),
        "torch.maximum": fn(torch.maximum, X4, f(2, 3, 8, 8), tvm=""),
        "torch.minimum": fn(torch.minimum, X4, f(2, 3, 8, 8), tvm=""),
        "torch.max_binary": fn(torch.max, X4, f(2, 3, 8, 8)),
        "torch.pow": fn(torch.pow, f(2, 3), f(2, 3), tvm="ops"),
        "torch.logical_and": fn(torch.logical_and, b(2, 5), b(2, 5)),
        "torch.logical_or": fn(torch.logical_or, b(2, 5), b(2, 5)),
        "torch.logical_xor": fn(torch.logical_xor, b(2, 5), b(2, 5)),
        "promote_int_float": fn(lambda x, y: x + y, i(2, 5), f(2, 5), tvm="ops"),
        "Tensor.add_": fn(lambda x: x.add_(1.0) * 2, X4, tvm=""),
        "Tensor.mul_": fn(lambda x, y: x.mul_(y) + x, X4, f(2, 3, 8, 8), tvm=""),
        "operator.iadd": fn(_iadd, X4, f(2, 3, 8, 8), tvm=""),
        "Tensor.fill_": fn(lambda x: x.fill_(0.5) + 1, X4, tvm=""),
        # ---- linear algebra ---------------------------------------------------------------
        "torch.matmul": fn(torch.matmul, f(2, 4, 8), f(2, 8, 5)),
        "torch.matmul_2d": fn(torch.matmul, f(4, 8), f(8, 5), dyn=False),
        "torch.bmm": fn(torch.bmm, f(2, 4, 8), f(2, 8, 5)),
        "torch.mm": fn(torch.mm, f(4, 8), f(8, 5, dyn=()), tvm=""),
        "torch.addmm": fn(lambda a, x, y: torch.addmm(a, x, y, beta=0.5, alpha=2), f(4, 5),
                          f(4, 8), f(8, 5, dyn=())),
        "torch.baddbmm": fn(lambda a, x, y: torch.baddbmm(a, x, y), f(2, 4, 5), f(2, 4, 8),
                            f(2, 8, 5)),
        "torch.einsum": fn(lambda x, y: torch.einsum("bij,bjk->bik", x, y), f(2, 4, 8),
                           f(2, 8, 5)),
        "F.linear": fn(lambda x: F.linear(x, torch.ones(5, 8) / 8, torch.arange(5.0)),
                       f(2, 8), tvm=""),
        "nn.Linear": mod(lambda: nn.Linear(8, 5), f(2, 8)),
        "nn.Linear_3d": mod(lambda: nn.Linear(8, 5), f(2, 3, 8)),
        "nn.Linear_nobias": mod(lambda: nn.Linear(8, 5, bias=False), f(2, 8)),
        # ---- convolution ------------------------------------------------------------------
        "nn.Conv1d": mod(lambda: nn.Conv1d(4, 6, 3, stride=2, padding=1), X3),
        "nn.Conv2d": mod(lambda: nn.Conv2d(3, 6, 3), X4),
        "nn.Conv2d_groups": mod(lambda: nn.Conv2d(4, 8, 3, padding=1, groups=2,
                                                  bias=False), f(2, 4, 8, 8)),
        "nn.Conv2d_dilation": mod(lambda: nn.Conv2d(3, 4, 3, dilation=2, stride=(2, 1)), X4),
        "nn.Conv2d_same": mod(lambda: nn.Conv2d(3, 4, 4, padding="same"), X4, tvm=""),
        "nn.Conv2d_reflect": mod(lambda: nn.Conv2d(3, 4, 3, padding=1,
                                                   padding_mode="reflect"), X4, tvm=""),
        "nn.Conv3d": mod(lambda: nn.Conv3d(2, 4, 3), f(1, 2, 6, 6, 6)),
        "nn.ConvTranspose1d": mod(lambda: nn.ConvTranspose1d(4, 3, 3, stride=2), X3),
        "nn.ConvTranspose2d": mod(lambda: nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1,
                                                             output_padding=1), X4),
        "F.conv2d": fn(lambda x: F.conv2d(x, torch.ones(4, 3, 3, 3) / 27, None, 1, 1), X4,
                       tvm=""),
        # ---- normalization ----------------------------------------------------------------
        "nn.BatchNorm1d": mod(lambda: bn_stats(nn.BatchNorm1d(4)), X3, tvm=""),
        "nn.BatchNorm1d_2d": mod(lambda: bn_stats(nn.BatchNorm1d(8)), X2, tvm=""),
        "nn.BatchNorm2d": mod(lambda: bn_stats(nn.BatchNorm2d(3)), X4, tvm="ops",
                              note="TVM emits training=True"),
        "nn.BatchNorm3d": mod(lambda: bn_stats(nn.BatchNorm3d(2)), f(2, 2, 4, 4, 4), tvm=""),
        "nn.LayerNorm": mod(lambda: nn.LayerNorm(16), X3),
        "nn.LayerNorm_2d": mod(lambda: nn.LayerNorm([8, 8]), X4),
        "nn.LayerNorm_noaffine": mod(lambda: nn.LayerNorm(16, elementwise_affine=False), X3,
                                     tvm=""),
        "F.layer_norm": fn(lambda x: F.layer_norm(x, (16,)), X3),
        "nn.GroupNorm": mod(lambda: nn.GroupNorm(2, 4), f(2, 4, 6, 6)),
        "nn.InstanceNorm2d": mod(lambda: nn.InstanceNorm2d(3, affine=True), X4),
        "nn.InstanceNorm1d": mod(lambda: nn.InstanceNorm1d(4), X3, tvm="ops"),
        "nn.RMSNorm": mod(lambda: nn.RMSNorm(16, eps=1e-6), X3, tvm=""),
        # ---- pooling ----------------------------------------------------------------------
        "nn.MaxPool1d": mod(lambda: nn.MaxPool1d(2), X3),
        "nn.MaxPool2d": mod(lambda: nn.MaxPool2d(3, stride=2, padding=1), X4),
        "nn.MaxPool2d_ceil": mod(lambda: nn.MaxPool2d(3, stride=2, ceil_mode=True),
                                 f(2, 3, 9, 9)),
        "nn.MaxPool3d": mod(lambda: nn.MaxPool3d(2), f(1, 2, 4, 4, 4)),
        "nn.AvgPool1d": mod(lambda: nn.AvgPool1d(3, stride=2, padding=1), X3),
        "nn.AvgPool2d": mod(lambda: nn.AvgPool2d(2), X4),
        "nn.AvgPool2d_pad": mod(lambda: nn.AvgPool2d(3, 2, 1, count_include_pad=False), X4),
        "nn.AvgPool3d": mod(lambda: nn.AvgPool3d(2), f(1, 2, 4, 4, 4)),
        "nn.AdaptiveAvgPool1d": mod(lambda: nn.AdaptiveAvgPool1d(4), X3),
        "nn.AdaptiveAvgPool2d": mod(lambda: nn.AdaptiveAvgPool2d((1, 1)), X4),
        "nn.AdaptiveAvgPool2d_uneven": mod(lambda: nn.AdaptiveAvgPool2d(3), X4),
        "nn.AdaptiveMaxPool2d": mod(lambda: nn.AdaptiveMaxPool2d(2), X4, tvm=""),
        "F.max_pool2d": fn(lambda x: F.max_pool2d(x, 2), X4),
        "F.avg_pool2d": fn(lambda x: F.avg_pool2d(x, 2, 2), X4),
        "F.adaptive_avg_pool2d": fn(lambda x: F.adaptive_avg_pool2d(x, 2), X4),
        # ---- shapes -----------------------------------------------------------------------
        "nn.Flatten": mod(nn.Flatten, X4),
        "nn.Unflatten": mod(lambda: nn.Unflatten(1, (2, 2)), X3, tvm=""),
        "torch.flatten": fn(lambda x: torch.flatten(x, 1), X4),
        "Tensor.reshape": fn(lambda x: x.reshape(-1, 64), X4),
        "Tensor.view": fn(lambda x: x.view(x.size(0), 3, 64), X4, tvm="static"),
        "Tensor.view_shape": fn(lambda x: x.view(x.shape[0], -1), X4),
        "Tensor.permute": fn(lambda x: x.permute(0, 2, 3, 1), X4),
        "torch.permute": fn(lambda x: torch.permute(x, (3, 2, 1, 0)), X4),
        "Tensor.transpose": fn(lambda x: x.transpose(1, 2), X3),
        "torch.transpose_neg": fn(lambda x: torch.transpose(x, -1, -2), X3),
        "Tensor.t": fn(lambda x: x.t(), X2, tvm=""),
        "Tensor.contiguous": fn(lambda x: x.transpose(1, 2).contiguous(), X3),
        "Tensor.squeeze": fn(lambda x: x.squeeze(1), f(2, 1, 5)),
        "Tensor.squeeze_all": fn(lambda x: x.squeeze(), f(3, 1, 5, 1), dyn=False),
        "Tensor.unsqueeze": fn(lambda x: x.unsqueeze(1), X3),
        "torch.unsqueeze_neg": fn(lambda x: torch.unsqueeze(x, -1), X3, tvm=""),
        "Tensor.expand": fn(lambda x: x.expand(2, 3, 4), f(2, 1, 4), dyn=False),
        "Tensor.expand_neg": fn(lambda x: x.expand(-1, 5, -1), f(2, 1, 4)),
        "Tensor.expand_as": fn(lambda x, y: x.expand_as(y), f(2, 1, 4), f(2, 3, 4), tvm=""),
        "Tensor.repeat": fn(lambda x: x.repeat(1, 2, 3), X3),
        "torch.tile": fn(lambda x: torch.tile(x, (2, 1)), X2),
        "torch.cat": fn(lambda x, y: torch.cat([x, y], dim=1), X3, f(2, 3, 16)),
        "torch.cat_neg": fn(lambda x, y: torch.cat((x, y), -1), X3, f(2, 4, 16)),
        "torch.stack": fn(lambda x, y: torch.stack([x, y], 1), X3, f(2, 4, 16)),
        "torch.split": fn(lambda x: torch.split(x, 4, dim=2), X3),
        "torch.split_uneven": fn(lambda x: torch.split(x, 6, dim=2), X3),
        "torch.split_sizes": fn(lambda x: torch.split(x, [3, 5, 8], 2), X3),
        "torch.chunk": fn(lambda x: torch.chunk(x, 2, 1), X3, tvm="ops"),
        "Tensor.chunk_uneven": fn(lambda x: x.chunk(3, -1), f(2, 4, 8), tvm=""),
        "torch.unbind": fn(lambda x: torch.unbind(x, 1), X3),
        "Tensor.size": fn(lambda x: x.reshape(x.size(0) * x.size(1), -1), X3, tvm="static"),
        "Tensor.dim": fn(lambda x: x.reshape(x.dim(), -1), f(3, 4, 2), dyn=False, tvm=""),
        "Tensor.flip": fn(lambda x: x.flip(1), X3),
        "torch.flip_multi": fn(lambda x: torch.flip(x, [1, 2]), X3),
        "torch.roll": fn(lambda x: torch.roll(x, 2, 2), X3),
        "torch.roll_flat": fn(lambda x: torch.roll(x, 3), X3, dyn=False),
        # ---- indexing ---------------------------------------------------------------------
        "getitem.int": fn(lambda x: x[:, 0], X3, tvm=""),
        "getitem.last": fn(lambda x: x[:, -1], X3, tvm=""),
        "getitem.slice": fn(lambda x: x[:, 1:3], X3),
        "getitem.step": fn(lambda x: x[:, :, ::2], X3),
        "getitem.neg_slice": fn(lambda x: x[..., -4:], X3),
        "getitem.none": fn(lambda x: x[:, None, 1:], X3),
        "getitem.ellipsis": fn(lambda x: x[..., 1, :], X4, tvm=""),
        "getitem.tensor": fn(lambda x, y: x[y], f(6, 4), i(3, high=6), dyn=False),
        "getitem.tensor_axis1": fn(lambda x, y: x[:, y], f(2, 6, 4), i(3, high=6, dyn=()),
                                   tvm="ops"),
        "getitem.tensors": fn(lambda x, y, z: x[y, z], f(5, 6, 2), i(3, high=5, dyn=()),
                              i(3, high=6, dyn=()), tvm=""),
        "getitem.tensors_mid": fn(lambda x, y, z: x[:, y, z], f(2, 5, 6, 3),
                                  i(4, high=5, dyn=()), i(4, high=6, dyn=()), tvm=""),
        "torch.index_select": fn(lambda x, y: torch.index_select(x, 1, y), f(2, 6, 4),
                                 i(3, high=6, dyn=())),
        "torch.gather": fn(lambda x, y: torch.gather(x, 1, y), f(2, 6), i(2, 3, high=6)),
        "Tensor.scatter": fn(lambda x, y, z: x.scatter(1, y, z), f(2, 6), i(2, 3, high=6),
                             f(2, 3), tvm="", dyn=False),
        "Tensor.index_put_rows": fn(lambda x, z: x.index_put((torch.tensor([4, 0, -1]),), z),
                                    f(6, 4, dyn=()), f(3, 4, dyn=()), tvm=""),
        "Tensor.index_put_rows_accumulate": fn(
            lambda x, y, z: x.index_put((y,), z, accumulate=True), f(6, 4), i(5, high=6, dyn=()),
            f(5, 4, dyn=()), tvm="", dyn=False),
        "Tensor.index_put_pairs_scalar": fn(
            lambda x, y, z: x.index_put((y, z), torch.tensor(2.5)), f(4, 5, 3),
            i(2, high=4, dyn=()), i(2, high=5, dyn=()), tvm="", dyn=False),
        "Tensor.masked_fill": fn(lambda x, m: x.masked_fill(m, -1.0), f(2, 5), b(2, 5)),
        "Tensor.masked_fill_inf": fn(lambda x, m: x.masked_fill(m, float("-inf")), f(2, 5),
                                     b(1, 5, dyn=())),
        "Tensor.masked_scatter": fn(lambda x, m, s: x.masked_scatter(m, s), f(2, 5), b(2, 5),
                                    f(2, 5), tvm="", dyn=False),
        "torch.where": fn(lambda c, x, y: torch.where(c, x, y), b(2, 5), f(2, 5), f(2, 5)),
        "torch.where_scalar": fn(lambda c, x: torch.where(c, x, 0.0), b(2, 5), f(2, 5),
                                 tvm=""),
        "torch.tril": fn(lambda x: torch.tril(x, 1), f(5, 5), dyn=False),
        "Tensor.triu": fn(lambda x: x.triu(), f(2, 5, 5)),
        "torch.cumsum": fn(lambda x: torch.cumsum(x, 1), X3),
        "Tensor.narrow": fn(lambda x: x.narrow(2, 1, 4), X3, tvm="",
                            note="TVM slices to the length, not start + length"),
        "Tensor.select": fn(lambda x: x.select(1, 2), X3),
        "Tensor.select_neg": fn(lambda x: x.select(2, -1), X3, tvm=""),
        # ---- dtypes -----------------------------------------------------------------------
        "Tensor.float": fn(lambda x: x.float() + 1, i(2, 5)),
        "Tensor.to_dtype": fn(lambda x: x.to(torch.float16).to(torch.float32), X3),
        "Tensor.to_other": fn(lambda x, y: x.to(y), i(2, 5), f(2, 5), tvm=""),
        "Tensor.long": fn(lambda x: x.long(), X3, tvm=""),
        "Tensor.int": fn(lambda x: (x * 3).int(), X3, tvm=""),
        "Tensor.bool": fn(lambda x: x.bool(), i(2, 5, high=2), tvm=""),
        "Tensor.half": fn(lambda x: x.half().float(), X3),
        "Tensor.type_as": fn(lambda x, y: x.type_as(y), i(2, 5), f(2, 5)),
        "Tensor.type": fn(lambda x: x.type(torch.float32), i(2, 5)),
        # ---- creation ---------------------------------------------------------------------
        "torch.arange": fn(lambda x: x + torch.arange(16), X3, tvm=""),
        "torch.arange_size": fn(lambda x: x + torch.arange(x.size(-1)), X3),
        "torch.zeros": fn(lambda x: x + torch.zeros(4, 16), X3),
        "torch.ones": fn(lambda x: x + torch.ones((4, 16)), X3),
        "torch.full": fn(lambda x: x * torch.full((4, 16), 2.0), X3),
        "torch.empty": fn(lambda x: torch.empty(4, 16).shape[0] * x, X3, tvm=""),
        "Tensor.new_ones": fn(lambda x: x + x.new_ones(4, 16), X3),
        "Tensor.new_zeros": fn(lambda x: x + x.new_zeros((4, 16)), X3),
        "torch.zeros_like": fn(lambda x: x + torch.zeros_like(x), X3),
        "torch.ones_like": fn(lambda x: x + torch.ones_like(x), X3),
        "torch.full_like": fn(lambda x: x + torch.full_like(x, 3.0), X3, tvm=""),
        "torch.empty_like": fn(lambda x: torch.empty_like(x).shape[1] * x, X3, tvm=""),
        # ---- reductions -------------------------------------------------------------------
        "torch.sum": fn(lambda x: torch.sum(x, 1), X3),
        "Tensor.sum_keepdim": fn(lambda x: x.sum((1, 2), keepdim=True), X3),
        "Tensor.sum_all": fn(lambda x: x.sum(), X3),
        "torch.sum_int": fn(lambda x: torch.sum(x, -1), i(2, 5)),
        "torch.mean": fn(lambda x: torch.mean(x, -1, keepdim=True), X3),
        "Tensor.mean_dims": fn(lambda x: x.mean([2, 3]), X4),
        "torch.max_reduce": fn(lambda x: torch.max(x), X3, tvm=""),
        "torch.max_dim": fn(lambda x: torch.max(x, 1), X3, tvm=""),
        "torch.max_dim_values": fn(lambda x: torch.max(x, 1)[0], X3, tvm=""),
        "torch.min_dim": fn(lambda x: torch.min(x, -1, keepdim=True), X3, tvm=""),
        "torch.amax": fn(lambda x: torch.amax(x, (1, 2)), X3, tvm=""),
        "torch.prod": fn(lambda x: torch.prod(x, 1), f(2, 3, 4)),
        "torch.std": fn(lambda x: torch.std(x, 1), X3, tvm="",
                        note="TVM's std is biased"),
        "Tensor.std_biased": fn(lambda x: x.std(-1, unbiased=False), X3, tvm=""),
        "torch.var": fn(lambda x: torch.var(x, -1), X3, tvm="",
                        note="TVM drops Bessel's correction"),
        "Tensor.var_keepdim": fn(lambda x: x.var(1, keepdim=True, correction=0), X3, tvm=""),
        "torch.argmax": fn(lambda x: torch.argmax(x, 1), X3),
        "Tensor.argmin": fn(lambda x: x.argmin(-1, keepdim=True), X3),
        "torch.topk": fn(lambda x: torch.topk(x, 3), X3),
        "torch.sort": fn(lambda x: torch.sort(x, 1, descending=True), X3),
        "torch.argsort": fn(lambda x: torch.argsort(x, -1), X3),
        "torch.norm": fn(lambda x: torch.norm(x, dim=-1), X3, tvm=""),
        # ---- resampling and padding -------------------------------------------------------
        "F.interpolate_nearest": fn(lambda x: F.interpolate(x, scale_factor=2), X4, tvm="ops",
                                    note="TVM rounds instead of flooring"),
        "F.interpolate_nearest_size": fn(lambda x: F.interpolate(x, size=(5, 12)), X4,
                                         tvm="ops"),
        "F.interpolate_bilinear": fn(lambda x: F.interpolate(x, size=(12, 5),
                                                             mode="bilinear"), X4),
        "F.interpolate_align": fn(lambda x: F.interpolate(x, scale_factor=2, mode="bilinear",
                                                          align_corners=True), X4),
        "F.interpolate_bicubic": fn(lambda x: F.interpolate(x, size=(11, 6), mode="bicubic"),
                                    X4, atol=1e-4),
        "F.interpolate_linear1d": fn(lambda x: F.interpolate(x, size=7, mode="linear"), X3,
                                     tvm=""),
        "nn.Upsample": mod(lambda: nn.Upsample(scale_factor=2, mode="nearest"), X4, tvm=""),
        "nn.Upsample_bilinear": mod(lambda: nn.Upsample(size=(10, 12), mode="bilinear"), X4,
                                    tvm=""),
        "F.pad": fn(lambda x: F.pad(x, (1, 2)), X3),
        "F.pad_2d": fn(lambda x: F.pad(x, (1, 1, 2, 0), value=0.5), X4),
        "F.pad_reflect": fn(lambda x: F.pad(x, (2, 1, 1, 2), mode="reflect"), X4, tvm="ops"),
        "F.pad_replicate": fn(lambda x: F.pad(x, (2, 1), mode="replicate"), X3, tvm="ops"),
        "nn.PixelShuffle": mod(lambda: nn.PixelShuffle(2), f(1, 8, 3, 3)),
        # ---- attention --------------------------------------------------------------------
        "F.sdpa": fn(F.scaled_dot_product_attention, f(2, 4, 6, 8), f(2, 4, 6, 8),
                     f(2, 4, 6, 8)),
        "F.sdpa_causal": fn(lambda q, k, v: F.scaled_dot_product_attention(q, k, v,
                                                                           is_causal=True),
                            f(2, 4, 6, 8), f(2, 4, 6, 8), f(2, 4, 6, 8)),
        "F.sdpa_mask": fn(lambda q, k, m: F.scaled_dot_product_attention(q, k, k, m),
                          f(2, 4, 6, 8), f(2, 4, 5, 8), f(2, 1, 6, 5), tvm="ops"),
        "F.sdpa_bool_mask": fn(lambda q, k, m: F.scaled_dot_product_attention(q, k, k, m),
                               f(2, 4, 6, 8), f(2, 4, 5, 8), b(6, 5, dyn=()), tvm=""),
        "F.sdpa_scale": fn(lambda q, k: F.scaled_dot_product_attention(q, k, k, scale=0.5),
                           f(2, 4, 6, 8), f(2, 4, 6, 8), tvm="ops"),
        "nn.MultiheadAttention": custom(lambda: _Mha(16, 4, batch_first=True), f(2, 5, 16),
                                        tvm=""),
        "nn.MultiheadAttention_seq_first": custom(lambda: _Mha(16, 2, need_weights=False),
                                                  f(5, 2, 16, dyn=(1,)), tvm=""),
        # ---- embedding and losses ---------------------------------------------------------
        "nn.Embedding": mod(lambda: nn.Embedding(10, 6), i(2, 5)),
        "nn.Embedding_1d": mod(lambda: nn.Embedding(10, 6), i(5)),
        "F.embedding": fn(lambda x: F.embedding(x, torch.arange(30.0).reshape(10, 3)),
                          i(2, 5), tvm=""),
        "nn.CrossEntropyLoss": custom(lambda: LossOf(nn.CrossEntropyLoss()), f(4, 5),
                                      i(4, high=5), dyn=False),
        "nn.CrossEntropyLoss_sum": custom(lambda: LossOf(nn.CrossEntropyLoss(
            reduction="sum")), f(4, 5), i(4, high=5), dyn=False),
        "nn.NLLLoss": custom(lambda: LossOf(nn.NLLLoss()), f(4, 5), i(4, high=5),
                             dyn=False, tvm=""),
        "F.cross_entropy": fn(lambda x, t: F.cross_entropy(x, t), f(4, 5), i(4, high=5),
                              dyn=False),
        # ---- whole blocks -----------------------------------------------------------------
        "block.conv_bn_relu": custom(lambda: bn_stats(nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4))), X4, tvm="ops"),
        "block.residual": custom(_Residual, X4),
        "block.attention": custom(_Attention, f(2, 6, 16), tvm=""),
    }
    return {name: Case(name, **kw) for name, kw in c.items()}


def _iadd(x, y):
    x += y
    return x * 2


def bn_stats(m: nn.Module) -> nn.Module:
    """Give batch norms (those that track them) non-trivial running statistics."""
    for sub in m.modules():
        if isinstance(sub, nn.modules.batchnorm._BatchNorm) and sub.running_mean is not None:
            sub.running_mean.uniform_(-1, 1)
            sub.running_var.uniform_(0.5, 2)
    return m


class LossOf(nn.Module):
    def __init__(self, loss):
        super().__init__()
        self.loss = loss

    def forward(self, x, t):
        return self.loss(x, t)


class _Mha(nn.Module):
    def __init__(self, dim, heads, batch_first=False, need_weights=True):
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=batch_first)
        self.need_weights = need_weights

    def forward(self, x):
        out, _ = self.attn(x, x, x, need_weights=self.need_weights)
        return out


class _Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 3, 3, padding=1)
        self.conv2 = nn.Conv2d(3, 3, 1)

    def forward(self, x):
        return torch.relu(self.conv2(torch.relu(self.conv1(x))) + x)


class _Attention(nn.Module):
    """A hand-written attention block: view/transpose/matmul/softmax."""

    def __init__(self, dim=16, heads=4):
        super().__init__()
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)
        self.heads = heads

    def forward(self, x):
        b_, s, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (t.view(b_, s, self.heads, d // self.heads).transpose(1, 2)
                   for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        out = att.softmax(-1) @ v
        return self.proj(out.transpose(1, 2).reshape(b_, s, d))


CASES = _cases()
