"""Elementwise expressions of same-shape float32 tensors as one native loop: gelu, tanh, erf...

An expression is a small tree of tuples: ``("in", i)`` (the i-th input), ``("const", c)``
and ``(op, *operands)`` with ops from :data:`EXPR_OPS`. One loop computes it per element with
the inline float math of tir/math.py (exp, erf, tanh as polynomials, so LLVM vectorizes the
loop), and writes the output once: ``nn.gelu`` is ``("gelu", ("in", 0))``, and the build's
pattern pass (msc/backend/fuse/patterns/) folds a chain such as GPT-2's decomposed tanh-gelu
(power, multiply, add, tanh, ...) into one expression. Compiled code is cached per expression.
Tensors split across threads (element ranges: every element is computed the same way) when
the expression's estimated time pays for it: elements x its instructions (:func:`expr_seconds`,
at this host's measured rate), so a gelu of 64 Ki floats splits where an add of as many does
not; chains split them from inside (``native_tasks``, runtime/chain_split.py)::

    kernel = ExprKernel(("mul", ("in", 0), ("sigmoid", ("in", 0))), shape)   # silu
    kernel(x, out)
"""

from __future__ import annotations

import ctypes
import hashlib
import math
import time
from functools import cache

import numpy as np
from llvmlite import ir

from ...errors import BuildError
from ...relax.op.registry import attach, ops_in, ops_with
from ..llvm.jit import get_jit, vector_lanes
from ..llvm.loops import F32_PTR, I64, const64, for_range
from ..lowering import math as fm
from ..runtime.split_cost import unit_seconds, worth_splitting
from ..runtime.task_wrap import wrapped_tasks
from ..runtime.threads import BASES, NativeTasks, native_address, num_threads, task_threads
from .base import Kernel, KernelFact, Site, f32_address
from .elementwise import flat_seconds
from .rowmath import Vec

__all__ = ["ACTIVATION_EXPRS", "EXPR_OPS", "UNARY_EXPR", "VECTOR_UNARY", "ExprKernel",
           "UnaryExprFact", "evaluate", "expr_seconds", "inplace_2d_address"]

_UNROLL = 4  # vectors an iteration of the expression loop: cheap expressions stream memory
_PROBE_EXPR = ("nn.gelu", ("in", 0))  # the rate's probe: the corpus's most common activation
_SQRT1_2 = 1 / math.sqrt(2)
_GELU_TANH_C = math.sqrt(2 / math.pi)


def _gelu(b, x):
    erf = fm.erf_f32(b, b.fmul(x, fm.like(x, _SQRT1_2)))
    return b.fmul(b.fmul(x, fm.like(x, 0.5)), b.fadd(erf, fm.like(x, 1.0)))


def _gelu_tanh(b, x):
    cube = b.fmul(b.fmul(x, x), x)
    inner = b.fmul(b.fadd(x, b.fmul(cube, fm.like(x, 0.044715))), fm.like(x, _GELU_TANH_C))
    return b.fmul(b.fmul(x, fm.like(x, 0.5)), b.fadd(fm.tanh_f32(b, inner), fm.like(x, 1.0)))


def _pow(b, x, y):
    """x ** y for a constant y (the only form expressions carry)."""
    fast = fm.pow_const_f32(b, x, y.constant) if isinstance(y, ir.Constant) else None
    return fast if fast is not None else fm.pow_f32(b, x, y)


def _clip(b, x, lo, hi):
    """min(max(x, lo), hi) as numpy's clip: NaN stays NaN (ordered compares pass it on)."""
    x = b.select(b.fcmp_ordered("<", x, lo), lo, x)
    return b.select(b.fcmp_ordered(">", x, hi), hi, x)


# op -> (arity, emit(builder, *operands)); numpy forms in _NUMPY (tests and folding checks)
EXPR_OPS = {
    "add": (2, lambda b, x, y: b.fadd(x, y)),
    "subtract": (2, lambda b, x, y: b.fsub(x, y)),
    "multiply": (2, lambda b, x, y: b.fmul(x, y)),
    "divide": (2, lambda b, x, y: b.fdiv(x, y)),
    "power": (2, _pow),
    "negative": (1, lambda b, x: b.fneg(x)),
    "tanh": (1, fm.tanh_f32),
    "erf": (1, fm.erf_f32),
    "exp": (1, fm.exp_f32),
    "sigmoid": (1, fm.sigmoid_f32),
    "sqrt": (1, lambda b, x: b.call(fm.declare(b, "llvm.sqrt", [x]), [x])),
    "nn.gelu": (1, _gelu),
    "nn.gelu_tanh": (1, _gelu_tanh),
    "nn.silu": (1, lambda b, x: b.fmul(x, fm.sigmoid_f32(b, x))),
    "clip": (3, _clip),  # bounds are constants (check_expr): relu6, hard-sigmoid, hard-swish
}

