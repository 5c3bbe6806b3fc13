"""Table kernels for int8 data: elementwise chains as 256-entry lookups, and concat.

:class:`QLut`: ``out[..., c, ...] = table[c, x]`` for a uint8 / int8 ``x`` (the byte as
index), per channel along one axis or one table for all. fuse/qdq/lut.py builds the table by
running a whole dequantize -> elementwise ops (with their scalar / per-channel constants,
quantize -> dequantize steps included) -> quantize region on the 256 possible inputs, so the
region costs one pass of byte loads instead of a float pass per op.

A table per channel of the last axis (MobileBERT's NoNorm, RMSNorm's weight, LeViT's batch
norm over tokens: rows of one byte) runs the scalar lookup with the channel's table offset
carried from row to row; VBMI (a row's table in four registers) from rows of 32 bytes.

:class:`QConcat`: ``quantize(concat(dequantize(x_i)))`` on the int8 values: each input is
copied into its slice of the output (``table`` None: equal quantization parameters, an exact
copy) or mapped through its 256-entry requantization table; an input of many runs (a concat
along the last axis at batch 16) as one strided native call.

    lut = QLut(table [C, 256] uint8, axis=1)            # lut(x, out)
    cat = QConcat([None, table1], axis=1, out_dtype=np.uint8)
"""

from __future__ import annotations

import ctypes
from functools import cache

import numpy as np
from llvmlite import ir

from ....errors import ShapeError
from ...llvm.jit import get_jit, host_target
from ...llvm.loops import I32, I64, entry_alloca, for_range
from ...runtime.chain_split import Launches, Parts
from ...runtime.task_wrap import At, Buffer, ChainEntry
from ...runtime.threads import task_threads
from ..base import Kernel
from .tasks import ChainSteps, GatherPlan, Plans, copy_seconds, int8_seconds, range_tasks

__all__ = ["QConcat", "QLut", "byte_run_calls", "strided_runs"]

_PARALLEL = 1 << 16  # elements (~10 us); below this one thread runs the lookup
_VBMI_ROW = 32  # bytes of a table row from which the VBMI lookup pays (4x at 32, even at 16)
_MAX_RUNS = 256  # native calls of one concat chain step at most (else it runs from Python)
_BYTES = {1: ir.IntType(8), 4: ir.IntType(32)}


def _symbol(size: int, vbmi: bool) -> str:
    return f"msc_qlut_{size}{'_vbmi' if vbmi else ''}"


def host_vbmi() -> bool:
    """Whether the host has AVX-512 VBMI (``vpermi2b``: 64 byte lookups in 128-byte tables)."""
    t = host_target()
    return t.has("avx512vbmi") and t.has("avx512bw")


def _build(size: int, vbmi: bool = False) -> ir.Module:
    """void (x, table, out, rows, chans, inner): out[r, i] = table[(r % chans) * 256 +
    x[r, i]] for rows r0..rows (x: bytes; table / out: ``size``-byte elements). ``vbmi``
    (byte tables only): the row's table in four zmm registers, 64 lookups per two
    ``vpermi2b`` and a blend on the index's top bit."""
    if vbmi:
        return _build_vbmi()
    module = ir.Module(name=_symbol(size, False))
    i8p = ir.IntType(8).as_pointer()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [i8p, i8p, i8p] + [I64] * 4),
                     name=_symbol(size, False))
    x, table, out, r0, rows, chans, inner = fn.args
    for ptr in (x, table, out):
        ptr.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    ty = _BYTES[size].as_pointer()
    tab, dst = b.bitcast(table, ty), b.bitcast(out, ty)
    # the row's table offset is carried from row to row (a division per row cost 15-40
    # cycles: more than the lookups of a row of one byte, a channel-last per-channel table)
    offset, end = entry_alloca(b, I64, "offset"), b.mul(chans, ir.Constant(I64, 256))
    b.store(b.mul(b.srem(r0, chans), ir.Constant(I64, 256)), offset)
    with b.if_else(b.icmp_signed("==", inner, ir.Constant(I64, 1))) as (single, rows_of):
        with single, for_range(b, rows, start=r0, name="e") as r:
            _lookup(b, x, tab, dst, b.load(offset), r)
            _next_offset(b, offset, end)
        with rows_of, for_range(b, rows, start=r0, name="r") as r:
            row, base = b.mul(r, inner), b.load(offset)
            with for_range(b, inner, name="i") as i:
                _lookup(b, x, tab, dst, base, b.add(row, i))
            _next_offset(b, offset, end)
    b.ret_void()
    return module


