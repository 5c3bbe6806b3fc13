"""Compile a TIR PrimFunc to native code and call it on numpy arrays.

    kernel = compile_prim_func(func)          # cached: in memory, and on disk via the JIT
    kernel(x, y, out)                         # destination passing, as call_tir does
    out = kernel(x, y)                        # trailing outputs left out are allocated

Before the native call every buffer argument is checked against its param: a numpy array of
the param's dtype and rank, every dim equal to the param's (symbolic dims bound from the first
plain use, then checked everywhere); outputs C-contiguous, writable and not overlapping another
argument. Anything else raises ShapeError naming the param, so native code never sees a shape
or dtype it was not built for. Non-contiguous inputs are copied.

The kernel symbol is ``msc_tir_<name>_<sha256 of the printed func>``; the JIT keys its disk
cache by the generated LLVM IR, so a second process loads the object without compiling.
"""

from __future__ import annotations

import ctypes
import faulthandler
import hashlib
import os
import re
import threading

import llvmlite.binding as llvm
import numpy as np

from ...errors import BuildError, ShapeError
from ...tir import expr as E
from ...tir.function import Buffer, BufferStore, PrimFunc, walk_stmts
from ...tir.interp import np_dtype
from ..llvm.cache import cache_key
from ..llvm.jit import JIT, CodeLibrary, get_jit
from ..runtime.native_run import status_error
from ..runtime.threads import WORKER_PREFIX
from .codegen import KernelABI, codegen, ir_text
from .dtypes import EXTERNAL_SYMBOLS, Types
from .parallel import PARALLEL_SYMBOL, parallel_address

__all__ = ["CompiledPrimFunc", "TIRKernel", "compile_prim_func"]

_VERSION = "msc-tir-2"  # bump when the generated code changes for the same func
_CTYPES = {
    "float32": ctypes.c_float, "float64": ctypes.c_double, "int8": ctypes.c_int8,
    "uint8": ctypes.c_uint8, "int16": ctypes.c_int16, "uint16": ctypes.c_uint16,
    "int32": ctypes.c_int32, "uint32": ctypes.c_uint32, "int64": ctypes.c_int64,
    "uint64": ctypes.c_uint64, "bool": ctypes.c_uint8,
}
_memo: dict = {}
_lock = threading.Lock()
_registered = False


def compile_prim_func(func: PrimFunc, *, jit: JIT | None = None) -> CompiledPrimFunc:
    """The native kernel of ``func`` (BuildError when some construct cannot compile)."""
    jit = jit or get_jit()
    native_f16 = Types().native_f16
    text = func.script("kernel")
    digest = hashlib.sha256(f"{_VERSION}\0{native_f16}\0{text}".encode()).hexdigest()
    key = (id(jit), digest)
    with _lock:
        hit = _memo.get(key)
    if hit is not None:
        return hit
    name = re.sub(r"\W", "_", func.name)[:40]
    module, abi = codegen(func, f"msc_tir_{name}_{digest[:16]}", native_f16)
    _register_symbols()
    text = ir_text(module)
    _optimize_isolated(jit, text, abi.symbol, func.name)
    library = jit.compile(text, [abi.symbol], name=func.name)
    compiled = CompiledPrimFunc(func, abi, library)
    with _lock:
        return _memo.setdefault(key, compiled)


# Threads that never call LLVM, so a child forked beside them cannot hang on its locks:
# msc's kernel workers, and tqdm's monitor (torch.fx's Interpreter, run by torch.export's
# decompositions, starts one and leaves it alive for the rest of the process).
_HARMLESS_THREADS = (WORKER_PREFIX, "tqdm_monitor")


def _foreign_threads() -> bool:
    """Whether threads other than this one, msc's kernel workers and tqdm's monitor live."""
    others = [t for t in threading.enumerate() if t is not threading.current_thread()]
    return any(not t.name.startswith(_HARMLESS_THREADS) for t in others)


