"""Fused attention: ``out = softmax(Q K^T * scale + bias, causal) V`` per head, one native call.

Each head of Q [S, H], K [T, H], V [T, Hv] is read where it lies: every operand is a base
array plus a per-head element offset, a row stride and (K, V) a column stride, so the heads of
a ``[batch, seq, heads * dim]`` projection are read without any transpose or copy, and the
result is written the same way (straight into the ``[batch, seq, heads * dim]`` input of the
output projection). Per head the kernel packs K^T and V into GEMM panels (small: a head of
128 x 64 is 32 KiB), then per block of query rows runs the packed GEMM (kernels/gemm.py, called
by address) for the scores, a row softmax (scale, bias row, causal limit; vector max and sum,
exp inlined from tir/math.py), and the GEMM again for P V. Heads are split across threads
(runtime/threads.py); a head's arithmetic does not depend on the split, so results are
bitwise equal for any thread count.

    layout = AttentionLayout.bsnh(q_shape, k_shape, v_shape, bias_shape)   # or from views
    kernel = AttentionKernel(layout, scale=0.125, causal=None)
    kernel(q, k, v, bias, out)

The ``"kernel"`` fact of ``nn.attention`` / ``nn.attention_bias`` (BSNH, contiguous) is here;
the build's pattern pass (msc/backend/fuse/patterns/attention.py) makes the same kernel for the
decomposed form (matmul, scale, mask add, softmax, matmul) and for heads read through views.
A row whose keys are all masked gives NaN (as softmax of all -inf does), or 0 with
``nan_to_zero`` (the ``where(isnan(p), 0, p)`` that exporters put after the softmax).
"""

from __future__ import annotations

import ctypes
import math
import threading
import time
from dataclasses import dataclass
from functools import cache

import numpy as np
from llvmlite import ir

from ...errors import ShapeError
from ...relax.op.registry import attach
from ..llvm.jit import generated_entry, vector_lanes
from ..llvm.loops import F32, F32_PTR, I32, I64, ceil_div, const64, for_range, imin
from ..lowering.math import exp_f32
from ..runtime.chain_split import Parts
from ..runtime.split_cost import unit_seconds
from ..runtime.task_wrap import At, Buffer, ChainEntry, wrapped_tasks
from ..runtime.threads import task_threads
from .base import Kernel, KernelFact, Site, view_address
from .dense import gemm_driver
from .gemm import GemmConfig
from .rowmath import Vec, row_apply, row_map, splat_f32

__all__ = ["AttentionFact", "AttentionKernel", "AttentionLayout", "Operand"]

_I64_PTR = I64.as_pointer()
_I8_PTR = ir.IntType(8).as_pointer()
_GEMM_TYPE = ir.FunctionType(ir.VoidType(), [F32_PTR] * 4 + [I64] * 5 + [I32])
# p[] slots of the int parameter block, in order
_P = ("s", "t", "h", "hv", "qs", "kts", "khs", "vts", "vhs", "os", "bis", "has_bias",
      "causal", "coff", "nan_zero", "g0", "g1", "mb", "tp", "g", "kp_at", "vp_at", "s_at",
      "z_at")
_ROW_FLOATS = 1 << 16  # score rows per block: block x padded T floats stay near 256 KiB
_CAUSAL_ROWS = 36  # query rows per block with a causal mask: keys past the block are skipped


def _symbol(lanes: int) -> str:
    return f"msc_attention_f32_l{lanes}"


# ---------------------------------------------------------------------------------------------
# IR


