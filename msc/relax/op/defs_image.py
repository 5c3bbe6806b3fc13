"""Image ops (``relax.op.image.*``): resize2d / resize3d, grid_sample, affine_grid.

Spatial dims are read by layout letter, so NHWC works like NCHW::

    relax.op.image.resize2d(x, (h * 2, 64), layout="NHWC", method="nearest_neighbor")
"""

from __future__ import annotations

from ...tir import expr as tir
from .defs_nn import python_order
from .infer import (
    SPATIAL_LETTERS,
    by_letter,
    check_dim,
    check_rank,
    layout_positions,
    result_dtype,
    tensor,
)
from .registry import Arg, AttrDef, register


def _check_size(ctx, count: int, why: str) -> tuple | None:
    """The values of the shape argument 1 (None if unknown), which must hold ``count`` dims."""
    values, ndim = ctx.shape_values(1), ctx.sinfo[1].ndim
    if ndim >= 0 and ndim != count:
        raise ctx.error(f"has {ndim} values, but {why} needs {count}", 1)
    return values


def resize_infer(d: int):
    letters = "NC" + SPATIAL_LETTERS[d]

    def infer(ctx):
        data, attrs = ctx.tensor(0), ctx.attrs
        layout_positions(ctx, attrs.layout, letters, 0, "layout")
        check_rank(ctx, data, d + 2, 0, f"layout {attrs.layout!r}")
        size = _check_size(ctx, d, f"the output {letters[2:]}")
        dtype = result_dtype(ctx, [data], attrs.out_dtype)
        if data.values is None or size is None:
            return tensor(None, dtype, d + 2)
        out = {**by_letter(data.values, attrs.layout), **dict(zip(letters[2:], size))}
        return tensor([out[c] for c in attrs.layout], dtype)
    return infer


def _resize_attrs(d: int, rounding_method: str) -> list:
    return [
        AttrDef("roi", "floats", None), AttrDef("layout", "str", "NC" + SPATIAL_LETTERS[d]),
        AttrDef("method", "str", "linear"),
        AttrDef("coordinate_transformation_mode", "str", "half_pixel"),
        AttrDef("rounding_method", "str", rounding_method), AttrDef("cubic_alpha", "float", -0.75),
        AttrDef("cubic_exclude", "int", 0), AttrDef("extrapolation_value", "float", 0.0),
        AttrDef("out_dtype", "dtype", None),
    ]


def _as_size(size, d: int):
    """TVM's size forms: one int / PrimExpr for every axis, a 1-list, or one per axis."""
    if isinstance(size, (int, tir.PrimExpr)):
        return (size,) * d
    if isinstance(size, (list, tuple)) and len(size) == 1:
        return tuple(size) * d
    return size


def _resize_prepare(d: int):
    def prepare(values: dict) -> str:
        values["size"] = _as_size(values["size"], d)
        roi = values["roi"]
        values["roi"] = (0.0,) * (2 * d) if roi is None else (
            (roi,) * (2 * d) if isinstance(roi, (int, float)) else roi)
        return f"image.resize{d}d"
    return prepare


def _resize_normalize(d: int):
    def normalize(attrs: dict, exprs) -> dict:
        if attrs["roi"] is None:
            attrs["roi"] = (0.0,) * (2 * d)
        if attrs["out_dtype"] == "void":
            attrs["out_dtype"] = None
        return attrs
    return normalize


for _d, _rounding in ((2, "round"), (3, "")):
    _op = register(f"image.resize{_d}d", [Arg("data"), Arg("size", "shape")],
                   _resize_attrs(_d, _rounding), infer=resize_infer(_d), family="image",
                   normalize=_resize_normalize(_d))
    python_order(_op, [a.name for a in _op.args + _op.attrs], prepare=_resize_prepare(_d))


def grid_sample_infer(ctx):
    """data [N, C, *in] sampled at grid [N, d, *out] (TVM's grid layout) -> [N, C, *out]."""
    data, grid, layout = ctx.tensor(0), ctx.tensor(1), ctx.attrs.layout
    d = len(layout) - 2 if isinstance(layout, str) and len(layout) in (4, 5) else 2
    letters = "NC" + SPATIAL_LETTERS[d]
    layout_positions(ctx, layout, letters, 0, "layout")
    check_rank(ctx, data, d + 2, 0, f"layout {layout!r}")
    check_rank(ctx, grid, d + 2, 1, f"a {d}-D grid_sample ([N, {d}, *out])")
    if data.values is None or grid.values is None:
        return tensor(None, data.dtype, d + 2)
    x = by_letter(data.values, layout)
    check_dim(ctx, grid.values[0], x["N"], 1, "batch size")
    out = {**x, **dict(zip(letters[2:], grid.values[2:]))}
    return tensor([out[c] for c in layout], data.dtype)


