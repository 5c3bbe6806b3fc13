"""Native "kernel" facts for float32 elementwise ops on same-shape operands, relu fusable.

One flat loop per op (LLVM vectorizes it), writing into the planned output buffer: the
residual ``add`` + ``relu`` of a ResNet block is one pass over memory instead of two numpy
allocations. Broadcasting operands (other than a per-channel constant, which the producing
conv / matmul absorbs) use the numpy fact::

    attach("add", "kernel", BinaryFact("add"))
    kernel(a, b, out)        # out = relu?(a + b)
"""

from __future__ import annotations

import ctypes
import math
import time
from functools import cache

import numpy as np
from llvmlite import ir

from ...errors import ShapeError
from ...relax.op.registry import attach
from ...relax.struct_info import TensorStructInfo
from ..llvm.jit import get_jit
from ..llvm.loops import F32, F32_PTR, I64, for_range
from ..runtime.split_cost import unit_seconds
from ..runtime.task_wrap import Buffer, ChainEntry
from ..runtime.threads import NativeTasks, native_address, split_range, task_threads
from .base import Kernel, KernelFact, Site
from .dense import F32 as F32_DTYPE
from .dense import Address

__all__ = ["BatchNormFact", "BinaryFact", "ConcatFact", "ReluFact", "fold_affine"]

# Elements from which a pass splits across threads: memory-bound, about 0.5-1 ns per element,
# so 32K elements is 15-30 us of work against a ~7 us split (gemm.py's note; shufflenet's adds
# are 53K). Splits fall on whole cache lines.
_PARALLEL_ELEMENTS = 1 << 15
_LINE = 16

# op -> how one element is computed from (builder, a, b)
_BINARY = {
    "add": lambda b, x, y: b.fadd(x, y),
    "subtract": lambda b, x, y: b.fsub(x, y),
    "multiply": lambda b, x, y: b.fmul(x, y),
    "divide": lambda b, x, y: b.fdiv(x, y),
    "maximum": lambda b, x, y: b.select(b.fcmp_unordered(">", x, y), x, y),
    "minimum": lambda b, x, y: b.select(b.fcmp_unordered("<", x, y), x, y),
}


def _symbol(op: str) -> str:
    return f"msc_ew_{op}_f32"


def _build(module: ir.Module, op: str) -> None:
    """void (a, b, out, n, relu): out[i] = relu?(a[i] <op> b[i]); relu keeps NaN."""
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [F32_PTR] * 3 + [I64, I64]),
                     name=_symbol(op))
    a, b_, out, n, relu = fn.args
    for arg in (a, b_, out):
        arg.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    _loops_with_relu(b, relu, n, out, lambda i: _BINARY[op](b, b.load(b.gep(a, [i])),
                                                             b.load(b.gep(b_, [i]))))
    b.ret_void()


def _loops_with_relu(b: ir.IRBuilder, relu, n, out, element) -> None:
    """``out[i] = relu?(element(i))`` for i < n, as two loops (one per relu flag) so neither
    has a branch inside; relu keeps NaN."""
    zero = ir.Constant(F32, 0.0)
    with b.if_else(b.icmp_signed("!=", relu, ir.Constant(I64, 0))) as (with_relu, plain):
        for flag, block in ((True, with_relu), (False, plain)):
            with block, for_range(b, n, name="i") as i:
                value = element(i)
                if flag:
                    value = b.select(b.fcmp_ordered("<", value, zero), zero, value)
                b.store(value, b.gep(out, [i]))


_AFFINE = "msc_ew_affine_f32"


def _build_affine(module: ir.Module) -> None:
    """void (x, out, s, t, outer, C, inner, relu): per-channel x * s[c] + t[c] (then relu) of
    x viewed as [outer, C, inner]."""
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [F32_PTR] * 4 + [I64] * 4),
                     name=_AFFINE)
    x, out, scale, shift, outer, channels, inner, relu = fn.args
    for arg in (x, out, scale, shift):
        arg.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    with for_range(b, outer, name="o") as o, for_range(b, channels, name="c") as c:
        s, t = b.load(b.gep(scale, [c])), b.load(b.gep(shift, [c]))
        base = b.mul(b.add(b.mul(o, channels), c), inner)
        src, dst = b.gep(x, [base]), b.gep(out, [base])
        _loops_with_relu(b, relu, inner, dst,
                         lambda i: b.fadd(b.fmul(b.load(b.gep(src, [i])), s), t))
    b.ret_void()


