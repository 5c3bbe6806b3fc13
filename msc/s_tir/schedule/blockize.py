"""``blockize`` (TVM's): the subtree under a loop becomes an outer block whose iter vars
are the outer parts of the inner block's bindings.

    for i_0, j_0, i_1, j_1 in T.grid(8, 8, 16, 16):     -- blockize(i_1) -->
        B[vi, vj]  (vi = i_0 * 16 + i_1)              for i_0, j_0:
                                                        with T.sblock("B_o"): vi_o, vj_o = i_0, j_0
                                                          for i_1, j_1: with T.sblock("B"):
                                                            vi_i, vj_i = i_1, j_1
                                                            B[vi_o * 16 + vi_i, vj_o * 16 + vj_i]

Each binding is divided into an outer part (loops above the given loop) and an inner part
(the loop and those below it) as ``outer * E + inner`` with the inner part ranging over
[0, E): msc divides bindings that are sums of loop vars times constants, the inner terms a
mixed radix (what split / fuse / tile produce); anything else is TVM's
SubspaceNotDivisibleError. An inner iter var of extent 1 is dropped (the body reads the outer
one), an outer one of extent 1 is bound to 0 unless ``preserve_unit_iters``. A reduction's
init moves to the outer block, as a nest over the inner spatial loops it uses.
"""

from __future__ import annotations

from dataclasses import replace

from ...errors import ScheduleError
from ...tir import expr as E
from ...tir.function import For, IterVar, PrimFunc, SBlock
from .arith import raw_subst, simplify_in
from .inline import affine_terms
from .layout import map_stmt
from .loops import find_loop, fresh_name
from .tree import blocks_in, find_path, kids, replace_at, subst_stmt, var_names

__all__ = ["blockize"]


def _single_block(loop: For) -> tuple[SBlock, list]:
    """The one block under ``loop`` and the loops from ``loop`` down to it."""
    found = blocks_in(loop.body, nested=False)
    if len(found) != 1:
        raise ScheduleError(f"blockize: loop {loop.var.name!r} must hold exactly one block, it "
                            f"holds {len(found)}", key=loop.var.name)
    path = find_path(loop, lambda s: s is found[0])
    if any(not isinstance(n, For) for n in path[:-1]):
        raise ScheduleError(f"blockize: the block under loop {loop.var.name!r} is not in a "
                            "chain of loops", key=loop.var.name)
    return found[0], path[:-1]