_NUMPY = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
    "power": np.power, "negative": np.negative, "tanh": np.tanh, "exp": np.exp,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "sqrt": np.sqrt, "clip": np.clip,
}


def evaluate(expr: tuple, inputs: list) -> np.ndarray:
    """The expression on numpy arrays in float64 (ops without a numpy form raise KeyError)."""
    if expr[0] == "in":
        return np.asarray(inputs[expr[1]], np.float64)
    if expr[0] == "const":
        return np.float64(expr[1])
    return _NUMPY[expr[0]](*(evaluate(e, inputs) for e in expr[1:]))


def _emit(b: ir.IRBuilder, expr: tuple, loaded: list, memo: dict) -> ir.Value:
    """The expression on ``loaded`` (floats, or vectors of floats: constants are splat)."""
    key = repr(expr)
    if key not in memo:
        if expr[0] == "in":
            memo[key] = loaded[expr[1]]
        elif expr[0] == "const":
            memo[key] = fm.like(loaded[0], float(expr[1])) if loaded else \
                fm.fconst(float(expr[1]))
        else:
            memo[key] = EXPR_OPS[expr[0]][1](b, *(_emit(b, e, loaded, memo) for e in expr[1:]))
    return memo[key]


def _arity(expr: tuple) -> int:
    if expr[0] == "in":
        return expr[1] + 1
    return max((_arity(e) for e in expr[1:] if isinstance(e, tuple)), default=0)


def _symbol(expr: tuple) -> str:
    key = f"{expr!r}/{_vector_lanes(expr)}"  # the vector and the scalar loop differ
    return "msc_expr_f32_" + hashlib.sha256(key.encode()).hexdigest()[:16]


# Instructions of one element's scalar code above which the expression loop is written as
# explicit vectors (_vector_loop): exp / erf / tanh based expressions (30-60 instructions) ran
# 25-30% faster so (CPU time, 65536 floats: sigmoid 42 -> 32 us, gelu 66 -> 47 us); cheap ones
# (adds, clips: hard-swish ~6) stream memory as fast or faster in LLVM's vectorized loop.
_VECTOR_WORK = 16


def _vector_lanes(expr: tuple) -> int:
    """The host's vector width when the expression is worth explicit vectors (see
    _VECTOR_WORK) and every op of it takes vectors (power's constant exponent is read as a
    scalar: such expressions keep the scalar loop), else 0."""
    def ready(e):
        return e[0] in ("in", "const") or (e[0] != "power" and all(ready(a) for a in e[1:]))
    return vector_lanes() if ready(expr) and _work(expr) > _VECTOR_WORK else 0


@cache
def _work(expr: tuple) -> int:
    """Instructions LLVM IR spends on one element of the expression (before optimization)."""
    module = ir.Module(name="msc_expr_work")
    arity = max(_arity(expr), 1)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ir.FloatType()] * arity), "w")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    _emit(b, expr, list(fn.args), {})
    return sum(len(block.instructions) for block in fn.blocks)


def expr_seconds(expr: tuple, elements: int) -> float:
    """One-thread seconds of ``expr`` over ``elements`` floats: its instructions per element
    (_work) at this host's measured seconds per element-instruction (runtime/split_cost.py;
    measured once, on a gelu of 64 Ki floats), at least a flat pass's time (cheap expressions
    stream memory). The estimate decides whether the loop splits across threads: a split
    pays from ~3 pool round trips of work, which a gelu reaches at ~10x fewer elements than
    an add."""
    def probe() -> tuple:
        n = 1 << 16
        run, best = _native(_PROBE_EXPR), float("inf")
        x, out = np.ones(n, np.float32), np.empty(n, np.float32)
        with num_threads(1):
            for _ in range(7):
                start = time.perf_counter()
                run(x.ctypes.data, out.ctypes.data, 0, n)
                best = min(best, time.perf_counter() - start)
        return best, n * _work(_PROBE_EXPR)

    return max(unit_seconds("expr_instruction", elements * _work(expr), probe),
               flat_seconds(elements))


