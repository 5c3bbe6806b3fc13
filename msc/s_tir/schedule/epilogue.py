"""``fuse_reduction_epilogue`` (TVM's): an elementwise epilogue of a reduction (a bias add,
a ReLU, a clip) moves into the reduction block, which then writes the epilogue's output.

    temp[vi, vj] = temp[vi, vj] + A[vi, vk] * B[vj, vk]      (init: temp[vi, vj] = 0)
    D[vi, vj] = T.max(temp[vi, vj] + C[vi, vj], 0)
  becomes one block:
    init:  D[vi, vj] = T.max(C[vi, vj], 0)                  (the epilogue of 0)
    body:  D[vi, vj] = T.max(D[vi, vj] + A[vi, vk] * B[vj, vk], 0)

As TVM defines it, the epilogue is applied at every step of the reduction: the sum an addend
joins is dropped from the update (the init holds it), and whatever wraps it (max, min) is
applied per step. That is the result for a bias add, and the per-iteration form for ReLU
and clipping (TVM's tests compare with exactly that). The epilogue block and its loops go;
``temp`` stays allocated, as in TVM. Refused (TVM's BodyAnalysisError and block checks): an
epilogue with a predicate or that is not one store, that reads the reduction result other
than once, or scales it (``*``, ``/``, ``%``); a producer that is not a reduction writing one
intermediate buffer; an epilogue with reduce axes.
"""

from __future__ import annotations

from dataclasses import replace

from ...errors import ScheduleError
from ...tir import expr as E
from ...tir.function import BufferLoad, BufferStore, PrimFunc, SBlock
from .arith import map_children, raw_subst
from .blocks import find_block
from .region import block_writes, loads
from .tree import blocks_in, replace_at

__all__ = ["fuse_reduction_epilogue"]


def _fail(epilogue: SBlock, why: str):
    return ScheduleError(f"fuse_reduction_epilogue: the body of block {epilogue.name!r} does "
                         f"not fit the epilogue pattern: {why}", key=epilogue.name)


def _check_reduction(func: PrimFunc, block: SBlock):
    """The producer: a reduction (init, reduce axes) writing one intermediate buffer."""
    what = "fuse_reduction_epilogue"
    writes = block_writes(block)
    if len(writes) != 1:
        raise ScheduleError(f"{what}: block {block.name!r} must write exactly one buffer",
                            key=block.name)
    if block.init is None or not any(iv.kind == "reduce" for iv in block.iter_vars):
        raise ScheduleError(f"{what}: block {block.name!r} is not a reduction block",
                            key=block.name, hint="the first block must have T.init() and "
                                                 "reduce axes")
    if writes[0].name in {b.name for b in func.buffers}:
        raise ScheduleError(f"{what}: block {block.name!r} is an output block (it writes the "
                            f"parameter {writes[0].name!r})", key=block.name)
    return writes[0]


def _check_epilogue(epilogue: SBlock, buf) -> tuple:
    """(the epilogue's store, the one load of ``buf`` in it)."""
    if any(iv.kind != "spatial" for iv in epilogue.iter_vars) or epilogue.init is not None:
        raise ScheduleError(f"fuse_reduction_epilogue: block {epilogue.name!r} is not a "
                            "complete block (it has reduce axes or an init)",
                            key=epilogue.name)
    if epilogue.predicate is not None:
        raise _fail(epilogue, "it has a predicate")
    if not isinstance(epilogue.body, BufferStore) or blocks_in(epilogue.body):
        raise _fail(epilogue, "it is not a single store")
    store = epilogue.body
    found = [ld for ld in loads(store.value) if ld.buffer.name == buf.name]
    if len(found) != 1:
        raise _fail(epilogue, f"it reads {buf.name!r} {len(found)} times, not once")
    if _scales(store.value, buf.name):
        raise _fail(epilogue, f"it scales {buf.name!r} (*, / or %)")
    return store, found[0]


def _scales(e, name: str) -> bool:
    if isinstance(e, E.BinaryOp) and e.op in ("Mul", "Div", "Mod", "FloorDiv", "FloorMod") \
            and any(ld.buffer.name == name for ld in loads(e)):
        return True
    if isinstance(e, BufferLoad):
        return any(_scales(i, name) for i in e.indices)
    return any(_scales(c, name) for c in E.children(e))


