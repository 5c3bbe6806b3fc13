"""Row kernels on bytes: QDQ softmax and layer norm as one native pass per row.

Between the int8 GEMMs of a QDQ transformer, the softmax and the layer norm run in float
between a dequantize and a quantize (onnxruntime's ``quantize_static`` puts a QDQ pair on
every tensor)::

    p = softmax(dequantize(dequantize(s, s1, z1) + mask ->quantize-> s2, z2))   # attention
    y = quantize(layer_norm(dequantize(x, sx, zx), gamma, beta), sy, zy)          # post-norm

As separate ops that is five to ten passes over the tensor, each on one thread. Here a row is
read as bytes, computed in float in a stack buffer that stays in L1, and written as bytes; the
rows split over the threads as one native task list (a row's result does not depend on the
split, so 1 and 2 threads agree bitwise). Dequantize and quantize take the float steps of
their numpy facts (``(double(q) - z) * s`` rounded to float; ``roundeven(x / s)`` in float,
``+ z`` and the clip in double); an elementwise tail after the last quantize (the exporters'
``where(isnan(p), 0, p)`` between two QDQ pairs) is a 256-entry byte table (fuse/qdq/rows.py).
The layer norm row takes the float steps of kernels/norm.py, so it matches the unfused chain.

    kernel = QSoftmax(shape, "uint8", "uint8", params, mask_shape, mid=True, tail=table)
    kernel(xq, mask, out)          # or kernel(xq, out) without a mask
    kernel = QLayerNorm(shape, "uint8", "uint8", params, gamma, beta)   # kernel(x, out)
"""

from __future__ import annotations

import ctypes
import math
from functools import cache

import numpy as np
from llvmlite import ir

from ....errors import ShapeError
from ...llvm.jit import generated_entry, vector_lanes
from ...llvm.loops import F32, I32, I64, const64, entry_alloca, for_range
from ...lowering.math import exp_f32
from ...runtime.chain_split import Launches
from ...runtime.native_pool import serial_runner
from ...runtime.native_pool_ir import BASES
from ...runtime.task_wrap import Buffer
from ...runtime.threads import NativeTasks, native_address, task_threads
from ..base import Kernel
from ..rowmath import Vec, mean_rstd, row_map
from .tasks import ChainSteps, int8_seconds

__all__ = ["PARAMS", "QLayerNorm", "QSoftmax", "quant_params"]

PARALLEL_ELEMENTS = 1 << 14  # a native handoff costs ~5 us: split from ~10 us of work
MAX_ROW = 1 << 15  # floats of the stack row buffer
F64 = ir.DoubleType()  # the parameter row (exact for float32 scales and eps)
I8 = ir.IntType(8)
_I8P = I8.as_pointer()
# params (float64): input dequantize, the mid quantize round trip, the output quantize, eps
PARAMS = ("sx", "zx", "s2", "z2", "lo2", "hi2", "s4", "z4", "lo4", "hi4", "eps", "sy", "zy",
          "s6", "z6", "lo6", "hi6")
_P = {name: i for i, name in enumerate(PARAMS)}
_MASK, _MID = 1, 2  # softmax flags
# the softmax's row max and sum as vector reductions (the lanes' order is fixed by the code,
# so a row's result does not depend on the thread it runs on)
_RED = ("nnan", "nsz", "reassoc")
_RANGES = {"uint8": (0, 255), "int8": (-128, 127)}
_EXP_FLOOR = ir.Constant(F32, -87.0)  # e**-87 = 1.6e-38: the smallest normal floats
_BASES = 3  # a launch's bases: x, the mask / residual (or 0), out


def quant_params(**values) -> np.ndarray:
    """The float64 parameter row of PARAMS (missing ones 0); ``q2`` / ``q4`` / ``q6`` =
    (scale, zero, dtype) set the quantize steps with their clip range (q6: a requantizing
    tail)."""
    row = np.zeros(len(PARAMS), np.float64)
    for key, (scale, zero, dtype) in (("2", values.pop("q2", (0, 0, "uint8"))),
                                      ("4", values.pop("q4")),
                                      ("6", values.pop("q6", (0, 0, "uint8")))):
        lo, hi = _RANGES[dtype]
        row[[_P["s" + key], _P["z" + key], _P["lo" + key], _P["hi" + key]]] = (
            scale, zero, lo, hi)
    for name, value in values.items():
        row[_P[name]] = value
    return row


