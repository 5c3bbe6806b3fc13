"""``tensorize`` (TVM's): replace the computation under a loop (or a block) by a tensor
intrinsic's implementation, after checking that it computes what the intrinsic describes.

    for j_1, k_1 in T.grid(16, 4):                 -- tensorize(j_1, "dot_16x4_vnni") -->
        C[i, j_0 * 16 + j_1] += u8(X[i, ..]) * ..   with T.sblock("compute_o"):
                                                      C_1 = T.match_buffer(C[i, j_0*16:j_0*16+16], (16,))
                                                      ... the implementation's body on C_1, ...

The loop is blockized first (``blockize.py``); the inner nest must then match the
intrinsic's description: the same loop extents, the same expression tree (operators, casts,
dtypes, constants), and each buffer access must touch the tile the description names. The
tile of each target buffer is its access region over the inner loops; the description's
index of every element is checked against the target's, element by element, for two
positions of the outer iterators. Each description buffer then becomes a ``match_buffer``
of its tile, the implementation's body runs on those, and the outer block states the tiles
as its reads and writes. A mismatch is a ScheduleError naming what differs.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

from ...errors import MSCError, ScheduleError
from ...tir import expr as E
from ...tir.function import (
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    Evaluate,
    For,
    PrimFunc,
    SBlock,
    SeqStmt,
)
from . import blockize as BZ
from .arith import map_children
from .blocks import find_block
from .region import loads
from .tree import blocks_in, replace_at, rewrite_stmt, var_names

__all__ = ["tensorize"]

_SAMPLES = (0, 1)  # outer iterator values at which the index correspondence is checked


def tensorize(func: PrimFunc, target: tuple, intrin, name: str, preserve: bool) -> tuple:
    """``target``: ("loop", var) or ("block", name). Returns (func, outer block name)."""
    kind, ref = target
    if kind == "loop":
        func, block_name = BZ.blockize(func, ref, preserve)
    else:
        block_name = ref
    path = find_block(func, block_name, "tensorize")
    outer = path[-1]
    desc_loops, desc_block = _nest(intrin.desc.body, intrin.desc.name)
    loops, inner = _nest(outer.body, block_name)
    _check_loops(desc_loops, loops, name)
    pairs: list = []
    _match(desc_block.body, inner.body, pairs, name)
    tiles = _tiles(pairs, desc_loops, desc_block, loops, inner, name)
    new_outer = _replace_body(func, outer, intrin, tiles)
    return replace(func, body=replace_at(path, new_outer)), block_name


# ------------------------------------------------------------------------ structure

def _nest(stmt, what: str) -> tuple:
    """(loops, the block they hold): below a root block, a chain of single loops."""
    if isinstance(stmt, SBlock) and (stmt.name == "root" or not stmt.iter_vars) and \
            isinstance(stmt.body, (For, SBlock)):
        stmt = stmt.body
    loops = []
    while isinstance(stmt, For):
        loops.append(stmt)
        stmt = stmt.body
    if not isinstance(stmt, SBlock):
        raise ScheduleError(f"tensorize: {what!r} must hold one loop nest around one block",
                            key=what, hint="split and reorder so the tile's loops are "
                                           "innermost, with nothing else under them")
    return loops, stmt


def _check_loops(desc: list, target: list, name: str) -> None:
    want = [E.as_int(lp.extent) for lp in desc]
    got = [E.as_int(lp.extent) for lp in target]
    if want != got:
        raise ScheduleError(f"tensorize: intrinsic {name!r} describes loops of extents {want}, "
                            f"the target has {got}", key=name,
                            hint="split the loops to the intrinsic's tile and reorder them "
                                 "innermost")


def _match(d, t, pairs: list, name: str) -> None:
    """Walk the description and the target in step, collecting buffer access pairs (and
    integer subexpressions without loads, compared by value: ``vi % 8`` of the description
    is ``(v_o * 8 + v_i) % 8`` of a blockized block)."""
    if _index_like(d) and _index_like(t):
        pairs.append(("value", None, d, None, t))
        return
    if type(d) is not type(t):
        _mismatch(d, t, name)
    if isinstance(d, (BufferStore, BufferLoad)) and d.buffer.dtype != t.buffer.dtype:
        raise ScheduleError(f"tensorize: intrinsic {name!r} takes {d.buffer.name} as "
                            f"{d.buffer.dtype}, the block's {t.buffer.name!r} is "
                            f"{t.buffer.dtype}", key=name)
    if isinstance(d, BufferStore):
        pairs.append(("write", d.buffer, d.indices, t.buffer, t.indices))
        _match(d.value, t.value, pairs, name)
    elif isinstance(d, BufferLoad):
        pairs.append(("read", d.buffer, d.indices, t.buffer, t.indices))
    elif isinstance(d, E.BinaryOp):
        if d.op != t.op:
            _mismatch(d, t, name)
        _match_operands(d, t, pairs, name)
    elif isinstance(d, E.Cast):
        if d.dtype != t.dtype:
            _mismatch(d, t, name)
        _match(d.value, t.value, pairs, name)
    elif isinstance(d, (E.IntImm, E.FloatImm)):
        if d.value != t.value or d.dtype != t.dtype:
            _mismatch(d, t, name)
    elif isinstance(d, E.PrimCall):
        if d.name != t.name or len(d.args) != len(t.args):
            _mismatch(d, t, name)
        for a, b in zip(d.args, t.args):
            _match(a, b, pairs, name)
    elif not isinstance(d, E.Var):
        _mismatch(d, t, name)


def _index_like(e) -> bool:
    return isinstance(e, E.PrimExpr) and not isinstance(e, (E.IntImm, BufferLoad)) and \
        e.dtype.startswith(("int", "uint")) and not loads(e)


def _match_operands(d, t, pairs: list, name: str) -> None:
    """Operands in order, or swapped for + and * (msc's arithmetic orders them canonically,
    so ``x * w`` of a te.compute may be stored as ``w * x``)."""
    attempt: list = []
    try:
        _match(d.a, t.a, attempt, name)
        _match(d.b, t.b, attempt, name)
    except ScheduleError as in_order:
        if d.op not in ("Add", "Mul"):
            raise
        attempt = []
        try:
            _match(d.a, t.b, attempt, name)
            _match(d.b, t.a, attempt, name)
        except ScheduleError:
            raise in_order from None  # the in-order mismatch says more
    pairs.extend(attempt)


def _show(x) -> str:
    if isinstance(x, BufferLoad):
        return f"{x.buffer.name}[{', '.join(_show(i) for i in x.indices)}]"
    try:
        return E.to_str(x)
    except MSCError:  # a load inside: name the node
        return type(x).__name__


def _mismatch(d, t, name: str):
    show = [_show(x) for x in (d, t)]
    raise ScheduleError(f"tensorize: the block does not compute what intrinsic {name!r} "
                        f"describes: {show[0]} in the description, {show[1]} in the block",
                        key=name)


# ------------------------------------------------------------------------ tiles

def _tiles(pairs, desc_loops, desc_block, loops, inner, name: str) -> dict:
    """desc buffer name -> (desc buffer, target buffer, [(lo, extent) per target dim])."""
    d_bind = {iv.var.name: iv.binding for iv in desc_block.iter_vars}
    t_bind = {iv.var.name: iv.binding for iv in inner.iter_vars}
    tiles: dict = {}
    for kind, dbuf, dind, tbuf, tind in pairs:
        if kind == "value":
            _check_value(_subst(dind, d_bind), _subst(tind, t_bind), desc_loops, loops, name)
            continue
        dind = [_subst(i, d_bind) for i in dind]
        tind = [_subst(i, t_bind) for i in tind]
        region = [_span(i, loops, tbuf.name) for i in tind]
        known = tiles.setdefault(dbuf.name, (dbuf, tbuf, region))
        if known[1].name != tbuf.name or not _same_region(known[2], region):
            raise ScheduleError(f"tensorize: intrinsic {name!r} reads and writes its "
                                f"{dbuf.name} at one tile, the block at two", key=name)
        _check_tile(dbuf, dind, tbuf, tind, region, desc_loops, loops, name)
    return tiles


def _subst(e, binds: dict):
    return E.substitute(e, binds) if binds else e


def _span(index, loops: list, buf: str) -> tuple:
    """(first index, extent) of ``index`` over the inner loops: found by evaluation at two
    positions of the outer iterators; the first index is ``index`` at the inner values that
    give it (so ``(j_o * 16 + j_i) % 16`` has first index 0 and extent 16)."""
    inner = [lp.var.name for lp in loops]
    outer = sorted({v.name for v in E.free_vars(index)} - set(inner))
    combos = list(itertools.product(*[range(E.as_int(lp.min), E.as_int(lp.min) +
                                            E.as_int(lp.extent)) for lp in loops]))
    spans = []
    for sample in _SAMPLES:
        env = dict.fromkeys(outer, sample)
        values = [int(E.evaluate(index, {**env, **dict(zip(inner, c))})) for c in combos]
        low = min(values)
        spans.append((low, max(values) - low + 1, combos[values.index(low)]))
    if spans[0][1] != spans[1][1]:
        raise ScheduleError(f"tensorize: the tile of {buf!r} changes size with the outer "
                            f"loops ({E.to_str(index)})", key=buf)
    first = E.canonicalize(E.substitute(index, dict(zip(inner, spans[0][2]))))
    for sample, (low, _, _) in zip(_SAMPLES, spans):
        if int(E.evaluate(first, dict.fromkeys(outer, sample))) != low:
            raise ScheduleError(f"tensorize: the tile of {buf!r} does not start at one "
                                f"index ({E.to_str(index)})", key=buf)
    return first, spans[0][1]


def _same_region(a: list, b: list) -> bool:
    return all(E.as_int(E.canonicalize(E.sub(x[0], y[0]))) == 0 and x[1] == y[1]
               for x, y in zip(a, b))


def _check_tile(dbuf, dind, tbuf, tind, region, desc_loops, loops, name: str) -> None:
    """The tile's non-unit dims are the description buffer's, and every element the
    description touches is the one the block touches (checked by evaluation)."""
    kept = [k for k, (_, ext) in enumerate(region) if ext > 1]
    want = [E.as_int(d) for d in dbuf.shape if E.as_int(d) != 1]
    if [region[k][1] for k in kept] != want:
        raise ScheduleError(f"tensorize: intrinsic {name!r} takes {dbuf.name} of shape "
                            f"{[E.as_int(d) for d in dbuf.shape]}, the block touches a "
                            f"{[ext for _, ext in region]} tile of {tbuf.name!r}", key=name)
    d_kept = [k for k, d in enumerate(dbuf.shape) if E.as_int(d) != 1]
    outer = sorted({v.name for i in tind for v in E.free_vars(i)}
                   - {lp.var.name for lp in loops})
    for sample in _SAMPLES:
        env = dict.fromkeys(outer, sample)
        for values in itertools.product(*[range(E.as_int(lp.extent)) for lp in loops]):
            t_env = {**env, **{lp.var.name: E.as_int(lp.min) + v
                               for lp, v in zip(loops, values)}}
            d_env = {lp.var.name: E.as_int(lp.min) + v for lp, v in zip(desc_loops, values)}
            got = [int(E.evaluate(tind[k], t_env)) - int(E.evaluate(region[k][0], env))
                   for k in kept]
            expect = [int(E.evaluate(dind[k], d_env)) for k in d_kept]
            if got != expect:
                raise ScheduleError(f"tensorize: the block reads {tbuf.name!r} in another "
                                    f"order than intrinsic {name!r} reads {dbuf.name}",
                                    key=name, hint="transform the buffer's layout so the "
                                                   "tile is laid out as the intrinsic expects")


def _envs(desc_loops: list, loops: list, exprs: list):
    """(description env, block env) for every inner position at each outer sample."""
    inner = {lp.var.name for lp in loops}
    outer = sorted({v.name for e in exprs for v in E.free_vars(e)} - inner)
    for sample in _SAMPLES:
        env = dict.fromkeys(outer, sample)
        for values in itertools.product(*[range(E.as_int(lp.extent)) for lp in loops]):
            yield ({lp.var.name: E.as_int(lp.min) + v for lp, v in zip(desc_loops, values)},
                   {**env, **{lp.var.name: E.as_int(lp.min) + v for lp, v in zip(loops, values)}})


def _check_value(d, t, desc_loops: list, loops: list, name: str) -> None:
    for d_env, t_env in _envs(desc_loops, loops, [t]):
        if int(E.evaluate(d, d_env)) != int(E.evaluate(t, t_env)):
            raise ScheduleError(f"tensorize: the block computes {_show(t)} where intrinsic "
                                f"{name!r} computes {_show(d)}", key=name)


# ------------------------------------------------------------------------ the new block

def _replace_body(func: PrimFunc, outer: SBlock, intrin, tiles: dict) -> SBlock:
    impl_root = intrin.impl.body
    impl_body = impl_root.body if isinstance(impl_root, SBlock) else impl_root
    taken = var_names(func.body) | {b.name for b in func.buffers} | {
        a.name for blk in blocks_in(func.body) for a in blk.alloc_buffers}
    names, buffers, matches = {}, {}, []
    wide = any(lo.dtype == "int64" for _, _, region in tiles.values() for lo, _ in region)
    for dparam, iparam in zip(intrin.desc.params, intrin.impl.params):
        if not isinstance(dparam, Buffer) or dparam.name not in tiles:
            continue
        _, tbuf, region = tiles[dparam.name]
        sub = _sub_buffer(_widened(iparam) if wide else iparam, tbuf, taken)
        buffers[iparam.name] = sub
        names[f"{iparam.name}.data"] = E.Var(f"{sub.name}.data", "handle")
        names[f"{iparam.name}.elem_offset"] = E.Var(f"{sub.name}.elem_offset", "int32")
        if isinstance(iparam.elem_offset, E.Var):  # TVM's match_buffer keeps the offset var
            names[iparam.elem_offset.name] = sub.elem_offset
        matches.append((sub, BufferRegion(tbuf, _region(region))))
    body = rewrite_stmt(impl_body, names, buffers)
    if wide:  # TVM normalizes the implementation's index dtype to the tiles' (int64)
        body = _widen_stmt(body)
    reads = _stated(tiles, "read", intrin.desc)
    writes = _stated(tiles, "write", intrin.desc)
    notes = {**outer.annotations, **(impl_root.annotations if isinstance(impl_root, SBlock)
                                     else {})}
    return replace(outer, body=body, match_buffers=tuple(matches), reads=reads, writes=writes,
                   annotations=notes)


def _sub_buffer(iparam: Buffer, tbuf: Buffer, taken: set) -> Buffer:
    """The implementation's buffer as a view of the tile (its strides are the parent's,
    bound when the block is lowered, as TVM's match_buffer leaves them)."""
    name = f"{tbuf.name}_{iparam.name}"
    k = 1
    while name in taken:
        name, k = f"{tbuf.name}_{iparam.name}_{k}", k + 1
    taken.add(name)
    offset = E.Var(f"{name}_elem_offset", iparam.elem_offset.dtype) if \
        isinstance(iparam.elem_offset, E.Var) else None
    return Buffer(name, iparam.shape, iparam.dtype, elem_offset=offset, scope=tbuf.scope)


