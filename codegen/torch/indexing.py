"""Converters of the torch rows for indexing ops (slices, gathers, scatters, one_hot, index
tensors, layout_transform). The table itself is ``torch.table.ROWS``."""

from __future__ import annotations

import ast

from ..attrs import index_map
from ..naming import literal
from .nn import arg_value, axes_of, axis_of, call, tuple_of


def convert_strided_slice(ctx) -> str:
    x = ctx.in_tensor(0)
    values = [arg_value(ctx, n) for n in ("axes", "begin", "end", "strides")]
    axes, begin, end = ([v] if isinstance(v, (int, float)) else list(v) for v in values[:3])
    strides = values[3] if values[3] is not None else [1] * len(axes)
    strides = [strides] if isinstance(strides, (int, float)) else list(strides)
    index, reversed_axes = [":"] * x.ndim, []
    for a, b, e, s in zip(axes_of(axes, x.ndim), begin, end, strides):
        if s > 0:
            index[a] = f"{int(b)}:{int(e)}" + (f":{int(s)}" if s != 1 else "")
        else:
            picks = list(range(*slice(int(b), int(e), int(s)).indices(x.shape[a])))
            reversed_axes.append((a, picks))
    source = f"{ctx.input(0)}[{', '.join(index)}]" if index != [":"] * x.ndim else ctx.input(0)
    for a, picks in reversed_axes:
        if x.shape[a] < 0:
            raise ctx.fail("a negative stride needs a static dim")
        source = f"{source}.index_select({a}, torch.tensor({literal(picks)}))"
    return source


def convert_take(ctx) -> str:
    x, index = ctx.in_tensor(0), f"{ctx.input(1)}.long()"
    axis, mode = ctx.attr("axis"), ctx.attr("mode")
    size = f"{ctx.input(0)}.numel()" if axis is None else \
        f"{ctx.input(0)}.shape[{axis_of(axis, x.ndim)}]"
    if mode == "clip":
        index = f"{index}.clamp(0, {size} - 1)"
    elif mode == "wrap":
        index = f"({index} % {size})"
    if axis is None:
        return call("torch.take", ctx.input(0), index)
    return f"{ctx.input(0)}[{':, ' * axis_of(axis, x.ndim)}{index}]"


def convert_reverse_sequence(ctx) -> str:
    """Reverse the first seq_lengths[b] items along seq_axis: gather with the index
    ``l - 1 - i`` where ``i < l``, else ``i``."""
    x, ndim = ctx.input(0), ctx.in_tensor(0).ndim
    seq, batch = axis_of(ctx.attr("seq_axis"), ndim), axis_of(ctx.attr("batch_axis"), ndim)
    at_seq, at_batch = ([-1 if a == axis else 1 for a in range(ndim)] for axis in (seq, batch))
    index = f"torch.arange({x}.shape[{seq}]).view({tuple_of(at_seq)})"
    lengths = f"{ctx.input(1)}.long().view({tuple_of(at_batch)})"
    picks = f"torch.where({index} < {lengths}, {lengths} - 1 - {index}, {index})"
    return call("torch.gather", x, seq, f"{picks}.expand_as({x})")


def _split_axis(e, names: list[str]):
    """A final index expr as (initial axis, part): ``n`` -> (i, None), ``c // 4`` ->
    (i, ("outer", 4)), ``c % 4`` -> (i, ("inner", 4)); None for any other form."""
    if isinstance(e, ast.Name):
        return names.index(e.id), None
    parts = {ast.FloorDiv: "outer", ast.Mod: "inner"}
    if isinstance(e, ast.BinOp) and type(e.op) in parts and isinstance(e.left, ast.Name) and \
            isinstance(e.right, ast.Constant) and e.right.value > 0:
        return names.index(e.left.id), (parts[type(e.op)], e.right.value)
    return None