def _vector_loop(b: ir.IRBuilder, vec: Vec, start, stop, body) -> None:
    """``body(i, mask)`` over [start, stop) in vectors: whole vectors unmasked (mask None),
    _UNROLL a step, then one at a time, then one masked tail. LLVM's vectorizer folded the
    tail into every iteration (a lane mask made per vector: 4 of the ~40 instructions of a
    sigmoid vector), and the exp / erf polynomials ran 25-30% slower that way."""
    def floor(step: int):
        return b.add(start, b.mul(b.sdiv(b.sub(stop, start), const64(step)), const64(step)))
    wide, whole = floor(vec.lanes * _UNROLL), floor(vec.lanes)
    with for_range(b, wide, start=start, step=vec.lanes * _UNROLL, name="v4") as i:
        for u in range(_UNROLL):
            body(b.add(i, const64(u * vec.lanes)), None)
    with for_range(b, whole, start=wide, step=vec.lanes, name="v") as i:
        body(i, None)
    with b.if_then(b.icmp_signed("<", whole, stop)):
        body(whole, vec.tail_mask(b, whole, stop))


def _build_module(expr: tuple) -> ir.Module:
    """void (in0*, ..., out*, start, stop): out[i] = expr(in0[i], ...); for one input also
    ``<symbol>_2d(c*, rows, cols, ld)``: c[r, j] = expr(c[r, j]) in place (a GEMM epilogue)."""
    arity = _arity(expr)
    module = ir.Module(name=_symbol(expr))
    if arity == 1:
        _build_inplace_2d(module, expr)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [F32_PTR] * (arity + 1) + [I64] * 2),
                     name=_symbol(expr))
    *ins, out, start, stop = fn.args
    for arg in (*ins, out):
        arg.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    lanes = _vector_lanes(expr)
    if lanes:
        vec = Vec(module, lanes)

        def body(i, mask):
            loaded = [_load(b, vec, b.gep(x, [i]), mask) for x in ins]
            _store(b, vec, _emit(b, expr, loaded, {}), b.gep(out, [i]), mask)
        _vector_loop(b, vec, start, stop, body)
    else:
        with for_range(b, stop, start=start, name="i") as i:
            loaded = [b.load(b.gep(x, [i])) for x in ins]
            b.store(_emit(b, expr, loaded, {}), b.gep(out, [i]))
    b.ret_void()
    return module


def _load(b, vec, ptr, mask):
    if mask is None:
        return b.load(b.bitcast(ptr, vec.ty.as_pointer()), align=4)
    return vec.load(b, ptr, mask, 0.0)


def _store(b, vec, value, ptr, mask) -> None:
    if mask is None:
        b.store(value, b.bitcast(ptr, vec.ty.as_pointer()), align=4)
    else:
        vec.store(b, value, ptr, mask)


def _build_inplace_2d(module: ir.Module, expr: tuple) -> None:
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [F32_PTR] + [I64] * 3),
                     name=_symbol(expr) + "_2d")
    c, rows, cols, ld = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    lanes = _vector_lanes(expr)
    with for_range(b, rows, name="r") as r:
        row = b.gep(c, [b.mul(r, ld)])
        if lanes:
            vec = Vec(module, lanes)

            def body(j, mask, row=row):
                ptr = b.gep(row, [j])
                _store(b, vec, _emit(b, expr, [_load(b, vec, ptr, mask)], {}), ptr, mask)
            _vector_loop(b, vec, const64(0), cols, body)
        else:
            with for_range(b, cols, name="j") as j:
                ptr = b.gep(row, [j])
                b.store(_emit(b, expr, [b.load(ptr)], {}), ptr)
    b.ret_void()


@cache
def _library(expr: tuple):
    symbols = [_symbol(expr)] + ([_symbol(expr) + "_2d"] if _arity(expr) == 1 else [])
    return get_jit().compile_generated(
        lambda: _build_module(expr), symbols,
        (__name__, "msc.backend.lowering.math", "msc.backend.llvm.loops",
         "msc.backend.kernels.rowmath"), (repr(expr), _vector_lanes(expr)))


def _native(expr: tuple):
    return _library(expr).cfunc(_symbol(expr), None, *(ctypes.c_void_p,) * (_arity(expr) + 1),
                                ctypes.c_int64, ctypes.c_int64)


def inplace_2d_address(expr: tuple) -> int:
    """Address of ``void (c*, rows, cols, ld)`` applying a one-input expression in place."""
    if _arity(expr) != 1:
        raise BuildError(f"an in-place epilogue takes one input, not {_arity(expr)}",
                         op="elementwise", hint="fuse only single-input activations")
    return _library(expr).address(_symbol(expr) + "_2d")


def check_expr(expr: tuple) -> bool:
    """Whether every node of ``expr`` is an input, a constant or an op of EXPR_OPS."""
    if expr[0] == "in":
        return True
    if expr[0] == "const":
        return isinstance(expr[1], float)
    spec = EXPR_OPS.get(expr[0])
    if spec is None or spec[0] != len(expr) - 1:
        return False
    if expr[0] == "power" and expr[2][0] != "const":
        return False
    if expr[0] == "clip" and (expr[2][0] != "const" or expr[3][0] != "const"):
        return False
    return all(check_expr(e) for e in expr[1:])


