"""The native "kernel" fact of ``nonzero``: the coordinates of the nonzero elements, shape
(rank, count). The count depends on the data, so no planned buffer can hold the result: the
kernel counts (one vectorized pass), allocates the output, then fills it (a second pass)::

    kernel = NonzeroFact().make(site)
    coords = kernel(x)                # == np.stack(np.nonzero(x)), int64, a fresh array

Elements are tested on their bits, so one kernel per element width serves every dtype: an
integer or bool is nonzero when any bit is set, a float when any bit but the sign is set
(-0.0 is zero, NaN is nonzero, as in numpy).
"""

from __future__ import annotations

import ctypes
from functools import cache

import numpy as np
from llvmlite import ir

from ...errors import ShapeError
from ...relax.op.registry import attach
from ..llvm.jit import get_jit
from ..llvm.loops import I64, entry_alloca, for_range
from ..runtime.arrays import np_dtype
from .base import Kernel, KernelFact, Site

__all__ = ["NonzeroFact", "NonzeroKernel"]

# dtype -> (bits per element, whether the sign bit is ignored)
_ELEMENT = {
    "bool": (8, False), "int8": (8, False), "uint8": (8, False),
    "int16": (16, False), "uint16": (16, False), "float16": (16, True), "bfloat16": (16, True),
    "int32": (32, False), "uint32": (32, False), "float32": (32, True),
    "int64": (64, False), "uint64": (64, False), "float64": (64, True),
}


def _symbols(bits: int, signed_zero: bool) -> tuple[str, str]:
    tag = f"i{bits}{'_f' if signed_zero else ''}"
    return f"msc_nonzero_count_{tag}", f"msc_nonzero_fill_{tag}"


def _is_set(b: ir.IRBuilder, ptr, i, mask: ir.Constant) -> ir.Value:
    return b.icmp_unsigned("!=", b.and_(b.load(b.gep(ptr, [i])), mask), ir.Constant(mask.type, 0))


def _build_count(module: ir.Module, name: str, ty: ir.IntType, mask: ir.Constant) -> None:
    """i64 (x, n): how many of x[0:n] are set."""
    fn = ir.Function(module, ir.FunctionType(I64, [ty.as_pointer(), I64]), name=name)
    x, n = fn.args
    x.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    total = entry_alloca(b, I64, "total")
    b.store(ir.Constant(I64, 0), total)
    with for_range(b, n, name="i") as i:
        b.store(b.add(b.load(total), b.zext(_is_set(b, x, i, mask), I64)), total)
    b.ret(b.load(total))


def _build_fill(module: ir.Module, name: str, ty: ir.IntType, mask: ir.Constant) -> None:
    """void (x, rows, last, ndim, dims, coords, out, count): x viewed as [rows, last].

    Branch-free compaction: every element writes its last coordinate at slot k of the last
    output row and k advances when it is set (out has one slot of slack after the last row,
    and k never passes ``count``). The leading coordinates of row r, unravelled into
    ``coords`` once per row, then fill the slots the row produced."""
    args = [ty.as_pointer(), I64, I64, I64, I64.as_pointer(), I64.as_pointer(),
            I64.as_pointer(), I64]
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), args), name=name)
    x, rows, last, ndim, dims, coords, out, count = fn.args
    for arg in (x, dims, coords, out):
        arg.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    one = ir.Constant(I64, 1)
    k, rem = entry_alloca(b, I64, "k"), entry_alloca(b, I64, "rem")
    b.store(ir.Constant(I64, 0), k)
    lead = b.sub(ndim, one)
    last_row = b.gep(out, [b.mul(lead, count)])
    with for_range(b, rows, name="r") as r:
        b.store(r, rem)
        with for_range(b, lead, name="d") as d:  # coords[lead - 1 - d] = rem % dims[...]
            at = b.sub(b.sub(lead, one), d)
            dim = b.load(b.gep(dims, [at]))
            b.store(b.urem(b.load(rem), dim), b.gep(coords, [at]))
            b.store(b.udiv(b.load(rem), dim), rem)
        first, base = b.load(k), b.mul(r, last)
        with for_range(b, last, name="j") as j:
            kv = b.load(k)
            b.store(j, b.gep(last_row, [kv]))
            hit = b.and_(_is_set(b, x, b.add(base, j), mask), b.icmp_signed("<", kv, count))
            b.store(b.add(kv, b.zext(hit, I64)), k)
        stop = b.load(k)
        with for_range(b, lead, name="c") as c:
            value, row = b.load(b.gep(coords, [c])), b.gep(out, [b.mul(c, count)])
            with for_range(b, stop, start=first, name="t") as t:
                b.store(value, b.gep(row, [t]))
    b.ret_void()


@cache
def _kernels(bits: int, signed_zero: bool):
    """(count, fill) ctypes functions for elements of ``bits`` bits."""
    ty = ir.IntType(bits)
    mask = ir.Constant(ty, (1 << (bits - 1)) - 1 if signed_zero else (1 << bits) - 1)
    count_name, fill_name = _symbols(bits, signed_zero)
    def build():
        module = ir.Module(name=f"msc_nonzero_i{bits}")
        _build_count(module, count_name, ty, mask)
        _build_fill(module, fill_name, ty, mask)
        return module

    library = get_jit().compile_generated(build, [count_name, fill_name],
                                          (__name__, "msc.backend.llvm.loops"), (bits, signed_zero))
    ptr, i64 = ctypes.c_void_p, ctypes.c_int64
    return (library.cfunc(count_name, i64, ptr, i64),
            library.cfunc(fill_name, None, ptr, i64, i64, i64, ptr, ptr, ptr, i64))


class NonzeroKernel(Kernel):
    """``kernel(x) -> coords``: a fresh int64 (x.ndim, count) array (``allocates``: the VM
    gives it no planned output buffer)."""

    inputs = (0,)
    allocates = True

    def __init__(self, dtype: str):
        self.dtype = np_dtype(dtype)
        self.count, self.fill = _kernels(*_ELEMENT[dtype])

    def __call__(self, x) -> np.ndarray:
        if type(x) is not np.ndarray or x.dtype != self.dtype:
            raise ShapeError(f"expected a {self.dtype} array, got "
                             f"{getattr(x, 'dtype', type(x).__name__)}", op="nonzero",
                             param="x")
        if x.ndim == 0:
            raise ShapeError("nonzero of a 0-d tensor", op="nonzero", param="x",
                             hint="reshape it to 1-D first (numpy refuses it too)")
        x = np.ascontiguousarray(x)
        n = int(self.count(x.ctypes.data, x.size))
        flat = np.empty(x.ndim * n + 1, np.int64)  # one slot of slack for the fill pass
        out = flat[:-1].reshape(x.ndim, n)
        if n:
            dims = np.asarray(x.shape, np.int64)
            coords = np.zeros(x.ndim, np.int64)
            last = x.shape[-1]
            self.fill(x.ctypes.data, x.size // last, last, x.ndim, dims.ctypes.data,
                      coords.ctypes.data, flat.ctypes.data, n)
        return out


class NonzeroFact(KernelFact):
    """Every dtype of known element width; the input's rank must not be 0."""

    def match(self, site: Site) -> bool:
        x = site.tensor(0)
        return x is not None and x.dtype in _ELEMENT and x.ndim != 0

    def make(self, site: Site) -> Kernel:
        return NonzeroKernel(site.tensor(0).dtype)


attach("nonzero", "kernel", NonzeroFact())
