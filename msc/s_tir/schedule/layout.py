"""Layout primitives (TVM's ``layout_transformation.cc``): ``transform_layout`` rewrites a
buffer's shape and every access to it through an index map; ``transform_block_layout``
rewrites a block's iteration space (its iter vars and the loops around it) through one.

    sch.transform_layout("B", ("write", 0), lambda i, j: (i // 16, j // 16, i % 16, j % 16))
    #   B: (128, 128) -> (8, 8, 16, 16); B[vi, vj] -> B[vi // 16, vj // 16, vi % 16, vj % 16]
    sch.transform_block_layout("B", lambda i, j: (i * 128 + j,))
    #   for i, j: B[vi, vj] = ...  ->  for ax0 in range(16384): B[v0 // 128, v0 % 128] = ...

An index map is a Python function of the old indices (``*args`` takes the leading ones, as
TVM's ``IndexMap.from_func`` does) or its text (``"lambda i, j: (j, i)"``, what the trace
keeps). msc inverts maps whose outputs are mixed-radix sums of distinct inputs (``i * 128 +
j``, ``rh * 21 + rw * 3 + rc``, permutations), which is what TVM's tests use; a map that is
not such a bijection is refused as TVM refuses it. Padded layouts (a map whose image is
larger than the buffer, TVM's ``pad_value``) are written by ``layout_pad.py``.
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import replace

from ...errors import MSCError, ScheduleError
from ...tir import expr as E
from ...tir.function import (
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    For,
    PrimFunc,
    SBlock,
    walk_stmts,
)
from .arith import map_children, raw_subst, simplify_in
from .blocks import find_block
from .layout_pad import padded_layout
from .loops import fresh_name
from .region import block_reads, block_writes, bounds, loads
from .tree import block_loops, kids, rebuild, replace_at, var_names

__all__ = ["index_map_text", "map_exprs", "map_stmt", "transform_block_layout",
           "transform_layout"]


# ----------------------------------------------------------------------------- index maps

def map_exprs(index_map, ndim: int, dtypes: list, what: str) -> tuple[list, list]:
    """(input vars, output expressions) of ``index_map`` over ``ndim`` indices."""
    if isinstance(index_map, str):
        return _from_text(index_map, dtypes, what)
    if hasattr(index_map, "initial_indices") and hasattr(index_map, "final_indices"):
        names = [v.name for v in index_map.initial_indices]
        variables = [E.Var(n, d) for n, d in zip(names, dtypes)]
        mapping = dict(zip(names, variables))
        return variables, [raw_subst(e, mapping) for e in index_map.final_indices]
    if not callable(index_map):
        raise ScheduleError(f"{what}: index_map must be a function or its lambda text, got "
                            f"{type(index_map).__name__}")
    names = _param_names(index_map, ndim, what)
    if len(names) != ndim:
        raise ScheduleError(f"{what}: the index map takes {len(names)} indices, the buffer or "
                            f"block has {ndim}", hint="give the map one parameter per index")
    variables = [E.Var(n, d) for n, d in zip(names, dtypes)]
    out = _call(index_map, variables, what)
    return variables, out


def _param_names(fn, ndim: int, what: str) -> list:
    params = list(inspect.signature(fn).parameters.values())
    star = [p for p in params if p.kind is inspect.Parameter.VAR_POSITIONAL]
    fixed = [p.name for p in params if p.kind is not inspect.Parameter.VAR_POSITIONAL]
    if not star:
        return fixed
    extra = ndim - len(fixed)
    if extra < 0:
        raise ScheduleError(f"{what}: the index map names more indices than the {ndim} there "
                            "are")
    return [f"{star[0].name}_{k}" for k in range(extra)] + fixed


def _call(fn, variables: list, what: str) -> list:
    params = list(inspect.signature(fn).parameters.values())
    star = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params)
    kw_only = [p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY]
    if star and kw_only:
        split = len(variables) - len(kw_only)
        result = fn(*variables[:split], **dict(zip(kw_only, variables[split:])))
    else:
        result = fn(*variables)
    items = list(result) if isinstance(result, (list, tuple)) else [result]
    try:
        return [E.convert(x) for x in items]
    except (MSCError, TypeError, ValueError) as exc:
        raise ScheduleError(f"{what}: the index map returned {items!r}, not index "
                            f"expressions ({exc})") from None


def index_map_text(variables: list, outputs: list) -> str:
    """The map as the lambda text the trace stores (and :func:`map_exprs` reads back)."""
    body = ", ".join(E.to_str(e, prefix="T.") for e in outputs)
    return f"lambda {', '.join(v.name for v in variables)}: ({body},)"


_OPS = {ast.Add: "Add", ast.Sub: "Sub", ast.Mult: "Mul", ast.FloorDiv: "FloorDiv",
        ast.Mod: "FloorMod"}


def _from_text(text: str, dtypes: list, what: str) -> tuple[list, list]:
    """A lambda of + - * // % over its parameters and integers, read without eval."""
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        node = None
    if not isinstance(node, ast.Lambda):
        raise ScheduleError(f"{what}: index map text {text!r} is not a lambda")
    names = [a.arg for a in node.args.args]
    variables = [E.Var(n, d) for n, d in zip(names, dtypes)]
    env = dict(zip(names, variables))
    body = node.body.elts if isinstance(node.body, (ast.Tuple, ast.List)) else [node.body]
    return variables, [read_lambda_expr(x, env, text, what) for x in body]


