"""Data movement: reshape and its kin, permute_dims, concat / stack / split, strided_slice,
take, broadcast_to, tile, repeat, flip, pad, layout_transform, meshgrid and pixel_shuffle. Each
output element is one load; index maps keep the innermost index plain where they can (a reshape
keeping the last dims copies rows)."""

from __future__ import annotations

from ...errors import UnsupportedOpError
from ...relax.op.registry import ops_with
from ...tir import expr as E
from . import te
from .common import (
    all_of,
    attrs,
    axes_of,
    broadcast,
    in_bounds,
    inputs,
    is_const,
    output,
    outputs,
    rule,
)
from .te import cast, const, idx, shape_arg


def _is_one(d) -> bool:
    return isinstance(d, E.IntImm) and d.value == 1


def unravel(in_shape, out_shape, ivars) -> tuple:
    """x's index for output index ``ivars`` of a reshape (same elements, row-major). Dims of
    size 1 are dropped and a common suffix of dims maps one to one."""
    ins = [d for d, s in enumerate(in_shape) if not _is_one(s)]
    outs = [(s, v) for s, v in zip(out_shape, ivars) if not _is_one(s)]
    index = [idx(0)] * len(in_shape)
    while ins and outs and in_shape[ins[-1]] == outs[-1][0]:
        index[ins.pop()] = outs.pop()[1]
    flat = idx(0)
    for s, v in outs:
        flat = E.add(E.mul(flat, s), v)
    for k, d in enumerate(reversed(ins)):
        pos = flat if k == len(ins) - 1 else E.floormod(flat, in_shape[d])
        index[d] = pos
        flat = E.floordiv(flat, in_shape[d])
    return tuple(index)


def _reshape(name: str):
    def legalize(call):
        b, (x,) = inputs(call)
        out = output(call)
        y = b.compute(out.values, lambda *i: x[unravel(x.shape, out.values, i)],
                      "T_" + name)
        return b.prim_func([y], name)
    return legalize


# Every view keeps the elements in row-major order: a reshape (TVM names the function so, but
# for expand_dims and squeeze).
for _op in sorted(ops_with("view")):
    rule(_op)(_reshape(_op if _op in ("expand_dims", "squeeze") else "reshape"))


@rule("permute_dims")
def _permute_dims(call):
    b, (x,) = inputs(call)
    out = output(call)
    axes = attrs(call).get("axes")
    axes = list(range(x.ndim))[::-1] if axes is None else [int(a) % x.ndim for a in axes]

    def value(*i):
        index = [None] * x.ndim
        for k, a in enumerate(axes):
            index[a] = i[k]
        return x[tuple(index)]
    y = b.compute(out.values, value, "T_transpose")
    return b.prim_func([y], "transpose")


def _along(i, axis: int, value) -> tuple:
    return tuple(value if k == axis else v for k, v in enumerate(i))


@rule("concat")
def _concat(call):
    b, xs = inputs(call)
    out = output(call)
    axis = attrs(call)["axis"]
    if axis is None:
        raise UnsupportedOpError("concat with axis=None has no legalization", op="concat")
    axis = int(axis) % out.ndim
    y = b.output(out.values, out.dtype, "T_concat")
    offset = idx(0)
    for x in xs:
        b.store(y, x.shape, lambda *i, o=offset: _along(i, axis, E.add(i[axis], o)),
                lambda *i, x=x: x[i], "T_concat")
        offset = E.add(offset, x.shape[axis])
    return b.prim_func([y], "concatenate")


@rule("stack")
def _stack(call):
    b, xs = inputs(call)
    out = output(call)
    axis = int(attrs(call)["axis"]) % out.ndim
    y = b.output(out.values, out.dtype, "T_stack")
    for k, x in enumerate(xs):
        b.store(y, x.shape, lambda *i, k=k: i[:axis] + (idx(k),) + i[axis:],
                lambda *i, x=x: x[i], "T_stack")
    return b.prim_func([y], "stack")


@rule("split")
def _split(call):
    b, (x,) = inputs(call)
    axis = int(attrs(call)["axis"]) % x.ndim
    ys, offset = [], idx(0)
    for out in outputs(call):
        ys.append(b.compute(out.values, lambda *i, o=offset: x[_along(i, axis, E.add(i[axis], o))],
                            "T_split_sections"))
        offset = E.add(offset, out.values[axis])
    return b.prim_func(ys, "split")


def _slice_begin(begin, dim, stride: int):
    """Python-slice start of ``dim`` for ``begin`` (negative counts from the end; clamped)."""
    if isinstance(begin, E.IntImm) and begin.value < 0:
        start = E.add(dim, begin.value)
        return E.max(start, 0 if stride > 0 else -1)
    return E.min(begin, dim if stride > 0 else E.sub(dim, 1))