def _declare(module: ir.Module, name: str, ret, args) -> ir.Function:
    found = module.globals.get(name)
    return found if found is not None else ir.Function(module, ir.FunctionType(ret, args), name)


def _noalias(fn: ir.Function) -> None:
    """The arrays are distinct, so the byte stores cannot change the table the loop reads
    (without it the output loop does not vectorize)."""
    for arg in fn.args:
        if isinstance(arg.type, ir.PointerType):
            arg.add_attribute("noalias")


class _Row:
    """IR helpers for one row function: parameter loads, dequantize / quantize steps.

    Both run in float32 yet equal their facts' double steps bitwise: ``(q - z) * s`` is exact
    in double (9 by 24 bits), so one rounding to float gives float32's product; and
    ``roundeven(x / s) + z`` is exact in float below 2**24, beyond which the clip gives the
    same bound."""

    def __init__(self, b: ir.IRBuilder, params: ir.Value, signed: bool):
        self.b, self.signed = b, signed
        self.p = {name: b.fptrunc(b.load(b.gep(params, [const64(i)])), F32)
                  for i, name in enumerate(PARAMS)}
        self.maxnum = _declare(b.module, "llvm.maxnum.f32", F32, [F32, F32])
        self.round = _declare(b.module, "llvm.roundeven.f32", F32, [F32])
        self.fabs = _declare(b.module, "llvm.fabs.f32", F32, [F32])

    def dequantize(self, byte: ir.Value, which: str = "x") -> ir.Value:
        b = self.b
        x = b.sitofp(byte, F32) if self.signed else b.uitofp(byte, F32)
        return b.fmul(b.fsub(x, self.p["z" + which]), self.p["s" + which])

    def quantize(self, x: ir.Value, key: str, times: ir.Value | None = None,
                 guard: bool = False) -> ir.Value:
        """The clipped quantized value as a float (an integer); ``x * times`` in place of
        ``x / scale`` when given. The clip is two compares (NaN gives the top), not
        minnum / maxnum, whose NaN rules cost a compare and a blend each."""
        b, p = self.b, self.p
        if times is None and guard:
            # |x| under a quarter step rounds to 0: divide 0 instead, as x / s would be a
            # denormal there when s is huge (a mid quantize calibrated on a causal mask's
            # finfo.min: s = 1.3e36), a microcode assist per division (3.5x a softmax row)
            scale = p["s" + key]
            small = b.fcmp_ordered("<", b.call(self.fabs, [x]),
                                   b.fmul(scale, ir.Constant(F32, 0.25)))
            t = b.fdiv(b.select(small, ir.Constant(F32, 0.0), x), scale)
        else:
            t = b.fdiv(x, p["s" + key]) if times is None else b.fmul(x, times)
        q = b.fadd(b.call(self.round, [t]), p["z" + key])
        hi, lo = p["hi" + key], p["lo" + key]
        q = b.select(b.fcmp_ordered("<", q, hi), q, hi)
        return b.select(b.fcmp_ordered(">", q, lo), q, lo)

    def requantize(self, x: ir.Value, guard: bool = False) -> ir.Value:
        """dequantize(quantize(x, s2, z2), s2, z2) (``guard``: see quantize)."""
        b, p = self.b, self.p
        return b.fmul(b.fsub(self.quantize(x, "2", guard=guard), p["z2"]), p["s2"])

    def store(self, q: ir.Value, tail: ir.Value | None, dst: ir.Value,
              requant: bool = False) -> None:
        """dst = tail[byte of q] (q a clipped integer float), the byte without a tail, or
        with ``requant`` quantize(dequantize(q, s4, z4), s6, z6) (a byte lookup is a serial
        chain of inserts in the vectorized loop: 4x slower than this arithmetic)."""
        b, p = self.b, self.p
        if requant:
            q = self.quantize(b.fmul(b.fsub(q, p["z4"]), p["s4"]), "6")
        byte = b.trunc(b.fptosi(q, I32), I8)
        if tail is not None:
            byte = b.load(b.gep(tail, [b.zext(byte, I64)]))
        b.store(byte, dst)


def _softmax_symbol(signed: bool, tail: str, lanes: int) -> str:
    return f"msc_qsoftmax_{'s' if signed else 'u'}8{'_' + tail if tail else ''}_l{lanes}"