def _lookup(b: ir.IRBuilder, x, tab, dst, base: ir.Value, at: ir.Value) -> None:
    """dst[at] = tab[base + x[at]]."""
    byte = b.zext(b.load(b.gep(x, [at])), I64)
    b.store(b.load(b.gep(tab, [b.add(base, byte)])), b.gep(dst, [at]))


def _next_offset(b: ir.IRBuilder, offset, end: ir.Value) -> None:
    """The next channel's table offset: + 256, back to 0 after the last channel."""
    step = b.add(b.load(offset), ir.Constant(I64, 256))
    b.store(b.select(b.icmp_signed("==", step, end), ir.Constant(I64, 0), step), offset)


def _build_vbmi() -> ir.Module:
    symbol = _symbol(1, True)
    module = ir.Module(name=symbol)
    i8p = ir.IntType(8).as_pointer()
    v64 = ir.VectorType(ir.IntType(8), 64)
    mask_ty = ir.VectorType(ir.IntType(1), 64)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [i8p, i8p, i8p] + [I64] * 4),
                     name=symbol)
    permute = ir.Function(module, ir.FunctionType(v64, [v64] * 3),
                          name="llvm.x86.avx512.vpermi2var.qi.512")
    load = ir.Function(module, ir.FunctionType(v64, [v64.as_pointer(), I32, mask_ty, v64]),
                       name="llvm.masked.load.v64i8.p0")
    store = ir.Function(module, ir.FunctionType(ir.VoidType(), [v64, v64.as_pointer(), I32,
                                                                mask_ty]),
                        name="llvm.masked.store.v64i8.p0")
    x, table, out, r0, rows, chans, inner = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    lanes = ir.Constant(ir.VectorType(I64, 64), list(range(64)))
    zero = ir.Constant(v64, None)
    with for_range(b, rows, start=r0, name="r") as r:
        base = b.gep(table, [b.mul(b.srem(r, chans), ir.Constant(I64, 256))])
        parts = [b.load(b.bitcast(b.gep(base, [ir.Constant(I64, 64 * q)]), v64.as_pointer()),
                        align=1) for q in range(4)]
        row = b.mul(r, inner)
        with for_range(b, inner, step=64, name="i") as i:
            limit = b.insert_element(ir.Constant(ir.VectorType(I64, 64), ir.Undefined),
                                     b.sub(inner, i), ir.Constant(I32, 0))
            limit = b.shuffle_vector(limit, ir.Constant(limit.type, ir.Undefined),
                                     ir.Constant(ir.VectorType(I32, 64), None))
            mask = b.icmp_signed("<", lanes, limit)
            at = b.add(row, i)
            src = b.bitcast(b.gep(x, [at]), v64.as_pointer())
            idx = b.call(load, [src, ir.Constant(I32, 1), mask, zero])
            low = b.call(permute, [parts[0], idx, parts[1]])
            high = b.call(permute, [parts[2], idx, parts[3]])
            value = b.select(b.icmp_signed("<", idx, zero), high, low)  # byte >= 128
            b.call(store, [value, b.bitcast(b.gep(out, [at]), v64.as_pointer()),
                           ir.Constant(I32, 1), mask])
    b.ret_void()
    return module


def _build_last(size: int) -> ir.Module:
    """void (x, table, out, o0, o1, chans, 1): per-channel tables along the last axis,
    out[o, c] = table[c * 256 + x[o, c]] for rows o0..o1 of ``chans`` elements (ConvNeXt's
    channels-last per-channel affine chains): the row kernel would take one row per element,
    a division and (VBMI) four table loads each."""
    symbol = f"msc_qlut_last_{size}"
    module = ir.Module(name=symbol)
    i8p = ir.IntType(8).as_pointer()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [i8p, i8p, i8p] + [I64] * 4),
                     name=symbol)
    x, table, out, o0, o1, chans, _ = fn.args
    for ptr in (x, table, out):
        ptr.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    ty = _BYTES[size].as_pointer()
    tab, dst = b.bitcast(table, ty), b.bitcast(out, ty)
    with for_range(b, o1, start=o0, name="o") as o, for_range(b, chans, name="c") as c:
        at = b.add(b.mul(o, chans), c)
        byte = b.zext(b.load(b.gep(x, [at])), I64)
        b.store(b.load(b.gep(tab, [b.add(b.mul(c, ir.Constant(I64, 256)), byte)])),
                b.gep(dst, [at]))
    b.ret_void()
    return module


