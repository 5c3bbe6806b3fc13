"""``relax.build``: lower a Relax IRModule once into programs the VirtualMachine runs.

    ex = relax.build(mod, target="llvm", params={"w": w})
    ex.stats["kernels"]        # {"native": 3, "numpy": 1, "packed": 0, "tir": 0}
    vm = relax.VirtualMachine(ex, relax.cpu())

Build does the graph-level work once, per function:

1. Lower: walk the bindings (dataflow and plain blocks, tuples, get-items, If, match_cast) into
   a flat :class:`~msc.backend.runtime.program.Program`. Calls of other Relax functions of the
   module are inlined (their symbolic dims renamed to the caller's); tuples known at build time
   are resolved, so ``tup[0]`` costs nothing at run time.
2. QDQ (fuse/qdq/fold.py): quantize / dequantize chains around convs, matmuls and adds become int8
   kernel calls; then patterns (patterns/): transformer blocks become one kernel call each
   (attention, residual layer norm, elementwise chains, dense + activation); dead bindings are
   dropped (pure calls only).
3. Fuse: a native kernel that supports an epilogue absorbs the chain of per-channel bias adds
   and relus that consumes its (single-use) result: conv / matmul + bias + relu is one call.
4. Resolve each op call (dispatch/resolve.py): native kernel, else the op's compiled TIR
   legalization, else numpy fact (``legalize`` changes that order), else the op is reported,
   with every other such op, in one MissingKernelError (a BuildError).

Memory planning and instructions depend on shapes, so they are made per shape signature
(runtime/plan.py); for functions with static shapes that happens here too, which fills
``ex.stats["memory"]``.
"""

from __future__ import annotations

import threading
from collections import Counter

import numpy as np

from ..errors import BuildError
from ..progress import progress
from ..relax.expr import (
    Call,
    Constant,
    DataTypeImm,
    Function,
    GlobalVar,
    If,
    MatchCast,
    PrimValue,
    SeqExpr,
    ShapeExpr,
    StringImm,
    Tuple,
    TupleGetItem,
    Var,
)
from ..relax.module import IRModule
from ..relax.op.registry import Op
from ..relax.struct_info import TensorStructInfo, TupleStructInfo
from ..relax.visitor import substitute_struct_info
from ..tir import expr as tir
from .dispatch.callouts import special
from .dispatch.resolve import LEGALIZE_MODES, MissingKernelError, load_facts, numpy_caller, resolve
from .fuse.patterns import fuse_patterns
from .fuse.qdq.fold import fold_qdq
from .fuse.rewrite import Rewriter, eliminate_dead
from .kernels.base import Impl, Site, kernel_fact
from .kernels.epilogues import epilogue_entries
from .runtime.plan import make_plan
from .runtime.program import NOVALUE, Node, Program

__all__ = ["Executable", "build"]

_MAX_INLINE_DEPTH = 64
_PATHS = {"native", "numpy", "packed", "tir"}


def build(mod, target="llvm", params: dict | None = None, *, fuse: bool = True,
          legalize: str = "prefer", tir_schedules=None) -> Executable:
    """Compile ``mod`` (an IRModule or a single Relax Function) for the host CPU.

    ``params`` binds constants to parameters of ``main`` by name before building (numpy
    arrays, or anything with ``.numpy()``). ``fuse=False`` keeps every op a separate call.
    ``legalize``: when an op's TIR legalization (compiled to native code) is used instead of
    its numpy fact: "prefer" (the default: TIR first, except free views such as reshape and
    the ops listed in ``resolve.NUMPY_FIRST``), "fallback" (only for ops without a numpy
    fact), or "never". Plans call compiled TIR kernels natively, a run of consecutive ones
    in one call (runtime/plan.py, runtime/native_run.py). ``tir_schedules``: a function
    from a legalized PrimFunc to its tuned form, or None for the default lowering (what
    ``meta_schedule.compile_relax`` passes from a tuning database); ``stats["tuned"]``
    counts the calls that run a tuned form.
    """
    if legalize not in LEGALIZE_MODES:
        raise BuildError(f"legalize={legalize!r}", hint=f"one of {LEGALIZE_MODES}")
    mod = _as_module(mod)
    _check_target(target)
    if params:
        from ..relax.transform import BindParams

        mod = BindParams("main", params)(mod)
    load_facts()
    lowerer = _Lowerer(mod, fuse, legalize, tir_schedules)
    programs = {name: lowerer.lower_function(name, func)
                for name, func in _relax_functions(mod)}
    if lowerer.missing:
        items = [{"op": op, "count": n} for op, n in sorted(lowerer.missing.items())]
        raise MissingKernelError(
            "no native kernel and no numpy reference for these ops", items=items,
            hint="attach a 'numpy' fact (msc/relax/op/numpy_ref.py) or a 'kernel' fact "
                 "(msc/backend/kernels/)")
    return Executable(mod, programs, lowerer.stats())