def _widened(buf: Buffer) -> Buffer:
    """``buf`` with int64 dims and offset var (TVM's IndexDataTypeNormalizer)."""
    shape = tuple(E.IntImm(d.value, "int64") if isinstance(d, E.IntImm) else d
                  for d in buf.shape)
    offset = buf.elem_offset
    if isinstance(offset, E.Var):
        offset = E.Var(offset.name, "int64")
    return replace(buf, shape=shape, elem_offset=offset)


def _widen_stmt(s):
    """The int32 constants that meet int64 operands in ``s``'s expressions made int64."""
    if isinstance(s, SeqStmt):
        return SeqStmt(tuple(_widen_stmt(c) for c in s.stmts))
    if isinstance(s, Evaluate):
        return Evaluate(_widen(s.value))
    return s


def _widen(e):
    if isinstance(e, E.BinaryOp):
        a, b = _widen(e.a), _widen(e.b)
        if a.dtype == "int64" and isinstance(b, E.IntImm) and b.dtype == "int32":
            b = E.IntImm(b.value, "int64")
        return E.BinaryOp(e.op, a, b)
    return map_children(e, _widen) if isinstance(e, (E.PrimCall, E.Cast)) else e


def _region(region: list) -> tuple:
    return tuple((lo, None) if ext == 1 else (lo, E.add(lo, ext)) for lo, ext in region)


def _stated(tiles: dict, kind: str, desc: PrimFunc) -> tuple:
    root = desc.body if isinstance(desc.body, SBlock) else None
    stated = (root.reads if kind == "read" else root.writes) if root is not None else None
    order = [r.buffer.name for r in stated] if stated is not None else list(tiles)
    return tuple(BufferRegion(tiles[n][1], _region(tiles[n][2])) for n in order if n in tiles)
