"""The passes around the direct conv's tiles (direct_conv.py), and its vector helper.

``pad``: each input plane into a zero-filled plane with rows of the wide width; ``split``: for
strides above 1, each padded plane into its phase planes (column strides 1 and 2 copy 16
floats at a time, stride 2 through the even lanes of two masked loads); ``compact``: the wide
output rows back to output rows when the tile stores do not drop the wide columns themselves.
"""

from __future__ import annotations

from llvmlite import ir

from ..llvm.loops import F32, F32_PTR, I64, const64, for_range, imin
from .layout import VecOps, valid_range

__all__ = ["Vec", "build_compact", "build_pad", "build_split", "gep"]

I64_PTR = I64.as_pointer()


class Vec:
    """Masked loads / stores and splats of ``lanes`` x float32, declared once per module."""

    def __init__(self, b: ir.IRBuilder, lanes: int):
        self.b, self.lanes = b, lanes
        self.ty = ir.VectorType(F32, lanes)
        self.mask_ty = ir.VectorType(ir.IntType(1), lanes)
        ptr = self.ty.as_pointer()
        i32 = ir.IntType(32)
        self._load = _intrinsic(b.module, f"llvm.masked.load.v{lanes}f32.p0", self.ty,
                                [ptr, i32, self.mask_ty, self.ty])
        self._store = _intrinsic(b.module, f"llvm.masked.store.v{lanes}f32.p0", ir.VoidType(),
                                 [self.ty, ptr, i32, self.mask_ty])
        self._fma = _intrinsic(b.module, f"llvm.fma.v{lanes}f32", self.ty, [self.ty] * 3)
        self.zero = ir.Constant(self.ty, None)
        self.all = ir.Constant(self.mask_ty, [1] * lanes)
        self.ids = ir.Constant(ir.VectorType(ir.IntType(32), lanes), list(range(lanes)))

    def splat(self, value):
        b, ty = self.b, ir.VectorType(value.type, self.lanes)
        first = b.insert_element(ir.Constant(ty, ir.Undefined), value, ir.IntType(32)(0))
        return b.shuffle_vector(first, ir.Constant(ty, ir.Undefined),
                                ir.Constant(ir.VectorType(ir.IntType(32), self.lanes), None))

    def mask(self, left):
        """Lanes i < left, for left <= lanes (compared in 32 bits: one instruction)."""
        b = self.b
        return b.icmp_signed("<", self.ids, self.splat(b.trunc(left, ir.IntType(32))))

    def load(self, ptr, mask):
        b = self.b
        return b.call(self._load, [b.bitcast(ptr, self.ty.as_pointer()), ir.IntType(32)(4),
                                   mask, self.zero])

    def store(self, value, ptr, mask) -> None:
        b = self.b
        b.call(self._store, [value, b.bitcast(ptr, self.ty.as_pointer()), ir.IntType(32)(4),
                             mask])

    def prefetch(self, ptr, locality: int = 3) -> None:
        """A read prefetch of the line at ``ptr`` (locality 3: into L1, 2: into L2)."""
        b, i32 = self.b, ir.IntType(32)
        i8p = ir.IntType(8).as_pointer()
        fn = _intrinsic(b.module, "llvm.prefetch.p0", ir.VoidType(), [i8p, i32, i32, i32])
        b.call(fn, [b.bitcast(ptr, i8p), i32(0), i32(locality), i32(1)])

    def fma(self, a, x, acc):
        return self.b.call(self._fma, [a, x, acc])


def _intrinsic(module, name, ret, args):
    existing = module.globals.get(name)
    return existing or ir.Function(module, ir.FunctionType(ret, args), name=name)


def gep(b, ptr, offset):
    return b.gep(ptr, [offset], inbounds=True)


_PAD_ARGS = ("planes", "H", "W", "Wp", "top", "left", "ld")


def build_pad(module: ir.Module, lanes: int) -> ir.Function:
    """void (x, xp, *_PAD_ARGS): xp[p, :ld] = plane p of x placed at (top, left) in zeros
    with rows of ``Wp`` (ld >= (top + H) * Wp + left)."""
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [F32_PTR] * 2
                                             + [I64] * len(_PAD_ARGS)), name=f"pad_l{lanes}")
    fn.linkage = "internal"
    x, xp = fn.args[:2]
    x.add_attribute("noalias")
    xp.add_attribute("noalias")
    a = dict(zip(_PAD_ARGS, fn.args[2:]))
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    vec = Vec(b, lanes)
    with for_range(b, a["planes"], name="p") as p:
        src = gep(b, x, b.mul(p, b.mul(a["H"], a["W"])))
        dst = gep(b, xp, b.mul(p, a["ld"]))
        _fill(b, vec, dst, b.add(b.mul(a["top"], a["Wp"]), a["left"]), None)
        with for_range(b, a["H"], name="h") as h:
            row = gep(b, dst, b.add(b.mul(b.add(h, a["top"]), a["Wp"]), a["left"]))
            _fill(b, vec, row, a["W"], gep(b, src, b.mul(h, a["W"])))
            gap = b.sub(a["Wp"], a["W"])  # right padding, then the next row's left padding
            _fill(b, vec, gep(b, row, a["W"]), gap, None)
        tail = b.add(b.mul(b.add(a["H"], a["top"]), a["Wp"]), a["left"])
        _fill(b, vec, gep(b, dst, tail), b.sub(a["ld"], tail), None)
    b.ret_void()
    return fn


