"""numpy references for the image ops (see numpy_ref.py for the contract): resize2d/3d,
affine_grid and grid_sample, with TVM's layouts (grid_sample's grid is [N, d, *out], x first).
"""

from __future__ import annotations

import itertools

import numpy as np

from ...errors import UnsupportedOpError
from .numpy_ref_nn import SPATIAL, accum, per_dim, to_layout

# --------------------------------------------------------------------------------------------
# Resize (separable: one spatial axis at a time).

_COORD = {
    "half_pixel": lambda o, n, m: (o + 0.5) * n / m - 0.5,
    "pytorch_half_pixel": lambda o, n, m: (o + 0.5) * n / m - 0.5 if m > 1 else 0 * o,
    "align_corners": lambda o, n, m: o * (n - 1) / (m - 1) if m > 1 else 0 * o,
    "asymmetric": lambda o, n, m: o * n / m,
    "tf_half_pixel_for_nn": lambda o, n, m: (o + 0.5) * n / m,
}
_ROUND = {
    "round": np.rint,  # TVM's te.round: halves to even (2.5 -> 2), as TVM 0.27 computes
    "round_prefer_floor": lambda v: np.ceil(v - 0.5),
    "round_prefer_ceil": lambda v: np.floor(v + 0.5),
    "floor": np.floor,
    "ceil": np.ceil,
}


def _resize_axis(x, axis: int, size: int, attrs) -> np.ndarray:
    n = x.shape[axis]
    mode = attrs["coordinate_transformation_mode"]
    if mode not in _COORD:
        raise UnsupportedOpError(f"coordinate_transformation_mode {mode!r} has no numpy "
                                 "reference", op="image.resize")
    coord = _COORD[mode](np.arange(size, dtype=np.float64), n, size)
    method = attrs["method"]
    if method == "nearest_neighbor":
        idx = _ROUND[_rounding(attrs, mode)](coord).astype(np.int64)
        return np.take(x, np.clip(idx, 0, n - 1), axis=axis)
    taps, weights = _linear_taps(coord) if method == "linear" else _cubic_taps(coord, attrs, n)
    gathered = np.take(x, np.clip(taps, 0, n - 1), axis=axis)  # (..., size, taps, ...)
    w = weights.reshape((1,) * axis + weights.shape + (1,) * (x.ndim - axis - 1))
    return (gathered * w).sum(axis=axis + 1)


def _linear_taps(coord):
    coord = np.maximum(coord, 0)
    lo = np.floor(coord)
    frac = coord - lo
    return np.stack([lo, lo + 1], 1).astype(np.int64), np.stack([1 - frac, frac], 1)


def _cubic_taps(coord, attrs, n: int):
    a = float(attrs["cubic_alpha"])
    lo = np.floor(coord)
    taps = (lo[:, None] + np.arange(-1, 3)).astype(np.int64)
    d = np.abs(coord[:, None] - taps)
    w = np.where(d <= 1, ((a + 2) * d - (a + 3)) * d * d + 1,
                 np.where(d < 2, ((a * d - 5 * a) * d + 8 * a) * d - 4 * a, 0.0))
    if attrs["cubic_exclude"]:
        w = np.where((taps < 0) | (taps >= n), 0.0, w)
        w = w / w.sum(axis=1, keepdims=True)
    return taps, w


def _rounding(attrs, mode: str) -> str:
    """TVM's nearest-neighbour rounding; "" picks round for align_corners, else floor."""
    method = attrs["rounding_method"] or ""
    return method or ("round" if mode == "align_corners" else "floor")


def _resize(nd: int):
    def apply(args, attrs):
        canonical = "NC" + SPATIAL[nd]
        layout = attrs["layout"]
        x = accum(to_layout(args[0], layout, canonical))
        for axis, size in enumerate(per_dim(args[1], nd), start=2):
            x = _resize_axis(x, axis, size, attrs)
        return to_layout(x, canonical, layout)
    return apply


# --------------------------------------------------------------------------------------------
# affine_grid / grid_sample (PyTorch's semantics, TVM's [N, d, *out] grid layout).

def _base_coords(size: int, align_corners: bool) -> np.ndarray:
    if align_corners:
        return np.linspace(-1, 1, size) if size > 1 else np.zeros(1)
    return (np.arange(size) * 2 + 1) / size - 1


