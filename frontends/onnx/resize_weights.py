"""Resize as interpolation matrices: ``Y = W_h @ X @ W_w^T``, each ``W`` [out, in] built from
ops at run time, for what ``image.resize2d`` cannot say: the scale given (not out / in) when
it is known only at run time, antialias filters, ``half_pixel_symmetric``, a run-time roi.

Row ``o`` of ``W`` holds the filter ``f(s * (j - x(o)))`` over virtual input positions ``j``
(past the edges they read the edge pixel, as ONNX pads), normalized to sum 1; ``s`` is
``min(scale, 1)`` with antialias (the filter stretched over the input when shrinking), else 1.
"""

from __future__ import annotations

import numpy as np

from msc import relax

from .common import call

__all__ = ["matrix_resize"]


def _f(v: float):
    return relax.const(np.float32(v))


def _linear(t, a):
    return call("clip", call("subtract", _f(1.0), t), 0.0, 1.0)


def _cubic(t, a):
    """Keys' cubic (coefficient ``a``) of ``t`` >= 0; 0 from 2 on."""
    t2, t3 = call("multiply", t, t), call("multiply", call("multiply", t, t), t)
    near = call("add", call("subtract", call("multiply", _f(a + 2), t3),
                            call("multiply", _f(a + 3), t2)), _f(1.0))
    far = call("add", call("subtract", call("multiply", _f(a), t3),
                           call("multiply", _f(5 * a), t2)),
               call("subtract", call("multiply", _f(8 * a), t), _f(4 * a)))
    return call("where", call("less_equal", t, _f(1.0)), near,
                call("where", call("less", t, _f(2.0)), far, _f(0.0)))


FILTERS = {"linear": _linear, "cubic": _cubic}


def _coordinate(coord: str, o, n: int, scale, length, count, roi):
    """x(o) in input pixels, as ONNX's reference computes it (length: n * scale)."""
    half = call("subtract", call("divide", call("add", o, _f(0.5)), scale), _f(0.5))
    one = call("equal", length, _f(1.0))
    if coord == "half_pixel":
        return half
    if coord == "pytorch_half_pixel":
        return call("where", one, _f(-0.5), half)
    if coord == "asymmetric":
        return call("divide", o, scale)
    if coord == "align_corners":
        x = call("divide", call("multiply", o, _f(n - 1)), call("subtract", length, _f(1.0)))
        return call("where", one, _f(0.0), x)
    if coord == "half_pixel_symmetric":
        adjust = call("divide", count, length)
        return call("add", call("multiply", _f(n / 2), call("subtract", _f(1.0), adjust)), half)
    start, end = roi
    span = call("multiply", call("subtract", end, start), _f(n - 1))
    x = call("divide", call("multiply", o, span), call("subtract", length, _f(1.0)))
    x = call("where", one, call("multiply", span, _f(0.5)), x)
    return call("add", x, call("multiply", start, _f(n - 1)))


def _matrix(g, n: int, out, scale, length, roi, at: dict):
    """W [out, n] and, for tf_crop_and_resize, which rows read inside the input."""
    count = call("astype", call("arange", 0, out, 1), "float32")
    o = g.emit(call("expand_dims", count, [1]))
    count_f = g.emit(call("astype", call("shape_to_tensor", relax.ShapeExpr([out])), "float32"))
    x = g.emit(_coordinate(at["coord"], o, n, scale, length, count_f, roi))
    pad = 2 * n + 2  # the widest filter (antialias at scale 1 / n) reaches 2n past x
    virtual = np.arange(-pad, n + pad)
    d = call("subtract", relax.const(virtual.astype("float32")[None, :]), x)
    s = call("minimum", scale, _f(1.0)) if at["antialias"] else _f(1.0)
    w = FILTERS[at["mode"]](call("abs", call("multiply", d, s)), at["cubic_a"])
    if at["exclude_outside"]:
        inside = ((virtual >= 0) & (virtual < n)).astype("float32")[None, :]
        w = call("multiply", w, relax.const(inside))
    w = g.emit(w)
    w = call("divide", w, call("sum", w, [1], True))
    edge = np.eye(n, dtype="float32")[np.clip(virtual, 0, n - 1)]  # virtual j -> edge pixel
    matrix = g.emit(call("matmul", w, relax.const(edge)))
    if at["coord"] != "tf_crop_and_resize":
        return matrix, None
    flat = call("reshape", x, [-1])
    valid = call("logical_and", call("greater_equal", flat, _f(0.0)),
                 call("less_equal", flat, _f(n - 1)))
    return matrix, g.emit(valid)


def matrix_resize(g, x, dims: list, out: list, axes: list, scales, roi, at: dict):
    """Resize ``x`` (rank r, dims static on ``axes``) to ``out`` on ``axes``; ``scales``: the
    float scale per axis (relax scalars), ``roi``: (start, end) relax scalars per axis."""
    y = call("astype", x, "float32")
    rank = len(dims)
    valid = None
    for axis in axes:
        n = int(dims[axis])
        matrix, inside = _matrix(g, n, out[axis], scales[axis], call(
            "multiply", scales[axis], _f(n)) if at["from_scales"] else call(
            "astype", call("shape_to_tensor", relax.ShapeExpr([out[axis]])), "float32"),
            roi.get(axis), at)
        # move the axis last, contract it with W^T, move it back
        perm = [a for a in range(rank) if a != axis] + [axis]
        back = list(np.argsort(perm))
        y = call("permute_dims", call("matmul", call("permute_dims", y, perm),
                                      call("permute_dims", matrix, [1, 0])), back)
        y = g.emit(y)
        if inside is not None:
            shape = [1] * rank
            shape[axis] = -1
            inside = call("reshape", inside, shape)
            valid = inside if valid is None else call("logical_and", valid, inside)
    if valid is not None:
        y = call("where", valid, y, _f(at["extrapolation_value"]))
    return g.emit(call("astype", y, g.dtype(x)))
