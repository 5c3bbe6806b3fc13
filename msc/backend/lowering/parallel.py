"""Parallel loops (``T.parallel``, ``sch.parallel``): the body runs on msc's worker pool.

The loop body is outlined into its own function ``void task(i64 lo, i64 hi, i64 ctx)`` that
runs the iterations ``[lo, hi)``. ``ctx`` points at an array of i64 slots in the caller's
frame holding every non-constant value the body reads (buffer pointers, dims, strides, loop
vars and lets of the enclosing loops), converted to i64 and back. The kernel then calls
``msc_tir_parallel(task, ctx, lo, extent)``, which splits the range into one chunk per
thread and runs the chunks as native tasks (threads.NativeTasks: the native pool, no GIL
between the tasks); with one thread, or inside another task, the whole range runs here.

A failed workspace allocation in a task stores its status in a slot of the caller, which
returns it after the loop; an out-of-range data index sets the caller's flag. Parallel loops
nested inside a parallel loop run serially, as in TVM's CPU codegen.
"""

from __future__ import annotations

import ctypes
import logging

from llvmlite import ir

from ...tir import expr as E
from ..llvm.loops import entry_alloca

__all__ = ["PARALLEL_SYMBOL", "STATS", "emit_parallel", "parallel_address"]

PARALLEL_SYMBOL = "msc_tir_parallel"
I8, I32, I64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
_FLOAT_BITS = {ir.HalfType: 16, ir.FloatType: 32, ir.DoubleType: 64}  # carried in i64 slots
_TASK = ir.FunctionType(ir.VoidType(), [I64, I64, I64])
_I64 = ctypes.c_int64
_SERIAL = ctypes.CFUNCTYPE(None, _I64, _I64, _I64)
_serial_cache: dict = {}
STATS = {"loops": 0, "chunks": 0}  # parallel loops run, and the chunks they were split into


def _run(task: int, ctx: int, lo: int, extent: int) -> None:
    """The pool side of a parallel loop (a ctypes callback: it must not raise)."""
    from ..runtime.threads import NativeTasks, split_range, task_threads

    try:
        chunks = split_range(extent, min(task_threads(), extent))
        STATS["loops"] += 1
        STATS["chunks"] += len(chunks)
        if len(chunks) > 1:
            tasks = NativeTasks(len(chunks))
            for k, (a, b) in enumerate(chunks):
                tasks.records[k, :4] = (task, lo + a, lo + b, ctx)
            tasks.run(len(chunks))
            return
    except Exception as exc:  # noqa: BLE001 - a callback must not raise: run it serially
        logging.getLogger("msc.backend").warning("parallel loop runs serially: %s", exc)
    fn = _serial_cache.get(task) or _serial_cache.setdefault(task, _SERIAL(task))
    fn(lo, lo + extent, ctx)


_CALLBACK = ctypes.CFUNCTYPE(None, _I64, _I64, _I64, _I64)(_run)


def parallel_address() -> int:
    """The address of the runner the kernels call (registered with the JIT's linker)."""
    return ctypes.cast(_CALLBACK, ctypes.c_void_p).value


def emit_parallel(em, s, lo: ir.Value, stop: ir.Value) -> None:
    """Emit ``s`` (a parallel For, ``[lo, stop)``) as an outlined task run on the pool."""
    module = em.fn.module
    count = getattr(module, "msc_tasks", 0)
    module.msc_tasks = count + 1
    scope = _scope_values(em)
    body = _body_function(em, f"{em.fn.name}.par{count}.body", scope)
    task = type(em)(em.func, body, em.abi, em.types)
    params = {id(v): a for v, a in zip(scope, body.args[3:])}
    task.vars = {n: params.get(id(v), v) for n, v in em.vars.items()}
    task.bufs = {n: (params.get(id(p), p), [params.get(id(d), d) for d in dims],
                     [params.get(id(x), x) for x in st]) for n, (p, dims, st) in em.bufs.items()}
    task.var_exprs, task.known, task.in_task = dict(em.var_exprs), set(em.known), True
    extras = _Slots(task.b, body.args[2], first=len(scope))
    task.fail = lambda status: _task_fail(em, task, extras, status)
    _assume_chunk(task.b, body.args[0], body.args[1], s)
    task.stmt_loop(s, task.coerce(body.args[0], "int64", s.var.dtype),
                   task.coerce(body.args[1], "int64", s.var.dtype))
    if task.oob is not None:  # this task saw a bad data index: flag the caller
        flag = extras.get(_parent_oob(em))
        bad = task.b.icmp_unsigned("!=", task.b.load(task.oob), ir.Constant(I8, 0))
        with task.b.if_then(bad, likely=False):
            task.b.store(ir.Constant(I8, 1), flag)
    task.b.ret_void()
    wrapper = _wrapper(module, f"{em.fn.name}.par{count}", body, scope)
    _call_pool(em, wrapper, scope + extras.values, lo, stop)


def _assume_chunk(b: ir.IRBuilder, chunk_lo: ir.Value, chunk_hi: ir.Value, s) -> None:
    """Tell LLVM that a chunk ``[chunk_lo, chunk_hi)`` is a non-empty part of the loop's
    range when that range is constant: the body then optimizes for the loop's known trip
    bounds (index arithmetic without overflow cases), as the serial loop does."""
    lo, extent = E.as_int(s.min), E.as_int(s.extent)
    if lo is None or extent is None:
        return
    module = b.module
    assume = module.globals.get("llvm.assume") or ir.Function(
        module, ir.FunctionType(ir.VoidType(), [ir.IntType(1)]), "llvm.assume")
    low, high = ir.Constant(I64, lo), ir.Constant(I64, lo + extent)
    b.call(assume, [b.icmp_signed(">=", chunk_lo, low)])
    b.call(assume, [b.icmp_signed("<", chunk_lo, chunk_hi)])
    b.call(assume, [b.icmp_signed("<=", chunk_hi, high)])