def _optimize_isolated(jit: JIT, text: str, symbol: str, name: str) -> None:
    """Run LLVM on ``text`` in a forked child that leaves the object in the JIT's disk cache.

    llvmlite's LLVM is built with assertions, and its optimizer aborts the whole process on
    some inputs (a loop-vectorizer cost-model assertion was hit while writing this). In a
    child, such a crash becomes a BuildError here; the parent then only loads the object.
    Skipped (compiled in process) when the JIT has no disk cache, a valid entry is already there,
    the platform cannot fork, other threads run (a child forked while another thread holds an
    LLVM lock could hang; the kernel worker pool's threads do not count: they never call
    LLVM, and the child only runs LLVM), or MSC_TIR_ISOLATE=0.
    """
    if jit.cache is None or not hasattr(os, "fork") or _foreign_threads() \
            or os.environ.get("MSC_TIR_ISOLATE") == "0":
        return
    key = cache_key(text, *jit.target.key_parts())
    if jit.cache.valid(key):  # a damaged entry is rebuilt here too, isolated
        return
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns into the caller's code; its stderr goes to the pipe
        code = 1
        try:
            os.close(read)
            os.dup2(write, 2)
            faulthandler.disable()  # a crash here is reported by the parent
            jit.cache.store(key, jit._codegen(text, [symbol], name))
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        message = pipe.read().decode(errors="replace")
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        lines = [ln for ln in message.splitlines() if ln.strip()][:3]
        raise BuildError(f"LLVM crashed (signal {os.WTERMSIG(status)}) compiling this kernel"
                         + (": " + " | ".join(lines) if lines else ""), op=name,
                         hint="please report it with the prim func's script; "
                         "MSC_TIR_ISOLATE=0 reproduces the crash in process")


def _register_symbols() -> None:
    """Make libc / libm symbols and the parallel-loop runner resolvable by the JIT's
    linker."""
    global _registered
    if _registered:
        return
    process = ctypes.CDLL(None)
    for name in EXTERNAL_SYMBOLS:
        fn = getattr(process, name, None)
        if fn is not None:
            llvm.add_symbol(name, ctypes.cast(fn, ctypes.c_void_p).value)
    llvm.add_symbol(PARALLEL_SYMBOL, parallel_address())  # parallel loops run on the pool
    _registered = True


class _Param:
    """How one buffer param is checked: dims as ("const", n) / ("var", name) / ("expr", e)."""

    __slots__ = ("dims", "dtype", "exprs", "name", "ndim", "output")

    def __init__(self, buf: Buffer, output: bool):
        self.name = buf.name
        self.dtype = np_dtype(buf.dtype)
        self.ndim = buf.ndim
        self.output = output
        self.dims = tuple(_dim_spec(d) for d in buf.shape)
        self.exprs = any(d[0] == "expr" for d in self.dims)


def _dim_spec(d: E.PrimExpr):
    if isinstance(d, E.IntImm):
        return ("const", d.value, d)
    if isinstance(d, E.Var):
        return ("var", d.name, d)
    return ("expr", d, d)


