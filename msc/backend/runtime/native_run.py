"""Native steps of a plan: compiled TIR kernels checked once per shape signature, and chains
of them run by one generated LLVM function.

A call_tir (or a legalized op) whose buffer shapes are all known when the plan is made is
checked against its PrimFunc then (:meth:`CompiledPrimFunc.bind_static`), so a run only
passes pointers and the precomputed dims::

    step = native_step(kernel, specs, where)     # None: the checked Python entry is used
    step(x, out)                                 # any caller: inputs still guarded

Inside a plan's generated run function (``plan_code.py``) consecutive steps form a chain: one
LLVM function ``i32 chain(i64* table)`` loads each kernel's function pointer and buffer
addresses from the caller's table (one per register file, so concurrent calls never share
one) and calls the kernels in order; the dims are constants. It returns 0, or k + 1 when step
k failed (a workspace allocation), so a chain of N kernels is one ctypes call.
"""

from __future__ import annotations

import ctypes
import hashlib
from dataclasses import dataclass, field

import numpy as np
from llvmlite import ir

from ...errors import MSCError, RuntimeCallError, ShapeError
from .arrays import data_address
from .chain_split import split_step

__all__ = ["STATUS_INDEX", "STATUS_WORKSPACE", "Chain", "KernelStep", "NativeStep",
           "compile_chains", "guard", "kernel_step", "native_step", "status_error"]

_I32, _I64 = ir.IntType(32), ir.IntType(64)
_I8P = ir.IntType(8).as_pointer()
_CHAIN_VERSION = "msc-chain-4"


def guard(value, shape: tuple, dtype: np.dtype, op: str, param: str) -> np.ndarray:
    """``value`` as a C-contiguous aligned array of exactly ``shape`` / ``dtype`` (copied
    when strided); anything else raises ShapeError naming ``op`` and ``param``. What a native
    step checks of values whose producer does not guarantee them (numpy facts, packed)."""
    if type(value) is not np.ndarray:
        raise ShapeError(f"expected a numpy array, got {type(value).__name__}", op=op,
                         param=param)
    if value.dtype != dtype or value.shape != shape:
        raise ShapeError(f"expected {dtype} {shape}, got {value.dtype} {value.shape}", op=op,
                         param=param, hint="the value does not match its struct info")
    flags = value.flags
    if flags.c_contiguous and flags.aligned:
        return value
    return np.require(value, requirements=["C", "A"])


@dataclass(frozen=True)
class ArgSpec:
    """One buffer of a native step: its PrimFunc param name, shape and dtype."""

    name: str
    shape: tuple
    dtype: np.dtype
    output: bool


class NativeStep:
    """A compiled TIR kernel for buffers of fixed shapes: ``step(*inputs, *outputs)``.
    It returns a status (``status``: the chain checks it).

    ``inputs`` are values as the VM holds them (a tuple input is flattened), ``outputs`` the
    plan's buffers. Inputs and outputs are guarded (:func:`guard`, about 1 us each); plans
    skip that for values they produced themselves (plan_code.py). Returns the output buffer,
    or the tuple of them.
    """

    status = True

    def __init__(self, kernel, specs: list, dims: tuple, n_in: int, single: bool, where: str):
        self.kernel = kernel
        self.op = kernel.name
        self.specs = specs
        self.dims = dims
        self.n_in = n_in
        self.single = single
        self.where = where
        self.address = kernel.address
        self.cfunc = kernel._cfunc

    def __repr__(self) -> str:
        return f"NativeStep({self.op!r}, dims={self.dims})"

    def __call__(self, *values):
        flat = []
        for v in values[:self.n_in]:
            flat.extend(v if type(v) is tuple else (v,))
        outs = values[self.n_in:]
        flat.extend(outs)
        if len(flat) != len(self.specs):
            raise ShapeError(f"expected {len(self.specs)} buffers, got {len(flat)}", op=self.op)
        arrays = [guard(v, s.shape, s.dtype, self.op, s.name) for v, s in zip(flat, self.specs)]
        if any(a is not v for a, v in zip(arrays[len(arrays) - len(outs):], outs)):
            raise ShapeError("an output buffer must be C-contiguous and aligned", op=self.op)
        status = self.cfunc(*[data_address(a) for a in arrays], *self.dims)
        if status:
            raise status_error(status, self.op, self.where, self.kernel.func, arrays)
        return outs[0] if self.single else tuple(outs)


