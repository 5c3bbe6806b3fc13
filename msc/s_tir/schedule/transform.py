"""Schedule transformations built from primitives (TVM's ``tvm.s_tir.schedule.transform``).

``tile_with_tensor_intrin(sch, block, name)`` splits the block's loops so that the
intrinsic's tile is innermost, ready for ``sch.tensorize``: each iterator of the
description is mapped to a loop of the block (a description buffer's dim is matched with
the block's buffer dim in the same position from the end, where both are a bare iterator),
that loop is split by the description's extent, and the inner parts are moved innermost in
the description's order::

    loop = tile_with_tensor_intrin(sch, block, VNNI_DOT_16x4_INTRIN)
    sch.tensorize(loop, VNNI_DOT_16x4_INTRIN)
"""

from __future__ import annotations

from ...errors import ScheduleError
from ...tir import expr as E
from ...tir.function import BufferLoad, BufferStore, For, SBlock
from ..tensor_intrin import TensorIntrin
from .region import loads

__all__ = ["tile_with_tensor_intrin"]


def tile_with_tensor_intrin(sch, block, intrin_name: str, allow_padding: bool = False):
    """The loop to tensorize after tiling ``block`` for ``intrin_name`` (None when the
    block's loops cannot be mapped onto the intrinsic's)."""
    desc = TensorIntrin.get(intrin_name).desc
    desc_loops, desc_block = _desc_nest(desc.body)
    target = sch.get(block)
    loops = sch.get_loops(block)
    by_var = {sch.get(lp).var.name: lp for lp in loops}
    mapping = _iter_mapping(desc_block, target)
    if mapping is None:
        return None
    suffix, inner_loops = [None] * len(desc_loops), set()
    d_loop_of = {iv.var.name: _loop_index(iv, desc_loops) for iv in desc_block.iter_vars}
    for d_var, t_iv in mapping.items():
        if not isinstance(t_iv.binding, E.Var) or t_iv.binding.name not in by_var:
            return None
        loop = by_var[t_iv.binding.name]
        total, inner = E.as_int(sch.get(loop).extent), E.as_int(desc_loops[d_loop_of[d_var]]
                                                                   .extent)
        if total is None or inner is None or total % inner:
            if allow_padding:
                raise ScheduleError("tile_with_tensor_intrin: padding loops to the intrinsic's "
                                    "tile is not implemented in msc", key=intrin_name)
            return None
        _, tile = sch.split(loop, [None, inner])
        suffix[d_loop_of[d_var]] = tile
        inner_loops.add(id(sch.get(tile).var))
    order, met = [], False
    for lp in sch.get_loops(block):
        if id(sch.get(lp).var) in inner_loops:
            met = True
        elif met:
            order.append(lp)
    sch.reorder(*order, *suffix)
    return suffix[0]


def _desc_nest(stmt) -> tuple:
    if isinstance(stmt, SBlock) and not stmt.iter_vars:
        stmt = stmt.body
    loops = []
    while isinstance(stmt, For):
        loops.append(stmt)
        stmt = stmt.body
    return loops, stmt


def _loop_index(iv, loops: list) -> int:
    names = [lp.var.name for lp in loops]
    if isinstance(iv.binding, E.Var) and iv.binding.name in names:
        return names.index(iv.binding.name)
    raise ScheduleError(f"a tensor intrinsic's description binds {iv.var.name} to "
                        f"{E.to_str(iv.binding)}, not to one of its loops")


def _iter_mapping(desc_block: SBlock, target: SBlock) -> dict | None:
    """desc iter var name -> the target block's IterVar playing its role."""
    t_ivs = {iv.var.name: iv for iv in target.iter_vars}
    d_kinds = {iv.var.name: iv.kind for iv in desc_block.iter_vars}
    found: dict = {}
    for (d_buf, d_idx), (t_buf, t_idx) in _pairs(desc_block.body, target.body):
        if len(t_idx) < len(d_idx):
            return None
        for d, t in zip(d_idx, t_idx[len(t_idx) - len(d_idx):]):
            if _bare_pair(d, t, d_kinds, t_ivs) and \
                    found.setdefault(d.name, t_ivs[t.name]) is not t_ivs[t.name]:
                return None
    return found if set(found) == set(d_kinds) else None


def _bare_pair(d, t, d_kinds: dict, t_ivs: dict) -> bool:
    """Both indices a bare iterator of the same kind (spatial / reduce)."""
    return isinstance(d, E.Var) and d.name in d_kinds and isinstance(t, E.Var) and \
        t.name in t_ivs and t_ivs[t.name].kind == d_kinds[d.name]


def _pairs(desc, target) -> list:
    """Each description access with the target access it stands for: the store with the
    store, a load with the next unused load of the same dtype (operands may be swapped)."""
    d_acc, t_acc = _accesses(desc), _accesses(target)
    if not d_acc or not t_acc or d_acc[0][0].dtype != t_acc[0][0].dtype:
        return []
    pairs, free = [(d_acc[0], t_acc[0])], list(t_acc[1:])
    for d in d_acc[1:]:
        match = next((t for t in free if t[0].dtype == d[0].dtype), None)
        if match is None:
            return []
        free.remove(match)
        pairs.append((d, match))
    return pairs


def _accesses(stmt) -> list:
    """(buffer, indices) of the store, then of each load of its value, in order."""
    if not isinstance(stmt, BufferStore):
        return []
    return [(stmt.buffer, stmt.indices)] + [(ld.buffer, ld.indices) for ld in loads(stmt.value)
                                            if isinstance(ld, BufferLoad)]
