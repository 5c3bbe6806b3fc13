"""TIR expressions -> LLVM values, for ``codegen``: casts, intrinsics, buffer addressing and
the facts that let padded loads go unchecked; operators come from ``ops`` (a table of emitters).

Facts are integer conditions known to hold, each kept as a canonical ``e`` meaning ``e < 0``
(lets expanded to loop vars): a loop's range, and in the main range of a split loop the
conditions that bound it.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir

from ...errors import BuildError
from ...tir import expr as E
from ...tir.function import BufferLoad
from ..llvm.loops import entry_alloca
from . import math as M
from . import ops
from .dtypes import (
    AS_LT,
    F32,
    F64,
    FM,
    I8,
    I64,
    INT_BITS,
    LIBC,
    LIBM,
    Types,
    has_load,
    is_float,
    is_int_expr,
    is_signed,
    lt_key,
)

__all__ = ["ExprEmitter"]


class ExprEmitter:
    """Expression emission state: bound vars and buffers, facts, the speculation depth."""

    def __init__(self, builder: ir.IRBuilder, types: Types):
        self.b = builder
        self.types = types
        self.vars: dict = {}
        self.var_exprs: dict = {}   # int let vars -> their value in loop vars
        self.bufs: dict = {}        # name -> (pointer, dims, strides)
        self.known: set = set()     # keys of canonical e with e < 0
        self.spec = 0               # > 0 while emitting a speculated if_then_else side
        self.in_index = 0
        self.oob = None             # i8 slot set when an index read from data is out of range
        self.spares: dict = {}      # element type -> spare slot (see _spare)

    # -- scopes ---------------------------------------------------------------------------
    def save_scope(self):
        return dict(self.vars), dict(self.var_exprs), dict(self.bufs), set(self.known)

    def restore_scope(self, saved) -> None:
        self.vars, self.var_exprs, self.bufs, self.known = (
            dict(saved[0]), dict(saved[1]), dict(saved[2]), set(saved[3]))

    def bind_var(self, var: E.Var, value: ir.Value, expr: E.PrimExpr | None = None) -> None:
        self.vars[var.name] = value
        if expr is not None and is_int_expr(expr):
            self.var_exprs[var.name] = self.expand(expr)
        else:
            self.var_exprs.pop(var.name, None)

    def bind_loop_var(self, var: E.Var, value: ir.Value, lo: E.PrimExpr,
                      stop: E.PrimExpr) -> None:
        self.vars[var.name] = value
        self.var_exprs.pop(var.name, None)
        self.assume([AS_LT["GE"](var, self.expand(lo)), lt_key(var, self.expand(stop))])

    def bind_buffer(self, buf, ptr: ir.Value) -> None:
        dims = [self.index(d) for d in buf.shape]
        if buf.strides is not None:
            strides = [self.index(s) for s in buf.strides]
        else:
            strides, step = [], ir.Constant(I64, 1)
            for d in reversed(dims):
                strides.insert(0, step)
                step = ir.Constant(I64, step.constant * d.constant) if \
                    isinstance(step, ir.Constant) and isinstance(d, ir.Constant) else \
                    self.b.mul(step, d, flags=("nsw",))  # constants stay constants (parallel.py)
        for v in E.free_vars(buf.elem_offset) if buf.elem_offset is not None else ():
            # A symbolic offset is TVM's DLTensor byte_offset; arrays here start at their data.
            self.vars.setdefault(v.name, ir.Constant(self.types.compute(v.dtype), 0))
        if buf.elem_offset is not None:
            ptr = self.b.gep(ptr, [self.index(buf.elem_offset)], inbounds=True)
        self.bufs[buf.name] = (ptr, dims, strides)

    def assume(self, facts) -> None:
        self.known.update(E.canonicalize(f)._key for f in facts)

    def expand(self, e: E.PrimExpr) -> E.PrimExpr:
        return E.substitute(e, self.var_exprs) if self.var_exprs else e

    def proven(self, fact: E.PrimExpr) -> bool:
        """Whether ``fact < 0`` holds (a constant, or a known fact)."""
        fact = E.canonicalize(self.expand(fact))
        if isinstance(fact, E.IntImm):
            return fact.value < 0
        return fact._key in self.known

    # -- entry points ---------------------------------------------------------------------
    def expr(self, e: E.PrimExpr, index: bool = False) -> ir.Value:
        handler = _EXPRS.get(type(e))
        if handler is None:
            raise BuildError(f"the TIR compiler cannot evaluate {type(e).__name__}")
        if not index:
            return handler(self, e)
        self.in_index += 1
        try:
            return handler(self, e)
        finally:
            self.in_index -= 1

    def index(self, e: E.PrimExpr) -> ir.Value:
        return self.coerce(self.expr(e, index=True), e.dtype, "int64")

    def cond(self, e: E.PrimExpr) -> ir.Value:
        return self.coerce(self.expr(e), e.dtype, "bool")

    # -- casts ----------------------------------------------------------------------------
    def coerce(self, v: ir.Value, src: str, dst: str) -> ir.Value:
        if src == dst:
            return v
        b, types = self.b, self.types
        dty = types.compute(dst)
        if is_float(src) and is_float(dst):
            if v.type != dty:
                v = b.fpext(v, dty) if dty == F64 else b.fptrunc(v, dty)
            return types.round_to(b, v, dst)
        if is_float(src):
            if dst == "bool":
                return b.fcmp_unordered("!=", v, ir.Constant(v.type, 0.0))
            if is_signed(dst) or dty.width >= 64:
                return b.fptosi(v, dty) if is_signed(dst) else b.fptoui(v, dty)
            # msc's semantics for unsigned: truncate toward zero to a wide signed integer, keep
            # the low bits. LLVM's fptoui of a negative value is poison: a host with
            # AVX512-FP16 turned half -> u8 into a saturating convert (-2.7 -> 255, not 254).
            return b.trunc(b.fptosi(v, I64), dty)
        if is_float(dst):
            v = b.sitofp(v, dty) if is_signed(src) else b.uitofp(v, dty)
            return types.round_to(b, v, dst)
        if dst == "bool":
            return b.icmp_unsigned("!=", v, ir.Constant(v.type, 0))
        width, have = dty.width, v.type.width
        if isinstance(v, ir.Constant) and isinstance(v.constant, int) and width > have:
            value = v.constant if is_signed(src) or v.constant >= 0 else v.constant + (1 << have)
            return ir.Constant(dty, value)  # a constant dim stays a constant (parallel.py)
        if width > have:
            return b.sext(v, dty) if is_signed(src) else b.zext(v, dty)
        return b.trunc(v, dty) if width < have else v

    # -- leaves ---------------------------------------------------------------------------
    def _int_imm(self, e: E.IntImm) -> ir.Value:
        if is_float(e.dtype):
            return ir.Constant(self.types.compute(e.dtype), float(e.value))
        return ir.Constant(self.types.compute(e.dtype), e.value)

    def _float_imm(self, e: E.FloatImm) -> ir.Value:
        value = e.value
        if e.dtype in ("float16", "bfloat16") and math.isfinite(value):
            from ...tir.interp import np_dtype

            value = float(np.asarray(value, np_dtype(e.dtype)).astype(np.float32))
        if e.dtype in INT_BITS:
            return ir.Constant(self.types.compute(e.dtype), int(value))
        return ir.Constant(self.types.compute(e.dtype), value)

    def _var(self, e: E.Var) -> ir.Value:
        try:
            return self.vars[e.name]
        except KeyError:
            raise BuildError(f"unbound variable {e.name!r} in prim func",
                             hint="every var must be a param, a dim, a loop var or a let") from None

    # -- buffers --------------------------------------------------------------------------
    def address(self, buf, indices) -> ir.Value:
        try:
            ptr, dims, strides = self.bufs[buf.name]
        except KeyError:
            raise BuildError(f"buffer {buf.name!r} is used but not declared",
                             hint="buffers are params or T.alloc_buffer / sblock allocations") from None
        flat = empty = None
        for k, (i, stride) in enumerate(zip(indices, strides)):
            v = self.index(i)
            if self._needs_clamp(i, buf.shape[k]):
                if has_load(i) and not self.spec:
                    self._flag_out_of_range(v, dims[k])
                v = self._clamp(v, dims[k])
                empty = self._or_empty(empty, dims[k])
            term = v if (isinstance(stride, ir.Constant) and stride.constant == 1) else \
                self.b.mul(v, stride, flags=("nsw",))
            flat = term if flat is None else self.b.add(flat, term, flags=("nsw",))
        if flat is None:
            return ptr
        at = self.b.gep(ptr, [flat], inbounds=True)
        return at if empty is None else self.b.select(empty, self._spare(ptr.type), at)

    def _or_empty(self, empty, dim: ir.Value):
        """``empty or dim == 0``: a clamped index has no place in an empty dim; constant
        dims above 0 cost nothing."""
        if isinstance(dim, ir.Constant) and dim.constant > 0:
            return empty
        zero = self.b.icmp_signed("<=", dim, ir.Constant(dim.type, 0))
        return zero if empty is None else self.b.or_(empty, zero)

    def _spare(self, ptr_type: ir.PointerType) -> ir.Value:
        """A stack slot of one element: where a clamped access into an empty buffer goes."""
        key = str(ptr_type)
        if key not in self.spares:
            self.spares[key] = entry_alloca(self.b, ptr_type.pointee, name="spare")
        return self.spares[key]

    def _needs_clamp(self, i: E.PrimExpr, dim: E.PrimExpr) -> bool:
        if has_load(i):
            return True  # an index read from data (take, gather) is never trusted
        if not self.spec:
            return False
        return not (self.proven(AS_LT["LE"](E.IntImm(0), i)) and self.proven(lt_key(i, dim)))

    def _flag_out_of_range(self, v: ir.Value, dim: ir.Value) -> None:
        """Record (branch-free, one unsigned compare) that a data index left ``[0, dim)``; the
        access itself is still clamped, and the function returns status 2 (codegen)."""
        if self.oob is None:
            self.oob = entry_alloca(self.b, I8, name="oob")
            with self.b.goto_entry_block():
                self.b.position_after(self.oob)  # zeroed before any loop can set it
                self.b.store(ir.Constant(I8, 0), self.oob)
        bad = self.b.zext(self.b.icmp_unsigned(">=", v, dim), I8)
        self.b.store(self.b.or_(self.b.load(self.oob), bad), self.oob)

    def _clamp(self, v: ir.Value, dim: ir.Value) -> ir.Value:
        zero = ir.Constant(I64, 0)
        hi = self.b.sub(dim, ir.Constant(I64, 1))
        v = self.b.select(self.b.icmp_signed(">", v, hi), hi, v)
        return self.b.select(self.b.icmp_signed("<", v, zero), zero, v)

    def _load(self, e: BufferLoad) -> ir.Value:
        ptr = self.address(e.buffer, e.indices)
        v = self.b.load(ptr, align=self.types.align(e.dtype))
        return self.types.load_value(self.b, v, e.dtype)

    # -- libraries ------------------------------------------------------------------------
    def _declare(self, name: str, ret: ir.Type, args: list) -> ir.Function:
        module = self.b.module
        fn = module.globals.get(name)
        if fn is None:
            fn = ir.Function(module, ir.FunctionType(ret, args), name)
        return fn

    def libc(self, name: str) -> ir.Function:
        ret, args = LIBC[name]
        return self._declare(name, ret, args)

    def libm(self, name: str, args: list) -> ir.Value:
        ty = args[0].type
        symbol = LIBM[name][0 if ty == F32 else 1]
        return self.b.call(self._declare(symbol, ty, [ty] * len(args)), args)

    def intrinsic(self, name: str, *args: ir.Value) -> ir.Value:
        fn = M.declare(self.b, name, args)
        return self.b.call(fn, args, fastmath=FM if args[0].type in (F32, F64) else ())


_EXPRS = {
    E.IntImm: ExprEmitter._int_imm,
    E.FloatImm: ExprEmitter._float_imm,
    E.Var: ExprEmitter._var,
    BufferLoad: ExprEmitter._load,
    **ops.HANDLERS,
}