class _Builder:
    """Emits one head loop; ``p`` holds the loaded int parameters by name."""

    def __init__(self, b: ir.IRBuilder, fn: ir.Function, vec: Vec, nr: int):
        self.b, self.vec, self.nr = b, vec, nr
        (self.q, self.k, self.v, self.bias, self.out, off, params, self.scale, scratch,
         gemm) = fn.args
        self.p = {name: b.load(b.gep(params, [const64(i)])) for i, name in enumerate(_P)}
        self.off = off
        self.gemm = b.bitcast(gemm, _GEMM_TYPE.as_pointer())
        self.kp, self.vp, self.sbuf, self.zeros = (
            b.gep(scratch, [self.p[name]]) for name in ("kp_at", "vp_at", "s_at", "z_at"))

    def offset(self, table: int, g: ir.Value) -> ir.Value:
        b = self.b
        return b.load(b.gep(self.off, [b.add(b.mul(const64(table), self.p["g"]), g)]))

    def head(self, g: ir.Value) -> None:
        b, p = self.b, self.p
        q, k, v, o = (b.gep(base, [self.offset(i, g)])
                      for i, base in enumerate((self.q, self.k, self.v, self.out)))
        brow0 = b.gep(self.bias, [self.offset(4, g)])
        self.pack_k(k)
        self.pack_v(v)
        causal = b.icmp_signed("!=", p["causal"], const64(0))
        with for_range(b, p["s"], step=p["mb"], name="r0") as r0:
            rows = imin(b, b.sub(p["s"], r0), p["mb"])
            # causal: no query of this block sees a key past its last row's limit
            seen = b.add(b.add(r0, rows), p["coff"])
            seen = imin(b, b.select(b.icmp_signed("<", seen, const64(0)), const64(0), seen),
                        p["t"])
            keys = b.select(causal, seen, p["t"])
            self.call_gemm(b.gep(q, [b.mul(r0, p["qs"])]), self.kp, self.sbuf, rows, keys,
                           p["h"], p["qs"], p["tp"])
            with for_range(b, rows, name="r") as r:
                i = b.add(r0, r)
                self.softmax(b.gep(self.sbuf, [b.mul(r, p["tp"])]),
                             b.gep(brow0, [b.mul(i, p["bis"])]), i, keys)
            self.values(b.gep(o, [b.mul(r0, p["os"])]), rows, keys)

    def values(self, o: ir.Value, rows: ir.Value, keys: ir.Value) -> None:
        """O rows = P @ V over the first ``keys`` keys, one GEMM per panel of V's columns
        (a panel holds all T rows, so a shorter K stays inside it)."""
        b, p, nr = self.b, self.p, const64(self.nr)
        with b.if_then(b.icmp_signed("==", keys, const64(0))):  # every key masked: no GEMM
            fill = b.select(b.icmp_signed("!=", p["nan_zero"], const64(0)),
                            ir.Constant(F32, 0.0), ir.Constant(F32, math.nan))
            with for_range(b, rows, name="fr") as r, for_range(b, p["hv"], name="fc") as c:
                b.store(fill, b.gep(o, [b.add(b.mul(r, p["os"]), c)]))
        with for_range(b, ceil_div(b, p["hv"], self.nr), name="pv") as pn:
            c0 = b.mul(pn, nr)
            vp = b.gep(self.vp, [b.mul(b.mul(pn, p["t"]), nr)])
            self.call_gemm(self.sbuf, vp, b.gep(o, [c0]), rows, imin(b, b.sub(p["hv"], c0), nr),
                           keys, p["tp"], p["os"])

    def call_gemm(self, a, bp, c, m, n, k, lda, ldc) -> None:
        self.b.call(self.gemm, [a, bp, self.zeros, c, m, n, k, lda, ldc, I32(0)])

    def pack_k(self, k: ir.Value) -> None:
        """kp[(t / NR * H + h) * NR + t % NR] = K[t, h]; zero columns up to whole panels.
        Per panel and h: a copy of the panel's keys and a zero fill, contiguous stores."""
        b, p, nr = self.b, self.p, const64(self.nr)
        with for_range(b, ceil_div(b, p["t"], self.nr), name="kp") as pn:
            t0 = b.mul(pn, nr)
            width = imin(b, b.sub(p["t"], t0), nr)
            with for_range(b, p["h"], name="kh") as h:
                dst = b.gep(self.kp, [b.mul(b.add(b.mul(pn, p["h"]), h), nr)])
                col = b.gep(k, [b.add(b.mul(t0, p["kts"]), b.mul(h, p["khs"]))])
                with for_range(b, width, name="kt") as t:
                    b.store(b.load(b.gep(col, [b.mul(t, p["kts"])])), b.gep(dst, [t]))
                with for_range(b, nr, start=width, name="kz") as t:
                    b.store(ir.Constant(F32, 0.0), b.gep(dst, [t]))

    def pack_v(self, v: ir.Value) -> None:
        """vp[(c / NR * T + t) * NR + c % NR] = V[t, c]; zero columns up to whole panels.
        A panel row is a copy of its columns and a zero fill, two loops LLVM vectorizes
        (a head of 8 values in a 64-wide panel: one select per column cost 11% of the
        kernel)."""
        b, p, nr = self.b, self.p, const64(self.nr)
        panels = ceil_div(b, p["hv"], self.nr)
        with for_range(b, panels, name="vp") as pn, for_range(b, p["t"], name="vt") as t:
            dst = b.gep(self.vp, [b.mul(b.add(b.mul(pn, p["t"]), t), nr)])
            c0 = b.mul(pn, nr)
            row = b.gep(v, [b.add(b.mul(t, p["vts"]), b.mul(c0, p["vhs"]))])
            width = imin(b, b.sub(p["hv"], c0), nr)
            with for_range(b, width, name="vc") as c:
                b.store(b.load(b.gep(row, [b.mul(c, p["vhs"])])), b.gep(dst, [c]))
            with for_range(b, nr, start=width, name="vz") as c:
                b.store(ir.Constant(F32, 0.0), b.gep(dst, [c]))

    def softmax(self, row: ir.Value, brow: ir.Value, i: ir.Value, keys: ir.Value) -> None:
        """row[j] = softmax(row * scale + bias)[j] over the keys query ``i`` may see; zeros
        up to ``keys`` (the scores the block computed) after them."""
        b, p = self.b, self.p
        limit = b.add(b.add(i, p["coff"]), const64(1))
        causal = b.icmp_signed("!=", p["causal"], const64(0))
        n = b.select(causal, imin(b, b.select(b.icmp_signed("<", limit, const64(0)),
                                               const64(0), limit), p["t"]), p["t"])
        with_bias = b.icmp_signed("!=", p["has_bias"], const64(0))
        # without a bias the row adds the scratch's zeros (at least T floats): no branch
        brow = b.select(with_bias, brow, self.zeros)
        vec, scale = self.vec, splat_f32(b, self.vec, self.scale)

        def scaled(x, j, mask):
            return b.fadd(b.fmul(x, scale), vec.load(b, b.gep(brow, [j]), mask, 0.0))

        m = row_apply(b, vec, row, n, scaled, "max")
        dead = b.fcmp_unordered("==", m, ir.Constant(F32, -math.inf))
        with b.if_else(dead) as (masked, live):
            with masked:
                nan_zero = b.icmp_signed("!=", p["nan_zero"], const64(0))
                fill = b.select(nan_zero, ir.Constant(F32, 0.0), ir.Constant(F32, math.nan))
                row_map(b, keys, lambda j: b.store(fill, b.gep(row, [j])))
            with live:
                self._normalize(row, n, m, keys)

    def _normalize(self, row, n, m, keys) -> None:
        b, vec = self.b, self.vec
        top = splat_f32(b, vec, m)
        total = row_apply(b, vec, row, n, lambda x, j, mask: exp_f32(b, b.fsub(x, top)), "add")
        inv = splat_f32(b, vec, b.fdiv(ir.Constant(F32, 1.0), total))
        row_apply(b, vec, row, n, lambda x, j, mask: b.fmul(x, inv))
        with for_range(b, keys, start=n, name="zt") as j:
            b.store(ir.Constant(F32, 0.0), b.gep(row, [j]))