def _affine_grid(args, attrs):
    theta, (h, w) = accum(np.asarray(args[0])), per_dim(args[1], 2)
    align = bool(attrs["align_corners"])
    xs, ys = _base_coords(w, align), _base_coords(h, align)
    base = np.stack(np.broadcast_arrays(xs[None, :], ys[:, None], np.ones((1, 1))), -1)
    return np.einsum("nij,hwj->nihw", theta, base)


def _unnormalize(g, size: int, align: bool):
    return (g + 1) / 2 * (size - 1) if align else ((g + 1) * size - 1) / 2


def _reflect(c, lo: float, hi: float):
    span = hi - lo
    if span <= 0:
        return np.zeros_like(c)
    c = np.abs(c - lo)
    flips, extra = np.floor(c / span), np.fmod(c, span)
    return np.where(flips % 2 == 0, lo + extra, hi - extra)


def _source_coord(g, size: int, attrs):
    align, mode = bool(attrs["align_corners"]), attrs["padding_mode"]
    c = _unnormalize(g, size, align)
    if mode == "reflection":
        c = _reflect(c, 0, size - 1) if align else _reflect(c, -0.5, size - 0.5)
    if mode in ("border", "reflection"):
        c = np.clip(c, 0, size - 1)
    return c


def _gather(x, index: list) -> tuple:
    """x[n, :, *index] for every sample (zero where a tap falls outside)."""
    valid = np.ones(index[0].shape, bool)
    for i, n in zip(index, x.shape[2:]):
        valid &= (i >= 0) & (i < n)
    clipped = [np.clip(i, 0, n - 1) for i, n in zip(index, x.shape[2:])]
    batch = np.arange(x.shape[0]).reshape((-1,) + (1,) * (index[0].ndim - 1))
    values = np.moveaxis(x[(batch, slice(None), *clipped)], -1, 1)
    return values, np.expand_dims(valid, 1)


def _grid_sample(args, attrs):
    layout = attrs["layout"]
    nd = len(layout) - 2
    x = accum(to_layout(args[0], layout, "NC" + SPATIAL[nd]))
    grid = accum(np.asarray(args[1]))
    # grid channel 0 is x (the last spatial axis), channel 1 is y, ...
    coords = [_source_coord(grid[:, nd - 1 - i], n, attrs) for i, n in enumerate(x.shape[2:])]
    method = attrs["method"]
    if method == "nearest":
        values, valid = _gather(x, [np.round(c).astype(np.int64) for c in coords])
        out = values * valid
    elif method == "bilinear":
        out = _multilinear(x, coords)
    elif method == "bicubic":
        raw = [_unnormalize(grid[:, nd - 1 - i], n, bool(attrs["align_corners"]))
               for i, n in enumerate(x.shape[2:])]
        out = _multicubic(x, raw, attrs)
    else:
        raise UnsupportedOpError(f"method {method!r} has no numpy reference",
                                 op="image.grid_sample", hint="use bilinear or nearest")
    return to_layout(out, "NC" + SPATIAL[nd], layout)


def _keys(t, a: float = -0.75):
    """Keys' cubic weights of the taps at -1, 0, 1, 2 for a fraction ``t``."""
    def f(v):
        v = np.abs(v)
        return np.where(v <= 1, ((a + 2) * v - (a + 3)) * v * v + 1,
                        np.where(v < 2, ((a * v - 5 * a) * v + 8 * a) * v - 4 * a, 0.0))
    return [f(t + 1), f(t), f(1 - t), f(2 - t)]