class CompiledPrimFunc:
    """A compiled PrimFunc: ``kernel(*arrays)`` in the func's param order."""

    def __init__(self, func: PrimFunc, abi: KernelABI, library: CodeLibrary):
        self.func = func
        self.name = func.name
        self.abi = abi
        self.library = library
        written = {s.buffer.name for s in walk_stmts(func.body) if isinstance(s, BufferStore)}
        self._params = [_Param(p, p.name in written) if isinstance(p, Buffer) else p
                        for p in func.params]
        self._dims = [v.name for kind, v in abi.args if kind == "dim"]
        argtypes = [ctypes.c_void_p if kind == "buffer" else
                    ctypes.c_int64 if kind == "dim" else _scalar_ctype(v.dtype)
                    for kind, v in abi.args]
        self._cfunc = library.cfunc(abi.symbol, ctypes.c_int32, *argtypes)
        fast = all(isinstance(p, _Param) and not p.exprs for p in self._params)
        self._specs = [(p.dtype, p.ndim, tuple((k, kind == "const", v) for k, (kind, v, _) in
                                               enumerate(p.dims)), p.output)
                       for p in self._params] if fast else None
        self._outputs = [i for i, p in enumerate(self._params)
                         if isinstance(p, _Param) and p.output]

    @property
    def from_cache(self) -> bool:
        return self.library.from_cache

    def __repr__(self) -> str:
        return f"CompiledPrimFunc({self.name!r}, {self.abi.symbol})"

    def __call__(self, *args, known: dict | None = None):
        """Run on ``args`` (one per param; trailing outputs may be left out, then they are
        allocated and returned). Returns None when every output was passed. ``known``: values
        of symbolic dims no buffer binds by itself (see :meth:`bind_static`)."""
        if self._specs is not None and len(args) == len(self._specs):
            cargs = self._fast_args(args)
            if cargs is not None:
                status = self._cfunc(*cargs)
                if status:
                    raise status_error(status, self.name, None, self.func, list(args))
                return None
        return self._call(args, known)

    def _fast_args(self, args) -> list | None:
        """Native arguments when every array fits exactly, else None (the checked path then
        raises the precise error)."""
        env: dict = {}
        cargs = []
        for (dtype, ndim, dims, out), a in zip(self._specs, args):
            if type(a) is not np.ndarray or a.dtype != dtype or a.ndim != ndim:
                return None
            shape = a.shape
            for k, const, v in dims:
                if (shape[k] != v) if const else (env.setdefault(v, shape[k]) != shape[k]):
                    return None
            flags = a.flags
            if not (flags.c_contiguous and flags.aligned and (flags.writeable or not out)):
                return None
            cargs.append(a.ctypes.data)
        for j in self._outputs:
            if args[j].size and any(i != j and a.size and np.may_share_memory(args[j], a)
                                    for i, a in enumerate(args)):
                return None
        for name in self._dims:
            if name not in env:
                return None
            cargs.append(env[name])
        return cargs

    def _call(self, args, known: dict | None = None):
        params = self._params
        if len(args) > len(params):
            raise ShapeError(f"prim func {self.name!r} takes {len(params)} arguments, got "
                             f"{len(args)}", op=self.name)
        env: dict = {}
        arrays = [self._bind(p, a, env) for p, a in zip(params, args)]
        self._seed(env, known)
        for p, a in zip(params, arrays):
            if isinstance(p, _Param) and p.exprs:
                _check_exprs(p, a.shape, env, self.name)
        outs = [self._allocate(p, env) for p in params[len(args):]]
        arrays += outs
        _check_outputs(params, arrays, self.name)
        cargs = [a.ctypes.data if isinstance(p, _Param) else a for p, a in zip(params, arrays)]
        cargs += [self._dim(env, name) for name in self._dims]
        status = self._cfunc(*cargs)
        if status:
            raise status_error(status, self.name, None, self.func, arrays)
        if not outs:
            return None
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _bind(self, p, value, env: dict):
        if not isinstance(p, _Param):
            env[p.name] = value
            return _scalar_ctype(p.dtype)(value).value if p.dtype != "bool" else int(bool(value))
        if not isinstance(value, np.ndarray):
            raise ShapeError(f"expected a numpy array, got {type(value).__name__}",
                             op=self.name, param=p.name)
        if value.dtype != p.dtype:
            raise ShapeError(f"expected dtype {p.dtype}, got {value.dtype}", op=self.name,
                             param=p.name, hint=f"convert with .astype({str(p.dtype)!r})")
        if value.ndim != p.ndim:
            raise ShapeError(f"expected rank {p.ndim}, got shape {value.shape}", op=self.name,
                             param=p.name)
        self._bind_dims(p, value.shape, env)
        if not p.output and not (value.flags.c_contiguous and value.flags.aligned):
            value = np.require(value, requirements=["C", "A"])
        return value

    def _bind_dims(self, p: _Param, shape: tuple, env: dict) -> None:
        for axis, ((kind, dim, _), size) in enumerate(zip(p.dims, shape)):
            if kind == "const" and dim != size:
                raise ShapeError(f"dim {axis} is {size}, expected {dim}", op=self.name,
                                 param=p.name, hint=f"the kernel takes shape {_shape(p)}")
            if kind == "var" and env.setdefault(dim, size) != size:
                raise ShapeError(f"dim {axis} is {size}, but {dim} = {env[dim]} from an earlier "
                                 "argument", op=self.name, param=p.name)

    @property
    def address(self) -> int:
        """The native entry point (``i32 (buffers..., dims...)``), for callers that check
        shapes themselves once, such as a VM plan (msc/backend/runtime/native_run.py)."""
        return self.library.address(self.abi.symbol)

    def _seed(self, env: dict, known: dict | None) -> None:
        """Dims no buffer bound (only used inside expressions such as bz * 5) from ``known``."""
        for name in self._dims:
            if name not in env and known and name in known:
                env[name] = int(known[name])

    def bind_static(self, specs: list, known: dict | None = None) -> tuple:
        """The dim arguments for buffers of these ``(shape, dtype)`` specs, one per param in
        order, checked as a call would check arrays of them; ShapeError naming the param when
        one does not fit. Scalar params are not supported here (ShapeError)::

            dims = kernel.bind_static([((4, 8), np.float32), ((4, 8), np.float32)])

        ``known``: values of symbolic dims that no buffer dim binds by itself (the Relax
        function's ``bz`` when every buffer dim is an expression such as ``bz * 5``).
        """
        if len(specs) != len(self._params):
            raise ShapeError(f"prim func {self.name!r} takes {len(self._params)} arguments, got "
                             f"{len(specs)}", op=self.name)
        env: dict = {}
        for p, (shape, dtype) in zip(self._params, specs):
            if not isinstance(p, _Param):
                raise ShapeError("a scalar param has no static spec", op=self.name,
                                 param=p.name)
            if np.dtype(dtype) != p.dtype or len(shape) != p.ndim:
                raise ShapeError(f"expected {p.dtype} of rank {p.ndim}, got {np.dtype(dtype)} "
                                 f"{tuple(shape)}", op=self.name, param=p.name)
            self._bind_dims(p, tuple(shape), env)
        self._seed(env, known)  # checked against the shapes next
        for p, (shape, _) in zip(self._params, specs):
            if p.exprs:
                _check_exprs(p, tuple(shape), env, self.name)
        return tuple(self._dim(env, name) for name in self._dims)

    def _dim(self, env: dict, name: str) -> int:
        if name not in env:
            raise ShapeError(f"symbolic dim {name} is not bound by any input shape",
                             op=self.name, hint="each symbolic var must be a whole dim of "
                             "some argument")
        return env[name]

    def _allocate(self, p, env: dict) -> np.ndarray:
        if not isinstance(p, _Param):
            raise ShapeError("only buffer params can be left out (as outputs)", op=self.name,
                             param=p.name)
        shape = tuple(_dim_value(spec, env, p, self.name) for spec in p.dims)
        return np.empty(shape, p.dtype)