def _build_module(lanes: int) -> ir.Module:
    module = ir.Module(name=_symbol(lanes))
    args = [F32_PTR] * 5 + [_I64_PTR, _I64_PTR, F32, F32_PTR, _I8_PTR]
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), args), name=_symbol(lanes))
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    emit = _Builder(b, fn, Vec(module, lanes), GemmConfig(lanes).nr)
    with for_range(b, emit.p["g1"], start=emit.p["g0"], name="g") as g:
        emit.head(g)
    b.ret_void()
    return module


@cache
def _native(lanes: int):
    """(the attention entry, the GEMM driver's address) for ``lanes``-wide vectors."""
    fn = generated_entry(lambda: _build_module(lanes), _symbol(lanes),
                         (__name__, "msc.backend.kernels.rowmath", "msc.backend.lowering.math",
                          "msc.backend.llvm.loops"), (lanes,),
                         *(ctypes.c_void_p,) * 7, ctypes.c_float, ctypes.c_void_p,
                         ctypes.c_void_p)
    driver = gemm_driver(lanes)
    return fn, ctypes.cast(driver, ctypes.c_void_p).value, driver


# ---------------------------------------------------------------------------------------------
# Layout: where each head's rows are


@dataclass(frozen=True, eq=False)
class Operand:
    """One operand as the kernel reads it: ``base[off[g] + i * row + j * col]`` for head g,
    row i, column j, in an array of ``shape`` (the whole base, checked at every call)."""

    shape: tuple
    off: np.ndarray
    row: int
    col: int