def _multicubic(x, coords, attrs):
    """ONNX GridSample cubic: a coordinate past the border is clamped / reflected first, then
    each of the 4 taps per axis reads zero, the edge, or its reflection."""
    align, mode = bool(attrs["align_corners"]), attrs["padding_mode"]
    spans = [(0.0, n - 1.0) if align else (-0.5, n - 0.5) for n in x.shape[2:]]
    fixed = []
    for c, n, (lo, hi) in zip(coords, x.shape[2:], spans):
        out = (c < lo) | (c > hi)
        moved = np.clip(c, 0, n - 1) if mode == "border" else _reflect(c, lo, hi)
        fixed.append(np.where(out, moved, c) if mode != "zeros" else c)
    lows = [np.floor(c) for c in fixed]
    weights = [_keys(c - lo) for c, lo in zip(fixed, lows)]
    out = 0
    for taps in itertools.product(range(4), repeat=len(fixed)):
        index = [(lo + k - 1).astype(np.int64) for lo, k in zip(lows, taps)]
        if mode == "border":
            index = [np.clip(i, 0, n - 1) for i, n in zip(index, x.shape[2:])]
        elif mode == "reflection":
            index = [np.trunc(_reflect(i.astype(np.float64), lo, hi)).astype(np.int64)
                     for i, (lo, hi) in zip(index, spans)]
        weight = 1
        for w, k in zip(weights, taps):
            weight = weight * w[k]
        values, valid = _gather(x, index)
        out = out + values * valid * np.expand_dims(weight, 1)
    return out


def _multilinear(x, coords):
    lows = [np.floor(c) for c in coords]
    out = 0
    for corner in itertools.product((0, 1), repeat=len(coords)):
        index = [(lo + bit).astype(np.int64) for lo, bit in zip(lows, corner)]
        weight = 1
        for c, lo, bit in zip(coords, lows, corner):
            weight = weight * (c - lo if bit else 1 - (c - lo))
        values, valid = _gather(x, index)
        out = out + values * valid * np.expand_dims(weight, 1)
    return out


# --------------------------------------------------------------------------------------------
# Non-maximum suppression (ONNX's: greedy per batch and class, highest score first).

def _corners(boxes, center_point_box: int):
    """[..., 4] boxes as (y1, x1, y2, x2) with y1 <= y2, x1 <= x2 (ONNX allows flipped corners;
    center_point_box=1 gives (x_center, y_center, width, height))."""
    b = np.asarray(boxes, np.float64)
    if center_point_box:
        xc, yc, w, h = np.moveaxis(b, -1, 0)
        return np.stack([yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2], -1)
    y1, x1, y2, x2 = np.moveaxis(b, -1, 0)
    return np.stack([np.minimum(y1, y2), np.minimum(x1, x2),
                     np.maximum(y1, y2), np.maximum(x1, x2)], -1)


def _iou(box, others):
    """IoU of one box with each of ``others`` (0 where a box has no area)."""
    lo, hi = np.maximum(box[:2], others[:, :2]), np.minimum(box[2:], others[:, 2:])
    inter = np.prod(np.clip(hi - lo, 0, None), axis=1)
    area = np.prod(box[2:] - box[:2])
    areas = np.prod(others[:, 2:] - others[:, :2], axis=1)
    union = area + areas - inter
    ok = (area > 0) & (areas > 0) & (union > 0)
    return np.where(ok, inter / np.where(ok, union, 1), 0.0)


def _select(boxes, scores, limit: int, iou_max: float, score_min: float) -> list[int]:
    """Greedy selection of one (batch, class): box indices in selection order."""
    chosen: list[int] = []
    for i in np.argsort(-scores, kind="stable"):
        if len(chosen) >= limit or not scores[i] > score_min:
            break
        if not chosen or not np.any(_iou(boxes[i], boxes[chosen]) > iou_max):
            chosen.append(int(i))
    return chosen


def _non_max_suppression(args, attrs):
    boxes = _corners(args[0], attrs["center_point_box"])
    scores = np.asarray(args[1], np.float64)
    limit = int(np.ravel(args[2])[0]) if np.size(args[2]) else 0
    iou_max = float(np.ravel(args[3])[0]) if np.size(args[3]) else 0.0
    score_min = float(np.ravel(args[4])[0]) if np.size(args[4]) else -np.inf
    rows = [(b, c, i) for b in range(scores.shape[0]) for c in range(scores.shape[1])
            for i in _select(boxes[b], scores[b, c], limit, iou_max, score_min)]
    return np.array(rows, np.int64).reshape(-1, 3)


# --------------------------------------------------------------------------------------------
# Col2Im (ONNX): sum the columns of sliding blocks back into an image.

