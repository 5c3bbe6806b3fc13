"""Layer norm over the last axes as one native pass per row, optionally with the residual add.

``y = (x - mean) / sqrt(var + eps) * gamma + beta`` per row of the normalized (trailing,
contiguous) axes: the row mean and the variance around it are vector reductions
(kernels/rowmath.py, two passes over a row that stays in L1), the affine map is a plain loop
LLVM vectorizes. With ``residual`` the kernel adds a second input first (``layer_norm(a + b)``,
the post-norm block of BERT), writing the sum into the output row and normalizing it there, so
the sum never makes a round trip through memory. Rows are split across threads when there are
enough of them (a native task list), and a row's result does not depend on the split::

    attach("nn.layer_norm", "kernel", LayerNormFact())
    kernel = LayerNormKernel(rows, n, gamma, beta, eps)    # kernel(x, out) / (a, b, out)
"""

from __future__ import annotations

import ctypes
import math
import time
from functools import cache

import numpy as np
from llvmlite import ir

from ...relax.op.registry import attach
from ..llvm.jit import generated_entry, vector_lanes
from ..llvm.loops import F32, F32_PTR, I64, const64, for_range
from ..runtime.chain_split import PARTS_PER_THREAD, Launches
from ..runtime.split_cost import unit_seconds
from ..runtime.task_wrap import Buffer, ChainEntry, wrapped_tasks
from ..runtime.threads import num_threads, task_threads
from .base import Kernel, KernelFact, Site, f32_address
from .rowmath import Vec, mean_rstd, row_map

__all__ = ["LayerNormFact", "LayerNormKernel"]

PARALLEL_ELEMENTS = 1 << 18  # below this a split costs more (waking a worker) than it saves


def _symbol(lanes: int) -> str:
    return f"msc_layer_norm_f32_l{lanes}"


def _build_module(lanes: int) -> ir.Module:
    """void (x, res, gamma, beta, out, r0, r1, n, eps, has_res)."""
    module = ir.Module(name=_symbol(lanes))
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [F32_PTR] * 5 + [I64] * 3 + [
        F32, I64]), name=_symbol(lanes))
    x, res, gamma, beta, out, r0, r1, n, eps, has_res = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    vec = Vec(module, lanes)
    inv_n = b.fdiv(ir.Constant(F32, 1.0), b.sitofp(n, F32))
    with for_range(b, r1, start=r0, name="row") as r:
        base = b.mul(r, n)
        src, dst = b.gep(x, [base]), b.gep(out, [base])
        with b.if_then(b.icmp_signed("!=", has_res, const64(0))):
            other = b.gep(res, [base])
            row_map(b, n, lambda j: b.store(b.fadd(b.load(b.gep(src, [j])),
                                                   b.load(b.gep(other, [j]))), b.gep(dst, [j])))
        row = b.select(b.icmp_signed("!=", has_res, const64(0)), dst, src)
        mean, rstd = mean_rstd(b, vec, row, n, eps, inv_n)

        def affine(j):
            y = b.fmul(b.fsub(b.load(b.gep(row, [j])), mean), rstd)
            y = b.fadd(b.fmul(y, b.load(b.gep(gamma, [j]))), b.load(b.gep(beta, [j])))
            b.store(y, b.gep(dst, [j]))

        row_map(b, n, affine)
    b.ret_void()
    return module


_SOURCES = (__name__, "msc.backend.kernels.rowmath", "msc.backend.llvm.loops")


@cache
def _native(lanes: int):
    return generated_entry(lambda: _build_module(lanes), _symbol(lanes), _SOURCES, (lanes,),
                           *(ctypes.c_void_p,) * 5, *(ctypes.c_int64,) * 3, ctypes.c_float,
                           ctypes.c_int64)


