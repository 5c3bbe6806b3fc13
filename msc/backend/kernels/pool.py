"""Native "kernel" facts for nn.max_pool2d and nn.avg_pool2d on NCHW float32 data, and the
window kernel of depthwise convs (conv.py's _DepthwiseNCHW).

Each input plane is copied into a plane filled with the pad value (-inf for max, else 0) and
large enough for every window (ceil_mode tails included), so the window loops never test
bounds; the next plane is padded while this one is read (two slots), so no load waits on the
stores that just wrote its plane. Unpadded inputs are read in place. Output rows go 16 columns
at a time, whole vectors with plain loads and the row's tail masked; four rows run together,
and a 3x3 window is unrolled with one partial result per window row, so a vector's adds (or
FMAs, or maxes) are not one serial chain. Column strides 1 and 2 are vectorized (stride 2: two
loads and a shuffle), other strides run scalar. Average pooling multiplies by a per-output
reciprocal window count computed once per input size in numpy, which covers both
count_include_pad modes and ceil_mode; max keeps NaN from either side, as numpy does::

    attach("nn.max_pool2d", "kernel", Pool2dFact("max"))
"""

from __future__ import annotations

import ctypes
from functools import cache

import numpy as np
from llvmlite import ir

from ...errors import ShapeError
from ...relax.op.infer import pool_out_dim
from ...relax.op.registry import attach
from ..llvm.jit import get_jit
from ..llvm.loops import F32, F32_PTR, I64, const64, entry_alloca, for_range
from ..runtime.chain_split import Parts
from ..runtime.task_wrap import At, Buffer, ChainEntry
from ..runtime.threads import NativeTasks, native_address, split_range, task_threads
from .base import Kernel, KernelFact, Site
from .dense import F32 as F32_DTYPE
from .dense import Address, as_f32
from .layout import VecOps, nan_max, scratch_addresses, scratch_offsets
from .window3 import takes_window, window_raw
from .window_parts import UNITS, window_parts, window_seconds

__all__ = ["Pool2dFact", "fast_window", "window_kernels"]

_MODES = ("max", "avg", "dwconv")
_ARGS = ("planes", "C", "mult", "H", "W", "KH", "KW", "sh", "sw", "ph", "pw", "dh", "dw", "OH",
         "OW", "relu", "hi")  # hi: a depthwise conv's upper clamp (relu6), float32 bits
NO_BOUND = int(np.array(np.inf, np.float32).view(np.int32))  # "hi" without a bound: +inf
_PLANE_ARGS = ("Hp", "Wp", "copy")  # the padded plane, and whether x has to be copied into it
_PAD_VALUE = {"max": float("-inf"), "avg": 0.0, "dwconv": 0.0}
_CONTRACT = ("contract",)
# Window reads (outputs x taps) from which a pool splits its planes across threads: a 3x3 max
# pool over 64 x 56 x 56 outputs (1.8M reads) takes about 0.2 ms, a split ~7 us (gemm.py).
_PARALLEL_READS = 1.5e5


def pair(v) -> tuple:
    v = tuple(int(x) for x in (v if isinstance(v, (tuple, list)) else (v,)))
    return v * 2 if len(v) == 1 else v[:2]


def pad4(v) -> tuple:
    """(top, left, bottom, right) from TVM's 1, 2 or 4 padding values."""
    v = tuple(int(x) for x in (v if isinstance(v, (tuple, list)) else (v,)))
    if len(v) == 1:
        return v * 4
    if len(v) == 2:
        return v * 2
    return v


def sane_window(strides, dilation, padding, kernel=(1, 1)) -> bool:
    """Attrs the native window loops can take (anything else would divide by zero or index
    outside the loops' assumptions): positive strides, dilations and kernel, padding >= 0."""
    return (len(strides) == len(dilation) == len(kernel) == 2 and len(padding) == 4
            and min(*strides, *dilation, *kernel) >= 1 and min(padding) >= 0)


