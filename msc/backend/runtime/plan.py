"""The VM's program form and its per-shape plan: liveness, buffer reuse, instructions.

``build`` lowers a Relax function once into a :class:`Program`: values (numbered) and nodes
in binding order, each call already resolved to a callable. Everything that depends on
concrete shapes is done here, once per shape signature (the values of the symbolic dims)::

    plan = make_plan(program, {"n": 4})    # cached by the VM per signature
    regs = plan.new_registers()            # template: constants, shapes, pooled buffers
    plan.runner.fn(regs)                   # the instructions as one generated function
    run(plan.instructions, regs)           # the same, interpreted (If branches use this):
                                           # for fn, ins, out: regs[out] = fn(*regs[ins])

Compiled TIR kernels whose buffer shapes are known for the signature are checked against
their PrimFunc once, here, and become native steps (native_run.py): the generated function
(plan_code.py) calls runs of consecutive steps through one native chain function each.

Memory. A node that writes into preallocated outputs (native kernels, call_dps_packed,
call_tir) gets its buffers from the plan. Liveness is computed over the binding order: a
buffer lives from its node to the last use of any value that may alias it (results of
view-making numpy ops and of packed calls are assumed to be views of their inputs, tuples and
get-items alias their fields; the build copies the rare overlapping result of an op that
computes new arrays, so those alias nothing).
Buffers are reused greedily when one of equal byte size is free. Buffers that can reach the
function's result are allocated fresh on every call, so results handed out earlier are never
overwritten. Values whose shapes depend on data (``R.match_cast`` of a computed value) are
allocated when the node runs, from the dims bound so far.
"""

from __future__ import annotations

import ctypes
import operator
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import MSCError, RuntimeCallError, ShapeError
from ...relax.struct_info import TensorStructInfo, TupleStructInfo
from .arrays import np_dtype
from .concat_nest import nested_concats
from .match import match_value
from .native_run import ArgSpec, kernel_step, native_step
from .plan_code import NativeCall, Pooled, Runner, compile_run
from .program import NOVALUE, Node, Program, analyze, eval_dims, eval_prim, node_inputs
from .threads import copy_into

__all__ = ["Plan", "make_plan", "run"]

REGS, ENV, TABLE = 0, 1, 2  # the register list itself (If branches), the dim env, and the
# (address table, its address) of native steps (plan_code.py): one of each per register file
_ALIGN = 64


def _nbytes(shape: tuple, dtype: np.dtype) -> int:
    return int(np.prod(shape, dtype=np.int64)) * dtype.itemsize


# ---------------------------------------------------------------------------------------------
# The plan.


@dataclass
class Plan:
    """Instructions plus everything needed to make a register file for one shape signature.

    ``stats``: peak_bytes (pooled buffers), planned_bytes (what the same buffers would take
    without reuse), fresh_bytes (result buffers, per call), buffers, dynamic_buffers (sized
    at run time), storages.
    """

    instructions: list
    num_registers: int
    fixed: dict          # register -> value shared by every register file (consts, shapes)
    storages: list       # nbytes of each pooled storage
    views: list          # (register, storage, shape, dtype, byte offset) of each pooled buffer
    params: list         # register of each parameter
    result: int          # register of the result
    env: dict            # the signature: symbolic dim name -> value
    stats: dict
    runner: Runner | None = None
    nodes: list = field(default_factory=list)  # the program node of each instruction

    @property
    def peak_bytes(self) -> int:
        """Activation bytes one call holds at most, as planned: the pooled storages (made
        with each register file, reused between buffers) plus the result buffers allocated
        fresh per call. Not counted: buffers sized at run time (``stats["dynamic_buffers"]``)
        and arrays that ops on the numpy path allocate themselves. (``stats["peak_bytes"]``
        is the pooled part only.)"""
        return sum(self.storages) + self.stats.get("fresh_bytes", 0)

    @property
    def constant_ids(self) -> frozenset:
        """ids of the constant arrays: a result that is one is copied before it is returned,
        so callers cannot change the executable's constants."""
        ids = self.__dict__.get("_constant_ids")
        if ids is None:
            ids = frozenset(id(v) for v in self.fixed.values() if isinstance(v, np.ndarray))
            self.__dict__["_constant_ids"] = ids
        return ids

    def new_registers(self) -> list:
        """A register file with its own pooled buffers (one per concurrent caller)."""
        regs = [None] * self.num_registers
        for reg, value in self.fixed.items():
            regs[reg] = value
        raw = [_aligned_bytes(n) for n in self.storages]
        for reg, storage, shape, dtype, at in self.views:
            regs[reg] = raw[storage][at: at + _nbytes(shape, dtype)].view(dtype).reshape(shape)
        runner = self.runner
        table = (ctypes.c_int64 * max(runner.slots if runner else 0, 1))()
        scratch = None
        if runner is not None:
            for slot, value in runner.fixed.items():
                table[slot] = value
            for slot, reg in runner.from_regs.items():
                table[slot] = regs[reg].ctypes.data
            slot, nbytes = runner.scratch
            if slot is not None:  # the chain kernels' scratch: this register file's own
                scratch = _aligned_bytes(nbytes)
                table[slot] = scratch.ctypes.data
        regs[TABLE] = (table, ctypes.addressof(table), scratch)
        return regs