_AFFINE_LAST = "msc_ew_affine_last_f32"


def _build_affine_last(module: ir.Module) -> None:
    """void (x, out, s, t, outer, C, relu): the channel is the last axis, [outer, C]."""
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [F32_PTR] * 4 + [I64] * 3),
                     name=_AFFINE_LAST)
    x, out, scale, shift, outer, channels, relu = fn.args
    for arg in (x, out, scale, shift):
        arg.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    zero = ir.Constant(F32, 0.0)
    on = b.icmp_signed("!=", relu, ir.Constant(I64, 0))
    with for_range(b, outer, name="o") as o:
        base = b.mul(o, channels)
        src, dst = b.gep(x, [base]), b.gep(out, [base])
        with for_range(b, channels, name="c") as c:
            value = b.fadd(b.fmul(b.load(b.gep(src, [c])), b.load(b.gep(scale, [c]))),
                           b.load(b.gep(shift, [c])))
            clamp = b.and_(on, b.fcmp_ordered("<", value, zero))
            b.store(b.select(clamp, zero, value), b.gep(dst, [c]))
    b.ret_void()


@cache
def _kernels() -> dict:
    def build():
        module = ir.Module(name="msc_elementwise_f32")
        for op in _BINARY:
            _build(module, op)
        _build_affine(module)
        _build_affine_last(module)
        return module

    library = get_jit().compile_generated(
        build, [_symbol(op) for op in _BINARY] + [_AFFINE, _AFFINE_LAST],
        (__name__, "msc.backend.llvm.loops"))
    kernels = {op: library.cfunc(_symbol(op), None, *(ctypes.c_void_p,) * 3, ctypes.c_int64,
                                 ctypes.c_int64) for op in _BINARY}
    kernels["affine"] = library.cfunc(_AFFINE, None, *(ctypes.c_void_p,) * 4,
                                      *(ctypes.c_int64,) * 4)
    kernels["affine_last"] = library.cfunc(_AFFINE_LAST, None, *(ctypes.c_void_p,) * 4,
                                           *(ctypes.c_int64,) * 3)
    return kernels


def _address(cfunc) -> int:
    return ctypes.cast(cfunc, ctypes.c_void_p).value


class _BinaryKernel(Kernel):
    inputs = (0, 1)

    def __init__(self, op: str, relu: bool):
        self.op, self.relu = op, int(relu)
        self.run = _kernels()[op]
        self.addr = (Address(), Address(), Address())

    def __call__(self, a, b, out):
        shape = out.shape
        for name, x in (("x1", a), ("x2", b)):
            if type(x) is not np.ndarray or x.dtype != F32_DTYPE or x.shape != shape:
                raise ShapeError(f"expected float32 {shape}, got {getattr(x, 'dtype', '?')} "
                                 f"{getattr(x, 'shape', type(x).__name__)}", op=self.op,
                                 param=name)
        if out.dtype != F32_DTYPE or not out.flags.c_contiguous:
            raise ShapeError("output buffer must be C-contiguous float32", op=self.op,
                             param="out")
        a = a if a.flags.c_contiguous else np.ascontiguousarray(a)
        b = b if b.flags.c_contiguous else np.ascontiguousarray(b)
        _flat(self.run, self.addr[0](a), self.addr[1](b), self.addr[2](out), out.size,
              self.relu)
        return out

    def native_signature(self, buffers: list) -> tuple | None:
        """(entry address, i64 arguments after the pointers) for these fixed (shape, dtype)
        buffers, which the VM's native chains call with no Python in between
        (runtime/native_run.py KernelStep); None where ``__call__`` would refuse them."""
        shape = buffers[-1][0]
        if len(buffers) != 3 or any(s != shape or d != F32_DTYPE for s, d in buffers):
            return None
        splits = math.prod(shape) >= _PARALLEL_ELEMENTS  # the chain runs it on one thread
        return _address(self.run), (math.prod(shape), self.relu), 0, splits

    def native_tasks(self, buffers: list, parts: int) -> tuple | None:
        """(element ranges as a task list, its bases a, b, out, one-thread seconds) for a
        chain's parallel step (runtime/chain_split.py)."""
        if self.native_signature(buffers) is None:
            return None
        n = math.prod(buffers[-1][0])
        return _flat_tasks(self.run, n, self.relu, parts), (0, 1, 2), flat_seconds(n)


