"""Tensor intrinsics in compiled TIR: the tiles ``tensorize`` binds with ``T.match_buffer`` and
the calls its implementations make.

A block's ``match_buffers`` become views of their parent buffers (a pointer to the tile's
first element, the parent's strides), and ``T.call_extern`` of a name in :data:`CALLS` emits
that intrinsic's code. ``msc.x86.dot_16x4_u8i8i32`` (``C[16] += sum_k A[k] * B[16, k]``,
uint8 x int8 -> int32, the tile of ``dot_16x4_vnni``) is one ``vpdpbusd`` on a host with
AVX-512 VNNI (``llvm.x86.avx512.vpdpbusd.512``) and 64 scalar multiply-adds elsewhere; both
need compact tiles (C and A contiguous, B's rows of 4 contiguous and 4 apart), checked here.
"""

from __future__ import annotations

from llvmlite import ir

from ...errors import BuildError
from ...tir import expr as E
from ..llvm.jit import host_target

__all__ = ["CALLS", "emit_call", "emit_region_view", "host_vnni"]

I8, I32 = ir.IntType(8), ir.IntType(32)
V16 = ir.VectorType(I32, 16)
_VPDPBUSD = "llvm.x86.avx512.vpdpbusd.512"


def host_vnni() -> bool:
    """Whether the host runs 512-bit ``vpdpbusd`` (AVX-512 VNNI), from its LLVM features."""
    t = host_target()
    return t.has("avx512vnni") and t.has("avx512bw")


def emit_region_view(em, view, base, region) -> None:
    """Bind ``view`` to the tile ``region`` of ``base`` (``T.match_buffer``): a pointer to
    its first element; the view's dims other than 1 take, in order, the strides of the
    region's dims other than 1 (TVM's LowerMatchBuffer binds them so)."""
    ptr = em.address(base, [lo for lo, _ in region])
    parent = _strides(base)
    wide = [parent[k] for k, (lo, hi) in enumerate(region) if not _unit(lo, hi)]
    if len(wide) != sum(E.as_int(d) != 1 for d in view.shape):
        raise BuildError(f"match_buffer {view.name!r}: its shape does not fit the region of "
                         f"{base.name!r}", op=em.func.name)
    it = iter(wide)
    strides = [E.IntImm(1, "int64") if E.as_int(d) == 1 else next(it) for d in view.shape]
    if view.strides is not None:
        strides = list(view.strides)
    em.bufs[view.name] = (ptr, [em.index(d) for d in view.shape],
                          [em.index(s) for s in strides])
    em.tile_strides[view.name] = [E.as_int(s) for s in strides]
    em.tile_offsets[view.name] = view.elem_offset  # the pointer already starts there


def _unit(lo, hi) -> bool:
    return hi is None or E.as_int(E.canonicalize(E.sub(hi, lo))) == 1


def _strides(buf) -> list:
    if buf.strides is not None:
        return list(buf.strides)
    out, step = [], E.IntImm(1, "int64")
    for d in reversed(buf.shape):
        out.insert(0, step)
        step = E.mul(step, d)
    return out


def emit_call(em, call: E.PrimCall) -> bool:
    """Emit ``call`` when it is one of :data:`CALLS`; False when it is not one."""
    if call.name != "call_extern" or not call.args or not hasattr(call.args[0], "value"):
        return False
    emitter = CALLS.get(call.args[0].value)
    if emitter is None:
        return False
    emitter(em, call.args[1:])
    return True


def _tile(em, data, offset, want: list, what: str) -> ir.Value:
    """The pointer of the tile named by ``X.data`` (its offset is the view's start)."""
    name = data.name.removesuffix(".data") if isinstance(data, E.Var) else None
    own = em.tile_offsets.get(name)
    if name not in em.bufs or not (isinstance(offset, E.Var) and (
            offset.name == f"{name}.elem_offset" or own is not None and offset == own)):
        raise BuildError(f"{what}: expects a tile's .data and .elem_offset", op=em.func.name)
    strides = em.tile_strides.get(name)
    if strides != want:
        raise BuildError(f"{what}: the tile {name!r} has strides {strides}, the instruction "
                         f"needs {want} (a compact tile)", op=em.func.name,
                         hint="transform_layout the buffer so the tile is contiguous")
    return em.bufs[name][0]


def _dot_16x4(em, args) -> None:
    what = "msc.x86.dot_16x4_u8i8i32"
    c = _tile(em, args[0], args[1], [1], what)
    a = _tile(em, args[2], args[3], [1], what)
    b = _tile(em, args[4], args[5], [4, 1], what)
    if host_vnni():
        _vpdpbusd(em.b, c, a, b)
    else:
        _scalar_dot(em.b, c, a, b)


def _vpdpbusd(bld: ir.IRBuilder, c, a, b) -> None:
    c_ptr = bld.bitcast(c, V16.as_pointer())
    acc = bld.load(c_ptr, align=4)
    word = bld.load(bld.bitcast(a, I32.as_pointer()), align=1)
    lanes = bld.insert_element(ir.Constant(V16, ir.Undefined), word, ir.Constant(I32, 0))
    lanes = bld.shuffle_vector(lanes, ir.Constant(V16, ir.Undefined),
                               ir.Constant(ir.VectorType(I32, 16), [0] * 16))
    weights = bld.load(bld.bitcast(b, V16.as_pointer()), align=1)
    module = bld.module
    fn = module.globals.get(_VPDPBUSD) or ir.Function(
        module, ir.FunctionType(V16, [V16, V16, V16]), name=_VPDPBUSD)
    bld.store(bld.call(fn, [acc, lanes, weights]), c_ptr, align=4)


def _scalar_dot(bld: ir.IRBuilder, c, a, b) -> None:
    """The same values without VNNI: C[j] += sum_k zext(A[k]) * sext(B[4 j + k])."""
    a8 = bld.bitcast(a, I8.as_pointer())
    b8 = bld.bitcast(b, I8.as_pointer())
    c32 = bld.bitcast(c, I32.as_pointer())
    avals = [bld.zext(bld.load(bld.gep(a8, [ir.Constant(I32, k)])), I32) for k in range(4)]
    for j in range(16):
        slot = bld.gep(c32, [ir.Constant(I32, j)])
        acc = bld.load(slot)
        for k in range(4):
            w = bld.sext(bld.load(bld.gep(b8, [ir.Constant(I32, 4 * j + k)])), I32)
            acc = bld.add(acc, bld.mul(avals[k], w))
        bld.store(acc, slot)


CALLS = {"msc.x86.dot_16x4_u8i8i32": _dot_16x4}