def affine_grid_infer(ctx):
    """theta [N, 2, 3] -> sampling grid [N, 2, H, W]."""
    data = ctx.tensor(0)
    check_rank(ctx, data, 3, 0, "affine_grid ([N, 2, 3] affine matrices)")
    size = _check_size(ctx, 2, "affine_grid (the output H, W)")
    if data.values is not None:
        check_dim(ctx, data.values[2], tir.IntImm(3), 0, "dim 2 of the affine matrices")
    if data.values is None or size is None:
        return tensor(None, data.dtype, 4)
    return tensor([data.values[0], 2, *size], data.dtype)


register("image.grid_sample", [Arg("data"), Arg("grid")],
         [AttrDef("method", "str", "bilinear"), AttrDef("layout", "str", "NCHW"),
          AttrDef("padding_mode", "str", "zeros"), AttrDef("align_corners", "bool", False)],
         infer=grid_sample_infer, family="image")


def _affine_prepare(values: dict) -> str:
    values["size"] = _as_size(values["size"], 2)
    return "image.affine_grid"


python_order(register("image.affine_grid", [Arg("data"), Arg("size", "shape")],
                      [AttrDef("align_corners", "bool", True)], infer=affine_grid_infer,
                      family="image"), ["data", "size", "align_corners"], prepare=_affine_prepare)


def nms_infer(ctx):
    """ONNX NonMaxSuppression: boxes [B, N, 4], scores [B, C, N] -> int64 [count, 3] rows of
    (batch, class, box); the count depends on the data (like ``nonzero``)."""
    boxes, scores = ctx.tensor(0), ctx.tensor(1)
    check_rank(ctx, boxes, 3, 0, "boxes [batch, boxes, 4]")
    check_rank(ctx, scores, 3, 1, "scores [batch, classes, boxes]")
    for i in (2, 3, 4):
        ctx.tensor(i)
    return tensor(None, "int64", 2)


# The three thresholds are 0-d tensors (values known at run time in ONNX graphs).
register("vision.non_max_suppression",
         [Arg("boxes"), Arg("scores"), Arg("max_output_boxes_per_class"), Arg("iou_threshold"),
          Arg("score_threshold")], [AttrDef("center_point_box", "int", 0)],
         infer=nms_infer, family="search")


def col2im_infer(ctx):
    """ONNX Col2Im: [N, C * prod(block), L] -> [N, C, *image_shape]; the image and block
    shapes are tensors (often known only at run time), so only the rank may be known."""
    data, image = ctx.tensor(0), ctx.tensor(1)
    ctx.tensor(2)
    check_rank(ctx, data, 3, 0, "Col2Im's input [N, C * prod(block), L]")
    spatial = image.values[0] if image.values is not None else None
    count = spatial.value if isinstance(spatial, tir.IntImm) else None
    return tensor(None, data.dtype, -1 if count is None else count + 2)


register("col2im", [Arg("data"), Arg("image_shape"), Arg("block_shape")],
         [AttrDef("dilations", "ints", None), AttrDef("pads", "ints", None),
          AttrDef("strides", "ints", None)], infer=col2im_infer, family="image")


def deform_conv2d_infer(ctx):
    """ONNX DeformConv (2-D): data [N, C, H, W], weight [O, C / groups, kH, kW], offset
    [N, offset_groups * kH * kW * 2, oH, oW] (+ bias [O], mask [N, offset_groups * kH * kW,
    oH, oW]) -> [N, O, oH, oW]: the output grid is the offset's."""
    data, weight, offset = ctx.tensor(0), ctx.tensor(1), ctx.tensor(2)
    for i, (sinfo, why) in enumerate([(data, "data [N, C, H, W]"), (weight, "weight"),
                                      (offset, "offset [N, 2 * taps, oH, oW]")]):
        check_rank(ctx, sinfo, 4, i, why)
    for i in range(3, len(ctx.args)):
        ctx.tensor(i)
    if data.values is None or weight.values is None or offset.values is None:
        return tensor(None, data.dtype, 4)
    return tensor([data.values[0], weight.values[0], *offset.values[2:]], data.dtype)


register("image.deform_conv2d",
         [Arg("data"), Arg("weight"), Arg("offset"), Arg("bias"), Arg("mask")],
         [AttrDef("strides", "ints", None), AttrDef("pads", "ints", None),
          AttrDef("dilations", "ints", None), AttrDef("groups", "int", 1),
          AttrDef("offset_groups", "int", 1)], infer=deform_conv2d_infer, family="image")