def _build_softmax(signed: bool, tail: str, lanes: int) -> ir.Module:
    """void (x, mask, out, moffs, params, tail, r0, r1, n, flags)."""
    name = _softmax_symbol(signed, tail, lanes)
    module = ir.Module(name=name)
    f32p, i64p, f64p = F32.as_pointer(), I64.as_pointer(), F64.as_pointer()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [
        _I8P, f32p, _I8P, i64p, f64p, _I8P, I64, I64, I64, I64]), name=name)
    x, mask, out, moffs, params, table, r0, r1, n, flags = fn.args
    _noalias(fn)
    table = table if tail == "t" else None
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    row = _Row(b, params, signed)
    buf = b.alloca(F32, n, name="buf")
    buf.align = 64
    has_mask = b.icmp_signed("!=", b.and_(flags, const64(_MASK)), const64(0))
    has_mid = b.icmp_signed("!=", b.and_(flags, const64(_MID)), const64(0))
    top, total = entry_alloca(b, F32, "top"), entry_alloca(b, F32, "total")
    with for_range(b, r1, start=r0, name="row") as r:
        base = b.mul(r, n)
        src, dst = b.gep(x, [base]), b.gep(out, [base])
        mrow = b.gep(mask, [b.load(b.gep(moffs, [r]))])
        b.store(ir.Constant(F32, -math.inf), top)
        # one loop per flag combination, so each vectorizes without a branch inside
        for with_mask in (False, True):
            for with_mid in (False, True):
                cond = b.and_(b.icmp_unsigned("==", has_mask, ir.Constant(ir.IntType(1),
                                                                           with_mask)),
                              b.icmp_unsigned("==", has_mid, ir.Constant(ir.IntType(1),
                                                                          with_mid)))
                with b.if_then(cond):
                    def load(j, m=with_mask, mid=with_mid):
                        v = row.dequantize(b.load(b.gep(src, [j])))
                        if m:
                            v = b.fadd(v, b.load(b.gep(mrow, [j])))
                        v = row.requantize(v, guard=True) if mid else v
                        b.store(v, b.gep(buf, [j]))
                        # the row max on the way (nnan: a vector reduction, no NaN fixups)
                        b.store(b.call(row.maxnum, [b.load(top), v], fastmath=_RED), top)
                    row_map(b, n, load)
        shift = b.load(top)
        b.store(ir.Constant(F32, 0.0), total)

        def exp_of(j):
            ptr = b.gep(buf, [j])
            d = b.fsub(b.load(ptr), shift)
            # below -87 e**d is denormal (a microcode assist per multiply: a causal mask's
            # -inf rows ran 3x slower); it is below 2**-125, so it neither moves the sum
            # (>= 1) nor quantizes to anything but the zero point: 0 gives the same bytes
            low = b.fcmp_ordered("<", d, _EXP_FLOOR)  # NaN stays NaN
            e = exp_f32(b, b.select(low, _EXP_FLOOR, d))
            e = b.select(low, ir.Constant(F32, 0.0), e)
            b.store(e, ptr)
            b.store(b.fadd(b.load(total), e, flags=_RED), total)  # the sum on the way

        row_map(b, n, exp_of)
        times = b.fdiv(b.fdiv(ir.Constant(F32, 1.0), b.load(total)), row.p["s4"])
        row_map(b, n, lambda j: row.store(row.quantize(b.load(b.gep(buf, [j])), "4", times),
                                          table, b.gep(dst, [j]), tail == "r"))
    b.ret_void()
    return module


def _norm_symbol(signed: bool, tail: str, residual: bool, lanes: int) -> str:
    return (f"msc_qlayer_norm_{'s' if signed else 'u'}8{'_' + tail if tail else ''}"
            f"{'_res' if residual else ''}_l{lanes}")


