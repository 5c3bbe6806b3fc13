"""PrimFunc -> LLVM IR with ``llvmlite.ir``: the native half of ``R.call_tir``.

The generated entry point is ``i32 sym(T0* buf0, ..., i64 n, ...)``: one pointer per buffer
param (C-contiguous data, ``noalias``), each scalar param, then each symbolic dim of the
buffer shapes that is not already a scalar param. It returns 0, 1 when a workspace
allocation failed (``STATUS_WORKSPACE``), or 2 when an index read from data was out of range
(``STATUS_INDEX``: the accesses were clamped, the caller raises and drops the result).
Shapes and dtypes are *not* checked here; ``compile`` does that before every call::

    module, abi = codegen(func, "msc_tir_add_1f2e")
    abi.args      # ("buffer", x), ("buffer", y), ("buffer", T_add), ("dim", n)

How code is produced:
- Blocks are first lowered to loops by ``schedule`` (reduction inits hoisted, the
  innermost loop chosen for contiguous access). LLVM's loop and SLP vectorizers then work on
  the innermost loops (O3, host CPU features, ``noalias`` buffers, ``reassoc`` float math so
  reductions vectorize).
- float16 / bfloat16 are stored as 16 bits and computed in float32; bool is stored as a byte.
- exp, log, tanh, erf, sigmoid are inline polynomials (``math``), so loops that use them
  still vectorize; other math calls libm.
- An innermost loop whose conditions bound its var (padding: ``0 <= w - 1 < W``) is split into
  head, main and tail ranges; in the main range those conditions are known true, so padded
  loads become plain vector loads.
- Safety: ``T.if_then_else`` evaluates both sides with the loads of the untaken side clamped
  into their buffer; indices read from data (take, gather) are clamped and, outside a
  speculated side, an out-of-range one sets a flag that makes the call return 2; integer
  division by 0 (or INT_MIN / -1) gives 0 instead of a trap.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from llvmlite import ir

from ...errors import BuildError
from ...tir import expr as E
from ...tir.function import (
    AllocBuffer,
    AttrStmt,
    Buffer,
    BufferStore,
    Evaluate,
    For,
    IfThenElse,
    LetStmt,
    PrimFunc,
    SeqStmt,
    While,
    expr_children,
)
from ..llvm.loops import entry_alloca, imin
from ..runtime.native_run import STATUS_INDEX, STATUS_WORKSPACE
from . import tensor_calls
from .dtypes import AS_LT, Types, is_int_expr
from .exprs import ExprEmitter
from .parallel import emit_parallel
from .schedule import BufferView, RegionView, lower_blocks

__all__ = ["STATUS_INDEX", "STATUS_WORKSPACE", "KernelABI", "codegen", "ir_text"]

I8, I32, I64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
_STACK_BYTES = 64 * 1024  # constant-size workspaces up to this live on the stack
_UNROLL_MAX = 8  # innermost loops this short may still be fully unrolled


@dataclass(frozen=True)
class KernelABI:
    """The entry point's arguments: ``("buffer", Buffer)``, ``("scalar", Var)`` or
    ``("dim", Var)`` (a symbolic dim bound from the buffer shapes)."""

    symbol: str
    args: tuple

    @property
    def buffers(self) -> list[Buffer]:
        return [a for kind, a in self.args if kind == "buffer"]


def codegen(func: PrimFunc, symbol: str, native_f16: bool | None = None):
    """``(llvmlite.ir.Module, KernelABI)`` for ``func``; BuildError for what cannot compile."""
    abi = _abi(func, symbol)
    module = ir.Module(name=symbol)
    types = Types(native_f16)
    argtys = [_arg_type(types, kind, a) for kind, a in abi.args]
    fn = ir.Function(module, ir.FunctionType(I32, argtys), symbol)
    for arg, (kind, _) in zip(fn.args, abi.args):
        if kind == "buffer":
            arg.add_attribute("noalias")
    fn.attributes.add("nounwind")
    _FuncEmitter(func, fn, abi, types).run()
    return module, abi


def _abi(func: PrimFunc, symbol: str) -> KernelABI:
    args, names = [], set()
    for p in func.params:
        if isinstance(p, Buffer):
            args.append(("buffer", p))
        else:
            args.append(("scalar", p))
            names.add(p.name)
    for buf in func.buffers:  # every var of the buffer shapes, bound from the arrays
        for d in buf.shape:
            for v in E.free_vars(d):
                if v.name not in names:
                    names.add(v.name)
                    args.append(("dim", v))
    return KernelABI(symbol, tuple(args))


def _arg_type(types, kind: str, a) -> ir.Type:
    if kind == "buffer":
        return types.storage(a.dtype).as_pointer()
    if kind == "dim":
        return I64
    return types.storage(a.dtype)


class _FuncEmitter(ExprEmitter):
    """Statements; expressions come from :class:`exprs.ExprEmitter`."""

    def __init__(self, func: PrimFunc, fn: ir.Function, abi: KernelABI, types):
        entry = fn.append_basic_block("entry")
        super().__init__(ir.IRBuilder(entry), types)
        self.func = func
        self.fn = fn
        self.abi = abi
        self._fail: ir.Block | None = None
        self.in_task = False  # emitting the outlined body of a parallel loop (parallel.py)
        self.tile_strides: dict = {}  # match_buffer tile -> its constant strides
        self.tile_offsets: dict = {}  # match_buffer tile -> its elem_offset (a var or None)
        self.task_status = None

    def run(self) -> None:
        for arg, (kind, p) in zip(self.fn.args, self.abi.args):
            if kind == "buffer":
                continue
            value = self.types.load_value(self.b, arg, p.dtype) if kind == "scalar" else arg
            self.bind_var(p, value)
        for arg, (kind, p) in zip(self.fn.args, self.abi.args):
            if kind == "buffer":
                self.bind_buffer(p, arg)
        body = self.func.body
        try:
            self.stmt(lower_blocks(body))
        except BuildError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise BuildError(f"cannot compile prim func: {type(err).__name__}: {err}",
                             op=self.func.name) from None
        self.b.ret(self._status())

    def fail(self, status: int) -> None:
        """Return ``status`` from the kernel (a parallel task stores it for its caller)."""
        self.b.ret(ir.Constant(I32, status))

    def _status(self) -> ir.Value:
        """0, or STATUS_INDEX when an index read from data was out of range."""
        if self.oob is None:
            return ir.Constant(I32, 0)
        bad = self.b.icmp_unsigned("!=", self.b.load(self.oob), ir.Constant(I8, 0))
        return self.b.select(bad, ir.Constant(I32, STATUS_INDEX), ir.Constant(I32, 0))

    # -- statements -----------------------------------------------------------------------
    def stmt(self, s) -> None:
        handler = _STMTS.get(type(s))
        if handler is None:
            raise BuildError(f"the TIR compiler does not support {type(s).__name__}",
                             op=self.func.name)
        handler(self, s)

    def _seq(self, s: SeqStmt) -> None:
        saved = self.save_scope()
        frees = []
        for child in s.stmts:
            if isinstance(child, AllocBuffer):
                ptr = self.alloc(child.buffer)
                if ptr is not None:
                    frees.append(ptr)
            else:
                self.stmt(child)
        for ptr in frees:
            self.b.call(self.libc("free"), [ptr])
        self.restore_scope(saved)

    def _let(self, s: LetStmt) -> None:
        value = self.coerce(self.expr(s.value), s.value.dtype, s.var.dtype)
        self.bind_var(s.var, value, s.value)

    def _store(self, s: BufferStore) -> None:
        buf = s.buffer
        value = self.coerce(self.expr(s.value), s.value.dtype, buf.dtype)
        ptr = self.address(buf, s.indices)
        self.b.store(self.types.store_value(self.b, value, buf.dtype), ptr,
                     align=self.types.align(buf.dtype))

    def _evaluate(self, s: Evaluate) -> None:
        if isinstance(s.value, E.PrimCall) and tensor_calls.emit_call(self, s.value):
            return
        if not isinstance(s.value, (E.IntImm, E.FloatImm)):
            raise BuildError(f"the TIR compiler cannot run T.evaluate({E.to_str(s.value)})",
                             op=self.func.name, hint="only pure loop nests compile")

    def _alloc_stmt(self, s: AllocBuffer) -> None:
        self._seq(SeqStmt((s,)))

    def alloc(self, buf: Buffer):
        """Workspace for ``buf``: a stack slot when small and constant, else malloc (returned
        so the enclosing sequence frees it)."""
        count = I64(1) if not buf.shape else None
        const = 1
        for d in buf.shape:
            const = const * d.value if isinstance(d, E.IntImm) and const is not None else None
        size = self.types.size(buf.dtype)
        if const is not None and const * size <= _STACK_BYTES:
            slot = entry_alloca(self.b, ir.ArrayType(self.types.storage(buf.dtype),
                                                     max(const, 1)), name=buf.name)
            slot.align = 64
            self.bind_buffer(buf, self.b.bitcast(slot, self.types.storage(buf.dtype).as_pointer()))
            return None
        count = ir.Constant(I64, 1)
        for d in buf.shape:
            count = self.b.mul(count, self.index(d))
        raw = self.b.call(self.libc("malloc"), [self.b.mul(count, ir.Constant(I64, size))])
        with self.b.if_then(self.b.icmp_unsigned("==", raw, ir.Constant(raw.type, None)),
                            likely=False):
            self.fail(STATUS_WORKSPACE)
        self.bind_buffer(buf, self.b.bitcast(raw, self.types.storage(buf.dtype).as_pointer()))
        return raw

    def _if(self, s: IfThenElse) -> None:
        cond = self.cond(s.cond)
        if isinstance(cond, ir.Constant):
            branch = s.then_case if cond.constant else s.else_case
            if branch is not None:
                self.stmt(branch)
            return
        if s.else_case is None:
            with self.b.if_then(cond):
                self._scoped(s.then_case)
            return
        with self.b.if_else(cond) as (then, other):
            with then:
                self._scoped(s.then_case)
            with other:
                self._scoped(s.else_case)

    def _scoped(self, s) -> None:
        saved = self.save_scope()
        self.stmt(s)
        self.restore_scope(saved)

    def _while(self, s: While) -> None:
        head = self.b.append_basic_block("while.cond")
        body = self.b.append_basic_block("while.body")
        end = self.b.append_basic_block("while.end")
        self.b.branch(head)
        self.b.position_at_end(head)
        self.b.cbranch(self.cond(s.cond), body, end)
        self.b.position_at_end(body)
        self._scoped(s.body)
        self.b.branch(head)
        self.b.position_at_end(end)

    def _for(self, s: For) -> None:
        if s.kind == "thread_binding":
            raise BuildError("thread-bound loops are for GPUs; the CPU compiler cannot run them",
                             op=self.func.name, key=s.var.name)
        lo = self.coerce(self.expr(s.min, index=True), s.min.dtype, s.var.dtype)
        if E.as_int(s.extent) == 1:
            self._unit_loop(s, lo)
            return
        ext = self.coerce(self.expr(s.extent, index=True), s.extent.dtype, s.var.dtype)
        stop = self.b.add(lo, ext, flags=("nsw",))
        if s.kind == "parallel" and not self.in_task:
            emit_parallel(self, s, lo, stop)
            return
        self.stmt_loop(s, lo, stop)

    def _unit_loop(self, s: For, lo) -> None:
        """A loop of one iteration (a batch of 1, a tile of 1) is its body with the var bound
        to ``lo``: a constant stays a constant, so an outlined parallel body nested in it
        does not receive the var as a run-time value, and no loop is left for LLVM."""
        saved = self.save_scope()
        self.bind_var(s.var, lo, s.min)
        self.stmt(s.body)
        self.restore_scope(saved)

    def stmt_loop(self, s: For, lo, stop) -> None:
        """The loop ``s`` over ``[lo, stop)`` on this thread."""
        terms = self.partition_terms(s) if _innermost(s.body) else []
        if not terms:
            self._loop(s, lo, stop, [])
            return
        mid_lo, mid_hi = self.partition_bounds(s, terms, lo, stop)
        self._loop(s, lo, mid_lo, [])
        self._loop(s, mid_lo, mid_hi, terms)
        self._loop(s, mid_hi, stop, [])

    def _loop(self, s: For, lo, stop, known: list) -> None:
        """``for (i = lo; i < stop; ++i)``. An innermost loop longer than a few iterations is
        marked not to be fully unrolled: unrolling it first would make LLVM vectorize the
        next loop out, through gathers, instead of this contiguous one."""
        b, saved = self.b, self.save_scope()
        pre = b.block
        cond = b.append_basic_block(f"{s.var.name}.cond")
        body = b.append_basic_block(f"{s.var.name}.body")
        end = b.append_basic_block(f"{s.var.name}.end")
        b.branch(cond)
        b.position_at_end(cond)
        i = b.phi(lo.type, name=s.var.name)
        i.add_incoming(lo, pre)
        b.cbranch(b.icmp_signed("<", i, stop), body, end)
        b.position_at_end(body)
        self.bind_loop_var(s.var, i, s.min, E.add(s.min, s.extent))
        self.assume([fact for fact, _ in known])
        self.stmt(s.body)
        i.add_incoming(b.add(i, ir.Constant(i.type, 1), flags=("nsw",)), b.block)
        latch = b.branch(cond)
        if s.kind == "vectorized":
            latch.set_metadata("llvm.loop", self._loop_id(f"vec.{_vector_width(s.extent)}"))
        elif _innermost(s.body) and not _short(s.extent):
            latch.set_metadata("llvm.loop", self._loop_id())
        b.position_at_end(end)
        self.restore_scope(saved)

    def _loop_id(self, kind: str = "loop"):
        """A placeholder node, made a distinct self-referencing loop ID by :func:`ir_text`:
        ``loop`` (vectorize if profitable, no unrolling first) or ``vec.<width>`` (a
        ``sch.vectorize`` loop: vectorized with that width)."""
        module = self.fn.module  # numbered per module: parallel tasks are functions of it
        module.msc_loops = getattr(module, "msc_loops", 0) + 1
        return module.add_metadata([ir.MetaDataString(module,
                                                      f"msc.{kind}.{module.msc_loops}")])

    # -- loop partitioning ----------------------------------------------------------------
    def partition_terms(self, s: For) -> list:
        """``(e, step)`` for each condition ``e < 0`` in the body that is affine in the loop
        var with a constant step (``0 <= w * 2 + r - 1``), lets expanded to loop vars."""
        var, found, lets = s.var, {}, dict(self.var_exprs)

        def scan_expr(e):
            if isinstance(e, E.BinaryOp) and e.op in AS_LT and is_int_expr(e.a) \
                    and is_int_expr(e.b):
                fact = E.canonicalize(E.substitute(AS_LT[e.op](e.a, e.b), lets))
                step = E.sub(E.substitute(fact, {var.name: E.add(var, 1)}), fact)
                if isinstance(step, E.IntImm) and step.value:
                    found.setdefault(fact._key, (fact, step.value))
            for c in expr_children(e):
                scan_expr(c)

        def scan(st):
            if isinstance(st, SeqStmt):
                for c in st.stmts:
                    scan(c)
            elif isinstance(st, LetStmt):
                scan_expr(st.value)
                if is_int_expr(st.value):
                    lets[st.var.name] = E.substitute(st.value, lets)
                else:
                    lets.pop(st.var.name, None)
            elif isinstance(st, BufferStore):
                scan_expr(st.value)
            elif isinstance(st, IfThenElse):
                scan_expr(st.cond)
                scan(st.then_case)
                if st.else_case is not None:
                    scan(st.else_case)

        scan(s.body)
        return list(found.values())

    def partition_bounds(self, s: For, terms: list, lo, stop):
        """[mid_lo, mid_hi): the sub-range of [lo, stop) where every term holds."""
        mid_lo, mid_hi = lo, stop
        for fact, step in terms:
            rest = E.substitute(fact, {s.var.name: 0})
            if step > 0:  # step * i + rest < 0  <=>  i < ceil(-rest / step)
                bound = E.floordiv(E.sub(step - 1, rest), step)
            else:         # i > rest / -step
                bound = E.add(E.floordiv(rest, -step), 1)
            v = self.coerce(self.index(bound), "int64", s.var.dtype)
            mid_hi, mid_lo = (imin(self.b, mid_hi, v), mid_lo) if step > 0 else \
                (mid_hi, _imax(self.b, mid_lo, v))
        mid_lo = imin(self.b, mid_lo, stop)
        return mid_lo, _imax(self.b, mid_hi, mid_lo)


def _short(extent) -> bool:
    return isinstance(extent, E.IntImm) and extent.value <= _UNROLL_MAX


_LOOP_MD = re.compile(r'^!(\d+) = !\{ !"msc\.loop\.\d+" \}$', re.MULTILINE)
_VEC_MD = re.compile(r'^!(\d+) = !\{ !"msc\.vec\.(\d+)\.\d+" \}$', re.MULTILINE)


def ir_text(module: ir.Module) -> str:
    """The module's LLVM IR with the loop ID placeholders made real loop metadata: no unrolling
    before vectorization, runtime unrolling of the vectorized loop allowed (a followup); a
    ``sch.vectorize`` loop is vectorized with its width whatever the cost model says."""
    text = str(module)
    if not (_LOOP_MD.search(text) or _VEC_MD.search(text)):
        return text
    n = max(int(m) for m in re.findall(r"^!(\d+) =", text, re.MULTILINE)) + 1
    text = _LOOP_MD.sub(lambda m: f"!{m.group(1)} = distinct !{{ !{m.group(1)}, !{n}, !{n + 1} }}",
                        text)
    widths = sorted({int(w) for w in re.findall(r'"msc\.vec\.(\d+)\.', text)})
    nodes = {w: n + 4 + 2 * k for k, w in enumerate(widths)}
    # a vectorize loop is not unrolled first either: the unroller would take it apart and
    # leave the vectorizer the next loop out (gathers)
    text = _VEC_MD.sub(lambda m: f"!{m.group(1)} = distinct !{{ !{m.group(1)}, !{n}, !{n + 3}, "
                                 f"!{nodes[int(m.group(2))]}, !{nodes[int(m.group(2))] + 1} }}",
                       text)
    text += (f'\n!{n} = !{{ !"llvm.loop.unroll.disable" }}\n'
             f'!{n + 1} = !{{ !"llvm.loop.vectorize.followup_vectorized", !{n + 2} }}\n'
             f'!{n + 2} = !{{ !"llvm.loop.unroll.runtime.enable" }}\n'
             f'!{n + 3} = !{{ !"llvm.loop.vectorize.enable", i1 true }}\n')
    for w, k in nodes.items():
        text += (f'!{k} = !{{ !"llvm.loop.vectorize.width", i32 {w} }}\n'
                 f'!{k + 1} = !{{ !"llvm.loop.interleave.count", i32 1 }}\n')
    return text


def _vector_width(extent) -> int:
    """A ``sch.vectorize`` loop's lanes: its extent, as a power of two up to 64 lanes."""
    lanes = extent.value if isinstance(extent, E.IntImm) else 64
    return 1 << (max(min(lanes, 64), 1).bit_length() - 1)


def _imax(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed(">", x, y), x, y)


def _innermost(s) -> bool:
    """No loop inside (so splitting it copies only straight-line code)."""
    if isinstance(s, (For, While)):
        return False
    if isinstance(s, SeqStmt):
        return all(_innermost(c) for c in s.stmts)
    if isinstance(s, IfThenElse):
        return _innermost(s.then_case) and (s.else_case is None or _innermost(s.else_case))
    return True


def _view(self, s: BufferView) -> None:
    ptr = self.bufs[s.base.name][0]
    self.bind_buffer(s.view, ptr)


_STMTS = {
    BufferView: _view,
    RegionView: lambda self, s: tensor_calls.emit_region_view(self, s.view, s.base, s.region),
    SeqStmt: _FuncEmitter._seq,
    LetStmt: _FuncEmitter._let,
    BufferStore: _FuncEmitter._store,
    Evaluate: _FuncEmitter._evaluate,
    AllocBuffer: _FuncEmitter._alloc_stmt,
    AttrStmt: lambda self, s: None,
    IfThenElse: _FuncEmitter._if,
    While: _FuncEmitter._while,
    For: _FuncEmitter._for,
}
