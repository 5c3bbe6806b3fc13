"""``unsafe_set_dtype`` (TVM's): an intermediate buffer a block writes changes its element
type; every store to it casts the stored value to the new type and every load casts back to
the old one, views matched on it (``T.match_buffer``) included. "Unsafe" as in TVM: the
values are rounded to the new type, which is the point (float32 -> float16 storage), so the
result may differ from the original within that type's precision. A function parameter
cannot change its type.
"""

from __future__ import annotations

from dataclasses import replace

from ...errors import ScheduleError
from ...tir import expr as E
from ...tir.function import BufferLoad, BufferRegion, BufferStore, PrimFunc, SBlock
from .arith import map_children
from .blocks import find_block
from .buffers import write_buffer
from .tree import kids, rebuild

__all__ = ["unsafe_set_dtype"]


def unsafe_set_dtype(func: PrimFunc, block_name: str, index: int, dtype: str) -> PrimFunc:
    what = "unsafe_set_dtype"
    block = find_block(func, block_name, what)[-1]
    buf = write_buffer(func, block, index, what)
    if any(p.name == buf.name for p in func.buffers):
        raise ScheduleError(f"{what}: {buf.name!r} is a parameter of the function (an output "
                            "buffer); its dtype cannot change", key=block_name)
    if not (E.is_float(dtype) or E.is_int(dtype)):
        raise ScheduleError(f"{what}: {dtype!r} is not a numeric dtype", key=block_name)
    if buf.dtype == dtype:
        return func
    return replace(func, body=_retype(func.body, {buf.name: replace(buf, dtype=dtype)}))


def _retype(s, bufs: dict):
    """``s`` with the buffers of ``bufs`` (name -> retyped buffer) retyped and cast at every
    access; a view matched on one of them is retyped too."""
    def fx(e):
        if isinstance(e, BufferLoad) and e.buffer.name in bufs:
            load = BufferLoad(bufs[e.buffer.name], tuple(fx(i) for i in e.indices))
            return E.Cast(e.buffer.dtype, load)
        return map_children(e, fx)

    if isinstance(s, SBlock):
        inner, matches = dict(bufs), []
        for view, region in s.match_buffers:
            if region.buffer.name in bufs:
                new_view = replace(view, dtype=bufs[region.buffer.name].dtype)
                inner[view.name] = new_view
                view, region = new_view, BufferRegion(bufs[region.buffer.name], region.region)
            matches.append((view, region))
        s = replace(s, match_buffers=tuple(matches),
                    alloc_buffers=tuple(bufs.get(b.name, b) for b in s.alloc_buffers),
                    reads=_regions(s.reads, inner), writes=_regions(s.writes, inner),
                    init=_retype(s.init, inner) if s.init is not None else None,
                    predicate=fx(s.predicate) if s.predicate is not None else None)
        return replace(s, body=_retype(s.body, inner))
    if isinstance(s, BufferStore):
        value = fx(s.value)
        if s.buffer.name in bufs:
            new = bufs[s.buffer.name]
            return BufferStore(new, E.Cast(new.dtype, value), tuple(fx(i) for i in s.indices))
        return BufferStore(s.buffer, value, tuple(fx(i) for i in s.indices))
    new = s
    for field in ("value", "cond", "min", "extent"):
        if isinstance(getattr(s, field, None), E.PrimExpr):
            new = replace(new, **{field: fx(getattr(s, field))})
    if kids(s):
        new = rebuild(new, [_retype(c, bufs) for c in kids(new)])
    return new


def _regions(regions, bufs: dict):
    if regions is None:
        return None
    return tuple(BufferRegion(bufs.get(r.buffer.name, r.buffer), r.region) for r in regions)
