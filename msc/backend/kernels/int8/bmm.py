"""int8 batched matmul of two quantized activations: attention's ``Q K^T`` and ``P V`` in QDQ
transformers (both operands dequantized uint8 / int8 tensors, no constant weight).

Per batch (head), the B operand ``[K, N]`` is packed at run time into the VNNI panels of
int8/gemm.py (int8/conv.py's pack, uint8 flipped to int8 by xor 0x80: ``b' = b - off``,
off = 128 for uint8, 0 for int8) and multiplied by A ``[M, K]`` (uint8, read in place) on
the "col" GEMM. Both zero points come out exactly in int32::

    sum_k (a - za)(b - zb) = sum_k a b' + (off - zb) * RA[m] - za * CB[n] + K za zb

with RA / CB the row sums of A / column sums of B: ``comp[n] = za * CB[n] - K za zb`` is the
GEMM's per-column term, ``rcomp[m] = (zb - off) * RA[m]`` its per-row one (QGemmConfig
``rowterm``). The epilogue then dequantizes (``* sa * sb``, scalar or per-column scale, bias,
relu) and requantizes as for the weight GEMMs. Heads run on the threads.

    bmm = QBatchMatmul(("uint8", za), ("uint8", zb), scale=sa * sb, bias=None,
                       out=("u8", sy, zy))
    bmm(a [..., M, K], b [..., K, N], out [..., M, N])
"""

from __future__ import annotations

import ctypes
import threading
from functools import cache

import numpy as np
from llvmlite import ir

from ....errors import ShapeError
from ...llvm.jit import get_jit
from ...llvm.loops import I32, I64, for_range
from ...runtime.chain_split import Parts
from ...runtime.task_wrap import At, ChainEntry, wrapped_tasks
from ...runtime.threads import task_threads
from ..base import Kernel
from ..layout import scratch_offsets
from .conv import ACT_DTYPES, Epilogue, check_operand, check_out, pack_fn
from .gemm import NR, OUTS, QGemmConfig, host_vnni, qgemm_driver
from .tasks import ChainSteps, mac_seconds

__all__ = ["QBatchMatmul"]

_PARALLEL_MACS = 1 << 20  # per call; below this the heads run on one thread
_SUMS = "msc_qbmm_head_sums"


def _build_sums() -> ir.Module:
    """void (a, b, rcomp, comp, m, k, n, b_signed, za, rmul, cadd), one head: rcomp[i] =
    rmul * sum_j a[i, j] (uint8); comp[j] = za * sum_r b[r, j] + cadd (b int8 when b_signed,
    else uint8): the zero-point terms, exact in int32 (numpy's integer sums cost 40% of the
    heads' GEMMs)."""
    module = ir.Module(name=_SUMS)
    i8p, i32p = ir.IntType(8).as_pointer(), I32.as_pointer()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [i8p, i8p, i32p, i32p] + [I64] * 4
                                             + [I32] * 3), name=_SUMS)
    a, bm, ra, cb, m, k, n, signed, za, rmul, cadd = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    slot = b.alloca(I32)
    with for_range(b, m, name="i") as i:
        row = b.gep(a, [b.mul(i, k)])
        b.store(ir.Constant(I32, 0), slot)
        with for_range(b, k, name="j") as j:
            b.store(b.add(b.load(slot), b.zext(b.load(b.gep(row, [j])), I32)), slot)
        b.store(b.mul(b.load(slot), rmul), b.gep(ra, [i]))
    with for_range(b, n, name="c") as c:
        b.store(ir.Constant(I32, 0), b.gep(cb, [c]))
    with b.if_else(b.icmp_signed("!=", signed, I64(0))) as (sext, zext):
        for arm, widen in ((sext, b.sext), (zext, b.zext)):
            with arm, for_range(b, k, name="r") as r:
                line = b.gep(bm, [b.mul(r, n)])
                with for_range(b, n, name="c") as c:
                    at = b.gep(cb, [c])
                    b.store(b.add(b.load(at), widen(b.load(b.gep(line, [c])), I32)), at)
    with for_range(b, n, name="c") as c:
        at = b.gep(cb, [c])
        b.store(b.add(b.mul(b.load(at), za), cadd), at)
    b.ret_void()
    return module