def _as_module(mod) -> IRModule:
    if isinstance(mod, Function):
        return IRModule({"main": mod})
    if not isinstance(mod, IRModule):
        raise BuildError(f"relax.build needs an IRModule or a Relax Function, got "
                         f"{type(mod).__name__}")
    return mod


def _check_target(target) -> None:
    kind = getattr(target, "kind", target)
    kind = getattr(kind, "name", kind)
    if kind is not None and (str(kind).split() or [""])[0] not in ("llvm", "c", "cpu"):
        raise BuildError(f"unsupported target {target!r}", hint='msc builds for "llvm" (the host)')


def _relax_functions(mod: IRModule):
    funcs = [(gv.name_hint, f) for gv, f in mod.functions.items() if isinstance(f, Function)]
    if not funcs:
        raise BuildError("the module has no Relax function to build")
    return funcs


class Executable:
    """What ``build`` produces: one lowered program per Relax function, plans per shape.

    ``stats``: kernels (native / numpy / packed / tir counts), ops (per op and path), fused
    (pattern -> count), memory (peak_bytes of the last plan made, planned_bytes without
    reuse, ...). Plans are shared by every VirtualMachine made from this executable.
    """

    def __init__(self, mod: IRModule, programs: dict, stats: dict):
        self.mod = mod
        self.programs = programs
        self.stats = stats
        self._plans: dict = {}
        self._lock = threading.Lock()
        for name, program in programs.items():
            if name == "main" and _static_signature(program):
                self.plan(name, (), {})

    def __repr__(self) -> str:
        k = self.stats["kernels"]
        return (f"Executable({sorted(self.programs)}, native={k['native']}, "
                f"numpy={k['numpy']}, packed={k['packed']}, tir={k['tir']})")

    def plan(self, name: str, key: tuple, env: dict):
        """The plan of function ``name`` for the symbolic dims ``env`` (cached by ``key``)."""
        plan = self._plans.get((name, key))
        if plan is None:
            with self._lock:
                plan = self._plans.get((name, key))
                if plan is None:
                    plan = make_plan(self.programs[name], env)
                    self._plans[(name, key)] = plan
                    self.stats["memory"] = dict(plan.stats, function=name)
                    self.stats["plans"] = len(self._plans)
        return plan

    def plans(self) -> dict:
        """(function, signature) -> memory stats of every plan made so far."""
        return {k: p.stats for k, p in self._plans.items()}


def _static_signature(program: Program) -> bool:
    def static(sinfo):
        if isinstance(sinfo, TensorStructInfo):
            return sinfo.values is not None and all(v.is_const for v in sinfo.values)
        if isinstance(sinfo, TupleStructInfo):
            return all(static(f) for f in sinfo.fields)
        return False
    return all(static(program.values[p].sinfo) for p in program.params)


# ---------------------------------------------------------------------------------------------
# Lowering.