_RUNS = "msc_qconcat_runs"


def _build_runs() -> ir.Module:
    """void (src, table, dst, outer, size, src_stride, stride): dst[r * stride + i] =
    src[r * src_stride + i] (``table`` null) or table[src[...]] for r < outer, i < size: one
    input's runs in a concat's output, or a slice's runs of its input (all of them in one
    call, where a call per run cost more than the copy for runs of 8-128 bytes)."""
    module = ir.Module(name=_RUNS)
    i8p = ir.IntType(8).as_pointer()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [i8p, i8p, i8p] + [I64] * 4),
                     name=_RUNS)
    src, table, dst, outer, size, src_stride, stride = fn.args
    for ptr in (src, table, dst):
        ptr.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    copy = b.icmp_unsigned("==", b.ptrtoint(table, I64), ir.Constant(I64, 0))
    with b.if_else(copy) as (plain, mapped):
        for arm, lookup in ((plain, False), (mapped, True)):
            with arm, for_range(b, outer, name="r") as r:
                line, to = b.gep(src, [b.mul(r, src_stride)]), b.gep(dst, [b.mul(r, stride)])
                with for_range(b, size, name="i") as i:
                    byte = b.load(b.gep(line, [i]))
                    if lookup:
                        byte = b.load(b.gep(table, [b.zext(byte, I64)]))
                    b.store(byte, b.gep(to, [i]))
    b.ret_void()
    return module


@cache
def _last_kernel(size: int):
    symbol = f"msc_qlut_last_{size}"
    lib = get_jit().compile_generated(lambda: _build_last(size), [symbol],
                                      (__name__, "msc.backend.llvm.loops"))
    return lib.cfunc(symbol, None, *[ctypes.c_void_p] * 3, *[ctypes.c_int64] * 4)


@cache
def strided_runs():
    """The native ``(src, table, dst, outer, size, src_stride, stride)`` byte-runs copy (a
    lookup through ``table`` when it is not null)."""
    lib = get_jit().compile_generated(_build_runs, [_RUNS], (__name__, "msc.backend.llvm.loops"))
    return lib.cfunc(_RUNS, None, *[ctypes.c_void_p] * 3, *[ctypes.c_int64] * 4)


@cache
def _kernel(size: int, vbmi: bool | None = None):
    vbmi = size == 1 and (host_vbmi() if vbmi is None else vbmi)
    symbol = _symbol(size, vbmi)
    lib = get_jit().compile_generated(lambda: _build(size, vbmi), [symbol],
                                      (__name__, "msc.backend.llvm.loops"))
    return lib.cfunc(symbol, None, *[ctypes.c_void_p] * 3, *[ctypes.c_int64] * 4)


def byte_run_calls(runs) -> list:
    """ChainEntry calls for ``runs`` of ``(src, dst, bytes, table or None)`` (``At`` /
    ``Buffer`` arguments of a chain step): a copy (libc's memmove), or a lookup of each byte
    in a 256-entry byte table (the table must outlive the step)."""
    calls = []
    for src, dst, size, table in runs:
        if table is None:
            calls.append((ctypes.memmove, [dst, src, size]))
        else:
            calls.append((_kernel(1), [src, table.ctypes.data, dst, 0, 1, 1, size]))
    return calls


def _work(size: int, rows: int, inner: int) -> int:
    """A lookup's cost in VBMI values: a VBMI row (one channel's plane) costs about as much
    as 64 more values; a scalar lookup (rows under _VBMI_ROW bytes) 3 values a byte (0.25
    against 0.08 ns on this host). MobileBERT's NoNorm at batch 16 (14k rows of one byte)
    split over two threads from Python, for less than the handoff."""
    return 3 * size if inner < _VBMI_ROW else size + 64 * rows


