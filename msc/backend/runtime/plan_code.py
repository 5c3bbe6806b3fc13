"""A plan's instructions as one generated Python function: no interpreter loop per op.

``run(instructions, regs)`` (plan.py) pays a loop iteration, a tuple unpack, a list
comprehension and a ``*args`` call per instruction. :func:`compile_run` writes the same
program as straight-line Python, one line per instruction (as torch.fx's codegen does)::

    regs[7] = F0(regs[4], regs[5])        # a Python kernel / numpy fact / packed call
    T[3] = P(regs[7], 0)                  # a value a native chain reads, guarded
    s = C0(TA)                            # consecutive native steps: one ctypes call
    if s: FAIL(0, s, T)                   # names the bad index (index_report.py)
    regs[9] = regs[6]                     # the step's result is its pooled buffer

Native steps (native_run.py) read their buffers from the register file's address table
``T``. Slots of buffers the plan owns (pooled) and of constants are filled once per register
file; parameters (checked by the VM against their struct info) once per call; fresh result
buffers when they are allocated. Every other value a step reads (a numpy result, a packed
function's) goes through ``guard`` first, so native code only sees arrays of the shapes the
step was checked for. An exception is traced back to its line, so errors still name the
binding that failed, exactly as the interpreter's do.
"""

from __future__ import annotations

import ctypes
import functools
import linecache
from collections.abc import Callable
from dataclasses import dataclass
from time import perf_counter

import numpy as np

from ...errors import MSCError, RuntimeCallError
from .arrays import data_address
from .chain_split import ParallelEntry
from .index_report import arrays_at
from .native_pool import get_pool
from .native_run import Chain, compile_chains, guard, status_error
from .threads import task_threads

# Native calls per chain function at most: LLVM's time on one function grows faster than its
# length (building a 20,000-op chain model took 77 s with one chain, 33 s with chains of 256);
# models have far fewer consecutive native calls, so this only splits very long programs.
MAX_CHAIN = 256

__all__ = ["NativeCall", "Pooled", "Runner", "compile_run"]

_SOURCE = "<msc plan {}>"
_counter = [0]


@dataclass(eq=False)
class NativeCall:
    """What the code generator needs of a native instruction: the step, where each input
    lives (``(register, tuple index or None)``), its buffers (``("pooled", register)`` or
    ``("fresh", shape, dtype)``) and the result register."""

    step: object
    sources: list
    buffers: list
    out: int


@dataclass(eq=False)
class Pooled:
    """A Python instruction (a native Kernel object) writing its result into one pooled
    buffer: a native step reading the result takes the buffer's address when the result is
    the buffer itself (an identity test), and guards it otherwise."""

    reg: int
    shape: tuple
    dtype: np.dtype


@dataclass
class Runner:
    """``fn(regs)`` runs the plan; ``table`` is the template of the address table:
    ``slots`` entries, ``fixed`` (slot -> int), ``from_regs`` (slot -> pooled register whose
    address it holds, filled per register file), ``scratch``: the slot holding the address
    of the register file's kernel scratch and its bytes (native_run.KernelStep)."""

    fn: Callable
    slots: int
    fixed: dict
    from_regs: dict
    chains: int
    native_steps: int
    source: str
    timers: list | None = None  # profiling plans: seconds spent in each instruction so far
    scratch: tuple = (None, 0)  # (slot, bytes) of the kernels' scratch, one per register file
    parallel_steps: int = 0  # steps the chains split from inside (chain_split.py) at > 1 thread


def compile_run(instructions: list, fixed_regs: dict, params: dict, table: int,
                chains: bool = True, profile: bool = False) -> Runner:
    """``instructions`` as one function. ``params``: register -> (shape, dtype) of each tensor
    parameter the VM checks; ``fixed_regs``: the plan's constants; ``table``: the register
    holding (address table, its address). ``profile``: every instruction (each native step
    by itself) between two clock reads, its seconds added to ``Runner.timers`` (profile.py);
    plans for normal runs never carry these lines."""
    writer = _Writer(fixed_regs, params, table, chains and not profile)
    writer.profile = profile
    return writer.write(instructions)