def _aligned_bytes(nbytes: int) -> np.ndarray:
    raw = np.empty(nbytes + _ALIGN, np.uint8)
    start = -raw.ctypes.data % _ALIGN
    return raw[start: start + nbytes]


def make_plan(program: Program, env: dict, *, native: bool = True, chains: bool = True,
              profile: bool = False) -> Plan:
    """Plan ``program`` for the dims in ``env`` (symbolic var name -> int). ``native=False``
    keeps every TIR kernel behind its checked Python entry; ``chains=False`` calls each
    native step by itself (both for measurements and tests); ``profile`` times every
    instruction (``plan.runner.timers``, read by profile.py)."""
    return _Planner(program, env, native).plan(chains, profile)


class _Planner:
    def __init__(self, program: Program, env: dict, native: bool = True):
        self.program = program
        self.env = dict(env)
        self.native = native
        self.a = program.analysis
        self.reg_of: dict[int, int] = {}
        self.fixed: dict[int, Any] = {}
        self.next_reg = TABLE + 1
        self.free_regs: list[int] = []
        self.static_values: dict[int, Any] = {}
        self.concats: dict = {}
        self.concat_regs: dict = {}  # id(group) -> registers of (the result, its slices)

    # -- registers --------------------------------------------------------------------------
    def _new_reg(self) -> int:
        if self.free_regs:
            return self.free_regs.pop()
        self.next_reg += 1
        return self.next_reg - 1

    def _fixed_reg(self, value) -> int:
        self.next_reg += 1
        self.fixed[self.next_reg - 1] = value
        return self.next_reg - 1

    def reg(self, vid: int) -> int:
        """Register of value ``vid``; compile-time values get a fixed register on first use."""
        if vid not in self.reg_of:
            value = self.program.values[vid]
            if value.const is NOVALUE:
                raise ShapeError(f"value {value.name or vid} is used before it is defined",
                                 node=self.program.name)
            self.reg_of[vid] = self._fixed_reg(value.const)
        return self.reg_of[vid]

    def _define(self, vid: int) -> int:
        if vid in self.static_values:
            self.reg_of[vid] = self._fixed_reg(self.static_values[vid])
        else:
            self.reg_of[vid] = self._new_reg()
        return self.reg_of[vid]

    def _release(self, node: Node, p: int) -> None:
        last = self.a.value_last_use
        for vid in {*node_inputs(node), node.out}:
            reg = self.reg_of.get(vid)
            if reg is not None and last.get(vid, p) <= p and reg not in self.fixed:
                self.free_regs.append(reg)
                del self.reg_of[vid]

    # -- planning ---------------------------------------------------------------------------
    def plan(self, chains: bool = True, profile: bool = False) -> Plan:
        param_regs = [self._param_reg(vid) for vid in self.program.params]
        self._pre_evaluate()
        self.concats = self._concat_groups()
        self._assign_buffers()
        self.instructions = {}
        for node in self.a.order:
            self.instructions[id(node)] = self._emit(node)
            self._release(node, self.a.position[id(node)])
        result = self.reg(self.program.result)
        nodes = [n for n in self.program.nodes if self.instructions[id(n)]]
        instrs = [self.instructions[id(n)] for n in nodes]
        params = {reg: spec for vid, reg in zip(self.program.params, param_regs)
                  if (spec := self._static_tensor(self.program.values[vid].sinfo))}
        runner = compile_run(instrs, self.fixed, params, TABLE, chains, profile)
        stats = dict(self._stats(), native_steps=runner.native_steps, chains=runner.chains,
                     parallel_steps=runner.parallel_steps)
        return Plan(instrs, self.next_reg, self.fixed, self.storages, self.views, param_regs,
                    result, self.env, stats, runner, nodes)

    def _static_tensor(self, sinfo) -> tuple | None:
        """(shape, dtype) of a tensor struct info whose dims the signature fixes."""
        if not isinstance(sinfo, TensorStructInfo) or sinfo.dtype == "void":
            return None
        shape = eval_dims(sinfo.values, self.env)
        return None if shape is None else (shape, np_dtype(sinfo.dtype))

    def _param_reg(self, vid: int) -> int:
        self.reg_of[vid] = self._new_reg()
        return self.reg_of[vid]

    def _pre_evaluate(self) -> None:
        """Shapes and prim values computable from the signature become fixed registers."""
        for node in self.a.order:
            if node.kind != "eval":
                continue
            value = self.program.values[node.out]
            if isinstance(value.expr, tuple):
                dims = eval_dims(value.expr, self.env)
            else:
                dims = eval_prim(value.expr, self.env)
            if dims is not None:
                self.static_values[node.out] = dims

    def _assign_buffers(self) -> None:
        """Greedy reuse of equal-sized pooled buffers over the position order."""
        a = self.a
        self.buffer_kind: list = [None] * len(a.buffer_sinfo)
        self.storages, self.views = [], []
        free: dict[int, list] = defaultdict(list)
        groups_of = defaultdict(list)  # buffer -> the concat groups it is in
        for group in self.concats.values():
            for b in group[0] + ([group[2]] if group[2] is not None else []):
                groups_of[b].append(group)
        self.nested = nested_concats(list(self.concats.values()))
        self.inner = defaultdict(dict)  # id(group) -> {slice index: the concat nested there}
        for child in self.concats.values():
            if id(child) in self.nested:
                parent, index = self.nested[id(child)]
                self.inner[id(parent)][index] = child
        releases: dict[int, list] = defaultdict(list)
        planned = fresh = 0
        self.dynamic = 0
        for node in a.order:
            p = a.position[id(node)]
            for b in a.buffers[id(node)]:
                sinfo = a.buffer_sinfo[b]
                dtype = np_dtype(sinfo.dtype)
                shape = eval_dims(sinfo.values, self.env)
                if shape is None:
                    self.buffer_kind[b] = ("dynamic", sinfo.values, dtype)
                    self.dynamic += 1
                elif b in a.fresh:
                    self.buffer_kind[b] = ("fresh", shape, dtype)
                    fresh += _nbytes(shape, dtype)
                elif b in groups_of:  # each group is placed at its first buffer
                    for group in groups_of[b]:
                        top = self._outermost(group)  # with the concats nested in it
                        if id(top) not in self.concat_regs:
                            planned += self._place_group(top, free, releases)
                else:
                    nbytes = _nbytes(shape, dtype)
                    planned += nbytes
                    storage = free[nbytes].pop() if free[nbytes] else self._new_storage(nbytes)
                    self.buffer_kind[b] = ("pooled", self._fixed_buffer_reg(), None)
                    self.views.append((self.buffer_kind[b][1], storage, shape, dtype, 0))
                    releases[a.buffer_last_use[b]].append((nbytes, storage))
            for nbytes, storage in releases.pop(p, ()):
                free[nbytes].append(storage)
        self.planned_bytes, self.fresh_bytes = planned, fresh

    # -- concat in place: producers write into slices of the result -----------------------
    def _concat_groups(self) -> dict:
        """id(concat node) -> (its inputs' buffers, its (shape, dtype)) for each concat
        whose inputs (each a distinct call's single pooled buffer) can be laid end to end in
        one storage that is the result: concat then costs nothing (squeezenet's fire modules).
        The result aliases the inputs' buffers, so they live as long as it does."""
        producer = {n.out: n for n in self.program.nodes if n.kind == "call"}
        found = {}
        for node in self.program.nodes:
            if node.kind == "call" and node.op == "concat" and len(node.dps) <= 1 and (
                    group := self._concat_slices(node, producer)) is not None:
                found[id(node)] = group
        merged = frozenset(k for k, g in found.items() if g[2] is None)
        if merged:  # a concat that allocates its result: make it a view of its inputs
            self.a = analyze(self.program, merged)
        return {k: g for k, g in found.items()
                if not {*g[0], *g[2:3]} & self.a.fresh}

    def _concat_slices(self, node: Node, producer: dict) -> tuple | None:
        fields = self.program.values[node.ins[0]].fields if len(node.ins) == 1 else None
        out = self._static_tensor(self.program.values[node.out].sinfo)
        if not fields or out is None or len(set(fields)) != len(fields):
            return None
        bufs, shapes = [], []
        for vid in fields:
            p = producer.get(vid)
            ids = self.a.buffers.get(id(p), ()) if p is not None else ()
            spec = self._static_tensor(self.program.values[vid].sinfo)
            if len(ids) != 1 or spec is None or spec[1] != out[1] or (
                    self._static_tensor(self.a.buffer_sinfo[ids[0]]) != spec):
                return None
            bufs.append(ids[0])
            shapes.append(spec[0])
        own = self.a.buffers[id(node)][0] if node.dps else None  # the concat's own buffer
        return (bufs, out, own) if _end_to_end(shapes, out) else None

    def _outermost(self, group: tuple) -> tuple:
        while id(group) in self.nested:
            group = self.nested[id(group)][0]
        return group

    def _place_group(self, group: tuple, free: dict, releases: dict) -> int:
        """One storage for ``group`` and the concats nested in it (densenet's chain: each
        concat is the first slice of the next, so no concat of the chain copies)."""
        out_shape, dtype = group[1]
        total = _nbytes(out_shape, dtype)
        storage = free[total].pop() if free[total] else self._new_storage(total)
        buffers = self._lay_out(group, storage, 0, self._fixed_buffer_reg())
        releases[max(self.a.buffer_last_use[b] for b in buffers)].append((total, storage))
        return total

    def _lay_out(self, group: tuple, storage: int, base: int, whole: int) -> list:
        """Views of ``group``'s slices in ``storage`` from byte ``base``, its result the view
        register ``whole``; a slice that is a nested concat's result is laid out in place.
        Returns every buffer placed."""
        bufs, (out_shape, dtype), own = group
        inner = self.inner[id(group)]
        at, slices, placed = base, [], list(bufs) + ([own] if own is not None else [])
        for k, b in enumerate(bufs):
            # a buffer in two groups (a conv read by two concats) is written by its producer
            # into the group placed last; the other concat copies it, so each concat keeps
            # the slice registers it was given here
            slices.append(self._fixed_buffer_reg())
            self.buffer_kind[b] = ("pooled", slices[-1], None)
            shape = self._static_tensor(self.a.buffer_sinfo[b])[0]
            if k in inner:  # a nested concat's result: its view is the slice's register
                placed += self._lay_out(inner[k], storage, at, slices[-1])
            else:
                self.views.append((slices[-1], storage, shape, dtype, at))
            at += _nbytes(shape, dtype)
        self.views.append((whole, storage, out_shape, dtype, base))
        self.concat_regs[id(group)] = (whole, tuple(slices))
        if own is not None:
            self.buffer_kind[own] = ("pooled", whole, None)
        return placed

    def _new_storage(self, nbytes: int) -> int:
        self.storages.append(nbytes)
        return len(self.storages) - 1

    def _fixed_buffer_reg(self) -> int:
        self.next_reg += 1  # filled by Plan.new_registers with a view of its storage
        return self.next_reg - 1

    def _stats(self) -> dict:
        return {"peak_bytes": sum(self.storages), "planned_bytes": self.planned_bytes,
                "fresh_bytes": self.fresh_bytes, "buffers": len(self.views),
                "dynamic_buffers": self.dynamic,
                "storages": len(self.storages), "registers": self.next_reg,
                "env": dict(self.env)}

    # -- instructions -----------------------------------------------------------------------
    def _emit(self, node: Node):
        if node.kind == "eval" and node.out in self.static_values:
            self._define(node.out)
            return None
        ins = tuple(self.reg(i) for i in node.ins)
        where = f"{node.name or node.kind} = {node.op or node.kind}(...)"
        self.where = where + (f" [{node.path}]" if node.path else "")
        fn, regs, out, *native = getattr(self, "_emit_" + node.kind)(node, ins)
        return (fn, regs, out, self.where, native[0] if native else None)

    def _emit_call(self, node: Node, ins: tuple):
        bufs = self.a.buffers[id(node)]
        if id(node) in self.concats:
            whole, slices = self.concat_regs[id(self.concats[id(node)])]
            return (_concat_in_place, ins + (whole, *slices), self._define(node.out))
        env_ins = ((ENV,) if node.wants_env else ()) + ins
        if not bufs:
            return (node.fn, env_ins, self._define(node.out))
        kinds = [self.buffer_kind[b] for b in bufs]
        step = (self._native_step(node, ins, kinds) if node.tir is not None else
                self._kernel_step(node, ins, kinds) if not node.wants_env else None)
        fn = step.step if step is not None else node.fn
        if step is None:
            ins = env_ins
        out = self._define(node.out)
        if step is not None:
            step.out = out
        if step is None and len(kinds) == 1 and kinds[0][0] == "pooled" and (
                spec := self._static_tensor(node.dps[0])):
            step = Pooled(kinds[0][1], *spec)  # the result is (normally) that buffer
        if all(k[0] == "pooled" for k in kinds):
            return (fn, ins + tuple(k[1] for k in kinds), out, step)
        pooled = tuple(k[1] for k in kinds if k[0] == "pooled")
        return (_with_allocation(fn, len(ins), kinds), (ENV,) + ins + pooled, out,
                step if isinstance(step, NativeCall) else None)

    def _native_step(self, node: Node, ins: tuple, kinds: list) -> NativeCall | None:
        """A TIR kernel call with every buffer shape known: checked now, run natively."""
        if not self.native or any(k[0] == "dynamic" for k in kinds):
            return None
        sources, specs = [], []
        params = [p.name for p in node.tir.func.params]
        for vid, reg in zip(node.ins, ins):
            value = self.program.values[vid]
            sinfo = value.sinfo
            fields = (((None, sinfo),) if isinstance(sinfo, TensorStructInfo) else
                      enumerate(sinfo.fields) if isinstance(sinfo, TupleStructInfo) else None)
            if fields is None:
                return None
            for index, field_sinfo in fields:
                spec = self._static_tensor(field_sinfo)
                if spec is None or len(specs) >= len(params):
                    return None
                sources.append((reg, index))
                # errors name the program's value (kernels are shared by position-named params)
                name = value.name or params[len(specs)]
                name = name if index is None else f"{name}[{index}]"
                specs.append(ArgSpec(name, *spec, False))
        buffers = []
        for k, sinfo in zip(kinds, node.dps):
            spec = self._static_tensor(sinfo)
            if spec is None or len(specs) >= len(params):
                return None
            specs.append(ArgSpec(params[len(specs)], *spec, True))
            buffers.append(("pooled", k[1]) if k[0] == "pooled" else ("fresh", *spec))
        single = isinstance(self.program.values[node.out].sinfo, TensorStructInfo)
        step = native_step(node.tir, specs, len(ins), single, self.where, self.env)
        return None if step is None else NativeCall(step, sources, buffers, -1)

    def _kernel_step(self, node: Node, ins: tuple, kinds: list) -> NativeCall | None:
        """A hand-written kernel with a native signature for these static buffers: called
        from the chain like a TIR kernel, so no Python runs between the two."""
        if not self.native or not hasattr(node.fn, "native_signature") or any(
                k[0] == "dynamic" for k in kinds):
            return None
        specs = []
        for k, vid in enumerate(node.ins):
            value = self.program.values[vid]
            spec = self._static_tensor(value.sinfo)
            if spec is None:
                return None
            specs.append(ArgSpec(value.name or f"input {k}", *spec, False))
        buffers = []
        for k, sinfo in zip(kinds, node.dps):
            spec = self._static_tensor(sinfo)
            if spec is None:
                return None
            specs.append(ArgSpec("out", *spec, True))
            buffers.append(("pooled", k[1]) if k[0] == "pooled" else ("fresh", *spec))
        single = isinstance(self.program.values[node.out].sinfo, TensorStructInfo)
        step = kernel_step(node.fn, specs, single, self.where)
        return None if step is None else NativeCall(step, [(r, None) for r in ins], buffers, -1)

    def _emit_tuple(self, node: Node, ins: tuple):
        return (_make_tuple, ins, self._define(node.out))

    def _emit_getitem(self, node: Node, ins: tuple):
        return (operator.itemgetter(node.index), ins, self._define(node.out))

    def _emit_eval(self, node: Node, ins: tuple):
        value = self.program.values[node.out]
        return (_runtime_eval(value.expr, value.name), (ENV,), self._define(node.out))

    def _emit_match_cast(self, node: Node, ins: tuple):
        check = _match_checker(node.sinfo, node.name)
        return (check, (ENV,) + ins, self._define(node.out))

    def _emit_if(self, node: Node, ins: tuple):
        branches = []
        for nodes, result in node.branches:
            instrs = [i for n in nodes if (i := self.instructions[id(n)])]
            branches.append((instrs, self.reg(result)))
        return (_if_runner(*branches), (REGS,) + ins, self._define(node.out))