def _check_in(x, op: str, param: str) -> np.ndarray:
    if type(x) is not np.ndarray or x.dtype not in (np.uint8, np.int8):
        raise ShapeError(f"expected a uint8 / int8 array, got "
                         f"{getattr(x, 'dtype', type(x).__name__)}", op=op, param=param)
    return x if x.flags.c_contiguous else np.ascontiguousarray(x)


class QLut(Kernel):
    """``out = table[channel, x]``; ``table`` [C, 256] (or [256] with ``axis`` None) of the
    output dtype (uint8, int8 or float32)."""

    inputs = (0,)

    def __init__(self, table: np.ndarray, axis: int | None, op: str = "int8.lut",
                 vbmi: bool | None = None):
        self.op, self.axis = op, axis
        self.table = np.ascontiguousarray(table.reshape(-1, 256))
        self.fn = _kernel(self.table.itemsize, vbmi)
        self.scalar_fn = _kernel(self.table.itemsize, False)
        self._plans = Plans()
        self._steps = ChainSteps()

    def native_signature(self, buffers: list) -> tuple | None:
        """(entry, dims, scratch bytes, splits) for the VM's native chains: the one-thread
        lookup of ``__call__`` on the step's buffers; ``splits``: as ``__call__``."""
        if len(buffers) != 2:
            return None
        (shape, dtype), (out_shape, out_dtype) = buffers
        shape = tuple(shape)
        if (np.dtype(dtype) not in (np.uint8, np.int8) or tuple(out_shape) != shape
                or np.dtype(out_dtype) != self.table.dtype):
            return None
        size = int(np.prod(shape, dtype=np.int64))
        if self.axis is None:
            chans, inner = 1, size
        elif self.axis < len(shape):
            chans, inner = shape[self.axis], int(np.prod(shape[self.axis + 1:], dtype=np.int64))
        else:
            return None
        if chans != self.table.shape[0] or not size:
            return None
        rows = size // max(inner, 1)
        return self._steps.signature((rows, chans, inner), lambda: (
            [(self._tasks(rows, chans, inner, 1), (Buffer(0), 0, Buffer(1)))], 0,
            _work(size, rows, inner) >= _PARALLEL, lambda threads: Launches(
                ((self._tasks(rows, chans, inner, threads), (Buffer(0), 0, Buffer(1))),), 0,
                int8_seconds("int8_lut", _work(size, rows, inner), self._probe))))

    def _probe(self) -> tuple:
        """(call, elements) of this kernel's lookup on 256 Ki bytes (the Python call's few us
        a small part): the per-byte rate."""
        x = np.zeros((1, self.table.shape[0], (1 << 18) // self.table.shape[0]), np.uint8)
        out = np.empty(x.shape, self.table.dtype)
        return lambda: self(x, out), x.size

    def __call__(self, x, out):
        x = _check_in(x, self.op, "data")
        chans = 1 if self.axis is None else x.shape[self.axis]
        if (type(out) is not np.ndarray or out.shape != x.shape or out.dtype != self.table.dtype
                or not out.flags.c_contiguous or chans != self.table.shape[0]):
            raise ShapeError(f"{x.shape} -> {getattr(out, 'shape', None)} "
                             f"{getattr(out, 'dtype', None)}, expected {x.shape} "
                             f"{self.table.dtype} with {self.table.shape[0]} channels",
                             op=self.op, param="out")
        inner = 1 if self.axis is None else int(np.prod(x.shape[self.axis + 1:]))
        if self.axis is None:
            inner = x.size
        rows = x.size // max(inner, 1)
        if not x.size:
            return out
        threads = task_threads() if _work(x.size, rows, inner) >= _PARALLEL else 1
        tasks = self._plans.get((rows, chans, inner, threads),
                                lambda: self._tasks(rows, chans, inner, threads))
        tasks.launch(1, (x.ctypes.data, 0, out.ctypes.data), threads)
        return out

    def _tasks(self, rows: int, chans: int, inner: int, threads: int):
        """Row ranges (the entry indexes rows), or element ranges of one table's rows."""
        parts, table = 2 * threads if threads > 1 else 1, self.table.ctypes.data
        if chans == 1 and rows == 1:
            size = self.table.itemsize
            return range_tasks(self.fn, inner, parts, lambda lo, hi: (
                lo, table, lo * size, 0, 1, 1, hi - lo), 64)
        if inner == 1 and chans > 1:  # channels last: rows of chans elements
            return range_tasks(_last_kernel(self.table.itemsize), rows // chans, parts,
                               lambda o0, o1: (0, table, 0, o0, o1, chans, 1))
        # VBMI keeps a row's table in four registers: worth its loads from _VBMI_ROW bytes
        fn = self.fn if inner >= _VBMI_ROW else self.scalar_fn
        return range_tasks(fn, rows, parts, lambda r0, r1: (
            0, table, 0, r0, r1, chans, inner))


class QConcat(Kernel):
    """int8 concat along ``axis``; ``tables[i]`` None copies part i, else maps it through
    the 256-entry table (the byte as index). ``consts``: parts that are constant bytes (a
    ViT's class token, quantized when the plan was made), by position; the kernel's inputs
    are the other parts, in order."""

    def __init__(self, tables: list, axis: int, out_dtype, op: str = "int8.concat",
                 consts: dict | None = None):
        self.op, self.axis, self.dtype = op, axis, np.dtype(out_dtype)
        self.tables = [None if t is None else np.ascontiguousarray(t, self.dtype)
                       for t in tables]
        self.consts = {int(k): np.ascontiguousarray(v, self.dtype)
                       for k, v in (consts or {}).items()}
        self.inputs = tuple(range(len(tables) - len(self.consts)))
        self.fn, self.runs_fn = _kernel(1), strided_runs()
        self._plans = Plans()
        self._steps = ChainSteps()

    def native_signature(self, buffers: list) -> tuple | None:
        """(entry, dims, scratch bytes, splits) for the VM's native chains: per run of
        bytes that an input fills in the output (one per input at batch 1, one per input and
        leading index otherwise, at most ``_MAX_RUNS``), a copy (libc's memmove) or a table
        lookup; ``splits``: as ``__call__``."""
        *ins, (out_shape, out_dtype) = buffers
        out_shape = tuple(out_shape)
        if len(ins) != len(self.inputs) or np.dtype(out_dtype) != self.dtype or not (
                0 <= self.axis < len(out_shape)):
            return None
        rest = out_shape[:self.axis], out_shape[self.axis + 1:]
        widths = []
        for shape, dtype in self._parts(ins, lambda c: (c.shape, c.dtype)):
            shape = tuple(shape)
            if (np.dtype(dtype) not in (np.uint8, np.int8) or len(shape) != len(out_shape)
                    or (shape[:self.axis], shape[self.axis + 1:]) != rest):
                return None
            widths.append(shape[self.axis])
        if sum(widths) != out_shape[self.axis]:
            return None
        outer = int(np.prod(rest[0], dtype=np.int64))
        inner = int(np.prod(rest[1], dtype=np.int64))
        if not outer * inner:
            return None
        key = (outer, inner, tuple(widths))
        if outer * len(ins) > _MAX_RUNS:  # one strided call per input, on one thread
            return self._steps.signature(key, lambda: (
                ChainEntry.sequence(self._strided(outer, inner, widths)), 0, False))
        return self._steps.signature(key, lambda: (
            ChainEntry.sequence(self._runs(outer, inner, widths)), 0,
            outer * inner * sum(widths) >= _PARALLEL,
            lambda threads: self._split_form(outer, inner, widths)))

    def _split_form(self, outer: int, inner: int, widths: list) -> Parts:
        """Each run of bytes a part of its own (a chain's parallel step); a lookup counted as
        four copies."""
        calls = self._runs(outer, inner, widths)
        looks = sum(width for width, table in zip(widths, self.tables) if table is not None)
        seconds = copy_seconds(outer * inner * (sum(widths) + 3 * looks))
        return Parts(len(calls), lambda lo, hi, scratch, offset: calls[lo:hi], 0,
                     seconds / len(calls))

    def _parts(self, inputs: list, of_const) -> list:
        """Every part in order: the next of ``inputs``, or ``of_const(array)`` where a
        constant sits."""
        given = iter(inputs)
        return [of_const(self.consts[k]) if k in self.consts else next(given)
                for k in range(len(self.tables))]

    def _sources(self) -> list:
        """Per part, ``source(offset)``: a chain argument for its bytes from ``offset`` on
        (an input buffer, or a constant's address)."""
        sources, given = [], 0
        for k in range(len(self.tables)):
            if k in self.consts:
                sources.append(lambda at, c=self.consts[k]: c.ctypes.data + at)
            else:
                sources.append(lambda at, i=given: At(i, at))
                given += 1
        return sources

    def _strided(self, outer: int, inner: int, widths: list) -> list:
        """The (cfunc, args) calls writing each part's ``outer`` runs into the output."""
        calls, row, at = [], inner * sum(widths), 0
        out = len(self.inputs)
        for source, width, table in zip(self._sources(), widths, self.tables):
            size = width * inner
            calls.append((self.runs_fn, [source(0), 0 if table is None else table.ctypes.data,
                                         At(out, at), outer, size, size, row]))
            at += size
        return calls

    def _runs(self, outer: int, inner: int, widths: list) -> list:
        """The (cfunc, args) calls copying each part's runs into the output's."""
        runs, row = [], inner * sum(widths)
        out, sources = len(self.inputs), self._sources()
        for i in range(outer):
            at = i * row
            for source, width, table in zip(sources, widths, self.tables):
                size = width * inner
                runs.append((source(i * size), At(out, at), size, table))
                at += size
        return byte_run_calls(runs)

    def __call__(self, *arrays):
        *xs, out = arrays
        if len(xs) != len(self.inputs):
            raise ShapeError(f"expected {len(self.inputs)} inputs, got {len(xs)}", op=self.op)
        xs = self._parts(xs, lambda c: c)
        if out.flags.c_contiguous and all(d == 1 for d in out.shape[:self.axis]):
            self._slices(xs, out)  # batch 1: each input's part of out is one flat run
            return out
        start = 0
        strided = out.flags.c_contiguous and out.dtype == self.dtype
        outer = int(np.prod(out.shape[:self.axis], dtype=np.int64))
        row = int(np.prod(out.shape[self.axis:], dtype=np.int64))
        for i, (x, table) in enumerate(zip(xs, self.tables)):
            x = _check_in(x, self.op, f"input {i}")
            width = x.shape[self.axis]
            view = out[(slice(None),) * self.axis + (slice(start, start + width),)]
            if view.shape != x.shape:
                raise ShapeError(f"input {i} {x.shape} does not fit the output {out.shape}",
                                 op=self.op, param=f"input {i}")
            if strided and x.size:  # every run of this input in one native call
                size = x.size // max(outer, 1)
                self.runs_fn(x.ctypes.data, 0 if table is None else table.ctypes.data,
                             view.ctypes.data, outer, size, size, row)
            elif table is None:
                np.copyto(view, x.view(self.dtype), casting="no")
            else:
                np.take(table, x.view(np.uint8), out=view, mode="clip")
            start += width
        return out

    def _slices(self, xs, out) -> None:
        at, end, srcs = out.ctypes.data, out.ctypes.data + out.nbytes, []
        for i, x in enumerate(xs):
            x = _check_in(x, self.op, f"input {i}")
            if x.shape[:self.axis] + x.shape[self.axis + 1:] != (
                    out.shape[:self.axis] + out.shape[self.axis + 1:]) or at + x.nbytes > end:
                raise ShapeError(f"input {i} {x.shape} does not fit the output {out.shape}",
                                 op=self.op, param=f"input {i}")
            srcs.append(x)
            at += x.nbytes
        threads = task_threads() if out.nbytes >= _PARALLEL else 1
        if threads > 1:  # one task list: byte ranges of every input on the threads
            sizes = tuple(x.nbytes for x in srcs)
            plan = self._plans.get((sizes, threads), lambda: GatherPlan(
                list(sizes), [0 if t is None else t.ctypes.data for t in self.tables], self.fn,
                2 * threads))
            plan.run(out.ctypes.data, [x.ctypes.data for x in srcs], threads)
            return
        at = out.ctypes.data
        for x, table in zip(srcs, self.tables):
            if table is None:
                ctypes.memmove(at, x.ctypes.data, x.nbytes)
            elif x.size:
                self.fn(x.ctypes.data, table.ctypes.data, at, 0, 1, 1, x.size)
            at += x.nbytes