def _col2im(args, attrs):
    data = np.asarray(args[0])
    image = [int(v) for v in np.ravel(args[1])]
    block = [int(v) for v in np.ravel(args[2])]
    d = len(image)
    dil = list(attrs["dilations"] or [1] * d)
    stride = list(attrs["strides"] or [1] * d)
    pads = list(attrs["pads"] or [0] * (2 * d))
    full = [i + pads[k] + pads[k + d] for k, i in enumerate(image)]
    counts = [(f - dil[k] * (block[k] - 1) - 1) // stride[k] + 1 for k, f in enumerate(full)]
    n, channels = data.shape[0], data.shape[1] // int(np.prod(block))
    cols = accum(data).reshape(n, channels, *block, *counts)
    out = np.zeros((n, channels, *full), cols.dtype)
    for k in itertools.product(*(range(b) for b in block)):
        window = tuple(slice(k[i] * dil[i], k[i] * dil[i] + (counts[i] - 1) * stride[i] + 1,
                             stride[i]) for i in range(d))
        out[(slice(None), slice(None), *window)] += cols[(slice(None), slice(None), *k)]
    crop = tuple(slice(pads[k], pads[k] + image[k]) for k in range(d))
    return out[(slice(None), slice(None), *crop)].astype(data.dtype)


# --------------------------------------------------------------------------------------------
# Deformable convolution (ONNX DeformConv, 2-D).

def _bilinear_zeros(x, ys, xs):
    """x [N, C, H, W] at float positions ys, xs [N, C, ...]; taps outside read 0."""
    h, w = x.shape[2:]
    y0, x0 = np.floor(ys), np.floor(xs)
    n = np.arange(x.shape[0]).reshape((-1,) + (1,) * (ys.ndim - 1))
    c = np.arange(x.shape[1]).reshape((1, -1) + (1,) * (ys.ndim - 2))
    out = 0
    for dy, dx in itertools.product((0, 1), repeat=2):
        iy, ix = (y0 + dy).astype(np.int64), (x0 + dx).astype(np.int64)
        weight = (1 - np.abs(ys - iy)) * (1 - np.abs(xs - ix))
        valid = (iy >= 0) & (iy < h) & (ix >= 0) & (ix < w)
        out = out + weight * valid * x[n, c, np.clip(iy, 0, h - 1), np.clip(ix, 0, w - 1)]
    return out


def _deform_conv2d(args, attrs):
    x, weight, offset = (accum(np.asarray(a)) for a in args[:3])
    bias, mask = (None if a is None or np.size(a) == 0 else accum(np.asarray(a))
                  for a in (list(args) + [None, None])[3:5])
    n, ch, _, _ = x.shape
    out_ch, _, kh, kw = weight.shape
    oh, ow = offset.shape[2:]
    sy, sx = attrs["strides"] or (1, 1)
    dy, dx = attrs["dilations"] or (1, 1)
    top, left = (attrs["pads"] or (0, 0, 0, 0))[:2]
    groups, off_groups = attrs["groups"], attrs["offset_groups"]
    taps = kh * kw
    # offsets per channel: [N, C, taps, oH, oW] for y and x (channel c uses its offset group)
    off = offset.reshape(n, off_groups, taps, 2, oh, ow).repeat(ch // off_groups, 1)
    ky, kx = np.divmod(np.arange(taps), kw)
    base_y = (np.arange(oh) * sy - top)[None, :, None] + (ky * dy)[:, None, None]
    base_x = (np.arange(ow) * sx - left)[None, None, :] + (kx * dx)[:, None, None]
    cols = _bilinear_zeros(x, base_y + off[:, :, :, 0], base_x + off[:, :, :, 1])
    if mask is not None:
        cols = cols * mask.reshape(n, off_groups, taps, oh, ow).repeat(ch // off_groups, 1)
    cols = cols.reshape(n, groups, ch // groups * taps, oh, ow)
    w = weight.reshape(groups, out_ch // groups, -1)
    y = np.einsum("gok,ngkhw->ngohw", w, cols).reshape(n, out_ch, oh, ow)
    if bias is not None:
        y = y + bias.reshape(1, -1, 1, 1)
    return y.astype(np.asarray(args[0]).dtype)


FACTS = {
    "image.deform_conv2d": _deform_conv2d,
    "col2im": _col2im,
    "vision.non_max_suppression": _non_max_suppression,
    "image.resize2d": _resize(2), "image.resize3d": _resize(3),
    "image.affine_grid": _affine_grid, "image.grid_sample": _grid_sample,
}
