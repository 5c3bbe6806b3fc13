"""3x3 and 5x5 windows on NCHW float32 planes read in place (no padded copy): depthwise convs
(3x3, 5x5), max and average pooling (3x3).

The window kernel of pool.py pads every plane into scratch and keeps many per-plane values
live; on the small planes of ShuffleNet / MobileNet (7x7 to 28x28, hundreds of channels) its
per-plane setup spills and dominates: 544 planes of 7x7 took ~95 us, 5 GFLOP/s, where
onnxruntime's NCHWc kernel takes ~14 us. Here each output row is 16-column vectors, each of
the 9 (25) taps one masked load of the input row (lanes whose input column or row falls in
the padding are masked off, so they read nothing and add zero), with one partial sum per
window row (three short FMA chains, not one of nine). The column masks depend only on the vector's
first column, so they are made once per column block and reused down the plane. Stride 2
reads the even lanes of two masked loads (and the odd lanes for the next column's tap). The
5x5 depthwise convs of EfficientNet / MobileNetV3 ran on pool.py's padded-copy kernel at
2-5x onnxruntime's time (benchmarks/blocks.py); here they take the same loops as 3x3. Max pooling runs the same loops with -inf in
the masked lanes and a NaN-keeping max (pool.py's window kernel took ~0.4 ms for ResNet's
3x3 / 2 pool over 64 x 112 x 112, onnxruntime ~0.08 ms), average pooling sums and scales by
pool.py's per-output reciprocal counts. The entries take pool.py's window arguments, so
conv.py's and pool.py's threading (tasks of plane ranges) is unchanged::

    kernel = pool.fast_window("dwconv", stride, 5)   # "max", "avg" (3x3): a pool._Window
    kernel(x_ptr, out_ptr, aux_ptr, w_ptr, bias_ptr, *ints)   # ints: pool._ARGS
"""

from __future__ import annotations

import ctypes
from contextlib import contextmanager
from functools import cache

from llvmlite import ir

from ..llvm.jit import get_jit
from ..llvm.loops import F32_PTR, I64, const64, entry_alloca, for_range
from .layout import VecOps, nan_max

__all__ = ["WINDOW_ARGS", "takes_window", "window_raw"]

# pool.py's window arguments (its _ARGS + _PLANE_ARGS: a test keeps them equal), read here by
# position; pool.py wraps these entries in its _Window (scratch, thread tasks)
WINDOW_ARGS = ("planes", "C", "mult", "H", "W", "KH", "KW", "sh", "sw", "ph", "pw", "dh", "dw",
               "OH", "OW", "relu", "hi", "Hp", "Wp", "copy")

_STRIDES = (1, 2)
_MODES = ("dwconv", "max", "avg")
_SIZES = {"dwconv": (3, 5), "max": (3,), "avg": (3,)}  # square windows each mode is built for


def takes_window(mode: str, kh: int, kw: int, strides: tuple, dilation: tuple) -> bool:
    """Whether :func:`window_raw` runs this window (any padding, channel multiplier)."""
    return kh == kw and kh in _SIZES[mode] and tuple(dilation) == (1, 1) and \
        strides[0] == strides[1] and strides[0] in _STRIDES


def _symbol(mode: str, k: int, stride: int) -> str:
    return f"msc_window{k}x{k}_{mode}_s{stride}_nchw_f32"