class _Lowerer:
    def __init__(self, mod: IRModule, fuse: bool, legalize: str, schedules=None):
        self.mod = mod
        self.fuse = fuse
        self.legalize = legalize
        self.schedules = schedules
        self.tuned = 0
        self.missing: Counter = Counter()
        self.paths: dict = {}
        self.fused: Counter = Counter()
        self.program: Program | None = None
        self.subst: dict = {}
        self.stack: list[str] = []

    # -- functions --------------------------------------------------------------------------
    def lower_function(self, name: str, func: Function) -> Program:
        self.program = program = Program(name, [], [], [], -1)
        self.subst, self.stack = {}, [name]
        env = {}
        for param in func.params:
            vid = program.value(param.struct_info, param.name_hint)
            env[param] = vid
            program.params.append(vid)
            program.param_names.append(param.name_hint)
        program.result = self._expr(func.body, env, program.nodes)
        self._fold(program.nodes)
        rewriter = Rewriter(program)  # every rewrite from here to _resolve goes through it
        eliminate_dead(rewriter)
        if self.fuse:
            # QDQ convs / matmuls become int8 kernels first: the float patterns (dense +
            # activation, attention) must not fuse away the pieces of a QDQ chain
            self.fused.update(fold_qdq(rewriter))
            eliminate_dead(rewriter)
            self.fused.update(fuse_patterns(program, rewriter))
            eliminate_dead(rewriter)
            self._fuse(program.nodes, rewriter)
        self._resolve(program)
        self._count(program)
        return program

    # -- expressions ------------------------------------------------------------------------
    def _expr(self, expr, env: dict, nodes: list, name: str = "") -> int:
        handler = _EXPR.get(type(expr))
        if handler is None:
            handler = next((h for t, h in _EXPR.items() if isinstance(expr, t)), None)
        if handler is None:
            raise BuildError(f"cannot build a {type(expr).__name__} expression",
                             node=name or None, hint="supported: calls, tuples, If, "
                             "match_cast, constants, shapes, prim values")
        return handler(self, expr, env, nodes, name)

    def _sinfo(self, sinfo):
        return substitute_struct_info(sinfo, self.subst) if self.subst and sinfo else sinfo

    def _var(self, var: Var, env, nodes, name):
        if var not in env:
            raise BuildError(f"variable {var.name_hint!r} is used before it is bound",
                             node=self.program.name)
        return env[var]

    def _const(self, expr, env, nodes, name):
        return self.program.value(expr.struct_info, name, const=_CONST_OF[type(expr)](expr))

    def _shape(self, expr: ShapeExpr, env, nodes, name):
        values = tuple(tir.substitute(v, self.subst) if self.subst else v for v in expr.values)
        if all(v.is_const for v in values):
            return self.program.value(expr.struct_info, name,
                                      const=tuple(int(v.value) for v in values))
        return self._eval_node(values, expr.struct_info, nodes, name)

    def _prim(self, expr: PrimValue, env, nodes, name):
        value = tir.substitute(expr.value, self.subst) if self.subst else expr.value
        if value.is_const:
            return self.program.value(expr.struct_info, name, const=value.value)
        return self._eval_node(value, expr.struct_info, nodes, name)

    def _eval_node(self, expr, sinfo, nodes, name) -> int:
        vid = self.program.value(self._sinfo(sinfo), name, expr=expr)
        nodes.append(Node("eval", (), vid, name=name))
        return vid

    def _tuple(self, expr: Tuple, env, nodes, name):
        ids = [self._expr(f, env, nodes) for f in expr.fields]
        values = [self.program.values[i] for i in ids]
        sinfo = TupleStructInfo([v.sinfo for v in values]) if all(
            v.sinfo is not None for v in values) else expr.struct_info
        if all(v.const is not NOVALUE for v in values):
            return self.program.value(sinfo, name, const=tuple(v.const for v in values))
        vid = self.program.value(sinfo, name, fields=ids)
        nodes.append(Node("tuple", tuple(ids), vid, name=name))
        return vid

    def _getitem(self, expr: TupleGetItem, env, nodes, name):
        tid = self._expr(expr.tuple_value, env, nodes)
        value = self.program.values[tid]
        if value.fields is not None:
            return value.fields[expr.index]
        if value.const is not NOVALUE:
            return self.program.value(self._sinfo(expr.struct_info), name,
                                      const=value.const[expr.index])
        vid = self.program.value(self._sinfo(expr.struct_info), name)
        nodes.append(Node("getitem", (tid,), vid, index=expr.index, name=name))
        return vid

    def _seq(self, expr: SeqExpr, env, nodes, name):
        env = dict(env)
        for block in expr.blocks:
            for binding in block.bindings:
                self._binding(binding, env, nodes)
        return self._expr(expr.body, env, nodes, name)

    def _binding(self, binding, env: dict, nodes: list) -> None:
        var = binding.var
        vid = self._expr(binding.value, env, nodes, var.name_hint)
        if isinstance(binding, MatchCast):
            out = self.program.value(self._sinfo(binding.struct_info), var.name_hint)
            nodes.append(Node("match_cast", (vid,), out, sinfo=self._sinfo(binding.struct_info),
                              name=var.name_hint))
            vid = out
        env[var] = vid

    def _if(self, expr: If, env, nodes, name):
        cond = self._expr(expr.cond, env, nodes)
        branches = []
        for branch in (expr.true_branch, expr.false_branch):
            branch_nodes: list = []
            branches.append((branch_nodes, self._expr(branch, env, branch_nodes)))
        out = self.program.value(self._sinfo(expr.struct_info), name)
        nodes.append(Node("if", (cond,), out, branches=tuple(branches), name=name, op="If"))
        return out

    def _call(self, call: Call, env, nodes, name):
        if isinstance(call.op, GlobalVar):
            return self._inline(call, env, nodes, name)
        def lower(e):
            return self._expr(e, env, nodes)
        impl = special(call, lower, self.mod)
        if impl is not None:
            return self._impl_node(call, impl, nodes, name)
        if not isinstance(call.op, Op):
            raise BuildError(f"cannot call a {type(call.op).__name__}", node=name or None,
                             hint="call ops, module functions or extern (packed) functions")
        args = [self._expr(a, env, nodes) for a in call.args]
        op = call.op.name.removeprefix("relax.")
        out = self.program.value(self._out_sinfo(call, name), name)
        site = Site(op, call.attrs, [self.program.values[a] for a in args],
                             self.program.values[out].sinfo, call=call)
        nodes.append(Node("call", tuple(args), out, op=op, name=name, site=site))
        return out

    def _out_sinfo(self, call: Call, name: str):
        if call.struct_info is None:
            raise BuildError("call has no struct info", node=name or None,
                             op=getattr(call.op, "name", None),
                             hint="build the function with the BlockBuilder (it infers shapes)")
        return self._sinfo(call.struct_info)

    def _impl_node(self, call, impl: Impl, nodes, name) -> int:
        out = self.program.value(self._out_sinfo(call, name), name)
        op = impl.extra.get("func") or getattr(call.op, "name", "").removeprefix("relax.")
        nodes.append(Node("call", tuple(impl.inputs), out, fn=impl.fn,
                          dps=tuple(self._sinfo(s) for s in impl.dps), op=op, path=impl.path,
                          aliases=impl.aliases, name=name, tir=impl.extra.get("tir")))
        return out

    def _inline(self, call: Call, env, nodes, name):
        callee = self.mod.functions.get(call.op)
        fname = call.op.name_hint
        if not isinstance(callee, Function):
            raise BuildError(f"{fname!r} is not a Relax function of the module", node=name,
                             hint="call TIR functions with R.call_tir")
        if fname in self.stack or len(self.stack) > _MAX_INLINE_DEPTH:
            raise BuildError(f"recursive call of {fname!r} is not supported", node=name)
        if len(call.args) != len(callee.params):
            raise BuildError(f"{fname!r} takes {len(callee.params)} arguments, got "
                             f"{len(call.args)}", node=name)
        args = [self._expr(a, env, nodes) for a in call.args]
        saved = self.subst
        self.subst = _bind_dims(callee.params, [self.program.values[a].sinfo for a in args])
        self.stack.append(fname)
        try:
            inner = {p: a for p, a in zip(callee.params, args)}
            return self._expr(callee.body, inner, nodes, name)
        finally:
            self.stack.pop()
            self.subst = saved

    # -- passes -----------------------------------------------------------------------------
    def _fold(self, nodes: list) -> None:
        """Evaluate op calls whose arguments are all known now (weights made by R.full, ...)
        with their numpy facts, so kernels see them as constants."""
        values = self.program.values
        folded = set()
        for node in nodes:
            for branch_nodes, _ in node.branches:
                self._fold(branch_nodes)
            args = [values[i].const for i in node.ins]
            if any(a is NOVALUE for a in args) or node.kind not in ("call", "tuple", "getitem"):
                continue
            if node.kind == "tuple":
                value = tuple(args)
            elif node.kind == "getitem":
                value = args[0][node.index]
            else:
                value = _evaluate(node, args)
                if value is NOVALUE:
                    continue
            values[node.out].const = value
            folded.add(id(node))
        _drop(nodes, folded)

    def _fuse(self, nodes: list, rw: Rewriter) -> None:
        # where each value was made, as fusion found the list: _take_residual's test
        made = {n.out: i for i, n in enumerate(nodes)}
        at = {id(n): i for i, n in enumerate(nodes)}
        with rw.batched():  # absorbed nodes leave the list once, at the end (no list.remove)
            for node in rw.each(nodes):
                for branch_nodes, _ in node.branches:
                    self._fuse(branch_nodes, rw)
                if node.site is None:
                    continue
                fact = kernel_fact(node.site.op)
                if node.op == "nn.batch_norm":
                    self._unpack_batch_norm(node, fact, rw, nodes)
                if fact is None or not fact.match(node.site) or not fact.epilogues_for(node.site):
                    continue
                chain = [node.op]
                while (absorbed := self._absorb(node, _reader(rw, node.out, nodes), rw,
                                                nodes)) is not None:
                    entries, gone = absorbed
                    if not _take_residual(node, entries, made, at[id(node)], rw):
                        break
                    node.site.epilogue += entries
                    rw.absorb(node, gone)
                    node.site.out = self.program.values[node.out].sinfo
                    chain.append(gone[0].op)
                if len(chain) > 1:
                    self.fused["+".join(chain)] += 1

    def _unpack_batch_norm(self, node: Node, fact, rw: Rewriter, nodes: list) -> None:
        """``bn = batch_norm(x, ...); y = bn[0]`` (the statistics unused) becomes one call
        producing ``y`` when the native kernel takes it; the numpy fact keeps the tuple."""
        item = _reader(rw, node.out, nodes)
        if fact is None or item is None or item.kind != "getitem" or item.index:
            return
        site = Site(node.site.op, node.site.attrs, node.site.args,
                             self.program.values[item.out].sinfo, call=node.site.call)
        if fact.match(site):
            node.site = site
            rw.absorb(node, [item])

    def _absorb(self, node: Node, nxt: Node | None, rw: Rewriter, nodes: list):
        """(epilogue entries, consumed nodes) when ``nxt`` can run in ``node``'s epilogue;
        batch_norm is consumed together with the ``[0]`` that reads its result."""
        if nxt is None or nxt.site is None or nxt.kind != "call":
            return None
        gone = [nxt]
        if nxt.op == "nn.batch_norm":
            item = _reader(rw, nxt.out, nodes)
            if item is None or item.kind != "getitem" or item.index:
                return None
            gone.append(item)
        if not _same_tensor(self.program.values[gone[-1].out].sinfo, node.site.out):
            return None
        values = [self.program.values[i] for i in nxt.ins]
        entries = epilogue_entries(node.site, nxt.op, values, nxt.site.attrs, node.out)
        return (entries, gone) if entries else None

    def _resolve(self, program: Program) -> None:
        # each op's kernel: compiled here when the kernel cache is cold (seconds per model)
        for node in progress(list(program.walk()), desc="relax.build", unit="op", delay=1.0):
            if node.site is None or node.fn is not None:
                continue
            impl = resolve(node.site, legalize=self.legalize, schedules=self.schedules)
            if impl is None:
                self.missing[node.op] += 1
                continue
            node.fn, node.ins, node.dps = impl.fn, tuple(impl.inputs), impl.dps
            node.path, node.aliases = impl.path, impl.aliases
            node.tir = impl.extra.get("tir")
            node.wants_env = bool(impl.extra.get("env"))
            self.tuned += bool(impl.extra.get("tuned"))

    def _count(self, program: Program) -> None:
        for node in program.walk():
            if node.kind == "call" and node.path:
                self.paths.setdefault(node.op, Counter())[node.path] += 1

    def stats(self) -> dict:
        kernels = Counter()
        for counts in self.paths.values():
            kernels.update(counts)
        paths = ("native", "numpy", "packed", "tir", *sorted(set(kernels) - _PATHS))
        return {"kernels": {k: kernels.get(k, 0) for k in paths},
                "ops": {op: dict(c) for op, c in sorted(self.paths.items())},
                "fused": dict(self.fused), "tuned": self.tuned, "memory": {}, "plans": 0}


