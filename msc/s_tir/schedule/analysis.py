"""TVM's schedule analyses (``tvm.s_tir.schedule.analysis``): which loops of a block a tensor
intrinsic's loops stand for, how a block's iteration space maps onto an intrinsic's, whether a
block writes an output, and a layout that makes a buffer's accesses contiguous.

    info = get_tensorize_loop_mapping(sch, block, dot_product_16x4_u8i8i32_desc)
    {sch.get(sref).loop_var.name: desc_loop.loop_var.name for sref, desc_loop in
     info.loop_map.items()}                                     # {"i1": "i", "i2": "k"}

Accesses are paired by role: the block's stored buffer with the intrinsic's, its loads with
the intrinsic's loads in order (``C + A * B``). An intrinsic iter var stands for the block
iter var of the innermost index it meets, aligned from the last dim (``j % 16`` -> ``j``,
``ic_f * 4 + ic_s`` -> ``ic_s``); ``get_auto_tensorize_mapping_info`` instead groups the
block's iter vars by the roles they index (an ``(output, A)`` var is the intrinsic's ``i``),
fusing each group, as TVM's auto-tensorization does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...tir import expr as E
from ...tir.function import BufferLoad, BufferStore, For, SBlock, walk_stmts
from ...tir.index_map import IndexMap
from .region import block_writes
from .tree import blocks_in

__all__ = ["AutoTensorizeMappingInfo", "TensorizeInfo", "get_auto_tensorize_mapping_info",
           "get_tensorize_loop_mapping", "is_output_block", "suggest_index_map"]


@dataclass
class TensorizeInfo:
    """``loop_map``: the block's loop (sref) -> the intrinsic's loop it stands for;
    ``block_iter_paddings``: per block iter var, the intrinsic extent it is padded to (1: none),
    when padding was allowed."""

    loop_map: dict = field(default_factory=dict)
    block_iter_paddings: list | None = None


@dataclass
class AutoTensorizeMappingInfo:
    """``mappings``: index maps from the block's iteration space onto the intrinsic's."""

    mappings: list


def is_output_block(sch, block) -> bool:
    """Whether the block writes a buffer of its function's signature."""
    stmt = sch.get(block)
    params = {b.name for b in sch.mod["main"].buffers}
    return any(b.name in params for b in block_writes(stmt))


# ------------------------------------------------------------------------ tensorize mapping

def get_tensorize_loop_mapping(sch, block, desc_func, allow_padding: bool = False):
    """Which loops of ``block`` the loops of the intrinsic description ``desc_func`` stand
    for; None when the accesses do not match."""
    stmt = sch.get(block)
    desc = _compute_block(desc_func)
    pairs = _paired_accesses(desc, stmt)
    if pairs is None:
        return None
    var_map = _iter_var_map(desc, stmt, pairs)
    if var_map is None:
        return None
    loop_rvs = sch.get_loops(block)
    by_var = {sch.get(rv).loop_var.name: rv for rv in loop_rvs}
    binding = {iv.var.name: iv.binding for iv in stmt.iter_vars}
    info = TensorizeInfo()
    for desc_loop in [s for s in walk_stmts(desc_func.body) if isinstance(s, For)]:
        dv = next((iv.var.name for iv in desc.iter_vars if iv.binding == desc_loop.var), None)
        loop_var = _innermost(binding[var_map[dv]]) if dv in var_map else None
        if loop_var is None or loop_var.name not in by_var:
            return None
        info.loop_map[sch.get_sref(by_var[loop_var.name])] = desc_loop
    paddings = _paddings(desc, stmt, var_map)
    if any(p != 1 for p in paddings) and not allow_padding:
        return None
    info.block_iter_paddings = paddings if allow_padding else None
    return info


def _compute_block(func) -> SBlock:
    """The intrinsic's (or function's) innermost block with iter vars."""
    blocks = [b for b in blocks_in(func.body) if b.iter_vars]
    return blocks[-1]


def _accesses(block: SBlock):
    """(stored buffer, its indices) and the loads of other buffers, in order."""
    store = next((s for s in walk_stmts(block.body) if isinstance(s, BufferStore)), None)
    if store is None:
        return None, []
    loads: list = []
    _collect_loads(store.value, loads)
    return (store.buffer, store.indices), [(ld.buffer, ld.indices) for ld in loads
                                           if ld.buffer.name != store.buffer.name]


def _collect_loads(e, out: list) -> None:
    if isinstance(e, BufferLoad):
        out.append(e)
        return
    for child in E.children(e):
        _collect_loads(child, out)