@cache
def _sums():
    lib = get_jit().compile_generated(_build_sums, [_SUMS], (__name__, "msc.backend.llvm.loops"))
    return lib.cfunc(_SUMS, None, *[ctypes.c_void_p] * 4, *[ctypes.c_int64] * 4,
                     *[ctypes.c_int32] * 3)


class _Plan:
    """The task lists of one call shape: per head, the zero-point sums, the pack of B and
    the GEMM (three native lists, one handoff each; a head's result does not depend on the
    thread it ran on). The work arrays are the plan's own, so a plan serves one call at a
    time (``lock``); a concurrent call makes its own."""

    def __init__(self, kernel: QBatchMatmul, batch: int, m: int, k: int, n: int):
        groups, panels = k // 4, -(-n // NR)
        span = panels * groups * NR * 4  # bytes: NR columns of 4 int8 per group
        self.lock = threading.Lock()
        self.rcomp, self.comp = np.empty(batch * m, np.int32), np.empty(batch * n, np.int32)
        raw = np.empty(batch * span + 64, np.int8)
        self.packed = raw[-raw.ctypes.data % 64:][:batch * span]
        size, bsize = OUTS[kernel.cfg.out], np.dtype(kernel.b_np).itemsize
        rc, cc, pk = self.rcomp.ctypes.data, self.comp.ctypes.data, self.packed.ctypes.data
        zz = (kernel.zb - kernel.off, -k * kernel.za * kernel.zb)
        self.sums = wrapped_tasks(kernel.sums, [
            (h * m * k, h * k * n * bsize, rc + 4 * h * m, cc + 4 * h * n, m, k, n,
             int(kernel.off == 0), kernel.za, *zz) for h in range(batch)])
        self.pack = wrapped_tasks(kernel.pack, [
            (h * k * n * bsize, n, pk + h * span, groups, n, kernel.pack_flip)
            for h in range(batch)])
        epi = kernel._epilogue(n).args[1:]
        self.gemm = wrapped_tasks(kernel.driver, [
            (h * m * k, pk + h * span, h * m * n * size, m, n, groups, k, n, cc + 4 * h * n,
             *epi, rc + 4 * h * m) for h in range(batch)])

    def run(self, a: int, b: int, out: int, threads: int) -> None:
        self.sums.launch(1, (a, b), threads)
        self.pack.launch(1, (b,), threads)
        self.gemm.launch(1, (a, 0, out), threads)


