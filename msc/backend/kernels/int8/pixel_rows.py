"""int8 convs at batch > 1 as one "col" GEMM over every image's pixel rows.

QConv2d's "row" path (int8/conv_tasks.py) multiplies, per image, the weight [O, K4] by the
image's patch panels: on the small planes of a batch of toys (ViT's patch embedding: 4 x 4
outputs of K = 3 * 8 * 8; ConvNeXt's 4x4 stem and 2x2 downsampling) a 64-column panel holds
a handful of pixels, and the patch rows of strided windows come through the unfold's
byte-at-a-time path. Here the images' output pixels are the rows of one GEMM, as onnxruntime
runs a conv NHWC: ``rows[(n, oh, ow), (c, i, j)] = x[n, c, oh*sh + i, ow*sw + j]``, one run
of ``kw`` contiguous bytes per (pixel, c, i), the window compiled in; then the int8 GEMM
(int8/gemm.py, "col": the weight packed once, per-channel epilogue along N) writes
``[N * P, O]`` and a byte transpose makes it NCHW. Windows without padding or dilation (what
QConv2d sends here: patch embeddings). int8 activations are flipped to uint8 in the same
copy (x ^ 0x80), as QDense does. Exact: the same int32 sums and epilogue as every other path
of QConv2d.
"""

from __future__ import annotations

import ctypes
from functools import cache

from llvmlite import ir

from ...llvm.jit import get_jit
from ...llvm.loops import I32, I64, const64, for_range, imin
from ..dw_lanes import transpose
from .gemm import I8, I8_PTR, LANES

__all__ = ["FIELDS", "NHWC_SLACK", "unfold_fn"]

FIELDS = ("images", "c", "h", "w", "sh", "sw", "oh", "ow", "k", "k4", "flip", "pt", "pl", "hp",
          "wp", "fill")
NHWC_SLACK = 64  # bytes past the NHWC planes and the rows: whole-vector copies


def _symbol(window: tuple, nhwc: bool) -> str:
    return f"msc_qconv_pixel_rows{'_nhwc' if nhwc else ''}_k{window[0]}x{window[1]}"


def _copy_run(b, src, dst, kw: int, flip) -> None:
    """dst[0:kw] = src[0:kw] ^ flip (kw constant: LLVM merges the bytes into words)."""
    for j in range(kw):
        value = b.load(b.gep(src, [const64(j)]))
        b.store(b.xor(value, flip), b.gep(dst, [const64(j)]))


def _image_rows(b, v, src, rows, window: tuple, flip) -> None:
    """The pixel rows of one image from its planes ``src`` [c, h, w]: per pixel and
    channel, the window's rows of ``kw`` bytes (the window compiled in)."""
    kh, kw = window
    plane = b.mul(v["h"], v["w"])
    with for_range(b, v["oh"], name="oh") as oh, for_range(b, v["ow"], name="ow") as ow:
        corner = b.add(b.mul(b.mul(oh, v["sh"]), v["w"]), b.mul(ow, v["sw"]))
        row = b.gep(rows, [b.mul(b.add(b.mul(oh, v["ow"]), ow), v["k4"])])
        with for_range(b, v["c"], name="c") as c:
            at = b.gep(src, [b.add(b.mul(c, plane), corner)])
            dst = b.gep(row, [b.mul(c, const64(kh * kw))])
            for i in range(kh):
                _copy_run(b, b.gep(at, [b.mul(const64(i), v["w"])]),
                          b.gep(dst, [const64(i * kw)]), kw, flip)
        with for_range(b, v["k4"], start=v["k"], name="tail") as t:
            b.store(ir.Constant(I8, 0), b.gep(row, [t]))


def _lanes_below(b, count, lanes: int = LANES):
    """Lanes j < count (i64) of a ``lanes``-lane mask."""
    vec = ir.VectorType(I32, lanes)
    first = b.insert_element(ir.Constant(vec, ir.Undefined), b.trunc(count, I32), I32(0))
    limit = b.shuffle_vector(first, ir.Constant(vec, ir.Undefined),
                             ir.Constant(ir.VectorType(I32, lanes), None))
    return b.icmp_signed("<", ir.Constant(vec, list(range(lanes))), limit)


def _masked(module, kind: str, lanes: int = LANES):
    ty = ir.VectorType(I8, lanes)
    mask = ir.VectorType(ir.IntType(1), lanes)
    name = f"llvm.masked.{kind}.v{lanes}i8.p0"
    if name in module.globals:
        return module.globals[name]
    args = [ty.as_pointer(), I32, mask, ty] if kind == "load" else \
        [ty, ty.as_pointer(), I32, mask]
    return ir.Function(module, ir.FunctionType(ty if kind == "load" else ir.VoidType(), args),
                       name=name)


