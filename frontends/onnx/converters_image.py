"""Image ONNX ops: Resize / Upsample onto ``image.resize2d|3d``, GridSample, AffineGrid.

Output sizes given as ``sizes`` are used as they are (symbolic when they are graph inputs);
sizes from ``scales`` are ``floor(dim * scale)``, computed at run time when the scales are.
"""

from __future__ import annotations

import numpy as np

from msc import relax
from msc.tir import expr as tir

from .common import call
from .context import Context, OnnxNode
from .converters_manipulate import need_const
from .resize_weights import matrix_resize

_METHODS = {"nearest": "nearest_neighbor", "linear": "linear", "cubic": "cubic",
            "bilinear": "linear", "bicubic": "cubic"}
_COORD_MODES = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                "tf_half_pixel_for_nn", "tf_crop_and_resize")


def _resize(g: Context, node: OnnxNode, x, sizes: list, **attrs):
    """Resize the trailing spatial axes of an N, C, spatial... tensor to ``sizes``."""
    spatial = len(sizes)
    if spatial == 1:  # a 1-D resize is a 2-D one over a unit height
        y = call("expand_dims", x, [2])
        y = _resize(g, node, g.emit(y), [1, sizes[0]], **attrs)
        return g.emit(call("squeeze", y, [2]))
    if spatial not in (2, 3):
        raise node.unsupported(f"resizing {spatial} spatial axes is not supported")
    layout = "NCHW" if spatial == 2 else "NCDHW"
    return g.emit(call(f"image.resize{spatial}d", x, sizes, layout=layout, **attrs))


def _output_sizes(g: Context, node: OnnxNode, x, scales, sizes, axes: list) -> list:
    """Target dims for every axis of ``x`` (the given axes only; others keep theirs)."""
    dims = list(need_const(node, g.shape(x), "the input shape"))
    policy = node.attrs.get("keep_aspect_ratio_policy") or "stretch"
    if sizes is not None and policy != "stretch" and g.ints(sizes) is None:
        values = _keep_aspect_at_runtime(node, g, x, sizes, axes, policy)
    elif sizes is not None:
        values = need_const(node, g.runtime_ints(sizes, "size"), "sizes")
        values = _keep_aspect(node, dims, values, axes)
    else:
        values = _scaled(g, node, x, scales, dims, axes)
    out = list(dims)
    for axis, v in zip(axes, values):
        out[axis] = v
    return out


def _scaled(g: Context, node: OnnxNode, x, scales, dims, axes) -> list:
    known = g.value(scales)
    if known is not None:
        picked = [dims[a] for a in axes]
        return [_floor_scale(node, d, float(s)) for d, s in zip(picked, known.reshape(-1))]
    whole = call("astype", call("shape_to_tensor", call("shape_of", x)), "float32")
    if len(axes) != len(dims):
        whole = call("take", whole, relax.const(np.asarray(axes, "int64")), 0)
    sizes = g.emit(call("astype", call("floor", call("multiply", whole, scales)), "int64"))
    return need_const(node, g.runtime_ints(sizes, "size"), "scales")


def _floor_scale(node: OnnxNode, dim, scale: float):
    static = tir.as_int(tir.convert(dim))
    if static is None:
        if scale == 1.0:
            return dim
        raise node.unsupported("scales on a symbolic dim")
    return int(np.floor(static * scale))


def _keep_aspect(node: OnnxNode, dims, values, axes) -> list:
    policy = node.attrs.get("keep_aspect_ratio_policy") or "stretch"
    if policy == "stretch":
        return values
    ins = [tir.as_int(tir.convert(dims[a])) for a in axes]
    if any(v is None for v in ins + [tir.as_int(tir.convert(v)) for v in values]):
        raise node.unsupported("keep_aspect_ratio_policy needs static sizes")
    ratios = [int(v) / d for v, d in zip(values, ins)]
    scale = min(ratios) if policy == "not_larger" else max(ratios)
    return [int(np.floor(d * scale + 0.5)) for d in ins]