def _flat(run, a: int, b: int, out: int, n: int, relu: int) -> None:
    """``run(a, b, out, n, relu)`` of a flat pass, split into element ranges across threads
    (one native task list, cached per size)."""
    threads = task_threads() if n >= _PARALLEL_ELEMENTS else 1
    if threads == 1:
        run(a, b, out, n, relu)
        return
    _flat_tasks(run, n, relu, threads).launch(1, (a, b, out), threads)


def _flat_tasks(run, n: int, relu: int, parts: int) -> NativeTasks:
    """``run`` over ``parts`` element ranges of ``n``: byte offsets of a, b and out in
    columns 1..3 (the arrays' addresses are the bases), cached per size."""
    key = (id(run), n, relu, parts)
    found = _FLAT.get(key)
    if found is None:
        if len(_FLAT) > 4096:  # sizes of many models in one process: start over
            _FLAT.clear()
        ranges = split_range(n, parts, _LINE)
        found = _FLAT[key] = _tasks(run, [(hi - lo, relu) for lo, hi in ranges], 4,
                                    [(4 * lo,) * 3 for lo, _ in ranges])
    return found


_FLAT: dict = {}  # (entry, size, relu, parts) -> task list (byte offsets of a, b, out)


def flat_seconds(elements: int) -> float:
    """One-thread seconds of a flat pass over ``elements`` floats at this host's measured
    rate (runtime/split_cost.py; measured once, on an add of 256 Ki floats)."""
    def probe() -> tuple:
        n = 1 << 18
        a, out = np.ones(n, np.float32), np.empty(n, np.float32)
        run, best = _kernels()["add"], float("inf")
        for _ in range(7):
            start = time.perf_counter()
            run(a.ctypes.data, a.ctypes.data, out.ctypes.data, n, 0)
            best = min(best, time.perf_counter() - start)
        return best, n

    return unit_seconds("flat_element", elements, probe)


def _tasks(run, tails: list, first: int, offsets: list) -> NativeTasks:
    """A task list calling ``run``: columns 1.. of each task hold its byte offsets (the
    arrays' addresses are added per call, NativeTasks.launch), ``first..`` its tail."""
    tasks = NativeTasks(len(tails))
    tasks.records[:, 0] = native_address(run)
    tasks.records[:, 1:1 + len(offsets[0])] = offsets
    tasks.records[:, first:first + len(tails[0])] = tails
    return tasks


