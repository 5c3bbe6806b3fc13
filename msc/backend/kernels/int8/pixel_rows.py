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
from ...llvm.loops import I64, const64, for_range
from .gemm import I8, I8_PTR

__all__ = ["FIELDS", "unfold_fn"]

FIELDS = ("images", "c", "h", "w", "sh", "sw", "oh", "ow", "k", "k4", "flip")


def _symbol(window: tuple) -> str:
    return f"msc_qconv_pixel_rows_k{window[0]}x{window[1]}"


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


def _build(window: tuple) -> ir.Module:
    """``void (x, rows, row)``: every image's pixel rows (row stride K4) into ``rows``."""
    module = ir.Module(name=_symbol(window))
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I64] * 3), name=_symbol(window))
    x_int, rows_int, row_int = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    row = b.inttoptr(row_int, I64.as_pointer())
    v = {name: b.load(b.gep(row, [const64(i)]), name=name) for i, name in enumerate(FIELDS)}
    x, rows = b.inttoptr(x_int, I8_PTR), b.inttoptr(rows_int, I8_PTR)
    flip = b.trunc(v["flip"], I8)
    image = b.mul(v["c"], b.mul(v["h"], v["w"]))
    pixels = b.mul(v["oh"], v["ow"])
    with for_range(b, v["images"], name="img") as img:
        _image_rows(b, v, b.gep(x, [b.mul(img, image)]),
                    b.gep(rows, [b.mul(b.mul(img, pixels), v["k4"])]), window, flip)
    b.ret_void()
    return module


@cache
def unfold_fn(window: tuple):
    """``unfold(x, rows, row)`` for a (kh, kw) window (pointers as ints)."""
    library = get_jit().compile_generated(
        lambda: _build(window), [_symbol(window)],
        (__name__, "msc.backend.llvm.loops"), (window,))
    return library.cfunc(_symbol(window), None, *[ctypes.c_int64] * 3)