_CONST_OF = {
    Constant: lambda e: e.data,
    StringImm: lambda e: e.value,
    DataTypeImm: lambda e: e.value,
}

_EXPR = {
    Var: _Lowerer._var,
    Constant: _Lowerer._const,
    StringImm: _Lowerer._const,
    DataTypeImm: _Lowerer._const,
    ShapeExpr: _Lowerer._shape,
    PrimValue: _Lowerer._prim,
    Tuple: _Lowerer._tuple,
    TupleGetItem: _Lowerer._getitem,
    SeqExpr: _Lowerer._seq,
    If: _Lowerer._if,
    Call: _Lowerer._call,
}


def _evaluate(node: Node, args: list):
    """The numpy fact's value of a call on constant args, or NOVALUE when it cannot fold."""
    from ..relax.op.registry import OPS

    op_def = OPS.get(node.op)
    fn = op_def.facts.get("numpy") if op_def is not None else None
    if node.site is None or fn is None or op_def.runtime:
        return NOVALUE
    try:
        value = numpy_caller(fn, node.site)(*args)
    except Exception:  # noqa: BLE001  (left to run time, which names the binding)
        return NOVALUE
    return np.asarray(value, order="C") if isinstance(value, np.ndarray) else value


def _reader(rw: Rewriter, vid: int, nodes: list) -> Node | None:
    """The one reader of ``vid`` when it reads it once and sits in ``nodes``."""
    reader = rw.only_user(vid)
    return reader if reader is not None and rw.within(reader, nodes) else None