def read_lambda_expr(node, env: dict, text: str, what: str):
    if isinstance(node, ast.Name) and node.id in env:
        return env[node.id]
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr in ("int32", "int64") and len(node.args) == 1:
        return E.IntImm(read_lambda_expr(node.args[0], env, text, what), node.func.attr)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -read_lambda_expr(node.operand, env, text, what)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        a, b = read_lambda_expr(node.left, env, text, what), read_lambda_expr(node.right, env, text, what)
        if isinstance(a, int) and isinstance(b, int):
            return {"Add": a + b, "Sub": a - b, "Mul": a * b, "FloorDiv": a // b,
                    "FloorMod": a % b}[_OPS[type(node.op)]]
        return E.binary(_OPS[type(node.op)], a, b)
    raise ScheduleError(f"{what}: cannot read index map {text!r}",
                        hint="use + - * // % of the parameters and integers")


def simplify(e, ranges: dict):
    """Bound-folded ``//`` / ``%`` (:func:`simplify_in`), the structure kept."""
    return simplify_in(e, ranges)


# ----------------------------------------------------------------------------- inversion

def _terms(e) -> dict | None:
    """{var name: coefficient} of a sum of distinct vars times positive constants."""
    from .inline import affine_terms

    terms = affine_terms(e)
    if terms is None or terms[1] != 0 or any(c <= 0 for c in terms[0].values()):
        return None
    return terms[0]


def invert(variables: list, outputs: list, extents: list, what: str, text: str):
    """(output extents, {input name: expression of output vars ``new``}) of a bijective
    mixed-radix map; ScheduleError (TVM's NotBijectiveAffineIndexMapError) otherwise."""
    ext = {v.name: E.as_int(x) for v, x in zip(variables, extents)}
    if any(x is None for x in ext.values()):
        raise ScheduleError(f"{what}: msc inverts index maps over constant extents only",
                            hint=f"the map is {text}")
    seen, shapes, parts = set(), [], []
    for out in outputs:
        terms = _terms(out)
        if terms is None:
            raise ScheduleError(f"{what}: the index map {text} is not bijective affine")
        stride, order = 1, sorted(terms.items(), key=lambda kv: kv[1])
        for name, coeff in order:
            if name in seen or name not in ext or coeff != stride:
                raise ScheduleError(f"{what}: the index map {text} is not bijective affine")
            seen.add(name)
            stride *= ext[name]
        shapes.append(stride)
        parts.append(order)
    if seen != set(ext):
        raise ScheduleError(f"{what}: the index map {text} drops an index, so it is not "
                            "bijective")
    return shapes, parts


# ----------------------------------------------------------------------------- block layout