@rule("strided_slice")
def _strided_slice(call):
    b, (x,) = inputs(call)
    out = output(call)
    axes, begins = shape_arg(call, 1), shape_arg(call, 2)
    strides = shape_arg(call, 4) if len(call.args) > 4 else None
    if axes is None or begins is None or not all(isinstance(a, E.IntImm) for a in axes):
        raise UnsupportedOpError("strided_slice needs constant axes and known begins",
                                 op="strided_slice")
    strides = strides or [idx(1)] * len(axes)
    if not all(isinstance(s, E.IntImm) for s in strides):
        raise UnsupportedOpError("strided_slice needs constant strides", op="strided_slice")
    spec = {int(a) % x.ndim: (_slice_begin(bg, x.shape[int(a) % x.ndim], s.value), s.value)
            for a, bg, s in zip(axes, begins, strides)}

    def value(*i):
        return x[tuple(E.add(spec[k][0], E.mul(v, spec[k][1])) if k in spec else v
                       for k, v in enumerate(i))]
    y = b.compute(out.values, value, "T_strided_slice_with_axes")
    return b.prim_func([y], "strided_slice")


@rule("take")
def _take(call):
    b, (x, indices) = inputs(call)
    out = output(call)
    a = attrs(call)
    axis = int(a.get("axis") if a.get("axis") is not None else 0) % x.ndim
    mode, n = a["mode"] or "fast", x.shape[axis]

    def value(*i):
        k = cast(indices[tuple(i[axis:axis + indices.ndim])], "int64")
        if mode == "wrap":
            k = E.floormod(k, n)
        elif mode == "clip":
            k = E.min(E.max(k, 0), E.sub(n, 1))
        else:  # fast: numpy's negative indices (the compiler clamps anything else)
            k = te.select(E.BinaryOp("LT", k, idx(0)), E.add(k, n), k)
        return x[i[:axis] + (k,) + i[axis + indices.ndim:]]
    y = b.compute(out.values, value, "T_take")
    return b.prim_func([y], "take")


@rule("broadcast_to")
def _broadcast_to(call):
    b, (x,) = inputs(call)
    out = output(call)
    y = b.compute(out.values, lambda *i: broadcast(x, i, out.values), "T_broadcast_to")
    return b.prim_func([y], "broadcast_to")


@rule("tile")
def _tile(call):
    b, (x,) = inputs(call)
    out = output(call)
    reps = [int(r) for r in attrs(call)["repeats"]]
    reps = ([1] * x.ndim + reps)[-x.ndim:] if x.ndim else []
    lead = out.ndim - x.ndim

    def value(*i):
        return x[tuple(i[lead + d] if reps[d] == 1 else E.floormod(i[lead + d], x.shape[d])
                       for d in range(x.ndim))]
    y = b.compute(out.values, value, "T_tile")
    return b.prim_func([y], "tile")


@rule("repeat")
def _repeat(call):
    b, (x,) = inputs(call)
    out = output(call)
    a = attrs(call)
    r = int(a["repeats"])
    if a.get("axis") is None:
        def value(i):
            return x[unravel(x.shape, (_size(x.shape),), (E.floordiv(i, r),))]
    else:
        axis = int(a["axis"]) % x.ndim

        def value(*i):
            return x[_along(i, axis, E.floordiv(i[axis], r))]
    y = b.compute(out.values, value, "T_repeat")
    return b.prim_func([y], "repeat")


def _size(shape):
    total = idx(1)
    for d in shape:
        total = E.mul(total, d)
    return total


@rule("flip")
def _flip(call):
    b, (x,) = inputs(call)
    out = output(call)
    axes = axes_of(attrs(call)["axis"], x.ndim)

    def value(*i):
        return x[tuple(E.sub(E.sub(x.shape[k], 1), v) if k in axes else v
                       for k, v in enumerate(i))]
    y = b.compute(out.values, value, "T_reverse_sequence")
    return b.prim_func([y], "flip")


def _reflect(p, dim):
    """numpy's "reflect" of an index ``p`` in [-(dim - 1), 2 (dim - 1)]."""
    a = te.select(E.BinaryOp("LT", p, idx(0)), E.sub(0, p), p)
    last = E.sub(dim, 1)
    return te.select(E.BinaryOp("GT", a, last), E.sub(E.mul(last, 2), a), a)


_PAD_INDEX = {
    "edge": lambda p, d: E.min(E.max(p, 0), E.sub(d, 1)),
    "replicate": lambda p, d: E.min(E.max(p, 0), E.sub(d, 1)),
    "reflect": _reflect,
    "circular": lambda p, d: E.floormod(p, d),
}