def _take_residual(node: Node, entries: tuple, made: dict, at: int, rw: Rewriter) -> bool:
    """A residual entry's tensor becomes the call's last arg (and input) when it is computed
    before the call runs (a shortcut conv placed after the block's last conv cannot be waited
    for): ``made`` and ``at`` are positions in the list as fusion found it."""
    for entry in entries:
        if entry[0] == "residual":
            if made.get(entry[1], -1) >= at:
                return False
            node.site.args = [*node.site.args, rw.program.values[entry[1]]]
            rw.set_ins(node, (*node.ins, entry[1]))
    return True


def _same_tensor(a, b) -> bool:
    return (isinstance(a, TensorStructInfo) and isinstance(b, TensorStructInfo)
            and a.dtype == b.dtype and a.ndim == b.ndim and a.values == b.values)


def _bind_dims(params, arg_sinfos) -> dict:
    """Callee dim var name -> the caller's expression for it (from the argument shapes)."""
    mapping: dict = {}

    def match(p, a):
        if isinstance(p, TensorStructInfo) and isinstance(a, TensorStructInfo):
            for pd, ad in zip(p.values or (), a.values or ()):
                if isinstance(pd, tir.Var) and pd.name not in mapping:
                    mapping[pd.name] = ad
        elif isinstance(p, TupleStructInfo) and isinstance(a, TupleStructInfo):
            for pf, af in zip(p.fields, a.fields):
                match(pf, af)

    for param, sinfo in zip(params, arg_sinfos):
        match(param.struct_info, sinfo)
    return mapping


def _drop(nodes: list, ids: set) -> int:
    """Remove the nodes whose ids are in ``ids`` (in place); how many went."""
    if not ids:
        return 0
    kept = [n for n in nodes if id(n) not in ids]
    removed = len(nodes) - len(kept)
    nodes[:] = kept
    return removed