class _Mode:
    """What a window does with its taps: the start of the first window row's partial, the
    start of the others, masked lanes' value, one tap, merging partials, the output."""

    def __init__(self, b, vec, mode: str, k: int, g, args):
        self.b, self.vec, self.mode, self.k, self.g = b, vec, mode, k, g
        self.x, self.out, self.aux, self.w, self.bias = args
        module = b.module
        self.fma = module.globals.get("llvm.fma.v16f32") or ir.Function(
            module, ir.FunctionType(vec.ty, [vec.ty] * 3), "llvm.fma.v16f32")
        minus_inf = vec.splat(ir.Constant(ir.FloatType(), float("-inf")))
        self.identity = minus_inf if mode == "max" else vec.zero
        self.relu = vec.splat(b.icmp_signed("!=", g["relu"], const64(0)))
        # a depthwise conv's upper clamp (relu6: 6; +inf without one), float32 bits
        self.hi = vec.splat(b.bitcast(b.trunc(g["hi"], ir.IntType(32)), ir.FloatType()))

    def plane(self, co) -> None:
        """Per-plane values: a depthwise conv's k * k weights and bias (pools have none)."""
        b, vec, k = self.b, self.vec, self.k
        self.start = self.identity
        if self.mode == "dwconv":
            taps = b.mul(co, const64(k * k))
            # invariant loads: under register pressure (25 weights of a 5x5 window) LLVM
            # re-broadcasts a weight from memory (an FMA's {1to16} operand) instead of
            # spilling and reloading its vector
            invariant = b.module.add_metadata([])
            self.weights = []
            for t in range(k * k):
                weight = b.load(b.gep(self.w, [b.add(taps, const64(t))]))
                weight.set_metadata("invariant.load", invariant)
                self.weights.append(vec.splat(weight))
            self.start = vec.splat(b.load(b.gep(self.bias, [co])))

    def tap(self, acc, value, t: int):
        if self.mode == "dwconv":
            return self.b.call(self.fma, [value, self.weights[t], acc])
        return self.merge(acc, value)

    def merge(self, a, c):
        return nan_max(self.b, a, c) if self.mode == "max" else self.b.fadd(a, c)

    def merge_all(self, values: list):
        """The window rows' partials merged as a balanced tree (short dependency chains)."""
        while len(values) > 1:
            pairs = [self.merge(a, c) for a, c in zip(values[::2], values[1::2])]
            values = pairs + values[len(pairs) * 2:]
        return values[0]

    def window_row(self, kh: int, values: list):
        """The partial of window row ``kh`` from its k tap vectors."""
        acc = self.start if kh == 0 else self.identity
        for kw, value in enumerate(values):
            acc = self.tap(acc, value, kh * self.k + kw)
        return acc

    def window(self, rows: list):
        """One output vector from its k window rows' k tap vectors each."""
        return self.merge_all([self.window_row(kh, values) for kh, values in enumerate(rows)])

    def finish(self, acc, at, mask):
        """The output vector at output offset ``at`` (lanes of ``mask``)."""
        b, vec = self.b, self.vec
        if self.mode == "avg":  # times 1 / (window count) of each output
            return b.fmul(acc, vec.load(b.gep(self.aux, [at]), mask))
        if self.mode == "dwconv":
            clamp = b.and_(self.relu, b.fcmp_ordered("<", acc, vec.zero))  # relu keeps NaN
            acc = b.select(clamp, vec.zero, acc)
            return b.select(b.fcmp_ordered(">", acc, self.hi), self.hi, acc)
        return acc