class QBatchMatmul(Kernel):
    """``out[..., M, N] = epilogue(DQ(a) @ DQ(b))`` on equal batch dims; see the module doc."""

    inputs = (0, 1)

    def __init__(self, a: tuple, b: tuple, scale, bias, out, relu: bool = False,
                 op: str = "int8.batch_matmul", vnni: bool | None = None,
                 post: tuple | None = None):
        self.op = op
        (a_dtype, za), (b_dtype, zb) = a, b
        self.a_np, self.a_flip = ACT_DTYPES[a_dtype]
        self.b_np, b_flip = ACT_DTYPES[b_dtype]
        self.za = int(za) + (128 if self.a_flip else 0)
        self.zb, self.off = int(zb), 128 if b_flip == 0 else 0  # uint8 B is flipped to int8
        self.pack_flip = -128 if self.off else 0
        self.scale, self.bias, self.out, self.relu, self.post = scale, bias, out, relu, post
        self.epis: dict = {}
        self.plans: dict = {}  # (batch, M, K, N) -> _Plan
        mid = post[0] if post else ""
        kind = out[0] if isinstance(out, tuple) else out
        self.cfg = QGemmConfig("col", kind, host_vnni() if vnni is None else vnni, mid,
                               rowterm=True)
        self.driver = qgemm_driver(self.cfg)
        self.pack, self.sums = pack_fn(), _sums()
        self._steps = ChainSteps()

    def native_signature(self, buffers: list) -> tuple | None:
        """(entry, dims, scratch bytes, splits) for the VM's native chains: per head, the
        zero-point sums, the pack of B and the GEMM of ``__call__`` on one thread, their work
        arrays in the register file's scratch (reused head after head); ``splits``: as
        ``__call__``. An int8 A (flipped by ``__call__`` first) has no step."""
        if len(buffers) != 3 or self.a_flip:
            return None
        (a, a_dtype), (b, b_dtype), (out, out_dtype) = ((tuple(s), np.dtype(d))
                                                        for s, d in buffers)
        if (a_dtype != self.a_np or b_dtype != self.b_np or len(a) < 2 or len(b) != len(a)
                or b[:-2] != a[:-2] or a[-1] != b[-2] or a[-1] % 4):
            return None
        (m, k), n = a[-2:], b[-1]
        if out != a[:-1] + (n,) or out_dtype != self._epilogue(n).dtype or not m * n * k:
            return None
        batch = int(np.prod(a[:-2], dtype=np.int64))
        return self._steps.signature((batch, m, k, n), lambda: self._chain(batch, m, k, n))

    def _chain(self, batch: int, m: int, k: int, n: int) -> tuple:
        nbytes = self._work_bytes(m, k, n)[1]
        splits = batch * m * n * k >= _PARALLEL_MACS
        return (ChainEntry.sequence(self._heads(0, batch, (m, k, n), 0)), nbytes, splits,
                lambda threads: Parts(batch, lambda lo, hi, scratch, offset: self._heads(
                    lo, hi, (m, k, n), offset, scratch), nbytes, mac_seconds(m * k * n)))

    @staticmethod
    def _work_bytes(m: int, k: int, n: int) -> tuple:
        """((row sums, column sums, packed B) offsets, bytes) of a head's work arrays."""
        return scratch_offsets(m, n, -(-n // NR) * (k // 4) * NR)

    def _heads(self, lo: int, hi: int, dims: tuple, offset: int, scratch: int = 3) -> list:
        """The calls of heads ``lo..hi``, their work arrays at byte ``offset`` of the step's
        buffer ``scratch`` (reused head after head)."""
        m, k, n = dims
        groups = k // 4
        rc, cc, pk = (At(scratch, offset + off) for off in self._work_bytes(m, k, n)[0])
        size, bsize = OUTS[self.cfg.out], np.dtype(self.b_np).itemsize
        zz = (self.zb - self.off, -k * self.za * self.zb)
        epi = self._epilogue(n).args[1:]
        calls = []
        for h in range(lo, hi):
            a, b = At(0, h * m * k), At(1, h * k * n * bsize)
            calls += [(self.sums, [a, b, rc, cc, m, k, n, int(self.off == 0), self.za, *zz]),
                      (self.pack, [b, n, pk, groups, n, self.pack_flip]),
                      (self.driver, [a, pk, At(2, h * m * n * size), m, n, groups, k, n, cc,
                                     *epi, rc])]
        return calls

    def _epilogue(self, n: int) -> Epilogue:
        """Scale / bias / output arrays for N columns (made once per N)."""
        if n not in self.epis:
            self.epis[n] = Epilogue(np.zeros((n, 1), np.int8), 0, self.scale, self.bias,
                                     self.out, self.relu, self.post)
        return self.epis[n]

    def __call__(self, a, b, out):
        a = check_operand(a, self.a_np, "lhs", self.op)
        b = check_operand(b, self.b_np, "rhs", self.op)
        if a.ndim < 2 or b.shape[:-2] != a.shape[:-2] or b.ndim != a.ndim or (
                a.shape[-1] != b.shape[-2] or a.shape[-1] % 4):
            raise ShapeError(f"expects [..., M, K] @ [..., K, N] with equal batch dims and K a "
                             f"multiple of 4, got {a.shape} @ {b.shape}", op=self.op,
                             param="rhs")
        m, k = a.shape[-2:]
        n = b.shape[-1]
        epi = self._epilogue(n)
        check_out(out, a.shape[:-1] + (n,), epi.dtype, self.op)
        batch = out.size // max(m * n, 1)
        if not out.size:
            return out
        if self.a_flip:
            a = a.view(np.uint8) ^ np.uint8(0x80)
        key = (batch, m, k, n)
        plan = self.plans.get(key)
        if plan is None:
            if len(self.plans) > 64:  # many sequence lengths in one process: start over
                self.plans.clear()
            plan = self.plans[key] = _Plan(self, batch, m, k, n)
        if not plan.lock.acquire(blocking=False):  # another thread runs this shape now
            plan = _Plan(self, batch, m, k, n)
            plan.lock.acquire()
        try:
            threads = task_threads() if batch * m * n * k >= _PARALLEL_MACS else 1
            plan.run(a.ctypes.data, b.ctypes.data, out.ctypes.data, threads)
        finally:
            plan.lock.release()
        return out
