"""Native "kernel" facts for matmul, nn.dense, msc.linear(_bias), msc.matmul on the packed GEMM.

The weight (``x2`` of matmul, ``[out, in]`` of dense / linear) is packed ONCE, at build time,
when it is a constant; otherwise it is packed on every call. Activations of any rank are one
``[rows, K]`` GEMM operand. A constant bias (linear_bias, or a fused ``add`` / ``bias_add``) and
a fused relu run in the GEMM's epilogue::

    attach("nn.dense", "kernel", DenseFact(weight_layout="NK"))
    kernel = fact.make(site)               # packs the weight
    kernel(x, out)                         # out[..., N] = x[..., K] @ W (+ bias) (relu)

Only float32 runs here; other dtypes fall back to the op's numpy fact.
"""

from __future__ import annotations

import ctypes
import math
import time
from functools import cache

import numpy as np

from ...errors import ShapeError
from ...relax.op.registry import attach
from ..llvm.jit import get_jit, vector_lanes
from ..runtime.arrays import data_address
from ..runtime.chain_split import PARTS_PER_THREAD, Launches
from ..runtime.split_cost import unit_seconds
from ..runtime.task_wrap import Buffer, ChainEntry
from ..runtime.threads import num_threads
from .base import Kernel, KernelFact, Site
from .gemm import (
    DRIVER_CTYPES,
    GemmConfig,
    PackedB,
    build_gemm_module,
    gemm_splits,
    gemm_tasks,
    pack_b,
    run_gemm,
)

__all__ = ["Address", "DenseFact", "GemmRunner", "gemm_driver", "gemm_seconds"]

F32 = np.dtype(np.float32)


@cache
def gemm_driver(lanes: int):
    """The raw GEMM entry ``(A, Bpacked, bias, C, M, N, K, lda, ldc, relu)`` for ``lanes``."""
    cfg = GemmConfig(lanes)
    library = get_jit().compile_generated(lambda: build_gemm_module(cfg), [cfg.symbol],
                                          ("msc.backend.kernels.gemm", "msc.backend.llvm.loops"),
                                          (repr(cfg),))
    return library.cfunc(cfg.symbol, None, *DRIVER_CTYPES)


class GemmRunner:
    """A packed weight with its epilogue: ``run(a_ptr, m, c_ptr, lda, ldc)``.

    Callers pass checked pointers: float32, C-contiguous rows of length >= K / N.
    """

    def __init__(self, b_kn: np.ndarray | PackedB, bias: np.ndarray | None, relu: bool):
        self.packed = b_kn if isinstance(b_kn, PackedB) else pack_b(
            np.ascontiguousarray(b_kn, np.float32))
        self.k, self.n = self.packed.k, self.packed.n
        bias = np.zeros(1, np.float32) if bias is None else bias
        try:
            self.bias = np.ascontiguousarray(np.broadcast_to(bias.reshape(-1), (self.n,)),
                                             np.float32)
        except ValueError:
            raise ShapeError(f"bias of shape {bias.shape} does not fit {self.n} outputs",
                             op="gemm", param="bias") from None
        self.relu = int(bool(relu))
        self.driver, self.nr = gemm_driver(self.packed.lanes), self.packed.nr
        self.ptrs = (self.packed.data.ctypes.data, self.bias.ctypes.data)

    def run(self, a_ptr: int, m: int, c_ptr: int, lda: int | None = None,
            ldc: int | None = None) -> None:
        if not (m and self.n):
            return
        if self.k and lda is None and ldc is None:  # the common call: no keyword handling
            run_gemm(self.driver, self.nr, a_ptr, *self.ptrs, c_ptr, m, self.n, self.k, self.k,
                     self.n, self.relu)
            return
        if not self.k:  # empty reduction: the epilogue alone
            out = np.ctypeslib.as_array(ctypes.cast(c_ptr, ctypes.POINTER(ctypes.c_float)),
                                        (m, ldc or self.n))[:, : self.n]
            out[...] = np.maximum(self.bias, 0) if self.relu else self.bias
            return
        run_gemm(self.driver, self.nr, a_ptr, *self.ptrs, c_ptr, m, self.n, self.k,
                 lda or self.k, ldc or self.n, self.relu)