def _keep_aspect_at_runtime(node: OnnxNode, g: Context, x, sizes, axes, policy: str) -> list:
    """keep_aspect_ratio_policy with sizes given at run time: one scale (the smallest or
    largest of size / dim), every resized dim round(dim * scale)."""
    whole = call("astype", call("shape_to_tensor", call("shape_of", x)), "float32")
    dims = call("take", whole, relax.const(np.asarray(axes, "int64")), 0)
    ratio = call("divide", call("astype", sizes, "float32"), dims)
    scale = call("min" if policy == "not_larger" else "max", ratio, None, True)
    out = call("floor", call("add", call("multiply", dims, scale), relax.const(0.5, "float32")))
    out = g.emit(call("astype", out, "int64"))
    return need_const(node, g.runtime_ints(out, "size"), "sizes")


def convert_resize_v10(g: Context, node: OnnxNode):
    """Resize-10: (X, scales), Upsample's asymmetric coordinates and floor rounding."""
    x, scales = node.inputs[:2]
    rank = g.ndim(x)
    out = _output_sizes(g, node, x, scales, None, list(range(rank)))
    return _resize(g, node, x, out[2:], **_upsample_attrs(node.attrs["mode"]))


def convert_resize(g: Context, node: OnnxNode):
    x, roi, scales, sizes = (node.inputs + [None] * 4)[:4]
    at = node.attrs
    coord = at["coordinate_transformation_mode"]
    rank = g.ndim(x)
    axes = [a % rank for a in at.get("axes") or range(rank)]
    if _needs_matrices(g, node, x, roi, scales, sizes, axes):
        return _by_matrices(g, node, x, roi, scales, sizes, axes)
    if at.get("antialias") or coord not in _COORD_MODES:
        raise node.unsupported(f"antialias / coordinate mode {coord!r} is not supported")
    out = _output_sizes(g, node, x, scales, sizes, axes)
    dims = list(g.shape(x))
    if rank < 3 or any(_differ(out[k], dims[k]) for k in range(2)):
        raise node.unsupported("only the spatial axes (after N, C) can be resized")
    spatial = out[2:]
    return _resize(g, node, x, spatial, **_resize_attrs(g, node, coord, roi))


def _given(g: Context, value) -> bool:
    """An optional input that is present and not empty."""
    if value is None:
        return False
    dims = g.sinfo(value).values
    return dims is None or tir.as_int(tir.convert(dims[0])) != 0


def _needs_matrices(g: Context, node: OnnxNode, x, roi, scales, sizes, axes) -> bool:
    """Cases image.resize2d cannot say (linear / cubic): antialias, half_pixel_symmetric, a
    run-time roi, or a given scale other than out / in (a scale known at run time, or one
    whose out = floor(in * scale) rounds)."""
    at = node.attrs
    coord = at["coordinate_transformation_mode"]
    dims = [tir.as_int(tir.convert(d)) for d in (g.shape(x) or [])]
    if (at.get("mode") not in ("linear", "cubic") or coord == "tf_half_pixel_for_nn"
            or not dims or any(dims[a] is None for a in axes)):
        return False
    if at.get("antialias") or coord == "half_pixel_symmetric":
        return True
    if coord == "tf_crop_and_resize" and g.value(roi) is None:
        return True
    if sizes is not None and _given(g, sizes) or not _given(g, scales):
        return False
    known = g.value(scales)
    return known is None or any(
        float(dims[a] * s) != np.floor(dims[a] * s) for a, s in zip(axes, known.reshape(-1)))


def _f32(value):
    return call("astype", value, "float32")


def _by_matrices(g: Context, node: OnnxNode, x, roi, scales, sizes, axes):
    at = node.attrs
    dims = [tir.as_int(tir.convert(d)) for d in g.shape(x)]
    from_scales = sizes is None or not _given(g, sizes)
    out = _output_sizes(g, node, x, scales if from_scales else None,
                        None if from_scales else sizes, axes)
    picked = {}
    for k, axis in enumerate(axes):
        if from_scales:
            picked[axis] = call("reshape", call("take", _f32(scales), relax.const(
                np.int64(k)), 0), [])
        else:
            size = _f32(call("shape_to_tensor", relax.ShapeExpr([out[axis]])))
            picked[axis] = call("divide", size, relax.const(np.float32(dims[axis])))
    rois = {}
    if at["coordinate_transformation_mode"] == "tf_crop_and_resize":
        for k, axis in enumerate(axes):
            rois[axis] = tuple(call("take", _f32(roi), relax.const(np.int64(i)), 0)
                               for i in (k, k + len(axes)))
    options = {"coord": at["coordinate_transformation_mode"], "mode": at["mode"],
               "antialias": bool(at.get("antialias")), "cubic_a": at.get("cubic_coeff_a", -0.75),
               "exclude_outside": bool(at.get("exclude_outside")), "from_scales": from_scales,
               "extrapolation_value": at.get("extrapolation_value") or 0.0}
    return matrix_resize(g, x, dims, out, axes, picked, rois, options)