def transform_block_layout(func: PrimFunc, block_name: str, index_map) -> tuple:
    """Returns (func, the map's text for the trace)."""
    what = "transform_block_layout"
    path = find_block(func, block_name, what)
    block = path[-1]
    loops = block_loops(path)
    _check_nest(block, loops, path, what)
    dtypes = [iv.var.dtype for iv in block.iter_vars]
    variables, outputs = map_exprs(index_map, len(block.iter_vars), dtypes, what)
    text = index_map_text(variables, outputs)
    extents = [iv.extent for iv in block.iter_vars]
    shapes, parts = invert(variables, outputs, extents, what, text)
    kinds = {v.name: iv.kind for v, iv in zip(variables, block.iter_vars)}
    taken = var_names(func.body)
    new_ivs, loop_vars, inverse = [], [], {}
    for k, (out, shape, order) in enumerate(zip(outputs, shapes, parts)):
        dtype = out.dtype
        kind = "spatial" if shape == 1 else _iter_kind([kinds[n] for n, _ in order], block,
                                                        out, what)
        v = E.Var(fresh_name(func, f"v{k}", taken), dtype)
        ax = E.Var(fresh_name(func, f"ax{k}", taken), dtype)
        taken.update({v.name, ax.name})
        new_ivs.append(replace(block.iter_vars[0], var=v, min=E.IntImm(0, dtype),
                               extent=E.IntImm(shape, dtype), kind=kind, binding=ax))
        loop_vars.append(ax)
        for name, coeff in order:
            inverse[name] = _digit(v, coeff, kinds_ext(variables, extents, name), shape)
    old = {iv.var.name: inverse[v.name] for v, iv in zip(variables, block.iter_vars)}
    ranges = {iv.var.name: (E.IntImm(0, iv.var.dtype), E.IntImm(E.as_int(iv.extent) - 1,
                                                                 iv.var.dtype))
              for iv in new_ivs}
    new_block = _substitute_block(block, old, ranges)
    new_block = replace(new_block, iter_vars=tuple(new_ivs))
    stmt = new_block
    for ax, iv in reversed(list(zip(loop_vars, new_ivs))):
        stmt = For(ax, E.IntImm(0, ax.dtype), iv.extent, "serial", stmt)
    top = loops[0] if loops else block
    at = next(k for k, node in enumerate(path) if node is top)
    return replace(func, body=replace_at(path[:at + 1], stmt)), text


def kinds_ext(variables: list, extents: list, name: str) -> int:
    return next(E.as_int(x) for v, x in zip(variables, extents) if v.name == name)


def _digit(v, coeff: int, extent: int, total: int):
    """The input with ``coeff`` and ``extent`` read back from output ``v`` of ``total``, in
    TVM's form: ``v // c`` outermost, ``v % e`` innermost, ``v % (c * e) // c`` between."""
    e = v
    if coeff * extent < total:
        e = E.BinaryOp("FloorMod", e, E.IntImm(coeff * extent, v.dtype))
    if coeff > 1:
        e = E.BinaryOp("FloorDiv", e, E.IntImm(coeff, v.dtype))
    return e


def _iter_kind(kinds: list, block: SBlock, out, what: str) -> str:
    if len(set(kinds)) != 1:
        raise ScheduleError(f"{what}: cannot detect the block iter type for new iter value "
                            f"{E.to_str(out)} in block {block.name!r} because it contains "
                            "more than one type of original iter vars", key=block.name)
    return kinds[0]


def _check_nest(block: SBlock, loops: list, path: list, what: str) -> None:
    """TVM's requirements: loops from 0, each holding only the next, trivial bindings."""
    for lp in loops:
        if E.as_int(lp.min) != 0:
            raise ScheduleError(f"{what}: loop {lp.var.name!r} does not start at 0",
                                key=block.name)
    if loops:
        first = next(k for k, node in enumerate(path) if node is loops[0])
        if any(not isinstance(node, (For, SBlock)) for node in path[first:]):
            raise ScheduleError(f"{what}: the loops of block {block.name!r} hold more than "
                                "the block", key=block.name,
                                hint="the block must be alone in its loop nest")
    loop_names = [lp.var.name for lp in loops]
    bound = [iv.binding.name if isinstance(iv.binding, E.Var) else None
             for iv in block.iter_vars]
    if any(b is None or b not in loop_names for b in bound) or len(set(bound)) != len(bound) \
            or block.predicate is not None:
        raise ScheduleError(f"{what}: block {block.name!r} does not have trivial bindings "
                            "(each iter var bound to its own loop var)", key=block.name)
    if any(E.as_int(iv.min) != 0 for iv in block.iter_vars):
        raise ScheduleError(f"{what}: an iter var of block {block.name!r} does not start at 0",
                            key=block.name)