@dataclass(frozen=True, eq=False)
class AttentionLayout:
    """Sizes (S queries, T keys, H head dim, Hv value dim, G heads) and the five operands."""

    s: int
    t: int
    h: int
    hv: int
    q: Operand
    k: Operand
    v: Operand
    out: Operand
    bias: Operand | None = None

    @property
    def g(self) -> int:
        return len(self.q.off)

    @staticmethod
    def bsnh(q: tuple, k: tuple, v: tuple, bias: tuple | None = None) -> AttentionLayout:
        """Contiguous [batch, seq, heads, dim] q / k / v (key heads may divide the query
        heads: grouped queries), the output like q, a bias [b|1, n|1, s|1, t]."""
        (b, s, n, h), (_, t, nk, _), hv = q, k, v[3]
        heads = np.arange(b * n)
        bi, ni = heads // n, heads % n
        kv_head = ni // (n // nk)

        def operand(shape, rows, heads_in, head, dim):
            off = bi * rows * heads_in * dim + head * dim
            return Operand(tuple(shape), off.astype(np.int64), heads_in * dim, 1)

        bias_op = None
        if bias is not None:
            bb, bn, bs, _ = bias
            off = (bi * (bb > 1)) * bn * bs * t + (ni * (bn > 1)) * bs * t
            bias_op = Operand(tuple(bias), off.astype(np.int64), t if bs > 1 else 0, 1)
        return AttentionLayout(s, t, h, hv, operand(q, s, n, ni, h), operand(k, t, nk, kv_head, h),
                               operand(v, t, nk, kv_head, hv),
                               operand((b, s, n, hv), s, n, ni, hv), bias_op)