class _Writer:
    def __init__(self, fixed_regs: dict, params: dict, table: int, chains: bool):
        self.fixed_regs = fixed_regs
        self.params = params
        self.table = table
        self.use_chains = chains
        self.lines: list[str] = []
        self.where: dict[int, str] = {}   # line number -> binding, for errors
        self.names: dict[str, object] = {}
        self.slots = 0
        self.fixed_slots: dict[int, int] = {}
        self.reg_slots: dict[int, int] = {}
        self.known: dict[int, tuple] = {}   # register -> (slot, shape, dtype) of a value
        self.param_slots: dict[int, int] = {}
        self.chains: list[Chain] = []
        self.native_steps = 0
        self.profile = False
        self.scratch_slot: int | None = None  # slot of the register file's kernel scratch
        self.scratch_bytes = 0
        self.parallel_chains: dict[int, Chain] = {}  # chain index -> its parallel form
        self.want_slot: int | None = None  # helpers a parallel step wakes (threads - 1)
        self.parallel_steps = 0

    def _name(self, prefix: str, value) -> str:
        name = f"{prefix}{len(self.names)}"
        self.names[name] = value
        return name

    def _slot(self) -> int:
        self.slots += 1
        return self.slots - 1

    def _emit(self, line: str, where: str = "") -> None:
        self.lines.append(line)
        if where:
            self.where[len(self.lines)] = where

    # -- program ----------------------------------------------------------------------------
    def write(self, instructions: list) -> Runner:
        for reg, (shape, dtype) in self.params.items():
            self.known[reg] = (None, shape, dtype)  # slot given on first native use
        if self.profile:
            return self._write_profiled(instructions)
        run: list = []
        for instr in instructions:
            if _splits(instr):  # a chain of its own: see _chain
                self._chain(run)
                self._chain([instr], split=True)
                run = []
                continue
            if run and self.use_chains and self._rides_along(instr, run):
                run.append(instr)  # a free view between chain steps: see _view_result
                continue
            if isinstance(instr[4], NativeCall):
                run.append(instr)
                if self.use_chains and len(run) < MAX_CHAIN:
                    continue
            self._chain(run)
            run = []
            if not isinstance(instr[4], NativeCall):
                self._python(instr)
        self._chain(run)
        return self._finish()

    def _write_profiled(self, instructions: list) -> Runner:
        for k, instr in enumerate(instructions):
            self._emit("_t = CLOCK()")
            if isinstance(instr[4], NativeCall):
                self._chain([instr], split=_splits(instr))
            else:
                self._python(instr)
            self._emit(f"PT[{k}] += CLOCK() - _t")
        return self._finish([0.0] * len(instructions))

    def _rides_along(self, instr, run: list) -> bool:
        """Whether a Python instruction can join the pending chain ``run``: a free view
        (a static reshape, dispatch/resolve.static_view) of a buffer with a table slot, a
        chain step's result or one known before the chain. Its address is its input's, so
        the steps after it read that slot, and its Python line runs after the chain, in
        order with the steps' results (the planner keeps a view's buffer alive as long as the
        view: it aliases)."""
        shape = getattr(instr[0], "free_view", None)
        if shape is None or not instr[1]:
            return False
        src = instr[1][0]
        made = {i[2] for i in run  # tensors the pending instructions define
                if not isinstance(i[4], NativeCall) or i[4].step.single}
        known = self.known.get(src)
        return src in made or (known is not None and src not in self.fixed_regs and (
            isinstance(known[0], int) or (known[0] is None and src in self.params)))

    def _view_result(self, instr) -> tuple:
        """(register, Python expression) of a free view riding along a chain; what later
        steps know of it: its input's slot, its own shape."""
        fn, ins, out, where, _ = instr
        slot, _, dtype = self.known[ins[0]]
        if slot is None:  # a parameter: its address is taken once per call
            slot = self.param_slots[ins[0]] = self._slot()
            self.known[ins[0]] = (slot, *self.known[ins[0]][1:])
        self.known[out] = (slot, fn.free_view, dtype)
        return out, f"{self._name('F', fn)}({', '.join(f'regs[{i}]' for i in ins)})", where

    def _python(self, instr) -> None:
        fn, ins, out, where, _ = instr
        args = ", ".join(f"regs[{i}]" for i in ins)
        self._emit(f"regs[{out}] = {self._name('F', fn)}({args})", where)
        self.known.pop(out, None)
        if isinstance(instr[4], Pooled):
            self.known[out] = (instr[4], instr[4].shape, instr[4].dtype)
        if ins[:1] == (0,):  # an If runs instructions on the registers: forget what we knew
            self.known = {r: k for r, k in self.known.items() if r in self.params}

    def _chain(self, instrs: list, split: bool = False) -> None:
        """One chain function for ``instrs``. ``split``: one kernel step that splits across
        threads at its size: while more than one thread is allowed the kernel object runs it
        instead (its own split); the chain calls it on this thread."""
        if not instrs:
            return
        chain = Chain([], [], [])
        parallel = Chain([], [], [])  # the same steps, each with a parallel entry calling it
        index = len(self.chains)
        self.chains.append(chain)
        fresh: list[str] = []
        results: list[tuple] = []
        for instr in instrs:
            if not isinstance(instr[4], NativeCall):
                results.append(self._view_result(instr))
                continue
            call: NativeCall = instr[4]
            step = call.step
            slots = [self._input_slot(src, spec, step, instr[3])
                     for src, spec in zip(call.sources, step.specs)]
            outs = []
            for buf, spec in zip(call.buffers, step.specs[len(call.sources):]):
                slot, ref = self._output_slot(buf, fresh)
                slots.append(slot)
                outs.append((ref, slot, spec))
            buffers = list(slots)
            if getattr(step, "scratch", 0):  # the register file's scratch, after the outputs
                slots.append(self._scratch_slot(step.scratch))
            chain.steps.append(step)
            chain.fn_slots.append(self._fixed(step.address))
            chain.arg_slots.append(slots)
            chain.dim_slots.append([self._fixed(d) for d in step.dims])
            self._parallel_step(parallel, chain, step, buffers)
            self.native_steps += 1
            if step.single:  # later steps of the chain read it from its slot
                results.append((call.out, outs[0][0], ""))
                self.known[call.out] = (outs[0][1], outs[0][2].shape, outs[0][2].dtype)
            else:
                results.append((call.out, "(" + "".join(o[0] + ", " for o in outs) + ")", ""))
                self.known.pop(call.out, None)
        pad = ""
        if split:
            instr = instrs[0]
            values = [f"regs[{r}]" if i is None else f"regs[{r}][{i}]"
                      for r, i in instr[4].sources] + [ref for ref, _, _ in outs]
            self._emit("if SPLIT():")
            self._emit(f"    {self._name('F', instr[4].step)}({', '.join(values)})", instr[3])
            self._emit("else:")
            pad = "    "
        if any(isinstance(st, ParallelEntry) for st in parallel.steps):
            self.parallel_chains[index] = parallel
            self._emit(f"{pad}s = (CP{index} if PAR else C{index})(TA)")
        else:
            self._emit(f"{pad}s = C{index}(TA)")
        self._emit(f"{pad}if s: FAIL({index}, s, T)")
        for out, result, where in results:
            self._emit(f"regs[{out}] = {result}", where)

    def _parallel_step(self, parallel: Chain, chain: Chain, step, buffers: list) -> None:
        """Step ``step`` of the chain run at more than one thread: its parallel entry
        (chain_split.py: its buffers, the scratch of its parts, the helpers to wake), or the
        serial chain's step itself."""
        entry = getattr(step, "parallel", None)
        if entry is None:
            parallel.steps.append(step)
            for mine, theirs in ((parallel.fn_slots, chain.fn_slots),
                                 (parallel.arg_slots, chain.arg_slots),
                                 (parallel.dim_slots, chain.dim_slots)):
                mine.append(theirs[-1])
            return
        if self.want_slot is None:
            self.want_slot = self._slot()
        parallel.steps.append(entry)
        self.parallel_steps += 1
        parallel.fn_slots.append(self._fixed(entry.address))
        parallel.arg_slots.append(buffers + [self._scratch_slot(entry.scratch), self.want_slot])
        parallel.dim_slots.append([self._fixed(d) for d in entry.dims])

    def _fixed(self, value: int) -> int:
        slot = self._slot()
        self.fixed_slots[slot] = int(value)
        return slot

    def _scratch_slot(self, nbytes: int) -> int:
        if self.scratch_slot is None:
            self.scratch_slot = self._slot()
        self.scratch_bytes = max(self.scratch_bytes, nbytes)
        return self.scratch_slot

    def _input_slot(self, src: tuple, spec, step, where: str) -> int:
        reg, index = src
        if index is None:
            known = self.known.get(reg)
            if known is not None and known[1] == spec.shape and known[2] == spec.dtype:
                if isinstance(known[0], Pooled):
                    return self._maybe_pooled(reg, known[0], spec, step, where)
                if known[0] is None:  # a parameter: its address is taken once per call
                    slot = self.param_slots[reg] = self._slot()
                    self.known[reg] = (slot, known[1], known[2])
                    return slot
                return known[0]
            const = self.fixed_regs.get(reg)
            if const is not None and _fits(const, spec):
                return self._fixed(const.ctypes.data)
        slot = self._slot()
        value = f"regs[{reg}]" if index is None else f"regs[{reg}][{index}]"
        check = self._name("G", (spec.shape, spec.dtype, step.op, spec.name))
        self._emit(f"T[{slot}] = P({value}, {check}, K)", where)
        return slot

    def _maybe_pooled(self, reg: int, pooled: Pooled, spec, step, where: str) -> int:
        slot = self._slot()
        check = self._name("G", (spec.shape, spec.dtype, step.op, spec.name))
        self._emit(f"T[{slot}] = T[{self._buffer_slot(pooled.reg)}] if regs[{reg}] is "
                   f"regs[{pooled.reg}] else P(regs[{reg}], {check}, K)", where)
        return slot

    def _buffer_slot(self, reg: int) -> int:
        if reg not in self.reg_slots:
            self.reg_slots[reg] = self._slot()
        return self.reg_slots[reg]

    def _output_slot(self, buf: tuple, fresh: list) -> tuple:
        if buf[0] == "pooled":
            return self._buffer_slot(buf[1]), f"regs[{buf[1]}]"
        slot = self._slot()
        local = f"B{slot}"
        self._emit(f"{local} = EMPTY({buf[1]!r}, {self._name('D', buf[2])})")
        self._emit(f"T[{slot}] = ADDR({local})")
        return slot, local

    # -- the function -----------------------------------------------------------------------
    def _finish(self, timers: list | None = None) -> Runner:
        head = ["def run_plan(regs):", f"    T, TA, _ = regs[{self.table}]", "    K = []"]
        head += [f"    T[{slot}] = ADDR(regs[{reg}])"
                 for reg, slot in self.param_slots.items()]
        if self.parallel_chains:
            head.append(f"    PAR = PARALLEL(T, {self.want_slot})")
        head.append("    try:")
        offset = len(head)
        body = ["        " + line for line in self.lines] or ["        pass"]
        tail = ["    except BaseException as exc:", "        RAISE(exc, WHERE)"]
        source = "\n".join(head + body + tail) + "\n"
        _counter[0] += 1
        filename = _SOURCE.format(_counter[0])
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        where = {offset + n: w for n, w in self.where.items()}
        cfuncs = compile_chains(self.chains)
        chains = self.chains
        scope = dict(self.names, P=_pointer, K=None, EMPTY=np.empty, WHERE=where,
                     SPLIT=_split_allowed, ADDR=data_address,
                     RAISE=_reraise, FAIL=lambda index, s, table: _fail(chains[index], s, table))
        scope.update({f"C{i}": f for i, f in enumerate(cfuncs)}, PT=timers, CLOCK=perf_counter)
        indices = sorted(self.parallel_chains)
        pfuncs = compile_chains([self.parallel_chains[i] for i in indices])
        scope.update({f"CP{i}": f for i, f in zip(indices, pfuncs)}, PARALLEL=_parallel)
        exec(compile(source, filename, "exec"), scope)  # noqa: S102 - our own generated code
        return Runner(scope["run_plan"], self.slots, self.fixed_slots,
                      {slot: reg for reg, slot in self.reg_slots.items()}, len(self.chains),
                      self.native_steps, source, timers,
                      (self.scratch_slot, self.scratch_bytes), self.parallel_steps)