def _substitute_block(block: SBlock, old: dict, ranges: dict) -> SBlock:
    """The block's body and init with its iter vars replaced, indices simplified over the
    new iter vars' ranges (regions are dropped: msc infers them)."""
    def fx(e):
        return simplify(raw_subst(e, old), ranges)

    body = map_stmt(block.body, fx)
    init = map_stmt(block.init, fx) if block.init is not None else None
    return replace(block, body=body, init=init, reads=None, writes=None)


def map_stmt(s, fx):
    """``s`` with ``fx`` applied to every expression it holds (nested blocks aside)."""
    if isinstance(s, BufferStore):
        return BufferStore(s.buffer, fx(s.value), tuple(fx(i) for i in s.indices))
    new = s
    for field in ("value", "cond", "min", "extent"):
        if isinstance(getattr(s, field, None), E.PrimExpr):
            new = replace(new, **{field: fx(getattr(s, field))})
    if kids(s) and not isinstance(s, SBlock):
        new = rebuild(new, [map_stmt(c, fx) for c in kids(new)])
    return new


# ----------------------------------------------------------------------------- buffer layout

def legalize(e, dtype: str):
    """Integer constants of an index expression in ``dtype`` (the buffer's index type), as
    TVM's LegalizeIndexMapDType gives them; a Python int in a map is int64 in msc."""
    if isinstance(e, E.IntImm) and e.dtype != "bool":
        return E.IntImm(e.value, dtype)
    if isinstance(e, E.Var):
        return e
    return map_children(e, lambda c: legalize(c, dtype))


def _pad_dtype(pad_value) -> str | None:
    if isinstance(pad_value, bool):
        return "bool"
    if isinstance(pad_value, int):
        return "int32"
    if isinstance(pad_value, float):
        return "float32"
    return getattr(pad_value, "dtype", None)


def _check_pad_value(pad_value, buf, ndim: int, what: str) -> None:
    """TVM's checks on ``pad_value``, made even when the map needs no padding: the value's
    dtype is the buffer's, and a function of the new indices loads no other buffer."""
    if pad_value is None:
        return
    if callable(pad_value):
        variables = [E.Var(f"i{k}", "int32") for k in range(ndim)]
        value = pad_value(*variables)
        found = loads(E.convert(value)) if isinstance(value, (E.PrimExpr, int, float)) else []
        others = sorted({ld.buffer.name for ld in found if ld.buffer.name != buf.name})
        if others:
            raise ScheduleError(f"{what}: the pad value of {buf.name!r} reads other buffers "
                                f"{others}", hint="a pad value may use the indices and the "
                                                  "transformed buffer only")
        dtype = _pad_dtype(value)
    else:
        dtype = _pad_dtype(pad_value)
        if type(pad_value) is int and E.is_int(buf.dtype):
            dtype = buf.dtype  # a Python int takes an integer buffer's type, as in TVM
    if dtype != buf.dtype:
        raise ScheduleError(f"{what}: the pad value has dtype {dtype}, buffer {buf.name!r} is "
                            f"{buf.dtype}", hint=f"give a {buf.dtype} pad value")


def _new_shape(variables: list, outputs: list, shape: tuple, what: str) -> tuple:
    ranges = {v.name: (E.IntImm(0, v.dtype), E.sub(d, 1)) for v, d in zip(variables, shape)}
    out = []
    for e in outputs:
        lo, hi = bounds(e, ranges)
        if E.as_int(lo) is None or E.as_int(hi) is None:
            raise ScheduleError(f"{what}: msc infers the new shape of constant-sized maps "
                                f"only ({E.to_str(e)})")
        out.append(E.IntImm(E.as_int(hi) - E.as_int(lo) + 1, e.dtype))
    return tuple(out)