_SPLIT_ARGS = ("planes", "H", "W", "top", "left", "sh", "sw", "Hq", "Wq", "ld", "n_phase")


def build_split(module: ir.Module) -> ir.Function:
    """void (x, xp, phases, *_SPLIT_ARGS): for strides above 1, plane p of x, zero-padded by
    (top, left), is split into its used phases: xp[p*ld + k*Hq*Wq + i*Wq + j] =
    xpad[p, i*sh + a_k, j*sw + b_k], (a_k, b_k) = phases[2k], phases[2k+1]."""
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [F32_PTR] * 2 + [I64_PTR]
                                             + [I64] * len(_SPLIT_ARGS)), name="split")
    fn.linkage = "internal"
    x, xp, phases = fn.args[:3]
    x.add_attribute("noalias")
    xp.add_attribute("noalias")
    a = dict(zip(_SPLIT_ARGS, fn.args[3:]))
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    zero, wq = ir.Constant(F32, 0.0), a["Wq"]
    plane_q = b.mul(a["Hq"], wq)
    vec = VecOps(b)
    with for_range(b, a["planes"], name="p") as p, \
            for_range(b, a["n_phase"], name="k") as k:
        ph, pw = (b.load(gep(b, phases, b.add(b.mul(k, const64(2)), const64(i))))
                  for i in range(2))
        src = gep(b, x, b.mul(p, b.mul(a["H"], a["W"])))
        dst = gep(b, xp, b.add(b.mul(p, a["ld"]), b.mul(k, plane_q)))
        col0 = b.sub(pw, a["left"])  # input column of j = 0
        lo, hi = valid_range(b, col0, a["sw"], a["W"], wq)
        with for_range(b, a["Hq"], name="i") as i:
            r = b.sub(b.add(b.mul(i, a["sh"]), ph), a["top"])
            row_ok = b.icmp_unsigned("<", r, a["H"])
            lo_r, hi_r = b.select(row_ok, lo, wq), b.select(row_ok, hi, wq)
            out_row = gep(b, dst, b.mul(i, wq))
            in_row = gep(b, src, b.mul(b.select(row_ok, r, const64(0)), a["W"]))
            with for_range(b, lo_r, name="z0") as j:
                b.store(zero, gep(b, out_row, j))
            _copy_strided(b, vec, in_row, out_row, lo_r, hi_r, a["sw"], col0)
            with for_range(b, wq, start=hi_r, name="z1") as j:
                b.store(zero, gep(b, out_row, j))
    b.ret_void()
    return fn


def _copy_strided(b, vec, in_row, out_row, lo, hi, sw, col0) -> None:
    """out_row[j] = in_row[j*sw + col0] for j in [lo, hi): 16 at a time for column strides
    1 and 2 (stride 2: the even lanes of two masked loads), else one at a time."""
    with b.if_else(b.icmp_signed("<=", sw, const64(2))) as (vector, scalar):
        with vector, for_range(b, hi, start=lo, step=VecOps.LANES, name="jv") as j:
            mask = vec.mask(b.sub(hi, j))
            src = gep(b, in_row, b.add(b.mul(j, sw), col0))
            with b.if_else(b.icmp_signed("==", sw, const64(1))) as (one, two):
                with one:
                    vec.store(vec.load(src, mask), gep(b, out_row, j), mask)
                with two:
                    vec.store(vec.load_even_masked(src, mask, vec.zero), gep(b, out_row, j),
                              mask)
        with scalar, for_range(b, hi, start=lo, name="j") as j:
            value = b.load(gep(b, in_row, b.add(b.mul(j, sw), col0)))
            b.store(value, gep(b, out_row, j))


def build_compact(module: ir.Module, lanes: int) -> ir.Function:
    """void (wide, out, planes, rows, src_stride, count, src_plane, dst_plane):
    out[p*dst_plane + r*count + :count] = wide[p*src_plane + r*src_stride + :count]."""
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [F32_PTR] * 2 + [I64] * 6),
                     name=f"compact_l{lanes}")
    fn.linkage = "internal"
    wide, out, planes, rows, stride, count, src_plane, dst_plane = fn.args
    wide.add_attribute("noalias")
    out.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    vec = Vec(b, lanes)
    with for_range(b, planes, name="p") as p, for_range(b, rows, name="r") as r:
        dst = gep(b, out, b.add(b.mul(p, dst_plane), b.mul(r, count)))
        _fill(b, vec, dst, count, gep(b, wide, b.add(b.mul(p, src_plane), b.mul(r, stride))))
    b.ret_void()
    return fn


def _fill(b, vec, dst, count, src) -> None:
    """dst[:count] = src[:count], or zeros when src is None."""
    with for_range(b, count, step=vec.lanes, name="f") as t:
        mask = vec.mask(imin(b, b.sub(count, t), vec.lanes))
        value = vec.zero if src is None else vec.load(gep(b, src, t), mask)
        vec.store(value, gep(b, dst, t), mask)