def convert_layout_transform(ctx) -> str:
    """Permutation / split index maps (``(n, h, w, c)``, ``(n, c // 4, h, w, c % 4)``) as
    pad + reshape + permute; any other map is refused."""
    text = ctx.node.attrs.get("index_map", "")
    mapping = index_map(text)
    names = [a.arg for a in mapping.args.args]
    finals = [_split_axis(e, names) for e in mapping.body.elts]
    seen: dict[int, list] = {}
    for i, final in enumerate(finals):
        if final is None:
            raise ctx.fail(f"index map {text}: {ast.unparse(mapping.body.elts[i])} is not a var, "
                           "var // k or var % k (only permutations and splits lower to torch)")
        seen.setdefault(final[0], []).append(final[1])
    for axis in range(len(names)):
        parts = seen.get(axis, [])
        whole = parts == [None]
        split = sorted(p[0] for p in parts if p) == ["inner", "outer"] and None not in parts \
            and len({p[1] for p in parts}) == 1
        if not (whole or split):
            raise ctx.fail(f"index map {text}: {names[axis]} must appear once, or once as "
                           f"{names[axis]} // k and once as {names[axis]} % k")
    x, data = ctx.input(0), ctx.in_tensor(0)
    pad = ctx.attr("pad_value")
    pads, shape, position = [0] * (2 * data.ndim), [], {}
    for axis in range(data.ndim):
        parts = seen[axis]
        if parts == [None]:
            position[(axis, None)] = len(shape)
            shape.append(ctx.dim(data, axis))
            continue
        factor, dim = parts[0][1], data.shape[axis]
        if dim < 0:
            raise ctx.fail(f"index map {text}: splitting dim {axis} needs a static size")
        outer = -(-dim // factor)
        pads[2 * (data.ndim - 1 - axis) + 1] = outer * factor - dim
        position[(axis, ("outer", factor))] = len(shape)
        position[(axis, ("inner", factor))] = len(shape) + 1
        shape += [outer, factor]
    source = x
    if any(pads):
        last = max(i for i, p in enumerate(pads) if p) + 1
        kw = {"value": literal(pad)} if pad else {}
        source = call("F.pad", source, tuple_of(pads[:last]), **kw)
    if len(shape) != data.ndim:
        source = f"{source}.reshape({', '.join(str(d) for d in shape)})"
    axes = [position[f] for f in finals]
    return source if axes == list(range(len(axes))) else f"{source}.permute({tuple_of(axes)})"


def convert_gather_nd(ctx) -> str:
    if ctx.attr("batch_dims"):
        raise ctx.fail("batch_dims > 0")
    return f"{ctx.input(0)}[tuple({ctx.input(1)}.long().movedim(-1, 0))]"


_SCATTER_REDUCE = {"add": "sum", "mul": "prod", "mean": "mean", "min": "amin", "max": "amax"}


def convert_scatter_elements(ctx) -> str:
    data, index, updates = ctx.inputs
    axis, reduction = ctx.attr("axis"), ctx.attr("reduction")
    if reduction == "update":
        return call(f"{data}.scatter", axis, f"{index}.long()", updates)
    if reduction not in _SCATTER_REDUCE:
        raise ctx.fail(f"reduction {reduction!r}")
    return call(f"{data}.scatter_reduce", axis, f"{index}.long()", updates,
                 literal(_SCATTER_REDUCE[reduction]))


def convert_scatter_nd(ctx) -> str:
    data, index, updates = ctx.inputs
    reduction = ctx.attr("reduction")
    if reduction not in ("update", "add"):
        raise ctx.fail(f"reduction {reduction!r}")
    return call(f"{data}.index_put", f"tuple({index}.long().movedim(-1, 0))", updates,
                 accumulate=literal(reduction == "add"))


def convert_one_hot(ctx) -> str:
    on, off = arg_value(ctx, "on_value"), arg_value(ctx, "off_value")
    hot = call("F.one_hot", f"{ctx.input(0)}.long()", ctx.attr("depth"))
    out = f"({hot} * {literal(on - off)} + {literal(off)}).to({ctx.dtype()})"
    axis = axis_of(ctx.attr("axis"), ctx.out.ndim)
    return out if axis == ctx.out.ndim - 1 else f"{out}.movedim(-1, {axis})"


def convert_index_tensor(ctx) -> str:
    data, *indices = ctx.inputs
    return f"{data}[{', '.join(f'{i}.long()' for i in indices)}]"


def convert_index_put(ctx) -> str:
    data, *indices, values = ctx.inputs
    index = "(" + "".join(f"{i}.long(), " for i in indices).rstrip(" ") + ")"
    return call(f"{data}.index_put", index, values,
                 accumulate=literal(ctx.attr("accumulate")))


def convert_index_copy(ctx) -> str:
    data, index, source = ctx.inputs
    return call("torch.index_copy", data, ctx.attr("axis"), f"{index}.long()", source)


def convert_slice_scatter(ctx) -> str:
    x, src = ctx.inputs[:2]
    start, end, step = (arg_value(ctx, n) for n in ("start", "end", "step"))
    return call("torch.slice_scatter", x, src, dim=ctx.attr("axis"), start=literal(start),
                 end=literal(end), step=literal(step))