def _differ(a, b) -> bool:
    """Provably different dims; a size known only at run time is taken to match (ONNX
    models resize the spatial axes)."""
    a, b = tir.as_int(tir.convert(a)), tir.as_int(tir.convert(b))
    return a is not None and b is not None and a != b


def _resize_attrs(g: Context, node: OnnxNode, coord: str, roi) -> dict:
    at = node.attrs
    mode = at.get("mode") or "nearest"
    attrs = {"method": _METHODS[mode], "coordinate_transformation_mode": coord,
             "cubic_alpha": at.get("cubic_coeff_a", -0.75),
             "cubic_exclude": int(at.get("exclude_outside") or 0),
             "extrapolation_value": at.get("extrapolation_value") or 0.0}
    if mode == "nearest":
        attrs["rounding_method"] = at["nearest_mode"]
    if coord == "tf_crop_and_resize":
        attrs["roi"] = [float(v) for v in need_const(node, g.value(roi), "roi")]
    return attrs


def convert_upsample_v7(g: Context, node: OnnxNode):
    """Upsample-7: scales as an attribute."""
    scales = relax.const(np.asarray(node.attrs["scales"], "float32"))
    return _upsample(g, node, node.inputs[0], scales)


def convert_upsample(g: Context, node: OnnxNode):
    """Upsample-9: scales as an input."""
    return _upsample(g, node, *node.inputs[:2])


def _upsample(g: Context, node: OnnxNode, x, scales):
    out = _output_sizes(g, node, x, scales, None, list(range(g.ndim(x))))
    return _resize(g, node, x, out[2:], **_upsample_attrs(node.attrs["mode"]))


def _upsample_attrs(mode: str) -> dict:
    attrs = {"method": _METHODS[mode], "coordinate_transformation_mode": "asymmetric"}
    if mode == "nearest":
        attrs["rounding_method"] = "floor"
    return attrs


# --------------------------------------------------------------------------------------------
# Grids.

def convert_grid_sample(g: Context, node: OnnxNode):
    x, grid = node.inputs[:2]
    rank = g.ndim(x)
    if rank not in (4, 5):
        raise node.unsupported("only 2-D and 3-D grid sampling (4-D / 5-D inputs) is supported")
    mode = _METHODS.get(node.attrs["mode"], node.attrs["mode"])
    method = {"nearest_neighbor": "nearest", "linear": "bilinear", "cubic": "bicubic"}[mode]
    # ONNX (N, *out, d) -> TVM (N, d, *out)
    grid = call("permute_dims", grid, [0, rank - 1, *range(1, rank - 1)])
    layout = "NCHW" if rank == 4 else "NCDHW"
    return g.emit(call("image.grid_sample", x, grid, method=method, layout=layout,
                       padding_mode=node.attrs["padding_mode"],
                       align_corners=bool(node.attrs["align_corners"])))


def _base_coords(n, align: bool):
    """Normalized centers of n pixels in [-1, 1]: i * 2 / (n - 1) - 1 with align_corners,
    else (2 i + 1) / n - 1 (n may be known only at run time)."""
    i = call("astype", call("arange", 0, n, 1), "float32")
    count = call("astype", call("shape_to_tensor", relax.ShapeExpr([n])), "float32")
    one = relax.const(np.float32(1))
    if align:
        step = call("divide", relax.const(np.float32(2)), call("maximum", call(
            "subtract", count, one), one))
        return call("subtract", call("multiply", i, step), one)
    twice = call("add", call("multiply", i, relax.const(np.float32(2))), one)
    return call("subtract", call("divide", twice, count), one)