def fold_epilogue(bias: np.ndarray | None, epilogue: tuple):
    """(bias, relu, weight scale) of ``op (+ bias)`` followed by the fused entries, in order:
    a bias adds, a scale multiplies the weights and the bias so far, relu comes last."""
    total = None if bias is None else bias.reshape(-1).astype(np.float64)
    scale = None
    for entry in epilogue:
        if entry[0] == "bias":
            total = entry[1].astype(np.float64) if total is None else total + entry[1]
        elif entry[0] == "scale":
            scale = entry[1].astype(np.float64) if scale is None else scale * entry[1]
            total = None if total is None else total * entry[1]
    relu = any(entry[0] == "relu" for entry in epilogue)
    return _f32_or_none(total), relu, _f32_or_none(scale)


def _f32_or_none(v):
    return None if v is None else v.astype(np.float32)


def gemm_seconds(flops: float) -> float:
    """One-thread seconds of ``flops`` of a float32 GEMM at this host's rate
    (runtime/split_cost.py), measured once on a 256 x 256 x 256 GEMM."""
    def probe() -> tuple:
        rng = np.random.default_rng(0)
        runner = GemmRunner(rng.standard_normal((256, 256), np.float32), None, False)
        a = rng.standard_normal((256, 256), np.float32)
        c = np.empty((256, 256), np.float32)
        best = float("inf")
        with num_threads(1):
            for _ in range(6):
                start = time.perf_counter()
                runner.run(a.ctypes.data, 256, c.ctypes.data)
                best = min(best, time.perf_counter() - start)
        return best, 2.0 * 256 ** 3

    return unit_seconds("gemm_flop", flops, probe)


class Address:
    """``arr.ctypes.data`` of a checked array (kernels keep one per operand; the read is
    runtime/arrays.py ``data_address``: ~0.3 us, ``.ctypes.data`` is 1-3 us)."""

    __slots__ = ()

    def __call__(self, arr: np.ndarray) -> int:
        return data_address(arr)


def as_f32(x, param: str, op: str) -> np.ndarray:
    """A float32 C-contiguous view of a runtime argument (copied only when strided)."""
    if type(x) is not np.ndarray or x.dtype != F32:
        raise ShapeError(f"expected a float32 array, got {getattr(x, 'dtype', type(x))}",
                         op=op, param=param)
    return x if x.flags.c_contiguous else np.ascontiguousarray(x)


