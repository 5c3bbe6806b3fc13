"""Quantized elementwise add: ``quantize(relu?(dequantize(a) + dequantize(b)))`` in one pass.

The residual adds of QDQ graphs (resnet's 16, two per transformer layer) read two int8 /
uint8 tensors and write one; run as dequantize, add, quantize they cost four float passes
over the tensor. This kernel computes, per element and in float32 exactly as those three ops
do (``(x - z) * s`` is one rounding of an exact product either way)::

    y = (a - za) * sa + (b - zb) * sb;  y = max(y, 0) if relu
    out = clamp(rint(y / sy) + zy)       # or y itself (float32 out)

    add = QAdd("uint8", "uint8", (sa, za), (sb, zb), out=("u8", sy, zy), relu=True)
    add(a, b, out)
"""

from __future__ import annotations

import ctypes
from functools import cache

import numpy as np
from llvmlite import ir

from ....errors import ShapeError
from ...llvm.jit import get_jit
from ...llvm.loops import F32, I32, I64, for_range
from ...runtime.chain_split import Launches
from ...runtime.task_wrap import Buffer
from ...runtime.threads import task_threads
from ..base import Kernel
from .tasks import ChainSteps, Plans, int8_seconds, range_tasks

__all__ = ["QAdd"]

_TYPES = {"uint8": (ir.IntType(8), False, np.uint8), "int8": (ir.IntType(8), True, np.int8),
          "f32": (F32, None, np.float32), "u8": (ir.IntType(8), False, np.uint8),
          "s8": (ir.IntType(8), True, np.int8)}
_RANGES = {"u8": (0.0, 255.0), "s8": (-128.0, 127.0)}
_PARALLEL = 1 << 15  # elements (~5-10 us); below this one thread wins


def _symbol(a: str, b: str, out: str) -> str:
    return f"msc_qadd_{a}_{b}_{out}"


def _build(a_dtype: str, b_dtype: str, out: str) -> ir.Module:
    """void (a, b, out, n, sa, za, sb, zb, sy, zy, relu)."""
    module = ir.Module(name=_symbol(a_dtype, b_dtype, out))
    i8p = ir.IntType(8).as_pointer()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [i8p, i8p, i8p, I64] + [F32] * 6
                                             + [I32]), name=_symbol(a_dtype, b_dtype, out))
    a, b_, o, n, sa, za, sb, zb, sy, zy, relu = fn.args
    for ptr in (a, b_, o):
        ptr.add_attribute("noalias")
    rint = ir.Function(module, ir.FunctionType(F32, [F32]), name="llvm.rint.f32")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    relu_on = b.icmp_signed("!=", relu, I32(0))
    out_ty, out_signed, _ = _TYPES[out]
    out_ptr = b.bitcast(o, out_ty.as_pointer())
    with for_range(b, n, name="i") as i:
        def value(ptr, dtype, s, z):
            x = b.load(b.gep(ptr, [i]))
            x = b.sitofp(x, F32) if _TYPES[dtype][1] else b.uitofp(x, F32)
            return b.fmul(b.fsub(x, z), s)
        y = b.fadd(value(a, a_dtype, sa, za), value(b_, b_dtype, sb, zb))
        zero = ir.Constant(F32, 0.0)
        y = b.select(b.and_(relu_on, b.fcmp_ordered("<", y, zero)), zero, y)
        if out != "f32":
            lo, hi = (ir.Constant(F32, v) for v in _RANGES[out])
            q = b.fadd(b.call(rint, [b.fdiv(y, sy)]), zy)
            q = b.select(b.fcmp_ordered("<", q, lo), lo, q)
            q = b.select(b.fcmp_ordered(">", q, hi), hi, q)
            q = b.select(b.fcmp_unordered("uno", q, q), lo, q)
            y = b.fptosi(q, I32) if out_signed else b.fptoui(q, I32)
            y = b.trunc(y, out_ty)
        b.store(y, b.gep(out_ptr, [i]))
    b.ret_void()
    return module