class _AffineKernel(Kernel):
    """out = relu?(x * s[c] + t[c]) along one channel axis."""

    inputs = (0,)

    def __init__(self, op: str, axis: int, scale, shift, relu: bool):
        self.op, self.axis, self.relu = op, axis, int(relu)
        self.scale = np.ascontiguousarray(scale, np.float32)
        self.shift = np.ascontiguousarray(np.broadcast_to(shift, self.scale.shape), np.float32)
        self.kernels = _kernels()
        self._per_channel: dict = {}
        self._calls: dict = {}
        self.addr = (Address(), Address())

    def __call__(self, x, out):
        if type(x) is not np.ndarray or x.dtype != F32_DTYPE or x.shape != out.shape:
            raise ShapeError(f"expected float32 {out.shape}, got {getattr(x, 'shape', x)}",
                             op=self.op, param="data")
        if out.dtype != F32_DTYPE or not out.flags.c_contiguous:
            raise ShapeError("output buffer must be C-contiguous float32", op=self.op,
                             param="out")
        x = x if x.flags.c_contiguous else np.ascontiguousarray(x)
        call = self._calls.get(out.shape)
        if call is None:
            call = self._calls[out.shape] = self._call_for(out.shape)
        run, args, split = call
        threads = task_threads() if out.size >= _PARALLEL_ELEMENTS else 1
        if threads == 1:
            run(self.addr[0](x), self.addr[1](out), *args)
        else:
            split(threads).launch(1, (self.addr[0](x), self.addr[1](out)), threads)
        return out

    def native_signature(self, buffers: list) -> tuple | None:
        """As _BinaryKernel's: the per-channel vectors' addresses are arguments too."""
        if len(buffers) != 2 or any(s != buffers[1][0] or d != F32_DTYPE for s, d in buffers):
            return None
        try:
            run, args, _split = self._call_for(buffers[1][0])
        except ShapeError:
            return None
        return _address(run), args, 0, math.prod(buffers[1][0]) >= _PARALLEL_ELEMENTS

    def native_tasks(self, buffers: list, parts: int) -> tuple | None:
        """(row / plane ranges as a task list, its bases x and out, one-thread seconds) for
        a chain's parallel step (runtime/chain_split.py)."""
        if self.native_signature(buffers) is None:
            return None
        split = self._call_for(buffers[1][0])[2]
        n = math.prod(buffers[1][0])
        return split(max(parts // 2, 1)), (0, 1), flat_seconds(n)

    def _call_for(self, shape: tuple) -> tuple:
        """(native entry, its arguments after the two arrays) for one shape, made once: numpy
        products and the per-channel vectors cost more than the call itself on small maps."""
        channels = shape[self.axis] if shape else 1
        s, t = self._vectors(channels)
        inner = math.prod(shape[self.axis + 1:])
        outer = math.prod(shape) // max(channels * inner, 1)
        sp, tp, relu = s.ctypes.data, t.ctypes.data, self.relu
        if inner == 1:  # [outer, C] rows
            run = self.kernels["affine_last"]
            return run, (sp, tp, outer, channels, relu), _splitter(
                run, outer, lambda r0, r1: ((4 * r0 * channels,) * 2,
                                            (sp, tp, r1 - r0, channels, relu)))
        run = self.kernels["affine"]

        def planes(p0: int, p1: int):  # planes p = o * C + c of [outer, C, inner]
            c0 = p0 % channels
            if p1 - p0 <= channels - c0:  # within one image: a channel range
                return ((4 * p0 * inner,) * 2, (sp + 4 * c0, tp + 4 * c0, 1, p1 - p0, inner,
                                                 relu))
            return None  # ranges are whole images otherwise (see _splitter)
        return run, (sp, tp, outer, channels, inner, relu), _splitter(
            run, outer * channels, planes, channels)

    def _vectors(self, channels: int):
        vectors = self._per_channel.get(channels)
        if vectors is None:
            if self.scale.size not in (1, channels):
                raise ShapeError(f"{self.scale.size} per-channel values for {channels} "
                                 "channels", op=self.op, param="data")
            vectors = self._per_channel[channels] = tuple(
                np.ascontiguousarray(np.broadcast_to(v, (channels,))) for v in
                (self.scale, self.shift))
        return vectors


def _splitter(run, units: int, part, per_image: int = 1):
    """``split(threads) -> task list`` (byte offsets of x and out first) over ranges of ``units``
    rows or planes; ``part(lo, hi)`` gives a range's (offsets, arguments after x and out).
    Planes split by channel ranges within images when there are fewer images than tasks,
    else by whole images (each element is computed as in the whole call)."""
    cache: dict = {}

    def split(threads: int) -> tuple:
        if threads not in cache:
            images = units // per_image
            if images >= 2 * threads or per_image == 1:
                ranges = [(lo * per_image, hi * per_image)
                          for lo, hi in split_range(images, 2 * threads)]
            else:
                ranges = [(i * per_image + lo, i * per_image + hi) for i in range(images)
                          for lo, hi in split_range(per_image, -(-2 * threads // images))]
            parts = [part(lo, hi) or _whole_images(lo, hi, per_image, part)
                     for lo, hi in ranges]
            cache[threads] = _tasks(run, [tail for _, tail in parts], 3,
                                    [offsets for offsets, _ in parts])
        return cache[threads]
    return split


def _whole_images(lo: int, hi: int, per_image: int, part) -> tuple:
    """Whole images [lo, hi) of [outer, C, inner] planes as one affine call."""
    first = part(lo, lo + per_image)  # the first image's call, widened to all of them
    offsets, (sp, tp, _, channels, inner, relu) = first
    return offsets, (sp, tp, (hi - lo) // per_image, channels, inner, relu)


def fold_affine(scale, shift, epilogue: tuple):
    """(scale, shift, relu) after the fused entries, applied in order."""
    scale, shift = scale.astype(np.float64), shift.astype(np.float64)
    for entry in epilogue:
        if entry[0] == "bias":
            shift = shift + entry[1]
        elif entry[0] == "scale":
            scale, shift = scale * entry[1], shift * entry[1]
    scale, shift = np.broadcast_arrays(scale, shift)
    return scale, shift, any(entry[0] == "relu" for entry in epilogue)


def _channel_operand(site: Site):
    """(tensor arg index, constant, channel axis) when one operand is a per-channel float32
    constant broadcasting into the other, which has the output's shape; else None."""
    out = site.out
    if not isinstance(getattr(out, "values", None), tuple) or out.dtype != "float32":
        return None
    for i, j in ((0, 1), (1, 0)):
        x, c = site.tensor(i), site.const(j)
        if x is None or c is None or x.values != out.values or c.dtype != F32_DTYPE:
            continue
        if c.ndim > out.ndim:
            continue
        full = (1,) * (out.ndim - c.ndim) + c.shape
        axes = [k for k, d in enumerate(full) if d != 1]
        if len(axes) <= 1:
            return i, c.reshape(-1), (axes[0] if axes else max(out.ndim - 1, 0))
    return None


# op -> (scale, shift) of ``x <op> c`` (or ``c <op> x`` when the tensor is the second operand)
_AS_AFFINE = {
    "add": lambda c, first: (np.ones_like(c), c),
    "subtract": lambda c, first: (np.ones_like(c), -c) if first else (-np.ones_like(c), c),
    "multiply": lambda c, first: (c, np.zeros_like(c)),
    "divide": lambda c, first: (1.0 / c.astype(np.float64), np.zeros_like(c)) if first and
    np.all(c) else None,
}


class BinaryFact(KernelFact):
    """Same-shape operands (relu fusable), or a per-channel constant (an affine kernel that
    can absorb further bias / scale / relu)."""

    def __init__(self, op: str):
        self.op = op

    def _same(self, site: Site) -> bool:
        a, b, out = site.tensor(0), site.tensor(1), site.out
        return (a is not None and b is not None and hasattr(out, "dtype")
                and a.dtype == b.dtype == out.dtype == "float32" and a.values is not None
                and a.values == b.values == out.values)

    def _affine(self, site: Site):
        found = _channel_operand(site) if self.op in _AS_AFFINE else None
        if found is None:
            return None
        i, c, axis = found
        init = _AS_AFFINE[self.op](c, i == 0)
        return None if init is None else (i, axis, init)

    def match(self, site: Site) -> bool:
        return self._same(site) or self._affine(site) is not None

    def epilogues_for(self, site: Site) -> frozenset:
        if self._same(site):
            return frozenset({"relu"})
        return frozenset({"bias", "scale", "relu"})

    def channel_axis(self, site: Site) -> int | None:
        if self._same(site):
            return max(site.out.ndim - 1, 0)
        return self._affine(site)[1]

    def make(self, site: Site) -> Kernel:
        if self._same(site):
            return _BinaryKernel(self.op, any(e[0] == "relu" for e in site.epilogue))
        i, axis, (scale, shift) = self._affine(site)
        kernel = _AffineKernel(self.op, axis, *fold_affine(scale, shift, site.epilogue))
        kernel.inputs = (i,)
        return kernel


class BatchNormFact(KernelFact):
    """Inference batch_norm with constant statistics, after build has replaced ``bn[0]`` by
    the call (so the site's output is the normalized tensor)."""

    epilogues = frozenset({"bias", "scale", "relu"})

    def match(self, site: Site) -> bool:
        x, out = site.tensor(0), site.out
        stats = [site.const(i) for i in range(1, 5)]
        return (x is not None and x.dtype == "float32" and isinstance(out, type(x))
                and not site.attr("training", True) and x.ndim >= 1
                and all(s is not None and s.ndim == 1 for s in stats))

    def channel_axis(self, site: Site) -> int | None:
        return int(site.attr("axis", 1)) % site.tensor(0).ndim

    def make(self, site: Site) -> Kernel:
        gamma, beta, mean, var = (site.const(i).astype(np.float64) for i in range(1, 5))
        s = 1.0 / np.sqrt(var + float(site.attr("epsilon", 1e-5)))
        s = s * gamma if site.attr("scale", True) else s
        t = -mean * s + (beta if site.attr("center", True) else 0.0)
        return _AffineKernel(site.op, self.channel_axis(site), *fold_affine(s, t, site.epilogue))


class _ReluKernel(Kernel):
    inputs = (0,)

    def __init__(self):
        self.run = _kernels()["maximum"]
        self.zeros = np.zeros(0, np.float32)
        self.addr = (Address(), Address())
        self._chain: dict = {}  # elements -> task_wrap.ChainEntry (native chain steps)

    def __call__(self, x, out):
        if type(x) is not np.ndarray or x.dtype != F32_DTYPE or x.shape != out.shape:
            raise ShapeError(f"expected float32 {out.shape}", op="nn.relu", param="data")
        x = x if x.flags.c_contiguous else np.ascontiguousarray(x)
        xp = self.addr[0](x)
        # relu(x) = max(x, x) with the relu flag: one read stream, NaN kept
        _flat(self.run, xp, xp, self.addr[1](out), out.size, 1)
        return out

    def native_signature(self, buffers: list) -> tuple | None:
        """(entry, dims, scratch bytes, splits) for the VM's native chains: max(x, x) with
        the relu flag on two same-shape float32 buffers (an adapter passes x twice)."""
        if len(buffers) != 2 or any(s != buffers[1][0] or np.dtype(d) != F32_DTYPE
                                    for s, d in buffers):
            return None
        n = math.prod(buffers[1][0])
        if n not in self._chain:
            self._chain[n] = ChainEntry(self.run, (Buffer(0), Buffer(0), Buffer(1), n, 1))
        return (*self._chain[n].signature, 0, n >= _PARALLEL_ELEMENTS)

    def native_tasks(self, buffers: list, parts: int) -> tuple | None:
        """(element ranges of max(x, x) as a task list, its bases x, x, out, one-thread
        seconds) for a chain's parallel step (runtime/chain_split.py)."""
        if self.native_signature(buffers) is None:
            return None
        n = math.prod(buffers[1][0])
        return _flat_tasks(self.run, n, 1, parts), (0, 0, 1), flat_seconds(n)


class ReluFact(KernelFact):
    def match(self, site: Site) -> bool:
        x, out = site.tensor(0), site.out
        return x is not None and x.dtype == "float32" and getattr(out, "dtype", "") == "float32"

    def make(self, site: Site) -> Kernel:
        return _ReluKernel()


class _ConcatKernel(Kernel):
    inputs = (0,)

    def __init__(self, axis: int):
        self.axis = axis

    def __call__(self, arrays, out):
        # numpy checks the shapes itself and never writes outside ``out``
        return np.concatenate(arrays, axis=self.axis, out=out)


class ConcatFact(KernelFact):
    """concat straight into its planned output buffer: numpy, and counted as numpy."""

    path = "numpy"

    def match(self, site: Site) -> bool:
        fields, out = getattr(site.args[0].sinfo, "fields", None), site.out
        return (bool(fields) and isinstance(out, TensorStructInfo) and out.ndim > 0
                and out.dtype not in ("void", "bfloat16") and site.attr("axis", 0) is not None
                and all(isinstance(f, TensorStructInfo) and f.dtype == out.dtype
                        for f in fields))

    def make(self, site: Site) -> Kernel:
        return _ConcatKernel(int(site.attr("axis", 0)) % site.out.ndim)


for _op in _BINARY:
    attach(_op, "kernel", BinaryFact(_op))
attach("concat", "kernel", ConcatFact())
attach("nn.relu", "kernel", ReluFact())
attach("nn.batch_norm", "kernel", BatchNormFact())