def _paired_accesses(desc: SBlock, block: SBlock):
    d_store, d_loads = _accesses(desc)
    t_store, t_loads = _accesses(block)
    if d_store is None or t_store is None or len(d_loads) != len(t_loads):
        return None
    return [(d_store, t_store)] + list(zip(d_loads, t_loads))


def _iter_var_map(desc: SBlock, block: SBlock, pairs: list) -> dict | None:
    """Intrinsic iter var name -> block iter var name, from indices aligned at the last dim."""
    d_kind = {iv.var.name: iv.kind for iv in desc.iter_vars}
    t_kind = {iv.var.name: iv.kind for iv in block.iter_vars}
    found: dict = {}
    for (_, d_idx), (_, t_idx) in pairs:
        for d, t in zip(reversed(d_idx), reversed(t_idx)):
            if not isinstance(d, E.Var) or d.name not in d_kind or d.name in found:
                continue
            inner = _innermost(t)
            if inner is not None and t_kind.get(inner.name) == d_kind[d.name]:
                found[d.name] = inner.name
    return found if len(found) == len(d_kind) else None


def _innermost(e):
    """The var of the term with the smallest constant scale (the last one on a tie)."""
    terms = _terms(e)
    if not terms:
        return None
    _, atom = min(reversed(terms), key=lambda t: t[0])
    names = E.free_vars(atom)
    return names[0] if names else None


def _terms(e, sign: int = 1) -> list:
    """(scale, atom) of each term of a sum (constants left out)."""
    if isinstance(e, E.BinaryOp) and e.op in ("Add", "Sub"):
        return _terms(e.a, sign) + _terms(e.b, sign if e.op == "Add" else -sign)
    if isinstance(e, E.BinaryOp) and e.op == "Mul" and isinstance(e.b, E.IntImm):
        return [(sign * e.b.value * s, a) for s, a in _terms(e.a)]
    if isinstance(e, E.IntImm):
        return []
    return [(sign, e)]


def _paddings(desc: SBlock, block: SBlock, var_map: dict) -> list:
    d_ext = {iv.var.name: E.as_int(iv.extent) for iv in desc.iter_vars}
    back = {t: d for d, t in var_map.items()}
    out = []
    for iv in block.iter_vars:
        ext, unit = E.as_int(iv.extent), d_ext.get(back.get(iv.var.name))
        out.append(unit if unit and ext is not None and ext % unit else 1)
    return out


# ------------------------------------------------------------------------ auto tensorization

def get_auto_tensorize_mapping_info(sch, block, desc_func):
    """The index map from ``block``'s iteration space onto the intrinsic's: block iter vars
    grouped by the roles they index (output, first input, second input), each group fused
    (``n * 256 + h * 16 + w``); vars indexing every role (a batch) lead, unchanged. None
    when some block var fits no group."""
    stmt = sch.get(block)
    desc = _compute_block(desc_func)
    pairs = _paired_accesses(desc, stmt)
    if pairs is None:
        return None
    d_roles, t_roles = _roles(desc, [d for d, _ in pairs]), _roles(stmt, [t for _, t in pairs])
    every = frozenset(range(len(pairs)))
    groups = {name: [] for name in d_roles}
    leading = []
    for iv in stmt.iter_vars:
        roles = t_roles[iv.var.name]
        owner = next((d for d, r in d_roles.items() if r == roles), None)
        if owner is not None:
            groups[owner].append(iv)
        elif roles == every:
            leading.append(iv)
        else:
            return None
    if any(not g for g in groups.values()):
        return None
    variables = {iv.var.name: E.Var(iv.var.name, iv.var.dtype) for iv in stmt.iter_vars}
    finals = [variables[iv.var.name] for iv in leading]
    finals += [_fused([variables[iv.var.name] for iv in g], [iv.extent for iv in g])
               for g in groups.values()]
    return AutoTensorizeMappingInfo([IndexMap(list(variables.values()), finals)])


def _roles(block: SBlock, accesses: list) -> dict:
    """Iter var name -> the set of access positions (0: the store) whose indices use it."""
    roles = {iv.var.name: set() for iv in block.iter_vars}
    for k, (_, indices) in enumerate(accesses):
        for index in indices:
            for v in E.free_vars(index):
                if v.name in roles:
                    roles[v.name].add(k)
    return {name: frozenset(r) for name, r in roles.items()}


def _fused(variables: list, extents: list):
    out = E.IntImm(0, variables[0].dtype)
    for v, ext in zip(variables, extents):
        out = E.add(E.mul(out, ext), v)
    return out


# ------------------------------------------------------------------------ suggest_index_map