def _build_norm(signed: bool, tail: str, residual: bool, lanes: int) -> ir.Module:
    """void (x, y, out, gamma, beta, params, tail, r0, r1, n): kernels/norm.py's float steps,
    on ``dequantize(x)``, or with ``residual`` on ``requantize(dequantize(x) +
    dequantize(y))`` (BERT's post-norm: the residual add's bytes never leave the row)."""
    name = _norm_symbol(signed, tail, residual, lanes)
    module = ir.Module(name=name)
    f32p, f64p = F32.as_pointer(), F64.as_pointer()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [
        _I8P, _I8P, _I8P, f32p, f32p, f64p, _I8P, I64, I64, I64]), name=name)
    x, y, out, gamma, beta, params, table, r0, r1, n = fn.args
    _noalias(fn)
    table = table if tail == "t" else None
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    row, vec = _Row(b, params, signed), Vec(module, lanes)
    buf = b.alloca(F32, n, name="buf")
    buf.align = 64
    eps = row.p["eps"]
    inv_n = b.fdiv(ir.Constant(F32, 1.0), b.sitofp(n, F32))
    with for_range(b, r1, start=r0, name="row") as r:
        base = b.mul(r, n)
        src, dst, other = b.gep(x, [base]), b.gep(out, [base]), b.gep(y, [base])

        def load(j):
            v = row.dequantize(b.load(b.gep(src, [j])))
            if residual:  # the add's quantize and dequantize, as the unfused chain
                v = row.requantize(b.fadd(v, row.dequantize(b.load(b.gep(other, [j])), "y")))
            b.store(v, b.gep(buf, [j]))

        row_map(b, n, load)
        mean, rstd = mean_rstd(b, vec, buf, n, eps, inv_n)

        def affine(j):
            y = b.fmul(b.fsub(b.load(b.gep(buf, [j])), mean), rstd)
            y = b.fadd(b.fmul(y, b.load(b.gep(gamma, [j]))), b.load(b.gep(beta, [j])))
            row.store(row.quantize(y, "4"), table, b.gep(dst, [j]), tail == "r")

        row_map(b, n, affine)
    b.ret_void()
    return module


@cache
def _native(kind: str, signed: bool, tail: str, lanes: int, residual: bool = False):
    """The softmax (6 pointers, 4 integers) or layer norm (7 pointers, 3 integers) entry."""
    if kind == "softmax":
        build, symbol, ptrs = _build_softmax, _softmax_symbol(signed, tail, lanes), 6
        args = (signed, tail, lanes)
    else:
        build, symbol, ptrs = _build_norm, _norm_symbol(signed, tail, residual, lanes), 7
        args = (signed, tail, residual, lanes)
    return generated_entry(lambda: build(*args), symbol,
                           (__name__, "msc.backend.kernels.rowmath", "msc.backend.llvm.loops",
                            "msc.backend.lowering.math"), (kind, *args),
                           *[ctypes.c_void_p] * ptrs, *[ctypes.c_int64] * (10 - ptrs))


def _requantizes(params: np.ndarray, tail: np.ndarray) -> bool:
    """Whether quantize(dequantize(q, s4, z4), s6, z6) in float32 (the kernel's steps, with
    the q6 parameters) gives ``tail`` on every code the q4 clip lets through."""
    p = {name: np.float32(params[i]) for i, name in enumerate(PARAMS)}
    if not p["s6"] or not p["s4"]:
        return False
    q = np.arange(p["lo4"], p["hi4"] + 1, dtype=np.float32)
    with np.errstate(all="ignore"):
        r = np.round(((q - p["z4"]) * p["s4"]) / p["s6"]) + p["z6"]
    r = np.minimum(np.maximum(r, p["lo6"]), p["hi6"])
    return bool(np.array_equal(r.astype(np.int64), tail[q.astype(np.int64).astype(np.uint8)]
                               .astype(np.int64)))


def identity_tail(dtype: str) -> np.ndarray:
    """The byte table that keeps a quantized value."""
    return np.arange(256, dtype=np.uint8).view(np.dtype(dtype))