def _affine_grid_3d(g: Context, theta, dims: list, align: bool):
    """grid[n, d, h, w] = theta[n] @ (x_w, y_h, z_d, 1): one matmul over every voxel."""
    depth, height, width = dims
    zs, ys, xs = (_base_coords(n, align) for n in dims)
    shape = [depth, height, width, 1]
    axes = [call("broadcast_to", call("reshape", v, s), shape) for v, s in (
        (xs, [1, 1, -1, 1]), (ys, [1, -1, 1, 1]), (zs, [-1, 1, 1, 1]))]
    ones = call("ones", relax.ShapeExpr(shape), "float32")
    base = g.emit(call("concat", [*axes, ones], 3))  # [D, H, W, 4]
    base = g.emit(call("reshape", base, [-1, 4]))
    out = call("matmul", base, call("permute_dims", call("astype", theta, "float32"), [0, 2, 1]))
    out = call("reshape", out, [-1, depth, height, width, 3])
    return g.emit(call("astype", out, g.dtype(theta)))


def convert_affine_grid(g: Context, node: OnnxNode):
    theta, size = node.inputs[:2]
    dims = need_const(node, g.runtime_ints(size, "size"), "size")
    if len(dims) == 5:
        return _affine_grid_3d(g, theta, dims[2:], bool(node.attrs["align_corners"]))
    if len(dims) != 4:
        raise node.unsupported("only 2-D and 3-D affine grids are supported")
    grid = call("image.affine_grid", theta, dims[2:],
                align_corners=bool(node.attrs["align_corners"]))
    return g.emit(call("permute_dims", grid, [0, 2, 3, 1]))


# --------------------------------------------------------------------------------------------
# Detection.

# NonMaxSuppression's optional inputs 2..4 when absent: no box kept, IoU 0, no score filter.
_NMS_DEFAULTS = ((0, "int64"), (0.0, "float32"), (float("-inf"), "float32"))


def convert_nms(g: Context, node: OnnxNode):
    """Selected (batch, class, box) rows; how many is known only at run time (as NonZero)."""
    given = list(node.inputs[2:5]) + [None] * (5 - len(node.inputs))
    extra = [g.const(np.array(v, dtype)) if x is None else x
             for x, (v, dtype) in zip(given, _NMS_DEFAULTS)]
    return g.emit(call("vision.non_max_suppression", *node.inputs[:2], *extra,
                       center_point_box=int(node.attrs.get("center_point_box", 0))))


def convert_col2im(g: Context, node: OnnxNode):
    """Image and block shapes may be run-time tensors: the op reads their values."""
    at = node.attrs
    return g.emit(call("col2im", *node.inputs[:3], dilations=at.get("dilations"),
                       pads=at.get("pads"), strides=at.get("strides")))


def convert_deform_conv(g: Context, node: OnnxNode):
    """Absent bias / mask go in as empty tensors (the op reads them as none)."""
    x, weight, offset = node.inputs[:3]
    if g.ndim(x) != 4:
        raise node.unsupported("only 2-D deformable convolution (4-D inputs) is supported")
    extra = (list(node.inputs[3:5]) + [None, None])[:2]
    bias, mask = (g.emit(call("astype", g.const(np.zeros(0, "float32")), g.dtype(x)))
                  if v is None else v for v in extra)
    at = node.attrs
    return g.emit(call("image.deform_conv2d", x, weight, offset, bias, mask,
                       strides=at.get("strides"), pads=at.get("pads"),
                       dilations=at.get("dilations"), groups=int(at.get("group") or 1),
                       offset_groups=int(at.get("offset_group") or 1)))


CONVERTERS = {
    "DeformConv": {19: convert_deform_conv},
    "Col2Im": {18: convert_col2im},
    "NonMaxSuppression": {10: convert_nms},
    "Resize": {10: convert_resize_v10, 11: convert_resize},
    "Upsample": {7: convert_upsample_v7, 9: convert_upsample},
    "GridSample": {16: convert_grid_sample}, "AffineGrid": {20: convert_affine_grid},
}