def _symbol(mode: str) -> str:
    return f"msc_window2d_{mode}_nchw_f32_padded"


def _gep(b, ptr, offset):
    return b.gep(ptr, [offset], inbounds=True)


def _build(module: ir.Module, mode: str) -> None:
    """void (x, out, aux, w, bias, tmp, int64 [*_ARGS, *_PLANE_ARGS]) for one mode.

    Output plane p reads input plane (p // (C*mult)) * C + (p % (C*mult)) // mult (mult > 1
    only for depthwise convs with a channel multiplier). With ``copy`` set, each input plane
    is first copied into ``tmp`` (two planes), an Hp x Wp plane filled with the pad value (-inf for max,
    else 0), so the window loops never test bounds; otherwise x is read as is (no padding and
    Hp, Wp = H, W). max: -inf start, max; avg: sum times ``aux`` (1 / window count per
    output); dwconv: bias start, += w * x, then relu.
    """
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [F32_PTR] * 6 + [I64.as_pointer()]),
                     name=_symbol(mode))
    x, out, aux, w, bias, tmp = fn.args[:6]
    for arg in fn.args[:6]:
        arg.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    # the ints come as one int64 array: a ctypes call with 19 int arguments costs ~5 us
    g = {name: b.load(_gep(b, fn.args[6], const64(i)))
         for i, name in enumerate(_ARGS + _PLANE_ARGS)}
    vec = VecOps(b)
    plane_in, plane_out = b.mul(g["H"], g["W"]), b.mul(g["OH"], g["OW"])
    channels_out = b.mul(g["C"], g["mult"])
    copy = b.icmp_signed("!=", g["copy"], const64(0))
    slot = b.mul(g["Hp"], g["Wp"])  # tmp holds two planes: the next is padded while this
    # one is read, so no load waits on the stores that just wrote its plane

    def src_of(p):
        co = b.srem(p, channels_out)
        src_plane = b.add(b.mul(b.sdiv(p, channels_out), g["C"]), b.sdiv(co, g["mult"]))
        return _gep(b, x, b.mul(src_plane, plane_in)), co

    def pad(p):
        dst = _gep(b, tmp, b.mul(b.and_(p, const64(1)), slot))
        _pad_plane(b, vec, g, src_of(p)[0], dst, _PAD_VALUE[mode])
        return dst

    with b.if_then(b.and_(copy, b.icmp_signed(">", g["planes"], const64(0)))):
        pad(const64(0))
    with for_range(b, g["planes"], name="p") as p:
        src, co = src_of(p)
        following = b.add(p, const64(1))
        with b.if_then(b.and_(copy, b.icmp_signed("<", following, g["planes"]))):
            pad(following)
        base = b.select(copy, _gep(b, tmp, b.mul(b.and_(p, const64(1)), slot)), src)
        plane = _Plane(b, vec, g, mode, base, _gep(b, out, b.mul(p, plane_out)))
        plane.weights = _gep(b, w, b.mul(co, b.mul(g["KH"], g["KW"])))
        plane.start = _start(b, vec, mode, bias, co)
        plane.aux, plane.relu = aux, b.icmp_signed("!=", g["relu"], const64(0))
        plane.hi = b.bitcast(b.trunc(g["hi"], ir.IntType(32)), F32)
        plane.rows()
    b.ret_void()


def _start(b, vec, mode, bias, co):
    if mode == "max":
        return vec.splat(ir.Constant(F32, float("-inf")))
    if mode == "avg":
        return vec.zero
    return vec.splat(b.load(_gep(b, bias, co)))