class AttentionKernel(Kernel):
    """The fused attention for one layout: ``kernel(q, k, v[, bias], out)``.

    ``causal``: None, "TopLeft" (key j <= query i) or "BottomRight" (j <= i + T - S).
    A constant bias is passed as ``bias_const`` (then the call takes no bias array).
    """

    def __init__(self, layout: AttentionLayout, scale: float, causal: str | None = None,
                 nan_to_zero: bool = False, bias_const: np.ndarray | None = None,
                 op: str = "attention"):
        self.layout, self.op = layout, op
        self.lanes = vector_lanes()
        self.fn, self.gemm, self._driver = _native(self.lanes)
        self.scale = ctypes.c_float(scale)
        self.bias_const = bias_const
        L = layout
        if bias_const is not None:
            bias_const = np.ascontiguousarray(bias_const, np.float32)
            self.bias_const = bias_const
        nr = GemmConfig(self.lanes).nr
        tp = -(-L.t // self.lanes) * self.lanes
        mb = max(6, min(L.s, _ROW_FLOATS // max(tp, 1) // 6 * 6))
        if causal is not None:  # smaller blocks skip more of the masked keys
            mb = min(mb, _CAUSAL_ROWS)
        sizes = [-(-L.t // nr) * nr * L.h, -(-L.hv // nr) * nr * L.t, mb * tp,
                 -(-max(L.t, L.hv) // nr) * nr]
        ats = np.cumsum([0] + [-(-n // 16) * 16 for n in sizes])
        self.scratch_floats = int(ats[-1])
        coff = {None: 0, "TopLeft": 0, "BottomRight": L.t - L.s}[causal]
        bias = L.bias
        self.params = np.array([
            L.s, L.t, L.h, L.hv, L.q.row, L.k.row, L.k.col, L.v.row, L.v.col, L.out.row,
            bias.row if bias else 0, int(bias is not None), int(causal is not None), coff,
            int(nan_to_zero), 0, L.g, mb, tp, L.g, *ats[:4]], np.int64)
        zero = np.zeros(L.g, np.int64)
        self.offsets = np.ascontiguousarray(np.stack(
            [L.q.off, L.k.off, L.v.off, L.out.off, bias.off if bias else zero]), np.int64)
        self.inputs = (0, 1, 2, 3) if bias is not None and bias_const is None else (0, 1, 2)
        self._local = threading.local()
        self._splits: dict = {}  # parts -> _Split
        self._chain = None  # (task_wrap.ChainEntry, its parameter row), made once
        self._part_rows: list = []  # the parameter rows of native_parts' tasks

    def _scratch(self) -> np.ndarray:
        """This thread's scratch (packed K, packed V, scores, zeros), 64-byte aligned."""
        buf = getattr(self._local, "buf", None)
        if buf is None:
            raw = np.zeros(self.scratch_floats + 16, np.float32)
            buf = raw[(-raw.ctypes.data % 64) // 4:][: self.scratch_floats]
            self._local.buf = buf
        return buf

    def _check(self, name: str, x, operand: Operand) -> int:
        if (type(x) is not np.ndarray or x.dtype != np.float32 or x.shape != operand.shape
                or not x.flags.c_contiguous):
            raise ShapeError(f"expected a C-contiguous float32 array of shape {operand.shape},"
                             f" got {getattr(x, 'dtype', type(x).__name__)} "
                             f"{getattr(x, 'shape', '')}", op=self.op, param=name)
        return view_address(x)

    def __call__(self, q, k, v, *rest):
        L = self.layout
        *bias, out = rest
        ptrs = [self._check(n, x, o) for n, x, o in
                (("query", q, L.q), ("key", k, L.k), ("value", v, L.v), ("out", out, L.out))]
        if bias:
            bias_ptr = self._check("bias", np.ascontiguousarray(bias[0]), L.bias)
        elif self.bias_const is not None:
            bias_ptr = self.bias_const.ctypes.data
        else:
            bias_ptr = ptrs[0]  # never read
        ptrs.insert(3, bias_ptr)
        threads = task_threads()
        parts = min(L.g, threads * 2) if threads > 1 else 1
        if parts <= 1:
            self._run(ptrs, 0, L.g)
            return out
        split = self._splits.get(parts)
        if split is None:
            split = self._splits[parts] = _Split(self, parts)
        if not split.lock.acquire(blocking=False):  # another thread runs this kernel now
            split = _Split(self, parts)
            split.lock.acquire()
        try:
            split.tasks.launch(1, tuple(ptrs), threads)
        finally:
            split.lock.release()
        return out

    def native_signature(self, buffers: list) -> tuple | None:
        """(entry, dims, scratch bytes, splits) for the VM's native chains (runtime/
        native_run.KernelStep): q, k, v (a bias when the call takes one) and out of exactly
        the layout's float32 shapes; every head group in one call, the packed K / V and
        scores in the register file's scratch. ``splits``: several head groups (more than
        one thread splits them; the chain runs them on one)."""
        L = self.layout
        operands = [L.q, L.k, L.v] + ([L.bias] if len(self.inputs) == 4 else []) + [L.out]
        if len(buffers) != len(operands) or any(
                tuple(s) != o.shape or np.dtype(d) != np.float32
                for (s, d), o in zip(buffers, operands)):
            return None
        if self._chain is None:
            params = self.params.copy()
            params[_P.index("g0")], params[_P.index("g1")] = 0, L.g
            bias = (Buffer(3) if len(self.inputs) == 4 else self.bias_const.ctypes.data
                    if self.bias_const is not None else Buffer(0))  # Buffer(0): never read
            scratch, zeros = len(buffers), int(params[_P.index("z_at")])
            # the scratch's last part is read as zeros (the thread-local one is made zeroed);
            # the register file's scratch is shared with other steps: cleared every call
            entry = ChainEntry.sequence([
                (ctypes.memset, (At(scratch, 4 * zeros), 0, 4 * (self.scratch_floats - zeros))),
                (self.fn, (Buffer(0), Buffer(1), Buffer(2), bias, Buffer(len(buffers) - 1),
                           self.offsets.ctypes.data, params.ctypes.data, self.scale.value,
                           At(scratch, 0), self.gemm))])
            self._chain = (entry, params)  # the row points into params: kept alive
        return (*self._chain[0].signature, 4 * self.scratch_floats, L.g > 1)

    def native_parts(self, buffers: list) -> Parts | None:
        """Head groups as the units of a chain's parallel step (runtime/chain_split.py): a
        part runs groups ``lo..hi`` with its own parameter row and its own scratch (its
        zeros cleared first, as the one-thread step clears them)."""
        if self.native_signature(buffers) is None:
            return None
        L = self.layout
        bias = (Buffer(3) if len(self.inputs) == 4 else self.bias_const.ctypes.data
                if self.bias_const is not None else Buffer(0))
        zeros = int(self.params[_P.index("z_at")])

        def calls(lo: int, hi: int, scratch: int, at: int) -> list:
            params = self.params.copy()
            params[_P.index("g0")], params[_P.index("g1")] = lo, hi
            self._part_rows.append(params)  # the task's row points into it: kept alive
            return [(ctypes.memset, (At(scratch, at + 4 * zeros), 0,
                                     4 * (self.scratch_floats - zeros))),
                    (self.fn, (Buffer(0), Buffer(1), Buffer(2), bias, Buffer(len(buffers) - 1),
                               self.offsets.ctypes.data, params.ctypes.data, self.scale.value,
                               At(scratch, at), self.gemm))]

        macs = L.s * L.t * (L.h + L.hv)  # of one head: scores, then the weighted values
        return Parts(L.g, calls, 4 * self.scratch_floats,
                     unit_seconds("attention_mac", macs, self._probe))

    def _probe(self) -> tuple:
        """(seconds, multiply-adds) of this kernel's head groups but one on zeros: the
        fastest call of all groups less the fastest of one (the call's fixed cost, which a
        part pays anyway), on this thread; the host's attention rate (runtime/split_cost)."""
        L = self.layout
        arrays = [np.zeros(o.shape, np.float32) for o in (L.q, L.k, L.v, L.out)]
        ptrs = [a.ctypes.data for a in arrays]
        bias = np.zeros(L.bias.shape, np.float32) if L.bias is not None else None
        ptrs.insert(3, bias.ctypes.data if bias is not None else self.bias_const.ctypes.data
                    if self.bias_const is not None else ptrs[0])
        best = {}
        for groups in (1, L.g) * 5:
            start = time.perf_counter()
            self._run(ptrs, 0, groups)
            best[groups] = min(best.get(groups, math.inf), time.perf_counter() - start)
        heads = max(L.g - 1, 1)
        seconds = best[L.g] - best[1] if L.g > 1 else best[1]
        return max(seconds, 1e-9), heads * L.s * L.t * (L.h + L.hv)

    def _run(self, ptrs: list, g0: int, g1: int) -> None:
        params = self.params.copy()
        params[_P.index("g0")], params[_P.index("g1")] = g0, g1
        self.fn(*ptrs, self.offsets.ctypes.data, params.ctypes.data, self.scale,
                self._scratch().ctypes.data, self.gemm)


class _Split:
    """Head groups of one kernel as a native task list (task_wrap: the entry takes the float
    scale): per part its own parameter row (g0, g1) and scratch; the tensors' addresses come
    as bases. A split serves one call at a time (``lock``)."""

    def __init__(self, kernel: AttentionKernel, parts: int):
        g = kernel.layout.g
        self.lock = threading.Lock()
        self.params = np.repeat(kernel.params[None], parts, axis=0)
        self.params[:, _P.index("g0")] = [g * i // parts for i in range(parts)]
        self.params[:, _P.index("g1")] = [g * (i + 1) // parts for i in range(parts)]
        size = kernel.scratch_floats + (-kernel.scratch_floats % 16)
        raw = np.zeros(parts * size + 16, np.float32)
        self.scratch = raw[(-raw.ctypes.data % 64) // 4:][: parts * size]
        base, rows = self.scratch.ctypes.data, self.params.ctypes.data
        step = self.params.strides[0]
        self.tasks = wrapped_tasks(kernel.fn, [
            (0, 0, 0, 0, 0, kernel.offsets.ctypes.data, rows + i * step, kernel.scale.value,
             base + 4 * size * i, kernel.gemm) for i in range(parts)])


# ---------------------------------------------------------------------------------------------
# The "kernel" fact of nn.attention / nn.attention_bias


def _static(sinfo) -> tuple | None:
    if sinfo is None or sinfo.values is None or not all(d.is_const for d in sinfo.values):
        return None
    return tuple(int(d.value) for d in sinfo.values)


class AttentionFact(KernelFact):
    """BSNH float32 q / k / v with static shapes, an optional bias; no sliding window."""

    def match(self, site: Site) -> bool:
        shapes = [_static(site.tensor(i)) for i in range(len(site.args))]
        tensors = [site.tensor(i) for i in range(len(site.args))]
        return (len(site.args) in (3, 4) and all(s is not None for s in shapes)
                and all(t.dtype == "float32" for t in tensors) and len(shapes[0]) == 4
                and site.attr("window_size") is None
                and site.attr("causal_mask") in (None, "TopLeft", "BottomRight"))

    def make(self, site: Site) -> Kernel:
        shapes = [_static(site.tensor(i)) for i in range(len(site.args))]
        layout = AttentionLayout.bsnh(*shapes[:3], shapes[3] if len(shapes) > 3 else None)
        scale = site.attr("scale")
        scale = 1 / math.sqrt(shapes[0][3]) if scale is None else float(scale)
        bias = site.const(3) if len(shapes) > 3 else None
        return AttentionKernel(layout, scale, site.attr("causal_mask"), bias_const=bias,
                               op=site.op)


for _op in ("nn.attention", "nn.attention_bias"):
    attach(_op, "kernel", AttentionFact())