def _splits(instr) -> bool:
    """A step the kernel object splits (a chain of its own); one with a parallel entry stays
    in its chain."""
    step = instr[4].step if isinstance(instr[4], NativeCall) else None
    return getattr(step, "splits", False) and getattr(step, "parallel", None) is None


def _split_allowed() -> bool:
    return task_threads() > 1


def _parallel(table, slot: int) -> bool:
    """Whether this call runs the chains' parallel forms; if so, the helpers they wake."""
    threads = task_threads()
    if threads < 2:
        return False
    table[slot] = threads - 1
    pool = get_pool()
    pool.ensure_workers(threads - 1)
    cpu = _getcpu()
    if cpu in pool.pinned.values():
        pool.keep_off(cpu)
    return True


@functools.cache
def _cpu_reader():
    return ctypes.CFUNCTYPE(ctypes.c_int)(get_pool().caller_cpu)


def _getcpu() -> int:
    """The CPU this thread runs on now (libc's sched_getcpu, ~0.1 us)."""
    return _cpu_reader()()


def _fits(value, spec) -> bool:
    return (type(value) is np.ndarray and value.shape == spec.shape
            and value.dtype == spec.dtype and value.flags.c_contiguous and value.flags.aligned)


def _pointer(value, check: tuple, keep: list) -> int:
    """The address of a guarded value; a copy made for it is kept alive for this call."""
    array = guard(value, *check)
    if array is not value:
        keep.append(array)
    return data_address(array)


def _fail(chain: Chain, status: int, table):
    k = (status >> 8) - 1  # a chain returns its failing step above the step's status
    step = chain.steps[k]
    arrays = arrays_at(step.specs, [table[slot] for slot in chain.arg_slots[k]])
    raise status_error(status & 0xFF, step.op, step.where, step.kernel.func, arrays)


def _reraise(exc: BaseException, where: dict):
    """Name the binding whose line raised (as plan.run does), keeping the error's type."""
    tb = exc.__traceback__
    while tb is not None and not tb.tb_frame.f_code.co_filename.startswith("<msc plan"):
        tb = tb.tb_next
    at = where.get(tb.tb_lineno) if tb is not None else None
    if isinstance(exc, MSCError):
        if at and not getattr(exc, "__notes__", None):
            exc.add_note(f"while running {at}")
        raise exc
    if isinstance(exc, Exception):
        raise RuntimeCallError(f"{type(exc).__name__}: {exc}", node=at) from exc
    raise exc