def _pad_plane(b, vec, g, src, tmp, pad: float) -> None:
    """tmp[Hp, Wp] = src[H, W] at (ph, pw), the pad value around it (each element written
    once)."""
    fill = vec.splat(ir.Constant(F32, pad))
    wp, top, left = g["Wp"], g["ph"], g["pw"]
    _run(b, vec, tmp, b.add(b.mul(top, wp), left), fill)  # top rows, the first left edge
    right = b.sub(wp, g["W"])                             # a right edge + the next left edge
    with for_range(b, g["H"], name="h") as h:
        row = _gep(b, tmp, b.add(b.mul(b.add(h, top), wp), left))
        _run(b, vec, row, g["W"], _gep(b, src, b.mul(h, g["W"])))
        _run(b, vec, _gep(b, row, g["W"]), right, fill)
    end = b.add(b.mul(b.add(g["H"], top), wp), left)  # where the last row's right edge ends
    _run(b, vec, _gep(b, tmp, end), b.sub(b.mul(g["Hp"], wp), end), fill)


def _run(b, vec, dst, count, value) -> None:
    """dst[:count] = value (a vector) or the floats at ``value`` (a pointer): whole vectors
    unmasked, then one masked tail (a 32-bit lane compare), so short rows cost little.
    A negative count writes nothing."""
    lanes = VecOps.LANES
    count = b.select(b.icmp_signed("<", count, const64(0)), const64(0), count)
    full = b.and_(count, const64(-lanes))
    every = ir.Constant(ir.VectorType(ir.IntType(1), lanes), [1] * lanes)
    source = None if isinstance(value.type, ir.VectorType) else value

    def move(t, mask):
        v = value if source is None else vec.load(_gep(b, source, t), mask)
        vec.store(v, _gep(b, dst, t), mask)

    with for_range(b, full, step=lanes, name="run") as t:
        move(t, every)
    left = b.sub(count, full)
    with b.if_then(b.icmp_signed(">", left, const64(0))):
        ids = ir.Constant(ir.VectorType(ir.IntType(32), lanes), list(range(lanes)))
        mask = b.icmp_signed("<", ids, vec.splat(b.trunc(left, ir.IntType(32))))
        move(full, mask)