@cache
def _kernel(a_dtype: str, b_dtype: str, out: str):
    symbol = _symbol(a_dtype, b_dtype, out)
    library = get_jit().compile_generated(lambda: _build(a_dtype, b_dtype, out), [symbol],
                                          (__name__, "msc.backend.llvm.loops"))
    return library.cfunc(symbol, None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                         ctypes.c_int64, *[ctypes.c_float] * 6, ctypes.c_int32)


class QAdd(Kernel):
    """``out = Q(relu?(DQ(a) + DQ(b)))`` on equal shapes; see the module doc."""

    inputs = (0, 1)

    def __init__(self, a_dtype: str, b_dtype: str, qa: tuple, qb: tuple, out, relu: bool,
                 op: str = "int8.add"):
        kind, sy, zy = out if isinstance(out, tuple) else (out, 1.0, 0)
        self.op, self.kind = op, kind
        self.dtypes = (np.dtype(_TYPES[a_dtype][2]), np.dtype(_TYPES[b_dtype][2]))
        self.out_dtype = np.dtype(_TYPES[kind][2])
        self.fn = _kernel(a_dtype, b_dtype, kind)
        self.args = (qa[0], qa[1], qb[0], qb[1], sy, zy, int(bool(relu)))
        self._plans = Plans()
        self._steps = ChainSteps()

    def _tasks(self, n: int, threads: int):
        size = self.out_dtype.itemsize
        return self._plans.get((n, threads), lambda: range_tasks(
            self.fn, n, 2 * threads if threads > 1 else 1,
            lambda lo, hi: (lo, lo, lo * size, hi - lo, *self.args), 64))

    def native_signature(self, buffers: list) -> tuple | None:
        """(entry, dims, scratch bytes, splits) for the VM's native chains: the one-thread
        pass of ``__call__`` on the step's buffers (equal shapes, the dtypes it was made
        for); ``splits``: elements enough to split across threads."""
        if len(buffers) != 3 or len({tuple(s) for s, _ in buffers}) != 1:
            return None
        if tuple(np.dtype(d) for _, d in buffers) != (*self.dtypes, self.out_dtype):
            return None
        n = int(np.prod(buffers[0][0], dtype=np.int64))
        if not n:
            return None
        return self._steps.signature(n, lambda: (
            [(self._tasks(n, 1), (Buffer(0), Buffer(1), Buffer(2)))], 0, n >= _PARALLEL,
            lambda threads: Launches(((self._tasks(n, threads), (Buffer(0), Buffer(1),
                                                                  Buffer(2))),),
                                     0, int8_seconds("int8_add", n, self._probe))))

    def _probe(self) -> tuple:
        """(call, elements) of this kernel on 256 Ki elements (the Python call's few us a
        small part): the per-element rate."""
        a, b = (np.zeros(1 << 18, d) for d in self.dtypes)
        out = np.empty(1 << 18, self.out_dtype)
        return lambda: self(a, b, out), a.size

    def __call__(self, a, b, out):
        for x, dtype, name in ((a, self.dtypes[0], "lhs"), (b, self.dtypes[1], "rhs")):
            if type(x) is not np.ndarray or x.dtype != dtype or not x.flags.c_contiguous:
                raise ShapeError(f"expected a C-contiguous {dtype} array, got "
                                 f"{getattr(x, 'dtype', type(x).__name__)}", op=self.op,
                                 param=name)
        if a.shape != b.shape or type(out) is not np.ndarray or out.shape != a.shape or (
                out.dtype != self.out_dtype or not out.flags.c_contiguous):
            raise ShapeError(f"shapes {a.shape} + {b.shape} -> {getattr(out, 'shape', None)} "
                             f"{getattr(out, 'dtype', None)}, expected equal shapes and "
                             f"{self.out_dtype}", op=self.op, param="out")
        n = a.size
        threads = task_threads() if n >= _PARALLEL else 1
        tasks = self._tasks(n, threads)
        tasks.launch(1, (a.ctypes.data, b.ctypes.data, out.ctypes.data), threads)
        return out
