"""Which index was out of range: the first offending value of a kernel's index tensor.

A compiled kernel that meets an out-of-range index read from data clamps the access and
returns ``STATUS_INDEX``; its hot loops only OR a flag, so they stay as fast as before. Only
after that status, this module reads the PrimFunc for the accesses whose index reads a
buffer (a *site*: ``A[..., f(B[...]), ...]``), works out the raw values ``f`` accepts (
``[0, n)``, or ``[-n, n)`` when ``f`` counts negatives from the end) and searches the
caller's arrays with numpy for the first value of ``B`` outside them::

    describe(func, [x, k, out])         # the call's arguments, in param order
    # -> "index 7 (input 2, at [1]) is out of range for axis 0 of input 1 (size 3: valid
    #     -3..2)"

It never raises: a site it cannot read (an index computed from loop vars too, a buffer that
is not an argument) is skipped, and with no site found the caller keeps its plain message.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, fields, is_dataclass

import numpy as np

from ...tir import expr as E
from ...tir.function import (
    Buffer,
    BufferLoad,
    BufferStore,
    PrimFunc,
    expr_children,
    walk_stmts,
)

__all__ = ["arrays_at", "describe", "sites"]


@dataclass(frozen=True)
class Site:
    """``target[..., index, ...]`` (``index`` at ``axis``) where ``index`` reads ``load``."""

    target: Buffer
    axis: int
    index: E.PrimExpr
    load: BufferLoad


def sites(func: PrimFunc) -> list[Site]:
    """Every access of ``func`` whose index reads exactly one buffer element, in body order."""
    found: dict[tuple, Site] = {}
    for stmt in walk_stmts(func.body):
        target = getattr(stmt, "buffer", None)
        if isinstance(target, Buffer) and isinstance(getattr(stmt, "indices", None), tuple):
            _scan_access(target, stmt.indices, found)
        for value in _exprs_of(stmt):
            _scan_expr(value, found)
    return list(found.values())


def _exprs_of(stmt):
    """The expressions a statement holds directly (values, indices, conditions, extents)."""
    for f in fields(stmt) if is_dataclass(stmt) else ():
        value = getattr(stmt, f.name)
        items = value if isinstance(value, (tuple, list)) else (value,)
        yield from (v for v in items if isinstance(v, E.PrimExpr))


def _scan_expr(e: E.PrimExpr, found: dict) -> None:
    if isinstance(e, BufferLoad):
        _scan_access(e.buffer, e.indices, found)
    for child in expr_children(e):
        _scan_expr(child, found)


def _scan_access(target: Buffer, indices, found: dict) -> None:
    for axis, index in enumerate(indices):
        loads = list(_loads(index))
        if loads and all(_same(load, loads[0]) for load in loads):  # one element, maybe
            # read more than once (``k < 0 ? k + n : k`` reads k three times)
            key = (target.name, axis, id(index))  # one site per access expression
            found.setdefault(key, Site(target, axis, index, loads[0]))


def _same(a: E.PrimExpr, b: E.PrimExpr) -> bool:
    """Structural equality (``==`` on PrimExprs builds a comparison)."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, BufferLoad) and a.buffer is not b.buffer:
        return False
    if isinstance(a, (E.Var, E.IntImm, E.FloatImm)):
        return (a.name == b.name) if isinstance(a, E.Var) else (a.value == b.value)
    if getattr(a, "op", None) != getattr(b, "op", None) or a.dtype != b.dtype:
        return False
    ca, cb = expr_children(a), expr_children(b)
    return len(ca) == len(cb) and all(_same(x, y) for x, y in zip(ca, cb))


def _loads(e: E.PrimExpr):
    if isinstance(e, BufferLoad):
        yield e
        return
    for child in expr_children(e):
        yield from _loads(child)


class _NotPlain(Exception):
    """An index that reads more than one value: not reported."""


def _with_value(e: E.PrimExpr, load: BufferLoad, value: int, env: dict) -> int | None:
    """``e`` with ``load`` read as ``value`` and shape vars from ``env``; None when it still
    depends on something else (a loop var)."""
    def swap(x):
        if isinstance(x, BufferLoad) and _same(x, load):
            return E.IntImm(value, "int64")
        if isinstance(x, E.BinaryOp):
            return E.binary(x.op, swap(x.a), swap(x.b))
        if isinstance(x, E.Select):
            return E.if_then_else(swap(x.cond), swap(x.true_value), swap(x.false_value))
        if isinstance(x, E.Cast):
            return E.Cast(x.dtype, swap(x.value))
        if isinstance(x, E.Not):
            return E.Not(swap(x.a))
        if isinstance(x, (BufferLoad, E.PrimCall)):
            raise _NotPlain  # another read, or a call
        return x
    try:
        result = E.substitute(swap(e), env)
    except _NotPlain:
        return None
    return int(result.value) if result.is_const else None