def _is_zero(e) -> bool:
    return isinstance(e, (E.IntImm, E.FloatImm)) and e.value == 0


def _init_value(value, name: str, zero):
    """The epilogue of the reduction's identity: loads of ``name`` become 0, ``0 + x`` is x."""
    if isinstance(value, BufferLoad) and value.buffer.name == name:
        return zero
    if isinstance(value, E.BinaryOp) and value.op == "Add":
        a, b = _init_value(value.a, name, zero), _init_value(value.b, name, zero)
        return b if _is_zero(a) else a if _is_zero(b) else E.BinaryOp("Add", a, b)
    return map_children(value, lambda c: _init_value(c, name, zero))


class _Applier:
    """TVM's GeneralizedEpilogueApplier: the load becomes the reduction update, and the Add
    that directly holds it keeps only that side (the addend went into the init)."""

    def __init__(self, name: str, update):
        self.name, self.update, self.found = name, update, False

    def visit(self, e):
        if isinstance(e, BufferLoad):
            if e.buffer.name == self.name:
                self.found = True
                return self.update
            return BufferLoad(e.buffer, tuple(self.visit(i) for i in e.indices))
        if isinstance(e, E.BinaryOp) and e.op == "Add":
            before, self.found = self.found, False
            a = self.visit(e.a)
            in_a, self.found = self.found, False
            b = self.visit(e.b)
            in_b = self.found
            if in_a and not _reduction_load(b, self.name):
                return a
            if in_b and not in_a and not _reduction_load(a, self.name):
                return b
            if not (in_a or in_b):
                self.found = before
            return E.BinaryOp("Add", a, b)
        return map_children(e, self.visit)


def _reduction_load(e, name: str) -> bool:
    return isinstance(e, BufferLoad) and e.buffer.name == name


def fuse_reduction_epilogue(func: PrimFunc, reduction_name: str,
                            epilogue_name: str) -> PrimFunc:
    what = "fuse_reduction_epilogue"
    rpath = find_block(func, reduction_name, what)
    block = rpath[-1]
    buf = _check_reduction(func, block)
    epilogue = find_block(func, epilogue_name, what)[-1]
    store, _ = _check_epilogue(epilogue, buf)
    spatial = [iv.var for iv in block.iter_vars if iv.kind == "spatial"]
    if len(spatial) != len(epilogue.iter_vars):
        raise ScheduleError(f"{what}: blocks {reduction_name!r} and {epilogue_name!r} have "
                            "different numbers of spatial axes", key=epilogue_name)
    var_map = {iv.var.name: v for iv, v in zip(epilogue.iter_vars, spatial)}
    out = store.buffer
    zero = E.FloatImm(0.0, out.dtype) if E.is_float(out.dtype) else E.IntImm(0, out.dtype)
    value = raw_subst(store.value, var_map)
    init = BufferStore(out, _init_value(value, buf.name, zero),
                       tuple(raw_subst(i, var_map) for i in store.indices))
    new_block = replace(block, init=init, body=_retarget(block.body, buf.name, out, value),
                        reads=None, writes=None)
    func = replace(func, body=replace_at(rpath, new_block))
    return replace(func, body=replace_at(find_block(func, epilogue_name, what), None))


def _retarget(body, name: str, out, epilogue_value):
    """The reduction's stores to ``name`` store the epilogue of their update into ``out``;
    its other loads of ``name`` read ``out``."""
    def to_out(e):
        if isinstance(e, BufferLoad) and e.buffer.name == name:
            return BufferLoad(out, tuple(to_out(i) for i in e.indices))
        return map_children(e, to_out)

    if isinstance(body, BufferStore):
        update = to_out(body.value)
        if body.buffer.name == name:
            return BufferStore(out, _Applier(name, update).visit(epilogue_value), body.indices)
        return BufferStore(body.buffer, update, tuple(to_out(i) for i in body.indices))
    raise ScheduleError(f"fuse_reduction_epilogue: the reduction's body must be a single "
                        f"store to {name!r}")