@rule("nn.pad")
def _pad(call):
    b, (x,) = inputs(call)
    out = output(call)
    a = attrs(call)
    widths = [int(w) for w in a["pad_width"]]
    before = widths[0::2]
    mode = a["pad_mode"] or "constant"
    fill = te.const(float(a["pad_value"] or 0.0), x.dtype)

    def value(*i):
        pos = [E.sub(v, before[k]) if before[k] else v for k, v in enumerate(i)]
        if mode != "constant":
            return x[tuple(_PAD_INDEX[mode](p, x.shape[k]) for k, p in enumerate(pos))]
        conds = [in_bounds(p, x.shape[k]) for k, p in enumerate(pos)
                 if before[k] or widths[2 * k + 1]]
        cond = all_of(conds)
        return x[tuple(pos)] if cond is None else te.if_then_else(cond, x[tuple(pos)], fill)
    if mode not in _PAD_INDEX and mode != "constant":
        raise UnsupportedOpError(f"pad mode {mode!r} has no legalization", op="nn.pad")
    y = b.compute(out.values, value, "PadInput")
    return b.prim_func([y], "pad")


# --------------------------------------------------------------------------- layout_transform

def _inverse(index_map, op: str = "layout_transform"):
    """Each input var as an expression of the output indices, from a map whose outputs are
    input vars, or ``v // f`` and ``v % f`` pairs (a split): the maps msc's frontends make."""
    names = [v.name for v in index_map.initial_indices]
    plain, div, mod = {}, {}, {}
    for k, e in enumerate(index_map.final_indices):
        if isinstance(e, E.Var) and e.name in names and e.name not in plain:
            plain[e.name] = k
        elif (isinstance(e, E.BinaryOp) and e.op in ("FloorDiv", "FloorMod")
              and isinstance(e.a, E.Var) and is_const(e.b) and e.b.value > 0):
            table = div if e.op == "FloorDiv" else mod
            if e.a.name in table:
                break
            table[e.a.name] = (k, e.b.value)
        else:
            break
    else:
        if all(_inverse_ok(v, plain, div, mod) for v in names):
            return plain, div, mod
    raise UnsupportedOpError(f"index map {index_map} is not a permutation with splits",
                             op=op, param="index_map",
                             hint="supported: lambda n, c, h, w: (n, c // 4, h, w, c % 4)")


def _inverse_ok(v: str, plain: dict, div: dict, mod: dict) -> bool:
    if v in plain:
        return v not in div and v not in mod
    return v in div and v in mod and div[v][1] == mod[v][1]


@rule("layout_transform")
def _layout_transform(call):
    """out[o] = x[inverse(o)] where o maps back inside x, else pad_value (padding)."""
    b, (x,) = inputs(call)
    out, a = output(call), attrs(call)
    index_map = a["index_map"]
    plain, div, mod = _inverse(index_map)
    pad = getattr(a.get("pad_value"), "value", a.get("pad_value"))
    pad = const(getattr(pad, "value", pad) or 0, out.dtype)

    def value(*o):
        at, conds = [], []
        for d, v in enumerate(index_map.initial_indices):
            if v.name in plain:
                at.append(o[plain[v.name]])
                continue
            (kd, f), km = div[v.name], mod[v.name][0]
            pos = E.add(E.mul(o[kd], f), o[km])
            at.append(pos)
            if not (is_const(x.shape[d]) and x.shape[d].value % f == 0):
                conds.append(E.BinaryOp("LT", pos, idx(x.shape[d])))
        cond = all_of(conds)
        return x[tuple(at)] if cond is None else te.if_then_else(cond, x[tuple(at)], pad)
    y = b.compute(out.values, value, "T_layout_trans")
    return b.prim_func([y], "te_layout_transform")


# ------------------------------------------------------------------------------- meshgrid

@rule("meshgrid")
def _meshgrid(call):
    """out_k[i...] = x_k[i[axis_k]]; "xy" indexing swaps the first two axes."""
    b, xs = inputs(call)
    outs = outputs(call)
    swap = attrs(call)["indexing"] == "xy" and len(xs) > 1
    ys = []
    for k, (x, o) in enumerate(zip(xs, outs)):
        axis = {0: 1, 1: 0}.get(k, k) if swap else k
        ys.append(b.compute(o.values, lambda *i, x=x, axis=axis, dt=o.dtype: cast(
            x[i[axis]], dt), "T_meshgrid", dtype=o.dtype))
    return b.prim_func(ys, "meshgrid")


# ------------------------------------------------------------------------ pixel shuffle

@rule("nn.pixel_shuffle")
def _pixel_shuffle(call):
    """out[.., c, h * r + i, w * r + j] = x[.., c * r * r + i * r + j, h, w]."""
    b, (x,) = inputs(call)
    out = output(call)
    r = int(attrs(call)["upscale_factor"])

    def value(*i):
        *lead, c, h, w = i
        ch = E.add(E.add(E.mul(c, r * r), E.mul(E.floormod(h, r), r)), E.floormod(w, r))
        return x[(*lead, ch, E.floordiv(h, r), E.floordiv(w, r))]
    y = b.compute(out.values, value, "T_pixel_shuffle")
    return b.prim_func([y], "pixel_shuffle")