STATUS_WORKSPACE, STATUS_INDEX = 1, 2  # what a compiled kernel's non-zero return means
_STATUS = {
    STATUS_WORKSPACE: ("the kernel could not allocate its workspace",
                       "the shapes need more memory than is available"),
    STATUS_INDEX: ("an index read from an index tensor is out of range (result dropped)",
                   "pass indices in [-dim, dim) for each indexed axis"),
}


def status_error(status: int, op: str, where: str | None = None, func=None,
                 arrays: list | None = None) -> RuntimeCallError:
    """The error for a kernel's non-zero return ``status``. For an out-of-range index, the
    kernel's PrimFunc ``func`` and the call's ``arrays`` (in param order) let the message
    name the first bad value, where it is and the valid range (index_report.py)."""
    message, hint = _STATUS.get(status, (f"the kernel failed with status {status}", None))
    if status == STATUS_INDEX and func is not None and arrays:
        from .index_report import describe  # the error path only

        found = describe(func, arrays)
        message = f"{found} (result dropped)" if found else message
    return RuntimeCallError(message, op=op, node=where, hint=hint)


class KernelStep:
    """A hand-written kernel (kernels/) called natively for fixed buffers, as a chain step:
    the kernel's ``native_signature`` gives its entry's address and the i64 arguments that
    follow the buffer pointers (a void function: no status), and optionally the bytes of
    scratch it needs (the plan then passes one more buffer after the outputs, a scratch of
    the register file: concurrent calls never share one, and steps, which run one after
    another, share it), whether the kernel splits across threads at this size and its split
    form (chain_split.py: ``form(parts)`` -> its task lists for that many parts). Chain
    functions call it (a chain of one step when a plan has chains off), with no Python
    between kernels, on the calling thread: a step that ``splits`` is a chain of its own,
    which calls the kernel object instead (its ``parallel_for`` / native pool split) while
    more than one thread is allowed (plan_code.py), unless it has a ``parallel`` entry
    (chain_split.py): the chains run at more than one thread then call that entry, which
    hands the kernel's parts to the native pool from inside the chain."""

    status = False

    def __init__(self, kernel, specs: list, signature: tuple, single: bool, where: str):
        self.kernel = kernel
        self.op = getattr(kernel, "op", type(kernel).__name__)
        self.specs = specs
        self.address, self.dims = int(signature[0]), tuple(int(d) for d in signature[1])
        self.scratch = int(signature[2]) if len(signature) > 2 else 0  # bytes
        self.splits = bool(signature[3]) if len(signature) > 3 else False
        self.split_form = signature[4] if len(signature) > 4 else None  # chain_split.py
        self.parallel = None  # chain_split.ParallelEntry: how a chain splits it
        self.single = single
        self.where = where

    def __repr__(self) -> str:
        return f"KernelStep({self.op!r}, dims={self.dims})"

    def __call__(self, *values):
        """The kernel object itself (If branches run their instructions interpreted)."""
        return self.kernel(*values)


def kernel_step(kernel, specs: list, single: bool, where: str) -> KernelStep | None:
    """The chain step of a kernel object on buffers of these specs, or None when it has no
    native signature for them (its Python ``__call__`` then runs, and checks them)."""
    signature_of = getattr(kernel, "native_signature", None)
    buffers = [(s.shape, s.dtype) for s in specs]
    signature = signature_of(buffers) if signature_of else None
    if signature is None:
        return None
    step = KernelStep(kernel, specs, signature, single, where)
    found = split_step(kernel, buffers, step.splits, step.split_form)
    if found is not None:  # the chain splits it (a ParallelEntry) or never does (False)
        step.parallel, step.splits = found or None, bool(found)
    return step


def native_step(kernel, specs: list, n_in: int, single: bool, where: str,
                known: dict | None = None) -> NativeStep | None:
    """The step for ``kernel`` (a CompiledPrimFunc) on buffers of these specs, or None when
    they do not fit its params (the checked entry then reports it when the call runs)."""
    try:
        dims = kernel.bind_static([(s.shape, s.dtype) for s in specs], known)
    except MSCError:
        return None
    return NativeStep(kernel, specs, dims, n_in, single, where)


