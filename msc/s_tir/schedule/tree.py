"""Walking and rebuilding a PrimFunc's statement tree: paths, replacement, substitution.

Statements are frozen, so a primitive finds the path (root .. node, by identity) to what it
changes and rebuilds the parents on the way up::

    path = find_path(func.body, lambda s: isinstance(s, For) and s.var is loop_var)
    body = replace_at(path, new_loop)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ...tir import expr as E
from ...tir.function import (
    AllocBuffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    Evaluate,
    For,
    IfThenElse,
    IterVar,
    LetStmt,
    SBlock,
    SeqStmt,
    Stmt,
    While,
    seq,
)

__all__ = ["block_loops", "blocks_in", "child_blocks", "find_path", "kids", "rebuild", "replace_at",
           "rewrite_expr", "rewrite_stmt", "subst_stmt", "swap", "var_names"]


def kids(s: Stmt) -> list:
    """The child statements a schedule walks through (a block's init is not among them)."""
    if isinstance(s, SeqStmt):
        return list(s.stmts)
    if isinstance(s, (For, While, SBlock)):
        return [s.body]
    if isinstance(s, IfThenElse):
        return [s.then_case] + ([s.else_case] if s.else_case is not None else [])
    return []


def child_blocks(s: Stmt) -> list:
    """The blocks under ``s`` whose nearest enclosing block is above ``s``, in order."""
    if isinstance(s, SBlock):
        return [s]
    return [b for child in kids(s) for b in child_blocks(child)]


def rebuild(s: Stmt, new: list) -> Stmt:
    if isinstance(s, SeqStmt):
        return seq(new)
    if isinstance(s, (For, While, SBlock)):
        return replace(s, body=new[0])
    if isinstance(s, IfThenElse):
        return replace(s, then_case=new[0], else_case=new[1] if len(new) > 1 else None)
    return s


def find_path(root: Stmt, pred: Callable) -> list | None:
    """[root, ..., node] for the first node (pre-order) with ``pred(node)``, else None."""
    if pred(root):
        return [root]
    for child in kids(root):
        path = find_path(child, pred)
        if path is not None:
            return [root] + path
    return None


def replace_at(path: list, new: Stmt | None) -> Stmt:
    """The root of ``path`` with its last node replaced by ``new`` (None removes it from its
    parent sequence)."""
    for parent, child in zip(reversed(path[:-1]), reversed(path[1:])):
        items = [new if k is child else k for k in kids(parent)]
        items = [k for k in items if k is not None]
        new = rebuild(parent, items) if items else None
    return new


def swap(root: Stmt, old: Stmt, new: Stmt) -> Stmt:
    """``root`` with the statement ``old`` (found by identity) replaced by ``new``."""
    path = find_path(root, lambda s: s is old)
    return root if path is None else replace_at(path, new)


def blocks_in(s: Stmt, nested: bool = True) -> list:
    """SBlocks under ``s`` (``s`` included); ``nested=False`` stops at the first block."""
    found = []
    if isinstance(s, SBlock):
        found.append(s)
        if not nested:
            return found
    for child in kids(s):
        found.extend(blocks_in(child, nested))
    return found


def block_loops(path: list) -> list:
    """The For loops of ``path`` between the block at its end and the enclosing block."""
    loops: list = []
    for node in path[:-1]:
        if isinstance(node, SBlock):
            loops = []
        elif isinstance(node, For):
            loops.append(node)
    return loops


def var_names(s: Stmt) -> set:
    """Every var name bound in ``s`` (loop vars, iter vars, lets)."""
    names = set()
    stack = [s]
    while stack:
        node = stack.pop()
        if isinstance(node, For):
            names.add(node.var.name)
        elif isinstance(node, SBlock):
            names.update(iv.var.name for iv in node.iter_vars)
            if node.init is not None:
                stack.append(node.init)
        elif isinstance(node, LetStmt):
            names.add(node.var.name)
        stack.extend(kids(node))
    return names


# ------------------------------------------------------------------------ expression rewriting

def rewrite_expr(e, names: dict, buffers: dict | None = None):
    """``e`` with vars replaced by name (``names``) and loads of buffers renamed (``buffers``:
    old name -> new Buffer), simplified on the way up."""
    buffers = buffers or {}
    if isinstance(e, E.Var):
        return names.get(e.name, e)
    if isinstance(e, BufferLoad):
        buf = buffers.get(e.buffer.name, e.buffer)
        indices = tuple(rewrite_expr(i, names, buffers) for i in e.indices)
        if buf is e.buffer and all(a is b for a, b in zip(indices, e.indices)):
            return e
        return BufferLoad(buf, indices)
    if isinstance(e, E.BinaryOp):
        a, b = rewrite_expr(e.a, names, buffers), rewrite_expr(e.b, names, buffers)
        # unchanged operands keep the expression as written (E.binary would sort a sum)
        return e if a is e.a and b is e.b else E.binary(e.op, a, b)
    if isinstance(e, E.Select):
        return E.Select(*(rewrite_expr(c, names, buffers)
                          for c in (e.cond, e.true_value, e.false_value)))
    if isinstance(e, E.Not):
        return E.Not(rewrite_expr(e.a, names, buffers))
    if isinstance(e, E.Cast):
        return E.Cast(e.dtype, rewrite_expr(e.value, names, buffers))
    if isinstance(e, E.PrimCall):
        return E.PrimCall(e.name, [rewrite_expr(a, names, buffers) for a in e.args], e.dtype)
    return e


def rewrite_stmt(s: Stmt, names: dict, buffers: dict | None = None) -> Stmt:
    """``s`` with :func:`rewrite_expr` applied to every expression and stored buffer; a
    block's own iter vars shadow ``names`` inside it."""
    buffers = buffers or {}

    def rx(e):
        return rewrite_expr(e, names, buffers) if e is not None else None

    if isinstance(s, SeqStmt):
        return seq([rewrite_stmt(c, names, buffers) for c in s.stmts])
    if isinstance(s, BufferStore):
        return BufferStore(buffers.get(s.buffer.name, s.buffer), rx(s.value),
                           tuple(rx(i) for i in s.indices))
    if isinstance(s, For):
        return replace(s, min=rx(s.min), extent=rx(s.extent),
                       body=rewrite_stmt(s.body, names, buffers))
    if isinstance(s, SBlock):
        return _rewrite_block(s, names, buffers)
    if isinstance(s, IfThenElse):
        other = rewrite_stmt(s.else_case, names, buffers) if s.else_case is not None else None
        return IfThenElse(rx(s.cond), rewrite_stmt(s.then_case, names, buffers), other)
    if isinstance(s, LetStmt):
        return replace(s, value=rx(s.value))
    if isinstance(s, Evaluate):
        return Evaluate(rx(s.value))
    if isinstance(s, While):
        return While(rx(s.cond), rewrite_stmt(s.body, names, buffers))
    if isinstance(s, AllocBuffer):
        return AllocBuffer(buffers.get(s.buffer.name, s.buffer))
    return s


def _rewrite_block(b: SBlock, names: dict, buffers: dict) -> SBlock:
    ivs = tuple(IterVar(iv.var, iv.min, iv.extent, iv.kind, rewrite_expr(iv.binding, names))
                for iv in b.iter_vars)
    pred = rewrite_expr(b.predicate, names) if b.predicate is not None else None
    inner = {k: v for k, v in names.items() if k not in {iv.var.name for iv in b.iter_vars}}

    def regions(rs):
        if rs is None:
            return None
        return tuple(BufferRegion(buffers.get(r.buffer.name, r.buffer), r.region) for r in rs)

    init = rewrite_stmt(b.init, inner, buffers) if b.init is not None else None
    matches = tuple((buf, BufferRegion(buffers.get(r.buffer.name, r.buffer), tuple(
        (rewrite_expr(lo, inner), None if hi is None else rewrite_expr(hi, inner))
        for lo, hi in r.region))) for buf, r in b.match_buffers)
    return replace(b, iter_vars=ivs, predicate=pred, init=init, reads=regions(b.reads),
                   writes=regions(b.writes), body=rewrite_stmt(b.body, inner, buffers),
                   match_buffers=matches)


def subst_stmt(s: Stmt, mapping: dict) -> Stmt:
    """``s`` with loop vars replaced: ``{name: expr}``."""
    return rewrite_stmt(s, {k: E.convert(v) for k, v in mapping.items()})
