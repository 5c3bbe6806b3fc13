"""Native "kernel" facts for nn.conv1d and msc.conv1d_bias: the 2-D conv of a plane one row
high.

A 1-D conv of ``[N, C, W]`` data is the 2-D conv of ``[N, C, 1, W]`` data with a ``[O, I, 1,
K]`` weight: the same bytes, so the site is seen as that 2-D conv (strides ``(1, s)``,
padding ``(0, l, 0, r)``, dilation ``(1, d)``, an ``H`` put before each layout's ``W``) and
conv.py's fact picks and makes the kernel (direct, pixel tiles, GEMM path, depthwise windows),
its epilogues (bias, scale, relu) and its native chain step included. Audio front ends run
these: Whisper's two convs over the mel frames, wav2vec2's feature extractor and its grouped
positional conv; as compiled TIR they cost 2-4x onnxruntime's Conv.

    Conv1dFact().make(site)(x, out)      # x [N, C, W] -> out [N, O, W']

Not taken: a fused residual add (the 2-D kernels add a 4-D tensor) and a bias that is not
one value per output channel; those sites keep the TIR / numpy paths.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ...relax.expr import Attrs
from ...relax.op.registry import attach
from ...relax.struct_info import TensorStructInfo
from ...tir import IntImm
from .base import Kernel, KernelFact, Site
from .conv import Conv2dFact

__all__ = ["Conv1dFact", "as_conv2d"]


def _one(v) -> int:
    v = v if isinstance(v, (tuple, list)) else (v,)
    return int(v[0])


def _pad2(v) -> tuple:
    v = tuple(int(x) for x in (v if isinstance(v, (tuple, list)) else (v,)))
    return v * 2 if len(v) == 1 else v[:2]


def _with_h(layout: str | None) -> str | None:
    """A 1-D layout with ``H`` before its ``W``: NCW -> NCHW, NWC -> NHWC, OIW -> OIHW."""
    return None if not layout or "W" not in layout else layout.replace("W", "HW")


def _attrs_2d(attrs) -> Attrs | None:
    get = attrs.get if attrs is not None else (lambda name, default=None: default)
    data_layout = get("data_layout") or "NCW"
    left, right = _pad2(get("padding", 0))
    items = {"strides": (1, _one(get("strides", 1))), "padding": (0, left, 0, right),
             "dilation": (1, _one(get("dilation", 1))), "groups": int(get("groups", 1)),
             "data_layout": _with_h(data_layout),
             "kernel_layout": _with_h(get("kernel_layout") or "OIW"),
             "out_layout": _with_h(get("out_layout") or data_layout),
             "out_dtype": get("out_dtype")}
    return None if None in (items["data_layout"], items["kernel_layout"],
                            items["out_layout"]) else Attrs(items)


def _sinfo_2d(sinfo, layout: str):
    """The struct info of a 1-D tensor in ``layout`` (…W…) with a unit H before its W."""
    if not isinstance(sinfo, TensorStructInfo) or sinfo.ndim != 3:
        return None
    if sinfo.values is None:
        return TensorStructInfo(None, sinfo.dtype, 4)
    at = layout.index("W")
    values = list(sinfo.values)
    return TensorStructInfo([*values[:at], IntImm(1), *values[at:]], sinfo.dtype)


def _value_2d(value, layout: str):
    sinfo = _sinfo_2d(value.sinfo, layout)
    if sinfo is None:
        return None
    const = value.const
    if isinstance(const, np.ndarray) and const.ndim == 3:
        const = np.expand_dims(const, layout.index("W"))
    return dataclasses.replace(value, sinfo=sinfo, const=const)


def as_conv2d(site: Site) -> Site | None:
    """The 2-D conv site of a 1-D conv site (None when it is not one: rank, layouts, a
    residual epilogue, a bias that is not per output channel)."""
    attrs = _attrs_2d(site.attrs)
    if attrs is None or len(site.args) < 2 or any(e[0] == "residual" for e in site.epilogue):
        return None
    data = _value_2d(site.args[0], attrs["data_layout"].replace("H", ""))
    weight = _value_2d(site.args[1], attrs["kernel_layout"].replace("H", ""))
    out = _sinfo_2d(site.out, attrs["out_layout"].replace("H", ""))
    if data is None or weight is None or out is None:
        return None
    if len(site.args) > 2 and not _per_channel(site.const(2), site.out, attrs["out_layout"]):
        return None
    return Site(site.op.replace("conv1d", "conv2d"), attrs, [data, weight, *site.args[2:]], out,
                site.epilogue, site.call)


def _per_channel(bias, out, layout: str) -> bool:
    """A bias of one value per output channel (1-D, or ones but along C)."""
    if not isinstance(bias, np.ndarray) or not isinstance(out, TensorStructInfo):
        return False
    channels = out.values[layout.replace("H", "").index("C")] if out.values else None
    count = getattr(channels, "value", None)
    return count is not None and bias.size == count and (
        bias.ndim == 1 or bias.shape[layout.replace("H", "").index("C")] == count)


class Conv1d(Kernel):
    """A 2-D conv kernel run on ``[N, C, W]`` arrays as ``[N, C, 1, W]`` views (NCW; NWC
    data as ``[N, 1, W, C]``)."""

    def __init__(self, inner: Kernel, data_at: int, out_at: int):
        self.inner, self.inputs, self.op = inner, inner.inputs, getattr(inner, "op", "nn.conv1d")
        self.data_at, self.out_at = data_at, out_at

    def __call__(self, x, out):
        self.inner(np.expand_dims(x, self.data_at) if getattr(x, "ndim", 0) == 3 else x,
                   np.expand_dims(out, self.out_at))
        return out

    def native_signature(self, buffers: list) -> tuple | None:
        """The 2-D kernel's chain step on the same buffers seen with a unit H."""
        signature_of = getattr(self.inner, "native_signature", None)
        if signature_of is None or len(buffers) != 2 or any(len(s) != 3 for s, _ in buffers):
            return None
        (shape, dtype), (out_shape, out_dtype) = buffers
        return signature_of([(_unit_h(shape, self.data_at), dtype),
                             (_unit_h(out_shape, self.out_at), out_dtype)])


def _unit_h(shape, at: int) -> tuple:
    return (*shape[:at], 1, *shape[at:])


class Conv1dFact(KernelFact):
    """conv.py's Conv2dFact on the site seen as a 2-D conv (the module docstring)."""

    def __init__(self, has_bias: bool = False):
        self.inner = Conv2dFact(has_bias)
        self.epilogues = self.inner.epilogues

    def match(self, site: Site) -> bool:
        flat = as_conv2d(site)
        return flat is not None and self.inner.match(flat)

    def channel_axis(self, site: Site) -> int | None:
        flat = as_conv2d(site)
        return None if flat is None else flat.attrs["out_layout"].replace("H", "").index("C")

    def epilogues_for(self, site: Site) -> frozenset:
        flat = as_conv2d(site)
        return frozenset() if flat is None else self.inner.epilogues_for(flat) - {"residual"}

    def make(self, site: Site) -> Kernel:
        flat = as_conv2d(site)
        attrs = flat.attrs
        return Conv1d(self.inner.make(flat), attrs["data_layout"].index("H"),
                      attrs["out_layout"].index("H"))


attach("nn.conv1d", "kernel", Conv1dFact())
attach("msc.conv1d_bias", "kernel", Conv1dFact(has_bias=True))