class ExprKernel(Kernel):
    """``kernel(*inputs, out)``: the expression over C-contiguous float32 arrays of ``shape``
    (inputs may not alias ``out``: the loop is compiled with noalias)."""

    def __init__(self, expr: tuple, shape: tuple, op: str = "elementwise"):
        self.expr, self.shape, self.op = expr, tuple(shape), op
        self.size = math.prod(self.shape)
        self.inputs = tuple(range(_arity(expr)))
        self.run = _native(expr)
        self.tasks: dict = {}  # threads -> native task list

    def _ptr(self, name: str, x) -> int:
        return f32_address(x, self.shape, self.op, name)

    def __call__(self, *arrays):
        ptrs = [self._ptr(f"x{i}", x) for i, x in enumerate(arrays[:-1])]
        out = arrays[-1]
        ptrs.append(self._ptr("out", out))
        threads = task_threads()
        if threads <= 1 or len(ptrs) > BASES or not self._splits(threads):
            self.run(*ptrs, 0, self.size)
            return out
        self._tasks(threads).launch(1, tuple(ptrs), threads)
        return out

    def _splits(self, threads: int) -> bool:
        """Whether the loop pays for a split over ``threads`` (see :func:`expr_seconds`)."""
        return bool(self.size) and worth_splitting(expr_seconds(self.expr, self.size), threads)

    def _tasks(self, parts: int) -> NativeTasks:
        """The loop over ``parts`` element ranges as a native task list whose pointer columns
        are 0 (the arrays' addresses are the bases), cached per count; ranges start at
        multiples of 64 elements, so each part starts on a cache line."""
        tasks = self.tasks.get(parts)
        if tasks is None:
            n = self.size
            bounds = [min(n, n * i // parts // 64 * 64) for i in range(parts)] + [n]
            tasks = self.tasks[parts] = wrapped_tasks(self.run, [
                (0,) * (len(self.inputs) + 1) + (bounds[i], bounds[i + 1])
                for i in range(parts)])
        return tasks

    def native_signature(self, buffers: list) -> tuple | None:
        """(entry, dims, scratch bytes, splits) for the VM's native chains (runtime/
        native_run.KernelStep): the flat loop over buffers of exactly this float32 shape;
        ``splits``: worth splitting across the host's threads (the chain runs it on one
        thread)."""
        want = (self.shape, np.dtype(np.float32))
        if len(buffers) != len(self.inputs) + 1 or any(
                (tuple(s), np.dtype(d)) != want for s, d in buffers) or not self.size:
            return None
        return (native_address(self.run), (0, self.size), 0,
                len(buffers) <= BASES and self._splits(max(task_threads(), 2)))

    def native_tasks(self, buffers: list, parts: int) -> tuple | None:
        """(element ranges as a task list, its bases: the step's buffers in order, one-thread
        seconds) for a chain's parallel step (runtime/chain_split.py)."""
        if self.native_signature(buffers) is None or len(buffers) > BASES:
            return None
        return (self._tasks(parts), tuple(range(len(buffers))),
                expr_seconds(self.expr, self.size))


UNARY_EXPR = {op: (op, ("in", 0)) for op, (arity, _) in EXPR_OPS.items() if arity == 1}


class UnaryExprFact(KernelFact):
    """A float32 unary op of :data:`EXPR_OPS` on a static shape."""

    def __init__(self, op: str):
        self.expr = UNARY_EXPR[op]

    def match(self, site: Site) -> bool:
        x, out = site.tensor(0), site.out
        return (x is not None and x.dtype == "float32" and getattr(out, "dtype", "") == "float32"
                and x.values is not None and all(d.is_const for d in x.values)
                and x.values == getattr(out, "values", None))

    def make(self, site: Site) -> Kernel:
        shape = tuple(int(d.value) for d in site.tensor(0).values)
        return ExprKernel(self.expr, shape, op=site.op)


# The activations computed as one expression, and the unary ops long enough for the explicit
# vector loop (exp, sigmoid, tanh, erf: their legalized loops, vectorized by LLVM, ran 1.3-2x
# slower alone; tests/backend/kernels/test_exp_scale.py, docs/perf/blocks.md).
ACTIVATION_EXPRS = ops_with("activation") & UNARY_EXPR.keys()
VECTOR_UNARY = frozenset(op for op in ops_in("unary") & ops_with("float_only") & UNARY_EXPR.keys()
                         if _work(UNARY_EXPR[op]) > _VECTOR_WORK)
for _op in sorted(ACTIVATION_EXPRS | VECTOR_UNARY):
    attach(_op, "kernel", UnaryExprFact(_op))