def _divide(iv: IterVar, inner: dict, outer: dict, preserve: bool, name: str):
    """(outer binding, outer extent, inner binding, inner extent) of ``iv``'s binding."""
    terms = affine_terms(iv.binding)
    if terms is None or terms[1] != 0:
        raise _not_divisible(name, iv)
    inner_terms = sorted(((v, c) for v, c in terms[0].items() if v in inner),
                         key=lambda t: t[1])
    stride = 1
    for v, c in inner_terms:
        if c != stride:
            raise _not_divisible(name, iv)
        stride *= inner[v][1]
    outer_terms = [(v, c) for v, c in terms[0].items() if v in outer and c]
    if any(v not in inner and v not in outer for v in terms[0]) or \
            any(c % stride for _, c in outer_terms):
        raise _not_divisible(name, iv)
    total = E.as_int(iv.extent)
    if total is None or total % stride:
        raise _not_divisible(name, iv)
    dtype = iv.var.dtype
    kept = [(v, c) for v, c in outer_terms if preserve or outer[v][1] != 1]
    return (_sum([(outer[v][0], c // stride) for v, c in kept], dtype), total // stride,
            _sum([(inner[v][0], c) for v, c in inner_terms], dtype), stride)


def _sum(terms: list, dtype: str):
    """``a * c + b * d ...`` written outermost (largest coefficient) first, as TVM does."""
    out = None
    for var, coeff in sorted(terms, key=lambda t: -t[1]):
        term = var if coeff == 1 else E.BinaryOp("Mul", var, E.IntImm(coeff, dtype))
        out = term if out is None else E.BinaryOp("Add", out, term)
    return out if out is not None else E.IntImm(0, dtype)


def _not_divisible(name: str, iv: IterVar) -> ScheduleError:
    return ScheduleError(f"blockize: the binding {E.to_str(iv.binding)} of block {name!r} "
                         "cannot be divided into an outer and an inner part at this loop",
                         key=name, hint="msc divides sums of loop vars times constants whose "
                                        "inner part is a mixed radix (as split produces)")


def blockize(func: PrimFunc, var: E.Var, preserve_unit_iters: bool = True) -> tuple:
    """Returns (func, the outer block's name)."""
    path = find_loop(func, var, "blockize")
    loop = path[-1]
    block, chain = _single_block(loop)
    if block.predicate is not None:
        raise ScheduleError(f"blockize: block {block.name!r} has a predicate, which msc does "
                            "not divide", key=block.name)
    outer_loops = [n for n in path[:-1] if isinstance(n, For)]
    outer = {lp.var.name: (lp.var, E.as_int(lp.extent)) for lp in outer_loops}
    inner = {lp.var.name: (lp.var, E.as_int(lp.extent)) for lp in chain}
    taken = var_names(func.body)
    outer_ivs, inner_ivs, subst, ranges = [], [], {}, {}
    for iv in block.iter_vars:
        ob, oext, ib, iext = _divide(iv, inner, outer, preserve_unit_iters, block.name)
        dtype = iv.var.dtype
        vo = E.Var(fresh_name(func, f"{iv.var.name}_o", taken), dtype)
        outer_ivs.append(IterVar(vo, E.IntImm(0, dtype), E.IntImm(oext, dtype), iv.kind, ob))
        ranges[vo.name] = (E.IntImm(0, dtype), E.IntImm(oext - 1, dtype))
        if iext == 1:
            subst[iv.var.name] = E.IntImm(0, dtype) if oext == 1 and not preserve_unit_iters \
                else vo
            continue
        vi = E.Var(fresh_name(func, f"{iv.var.name}_i", taken), dtype)
        inner_ivs.append(IterVar(vi, E.IntImm(0, dtype), E.IntImm(iext, dtype), iv.kind, ib))
        subst[iv.var.name] = vi if oext == 1 else E.BinaryOp(
            "Add", E.BinaryOp("Mul", vo, E.IntImm(iext, dtype)), vi)

    def fx(e):
        return simplify_in(raw_subst(e, subst), {})

    inner_block = replace(block, iter_vars=tuple(inner_ivs), init=None, reads=None,
                          writes=None, body=map_stmt(block.body, fx))
    init = None
    if block.init is not None:
        init = _outer_init(func, block, inner_block, map_stmt(block.init, fx), chain, taken)
    body = replace_at(find_path(loop, lambda s: s is block), inner_block)
    name = _block_name(func, f"{block.name}_o")
    outer_block = SBlock(name, body, tuple(outer_ivs), init=init)
    return replace(func, body=replace_at(path, outer_block)), name


def _outer_init(func, block, inner_block, init_body, chain: list, taken: set):
    """TVM's GenerateOuterInit: a block ``<name>_init`` over the inner spatial iter vars the
    init uses, under copies of the inner loops their bindings use."""
    used = {v.name for s in [init_body] for v in _free(s)}
    ivs, loop_names, rename = [], set(), {}
    for iv in inner_block.iter_vars:
        if iv.kind == "spatial" and iv.var.name in used:
            new = E.Var(fresh_name(func, f"{iv.var.name}_init", taken), iv.var.dtype)
            rename[iv.var.name] = new
            ivs.append(replace(iv, var=new))
            loop_names |= {v.name for v in E.free_vars(iv.binding)}
    stmt = SBlock(_block_name(func, f"{block.name}_init"), subst_stmt(init_body, rename),
                  tuple(ivs))
    for lp in reversed(chain):
        if lp.var.name in loop_names:
            fresh = E.Var(lp.var.name, lp.var.dtype)
            stmt = For(fresh, lp.min, lp.extent, lp.kind, subst_stmt(stmt, {lp.var.name: fresh}))
    return stmt


def _free(s) -> list:
    """Vars used by the expressions of ``s`` (stores, loads, conditions)."""
    from .inline import exprs_of

    out, stack = [], [s]
    while stack:
        node = stack.pop()
        for e in exprs_of(node):
            out += E.free_vars(e)
        stack.extend(kids(node))
    return out


def _block_name(func: PrimFunc, base: str) -> str:
    return fresh_name(func, base, {b.name for b in blocks_in(func.body)})