def _scope_values(em) -> list:
    """The parent's non-constant values the body may read, each once."""
    seen, out = set(), []
    values = list(em.vars.values())
    for ptr, dims, strides in em.bufs.values():
        values += [ptr, *dims, *strides]
    for v in values:
        if not isinstance(v, ir.Constant) and id(v) not in seen:
            seen.add(id(v))
            out.append(v)
    return out


def _body_function(em, name: str, scope: list) -> ir.Function:
    """``void body(i64 lo, i64 hi, i64 ctx, scope...)``: the kernel's buffer arguments stay
    ``noalias`` parameters, so the body optimizes as the kernel's own loops do. It is not
    inlined into the wrapper: pointers read from ``ctx`` there would keep LLVM from holding
    accumulators in registers (alias scopes are not enough for that)."""
    fn = ir.Function(em.fn.module, ir.FunctionType(ir.VoidType(), [I64, I64, I64] +
                                                   [v.type for v in scope]), name)
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    fn.attributes.add("noinline")
    restrict = {id(a) for a in em.fn.args if "noalias" in a.attributes}
    for arg, v in zip(fn.args[3:], scope):
        if id(v) in restrict:
            arg.add_attribute("noalias")
    return fn


def _wrapper(module: ir.Module, name: str, body: ir.Function, scope: list) -> ir.Function:
    """``void task(i64 lo, i64 hi, i64 ctx)``: the scope read from ``ctx``, then the body."""
    fn = ir.Function(module, _TASK, name)
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    base = b.inttoptr(fn.args[2], I64.as_pointer())
    args = [_from_i64(b, b.load(b.gep(base, [ir.Constant(I64, k)])), v.type)
            for k, v in enumerate(scope)]
    b.call(body, [fn.args[0], fn.args[1], fn.args[2], *args])
    b.ret_void()
    return fn


class _Slots:
    """Values the body reads from ``ctx`` on demand (the caller's status and oob slots),
    after the ``first`` slots of the scope."""

    def __init__(self, builder: ir.IRBuilder, ctx_arg: ir.Value, first: int):
        self.b = builder
        self.ctx = ctx_arg
        self.first = first
        self.values: list = []  # parent values, in slot order

    def get(self, value: ir.Value) -> ir.Value:
        k = self.first + len(self.values)
        self.values.append(value)
        ptr = self.b.gep(self.b.inttoptr(self.ctx, I64.as_pointer()), [ir.Constant(I64, k)])
        return _from_i64(self.b, self.b.load(ptr), value.type)


def _task_fail(em, task, slots: _Slots, status: int) -> None:
    task.b.store(ir.Constant(I32, status), slots.get(_parent_status(em)))
    task.b.ret_void()


def _parent_status(em) -> ir.Value:
    if getattr(em, "task_status", None) is None:
        em.task_status = _zeroed_slot(em.b, I32, "task_status")
    return em.task_status


def _parent_oob(em) -> ir.Value:
    if em.oob is None:
        em.oob = _zeroed_slot(em.b, I8, "oob")
    return em.oob


def _zeroed_slot(b: ir.IRBuilder, ty: ir.Type, name: str) -> ir.Value:
    slot = entry_alloca(b, ty, name=name)
    with b.goto_entry_block():
        b.position_after(slot)
        b.store(ir.Constant(ty, 0), slot)
    return slot


def _call_pool(em, fn: ir.Function, values: list, lo: ir.Value, stop: ir.Value) -> None:
    b = em.b
    ctx = entry_alloca(b, ir.ArrayType(I64, max(len(values), 1)), name="par.ctx")
    base = b.bitcast(ctx, I64.as_pointer())
    for k, value in enumerate(values):
        b.store(_to_i64(b, value), b.gep(base, [ir.Constant(I64, k)]))
    runner = _declare_runner(em.fn.module)
    lo64 = b.sext(lo, I64) if lo.type != I64 else lo
    stop64 = b.sext(stop, I64) if stop.type != I64 else stop
    b.call(runner, [b.ptrtoint(fn, I64), b.ptrtoint(base, I64), lo64, b.sub(stop64, lo64)])
    if getattr(em, "task_status", None) is not None:
        status = b.load(em.task_status)
        with b.if_then(b.icmp_unsigned("!=", status, ir.Constant(I32, 0)), likely=False):
            b.ret(status)


def _declare_runner(module: ir.Module) -> ir.Function:
    found = module.globals.get(PARALLEL_SYMBOL)
    if found is not None:
        return found
    return ir.Function(module, ir.FunctionType(ir.VoidType(), [I64] * 4), PARALLEL_SYMBOL)


def _to_i64(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    t = v.type
    if isinstance(t, ir.PointerType):
        return b.ptrtoint(v, I64)
    if isinstance(t, ir.IntType):
        return v if t.width == 64 else b.zext(v, I64)
    bits = _FLOAT_BITS[type(t)]
    raw = b.bitcast(v, ir.IntType(bits))
    return raw if bits == 64 else b.zext(raw, I64)


def _from_i64(b: ir.IRBuilder, x: ir.Value, t: ir.Type) -> ir.Value:
    if isinstance(t, ir.PointerType):
        return b.inttoptr(x, t)
    if isinstance(t, ir.IntType):
        return x if t.width == 64 else b.trunc(x, t)
    bits = _FLOAT_BITS[type(t)]
    return b.bitcast(x if bits == 64 else b.trunc(x, ir.IntType(bits)), t)