def suggest_index_map(buffer, indices, loops, predicate=True):
    """A layout of ``buffer`` whose dims follow the loops that its ``indices`` split (TVM's
    ``SuggestIndexMap``): the flattened index read as a chain of loop-var splits
    (``v // lower % extent``), one new dim per split, ordered by loop then outer split first;
    the map knows its inverse. None when the index is not such a chain."""
    strides = _strides(buffer.shape)
    if strides is None:
        return None
    flat = E.IntImm(0, "int32")
    for index, stride in zip(indices, strides):
        flat = E.add(flat, E.mul(index, stride))
    extents = {lp.loop_var.name: E.as_int(lp.extent) for lp in loops}
    order_of = {lp.loop_var.name: k for k, lp in enumerate(loops)}
    chain = _split_chain(flat, extents)
    if chain is None:
        return None
    order = sorted(range(len(chain)), key=lambda k: (order_of[chain[k][0]], -chain[k][1]))
    shape = [E.as_int(d) for d in buffer.shape]
    xs = [E.Var(f"i{k}", "int32") for k in range(len(shape))]
    digits = [_digit(chain[k], xs, strides, shape) for k in order]
    if any(d is None for d in digits):
        return None
    return IndexMap(xs, digits, _inverse_map(chain, order, strides, shape))


def _strides(shape) -> list | None:
    dims = [E.as_int(d) for d in shape]
    if any(d is None for d in dims):
        return None
    out, step = [], 1
    for d in reversed(dims):
        out.insert(0, step)
        step *= d
    return out


def _split_chain(flat, extents: dict) -> list | None:
    """[(var name, lower factor, extent, scale)] outer to inner, each scale the product of the
    extents inside it; contiguous splits of one var merged."""
    splits = []
    for scale, atom in _terms(flat):
        split = _split_of(atom, extents)
        if split is None or scale <= 0:
            return None
        splits.append((*split, scale))
    splits.sort(key=lambda s: s[3])
    merged: list = []
    for var, lower, ext, scale in splits:
        expect = merged[-1][3] * merged[-1][2] if merged else 1
        if scale != expect:
            return None
        last = merged[-1] if merged else None
        if last is not None and last[0] == var and lower == last[1] * last[2]:
            merged[-1] = (var, last[1], last[2] * ext, last[3])
        else:
            merged.append((var, lower, ext, scale))
    return list(reversed(merged))


def _split_of(atom, extents: dict):
    """(var, lower factor, extent) of ``v``, ``x // c`` or ``x % c`` of a split ``x``."""
    if isinstance(atom, E.Var):
        ext = extents.get(atom.name)
        return None if ext is None else (atom.name, 1, ext)
    if isinstance(atom, E.BinaryOp) and atom.op in ("FloorDiv", "FloorMod") and \
            isinstance(atom.b, E.IntImm):
        inner, c = _split_of(atom.a, extents), atom.b.value
        if inner is None or inner[2] % c and c % inner[2]:
            return None
        var, lower, ext = inner
        if atom.op == "FloorDiv":
            return var, lower * c, -(-ext // c)
        return (var, lower, c) if c < ext else inner
    return None


def _digit(split, xs, strides: list, shape: list):
    """The split's digit of the flattened index of ``xs``: a sum over the dims it spans."""
    _, _, ext, scale = split
    out = None
    for x, stride, size in zip(xs, strides, shape):
        lo, hi = max(scale, stride), min(scale * ext, stride * size)
        if lo >= hi:
            continue
        part = _window(x, lo // stride, hi // lo, size)
        part = E.mul(part, lo // scale) if lo // scale != 1 else part
        out = part if out is None else E.add(out, part)
    return out


def _window(value, below: int, count: int, top: int):
    """``value // below % count``, leaving out ``// 1`` and a ``%`` that cannot bite."""
    part = E.floordiv(value, below) if below != 1 else value
    return E.floormod(part, count) if below * count != top else part


def _inverse_map(chain: list, order: list, strides: list, shape: list):
    position = {k: p for p, k in enumerate(order)}

    def inverse(*ys):
        out = []
        for stride, size in zip(strides, shape):
            total = E.IntImm(0, "int32")
            for k, (_, _, ext, scale) in enumerate(chain):
                lo, hi = max(scale, stride), min(scale * ext, stride * size)
                if lo < hi:
                    part = _window(ys[position[k]], lo // scale, hi // lo, ext)
                    total = E.add(total, E.mul(part, lo // stride))
            out.append(total)
        return out

    return IndexMap.from_func(inverse, ndim=len(chain))