class _DenseKernel(Kernel):
    def __init__(self, op: str, runner: GemmRunner | None, transpose_b: bool,
                 bias: np.ndarray | None, relu: bool, scale: np.ndarray | None = None):
        self.op, self.runner = op, runner
        self.transpose_b, self.bias, self.relu, self.scale = transpose_b, bias, relu, scale
        self.inputs = (0,) if runner is not None else (0, 1)
        self.x_addr, self.out_addr = Address(), Address()
        self._chain: dict = {}  # rows -> task_wrap.ChainEntry (native chain steps)

    def __call__(self, x, *rest):
        *weight, out = rest
        if type(x) is not np.ndarray or x.dtype != F32 or not x.flags.c_contiguous:
            x = as_f32(x, "data", self.op)
        runner = self.runner or self._pack(weight[0])
        k, n = runner.k, runner.n
        shape = x.shape
        if not shape or shape[-1] != k:
            raise ShapeError(f"expects [..., {k}], got {shape}", op=self.op, param="data")
        want = shape[:-1] + (n,)
        if out.shape != want or out.dtype != F32 or not out.flags.c_contiguous:
            raise ShapeError(f"output buffer {out.shape} {out.dtype}, expected {want}",
                             op=self.op, param="out")
        runner.run(self.x_addr(x), out.size // n if n else 0, self.out_addr(out))
        return out

    def native_signature(self, buffers: list) -> tuple | None:
        """(entry, dims, scratch bytes, splits) for the VM's native chains (runtime/native_run.
        KernelStep): a constant weight and these fixed float32 buffers; ``splits``: a GEMM
        big enough to split across threads (the chain calls it on one thread only)."""
        runner = self.runner
        if runner is None or len(buffers) != 2 or not (runner.k and runner.n):
            return None
        (xs, xd), (os_, od) = buffers
        xs, os_ = tuple(xs), tuple(os_)
        if (np.dtype(xd) != F32 or np.dtype(od) != F32 or not xs or xs[-1] != runner.k
                or os_ != xs[:-1] + (runner.n,)):
            return None
        m, n, k = math.prod(xs[:-1]), runner.n, runner.k
        if not m:
            return None
        found = self._chain.get(m)
        if found is None:
            found = self._chain[m] = ChainEntry(runner.driver, (
                Buffer(0), *runner.ptrs, Buffer(1), m, n, k, k, n, runner.relu))
        return (*found.signature, 0, gemm_splits(m, n, k, runner.nr),
                lambda parts: self._split_form(m, max(2, parts // PARTS_PER_THREAD)))

    def _split_form(self, m: int, threads: int) -> Launches | None:
        """The blocks of ``run_gemm`` at ``threads`` for a chain's parallel step."""
        runner = self.runner
        n, k = runner.n, runner.k
        tasks = gemm_tasks(runner.driver, runner.nr, m, n, k, k, n, runner.relu, threads)
        return None if tasks is None else Launches(
            ((tasks, (Buffer(0), *runner.ptrs, Buffer(1))),), 0,
            gemm_seconds(2.0 * m * -(-n // runner.nr) * runner.nr * k))

    def _pack(self, w) -> GemmRunner:
        w = as_f32(w, "weight", self.op)
        if w.ndim != 2:
            raise ShapeError(f"expects a 2-D weight, got {w.shape}", op=self.op, param="weight")
        b = np.ascontiguousarray(w.T) if self.transpose_b else w
        return GemmRunner(b if self.scale is None else b * self.scale, self.bias, self.relu)


class DenseFact(KernelFact):
    """``weight_layout`` "KN" (matmul's x2) or "NK" (dense / linear weights ``[out, in]``)."""

    epilogues = frozenset({"bias", "scale", "relu"})

    def __init__(self, weight_layout: str, has_bias: bool = False):
        self.transpose_b = weight_layout == "NK"
        self.has_bias = has_bias

    def match(self, site: Site) -> bool:
        x, w, out = site.tensor(0), site.tensor(1), site.out
        if x is None or w is None or getattr(out, "dtype", None) != "float32":
            return False
        if x.dtype != "float32" or w.dtype != "float32" or w.ndim != 2 or x.ndim < 1:
            return False
        if site.attr("out_dtype") not in (None, "", "void", "float32"):
            return False
        if out.values is None and out.ndim < 0:
            return False
        return not self.has_bias or self._bias_ok(site)

    def _bias_ok(self, site: Site) -> bool:
        bias = site.const(2)
        return bias is not None and bias.dtype == F32 and bias.ndim >= 1 and (
            bias.size == bias.shape[-1])

    def channel_axis(self, site: Site) -> int | None:
        return site.out.ndim - 1 if site.out.ndim > 0 else None

    def make(self, site: Site) -> Kernel:
        w = site.const(1)
        bias, relu, scale = fold_epilogue(site.const(2) if self.has_bias else None,
                                          site.epilogue)
        runner = None
        if w is not None:
            b = w.T if self.transpose_b else w
            runner = GemmRunner(b if scale is None else b * scale, bias, relu)
        return _DenseKernel(site.op, runner, self.transpose_b, bias, relu, scale)


_FACTS = {
    "matmul": DenseFact("KN"),
    "msc.matmul": DenseFact("KN"),
    "nn.dense": DenseFact("NK"),
    "msc.linear": DenseFact("NK"),
    "msc.linear_bias": DenseFact("NK", has_bias=True),
}


def _attach_all() -> None:
    for name, fact in _FACTS.items():
        attach(name, "kernel", fact)


_attach_all()
vector_lanes()  # fail early (at import) if the host target cannot be described