def _valid_range(site: Site, dim: int, env: dict) -> tuple[int, int] | None:
    """The raw values the site's index maps into ``[0, dim)``: ``(lo, hi)``, hi excluded."""
    def f(v):
        return _with_value(site.index, site.load, v, env)
    if dim > 0 and (f(0) != 0 or f(dim - 1) != dim - 1):
        return None  # not a plain (or negative-wrapping) index: an offset, a clip...
    return (-dim if dim > 0 and f(-1) == dim - 1 else 0), dim


def _shape_env(func: PrimFunc, arrays: dict) -> dict:
    env = {}
    for buf in func.buffers:
        array = arrays.get(buf.name)
        if array is None or array.ndim != len(buf.shape):
            continue
        for dim, size in zip(buf.shape, array.shape):
            if isinstance(dim, E.Var):
                env.setdefault(dim.name, size)
    return env


def _first_bad(array: np.ndarray, load: BufferLoad, lo: int, hi: int):
    """``(position, value)`` of the first element outside ``[lo, hi)`` of the slice the load
    reads (constant indices fix their axis), or None."""
    where = tuple(int(i.value) if isinstance(i, E.IntImm) else slice(None)
                  for i in load.indices)
    if len(where) != array.ndim:
        return None
    view = array[where]
    if view.dtype.kind == "u":
        bad = view >= np.uint64(max(hi, 0))
    else:
        wide = view.astype(np.int64, copy=False)
        bad = (wide < lo) | (wide >= hi)
    if not bad.any():
        return None
    flat = int(np.argmax(bad))
    at = iter(np.unravel_index(flat, view.shape))
    position = tuple(w if isinstance(w, int) else int(next(at)) for w in where)
    return position, int(view.reshape(-1)[flat])


def describe(func: PrimFunc, values: list) -> str | None:
    """The first out-of-range index of a call of ``func`` on ``values`` (its arguments in
    param order; None for one not at hand), as a message; None when no site can be read."""
    try:
        params = list(func.params)
        if len(values) != len(params):  # a native step passes its buffers only
            params = [p for p in params if isinstance(p, Buffer)]
        arrays = {p.name: v for p, v in zip(params, values) if isinstance(v, np.ndarray)}
        env = _shape_env(func, arrays)
        names = _param_names(func)
        for site in sites(func):
            found = _describe_site(site, arrays, env, names)
            if found:
                return found
    except Exception:  # noqa: BLE001 - a report must never hide the error it explains
        return None
    return None


def _param_names(func: PrimFunc) -> dict[str, str]:
    """How the user sees a buffer: ``input 2`` (1-based, as the op's inputs) or the output
    (kernel param names such as ``arg1`` mean nothing outside)."""
    written = {s.buffer.name for s in walk_stmts(func.body) if isinstance(s, BufferStore)}
    names, count = {}, 0
    for p in func.params:
        if isinstance(p, Buffer) and p.name not in written:
            count += 1
            names[p.name] = f"input {count}"
        elif isinstance(p, Buffer):
            names[p.name] = "the output"
    return names


def _describe_site(site: Site, arrays: dict, env: dict, names: dict) -> str | None:
    array = arrays.get(site.load.buffer.name)
    dim = _with_value(site.target.shape[site.axis], site.load, 0, env)
    if array is None or dim is None:
        return None
    valid = _valid_range(site, dim, env)
    found = valid and _first_bad(array, site.load, *valid)
    if not found:
        return None
    (position, value), (lo, hi) = found, valid
    source = names.get(site.load.buffer.name, site.load.buffer.name)
    target = names.get(site.target.name, site.target.name)
    span = f"valid {lo}..{hi - 1}" if hi > 0 else "an empty axis"
    return (f"index {value} ({source}, at [{', '.join(map(str, position))}]) is out of range "
            f"for axis {site.axis} of {target} (size {dim}: {span})")


def arrays_at(specs, addresses) -> list:
    """Numpy views of the input buffers of a native step, from their addresses (a chain's
    table), in param order (None for outputs). Only while the call's buffers live."""
    arrays = []
    for spec, address in zip(specs, addresses):
        if spec.output or not address:
            arrays.append(None)
            continue
        count = int(np.prod(spec.shape, dtype=np.int64))
        raw = (ctypes.c_char * (count * spec.dtype.itemsize)).from_address(address)
        arrays.append(np.frombuffer(raw, dtype=spec.dtype).reshape(spec.shape))
    return arrays