def _build(module: ir.Module, mode: str, k: int, stride: int) -> None:
    """void (x, out, aux, w, bias, tmp, int64 [*WINDOW_ARGS]) for k x k windows; tmp holds
    the blank row (see _blank_row), aux is read only by avg."""
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [F32_PTR] * 6 + [I64.as_pointer()]),
                     name=_symbol(mode, k, stride))
    for arg in fn.args[:6]:
        arg.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    g = {name: b.load(b.gep(fn.args[6], [const64(i)]))
         for i, name in enumerate(WINDOW_ARGS)}
    how = _Mode(b, VecOps(b), mode, k, g, fn.args[:5])
    how.blank = _blank_row(b, how, fn.args[5])
    if stride == 1 and mode == "dwconv":
        # rows as wide as the input's and narrower than half a vector: one flat run of
        # positions (7x7: 4 vectors a plane, not 7; from 8 columns on the rows path is faster)
        flat_ok = b.and_(b.icmp_signed("==", g["OW"], g["W"]),
                         b.icmp_signed("<", g["W"], const64(VecOps.LANES // 2)))
        with b.if_else(flat_ok) as (flat, rows):
            with flat:
                _flat_planes(how)
            with rows:
                _row_planes(how, stride)
    else:
        _row_planes(how, stride)
    b.ret_void()


def _blank_row(b, how, tmp):
    """W identity values (0, or -inf for max) at ``tmp``, the scratch pool.py's _Window
    gives each call or task when the window has padding (``copy``): window rows in the
    padding read it. Without padding no window row leaves the input and tmp may be null."""
    g, vec = how.g, how.vec
    with b.if_then(b.icmp_signed("!=", g["copy"], const64(0))), \
            for_range(b, g["W"], step=VecOps.LANES, name="blank") as j:
        vec.store(how.identity, b.gep(tmp, [j]), vec.mask(b.sub(g["W"], j)))
    return tmp


@contextmanager
def _planes(how):
    """Yields (output plane p, its input plane pointer, output channel) for every plane.
    A depthwise conv's are nested loops over images, input channels and the channel
    multiplier: no division per plane (a 64-bit idiv costs more than a 7x7 plane's FMAs);
    its ``planes`` is a multiple of C * mult (whole images, or one image's channel range per
    task). A pool's planes are any range (its tasks split planes anywhere), one to one."""
    b, g, x = how.b, how.g, how.x
    plane_in = b.mul(g["H"], g["W"])
    if how.mode != "dwconv":
        with for_range(b, g["planes"], name="p") as p:
            yield p, b.gep(x, [b.mul(p, plane_in)]), None
        return
    per_image = b.mul(g["C"], g["mult"])
    with for_range(b, b.sdiv(g["planes"], per_image), name="img") as img, \
            for_range(b, g["C"], name="ci") as ci, for_range(b, g["mult"], name="m") as m:
        src_plane = b.add(b.mul(img, g["C"]), ci)
        co = b.add(b.mul(ci, g["mult"]), m)
        p = b.add(b.mul(img, per_image), co)
        yield p, b.gep(x, [b.mul(src_plane, plane_in)]), co


def _row_planes(how: _Mode, stride: int) -> None:
    """Any padding: per plane, 16-column blocks, rows inner."""
    b, g = how.b, how.g
    plane_out = b.mul(g["OH"], g["OW"])
    with _planes(how) as (p, src, co):
        how.plane(co)
        plane = _Plane(how, stride, src, b.gep(how.out, [b.mul(p, plane_out)]))
        with for_range(b, g["OW"], step=VecOps.LANES, name="ow0") as ow0:
            plane.column_block(ow0)


def _flat_planes(how: _Mode) -> None:
    """Stride 1 with OW == W: output position q = oh*W + ow reads input q + (kh-ph)*W +
    (kw-pw), so 16 consecutive positions are one masked load per tap whatever the row
    breaks (a 7x7 plane is 4 vectors, not 7 rows of 7 lanes). The k * k tap masks of a block
    depend only on its positions: made once per block, then every plane runs."""
    b, g, vec = how.b, how.g, how.vec
    plane = b.mul(g["OH"], g["OW"])
    i32, f32 = ir.IntType(32), ir.FloatType()
    f32v = ir.VectorType(f32, VecOps.LANES)
    lanes = ir.Constant(ir.VectorType(i32, VecOps.LANES), list(range(VecOps.LANES)))
    inv = vec.splat(b.fdiv(ir.Constant(f32, 1.0), b.sitofp(g["W"], f32)))
    with for_range(b, plane, step=VecOps.LANES, name="q0") as q0:
        q = b.add(vec.splat(b.trunc(q0, i32)), lanes)
        # oh = q / W through float (exact for planes far below 2^22 positions)
        oh = b.fptosi(b.fmul(b.fadd(b.sitofp(q, f32v), vec.splat(ir.Constant(f32, 0.5))), inv),
                      q.type)
        ow = b.sub(q, b.mul(oh, vec.splat(b.trunc(g["W"], i32))))
        inside = b.icmp_signed("<", q, vec.splat(b.trunc(plane, i32)))
        masks, offsets = [], []
        for kh in range(how.k):
            r = b.add(oh, vec.splat(b.trunc(b.sub(const64(kh), g["ph"]), i32)))
            row_ok = b.icmp_unsigned("<", r, vec.splat(b.trunc(g["H"], i32)))
            for kw in range(how.k):
                c = b.add(ow, vec.splat(b.trunc(b.sub(const64(kw), g["pw"]), i32)))
                col_ok = b.icmp_unsigned("<", c, vec.splat(b.trunc(g["W"], i32)))
                masks.append(b.and_(inside, b.and_(row_ok, col_ok)))
                offsets.append(b.add(q0, b.add(b.mul(b.sub(const64(kh), g["ph"]), g["W"]),
                                               b.sub(const64(kw), g["pw"]))))
        with _planes(how) as (p, src, co):
            how.plane(co)
            rows = [[vec.load(b.gep(src, [offsets[t]]), masks[t], how.identity)
                     for t in range(kh * how.k, (kh + 1) * how.k)] for kh in range(how.k)]
            at = b.add(b.mul(p, plane), q0)
            acc = how.finish(how.window(rows), at, inside)
            vec.store(acc, b.gep(how.out, [at]), inside)


class _Plane:
    """One output plane, a 16-column block at a time, rows inner. Column masks are made once
    per block; a window row in the padding reads ``how.blank`` (a row of the identity)
    instead, so the row loop has no mask arithmetic."""

    def __init__(self, how: _Mode, stride: int, src, dst):
        self.how, self.b, self.vec, self.g = how, how.b, how.vec, how.g
        self.stride, self.src, self.dst = stride, src, dst

    def column_block(self, ow0) -> None:
        b, g, vec, s = self.b, self.g, self.vec, self.stride
        left = b.sub(g["OW"], ow0)
        out_mask = vec.mask(left)
        cols, masks = [], []
        for kw in range(self.how.k):
            # input column of input lane j: base + j; lanes outside [0, W) read nothing
            base = b.sub(b.add(b.mul(ow0, const64(s)), const64(kw)), g["pw"])
            cols.append(base)
            halves = [b.add(base, const64(VecOps.LANES * h)) for h in range(s)]
            masks.append([vec.between(b.neg(at), b.sub(g["W"], at)) for at in halves])
        if self.how.mode == "max":
            self._max_rows(ow0, cols, masks, out_mask)
            return
        if s == 2 and self.how.mode == "dwconv":
            # rows of at most half a vector (MobileNet / EfficientNet's 14 -> 7 convs): two
            # output rows a vector; OW <= 8 means this is the only column block (ow0 = 0)
            narrow = b.icmp_signed("<=", g["OW"], const64(VecOps.LANES // 2))
            with b.if_else(narrow) as (two_rows, one_row):
                with two_rows:
                    self._narrow_rows(cols, masks, out_mask)
                with one_row:
                    self._rows(ow0, cols, masks, out_mask)
            return
        self._rows(ow0, cols, masks, out_mask)

    def _rows(self, ow0, cols, masks, out_mask) -> None:
        b, g, vec, s = self.b, self.g, self.vec, self.stride
        pairs = const64(0)
        if s == 1:  # two output rows share 2 of their 3 input rows: loaded once
            pairs = b.mul(b.sdiv(g["OH"], const64(2)), const64(2))
            with for_range(b, pairs, step=2, name="oh2") as oh:
                for k, acc in enumerate(self._row_pair(oh, cols, masks)):
                    at = b.add(b.mul(b.add(oh, const64(k)), g["OW"]), ow0)
                    vec.store(self.how.finish(acc, at, out_mask), b.gep(self.dst, [at]),
                              out_mask)
        with for_range(b, g["OH"], start=pairs, name="oh") as oh:
            at = b.add(b.mul(oh, g["OW"]), ow0)
            acc = self.how.finish(self._row(oh, cols, masks), at, out_mask)
            vec.store(acc, b.gep(self.dst, [at]), out_mask)

    def _narrow_rows(self, cols, masks, out_mask) -> None:
        """Stride 2, OW <= 8: lanes 0-7 are output row oh, lanes 8-15 row oh + 1. A tap pair
        is one load of each row's input row and two shuffles (even lanes: tap kw, odd: kw +
        1), for 16 outputs instead of 8; the upper half is stored shifted down."""
        b, g, vec, how = self.b, self.g, self.vec, self.how
        lanes, half = VecOps.LANES, VecOps.LANES // 2

        def lane_ids(ids):
            return ir.Constant(ir.VectorType(ir.IntType(32), lanes), ids)
        pick = [lane_ids([2 * i + h for i in range(half)] + [lanes + 2 * i + h
                                                             for i in range(half)])
                for h in range(2)]
        upper = lane_ids(list(range(half, lanes)) + list(range(half)))
        with for_range(b, g["OH"], step=2, name="oh2") as oh:
            second = b.icmp_signed("<", b.add(oh, const64(1)), g["OH"])
            rows = []
            for kh in range(how.k):
                top = b.sub(b.add(b.mul(oh, const64(2)), const64(kh)), g["ph"])
                ptrs = []
                for r in (top, b.select(second, b.add(top, const64(2)), top)):
                    inside = b.icmp_unsigned("<", r, g["H"])  # padding rows: the blank row
                    ptrs.append(b.select(inside, b.gep(self.src, [b.mul(r, g["W"])]),
                                         how.blank))
                taps = []
                for kw in range(0, how.k, 2):
                    first, other = (vec.load(b.gep(ptr, [cols[kw]]), masks[kw][0],
                                             how.identity) for ptr in ptrs)
                    taps += [b.shuffle_vector(first, other, pick[h])
                             for h in range(min(2, how.k - kw))]
                rows.append(taps)
            at = b.mul(oh, g["OW"])
            acc = how.finish(how.window(rows), at, out_mask)
            vec.store(acc, b.gep(self.dst, [at]), out_mask)
            lower = b.and_(out_mask, vec.splat(second))
            vec.store(b.shuffle_vector(acc, acc, upper),
                      b.gep(self.dst, [b.add(at, g["OW"])]), lower)

    def _row_pair(self, oh, cols, masks) -> list:
        """Output rows oh and oh + 1 (stride 1) from input rows oh - ph .. oh - ph + k."""
        b, g, how = self.b, self.g, self.how
        partial = [[None] * how.k for _ in range(2)]
        for k in range(how.k + 1):  # each input row goes into both outputs as it is loaded
            r = b.sub(b.add(oh, const64(k)), g["ph"])
            inside = b.icmp_unsigned("<", r, g["H"])  # rows in the padding read the blank row
            row = b.select(inside, b.gep(self.src, [b.mul(r, g["W"])]), how.blank)
            values = self._taps(row, cols, masks)
            for first in range(2):
                if 0 <= k - first < how.k:
                    partial[first][k - first] = how.window_row(k - first, values)
        return [how.merge_all(rows) for rows in partial]

    def _max_rows(self, ow0, cols, masks, out_mask) -> None:
        """Max is separable: each input row's 3-column max is made once and kept for the
        next output row that reads it (stride 1: one new row per output row, stride 2: two),
        so a vector costs 4 (stride 1) or 6 NaN-keeping maxes instead of 8."""
        b, g, vec, s, how = self.b, self.g, self.vec, self.stride, self.how
        carried = [entry_alloca(b, vec.ty, f"row{k}") for k in range(3 - s)]
        first = b.neg(g["ph"])  # input row of output row 0's first window row
        for k, slot in enumerate(carried):
            b.store(self._row_max(b.add(first, const64(k)), cols, masks), slot)
        with for_range(b, g["OH"], name="oh") as oh:
            top = b.add(b.mul(oh, const64(s)), first)
            rows = [b.load(slot) for slot in carried]
            rows += [self._row_max(b.add(top, const64(k)), cols, masks)
                     for k in range(3 - s, 3)]
            for slot, row in zip(carried, rows[s:]):
                b.store(row, slot)  # the window rows the next output row shares
            acc = how.merge(how.merge(rows[0], rows[1]), rows[2])
            vec.store(acc, b.gep(self.dst, [b.add(b.mul(oh, g["OW"]), ow0)]), out_mask)

    def _row_max(self, r, cols, masks):
        """The 3-column max of input row r (the blank row when r is in the padding)."""
        b, g, how = self.b, self.g, self.how
        inside = b.icmp_unsigned("<", r, g["H"])
        row = b.select(inside, b.gep(self.src, [b.mul(r, g["W"])]), how.blank)
        return how.merge_all(self._taps(row, cols, masks))

    def _taps(self, row, cols, masks) -> list:
        """The k tap vectors of one input row: lane i of tap kw reads column cols[kw] +
        stride*i (masked lanes: the mode's identity). Stride 2 takes taps kw and kw + 1 from
        the even and odd lanes of the same two loads at cols[kw] (each element's mask is
        that of its own column)."""
        b, vec, s, k = self.b, self.vec, self.stride, self.how.k
        if s == 1:
            return [vec.load(b.gep(row, [cols[kw]]), masks[kw][0], self.how.identity)
                    for kw in range(k)]
        lanes = VecOps.LANES
        pick = [ir.Constant(ir.VectorType(ir.IntType(32), lanes), list(range(h, 2 * lanes, 2)))
                for h in range(2)]
        taps = []
        for kw in range(0, k, 2):
            ptr = b.gep(row, [cols[kw]])
            pair = [vec.load(b.gep(ptr, [const64(lanes * h)]), masks[kw][h], self.how.identity)
                    for h in range(2)]
            taps += [b.shuffle_vector(*pair, pick[h]) for h in range(min(2, k - kw))]
        return taps

    def _row(self, oh, cols, masks):
        b, g, s, how = self.b, self.g, self.stride, self.how
        rows = []
        for kh in range(how.k):
            r = b.sub(b.add(b.mul(oh, const64(s)), const64(kh)), g["ph"])
            inside = b.icmp_unsigned("<", r, g["H"])  # rows in the padding read the blank row
            row = b.select(inside, b.gep(self.src, [b.mul(r, g["W"])]), how.blank)
            rows.append(self._taps(row, cols, masks))
        return how.window(rows)


_VARIANTS = tuple((m, k, s) for m in _MODES for k in _SIZES[m] for s in _STRIDES)


@cache
def _library():
    def build():
        module = ir.Module(name="msc_window_inplace_nchw_f32")
        for mode, k, stride in _VARIANTS:
            _build(module, mode, k, stride)
        return module

    return get_jit().compile_generated(
        build, [_symbol(*v) for v in _VARIANTS],
        (__name__, "msc.backend.kernels.layout", "msc.backend.llvm.loops"), _VARIANTS)


def window_raw(mode: str, k: int, stride: int):
    """The ctypes entry of ``mode`` ("dwconv": k 3 or 5; "max", "avg": 3) for ``stride``."""
    return _library().cfunc(_symbol(mode, k, stride), None, *(ctypes.c_void_p,) * 7)