class _Plane:
    """One output plane: rows of 16-column vectors, full vectors with constant masks (plain
    loads), the row's tail with a mask. ``ROWS`` output rows run together and a 3x3 window
    is unrolled with one partial result per window row, so the adds and maxes of a vector are
    not one serial chain."""

    ROWS = 4

    def __init__(self, b, vec, g, mode, base, out):
        self.b, self.vec, self.g, self.mode, self.base, self.out = b, vec, g, mode, base, out

    def rows(self) -> None:
        b, g = self.b, self.g
        three = b.and_(b.icmp_signed("==", g["KH"], const64(3)),
                       b.icmp_signed("==", g["KW"], const64(3)))
        sw = g["sw"]
        with b.if_else(b.icmp_signed("==", sw, const64(1))) as (unit, other):
            with unit:
                self._by_taps(1, three)
            with other, b.if_else(b.icmp_signed("==", sw, const64(2))) as (two, any_stride):
                with two:
                    self._by_taps(2, three)
                with any_stride, for_range(b, g["OH"], name="oh") as oh:
                    self._scalar_row(oh)

    def _by_taps(self, stride: int, three) -> None:
        b, g = self.b, self.g
        blocked = b.mul(b.sdiv(g["OH"], const64(self.ROWS)), const64(self.ROWS))
        with b.if_else(three) as (unrolled, general):
            for taps, block in ((3, unrolled), (None, general)):
                with block:
                    with for_range(b, blocked, step=self.ROWS, name="ohb") as oh:
                        self._row_block(oh, self.ROWS, stride, taps)
                    with for_range(b, g["OH"], start=blocked, name="oh") as oh:
                        self._row_block(oh, 1, stride, taps)

    def _row_block(self, oh, count: int, stride: int, taps) -> None:
        b, g, lanes = self.b, self.g, VecOps.LANES
        ohs = [b.add(oh, const64(r)) for r in range(count)]
        full = b.mul(b.sdiv(g["OW"], const64(lanes)), const64(lanes))
        every = ir.Constant(ir.VectorType(ir.IntType(1), lanes), [1] * lanes)
        with for_range(b, full, step=lanes, name="v") as t:
            self._vectors(ohs, t, every, stride, taps)
        left = b.sub(g["OW"], full)
        with b.if_then(b.icmp_signed(">", left, const64(0))):
            self._vectors(ohs, full, self.vec.mask(left), stride, taps)

    def _vectors(self, ohs, t, mask, stride, taps) -> None:
        """16 output columns from t of each row in ``ohs``: windows folded in registers."""
        b, g, vec = self.b, self.g, self.vec
        col = _gep(b, self.base, b.mul(t, const64(stride)))
        rows = [_gep(b, col, b.mul(b.mul(oh, g["sh"]), g["Wp"])) for oh in ohs]
        if taps is not None:
            results = [self._unrolled(row, mask, stride, taps) for row in rows]
        else:
            results = self._looped(rows, mask, stride)
        for oh, acc in zip(ohs, results):
            vec.store(self._finish(acc, oh, t, mask), _gep(b, self.out, self._at(oh, t)), mask)

    def _unrolled(self, row, mask, stride, taps):
        b, g = self.b, self.g
        partial = []
        for kh in range(taps):
            src = _gep(b, row, b.mul(b.mul(const64(kh), g["dh"]), g["Wp"]))
            acc = self.start if kh == 0 else self.identity
            for kw in range(taps):
                value = self._load(_gep(b, src, b.mul(const64(kw), g["dw"])), mask, stride)
                acc = self._combine(acc, value, const64(kh * taps + kw))
            partial.append(acc)
        acc = partial[0]
        for other in partial[1:]:
            acc = self._merge(acc, other)
        return acc

    def _looped(self, rows, mask, stride):
        b, g, vec = self.b, self.g, self.vec
        slots = [entry_alloca(b, vec.ty, "acc") for _ in rows]
        for slot in slots:
            b.store(self.start, slot)
        with for_range(b, g["KH"], name="kh") as kh:
            down = b.mul(b.mul(kh, g["dh"]), g["Wp"])
            with for_range(b, g["KW"], name="kw") as kw:
                right, tap = b.add(down, b.mul(kw, g["dw"])), b.add(b.mul(kh, g["KW"]), kw)
                for row, slot in zip(rows, slots):
                    value = self._load(_gep(b, row, right), mask, stride)
                    b.store(self._combine(b.load(slot), value, tap), slot)
        return [b.load(slot) for slot in slots]

    @property
    def identity(self):
        if self.mode == "max":
            return self.vec.splat(ir.Constant(F32, float("-inf")))
        return self.vec.zero

    def _merge(self, acc, other):
        b = self.b
        if self.mode == "max":
            return nan_max(b, acc, other)
        return b.fadd(acc, other)

    def _load(self, ptr, mask, stride):
        if stride == 1:
            return self.vec.load(ptr, mask)
        return self.vec.load_even_masked(ptr, mask, self.vec.zero)

    def _at(self, oh, t):
        return self.b.add(self.b.mul(oh, self.g["OW"]), t)

    def _combine(self, acc, value, tap):
        b = self.b
        if self.mode == "max":
            return nan_max(b, acc, value)
        if self.mode == "avg":
            return b.fadd(acc, value)
        weight = b.load(_gep(b, self.weights, tap))
        if not isinstance(value.type, ir.FloatType):
            weight = self.vec.splat(weight)
        return b.fadd(acc, b.fmul(value, weight, flags=_CONTRACT), flags=_CONTRACT)  # an FMA

    def _finish(self, acc, oh, t, mask):
        b, vec = self.b, self.vec
        scalar = isinstance(acc.type, ir.FloatType)
        if self.mode == "avg":
            inv = _gep(b, self.aux, self._at(oh, t))
            return b.fmul(acc, b.load(inv) if scalar else vec.load(inv, mask))
        if self.mode == "dwconv":
            zero = ir.Constant(F32, 0.0) if scalar else vec.zero
            relu = self.relu if scalar else vec.splat(self.relu)
            clamp = b.and_(relu, b.fcmp_ordered("<", acc, zero))  # relu keeps NaN
            hi = self.hi if scalar else vec.splat(self.hi)
            acc = b.select(clamp, zero, acc)
            return b.select(b.fcmp_ordered(">", acc, hi), hi, acc)  # relu6's top; NaN stays
        return acc

    def _scalar_row(self, oh) -> None:
        """Column strides other than 1 and 2: one output at a time."""
        b, g = self.b, self.g
        first = b.extract_element(self.start, ir.IntType(32)(0))
        with for_range(b, g["OW"], name="ow") as ow:
            slot = entry_alloca(b, F32, "acc1")
            b.store(first, slot)
            col = _gep(b, self.base, b.add(b.mul(b.mul(oh, g["sh"]), g["Wp"]),
                                           b.mul(ow, g["sw"])))
            with for_range(b, g["KH"], name="kh") as kh:
                row = _gep(b, col, b.mul(b.mul(kh, g["dh"]), g["Wp"]))
                with for_range(b, g["KW"], name="kw") as kw:
                    value = b.load(_gep(b, row, b.mul(kw, g["dw"])))
                    tap = b.add(b.mul(kh, g["KW"]), kw)
                    b.store(self._combine(b.load(slot), value, tap), slot)
            b.store(self._finish(b.load(slot), oh, ow, None), _gep(b, self.out, self._at(oh, ow)))