def _end_to_end(shapes: list, out: tuple) -> bool:
    """Whether concatenating arrays of ``shapes`` into ``out`` lays them end to end in
    memory (every dim before the concat axis is 1) at 64-byte aligned offsets."""
    shape, dtype = out
    axis = next((k for k, (d, e) in enumerate(zip(shape, shapes[0])) if d != e), None)
    if axis is None or any(len(s) != len(shape) for s in shapes) or (
            int(np.prod(shape[:axis])) != 1):
        return False
    rest = shape[:axis] + shape[axis + 1:]
    return (all(s[:axis] + s[axis + 1:] == rest for s in shapes)
            and sum(s[axis] for s in shapes) == shape[axis]
            and all(_nbytes(s, dtype) % _ALIGN == 0 for s in shapes[:-1]))


def _concat_in_place(fields, whole, *slices):
    """A concat whose inputs' producers wrote into slices of its result: only an input that
    is not its slice (a kernel that returned another array) is copied."""
    for value, part in zip(fields, slices):
        if value is not part:
            copy_into(part, value)  # split across the kernel threads when large
    return whole


def _make_tuple(*fields):
    return fields


def _with_allocation(fn: Callable, n_in: int, kinds: list) -> Callable:
    """Wrap a DPS ``fn`` so fresh / data-dependent output buffers are allocated per call."""
    makers = []
    for kind, payload, dtype in kinds:
        if kind == "pooled":
            makers.append(None)
        elif kind == "fresh":
            makers.append(lambda env, s=payload, d=dtype: np.empty(s, d))
        else:
            makers.append(lambda env, s=payload, d=dtype: np.empty(_dims_or_raise(s, env), d))

    def run(env, *args):
        pooled = iter(args[n_in:])
        out = [next(pooled) if m is None else m(env) for m in makers]
        return fn(*args[:n_in], *out)

    return run