class _RowKernel(Kernel):
    """Rows of ``n`` bytes in, rows of bytes out; the rows split over the threads."""

    def __init__(self, shape: tuple, in_dtype: str, out_dtype: str, params: np.ndarray,
                 tail: np.ndarray | None, op: str):
        self.shape, self.op = tuple(int(d) for d in shape), op
        self.n = self.shape[-1] if self.shape else 1
        self.rows = math.prod(self.shape) // max(self.n, 1)
        self.in_dtype, self.out_dtype = np.dtype(in_dtype), np.dtype(out_dtype)
        self.params = np.ascontiguousarray(params, np.float64)
        self.has_tail = tail is not None and not np.array_equal(tail, identity_tail(out_dtype))
        self.tail = np.ascontiguousarray(tail if self.has_tail else identity_tail(out_dtype),
                                         self.out_dtype)
        # "" no tail, "r" a requantization the float steps reproduce, "t" a byte table
        self.tail_mode = "" if not self.has_tail else "r" if _requantizes(
            self.params, self.tail) else "t"
        self.tasks: dict = {}  # threads -> NativeTasks
        self._steps = ChainSteps()

    def _row_args(self) -> tuple:
        raise NotImplementedError

    def _chain_bases(self, buffers: list) -> tuple | None:
        """The launch's bases as the step's buffers, or None (no step for these buffers)."""
        raise NotImplementedError

    def native_signature(self, buffers: list) -> tuple | None:
        """(entry, dims, scratch bytes, splits) for the VM's native chains: the one-thread
        rows of ``__call__`` on the step's buffers (the shapes and dtypes it was made for);
        ``splits``: as ``__call__``."""
        *ins, (out_shape, out_dtype) = buffers
        if (not ins or tuple(ins[0][0]) != self.shape or np.dtype(ins[0][1]) != self.in_dtype
                or tuple(out_shape) != self.shape or np.dtype(out_dtype) != self.out_dtype
                or not self.rows):
            return None
        bases = self._chain_bases(buffers)
        if bases is None:
            return None
        return self._steps.signature(bases, lambda: (
            [(self._tasks(1), bases)], 0, self._threads(2) > 1, lambda threads: Launches(
                ((self._tasks(threads), bases),), 0, int8_seconds(
                    f"int8_{type(self).__name__}", self.rows * self.n, self._probe))))

    def _probe(self) -> tuple:
        """(call, elements) of this kernel's one-thread rows on zeros of its shape, repeated
        in one native call to 256 Ki elements (a Python call would cost more than small
        rows): the per-element rate."""
        arrays = [np.zeros(self.shape, self.in_dtype) for _ in self.inputs]
        if getattr(self, "mask_shape", None) is not None:
            arrays[1] = np.zeros(self.mask_shape, np.float32)
        arrays.append(np.empty(self.shape, self.out_dtype))
        specs = [(a.shape, a.dtype) for a in arrays]
        bases = [int(b) if not isinstance(b, Buffer) else arrays[b].ctypes.data
                 for b in self._chain_bases(specs)]
        once = self._tasks(1)
        reps = max(1, (1 << 18) // max(self.rows * self.n, 1))
        many = NativeTasks(once.n * reps)
        many.records[:] = np.tile(once.records, (reps, 1))
        serial = serial_runner()
        args = (many.records.ctypes.data, many.n, 1, *bases, *(0,) * (BASES - len(bases)))
        keep = (many, arrays)  # the records and arrays the native call reads
        return lambda: serial(*args) or keep, self.rows * self.n * reps

    def _threads(self, threads: int) -> int:
        threads = threads if self.rows * self.n >= PARALLEL_ELEMENTS else 1
        return max(1, min(threads, self.rows))

    def _check(self, x, name: str, dtype) -> int:
        if (type(x) is not np.ndarray or x.dtype != dtype or x.shape != self.shape
                or not x.flags.c_contiguous):
            raise ShapeError(f"expected a C-contiguous {dtype} array of shape {self.shape}, got "
                             f"{getattr(x, 'dtype', type(x).__name__)} "
                             f"{getattr(x, 'shape', '')}", op=self.op, param=name)
        return x.ctypes.data

    def _launch(self, bases: tuple) -> None:
        threads = self._threads(task_threads())
        self._tasks(threads).launch(1, bases, threads)

    def _tasks(self, threads: int) -> NativeTasks:
        tasks = self.tasks.get(threads)
        if tasks is None:
            # four row ranges per thread, taken in turn: a thread slowed by another process
            # leaves its share to the others (a task costs an atomic add)
            parts, cols = min(self.rows, 4 * threads if threads > 1 else 1), _BASES
            tasks = NativeTasks(parts)
            tasks.records[:, 0] = native_address(self.fn)
            for k in range(parts):
                lo, hi = self.rows * k // parts, self.rows * (k + 1) // parts
                row = [0] * cols + list(self._row_args(lo, hi))
                tasks.records[k, 1:1 + len(row)] = row
            self.tasks[threads] = tasks
        return tasks


class QSoftmax(_RowKernel):
    """``out = tail[quantize(softmax(requant?(dequantize(x) + mask?)))]`` over the last axis;
    ``mask`` float32, broadcast to ``shape`` (a row of it per row of x: ``mask_shape``)."""

    def __init__(self, shape: tuple, in_dtype: str, out_dtype: str, params: np.ndarray,
                 mask_shape: tuple | None = None, mid: bool = False,
                 tail: np.ndarray | None = None, op: str = "int8.softmax"):
        super().__init__(shape, in_dtype, out_dtype, params, tail, op)
        self.mask_shape = None if mask_shape is None else tuple(int(d) for d in mask_shape)
        self.inputs = (0,) if mask_shape is None else (0, 1)
        self.flags = (_MID if mid else 0) | (0 if mask_shape is None else _MASK)
        self.moffs = np.zeros(max(self.rows, 1), np.int64)
        if mask_shape is not None:
            rows = math.prod(self.mask_shape[:-1]) if len(self.mask_shape) > 1 else 1
            index = np.arange(rows, dtype=np.int64).reshape(self.mask_shape[:-1] or (1,))
            lead = self.shape[:-1]
            index = index.reshape((1,) * (len(lead) - index.ndim) + index.shape)
            self.moffs = np.ascontiguousarray(np.broadcast_to(index, lead).reshape(-1)
                                              * self.mask_shape[-1])
        self.fn = _native("softmax", self.in_dtype == np.int8, self.tail_mode, vector_lanes())

    def _row_args(self, lo: int, hi: int) -> tuple:
        return (self.moffs.ctypes.data, self.params.ctypes.data, self.tail.ctypes.data,
                lo, hi, self.n, self.flags)

    def _chain_bases(self, buffers: list) -> tuple | None:
        if self.mask_shape is None:
            return (Buffer(0), 0, Buffer(1)) if len(buffers) == 2 else None
        if len(buffers) != 3 or tuple(buffers[1][0]) != self.mask_shape or (
                np.dtype(buffers[1][1]) != np.float32):
            return None
        return Buffer(0), Buffer(1), Buffer(2)

    def __call__(self, x, *rest):
        *mask, out = rest
        px = self._check(x, "data", self.in_dtype)
        po = self._check(out, "out", self.out_dtype)
        pm = 0
        if self.mask_shape is not None:
            m = mask[0]
            if (type(m) is not np.ndarray or m.dtype != np.float32 or m.shape != self.mask_shape
                    or not m.flags.c_contiguous):
                raise ShapeError(f"expected a C-contiguous float32 mask of shape "
                                 f"{self.mask_shape}, got {getattr(m, 'shape', m)}",
                                 op=self.op, param="mask")
            pm = m.ctypes.data
        if self.rows:
            self._launch((px, pm, po))
        return out


class QLayerNorm(_RowKernel):
    """``out = tail[quantize(layer_norm(dequantize(x), gamma, beta, eps))]`` over the last
    axis; with ``residual``, ``kernel(x, y, out)`` normalizes ``requantize(dequantize(x) +
    dequantize(y))`` (params sy / zy for y, q2 for the add's quantize)."""

    def __init__(self, shape: tuple, in_dtype: str, out_dtype: str, params: np.ndarray,
                 gamma: np.ndarray, beta: np.ndarray, tail: np.ndarray | None = None,
                 residual: bool = False, op: str = "int8.layer_norm"):
        super().__init__(shape, in_dtype, out_dtype, params, tail, op)
        self.gamma = np.ascontiguousarray(np.broadcast_to(gamma, (self.n,)), np.float32)
        self.beta = np.ascontiguousarray(np.broadcast_to(beta, (self.n,)), np.float32)
        self.residual = residual
        self.inputs = (0, 1) if residual else (0,)
        self.fn = _native("norm", self.in_dtype == np.int8, self.tail_mode, vector_lanes(),
                          residual)

    def _row_args(self, lo: int, hi: int) -> tuple:
        return (self.gamma.ctypes.data, self.beta.ctypes.data, self.params.ctypes.data,
                self.tail.ctypes.data, lo, hi, self.n)

    def _chain_bases(self, buffers: list) -> tuple | None:
        if not self.residual:
            return (Buffer(0), Buffer(0), Buffer(1)) if len(buffers) == 2 else None
        if len(buffers) != 3 or tuple(buffers[1][0]) != self.shape or (
                np.dtype(buffers[1][1]) != self.in_dtype):
            return None
        return Buffer(0), Buffer(1), Buffer(2)

    def __call__(self, x, *rest):
        *other, out = rest
        px = self._check(x, "data", self.in_dtype)
        py = self._check(other[0], "residual", self.in_dtype) if self.residual else px
        po = self._check(out, "out", self.out_dtype)
        if self.rows:
            self._launch((px, py, po))
        return out