def plane_geometry(h, w, kh, kw, strides, top_left, dilation, oh, ow) -> tuple:
    """(Hp, Wp, copy): a plane holding x at ``top_left`` and every window of the output
    (bottom / right padding and ceil_mode tails included), and whether x must be copied."""
    (sh, sw), (dh, dw), (top, left) = strides, dilation, top_left
    hp = max(h + top, (oh - 1) * sh + (kh - 1) * dh + 1)
    wp = max(w + left, (ow - 1) * sw + (kw - 1) * dw + 1)
    return hp, wp, int(hp != h or wp != w)


class _Window:
    """The native entry with its padded-plane scratch: ``(x, out, aux, w, bias, *_ARGS)``,
    pointers and ints as the kernels pass them; the caller has checked the arrays."""

    def __init__(self, raw):
        self.raw, self.address = raw, native_address(raw)
        self._args: dict = {}
        self._splits: dict = {}
        self._chains: dict = {}  # chain_signature's key -> (ChainEntry, scratch bytes)

    def __call__(self, x, out, aux, w, bias, *ints):
        _, tmp_size, args_ptr = self._lookup(ints)
        # two padded planes; a 16-lane tail may reach 15 floats past a row (masked: in bounds)
        tmp = scratch_addresses(tmp_size)[0] if tmp_size else 0
        self.raw(x, out, aux, w, bias, tmp, args_ptr)

    def chain_signature(self, ints: tuple, aux: int, w: int, bias: int, scratch: int) -> tuple:
        """(entry, dims, scratch bytes) of one call on the step's buffers 0 (x) and 1 (out)
        with these window ints, for the VM's native chains (runtime/native_run.KernelStep);
        the padded planes go to the register file's scratch, buffer ``scratch``."""
        key = (ints, aux, w, bias, scratch)
        found = self._chains.get(key)
        if found is None:
            _, tmp_size, args_ptr = self._lookup(ints)
            nbytes = scratch_offsets(tmp_size)[1] if tmp_size else 0
            tmp = At(scratch, 0) if tmp_size else 0
            entry = ChainEntry(self.raw, (Buffer(0), Buffer(1), aux, w, bias, tmp, args_ptr))
            found = self._chains[key] = (entry, nbytes)
        return (*found[0].signature, found[1])

    def lookup(self, ints: tuple) -> tuple:
        """(int64 args array, padded-plane floats, its address) of these window ints."""
        return self._lookup(ints)

    def _lookup(self, ints: tuple) -> tuple:
        found = self._args.get(ints)
        if found is None:
            args, tmp_size = self._geometry(ints)
            found = self._args[ints] = (args, tmp_size, args.ctypes.data)
        return found

    def parallel(self, parts: tuple, x, out, aux, w, bias, rest: tuple) -> None:
        """One native task per part ``(x, out, w, bias byte offsets, planes, C)``, the
        ints after ``planes, C`` being ``rest``; each task pads into its own scratch planes."""
        found = self._splits.get((parts, rest))
        if found is None:
            found = self._splits[(parts, rest)] = self._split(parts, rest)
        tasks, tmp_floats = found
        tmp = scratch_addresses(tmp_floats)[0] if tmp_floats else 0
        tasks.launch(1, (x, out, aux, w, bias, tmp))

    def _split(self, parts: tuple, rest: tuple) -> tuple:
        tasks, tmp_floats = NativeTasks(len(parts)), 0
        tasks.records[:, 0] = self.address
        for k, (xo, oo, wo, bo, planes, channels) in enumerate(parts):
            args, tmp_size, _ = self._lookup((planes, channels, *rest))
            tasks.records[k, 7] = args.ctypes.data  # the array stays alive in self._args
            tasks.records[k, 1:7] = (xo, oo, 0, wo, bo, 4 * tmp_floats)  # byte offsets
            tmp_floats += -(-tmp_size // 16) * 16  # each task's planes 64-byte aligned
        return tasks, tmp_floats

    @staticmethod
    def _geometry(ints: tuple) -> tuple:
        g = dict(zip(_ARGS, ints))
        hp, wp, copy = plane_geometry(g["H"], g["W"], g["KH"], g["KW"], (g["sh"], g["sw"]),
                                      (g["ph"], g["pw"]), (g["dh"], g["dw"]), g["OH"], g["OW"])
        args = np.array((*ints, hp, wp, copy), np.int64)
        return args, (2 * hp * wp + 2 * VecOps.LANES) if copy else 0


@cache
def window_kernels() -> dict:
    """mode -> entry ``(x, out, aux, w, bias, *_ARGS)`` (see :class:`_Window`)."""
    def build():
        module = ir.Module(name="msc_window2d_nchw_f32")
        for mode in _MODES:
            _build(module, mode)
        return module

    library = get_jit().compile_generated(
        build, [_symbol(m) for m in _MODES],
        (__name__, "msc.backend.kernels.layout", "msc.backend.llvm.loops"), tuple(_MODES))
    return {m: _Window(library.cfunc(_symbol(m), None, *(ctypes.c_void_p,) * 7))
            for m in _MODES}


def fast_window(mode: str, stride: int, k: int = 3) -> _Window:
    """window3.py's in-place k x k entry of ``mode`` for ``stride``, as a _Window (one per
    entry: its argument rows and task lists are kept per shape)."""
    return _fast_window(mode, stride, k)


@cache
def _fast_window(mode: str, stride: int, k: int) -> _Window:
    return _Window(window_raw(mode, k, stride))


def pick_window(mode: str, kernel: tuple, strides: tuple, dilation: tuple) -> _Window:
    """window3.py's entry for 3x3 windows (depthwise convs: also 5x5) of stride 1 or 2 (no
    padded copy, a few times faster on small planes), else this module's window kernel."""
    if takes_window(mode, *kernel, strides, dilation):
        return fast_window(mode, strides[0], kernel[0])
    return window_kernels()[mode]


class _Pool2dKernel(Kernel):
    inputs = (0,)

    def __init__(self, op: str, kind: str, attrs: dict):
        self.op, self.avg = op, kind == "avg"
        self.kernel, self.strides = attrs["pool_size"], attrs["strides"]
        self.dilation, self.padding = attrs["dilation"], attrs["padding"]
        self.ceil, self.include_pad = attrs["ceil_mode"], attrs["count_include_pad"]
        self.run = pick_window(kind, self.kernel, self.strides, self.dilation)
        self._inv: dict = {}
        self._shapes: dict = {}  # input shape -> _shape(); (shape, threads) -> _parts()
        self.addr = (Address(), Address())

    def out_dims(self, h: int, w: int) -> tuple:
        top, left, bottom, right = self.padding
        return tuple(int(pool_out_dim(size, k, s, b, a, d, self.ceil)) for size, k, s, b, a, d in
                     ((h, self.kernel[0], self.strides[0], top, bottom, self.dilation[0]),
                      (w, self.kernel[1], self.strides[1], left, right, self.dilation[1])))

    def __call__(self, x, out):
        if type(x) is not np.ndarray or x.dtype != F32_DTYPE or not x.flags.c_contiguous:
            x = as_f32(x, "data", self.op)
        found = self._shapes.get(x.shape)
        if found is None:
            found = self._shapes[x.shape] = self._shape(x.shape)
        want, aux, ints, reads = found
        if (type(out) is not np.ndarray or out.shape != want or out.dtype != F32_DTYPE
                or not out.flags.c_contiguous):
            raise ShapeError(f"output buffer {getattr(out, 'shape', out)}, expected {want}",
                             op=self.op, param="out")
        if out.size:
            xp, op = self.addr[0](x), self.addr[1](out)
            threads = task_threads() if reads >= _PARALLEL_READS else 1
            if threads == 1:
                self.run(xp, op, aux, 0, 0, *ints)
            else:  # planes are independent: any split computes each as one call does
                self.run.parallel(self._parts(x.shape, threads), xp, op, aux, 0, 0, ints[2:])
        return out

    def native_signature(self, buffers: list) -> tuple | None:
        """(entry, dims, scratch bytes, splits) for the VM's native chains: float32 NCHW
        buffers of the shapes ``__call__`` takes; ``splits``: enough reads to split across
        threads (the chain calls it on one thread only)."""
        if len(buffers) != 2 or any(np.dtype(d) != F32_DTYPE for _, d in buffers):
            return None
        shape = tuple(buffers[0][0])
        try:
            found = self._shapes.get(shape) or self._shape(shape)
        except ShapeError:
            return None
        want, aux, ints, reads = found
        if tuple(buffers[1][0]) != want or not np.prod(want):
            return None
        return (*self.run.chain_signature(ints, aux, 0, 0, len(buffers)),
                reads >= _PARALLEL_READS)

    def native_parts(self, buffers: list) -> Parts | None:
        """Plane ranges as the units of a chain's parallel step (runtime/chain_split.py)."""
        if self.native_signature(buffers) is None:
            return None
        shape = (n, c, h, w) = tuple(buffers[0][0])
        want, aux, ints, reads = self._shapes.get(shape) or self._shape(shape)
        oh, ow = want[2:]
        ranges = [(p0 * h * w * 4, p0 * oh * ow * 4, 0, 0, p1 - p0, c)
                  for p0, p1 in split_range(n * c, UNITS)]
        seconds = window_seconds(reads, self.run, ints, ((n, c, h, w), want), aux)
        return window_parts(self.run, ranges, ints[2:], aux, 0, 0, seconds)

    def _shape(self, shape: tuple) -> tuple:
        """(output shape, aux address, the window ints, window reads) of one input shape."""
        if len(shape) != 4:
            raise ShapeError(f"expects NCHW data, got {shape}", op=self.op, param="data")
        n, c, h, w = shape
        oh, ow = self.out_dims(h, w)
        aux = self._inverse_counts(h, w, oh, ow).ctypes.data if self.avg else 0
        kh, kw = self._clamped(h, w)
        ints = (n * c, c, 1, h, w, kh, kw, *self.strides, *self.padding[:2],
                *self.dilation, oh, ow, 0, NO_BOUND)
        return (n, c, oh, ow), aux, ints, n * c * oh * ow * kh * kw

    def _clamped(self, h: int, w: int) -> tuple:
        """The window cut to the padded input: a window starts at or after the top / left
        padding, so taps past ``size + before + after`` only ever fall in the ceil_mode tail,
        which no output reads or counts. HF EfficientNet's head pools 7x7 with a 1280x1280
        window (``AvgPool2d(hidden_dim, ceil_mode=True)``): padding planes to the full window
        took 3 s a call, onnxruntime 0.03 ms."""
        top, left, bottom, right = self.padding
        return tuple(k if d != 1 else min(k, size + before + after) for k, d, size, before, after
                     in ((self.kernel[0], self.dilation[0], h, top, bottom),
                         (self.kernel[1], self.dilation[1], w, left, right)))

    def _parts(self, shape: tuple, threads: int) -> tuple:
        """Plane ranges (x, out, w, bias byte offsets, planes, C) for ``threads``."""
        key = (shape, threads)
        if key not in self._shapes:
            n, c, h, w = shape
            _, _, oh, ow = self._shapes[shape][0]
            self._shapes[key] = tuple((p0 * h * w * 4, p0 * oh * ow * 4, 0, 0, p1 - p0, c)
                                      for p0, p1 in split_range(n * c, 2 * threads))
        return self._shapes[key]

    def _inverse_counts(self, h, w, oh, ow) -> np.ndarray:
        inv = self._inv.get((h, w))
        if inv is None:
            counts = [self._axis_counts(size, o, axis) for axis, (size, o) in
                      enumerate(((h, oh), (w, ow)))]
            total = np.outer(*counts).astype(np.float32)
            inv = self._inv[(h, w)] = np.ascontiguousarray(1.0 / np.maximum(total, 1.0))
        return inv

    def _axis_counts(self, size: int, out: int, axis: int) -> np.ndarray:
        """Window positions counted per output: inside the input, or inside the explicitly
        padded input when count_include_pad (never the extra ceil_mode tail)."""
        before, after = self.padding[axis], self.padding[axis + 2]
        lo, hi = (-before, size + after) if self.include_pad else (0, size)
        start = np.arange(out) * self.strides[axis] - before
        taps = start[:, None] + np.arange(self.kernel[axis]) * self.dilation[axis]
        return ((taps >= lo) & (taps < hi)).sum(axis=1)


def _attrs(site: Site) -> dict:
    return {"pool_size": pair(site.attr("pool_size", 1)),
            "strides": pair(site.attr("strides", 1)),
            "dilation": pair(site.attr("dilation", 1)),
            "padding": pad4(site.attr("padding", 0)),
            "ceil_mode": bool(site.attr("ceil_mode", False)),
            "count_include_pad": bool(site.attr("count_include_pad", False))}


class Pool2dFact(KernelFact):
    def __init__(self, kind: str):
        self.kind = kind

    def match(self, site: Site) -> bool:
        x = site.tensor(0)
        layout = site.attr("layout") or "NCHW"
        if not (x is not None and x.dtype == "float32" and x.ndim == 4 and layout == "NCHW"
                and (site.attr("out_layout") or layout) == "NCHW"):
            return False
        a = _attrs(site)
        return sane_window(a["strides"], a["dilation"], a["padding"], a["pool_size"])

    def make(self, site: Site) -> Kernel:
        return _Pool2dKernel(site.op, self.kind, _attrs(site))


attach("nn.max_pool2d", "kernel", Pool2dFact("max"))
attach("nn.avg_pool2d", "kernel", Pool2dFact("avg"))