def _to_nhwc(b, v, src, xh, flip) -> None:
    """xh[(y + pt) * wp + x + pl, c] = src[c, y, x] ^ flip for one image, 16 pixels of a row
    and 16 channels at a time through an in-register transpose; the border stays as
    filled."""
    bytes_ty = ir.VectorType(I8, LANES)
    load, store = _masked(b.module, "load"), _masked(b.module, "store")
    flips = b.shuffle_vector(b.insert_element(ir.Constant(bytes_ty, ir.Undefined), flip, I32(0)),
                             ir.Constant(bytes_ty, ir.Undefined),
                             ir.Constant(ir.VectorType(I32, LANES), None))
    plane = b.mul(v["h"], v["w"])
    with for_range(b, v["c"], step=LANES, name="c0") as c0, \
            for_range(b, v["h"], name="y") as y, \
            for_range(b, v["w"], step=LANES, name="x0") as x0:
        channels = b.sub(v["c"], c0)
        pixels = _lanes_below(b, b.sub(v["w"], x0))
        rows = []
        for r in range(LANES):
            mask = b.select(b.icmp_signed("<", const64(r), channels), pixels,
                            ir.Constant(pixels.type, None))
            at = b.add(b.mul(b.add(c0, const64(r)), plane), b.add(b.mul(y, v["w"]), x0))
            rows.append(b.call(load, [b.bitcast(b.gep(src, [at]), bytes_ty.as_pointer()),
                                      I32(1), mask, ir.Constant(bytes_ty, None)]))
        keep = _lanes_below(b, channels)
        count = imin(b, b.sub(v["w"], x0), const64(LANES))
        slot0 = b.add(b.mul(b.add(y, v["pt"]), v["wp"]), b.add(x0, v["pl"]))
        for j, pixel in enumerate(transpose(b, rows)):
            with b.if_then(b.icmp_signed("<", const64(j), count)):
                at = b.add(b.mul(b.add(slot0, const64(j)), v["c"]), c0)
                b.call(store, [b.xor(pixel, flips),
                               b.bitcast(b.gep(xh, [at]), bytes_ty.as_pointer()), I32(1), keep])


def _copy_vectors(b, src, dst, count) -> None:
    """dst[0:count] = src[0:count] in 64-byte vectors, the last one masked: nothing past
    ``count`` is written (on several threads a range's last row ends where the next range's
    first row begins)."""
    ty = ir.VectorType(I8, 64)
    v64 = ty.as_pointer()
    load, store = _masked(b.module, "load", 64), _masked(b.module, "store", 64)
    with for_range(b, count, step=64, name="chunk") as t:
        at_src, at_dst = b.bitcast(b.gep(src, [t]), v64), b.bitcast(b.gep(dst, [t]), v64)
        left = b.sub(count, t)
        with b.if_else(b.icmp_signed(">=", left, const64(64))) as (whole, tail):
            with whole:
                b.store(b.load(at_src, align=1), at_dst, align=1)
            with tail:
                mask = _lanes_below(b, left, 64)
                value = b.call(load, [at_src, I32(1), mask, ir.Constant(ty, None)])
                b.call(store, [value, at_dst, I32(1), mask])


def _nhwc_rows(b, v, xh, rows, window: tuple) -> None:
    """The pixel rows of one image from its NHWC planes: k = (i, j, c), a window row's
    ``kw * C`` bytes one contiguous run (see _copy_vectors), their K..K4 tails zeroed
    after."""
    kh, kw = window
    run = b.mul(const64(kw), v["c"])
    with for_range(b, v["oh"], name="oh") as oh, for_range(b, v["ow"], name="ow") as ow:
        row = b.gep(rows, [b.mul(b.add(b.mul(oh, v["ow"]), ow), v["k4"])])
        for i in range(kh):
            slot = b.add(b.mul(b.add(b.mul(oh, v["sh"]), const64(i)), v["wp"]),
                         b.mul(ow, v["sw"]))
            _copy_vectors(b, b.gep(xh, [b.mul(slot, v["c"])]),
                          b.gep(row, [b.mul(const64(i), run)]), run)
        with for_range(b, v["k4"], start=v["k"], name="tail") as t:
            b.store(ir.Constant(I8, 0), b.gep(row, [t]))


def _build(window: tuple, nhwc: bool) -> ir.Module:
    """``void (x, xh, rows, row)``: every image's pixel rows (row stride K4) into ``rows``;
    ``nhwc``: through one image's zero-point bordered NHWC planes ``xh`` (3x3 windows: runs
    of kw * C bytes instead of kw), else straight from the NCHW planes (patches)."""
    symbol = _symbol(window, nhwc)
    module = ir.Module(name=symbol)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I64] * 4), name=symbol)
    x_int, xh_int, rows_int, row_int = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    row = b.inttoptr(row_int, I64.as_pointer())
    v = {name: b.load(b.gep(row, [const64(i)]), name=name) for i, name in enumerate(FIELDS)}
    x, xh, rows = (b.inttoptr(a, I8_PTR) for a in (x_int, xh_int, rows_int))
    flip = b.trunc(v["flip"], I8)
    image = b.mul(v["c"], b.mul(v["h"], v["w"]))
    pixels = b.mul(v["oh"], v["ow"])
    if nhwc:
        memset = ir.Function(module, ir.FunctionType(ir.VoidType(), [I8_PTR, I8, I64,
                                                                     ir.IntType(1)]),
                             name="llvm.memset.p0.i64")
        padded = b.mul(b.mul(v["hp"], v["wp"]), v["c"])
    with for_range(b, v["images"], name="img") as img:
        src = b.gep(x, [b.mul(img, image)])
        dst = b.gep(rows, [b.mul(b.mul(img, pixels), v["k4"])])
        if nhwc:
            b.call(memset, [xh, b.trunc(v["fill"], I8), padded, ir.Constant(ir.IntType(1), 0)])
            _to_nhwc(b, v, src, xh, flip)
            _nhwc_rows(b, v, xh, dst, window)
        else:
            _image_rows(b, v, src, dst, window, flip)
    b.ret_void()
    return module


@cache
def unfold_fn(window: tuple, nhwc: bool = False):
    """``unfold(x, xh, rows, row)`` for a (kh, kw) window (pointers as ints)."""
    library = get_jit().compile_generated(
        lambda: _build(window, nhwc), [_symbol(window, nhwc)],
        (__name__, "msc.backend.kernels.dw_lanes", "msc.backend.llvm.loops"), (window, nhwc))
    return library.cfunc(_symbol(window, nhwc), None, *[ctypes.c_int64] * 4)