def _scalar_ctype(dtype: str):
    try:
        return _CTYPES[dtype]
    except KeyError:
        raise ShapeError(f"scalar params of dtype {dtype} are not supported") from None


def _shape(p: _Param) -> tuple:
    return tuple(E.to_str(d[2]) for d in p.dims)


def _dim_value(spec, env: dict, p: _Param, name: str) -> int:
    kind, dim, expr = spec
    if kind == "const":
        return dim
    try:
        return int(E.evaluate(expr, env))
    except Exception:  # noqa: BLE001 - an unbound var is the caller's error
        raise ShapeError(f"symbolic dim {E.to_str(expr)} is not bound by any input shape",
                         op=name, param=p.name,
                         hint="pass the inputs (and outputs) whose shapes define it") from None


def _check_exprs(p: _Param, shape: tuple, env: dict, name: str) -> None:
    for axis, (spec, size) in enumerate(zip(p.dims, shape)):
        if spec[0] == "expr" and _dim_value(spec, env, p, name) != size:
            raise ShapeError(f"dim {axis} is {size}, expected {E.to_str(spec[2])} = "
                             f"{_dim_value(spec, env, p, name)}", op=name, param=p.name,
                             hint=f"the kernel takes shape {_shape(p)}")


def _check_outputs(params: list, arrays: list, name: str) -> None:
    for i, (p, a) in enumerate(zip(params, arrays)):
        if not (isinstance(p, _Param) and p.output):
            continue
        if not (a.flags.c_contiguous and a.flags.writeable and a.flags.aligned):
            raise ShapeError("an output must be a C-contiguous, aligned, writable array",
                             op=name, param=p.name, hint="pass np.empty(shape, dtype)")
        for j, other in enumerate(arrays):
            if j != i and isinstance(params[j], _Param) and a.size and other.size \
                    and np.may_share_memory(a, other):
                raise ShapeError(f"output overlaps argument {params[j].name!r}", op=name,
                                 param=p.name, hint="kernels write outputs in place; pass a "
                                 "separate array")


class TIRKernel:
    """An op call compiled through its legalization, for a VM: ``kernel(*args, *outs)``
    where ``args`` are the call's tensor (or tuple-of-tensor) argument values in order
    (``inputs`` are their indices among the call's args) and ``outs`` its output buffers."""

    def __init__(self, compiled: CompiledPrimFunc, inputs: tuple, outputs: tuple):
        self.compiled = compiled
        self.inputs = inputs
        self.outputs = outputs

    def __call__(self, *args):
        flat = []
        for a in args:
            if isinstance(a, (tuple, list)):
                flat.extend(a)
            else:
                flat.append(a)
        self.compiled(*flat)
        outs = flat[len(flat) - len(self.outputs):]
        return outs[0] if len(outs) == 1 else tuple(outs)