def transform_layout(func: PrimFunc, block_name: str, kind: str, index: int, index_map,
                     pad_value=None, assume_injective_transform: bool = False) -> tuple:
    """Returns (func, the map's text)."""
    what = "transform_layout"
    block = find_block(func, block_name, what)[-1]
    buf = (block_reads if kind == "read" else block_writes)(block)[index]
    if any(r.buffer.name == buf.name for s in walk_stmts(func.body) if isinstance(s, SBlock)
           for m, r in s.match_buffers) or \
            any(m.name == buf.name for s in walk_stmts(func.body) if isinstance(s, SBlock)
                for m, _ in s.match_buffers):
        raise ScheduleError(f"{what}: {buf.name!r} is a subregion (T.match_buffer)",
                            key=block_name)
    dtypes = [getattr(d, "dtype", "int32") for d in buf.shape]
    variables, outputs = map_exprs(index_map, len(buf.shape), dtypes, what)
    outputs = [legalize(e, dtypes[0] if dtypes else "int32") for e in outputs]
    text = index_map_text(variables, outputs)
    _check_pad_value(pad_value, buf, len(outputs), what)
    shape = _new_shape(variables, outputs, buf.shape, what)
    old_size, new_size = _size(buf.shape), _size(shape)
    if old_size is not None and new_size is not None and new_size < old_size:
        raise ScheduleError(f"{what}: the index map {text} sends the {old_size} elements of "
                            f"{buf.name!r} to {new_size} places, so it is not injective",
                            key=block_name, hint="a layout must keep every element apart")
    padded = old_size is not None and new_size is not None and new_size > old_size
    if padded and not assume_injective_transform and pad_value is None:
        raise ScheduleError(f"{what}: the index map {text} introduces padding on "
                            f"{buf.name!r} ({old_size} elements into {new_size})",
                            key=block_name, hint="pass pad_value=..., or "
                            "assume_injective_transform=True to leave the pad unwritten")
    new_buf = replace(buf, shape=shape)

    def index_of(indices):
        return tuple(raw_subst(o, {v.name: i for v, i in zip(variables, indices)})
                     for o in outputs)

    body = _rewrite_buffer(func.body, buf.name, new_buf, index_of)
    params = tuple(new_buf if isinstance(p, Buffer) and p.name == buf.name else p
                   for p in func.params)
    out = replace(func, params=params, body=body)
    if padded and pad_value is not None:
        out = padded_layout(func, out, buf, new_buf, variables, outputs, pad_value, what)
    return out, text


def _size(shape) -> int | None:
    out = 1
    for d in shape:
        if E.as_int(d) is None:
            return None
        out *= E.as_int(d)
    return out


def _rewrite_buffer(s, name: str, new, index_of):
    """Every access of buffer ``name`` under ``s`` at its new indices, allocations and
    stated regions included (a region of the buffer is dropped, to be inferred)."""
    def fx(e):
        if isinstance(e, BufferLoad) and e.buffer.name == name:
            return BufferLoad(new, index_of(tuple(fx(i) for i in e.indices)))
        return map_children(e, fx)

    if isinstance(s, BufferStore):
        if s.buffer.name == name:
            return BufferStore(new, fx(s.value), index_of(tuple(fx(i) for i in s.indices)))
        return BufferStore(s.buffer, fx(s.value), tuple(fx(i) for i in s.indices))
    new_s = s
    for field in ("value", "cond", "min", "extent", "predicate"):
        if isinstance(getattr(s, field, None), E.PrimExpr):
            new_s = replace(new_s, **{field: fx(getattr(s, field))})
    if isinstance(s, SBlock):
        touched = any(r.buffer.name == name for r in (s.reads or ()) + (s.writes or ()))
        new_s = replace(new_s, alloc_buffers=tuple(new if b.name == name else b
                                                   for b in s.alloc_buffers),
                        init=(_rewrite_buffer(s.init, name, new, index_of)
                              if s.init is not None else None))
        if touched:
            new_s = replace(new_s, reads=_mapped(s.reads, name, new, index_of),
                            writes=_mapped(s.writes, name, new, index_of))
    if kids(s):
        new_s = rebuild(new_s, [_rewrite_buffer(c, name, new, index_of) for c in kids(new_s)])
    return new_s


def _mapped(regions, name: str, new, index_of):
    """Point regions of the buffer mapped; any slice makes the block's regions inferred."""
    if regions is None:
        return None
    out = []
    for r in regions:
        if r.buffer.name != name:
            out.append(r)
        elif all(hi is None for _, hi in r.region):
            idx = index_of(tuple(lo for lo, _ in r.region))
            out.append(BufferRegion(new, tuple((i, None) for i in idx)))
        else:
            return None
    return tuple(out)
