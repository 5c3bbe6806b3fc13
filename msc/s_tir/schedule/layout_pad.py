"""``transform_layout`` with ``pad_value`` (TVM's padded layouts): a map whose new shape
holds more elements than the buffer (``lambda i: [i // 4, i % 4]`` on 14 elements gives 4 x 4)
leaves padding, which gets ``pad_value``.

As TVM does: a producer that visits the whole buffer in row-major order and does nothing else
is rewritten to visit the new shape, storing ``T.if_then_else(pad, pad_value, value)``::

    B[vi, vj] = T.if_then_else(vi == 3 and 2 <= vj, 0, A[vi * 4 + vj])

any other producer keeps its loops (storing through the map), and a block
``<block>_pad_<buffer>`` right after its nest writes ``pad_value`` where ``T.where(pad)``.
The padding predicate comes from the map's inverse; msc reads maps whose outputs are, per
input index ``x``, ``x`` itself or the pair ``x // c``, ``x % c``. Refused by name: other
maps, an input buffer (TVM records an assumption about its padding), a buffer written by
several blocks or by statements outside blocks.
"""

from __future__ import annotations

from dataclasses import replace

from ...errors import ScheduleError
from ...tir import expr as E
from ...tir.function import BufferStore, For, IterVar, PrimFunc, SBlock, SeqStmt, seq
from .arith import raw_subst
from .inline import own_stmts
from .loops import fresh_name
from .tree import blocks_in, find_path, kids, rebuild, swap, var_names

__all__ = ["padded_layout"]


def padded_layout(func: PrimFunc, rewritten: PrimFunc, buf, new_buf, variables: list,
                  outputs: list, pad_value, what: str) -> PrimFunc:
    """``rewritten`` is ``func`` with every access of ``buf`` already mapped; returns it with
    the padding written."""
    inverse, pad_of = _inverse(variables, outputs, buf.shape, what)
    writers = [b for b in blocks_in(func.body)[1:] if _stores(b, buf.name)]
    if not writers:
        raise ScheduleError(f"{what}: padding the input buffer {buf.name!r} is not "
                            "implemented in msc (TVM states an assumption about its pad)",
                            key=buf.name, hint="transform the layout of the buffer that "
                            "its producer writes, or pick a map without padding")
    if len(writers) > 1 or _opaque_store(func.body, buf.name):
        raise ScheduleError(f"{what}: {buf.name!r} is written by several blocks or outside "
                            "a block; msc pads a buffer one block writes", key=buf.name)
    writer = writers[0]
    path = find_path(rewritten.body, lambda s: isinstance(s, SBlock) and s.name == writer.name)
    nest = _row_major_nest(path, writer, buf)
    if nest is not None:
        new = _padded_producer(func, writer, nest, buf, new_buf, inverse, pad_of, pad_value)
        return replace(rewritten, body=swap(rewritten.body, nest[0], new))
    top = _top_stmt(path)
    block = _pad_block(func, writer, new_buf, pad_of, pad_value, buf)
    return replace(rewritten, body=_insert_after(rewritten.body, top, block))


def _stores(block: SBlock, name: str) -> bool:
    return any(isinstance(s, BufferStore) and s.buffer.name == name for s in own_stmts(block))


def _opaque_store(body, name: str) -> bool:
    """A store of ``name`` directly under the root block (outside any other block)."""
    root = body if isinstance(body, SBlock) else None
    return root is not None and _stores(root, name)


# ----------------------------------------------------------------------------- the map