# ---------------------------------------------------------------------------------------------
# Chains: one LLVM function per run of consecutive steps.


@dataclass
class Chain:
    """Steps run by one native call: per step, its table slot of the function pointer, of
    each buffer address and of each dim. The dims are read from the table, not written into
    the code, so the plans of two shape signatures (a decode step at past 5 and at past 6)
    share one compiled chain: a new signature costs a table, not an LLVM compile."""

    steps: list          # NativeStep or KernelStep
    fn_slots: list       # slot of each step's function pointer
    arg_slots: list      # per step, the slot of each buffer
    dim_slots: list = field(default_factory=list)  # per step, the slot of each dim

    def signature(self) -> str:
        return ";".join(f"{f}:{','.join(map(str, a))}:{','.join(map(str, d))}"
                        f"{'' if s.status else ':v'}" for s, f, a, d in
                        zip(self.steps, self.fn_slots, self.arg_slots, self.dim_slots))


# Chain functions per JIT unit at most: LLVM's optimization and object emission grow faster
# than a module (a 60,000-op chain model: 48 s to build with every chain in one module).
CHAINS_PER_UNIT = 32


def compile_chains(chains: list, jit=None) -> list:
    """A ctypes function ``int32 (int64* table)`` for each chain (JIT units of at most
    ``CHAINS_PER_UNIT`` chains)."""
    from ..llvm.jit import get_jit

    if not chains:
        return []
    jit = jit or get_jit()
    return [fn for start in range(0, len(chains), CHAINS_PER_UNIT)
            for fn in _compile_unit(chains[start:start + CHAINS_PER_UNIT], jit)]


# (jit, digest of the chains' signatures) -> their ctypes functions: plans of other shape
# signatures with the same steps reuse them without building the IR again
_UNITS: dict = {}


def _compile_unit(chains: list, jit) -> list:
    digest = hashlib.sha256("\n".join([_CHAIN_VERSION] + [c.signature() for c in chains])
                            .encode()).hexdigest()[:20]
    if (id(jit), digest) in _UNITS:
        return _UNITS[id(jit), digest][1]
    module = ir.Module(name=f"msc_chains_{digest}")
    symbols = [f"msc_chain_{digest}_{i}" for i in range(len(chains))]
    for chain, symbol in zip(chains, symbols):
        _emit_chain(module, symbol, chain)
    library = jit.compile(module, symbols, name=module.name)
    cfuncs = [library.cfunc(s, ctypes.c_int32, ctypes.c_void_p) for s in symbols]
    _UNITS[id(jit), digest] = (jit, cfuncs)  # the jit kept alive: its id stays its own
    return cfuncs


def _emit_chain(module: ir.Module, symbol: str, chain: Chain) -> None:
    fn = ir.Function(module, ir.FunctionType(_I32, [_I64.as_pointer()]), symbol)
    table = fn.args[0]
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    for k, (step, fn_slot, slots, dims) in enumerate(zip(chain.steps, chain.fn_slots,
                                                         chain.arg_slots, chain.dim_slots)):
        # buffers are pointers whatever their element type, dims i64: the callee's ABI
        returns = _I32 if step.status else ir.VoidType()
        kty = ir.FunctionType(returns, [_I8P] * len(slots) + [_I64] * len(step.dims))
        callee = b.inttoptr(_load(b, table, fn_slot), kty.as_pointer())
        args = [b.inttoptr(_load(b, table, s), _I8P) for s in slots]
        args += [_load(b, table, d) for d in dims]
        status = b.call(callee, args)
        if not step.status:  # a hand-written kernel: checked when the plan was made
            continue
        failed = b.icmp_signed("!=", status, ir.Constant(_I32, 0))
        with b.if_then(failed, likely=False):  # step number above, the step's status below
            b.ret(b.or_(status, ir.Constant(_I32, (k + 1) << 8)))
    b.ret(ir.Constant(_I32, 0))


def _load(b: ir.IRBuilder, table, slot: int):
    return b.load(b.gep(table, [ir.Constant(_I64, slot)]))