def _dims_or_raise(values, env: dict) -> tuple:
    dims = eval_dims(values, env)
    if dims is None:
        raise ShapeError(f"cannot size an output of shape {values}: its dims are not bound "
                         "by the inputs or an earlier R.match_cast")
    return dims


def _runtime_eval(expr, name: str) -> Callable:
    if isinstance(expr, tuple):
        return lambda env: _dims_or_raise(expr, env)

    def prim(env):
        value = eval_prim(expr, env)
        if value is None:
            raise ShapeError(f"prim value {expr} is not bound at run time", node=name)
        return value
    return prim


def _if_runner(then_branch, else_branch) -> Callable:
    def run_if(regs, cond):
        instrs, result = then_branch if _truth(cond) else else_branch
        run(instrs, regs)
        return regs[result]
    return run_if


def _truth(cond) -> bool:
    if isinstance(cond, np.ndarray) and cond.size != 1:
        raise ShapeError(f"an If condition must be a scalar, got shape {cond.shape}")
    return bool(cond)


def _match_checker(sinfo, name: str) -> Callable:
    def check(env, value):
        match_value(value, sinfo, env, name)
        return value
    return check


def run(instructions: list, regs: list) -> None:
    """The VM's inner loop (a try block costs nothing until something raises)."""
    for instr in instructions:
        fn, ins, out, _, _ = instr
        try:
            regs[out] = fn(*[regs[i] for i in ins])
        except MSCError as exc:  # keep the type (ShapeError...), say where it happened
            if not getattr(exc, "__notes__", None):
                exc.add_note(f"while running {instr[3]}")
            raise
        except Exception as exc:
            raise RuntimeCallError(f"{type(exc).__name__}: {exc}", node=instr[3]) from exc