class LayerNormKernel(Kernel):
    """``kernel(x, out)``, or ``kernel(a, b, out)`` with ``residual`` (normalizes a + b), over
    rows of ``n`` floats; arrays of ``shape``, C-contiguous float32."""

    def __init__(self, shape: tuple, n: int, gamma: np.ndarray, beta: np.ndarray,
                 eps: float, residual: bool = False, op: str = "nn.layer_norm"):
        self.shape, self.n, self.op = tuple(shape), n, op
        self.rows = math.prod(shape) // n if n else 0
        self.gamma = np.ascontiguousarray(np.broadcast_to(gamma, (n,)), np.float32)
        self.beta = np.ascontiguousarray(np.broadcast_to(beta, (n,)), np.float32)
        self.eps = ctypes.c_float(eps)
        self.residual = residual
        self.inputs = (0, 1) if residual else (0,)
        self.run = _native(vector_lanes())
        self.tasks: dict = {}  # threads -> native task list
        self._chain = None  # task_wrap.ChainEntry, made on the first native_signature
        self.weights = (self.gamma.ctypes.data, self.beta.ctypes.data)  # 1-5 us each a call

    def _ptr(self, name: str, x) -> int:
        return f32_address(x, self.shape, self.op, name)

    def __call__(self, x, *rest):
        *other, out = rest
        px, po = self._ptr("data", x), self._ptr("out", out)
        pr = self._ptr("residual", other[0]) if self.residual else px
        args = (px, pr, *self.weights, po)
        threads = task_threads() if self.rows * self.n >= PARALLEL_ELEMENTS else 1
        if threads <= 1 or self.rows < 2:
            self.run(*args, 0, self.rows, self.n, self.eps, int(self.residual))
            return out
        self._tasks(threads).launch(1, (px, pr, 0, 0, po), threads)
        return out

    def native_signature(self, buffers: list) -> tuple | None:
        """(entry, dims, scratch bytes, splits) for the VM's native chains (runtime/
        native_run.KernelStep): these fixed buffers; ``splits``: big enough to split across
        threads (the chain runs it on one thread only). None where ``__call__`` decides."""
        want = [(self.shape, np.dtype(np.float32))] * (3 if self.residual else 2)
        if [(tuple(s), np.dtype(d)) for s, d in buffers] != want:
            return None
        x, out = Buffer(0), Buffer(len(buffers) - 1)
        if self._chain is None:
            self._chain = ChainEntry(self.run, (
                x, Buffer(1) if self.residual else x, self.gamma.ctypes.data,
                self.beta.ctypes.data, out, 0, self.rows, self.n, self.eps.value,
                int(self.residual)))
        return (*self._chain.signature, 0, self.rows * self.n >= PARALLEL_ELEMENTS,
                lambda parts: self._split_form(x, Buffer(1) if self.residual else x, out,
                                               max(2, parts // PARTS_PER_THREAD)))

    def _split_form(self, x, residual, out, threads: int) -> Launches | None:
        """The row ranges of ``__call__`` at ``threads`` for a chain's parallel step."""
        if self.rows < 2:
            return None
        return Launches(((self._tasks(threads), (x, residual, 0, 0, out)),), 0,
                        norm_seconds(self.rows * self.n))

    def _tasks(self, threads: int):
        """Two row ranges per thread as a native task list (task_wrap: the entry takes a
        float), kept per thread count; the tensors' addresses come as bases."""
        found = self.tasks.get(threads)
        if found is None:
            rows, parts = self.rows, min(self.rows, 2 * threads)
            g, b = self.gamma.ctypes.data, self.beta.ctypes.data
            found = self.tasks[threads] = wrapped_tasks(self.run, [
                (0, 0, g, b, 0, rows * i // parts, rows * (i + 1) // parts, self.n,
                 self.eps.value, int(self.residual)) for i in range(parts)])
        return found


def norm_seconds(elements: float) -> float:
    """One-thread seconds of a layer norm over ``elements`` floats at this host's rate
    (runtime/split_cost.py), measured once on 512 rows of 512."""
    def probe() -> tuple:
        kernel = LayerNormKernel((512, 512), 512, np.ones(512, np.float32),
                                 np.zeros(512, np.float32), 1e-5)
        x = np.random.default_rng(0).standard_normal((512, 512), np.float32)
        out = np.empty_like(x)
        best = float("inf")
        with num_threads(1):
            for _ in range(6):
                start = time.perf_counter()
                kernel(x, out)
                best = min(best, time.perf_counter() - start)
        return best, x.size

    return unit_seconds("norm_element", elements, probe)


def norm_row(site: Site) -> int | None:
    """Length of the normalized row when the axes are the trailing ones (static shape)."""
    x = site.tensor(0)
    if x is None or x.values is None or not all(d.is_const for d in x.values):
        return None
    shape = tuple(int(d.value) for d in x.values)
    axes = sorted({int(a) % len(shape) for a in site.attr("axes") or ()}) if shape else []
    if not axes or axes != list(range(len(shape) - len(axes), len(shape))):
        return None
    return math.prod(shape[len(shape) - len(axes):])


def affine_const(site: Site, i: int, n: int, flag: str) -> np.ndarray | None:
    """gamma (i=1) or beta (i=2) as [n] floats; ones / zeros when its flag is off."""
    if not site.attr(flag, True):
        return np.full(n, 1.0 if i == 1 else 0.0, np.float32)
    c = site.const(i)
    if c is None or c.dtype != np.float32 or c.size != n:
        return None
    return c.reshape(-1)


class LayerNormFact(KernelFact):
    """float32 layer norm over trailing axes with constant gamma / beta, static shapes."""

    def match(self, site: Site) -> bool:
        x, out = site.tensor(0), site.out
        n = norm_row(site)
        return (n is not None and x.dtype == "float32" and getattr(out, "dtype", "") == "float32"
                and affine_const(site, 1, n, "scale") is not None
                and affine_const(site, 2, n, "center") is not None)

    def make(self, site: Site) -> Kernel:
        n = norm_row(site)
        shape = tuple(int(d.value) for d in site.tensor(0).values)
        return LayerNormKernel(shape, n, affine_const(site, 1, n, "scale"),
                               affine_const(site, 2, n, "center"),
                               float(site.attr("epsilon", 1e-5)))


attach("nn.layer_norm", "kernel", LayerNormFact())