def _inverse(variables: list, outputs: list, shape: tuple, what: str):
    """(function of the new indices -> old indices, function of them -> padding predicate)."""
    parts = []
    for x, n in zip(variables, shape):
        div = mod = ident = None
        for k, o in enumerate(outputs):
            if isinstance(o, E.Var) and o.name == x.name:
                ident = k
            elif isinstance(o, E.BinaryOp) and isinstance(o.a, E.Var) and o.a.name == x.name \
                    and E.as_int(o.b) is not None:
                if o.op == "FloorDiv":
                    div = (k, E.as_int(o.b))
                elif o.op == "FloorMod":
                    mod = (k, E.as_int(o.b))
        if ident is not None:
            parts.append(("ident", ident, None, None))
        elif div is not None and mod is not None and div[1] == mod[1]:
            parts.append(("split", div[0], mod[0], (div[1], E.as_int(n))))
        else:
            raise ScheduleError(f"{what}: msc pads layouts whose map sends each index x to x "
                                f"or to the pair x // c, x % c; not {x.name} here",
                                hint="write the map in that form, or avoid padding")

    def old_of(new: list) -> list:
        out = []
        for kind, a, b, consts in parts:
            if kind == "ident":
                out.append(new[a])
            else:
                c = consts[0]
                out.append(E.BinaryOp("Add", E.BinaryOp("Mul", new[a], E.IntImm(
                    c, new[a].dtype)), new[b]))
        return out

    def pad_of(new: list):
        conds = []
        for kind, a, b, consts in parts:
            if kind == "split" and consts[1] % consts[0]:
                c, n = consts
                conds.append(E.BinaryOp("And", E.BinaryOp("EQ", new[a], E.IntImm(
                    n // c, new[a].dtype)), E.BinaryOp("LE", E.IntImm(n % c, new[b].dtype),
                                                       new[b])))
        pred = None
        for c in conds:
            pred = c if pred is None else E.BinaryOp("Or", pred, c)
        return pred

    return old_of, pad_of


def _pad(pad_value, new: list, buf):
    if callable(pad_value):
        return E.convert(pad_value(*new))
    if isinstance(pad_value, E.PrimExpr):
        return pad_value
    return E.const(pad_value, buf.dtype)


# ----------------------------------------------------------------------------- producers

def _row_major_nest(path: list, writer: SBlock, buf):
    """The writer's spatial loops (outermost first) when it visits the whole buffer in
    row-major order and stores nothing else; else None."""
    stores = [s for s in own_stmts(writer) if isinstance(s, BufferStore)]
    if not isinstance(writer.body, BufferStore) or writer.body.buffer.name != buf.name:
        return None
    if any(s.buffer.name != buf.name for s in stores) or len(stores) > (
            2 if writer.init is not None else 1):
        return None
    spatial = [iv for iv in writer.iter_vars if iv.kind == "spatial"]
    index = tuple(getattr(i, "name", None) for i in writer.body.indices)
    if index != tuple(iv.var.name for iv in spatial) or len(spatial) != len(buf.shape):
        return None
    loops = [n for n in path[:-1] if isinstance(n, For)]
    if len(loops) < len(spatial):
        return None
    outer = loops[-len(writer.iter_vars):] if len(loops) >= len(writer.iter_vars) else []
    if len(outer) != len(writer.iter_vars):
        return None
    for lp, iv in zip(outer, writer.iter_vars):
        if not (isinstance(iv.binding, E.Var) and iv.binding.name == lp.var.name):
            return None
    for lp, dim in zip(outer[:len(spatial)], buf.shape):
        if E.as_int(lp.min) != 0 or E.as_int(lp.extent) != E.as_int(dim):
            return None
    if any(iv.kind != "spatial" for iv in writer.iter_vars[:len(spatial)]):
        return None
    for parent, child in zip(outer, outer[1:] + [path[-1]]):
        if parent.body is not child:
            return None
    return outer


def _padded_producer(func, writer, nest, buf, new_buf, old_of, pad_of, pad_value):
    taken = var_names(func.body)
    spatial = [iv for iv in writer.iter_vars if iv.kind == "spatial"]
    loop_vars = [E.Var(fresh_name(func, n, taken), "int32")
                 for n in _names(len(new_buf.shape), "ijkl")]
    new_vars = [E.Var(fresh_name(func, f"v{n}", taken), "int32")
                for n in _names(len(new_buf.shape), "ijkl")]
    ivs = [IterVar(v, E.IntImm(0, "int32"), d, "spatial", lv)
           for v, d, lv in zip(new_vars, new_buf.shape, loop_vars)]
    old = dict(zip([iv.var.name for iv in spatial], old_of(new_vars)))
    pred, pad = pad_of(new_vars), _pad(pad_value, new_vars, buf)
    store = writer.body
    own = _own_loads(buf, new_buf, [iv.var.name for iv in spatial], new_vars)
    value = _if_then_else(pred, pad, raw_subst(own(store.value), old))
    body = BufferStore(new_buf, value, tuple(new_vars))
    init = writer.init
    if init is not None:
        init = BufferStore(new_buf, _if_then_else(pred, pad, raw_subst(init.value, old)),
                           tuple(new_vars))
    rest = list(writer.iter_vars[len(spatial):])
    block = replace(writer, iter_vars=tuple(ivs + rest), body=body, init=init, reads=None,
                    writes=None)
    stmt = block
    for lp in reversed(nest[len(spatial):]):
        stmt = replace(lp, body=stmt)
    for lv, d in reversed(list(zip(loop_vars, new_buf.shape))):
        stmt = For(lv, E.IntImm(0, "int32"), d, "serial", stmt)
    return stmt


def _own_loads(buf, new_buf, axes: list, new_vars: list):
    """Loads of the buffer at the block's own axes (a reduction's update) read the new
    buffer at the new axes."""
    from ...tir.function import BufferLoad
    from .arith import map_children

    def fx(e):
        if isinstance(e, BufferLoad) and e.buffer.name == buf.name and \
                [getattr(i, "name", None) for i in e.indices] == axes:
            return BufferLoad(new_buf, tuple(new_vars))
        return map_children(e, fx, binary=E.BinaryOp)
    return fx


def _if_then_else(cond, then, other):
    return E.PrimCall("if_then_else", [cond, then, other], other.dtype)


def _names(n: int, letters: str) -> list:
    return [letters[k] if k < len(letters) else f"i{k}" for k in range(n)]


def _pad_block(func, writer, new_buf, pad_of, pad_value, buf):
    taken = var_names(func.body)
    loop_vars = [E.Var(fresh_name(func, n, taken), "int32")
                 for n in _names(len(new_buf.shape), "ijkl")]
    new_vars = [E.Var(fresh_name(func, f"v{n}", taken), "int32")
                for n in _names(len(new_buf.shape), "ijkl")]
    ivs = tuple(IterVar(v, E.IntImm(0, "int32"), d, "spatial", lv)
                for v, d, lv in zip(new_vars, new_buf.shape, loop_vars))
    body = BufferStore(new_buf, _pad(pad_value, new_vars, buf), tuple(new_vars))
    stmt = SBlock(f"{writer.name}_pad_{buf.name}", body, ivs, predicate=pad_of(loop_vars))
    for lv, d in reversed(list(zip(loop_vars, new_buf.shape))):
        stmt = For(lv, E.IntImm(0, "int32"), d, "serial", stmt)
    return stmt


# ----------------------------------------------------------------------------- placing

def _top_stmt(path: list):
    """The statement of the writer's scope that holds the writer."""
    scope_at = max(k for k, n in enumerate(path[:-1]) if isinstance(n, SBlock))
    below = [n for n in path[scope_at + 1:] if not isinstance(n, SeqStmt)]
    return below[0]


def _insert_after(s, top, new):
    if isinstance(s, SBlock) and s.body is top:
        return replace(s, body=SeqStmt((top, new)))
    if isinstance(s, SeqStmt) and any(c is top for c in s.stmts):
        items = []
        for c in s.stmts:
            items += [c, new] if c is top else [c]
        return seq(items)
    children = kids(s)
    if not children:
        return s
    fresh = [_insert_after(c, top, new) for c in children]
    return s if all(a is b for a, b in zip(fresh, children)) else rebuild(s, fresh)
